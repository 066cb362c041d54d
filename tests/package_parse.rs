//! Parsing real and hand-made packages: the fixture problems (type, test count,
//! groups, grading), tally with real symlinks and with git symlink stubs, both format
//! versions, and broken packages failing with an error that names the file.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod package_common;

use std::path::Path;

use judge_runner::package::{
    self, FormatVersion, OnReject, OutputValidator, PackageError, ProblemKind, ScoreAggregation,
    UnpackLimits, VerdictAggregation,
};
use package_common::{problem_dir, tar_gz_of_dir, write_file};

fn case_names(problem: &package::Problem) -> Vec<String> {
    problem.cases().iter().map(|c| c.name.clone()).collect()
}

fn group_names(problem: &package::Problem) -> Vec<String> {
    problem.groups().iter().map(|g| g.name.clone()).collect()
}

#[test]
fn greet_is_legacy_pass_fail_with_one_secret_test() {
    let problem = package::parse(&problem_dir("greet")).unwrap();
    assert_eq!(problem.name, "Greet the Judge");
    assert_eq!(problem.format, FormatVersion::Legacy);
    assert_eq!(problem.kind, ProblemKind::PassFail);
    assert!(!problem.interactive);
    assert_eq!(problem.limits.memory_mib, 256);
    assert_eq!(problem.limits.time_limit, None);
    assert_eq!(problem.time_limit(Some(2.0)), 2.0);
    assert_eq!(problem.time_limit(None), 1.0);
    assert!(
        matches!(problem.validator, OutputValidator::Default(ref f) if *f == Default::default())
    );
    assert_eq!(case_names(&problem), ["secret/judge"]);
    assert_eq!(group_names(&problem), ["", "secret"]);
    let case = &problem.cases()[0];
    assert_eq!(
        std::fs::read_to_string(&case.answer).unwrap().trim(),
        "Hello, judge!"
    );
    assert!(problem.warnings.is_empty(), "{:?}", problem.warnings);
}

fn assert_tally(problem: &package::Problem) {
    assert_eq!(problem.name, "Tally");
    assert_eq!(problem.format, FormatVersion::V2023_07);
    assert_eq!(problem.kind, ProblemKind::Scoring);
    assert!(!problem.interactive);
    assert_eq!(problem.limits.memory_mib, 1024);
    assert_eq!(
        group_names(problem),
        ["", "sample", "secret", "secret/subtask1", "secret/subtask2"]
    );
    let names = case_names(problem);
    assert_eq!(names.len(), 13, "{names:?}");
    assert_eq!(names[..2], ["sample/1", "sample/2"]);
    assert_eq!(
        names[2..5],
        [
            "secret/subtask1/1",
            "secret/subtask1/2",
            "secret/subtask1/3"
        ]
    );
    // problemtools' order: the listing sorted by name, "01" < "04" < "1" < "10" < "2".
    let subtask2: Vec<&str> = names[5..]
        .iter()
        .map(|n| &n["secret/subtask2/".len()..])
        .collect();
    assert_eq!(subtask2, ["01", "02", "03", "04", "1", "10", "2", "3"]);

    let root = &problem.data.grading;
    assert!(root.ignore_sample);
    assert_eq!(root.on_reject, OnReject::Continue);
    assert_eq!(root.range, (0.0, 100.0));
    let sample = problem.data.subgroup("sample").unwrap();
    assert_eq!(sample.grading.accept_score, 0.0);
    assert_eq!(sample.grading.range, (0.0, 0.0));
    assert_eq!(
        sample.grading.verdict_aggregation,
        VerdictAggregation::FirstError
    );
    let secret = problem.data.subgroup("secret").unwrap();
    assert!(secret.grading.accept_if_any_accepted);
    assert!(!secret.grading.ignore_sample);
    assert_eq!(
        secret.grading.verdict_aggregation,
        VerdictAggregation::FirstError
    );
    for (name, points) in [("subtask1", 40.0), ("subtask2", 60.0)] {
        let group = secret.subgroup(name).unwrap();
        assert_eq!(group.grading.accept_score, points);
        assert_eq!(group.grading.range, (0.0, points));
        assert_eq!(group.grading.score_aggregation, ScoreAggregation::Min);
        assert_eq!(group.grading.on_reject, OnReject::Break);
        // grader_flags is replaced whole: `min` alone leaves the default verdict rule.
        assert_eq!(
            group.grading.verdict_aggregation,
            VerdictAggregation::WorstError
        );
        assert!(!group.grading.accept_if_any_accepted);
    }
}

fn case<'a>(problem: &'a package::Problem, name: &str) -> &'a package::TestCase {
    problem
        .cases()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no test {name}"))
}

/// subtask2's tests 1-3 are subtask1's: the same files, and test data (not a
/// link target) is what they read.
fn assert_linked_into_subtask1(problem: &package::Problem) {
    for n in 1..=3 {
        let linked = case(problem, &format!("secret/subtask2/{n}"));
        let target = case(problem, &format!("secret/subtask1/{n}"));
        assert_eq!(linked.input, target.input, "{n}.in");
        assert_eq!(linked.answer, target.answer, "{n}.ans");
        let input = std::fs::read_to_string(&linked.input).unwrap();
        assert!(!input.starts_with(".."), "{n}.in is test data: {input:?}");
    }
}

/// `tally` holds real symlinks (committed to git as symlinks): followed inside
/// the package, no warning.
#[test]
fn tally_with_real_symlinks_is_scoring_with_two_subtasks() {
    let dir = problem_dir("tally");
    let link = dir.join("data/secret/subtask2/1.in");
    assert!(
        link.symlink_metadata().unwrap().file_type().is_symlink(),
        "{} is not a symlink: check out the repository with core.symlinks=true",
        link.display()
    );
    let problem = package::parse(&dir).unwrap();
    assert_tally(&problem);
    assert_linked_into_subtask1(&problem);
    assert!(problem.warnings.is_empty(), "{:?}", problem.warnings);
}

/// `tally-stubs` holds git symlink stubs (what a `core.symlinks=false` checkout
/// writes): the parser follows them like the links, and says so.
#[test]
fn tally_symlink_stubs_resolve_like_symlinks() {
    let problem = package::parse(&problem_dir("tally-stubs")).unwrap();
    assert_tally(&problem);
    assert_linked_into_subtask1(&problem);
    assert_eq!(problem.warnings.len(), 6, "{:#?}", problem.warnings);
    for n in 1..=3 {
        for ext in ["in", "ans"] {
            let file = format!("subtask2/{n}.{ext}");
            assert!(
                problem
                    .warnings
                    .iter()
                    .any(|w| w.contains(&file) && w.contains("symlink stub")),
                "no warning for {file}: {:#?}",
                problem.warnings
            );
        }
    }
}

#[test]
fn tally_tarball_with_real_symlinks_loads() {
    let work = tempfile::tempdir().unwrap();
    let tree = problem_dir("tally");
    for prefix in ["", "./", "tally/"] {
        let archive = work.path().join(format!("p{}.tar.gz", prefix.len()));
        std::fs::write(&archive, tar_gz_of_dir(&tree, prefix)).unwrap();
        let loaded = package::load(&archive, &UnpackLimits::default()).unwrap();
        let problem = &loaded.problem;
        assert_tally(problem);
        assert!(problem.warnings.is_empty(), "{:?}", problem.warnings);
        let linked = case(problem, "secret/subtask2/1").clone();
        let target = case(problem, "secret/subtask1/1").clone();
        assert_eq!(
            linked.input, target.input,
            "symlink resolved inside the package"
        );
        assert_eq!(linked.answer, target.answer);
        assert!(
            linked
                .input
                .starts_with(loaded.unpacked_dir().unwrap().canonicalize().unwrap())
        );
    }
}

#[test]
fn loaded_archive_is_removed_when_dropped() {
    let work = tempfile::tempdir().unwrap();
    let archive = work.path().join("greet.tar.gz");
    std::fs::write(&archive, tar_gz_of_dir(&problem_dir("greet"), "greet/")).unwrap();
    let loaded = package::load(&archive, &UnpackLimits::default()).unwrap();
    let dir = loaded.unpacked_dir().unwrap().to_path_buf();
    assert!(dir.join("greet/problem.yaml").is_file());
    drop(loaded);
    assert!(!dir.exists());
}

/// A minimal package in `dir` with one secret test, plus `extra` files.
fn package_with(dir: &Path, problem_yaml: &str, extra: &[(&str, &str)]) {
    write_file(&dir.join("problem.yaml"), problem_yaml.as_bytes());
    write_file(&dir.join("data/secret/01.in"), b"1\n");
    write_file(&dir.join("data/secret/01.ans"), b"1\n");
    for (path, content) in extra {
        write_file(&dir.join(path), content.as_bytes());
    }
}

fn parse_with(
    problem_yaml: &str,
    extra: &[(&str, &str)],
) -> Result<package::Problem, PackageError> {
    let dir = tempfile::tempdir().unwrap();
    package_with(dir.path(), problem_yaml, extra);
    package::parse(dir.path())
}

fn invalid_naming(err: PackageError, file: &str) -> String {
    assert_eq!(err.code(), "package.invalid", "{err}");
    assert!(!err.retryable());
    let text = err.to_string();
    assert!(text.contains(file), "error {text:?} should name {file}");
    text
}

#[test]
fn missing_answer_names_the_input() {
    let err = parse_with("name: x\n", &[("data/secret/02.in", "2\n")]).unwrap_err();
    invalid_naming(err, "data/secret/02.in");
}

#[test]
fn unreadable_yaml_names_the_file() {
    let err = parse_with("name: [unclosed\n", &[]).unwrap_err();
    invalid_naming(err, "problem.yaml");
    let err = parse_with("name: x\n", &[("data/secret/testdata.yaml", "range: [a\n")]).unwrap_err();
    invalid_naming(err, "data/secret/testdata.yaml");
    let err = parse_with("limits: {memory: lots}\n", &[]).unwrap_err();
    assert!(invalid_naming(err, "problem.yaml").contains("memory"));
}

#[test]
fn legacy_custom_interactive_uses_output_validators() {
    let p = parse_with(
        "validation: custom interactive\nvalidator_flags: --strict 'two words'\n",
        &[("output_validators/validate/validate.cpp", "int main(){}")],
    )
    .unwrap();
    assert!(p.interactive);
    assert_eq!(p.kind, ProblemKind::PassFail);
    let OutputValidator::Custom(v) = &p.validator else {
        panic!("custom expected")
    };
    assert_eq!(v.name, "validate");
    assert!(v.path.ends_with("output_validators/validate"));
    assert_eq!(v.args, ["--strict", "two words"]);
    assert_eq!(p.validator_args(&p.data), ["--strict", "two words"]);
}

#[test]
fn legacy_single_file_validator_and_custom_score() {
    let p = parse_with(
        "type: scoring\nvalidation: custom score\n",
        &[("output_validators/check.py", "print()")],
    )
    .unwrap();
    assert_eq!(p.kind, ProblemKind::Scoring);
    let OutputValidator::Custom(v) = &p.validator else {
        panic!("custom expected")
    };
    assert_eq!(v.name, "check");
    assert!(v.path.ends_with("output_validators/check.py"));
}

#[test]
fn modern_type_list_and_singular_validator_dir() {
    let p = parse_with(
        "problem_format_version: 2023-07-draft\ntype: [scoring, interactive]\n\
         name: {sv: Eko, de: Echo}\nlimits: {time_limit: 2.5, memory: 256, output: 16}\n",
        &[
            ("output_validator/validator.cpp", "int main(){}"),
            (".timelimit", "9\n"),
        ],
    )
    .unwrap();
    assert_eq!(p.format, FormatVersion::V2023_07);
    assert_eq!(p.kind, ProblemKind::Scoring);
    assert!(p.interactive);
    assert_eq!(p.name, "Eko", "no `en`: the first name");
    assert_eq!(
        p.limits.time_limit,
        Some(2.5),
        "limits.time_limit beats .timelimit"
    );
    assert_eq!((p.limits.memory_mib, p.limits.output_mib), (256, 16));
    let OutputValidator::Custom(v) = &p.validator else {
        panic!("custom expected")
    };
    assert!(v.path.ends_with("output_validator"));
}

#[test]
fn dot_timelimit_is_used_when_yaml_names_none() {
    let p = parse_with("name: t\n", &[(".timelimit", "3.5\n")]).unwrap();
    assert_eq!(p.limits.time_limit, Some(3.5));
    assert_eq!(p.time_limit(Some(1.0)), 3.5);
    let err = parse_with("name: t\n", &[(".timelimit", "soon\n")]).unwrap_err();
    invalid_naming(err, ".timelimit");
}

#[test]
fn interactive_without_validator_is_refused() {
    let err = parse_with(
        "problem_format_version: 2023-07-draft\ntype: interactive\n",
        &[],
    )
    .unwrap_err();
    invalid_naming(err, "problem.yaml");
    let err = parse_with("validation: custom\n", &[]).unwrap_err();
    invalid_naming(err, "problem.yaml");
}

#[test]
fn unsupported_types_and_versions_are_refused() {
    for yaml in [
        "problem_format_version: 2023-07-draft\ntype: multi-pass\n",
        "type: [pass-fail, scoring]\n",
        "type: puzzle\n",
        "problem_format_version: 1999-01\n",
        "validation: fancy\n",
    ] {
        let err = parse_with(yaml, &[]).unwrap_err();
        invalid_naming(err, "problem.yaml");
    }
}

#[test]
fn default_validator_flags_problem_and_group() {
    let p = parse_with(
        "validator_flags: float_tolerance 1e-6 case_sensitive\n",
        &[(
            "data/secret/testdata.yaml",
            "output_validator_flags: space_change_sensitive\n",
        )],
    )
    .unwrap();
    let OutputValidator::Default(flags) = &p.validator else {
        panic!("default expected")
    };
    assert!(flags.case_sensitive && !flags.space_change_sensitive);
    assert_eq!(flags.float_relative_tolerance, Some(1e-6));
    assert_eq!(flags.float_absolute_tolerance, Some(1e-6));
    let secret = p.data.subgroup("secret").unwrap();
    let group_flags = p.default_validator_flags(secret).unwrap().unwrap();
    assert!(group_flags.case_sensitive && group_flags.space_change_sensitive);

    let err = parse_with("validator_flags: float_tolerance\n", &[]).unwrap_err();
    invalid_naming(err, "problem.yaml");
    let err = parse_with(
        "name: x\n",
        &[(
            "data/secret/testdata.yaml",
            "output_validator_flags: shiny\n",
        )],
    )
    .unwrap_err();
    invalid_naming(err, "data/secret/testdata.yaml");
}

#[test]
fn interaction_files_and_stray_answers_are_not_tests() {
    let p = parse_with(
        "name: x\n",
        &[
            ("data/sample/1.interaction", "< 1\n> 1\n"),
            ("data/sample/2.in", "2\n"),
            ("data/sample/2.ans", "2\n"),
            ("data/sample/3.ans", "3\n"),
            ("data/secret/01.png", "not an image"),
        ],
    )
    .unwrap();
    assert_eq!(case_names(&p), ["sample/2", "secret/01"]);
    assert!(
        p.warnings.iter().any(|w| w.contains("3.ans")),
        "{:?}",
        p.warnings
    );
}

#[test]
fn samples_only_package_is_judged_on_samples() {
    let dir = tempfile::tempdir().unwrap();
    write_file(&dir.path().join("data/sample/a.in"), b"x");
    write_file(&dir.path().join("data/sample/a.ans"), b"x");
    let p = package::parse(dir.path()).unwrap();
    assert_eq!(case_names(&p), ["sample/a"]);
    let empty = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(empty.path().join("data/secret")).unwrap();
    invalid_naming(package::parse(empty.path()).unwrap_err(), "data");
}

#[test]
fn nested_groups_inherit_and_sort_with_cases() {
    let p = parse_with(
        "type: scoring\n",
        &[
            (
                "data/secret/testdata.yaml",
                "on_reject: continue\naccept_score: 5\n",
            ),
            ("data/secret/g2/1.in", ""),
            ("data/secret/g2/1.ans", ""),
            ("data/secret/g1/testdata.yaml", "grader_flags: max\n"),
            ("data/secret/g1/x.in", ""),
            ("data/secret/g1/x.ans", ""),
            ("data/secret/00.in", ""),
            ("data/secret/00.ans", ""),
        ],
    )
    .unwrap();
    assert_eq!(
        case_names(&p),
        ["secret/00", "secret/01", "secret/g1/x", "secret/g2/1"]
    );
    let g1 = p.data.subgroup("secret").unwrap().subgroup("g1").unwrap();
    assert_eq!(g1.grading.on_reject, OnReject::Continue);
    assert_eq!(g1.grading.accept_score, 5.0);
    assert_eq!(g1.grading.score_aggregation, ScoreAggregation::Max);
}

#[test]
fn example_submissions_keep_their_verdict_folder() {
    let p = parse_with(
        "name: x\n",
        &[
            ("submissions/accepted/sol.py", "print(1)"),
            ("submissions/wrong_answer/multi/a.c", ""),
            ("submissions/wrong_answer/multi/b.h", ""),
            ("submissions/submissions.yaml", ""),
        ],
    )
    .unwrap();
    let subs: Vec<(String, String, usize)> = p
        .submissions
        .iter()
        .map(|s| (s.expected.clone(), s.name.clone(), s.files.len()))
        .collect();
    assert_eq!(
        subs,
        [
            ("accepted".to_string(), "sol.py".to_string(), 1),
            ("wrong_answer".to_string(), "multi".to_string(), 2)
        ]
    );
}

#[test]
fn directory_package_linking_outside_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    package_with(dir.path(), "name: x\n", &[]);
    let outside = tempfile::NamedTempFile::new().unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("data/secret/02.in")).unwrap();
    write_file(&dir.path().join("data/secret/02.ans"), b"");
    let err = package::parse(dir.path()).unwrap_err();
    invalid_naming(err, "02.in");
}

#[test]
fn name_falls_back_to_the_statement() {
    let p = parse_with(
        "license: cc0\n",
        &[(
            "problem_statement/problem.en.tex",
            "\\problemname{Fancy {\\em} Name}\nText",
        )],
    )
    .unwrap();
    assert_eq!(p.name, "Fancy {\\em} Name");
}

/// A package in `dir/pkg` (one secret test `01`) whose `02.in` holds `stub`,
/// and a file `dir/outside.in` beside the package.
fn package_with_stub(dir: &Path, stub: &str) -> std::path::PathBuf {
    let root = dir.join("pkg");
    package_with(
        &root,
        "name: x\n",
        &[("data/secret/02.in", stub), ("data/secret/02.ans", "2\n")],
    );
    write_file(&dir.join("outside.in"), b"secret\n");
    root
}

#[test]
fn symlink_stub_inside_the_package_is_followed_allowed() {
    for (stub, to) in [
        ("01.in", "01.in"),
        ("../secret/./01.in", "01.in"),
        ("03.in", "01.in"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let root = package_with_stub(dir.path(), stub);
        write_file(&root.join("data/secret/03.in"), b"01.in"); // a chain: 02 -> 03 -> 01
        write_file(&root.join("data/secret/03.ans"), b"3\n");
        let problem = package::parse(&root).unwrap();
        let expected = root.join("data/secret").join(to).canonicalize().unwrap();
        assert_eq!(case(&problem, "secret/02").input, expected, "{stub}");
        assert_eq!(std::fs::read(&expected).unwrap(), b"1\n");
        assert!(
            problem
                .warnings
                .iter()
                .any(|w| w.contains("02.in") && w.contains("symlink stub")),
            "{:?}",
            problem.warnings
        );
    }
}

#[test]
fn symlink_stub_pointing_outside_the_package_is_refused_denied() {
    // The same file as the twin above, reached from outside the package: by
    // `..`, by an absolute path, through a directory symlink inside the package.
    for stub in ["../../../outside.in", "/etc/outside.in", "door/outside.in"] {
        let dir = tempfile::tempdir().unwrap();
        let root = package_with_stub(dir.path(), stub);
        std::os::unix::fs::symlink(dir.path(), root.join("data/secret/door")).unwrap();
        let err = package::parse(&root).unwrap_err();
        let text = invalid_naming(err, "02.in");
        assert!(
            text.contains("symlink stub") && text.contains("outside the package"),
            "{text}"
        );
    }
}

#[test]
fn stub_shaped_data_naming_nothing_stays_data() {
    let dir = tempfile::tempdir().unwrap();
    let root = package_with_stub(dir.path(), "../missing.in");
    let problem = package::parse(&root).unwrap();
    let input = &case(&problem, "secret/02").input;
    assert_eq!(
        input,
        &root.join("data/secret/02.in").canonicalize().unwrap()
    );
    assert!(
        problem
            .warnings
            .iter()
            .any(|w| w.contains("02.in") && w.contains("names no file")),
        "{:?}",
        problem.warnings
    );
}

#[test]
fn symlink_stubs_in_a_loop_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = package_with_stub(dir.path(), "03.in");
    write_file(&root.join("data/secret/03.in"), b"02.in");
    write_file(&root.join("data/secret/03.ans"), b"3\n");
    let text = invalid_naming(package::parse(&root).unwrap_err(), "02.in");
    assert!(text.contains("loop"), "{text}");
}

#[test]
fn multi_pass_alone_and_interactive_with_validation_passes() {
    let validator = [("output_validator/validate.py", "print()")];
    let p = parse_with(
        "problem_format_version: 2023-07-draft\ntype: multi-pass\n",
        &validator,
    )
    .unwrap();
    assert!(p.multi_pass && !p.interactive);
    assert_eq!(p.kind, ProblemKind::PassFail);
    assert_eq!(p.limits.validation_passes, 2, "the format's default");
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);

    let p = parse_with(
        "problem_format_version: 2023-07-draft\ntype: [scoring, interactive, multi-pass]\n\
         limits: {validation_passes: 5}\n",
        &validator,
    )
    .unwrap();
    assert!(p.multi_pass && p.interactive);
    assert_eq!(p.kind, ProblemKind::Scoring);
    assert_eq!(p.limits.validation_passes, 5);

    // Read for multi-pass problems only (a warning elsewhere, never a limit).
    let p = parse_with(
        "problem_format_version: 2023-07-draft\nlimits: {validation_passes: 5}\n",
        &[],
    )
    .unwrap();
    assert!(!p.multi_pass);
    assert_eq!(p.limits.validation_passes, 2);
    assert!(
        p.warnings.iter().any(|w| w.contains("validation_passes")),
        "{:?}",
        p.warnings
    );

    for passes in ["1", "0", "2.5", "-3", "many"] {
        let err = parse_with(
            &format!(
                "problem_format_version: 2023-07-draft\ntype: multi-pass\n\
                 limits: {{validation_passes: {passes}}}\n"
            ),
            &validator,
        )
        .unwrap_err();
        assert!(
            invalid_naming(err, "problem.yaml").contains("validation_passes"),
            "{passes}"
        );
    }
    // The default validator cannot ask for another pass; submit-answer stays
    // refused.
    let err = parse_with(
        "problem_format_version: 2023-07-draft\ntype: multi-pass\n",
        &[],
    )
    .unwrap_err();
    assert!(invalid_naming(err, "problem.yaml").contains("multi-pass"));
    let err = parse_with(
        "problem_format_version: 2023-07-draft\ntype: submit-answer\n",
        &validator,
    )
    .unwrap_err();
    invalid_naming(err, "problem.yaml");
}

#[test]
fn legacy_output_validators_one_program_per_entry_headers_ignored() {
    // A single source file with its header beside it, directly in the folder
    // (as a public interactive package keeps it): one program.
    let p = parse_with(
        "validation: custom interactive\n",
        &[
            (
                "output_validators/validate.cpp",
                "#include \"validate.h\"\n",
            ),
            ("output_validators/validate.h", "// shared\n"),
            ("output_validators/README.md", "notes\n"),
        ],
    )
    .unwrap();
    let OutputValidator::Custom(v) = &p.validator else {
        panic!("one program expected, got {:?}", p.validator)
    };
    assert_eq!(v.name, "validate");
    assert!(v.path.ends_with("output_validators/validate.cpp"));
    assert_eq!(v.companions.len(), 1);
    assert!(v.companions[0].ends_with("validate.h"));
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("validate.h") && w.contains("not a program")),
        "{:?}",
        p.warnings
    );

    // Several programs (a file and a directory), plus files that are none: each
    // program runs, in name order.
    let p = parse_with(
        "validation: custom\n",
        &[
            ("output_validators/b_second.py", "print()"),
            ("output_validators/a_first/check.cpp", "int main(){}"),
            ("output_validators/notes.txt", "not a program"),
            ("output_validators/common.h", "// header"),
        ],
    )
    .unwrap();
    let OutputValidator::Several(programs) = &p.validator else {
        panic!("several programs expected, got {:?}", p.validator)
    };
    let names: Vec<&str> = programs.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["a_first", "b_second"]);
    assert!(programs[0].companions.is_empty(), "a directory has its own");
    assert_eq!(programs[1].companions.len(), 1);
    assert_eq!(p.validator.custom_programs().len(), 2);
    for file in ["notes.txt", "common.h"] {
        assert!(
            p.warnings.iter().any(|w| w.contains(file)),
            "{file}: {:?}",
            p.warnings
        );
    }

    // Only non-programs: no validator, when one is asked for.
    let err = parse_with(
        "validation: custom\n",
        &[("output_validators/validate.h", "// header")],
    )
    .unwrap_err();
    invalid_naming(err, "problem.yaml");
}

#[test]
fn several_validators_are_refused_where_only_one_can_run() {
    let two = [
        ("output_validators/one.py", "print()"),
        ("output_validators/two.py", "print()"),
    ];
    let err = parse_with("validation: custom interactive\n", &two).unwrap_err();
    let text = invalid_naming(err, "output_validators");
    assert!(text.contains("one, two"), "{text}");
    let err = parse_with("type: multi-pass\nvalidation: custom\n", &two).unwrap_err();
    invalid_naming(err, "output_validators");
}
