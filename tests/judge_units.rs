//! The judge's strings agree with the contract's (`protocol::codes`), and the
//! built-in language table finds this host's toolchains.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

use judge_runner::judge::{self, Judge, JudgeConfig, JudgeError, LanguageTable, Verdict};
use judge_runner::protocol::codes;

#[test]
fn verdict_strings_equal_the_protocol_codes() {
    use codes::verdict as v;
    let pairs = [
        (Verdict::Accepted, v::ACCEPTED),
        (Verdict::WrongAnswer, v::WRONG_ANSWER),
        (Verdict::TimeLimitExceeded, v::TIME_LIMIT_EXCEEDED),
        (Verdict::RunTimeError, v::RUN_TIME_ERROR),
        (Verdict::MemoryLimitExceeded, v::MEMORY_LIMIT_EXCEEDED),
        (Verdict::OutputLimitExceeded, v::OUTPUT_LIMIT_EXCEEDED),
        (Verdict::CompilationError, v::COMPILATION_ERROR),
    ];
    for (verdict, s) in pairs {
        assert_eq!(verdict.as_str(), s);
        assert_eq!(serde_json::to_value(verdict).unwrap(), s);
    }
}

#[test]
fn reason_codes_equal_the_protocol_codes() {
    use codes::reason as r;
    assert_eq!(judge::reason::PACKAGE_INVALID, r::PACKAGE_INVALID);
    assert_eq!(judge::reason::SANDBOX_FAILED, r::SANDBOX_FAILED);
    assert_eq!(judge::reason::VALIDATOR_FAILED, r::VALIDATOR_FAILED);
    assert_eq!(judge::reason::LANGUAGE_UNAVAILABLE, r::LANGUAGE_UNAVAILABLE);
    let e = JudgeError::Validator {
        test: "t".into(),
        message: "m".into(),
    };
    assert_eq!(e.reason(), r::VALIDATOR_FAILED);
}

/// gcc, g++ and python3 are on every machine this project runs on (`.ci/run`
/// installs them); a language whose toolchain is missing is left out, not fatal.
#[test]
fn available_languages_probe_the_host() {
    let table = LanguageTable::from_yaml(&format!(
        "{}\nghost:\n  name: Ghost\n  extensions: [ghost]\n  run: ghost {{mainfile}}\n  version: ghost-lang-not-installed --version\n",
        judge::language::BUILTIN_LANGUAGES
    ))
    .unwrap();
    let judge = Judge::new(JudgeConfig::new(table, 0));
    let available = judge.available_languages();
    let ids: Vec<&str> = available.iter().map(|(id, _)| id.as_str()).collect();
    for id in ["c", "cpp", "python3"] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
    assert!(!ids.contains(&"ghost"));
    let c = &available.iter().find(|(id, _)| id == "c").unwrap().1;
    assert!(c.version.contains("gcc"), "{}", c.version);
    let err = judge.toolchain("ghost").unwrap_err();
    assert_eq!(err.reason(), judge::reason::LANGUAGE_UNAVAILABLE);
}
