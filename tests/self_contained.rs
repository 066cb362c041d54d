//! `cargo test` runs on a clone of this repository alone: no test, bench or
//! fixture reaches outside it (the workplace's shared directory is not on a
//! user's machine), the two forms of the symlinked fixture agree, and README
//! keeps its two set-up commands.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            files(&entry.path(), out);
        } else {
            out.push(entry.path());
        }
    }
}

/// Names of places outside the repository, spelled in pieces so this file
/// does not match itself.
fn outside_names() -> Vec<String> {
    vec![
        ["..", "/shared"].concat(),
        ["/work", "/shared"].concat(),
        ["JUDGE_", "SHARED_DIR"].concat(),
    ]
}

#[test]
fn no_test_or_bench_reads_outside_the_repository() {
    let mut sources = Vec::new();
    for dir in ["tests", "benches"] {
        files(&repo().join(dir), &mut sources);
    }
    let mut offenders = Vec::new();
    for path in sources {
        if path.symlink_metadata().unwrap().file_type().is_symlink() {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        for name in outside_names() {
            if text.contains(&name) {
                offenders.push(format!("{} names {name}", path.display()));
            }
        }
    }
    assert!(offenders.is_empty(), "{offenders:#?}");
}

#[test]
fn fixture_symlinks_stay_inside_their_package() {
    let root = repo().join("tests/fixtures/problems");
    let mut all = Vec::new();
    files(&root, &mut all);
    let mut links = 0;
    for path in all {
        if !path.symlink_metadata().unwrap().file_type().is_symlink() {
            continue;
        }
        links += 1;
        let package = path
            .strip_prefix(&root)
            .unwrap()
            .components()
            .next()
            .unwrap();
        let resolved = path.canonicalize().unwrap();
        assert!(
            resolved.starts_with(root.join(package).canonicalize().unwrap()),
            "{} leaves its package",
            path.display()
        );
    }
    assert_eq!(links, 6, "tally's subtask2/{{1,2,3}}.{{in,ans}}");
}

/// `tally-stubs` is `tally` with its six symlinks replaced by git's stub files:
/// every other file is the same, and each stub holds its link's target.
#[test]
fn the_stub_fixture_is_the_symlink_fixture_checked_out_without_symlinks() {
    let root = repo().join("tests/fixtures/problems");
    let (links, stubs) = (root.join("tally"), root.join("tally-stubs"));
    let mut all = Vec::new();
    files(&links, &mut all);
    let mut stub_files = Vec::new();
    files(&stubs, &mut stub_files);
    assert_eq!(all.len(), stub_files.len());
    for path in all {
        let rel = path.strip_prefix(&links).unwrap();
        let twin = stubs.join(rel);
        assert!(
            !twin.symlink_metadata().unwrap().file_type().is_symlink(),
            "{} is a symlink",
            twin.display()
        );
        let twin_bytes = std::fs::read(&twin).unwrap();
        if path.symlink_metadata().unwrap().file_type().is_symlink() {
            let target = std::fs::read_link(&path).unwrap();
            assert_eq!(
                twin_bytes,
                target.to_str().unwrap().as_bytes(),
                "{}",
                rel.display()
            );
        } else {
            assert_eq!(
                twin_bytes,
                std::fs::read(&path).unwrap(),
                "{}",
                rel.display()
            );
        }
    }
}

/// README's set-up is exactly two commands (the demo and the tests), and it
/// says how to pack a package for upload; docs/server.md names every `serve`
/// flag a newcomer looks for.
#[test]
fn readme_sets_up_with_two_commands_and_the_docs_name_the_flags() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let setup = &readme[readme.find("## Set up").expect("a Set up section")..];
    let block = &setup[setup.find("```sh\n").unwrap() + 6..];
    let block = &block[..block.find("```").unwrap()];
    let commands: Vec<&str> = block
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(commands, ["cargo run --release -- demo", "cargo test"]);
    assert!(readme.contains("tar -czf p.tar.gz -C problems/p ."));
    let server = std::fs::read_to_string(repo().join("docs/server.md")).unwrap();
    for flag in ["--manager-token", "--languages"] {
        assert!(server.contains(flag), "docs/server.md does not name {flag}");
    }
}
