//! The 2023-07 / 2025-09 format points real packages use (issue 10): what is
//! supported is parsed into the `Problem` the judge uses; what is not is refused
//! with a `package.invalid` naming the file and the key, by `package check` as by
//! the parser every upload goes through. No sandbox needed.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

use std::path::{Path, PathBuf};

use judge_runner::package::{self, FormatVersion, OutputValidator, PackageError};

const EXE: &str = env!("CARGO_BIN_EXE_judge-runner");

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/problems")
        .join(name)
}

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
}

/// A minimal package: `problem.yaml` as given, one sample, one secret test.
fn package(yaml: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "problem.yaml", yaml);
    write(dir.path(), "data/sample/1.in", "1\n");
    write(dir.path(), "data/sample/1.ans", "1\n");
    write(dir.path(), "data/secret/1.in", "2\n");
    write(dir.path(), "data/secret/1.ans", "2\n");
    dir
}

fn refused(dir: &Path) -> String {
    let err: PackageError = package::parse(dir).unwrap_err();
    assert_eq!(err.code(), "package.invalid", "{err}");
    err.to_string()
}

const MODERN: &str = "problem_format_version: 2023-07-draft\nname: x\n";
const SCORING: &str = "problem_format_version: 2023-07-draft\nname: x\ntype: scoring\n";

#[test]
fn validator_in_the_one_subdirectory_of_output_validator() {
    let problem = package::parse(&fixture("guess_2023")).unwrap();
    assert!(problem.interactive);
    let OutputValidator::Custom(v) = &problem.validator else {
        panic!("{:?}", problem.validator);
    };
    assert!(
        v.path.ends_with("output_validator/guess_validator"),
        "{v:?}"
    );
    assert_eq!(v.name, "guess_validator");

    // Sources directly in output_validator/: the directory is the program.
    let dir = package(MODERN);
    write(dir.path(), "output_validator/validate.cpp", "int main(){}");
    write(dir.path(), "output_validator/lib/util.h", "");
    let OutputValidator::Custom(v) = package::parse(dir.path()).unwrap().validator else {
        panic!()
    };
    assert!(v.path.ends_with("output_validator"), "{v:?}");

    // Two programs: refused, naming the directory.
    let dir = package(MODERN);
    write(
        dir.path(),
        "output_validator/a/validate.cpp",
        "int main(){}",
    );
    write(
        dir.path(),
        "output_validator/b/validate.cpp",
        "int main(){}",
    );
    let err = refused(dir.path());
    assert!(
        err.contains("output_validator") && err.contains("one program"),
        "{err}"
    );
}

#[test]
fn include_directories_by_language() {
    let problem = package::parse(&fixture("include_2023")).unwrap();
    let names = |lang: &str| -> Vec<String> {
        problem
            .includes_for(lang)
            .iter()
            .map(|f| format!("{}:{}", f.language, f.path.display()))
            .collect()
    };
    assert_eq!(names("cpp"), ["default:task.h", "cpp:grader.cpp"]);
    assert_eq!(names("c"), ["default:task.h", "c:grader.c"]);
    assert_eq!(names("python3"), ["default:task.h"]);
    assert!(
        problem
            .includes_for("cpp")
            .iter()
            .all(|f| f.source.is_file())
    );

    // Nested paths are kept below the language directory.
    let dir = package(MODERN);
    write(dir.path(), "include/cpp/lib/vec.h", "");
    let problem = package::parse(dir.path()).unwrap();
    assert_eq!(problem.includes[0].path, Path::new("lib/vec.h"));

    // The same path from default/ and a language: refused, naming the file.
    let dir = package(MODERN);
    write(dir.path(), "include/default/task.h", "");
    write(dir.path(), "include/cpp/task.h", "");
    let err = refused(dir.path());
    assert!(err.contains("include/cpp/task.h"), "{err}");

    // include/default/ is 2023-07; a legacy package names its languages.
    let dir = package("name: x\n");
    write(dir.path(), "include/default/task.h", "");
    let err = refused(dir.path());
    assert!(err.contains("include/default"), "{err}");
    let dir = package("name: x\n");
    write(dir.path(), "include/cpp/task.h", "");
    assert_eq!(package::parse(dir.path()).unwrap().includes.len(), 1);

    // A link out of the package is refused.
    let dir = package(MODERN);
    std::fs::create_dir_all(dir.path().join("include/cpp")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", dir.path().join("include/cpp/x.h")).unwrap();
    assert!(refused(dir.path()).contains("outside the package"));
}

#[test]
fn samples_score_in_legacy_packages_only() {
    let legacy = package::parse(&fixture("legacy_scoring")).unwrap();
    assert_eq!(legacy.format, FormatVersion::Legacy);
    let sample = legacy.data.subgroup("sample").unwrap();
    assert!(!sample.grading.zero_score);
    assert_eq!(sample.grading.accept_score, 1.0);
    assert_eq!(judge_runner::judge::grading::max_score(&legacy.data), 5.0);

    let dir = package(SCORING);
    let modern = package::parse(dir.path()).unwrap();
    assert!(modern.data.subgroup("sample").unwrap().grading.zero_score);
    assert!(!modern.data.subgroup("secret").unwrap().grading.zero_score);
    assert_eq!(judge_runner::judge::grading::max_score(&modern.data), 1.0);
}

#[test]
fn a_tolerance_may_be_written_in_hex() {
    let problem = package::parse(&fixture("hexfloat")).unwrap();
    let OutputValidator::Default(flags) = problem.validator else {
        panic!()
    };
    assert_eq!(flags.float_absolute_tolerance, Some(0.0));
    let dir = package("name: x\nvalidator_flags: float_tolerance 0x1p-1\n");
    let OutputValidator::Default(flags) = package::parse(dir.path()).unwrap().validator else {
        panic!()
    };
    assert_eq!(flags.float_relative_tolerance, Some(0.5));
    let dir = package("name: x\nvalidator_flags: float_tolerance 0x1p\n");
    assert!(refused(dir.path()).contains("float_tolerance"));
}

/// Every unsupported feature that would change a verdict or a score is refused,
/// naming the file and the key.
#[test]
fn unsupported_grading_rules_are_refused_naming_file_and_key() {
    let cases: &[(&str, &str, &str, &str)] = &[
        // (problem.yaml, file, its text, what the message must name)
        (
            SCORING,
            "data/secret/test_group.yaml",
            "max_score: 50\n",
            "max_score",
        ),
        (
            SCORING,
            "data/secret/testdata.yaml",
            "score_aggregation: min\n",
            "score_aggregation",
        ),
        (
            SCORING,
            "data/secret/test_group.yaml",
            "require_pass: sample\n",
            "require_pass",
        ),
        (
            MODERN,
            "data/secret/test_group.yaml",
            "args: [--fast]\n",
            "args",
        ),
        (
            MODERN,
            "data/secret/1.yaml",
            "output_validator_args: [case_sensitive]\n",
            "output_validator_args",
        ),
        (MODERN, "data/secret/1.yaml", "args: [x]\n", "args"),
        (MODERN, "data/secret/1.files/input.txt", "data\n", "1.files"),
        (MODERN, "static_validator/check.py", "", "static_validator"),
    ];
    for (yaml, file, text, key) in cases {
        let dir = package(yaml);
        write(dir.path(), file, text);
        let err = refused(dir.path());
        let shown = file.split('/').take(3).collect::<Vec<_>>().join("/");
        let shown = shown
            .trim_end_matches("/input.txt")
            .trim_end_matches("/check.py");
        assert!(err.contains(key), "{file}: {err}");
        assert!(err.contains(shown), "{file}: {err}");
    }
    // 2025-09 scoring: a different scoring model altogether.
    let dir = package("problem_format_version: 2025-09\nname: x\ntype: scoring\n");
    let err = refused(dir.path());
    assert!(
        err.contains("problem.yaml") && err.contains("2025-09"),
        "{err}"
    );
    // ... while 2025-09 pass-fail is judged, and harmless per-case keys pass.
    let dir = package("problem_format_version: 2025-09\nname: x\n");
    write(
        dir.path(),
        "data/secret/1.yaml",
        "hint: think\ndescription: small\n",
    );
    write(dir.path(), "data/secret/test_group.yaml", "max_score: 1\n");
    let problem = package::parse(dir.path()).unwrap();
    assert!(
        problem.warnings.iter().any(|w| w.contains("max_score")),
        "{:?}",
        problem.warnings
    );
}

#[test]
fn package_check_prints_the_refusal() {
    let dir = package(SCORING);
    write(dir.path(), "data/secret/test_group.yaml", "max_score: 50\n");
    let out = std::process::Command::new(EXE)
        .args(["package", "check"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("test_group.yaml")
            && err.contains("max_score")
            && err.contains("[package.invalid]"),
        "{err}"
    );
}

#[test]
fn problem_yaml_keys_judged_or_refused_never_silently_ignored() {
    // 2025-09 `constants`: refused naming the key (no `{{name}}` substitution).
    let dir = package("problem_format_version: 2025-09\nname: x\nconstants:\n  tol: 1e-6\n");
    let err = refused(dir.path());
    assert!(
        err.contains("problem.yaml") && err.contains("`constants`"),
        "{err}"
    );
    // An empty `constants` map changes nothing.
    let dir = package("problem_format_version: 2025-09\nname: x\nconstants: {}\n");
    package::parse(dir.path()).unwrap();
    // `languages` as a list and `allow_file_writing: false` are warned about.
    let dir = package(
        "problem_format_version: 2023-07-draft\nname: x\nlanguages: [cpp]\nallow_file_writing: false\n",
    );
    let problem = package::parse(dir.path()).unwrap();
    for key in ["`languages`", "`allow_file_writing: false`"] {
        assert!(
            problem.warnings.iter().any(|w| w.contains(key)),
            "{key}: {:?}",
            problem.warnings
        );
    }
    let dir = package("problem_format_version: 2023-07-draft\nname: x\nlanguages: all\n");
    assert!(package::parse(dir.path()).unwrap().warnings.is_empty());
    // 2023-07 `limits.time_resolution` is read for verify's computed time limit.
    let dir = package(
        "problem_format_version: 2023-07-draft\nname: x\nlimits:\n  time_resolution: 0.5\n  time_multipliers:\n    ac_to_time_limit: 3\n",
    );
    let problem = package::parse(dir.path()).unwrap();
    assert_eq!(problem.limits.time_resolution, Some(0.5));
    assert_eq!(problem.ac_to_time_limit(), 3.0);
    assert!(problem.warnings.is_empty(), "{:?}", problem.warnings);
    // A legacy package's `limits.time_limit` (2023-07's key, refused by
    // problemtools there) is honoured with a warning.
    let dir = package("name: x\nlimits:\n  time_limit: 3\n");
    let problem = package::parse(dir.path()).unwrap();
    assert_eq!(problem.limits.time_limit, Some(3.0));
    assert!(
        problem
            .warnings
            .iter()
            .any(|w| w.contains("`limits.time_limit`")),
        "{:?}",
        problem.warnings
    );
}
