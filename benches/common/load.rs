//! Background load for the "loaded" variants: one busy loop per CPU, as
//! separate processes (`sh -c 'while :; do :; done'`) that the benchmark kills
//! when the guard drops. Not niced: the point is a host where every core is
//! busy, as a contest host judging on every slot is.

use std::process::{Child, Command, Stdio};

pub struct Load {
    hogs: Vec<Child>,
}

impl Load {
    /// One busy loop per CPU. `cgroup_procs`: a `cgroup.procs` file to move
    /// each loop into (out of the benchmark's own cgroup, so that its CPU meter
    /// does not count them); `None` leaves them where they start.
    pub fn start(cgroup_procs: Option<&std::path::Path>) -> Load {
        let n = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        // A process inherits its parent's scheduler slice; the loops stand for
        // other programs, so they start with the host's default.
        judge_runner::sandbox::default_slice();
        let hogs = (0..n)
            .map(|_| {
                let child = Command::new("/bin/sh")
                    .args(["-c", "while :; do :; done"])
                    .stdin(Stdio::null())
                    .spawn()
                    .expect("start a busy loop");
                if let Some(procs) = cgroup_procs {
                    std::fs::write(procs, child.id().to_string()).expect("move a busy loop");
                }
                child
            })
            .collect();
        // Let the scheduler see them running before anything is measured.
        std::thread::sleep(std::time::Duration::from_millis(200));
        Load { hogs }
    }

    pub fn cpus(&self) -> usize {
        self.hogs.len()
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for h in &mut self.hogs {
            let _ = h.kill();
            let _ = h.wait();
        }
    }
}
