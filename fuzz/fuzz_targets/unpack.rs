//! The tar.gz unpacker with its refusal rules as assertions: the input is a tar
//! stream (gzipped here), unpacked with small limits from its first two bytes.
//! Accepted: everything is inside the destination, no link resolves outside it,
//! the limits hold and the summary is what is on disk. Refused: nothing is left
//! (no destination, no staging directory). Never anything beside it.
#![no_main]

use std::collections::HashSet;
use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use judge_runner::package::{UnpackLimits, unpack};
use libfuzzer_sys::fuzz_target;

/// Resolve `link` (inside `root`) lexically, then through the links it meets,
/// as the kernel would; `None` once a step leaves `root`.
fn inside(root: &Path, path: &Path, hops: u32) -> bool {
    if hops > 40 {
        return true; // a loop: the kernel gives up (ELOOP), nothing is reached
    }
    match fs::read_link(path) {
        Err(_) => true,
        Ok(target) => {
            if target.is_absolute() {
                return false;
            }
            let mut at: PathBuf = path.parent().map_or_else(PathBuf::new, Path::to_path_buf);
            for c in target.components() {
                match c {
                    Component::ParentDir => {
                        if at == root || !at.pop() || !at.starts_with(root) {
                            return false;
                        }
                    }
                    Component::Normal(n) => {
                        at.push(n);
                        if !inside(root, &at, hops + 1) {
                            return false;
                        }
                        if let Ok(real) = fs::canonicalize(&at) {
                            if !real.starts_with(root) {
                                return false;
                            }
                            at = real;
                        }
                    }
                    _ => {}
                }
            }
            true
        }
    }
}

fn walk(root: &Path, dir: &Path, entries: &mut u64, bytes: &mut u64, inodes: &mut HashSet<u64>) {
    let Ok(list) = fs::read_dir(dir) else {
        panic!(
            "accepted tree has an unreadable directory {}",
            dir.display()
        );
    };
    for e in list.flatten() {
        let path = e.path();
        *entries += 1;
        let meta = fs::symlink_metadata(&path).expect("stat");
        if meta.file_type().is_symlink() {
            assert!(
                inside(root, &path, 0),
                "{} resolves outside",
                path.display()
            );
        } else if meta.is_dir() {
            walk(root, &path, entries, bytes, inodes);
        } else {
            assert!(
                meta.is_file(),
                "{} is not a file, dir or link",
                path.display()
            );
            if inodes.insert(meta.ino()) {
                *bytes += meta.len();
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let (limits, tar) = match data {
        [a, b, rest @ ..] => (
            UnpackLimits {
                max_entries: 1 + u64::from(*a % 64),
                max_unpacked: u64::from(*b) * 256,
            },
            rest,
        ),
        _ => return,
    };
    let work = tempfile::tempdir().expect("tempdir");
    let archive = work.path().join("p.tar.gz");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(tar).expect("gzip");
    fs::write(&archive, gz.finish().expect("gzip")).expect("write");
    let dest = work.path().join("dest");
    let result = unpack(&archive, &dest, &limits);
    let mut beside: Vec<String> = fs::read_dir(work.path())
        .expect("list")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    beside.sort();
    match result {
        Ok(summary) => {
            assert_eq!(beside, ["dest", "p.tar.gz"], "left beside the destination");
            let root = fs::canonicalize(&dest).expect("canonical dest");
            let (mut entries, mut bytes, mut inodes) = (0, 0, HashSet::new());
            walk(&root, &root, &mut entries, &mut bytes, &mut inodes);
            assert!(
                entries <= limits.max_entries,
                "{entries} entries > {limits:?}"
            );
            assert!(bytes <= limits.max_unpacked, "{bytes} bytes > {limits:?}");
            assert!(summary.entries <= limits.max_entries, "{summary:?}");
            assert!(summary.bytes <= limits.max_unpacked, "{summary:?}");
            assert_eq!(summary.bytes, bytes, "summary bytes vs disk");
        }
        Err(_) => assert_eq!(beside, ["p.tar.gz"], "a refused archive left something"),
    }
});
