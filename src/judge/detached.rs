//! A sandboxed run in a child `judge-runner sandbox` process instead of a thread
//! of this one. Used for both programs of an interactive test, which must run at
//! the same time: two sandboxes started from two threads of one process can
//! deadlock in the sandbox's clone path (sandbox M1: the program's process hangs
//! on a futex before exec; reported to the sandbox's owner in
//! /work/briefs/requests.md). Here this process's threads only wait for child
//! processes, and each child starts one sandbox from a single thread.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::sandbox;

use super::boxed::{BoxRun, Stream};
use super::error::JudgeError;

/// How the detached run is set up: which binary, box, CPU, cgroup parent.
pub(crate) struct Detached<'a> {
    pub exe: &'a Path,
    pub box_id: u32,
    pub cpu: Option<u32>,
    pub cgroup_parent: &'a str,
    pub cancel: &'a sandbox::Cancel,
}

fn stream_arg(cmd: &mut Command, flag: &str, stream: Stream, fd_path: &str, stdin: bool) {
    match stream {
        Stream::Null => {
            cmd.args([flag, "/dev/null"]);
        }
        Stream::Path(p) => {
            cmd.arg(flag).arg(p);
        }
        Stream::Fd(fd) => {
            cmd.args([flag, fd_path]);
            let io = Stdio::from(fd);
            if stdin {
                cmd.stdin(io);
            } else {
                cmd.stdout(io);
            }
        }
    }
}

fn failed(what: &str, message: String) -> JudgeError {
    JudgeError::Sandbox {
        what: what.to_string(),
        message,
    }
}

impl Detached<'_> {
    /// The `judge-runner sandbox` command line of `run`, reporting to `report`.
    fn command(&self, run: BoxRun<'_>, report: &Path) -> Command {
        let mut cmd = Command::new(self.exe);
        let limits = run.limits;
        cmd.arg("sandbox")
            .args(["--time", &limits.time.to_string()])
            .args(["--wall-time", &limits.wall.to_string()])
            .args(["--memory", &limits.memory_bytes.to_string()])
            .args(["--processes", &limits.processes.to_string()])
            .args(["--output", &limits.output_bytes.to_string()])
            .args(["--open-files", "256"])
            .arg("--box")
            .arg(run.box_dir)
            .args(["--box-id", &self.box_id.to_string()])
            .args(["--cgroup-parent", self.cgroup_parent])
            .arg("--report")
            .arg(report)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(cpu) = self.cpu {
            cmd.args(["--cpu", &cpu.to_string()]);
        }
        for bind in &run.binds {
            let rw = if bind.writable { ":rw" } else { "" };
            cmd.arg("--bind").arg(format!(
                "{}:{}{rw}",
                bind.host.display(),
                bind.inside.display()
            ));
        }
        for (name, value) in &run.env {
            cmd.arg("--env").arg(format!("{name}={value}"));
        }
        stream_arg(&mut cmd, "--stdin", run.stdin, "/dev/stdin", true);
        stream_arg(&mut cmd, "--stdout", run.stdout, "/dev/stdout", false);
        stream_arg(&mut cmd, "--stderr", run.stderr, "/dev/null", false);
        cmd.arg("--").args(&run.argv);
        cmd
    }

    /// Runs `run` through `judge-runner sandbox --report`, answering its report
    /// and when the child process ended.
    pub fn run(
        &self,
        what: &str,
        run: BoxRun<'_>,
    ) -> Result<(sandbox::Report, Instant), JudgeError> {
        let report_path: PathBuf = run.box_dir.with_extension("report.json");
        let mut cmd = self.command(run, &report_path);
        let mut child = cmd
            .spawn()
            .map_err(|e| failed(what, format!("cannot start {}: {e}", self.exe.display())))?;
        // The child holds the pipe ends now; ours were moved into `cmd`.
        drop(cmd);
        let status = loop {
            if let Some(status) = child.try_wait().map_err(|e| failed(what, e.to_string()))? {
                break status;
            }
            if self.cancel.is_cancelled() {
                // SIGTERM lets the supervisor kill its run and remove its cgroup.
                let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
                let _ = child.wait();
                return Err(JudgeError::Cancelled);
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        let ended = Instant::now();
        let stderr = child
            .stderr
            .take()
            .map(|mut s| {
                let mut text = String::new();
                let _ = std::io::Read::read_to_string(&mut s, &mut text);
                text
            })
            .unwrap_or_default();
        let text = std::fs::read_to_string(&report_path).map_err(|e| {
            failed(
                what,
                format!(
                    "no report from the sandbox ({status}): {e}; {}",
                    stderr.trim()
                ),
            )
        })?;
        let _ = std::fs::remove_file(&report_path);
        let report: sandbox::Report = serde_json::from_str(&text)
            .map_err(|e| failed(what, format!("unreadable sandbox report {text:?}: {e}")))?;
        if !status.success() {
            return Err(failed(
                what,
                format!("{status}: {} {}", report.message, stderr.trim()),
            ));
        }
        Ok((report, ended))
    }
}
