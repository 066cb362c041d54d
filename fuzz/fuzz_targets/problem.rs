//! `problem.yaml`, `testdata.yaml` and `.timelimit` parsing (package::parse): the
//! input is up to four files separated by 0xFF bytes — problem.yaml,
//! data/testdata.yaml, data/secret/testdata.yaml, .timelimit — written into a
//! minimal package (one sample, one secret case). Parsing answers a Problem or
//! a PackageError, never a panic; an accepted problem's time limit is a finite
//! positive number.
#![no_main]

use std::fs;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.split(|b| *b == 0xff);
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    for d in ["data/sample", "data/secret"] {
        fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    for (name, body) in [
        ("data/sample/1.in", "1\n"),
        ("data/sample/1.ans", "1\n"),
        ("data/secret/a.in", "2\n"),
        ("data/secret/a.ans", "2\n"),
    ] {
        fs::write(root.join(name), body).expect("write");
    }
    for name in [
        "problem.yaml",
        "data/testdata.yaml",
        "data/secret/testdata.yaml",
        ".timelimit",
    ] {
        if let Some(body) = parts.next() {
            fs::write(root.join(name), body).expect("write");
        }
    }
    if let Ok(problem) = judge_runner::package::parse(root) {
        let t = problem.time_limit(None);
        assert!(t.is_finite() && t > 0.0, "time limit {t}");
        let _ = problem.cases();
        for g in problem.groups() {
            let _ = problem.validator_args(g);
        }
    }
});
