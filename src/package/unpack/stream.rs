//! The decompressed bytes of a `.tar.gz`, produced on a thread of their own so
//! inflating and writing files overlap (as `tar -xzf` does with its `gzip` child),
//! and cut off the moment they pass a cap: a gzip bomb costs at most the cap.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use flate2::read::MultiGzDecoder;

const CHUNK: usize = 256 * 1024;
/// Chunks in flight between the inflating thread and the reader.
const DEPTH: usize = 8;

/// Marks the error a reader returns when the cap was crossed.
#[derive(Debug)]
struct CapCrossed;

impl std::fmt::Display for CapCrossed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("decompressed stream exceeds the unpack limit")
    }
}

impl std::error::Error for CapCrossed {}

/// `Read` over the inflated stream of one archive file.
pub(super) struct Inflated {
    chunks: Option<Receiver<io::Result<Vec<u8>>>>,
    spare: SyncSender<Vec<u8>>,
    current: Vec<u8>,
    offset: usize,
    crossed: Arc<AtomicBool>,
    worker: Option<JoinHandle<()>>,
}

impl Inflated {
    /// Starts inflating `path`; at most `cap` decompressed bytes are ever produced.
    pub(super) fn open(path: &Path, cap: u64) -> io::Result<Inflated> {
        let file = File::open(path)?;
        let (chunk_tx, chunk_rx) = sync_channel(DEPTH);
        let (spare_tx, spare_rx) = sync_channel(DEPTH + 2);
        let crossed = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&crossed);
        let worker = std::thread::Builder::new()
            .name("inflate".into())
            .spawn(move || inflate(file, cap, &chunk_tx, &spare_rx, &flag))?;
        Ok(Inflated {
            chunks: Some(chunk_rx),
            spare: spare_tx,
            current: Vec::new(),
            offset: 0,
            crossed,
            worker: Some(worker),
        })
    }

    /// Whether the stream was cut off at the cap (then every later read fails).
    pub(super) fn cap_crossed(&self) -> bool {
        self.crossed.load(Ordering::Relaxed)
    }
}

fn inflate(
    file: File,
    cap: u64,
    chunks: &SyncSender<io::Result<Vec<u8>>>,
    spare: &Receiver<Vec<u8>>,
    crossed: &AtomicBool,
) {
    let mut decoder = MultiGzDecoder::new(BufReader::with_capacity(CHUNK, file));
    let mut produced: u64 = 0;
    loop {
        let mut buf = spare.try_recv().unwrap_or_default();
        buf.resize(CHUNK, 0);
        let filled = match fill(&mut decoder, &mut buf) {
            Ok(n) => n,
            Err(err) => {
                let _ = chunks.send(Err(err));
                return;
            }
        };
        buf.truncate(filled);
        produced += filled as u64;
        if produced > cap {
            crossed.store(true, Ordering::Relaxed);
            let _ = chunks.send(Err(io::Error::other(CapCrossed)));
            return;
        }
        let done = filled == 0;
        if chunks.send(Ok(buf)).is_err() || done {
            return;
        }
    }
}

/// Reads until `buf` is full or the stream ends.
fn fill(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(filled)
}

impl Read for Inflated {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.offset == self.current.len() {
            let Some(chunks) = &self.chunks else {
                return Ok(0);
            };
            let next = match chunks.recv() {
                Ok(next) => next?,
                // The worker ended after sending the empty end-of-stream chunk.
                Err(_) => return Ok(0),
            };
            if next.is_empty() {
                self.chunks = None;
                return Ok(0);
            }
            let used = std::mem::replace(&mut self.current, next);
            let _ = self.spare.try_send(used);
            self.offset = 0;
        }
        let n = out.len().min(self.current.len() - self.offset);
        out[..n].copy_from_slice(&self.current[self.offset..self.offset + n]);
        self.offset += n;
        Ok(n)
    }
}

impl Drop for Inflated {
    fn drop(&mut self) {
        // Closing the channel makes a blocked worker's next send fail, so it ends.
        self.chunks = None;
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use flate2::Compression;
    use flate2::write::GzEncoder;
    use std::io::Write;

    fn gz_file(data: &[u8]) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        let mut enc = GzEncoder::new(file.reopen().unwrap(), Compression::fast());
        enc.write_all(data).unwrap();
        enc.finish().unwrap();
        file
    }

    #[test]
    fn inflates_everything_under_the_cap() {
        let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let file = gz_file(&data);
        let mut out = Vec::new();
        let mut reader = Inflated::open(file.path(), 1_000_000).unwrap();
        reader.read_to_end(&mut out).unwrap();
        assert_eq!(out, data);
        assert!(!reader.cap_crossed());
    }

    #[test]
    fn stops_at_the_cap() {
        let file = gz_file(&vec![0u8; 4_000_000]);
        let mut out = Vec::new();
        let mut reader = Inflated::open(file.path(), 1_000_000).unwrap();
        assert!(reader.read_to_end(&mut out).is_err());
        assert!(reader.cap_crossed());
        assert!(out.len() <= 1_000_000);
    }
}
