//! Small file systems for the tests of a full disk: a tmpfs mounted for a test
//! (unmounted when dropped, pass or fail) and a file that fills one to the last
//! byte.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of `size` (`"4m"`) mounted at a directory; unmounted on drop.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    pub fn mount(at: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        let status = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(at)
            .status()
            .unwrap();
        assert!(status.success(), "mount a tmpfs at {}", at.display());
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Writes into `file` until its file system has not one byte left (1 MiB
/// writes, then 512 bytes, then single bytes).
pub fn fill(file: &Path) {
    use std::io::Write;
    let Ok(mut f) = std::fs::File::create(file) else {
        return;
    };
    let big = vec![0u8; 1 << 20];
    while f.write_all(&big).is_ok() {}
    let small = [0u8; 512];
    while f.write_all(&small).is_ok() {}
    while f.write_all(&small[..1]).is_ok() {}
}
