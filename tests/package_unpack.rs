//! Hostile archives, built entry by entry: each is refused with a clear error,
//! the destination never appears, no staging directory is left, and nothing is
//! written outside. Benign twins of the tricky cases unpack fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod package_common;

use std::path::{Path, PathBuf};

use judge_runner::package::{self, PackageError, UnpackLimits, UnpackRefusal};
use package_common::{Item, gzip, tar_gz_bytes, tree, write_tar};
use tar::EntryType;

/// A sandbox for one unpack: `base/outside/` must stay empty, `base/dest` must
/// appear only on success, and `base` must hold nothing else afterwards.
struct Scene {
    base: tempfile::TempDir,
}

impl Scene {
    fn new() -> Scene {
        let base = tempfile::tempdir().unwrap();
        std::fs::create_dir(base.path().join("outside")).unwrap();
        std::fs::create_dir(base.path().join("work")).unwrap();
        Scene { base }
    }

    fn outside(&self) -> PathBuf {
        self.base.path().join("outside")
    }

    fn dest(&self) -> PathBuf {
        self.base.path().join("work/dest")
    }

    fn unpack_bytes(
        &self,
        gz: &[u8],
        limits: &UnpackLimits,
    ) -> Result<package::UnpackSummary, PackageError> {
        let archive = self.base.path().join("archive.tar.gz");
        std::fs::write(&archive, gz).unwrap();
        package::unpack(&archive, &self.dest(), limits)
    }

    fn unpack(&self, items: &[Item<'_>]) -> Result<package::UnpackSummary, PackageError> {
        self.unpack_bytes(&tar_gz_bytes(items), &UnpackLimits::default())
    }

    /// Asserts a refusal left no trace.
    fn refused(&self, result: Result<package::UnpackSummary, PackageError>) -> UnpackRefusal {
        let err = result.expect_err("archive must be refused");
        assert_eq!(err.code(), "package.invalid", "{err}");
        assert!(!err.retryable());
        assert!(
            tree(&self.outside()).is_empty(),
            "written outside: {:?}",
            tree(&self.outside())
        );
        let work = tree(&self.base.path().join("work"));
        assert!(work.is_empty(), "left behind: {work:?}");
        assert!(!err.to_string().is_empty());
        match err {
            PackageError::Unsafe { refusal, .. } => refusal,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}

fn outside_path(scene: &Scene, name: &str) -> String {
    scene.outside().join(name).display().to_string()
}

#[test]
fn benign_archive_unpacks_with_links_inside() {
    let scene = Scene::new();
    let summary = scene
        .unpack(&[
            Item::Dir("./p/"),
            Item::File("./p/data/a.in", b"hello"),
            Item::Symlink("./p/data/b.in", "a.in"),
            Item::Symlink("./p/up", "data/../data"),
            Item::Hardlink("./p/data/c.in", "./p/data/a.in"),
            Item::FileMode("./p/run", b"#!/bin/sh\n", 0o750),
        ])
        .unwrap();
    let dest = scene.dest();
    assert_eq!(
        std::fs::read_to_string(dest.join("p/data/b.in")).unwrap(),
        "hello"
    );
    assert_eq!(
        std::fs::read_to_string(dest.join("p/data/c.in")).unwrap(),
        "hello"
    );
    assert_eq!(
        std::fs::read_to_string(dest.join("p/up/a.in")).unwrap(),
        "hello"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&dest.join("p/run")), 0o755);
    assert_eq!(mode(&dest.join("p/data/a.in")), 0o644);
    assert_eq!(mode(&dest), 0o755);
    assert_eq!(summary.bytes, 15);
    assert_eq!(summary.entries, 6);
    assert_eq!(
        tree(&scene.base.path().join("work")).len(),
        tree(&dest).len() + 1
    );
}

#[test]
fn absolute_path_is_refused() {
    let scene = Scene::new();
    let name = outside_path(&scene, "abs");
    let refusal = scene.refused(scene.unpack(&[Item::File("ok", b"1"), Item::File(&name, b"x")]));
    assert!(
        matches!(refusal, UnpackRefusal::AbsolutePath { .. }),
        "{refusal:?}"
    );
}

#[test]
fn parent_components_are_refused() {
    for name in [
        "../outside/x",
        "a/../../outside/x",
        "a/b/../../../outside/x",
    ] {
        let scene = Scene::new();
        let refusal = scene.refused(scene.unpack(&[Item::File(name, b"x")]));
        assert!(
            matches!(refusal, UnpackRefusal::ParentComponent { .. }),
            "{name}: {refusal:?}"
        );
    }
}

#[test]
fn symlinks_resolving_outside_are_refused() {
    let absolute = Scene::new();
    let refusal = absolute.refused(absolute.unpack(&[Item::Symlink("l", "/etc/passwd")]));
    assert!(
        matches!(refusal, UnpackRefusal::LinkOutside { .. }),
        "{refusal:?}"
    );

    let relative = Scene::new();
    let refusal = relative.refused(relative.unpack(&[Item::Symlink("l", "../../outside")]));
    assert!(
        matches!(refusal, UnpackRefusal::LinkOutside { .. }),
        "{refusal:?}"
    );

    // Each link looks inside on paper; together they climb out.
    let chained = Scene::new();
    let refusal = chained.refused(chained.unpack(&[
        Item::Dir("d/e/"),
        Item::Symlink("d/e/l", "../.."),
        Item::Symlink("x", "d/e/l/.."),
    ]));
    assert!(
        matches!(refusal, UnpackRefusal::LinkOutside { .. }),
        "{refusal:?}"
    );

    let dangling = Scene::new();
    let refusal = dangling.refused(dangling.unpack(&[Item::Symlink("l", "nowhere")]));
    assert!(
        matches!(refusal, UnpackRefusal::LinkOutside { .. }),
        "{refusal:?}"
    );
}

#[test]
fn symlink_chain_staying_inside_is_allowed() {
    let scene = Scene::new();
    scene
        .unpack(&[
            Item::Dir("d/e/"),
            Item::File("f", b"x"),
            Item::Symlink("d/e/l", "../.."),
            Item::Symlink("x", "d/e/l/f"),
        ])
        .unwrap();
    assert_eq!(std::fs::read(scene.dest().join("x")).unwrap(), b"x");
}

#[test]
fn writing_through_a_symlink_is_refused() {
    let scene = Scene::new();
    let outside = scene.outside().display().to_string();
    let refusal = scene.refused(scene.unpack(&[
        Item::Symlink("evil", &outside),
        Item::File("evil/pwned", b"x"),
    ]));
    assert!(
        matches!(
            refusal,
            UnpackRefusal::LinkOutside { .. } | UnpackRefusal::Conflict { .. }
        ),
        "{refusal:?}"
    );
    let scene = Scene::new();
    let refusal = scene.refused(scene.unpack(&[
        Item::File("evil/ok", b"x"),
        Item::Symlink("evil", "../../outside"),
    ]));
    assert!(
        matches!(refusal, UnpackRefusal::Conflict { .. }),
        "{refusal:?}"
    );
    let scene = Scene::new();
    let refusal =
        scene.refused(scene.unpack(&[Item::Symlink("a", "."), Item::Symlink("a/b", "x")]));
    assert!(
        matches!(refusal, UnpackRefusal::ThroughLink { .. }),
        "{refusal:?}"
    );
}

#[test]
fn hardlinks_outside_are_refused() {
    for target in ["../../protected/secret", "/etc/passwd", "missing"] {
        let scene = Scene::new();
        let protected = scene.base.path().join("protected");
        std::fs::create_dir(&protected).unwrap();
        std::fs::write(protected.join("secret"), b"s").unwrap();
        let refusal = scene.refused(scene.unpack(&[Item::Hardlink("h", target)]));
        assert!(
            matches!(refusal, UnpackRefusal::LinkOutside { .. }),
            "{target}: {refusal:?}"
        );
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            std::fs::metadata(protected.join("secret")).unwrap().nlink(),
            1
        );
    }
}

#[test]
fn hardlink_to_an_earlier_file_is_allowed() {
    let scene = Scene::new();
    scene
        .unpack(&[Item::File("d/a", b"1"), Item::Hardlink("b", "d/a")])
        .unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        std::fs::metadata(scene.dest().join("b")).unwrap().nlink(),
        2
    );
}

#[test]
fn devices_and_fifos_are_refused() {
    for kind in [
        EntryType::Char,
        EntryType::Block,
        EntryType::Fifo,
        EntryType::GNUSparse,
    ] {
        let scene = Scene::new();
        let refusal =
            scene.refused(scene.unpack(&[Item::File("ok", b"1"), Item::Special("dev", kind)]));
        assert!(
            matches!(refusal, UnpackRefusal::SpecialFile { .. }),
            "{kind:?}: {refusal:?}"
        );
    }
}

#[test]
fn setuid_and_setgid_are_refused() {
    for mode in [0o4755, 0o2755] {
        let scene = Scene::new();
        let refusal = scene.refused(scene.unpack(&[Item::FileMode("bin", b"x", mode)]));
        assert!(
            matches!(refusal, UnpackRefusal::SetId { .. }),
            "{mode:o}: {refusal:?}"
        );
    }
}

#[test]
fn entry_limit_allowed_and_denied() {
    let names: Vec<String> = (0..11).map(|i| format!("f{i}")).collect();
    let items: Vec<Item<'_>> = names.iter().map(|n| Item::File(n, b"x")).collect();
    let limits = |max_entries| UnpackLimits {
        max_entries,
        max_unpacked: 1 << 20,
    };
    let allowed = Scene::new();
    allowed
        .unpack_bytes(&tar_gz_bytes(&items), &limits(11))
        .unwrap();
    let denied = Scene::new();
    let refusal = denied.refused(denied.unpack_bytes(&tar_gz_bytes(&items), &limits(10)));
    assert_eq!(refusal, UnpackRefusal::TooManyEntries { limit: 10 });
}

#[test]
fn size_limit_allowed_and_denied() {
    let data = vec![7u8; 4096];
    let items = [Item::File("a", &data), Item::File("b", &data)];
    let limits = |max_unpacked| UnpackLimits {
        max_entries: 100,
        max_unpacked,
    };
    let allowed = Scene::new();
    allowed
        .unpack_bytes(&tar_gz_bytes(&items), &limits(8192))
        .unwrap();
    let denied = Scene::new();
    let refusal = denied.refused(denied.unpack_bytes(&tar_gz_bytes(&items), &limits(8191)));
    assert_eq!(refusal, UnpackRefusal::TooLarge { limit: 8191 });
}

/// A gzip bomb: 1 MiB of zeros compressed once, repeated as gzip members behind a
/// header that declares 1 GiB. Refused at the header, before a byte is written.
#[test]
fn gzip_bomb_stops_at_the_limit() {
    let mut first = Vec::new();
    write_tar(&mut first, &[Item::Declared("bomb", 1 << 30, &[])]);
    first.truncate(512); // just the header: the zeros follow in further members
    let member = {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(&vec![0u8; 1 << 20]).unwrap();
        enc.finish().unwrap()
    };
    let mut bomb = gzip(&first);
    for _ in 0..1024 {
        bomb.extend_from_slice(&member);
    }
    assert!(bomb.len() < 8 << 20, "a bomb is small: {}", bomb.len());
    let scene = Scene::new();
    let limits = UnpackLimits {
        max_entries: 100,
        max_unpacked: 16 << 20,
    };
    let refusal = scene.refused(scene.unpack_bytes(&bomb, &limits));
    assert_eq!(refusal, UnpackRefusal::TooLarge { limit: 16 << 20 });
}

#[test]
fn oversized_extension_header_is_refused() {
    let mut tar = Vec::new();
    let pax = vec![b'a'; 2 << 20];
    let header = package_common::raw_header(
        "././@PaxHeader",
        EntryType::XHeader,
        pax.len() as u64,
        0o644,
        "",
    );
    tar.extend_from_slice(header.as_bytes());
    tar.extend_from_slice(&pax);
    tar.extend_from_slice(&vec![0u8; 1024]);
    let scene = Scene::new();
    let refusal = scene.refused(scene.unpack_bytes(&gzip(&tar), &UnpackLimits::default()));
    assert!(
        matches!(refusal, UnpackRefusal::BadExtension { .. }),
        "{refusal:?}"
    );
}

#[test]
fn long_gnu_names_are_honoured() {
    let long = format!("{}/file.in", "d".repeat(150));
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(2);
    header.set_mode(0o644);
    builder.append_data(&mut header, &long, &b"ok"[..]).unwrap();
    let tar = builder.into_inner().unwrap();
    let scene = Scene::new();
    scene
        .unpack_bytes(&gzip(&tar), &UnpackLimits::default())
        .unwrap();
    assert_eq!(std::fs::read(scene.dest().join(&long)).unwrap(), b"ok");
}

#[test]
fn pax_path_is_honoured_and_a_contradicting_pax_size_refused() {
    let long = format!("{}/pax.in", "p".repeat(120));
    let mut builder = tar::Builder::new(Vec::new());
    builder
        .append_pax_extensions([("path", long.as_bytes())])
        .unwrap();
    let mut header = tar::Header::new_ustar();
    header.set_size(3);
    header.set_mode(0o644);
    builder
        .append_data(&mut header, "short", &b"pax"[..])
        .unwrap();
    let scene = Scene::new();
    scene
        .unpack_bytes(
            &gzip(&builder.into_inner().unwrap()),
            &UnpackLimits::default(),
        )
        .unwrap();
    assert_eq!(std::fs::read(scene.dest().join(&long)).unwrap(), b"pax");

    let mut builder = tar::Builder::new(Vec::new());
    builder
        .append_pax_extensions([("size", &b"1"[..])])
        .unwrap();
    let mut header = tar::Header::new_ustar();
    header.set_size(3);
    builder.append_data(&mut header, "f", &b"abc"[..]).unwrap();
    let scene = Scene::new();
    let refusal = scene.refused(scene.unpack_bytes(
        &gzip(&builder.into_inner().unwrap()),
        &UnpackLimits::default(),
    ));
    assert!(
        matches!(refusal, UnpackRefusal::BadExtension { .. }),
        "{refusal:?}"
    );
}

#[test]
fn corrupt_archive_is_a_clear_error() {
    let scene = Scene::new();
    let archive = scene.base.path().join("bad.tar.gz");
    std::fs::write(&archive, b"\x1f\x8bnot really gzip").unwrap();
    let err = package::unpack(&archive, &scene.dest(), &UnpackLimits::default()).unwrap_err();
    assert_eq!(err.code(), "package.invalid");
    assert!(
        matches!(err, PackageError::CorruptArchive { .. }),
        "{err:?}"
    );
    assert!(tree(&scene.base.path().join("work")).is_empty());
    // Truncated inside a file's data.
    let mut gz = tar_gz_bytes(&[Item::File("a", &vec![1u8; 100_000])]);
    gz.truncate(gz.len() / 2);
    let scene = Scene::new();
    let err = scene
        .unpack_bytes(&gz, &UnpackLimits::default())
        .unwrap_err();
    assert!(
        matches!(err, PackageError::CorruptArchive { .. }),
        "{err:?}"
    );
}

#[test]
fn load_refuses_hostile_archives_too() {
    let work = tempfile::tempdir().unwrap();
    let archive = work.path().join("p.tar.gz");
    std::fs::write(&archive, tar_gz_bytes(&[Item::File("../x", b"1")])).unwrap();
    let err = package::load(&archive, &UnpackLimits::default()).unwrap_err();
    assert!(matches!(err, PackageError::Unsafe { .. }), "{err:?}");
    assert!(!work.path().join("x").exists());
}
