//! A throw-away PostgreSQL cluster the harness owns, so that it can restart it
//! with `pg_ctl restart -m immediate` (a crash: no checkpoint, every connection
//! cut) while two Servers use it.

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Postgres {
    bindir: PathBuf,
    dir: tempfile::TempDir,
    pub port: u16,
}

/// The newest `/usr/lib/postgresql/<v>/bin` with `initdb`, if any.
fn bindir() -> Option<PathBuf> {
    let mut dirs: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    dirs.sort();
    dirs.pop().map(|(_, b)| b)
}

fn as_postgres(cmd: &str) -> bool {
    // From `/`: the postgres user cannot enter a clone under a mode-0700 directory
    // (root's home), and its shell would complain about the working directory.
    Command::new("su")
        .args(["-s", "/bin/sh", "postgres", "-c", cmd])
        .current_dir("/")
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

impl Postgres {
    /// Starts a cluster on a free port (trust auth on 127.0.0.1, fsync off), with a
    /// database `judge`; `None` where PostgreSQL or its `postgres` user is missing.
    pub fn start() -> Option<Postgres> {
        let bindir = bindir()?;
        if Command::new("id")
            .arg("postgres")
            .output()
            .ok()?
            .status
            .code()
            != Some(0)
        {
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("chaos-pg-")
            .tempdir()
            .ok()?;
        Command::new("chown")
            .args(["postgres:"])
            .arg(dir.path())
            .status()
            .ok()?;
        let port = super::e2e_common::free_port();
        let pg = Postgres { bindir, dir, port };
        assert!(
            as_postgres(&format!(
                "'{}' -D '{}' -A trust -U postgres --no-sync -E UTF8 >/dev/null",
                pg.bin("initdb").display(),
                pg.data().display()
            )),
            "initdb failed"
        );
        assert!(pg.ctl("start -w -t 60"), "pg_ctl start failed");
        assert!(
            as_postgres(&format!(
                "'{}' -h 127.0.0.1 -p {port} -U postgres judge",
                pg.bin("createdb").display()
            )),
            "createdb failed"
        );
        Some(pg)
    }

    fn bin(&self, name: &str) -> PathBuf {
        self.bindir.join(name)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn ctl(&self, what: &str) -> bool {
        let dir: &Path = self.dir.path();
        as_postgres(&format!(
            "'{}' -D '{}' -l '{}/log' -o \"-k '{}' -h 127.0.0.1 -p {} -c fsync=off -c max_connections=200\" {what} >/dev/null",
            self.bin("pg_ctl").display(),
            self.data().display(),
            dir.display(),
            dir.display(),
            self.port
        ))
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/judge", self.port)
    }

    /// `pg_ctl restart -m immediate`: the crash-like restart of the issue.
    pub fn restart_immediate(&self) -> bool {
        self.ctl("restart -m immediate -w -t 60")
    }

    /// `pg_ctl stop -m immediate` (the first half of a longer outage).
    pub fn stop_immediate(&self) -> bool {
        self.ctl("stop -m immediate -w -t 60")
    }

    pub fn start_again(&self) -> bool {
        self.ctl("start -w -t 60")
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.ctl("stop -m immediate -w -t 30");
    }
}
