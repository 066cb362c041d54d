//! A sandboxed program's output stream read through a pipe: the first bytes are
//! kept, the rest is read and discarded (contract §3, 2026-12: a submission's
//! stderr is never a verdict; a compiler's output is kept to 64 KiB). A pipe is
//! not a file, so `RLIMIT_FSIZE` (the output limit) never stops a write to it:
//! a program writing forever there runs into its time limit instead.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::sync::mpsc;
use std::time::Duration;

use nix::fcntl::OFlag;

use super::boxed::Stream;
use super::error::JudgeError;

/// How much of a stream is kept.
pub(crate) const KEEP: usize = 64 * 1024;
/// How long to wait for the pipe's end of file once the run is over. Every
/// process of a run is dead when `sandbox::run` returns and nothing else holds
/// the write end (it is close-on-exec, and the sandbox closes every other
/// descriptor before the program starts), so this only bounds a judge bug.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// What a stream carried.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Captured {
    /// The first `KEEP` bytes.
    pub kept: Vec<u8>,
    /// Every byte written, the discarded ones included.
    pub total: u64,
}

impl Captured {
    /// The kept bytes as (lossy) UTF-8, at most `KEEP` bytes long.
    pub fn text(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.kept).into_owned();
        if text.len() > KEEP {
            let mut end = KEEP;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
        }
        text
    }

    pub fn truncated(&self) -> bool {
        self.total > self.kept.len() as u64
    }
}

/// The reading side of a capture: a thread that reads until end of file.
#[derive(Debug)]
pub(crate) struct Capture {
    done: mpsc::Receiver<std::io::Result<Captured>>,
}

fn pipe_error(e: impl std::fmt::Display) -> JudgeError {
    JudgeError::RunFailed {
        what: "creating an output pipe".to_string(),
        message: e.to_string(),
    }
}

/// A pipe whose write end is handed to a run, read by a thread of its own.
/// `writers` write ends are returned (stdout and stderr of a compiler share one
/// pipe, so its log keeps their order).
pub(crate) fn start(writers: usize) -> Result<(Vec<Stream>, Capture), JudgeError> {
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(pipe_error)?;
    let mut ends = Vec::with_capacity(writers);
    for _ in 1..writers {
        ends.push(Stream::Fd(write.try_clone().map_err(pipe_error)?));
    }
    ends.push(Stream::Fd(write));
    let (tx, done) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("judge-capture".to_string())
        .spawn(move || {
            // It wakes when the run ends, and the test waits for it.
            crate::sandbox::prefer_short_slice();
            let _ = tx.send(read_all(read));
        })
        .map_err(pipe_error)?;
    Ok((ends, Capture { done }))
}

fn read_all(read: OwnedFd) -> std::io::Result<Captured> {
    let mut file = std::fs::File::from(read);
    let mut captured = Captured::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => return Ok(captured),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let room = KEEP.saturating_sub(captured.kept.len()).min(n);
        captured.kept.extend_from_slice(&buf[..room]);
        captured.total += n as u64;
    }
}

impl Capture {
    /// What the stream carried; call after the run has returned.
    pub fn finish(self) -> Result<Captured, JudgeError> {
        match self.done.recv_timeout(DRAIN_GRACE) {
            Ok(Ok(captured)) => Ok(captured),
            Ok(Err(e)) => Err(JudgeError::RunFailed {
                what: "reading a program's output pipe".to_string(),
                message: e.to_string(),
            }),
            Err(_) => Err(JudgeError::RunFailed {
                what: "reading a program's output pipe".to_string(),
                message: format!(
                    "no end of file {}s after the run ended: a process outside the run holds its write end",
                    DRAIN_GRACE.as_secs()
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::io::Write;

    #[test]
    fn keeps_the_first_bytes_and_counts_the_rest() {
        let (mut ends, capture) = start(1).unwrap();
        let Some(Stream::Fd(fd)) = ends.pop() else {
            panic!("no fd")
        };
        let mut w = std::fs::File::from(fd);
        let chunk = vec![b'x'; 10_000];
        for _ in 0..20 {
            w.write_all(&chunk).unwrap();
        }
        drop(w);
        let c = capture.finish().unwrap();
        assert_eq!(c.kept.len(), KEEP);
        assert_eq!(c.total, 200_000);
        assert!(c.truncated());
        assert_eq!(c.text().len(), KEEP);
    }

    #[test]
    fn lossy_text_stays_within_the_cap() {
        let c = Captured {
            kept: vec![0xff; KEEP],
            total: KEEP as u64,
        };
        assert!(c.text().len() <= KEEP);
        assert!(!c.truncated());
    }
}
