//! The default output validator: never panics, never fails on in-memory input,
//! and is symmetric where the specification makes it so — without float
//! tolerances (tokens compared as strings, case-folded or not, whitespace
//! compared or not) and with an absolute tolerance only (|a - b| ≤ ε reads the
//! same both ways). A relative tolerance is measured against the judge's answer,
//! so it is not checked for symmetry. An answer always accepts itself.
//! Input: one flag byte, then answer and output separated by a 0xFF byte.
#![no_main]

use judge_runner::judge::default_validator::validate;
use judge_runner::package::DefaultValidatorFlags;
use libfuzzer_sys::fuzz_target;

fn accepted(answer: &[u8], output: &[u8], flags: &DefaultValidatorFlags) -> bool {
    validate(answer, output, flags)
        .expect("in-memory streams cannot fail")
        .accepted
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (answer, output) = match rest.iter().position(|b| *b == 0xff) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &rest[..0]),
    };
    let tolerance = [0.0, 1e-6, 0.5, 1.0, 1e300, f64::MIN_POSITIVE][usize::from(mode >> 5) % 6];
    let flags = DefaultValidatorFlags {
        case_sensitive: mode & 1 != 0,
        space_change_sensitive: mode & 2 != 0,
        float_relative_tolerance: (mode & 4 != 0).then_some(tolerance),
        float_absolute_tolerance: (mode & 8 != 0).then_some(tolerance),
    };
    let forward = accepted(answer, output, &flags);
    if flags.float_relative_tolerance.is_none() {
        let backward = accepted(output, answer, &flags);
        assert_eq!(forward, backward, "not symmetric under {flags:?}");
    }
    assert!(accepted(answer, answer, &flags), "an answer refuses itself");
});
