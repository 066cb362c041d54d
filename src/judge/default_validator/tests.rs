#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn flags() -> DefaultValidatorFlags {
    DefaultValidatorFlags::default()
}

fn check(answer: &str, output: &str, flags: &DefaultValidatorFlags) -> Judgement {
    validate(answer.as_bytes(), output.as_bytes(), flags).unwrap()
}

fn accepts(answer: &str, output: &str, flags: &DefaultValidatorFlags) -> bool {
    check(answer, output, flags).accepted
}

#[test]
fn whitespace_is_ignored_by_default() {
    let f = flags();
    assert!(accepts("1 2\n3\n", "1\n2   3", &f));
    assert!(accepts("a\n", "  a \n\n\t", &f));
    assert!(accepts("", "", &f));
    assert!(accepts("", " \n ", &f));
    assert!(!accepts("1 2\n", "1 3\n", &f));
}

#[test]
fn case_is_ignored_unless_case_sensitive() {
    let mut f = flags();
    assert!(accepts("Hello World!\n", "hello WORLD!\n", &f));
    f.case_sensitive = true;
    assert!(!accepts("Hello World!\n", "hello WORLD!\n", &f));
    assert!(accepts("Hello World!\n", "Hello World!\n", &f));
}

#[test]
fn space_change_sensitive_compares_every_space() {
    let mut f = flags();
    f.space_change_sensitive = true;
    assert!(accepts("1 2\n", "1 2\n", &f));
    assert!(!accepts("1 2\n", "1  2\n", &f));
    assert!(!accepts("1 2\n", "1 2", &f), "missing final newline");
    assert!(!accepts("1 2\n", "1 2\n\n", &f), "extra trailing newline");
    assert!(!accepts("1 2\n", "1\n2\n", &f));
}

#[test]
fn missing_and_trailing_output_are_wrong() {
    let f = flags();
    let j = check("1 2\n", "", &f);
    assert!(!j.accepted);
    assert!(j.message.contains("user output was empty"), "{}", j.message);
    let j = check("1 2\n", "  \n", &f);
    assert!(
        j.message.contains("user output contained no tokens"),
        "{}",
        j.message
    );
    let j = check("1 2\n", "1\n", &f);
    assert!(
        j.message
            .contains("User EOF while judge had more output\n(Next judge token: 2)")
    );
    let j = check("1\n", "1 2\n", &f);
    assert!(j.message.contains("Trailing output:\n2"), "{}", j.message);
}

#[test]
fn message_names_lines_like_problemtools() {
    let j = check("a\nb\nc\n", "a\nb\nx\n", &flags());
    assert!(j.message.starts_with(
        "Wrong answer on line 3 of output (corresponding to line 3 in answer file)\nString tokens mismatch"
    ), "{}", j.message);
}

#[test]
fn float_tolerance_absolute_and_relative() {
    let mut f = flags();
    f.float_absolute_tolerance = Some(1e-6);
    assert!(accepts("1.0\n", "1.0000005\n", &f));
    assert!(!accepts("1.0\n", "1.00001\n", &f));
    assert!(accepts("1.0\n", "1\n", &f));
    assert!(accepts("1000000\n", "1e6\n", &f));
    let j = check("1.0\n", "abc\n", &f);
    assert!(j.message.contains("Expected float, got: abc"));
    // Non-float judge tokens still compare as strings.
    assert!(accepts("yes 1.5\n", "YES 1.5000001\n", &f));
    assert!(!accepts("yes\n", "no\n", &f));

    let mut f = flags();
    f.float_relative_tolerance = Some(1e-3);
    assert!(accepts("1000\n", "1000.9\n", &f));
    assert!(!accepts("1000\n", "1001.1\n", &f));
    // Relative tolerance of 0 never forgives: only exact values pass.
    assert!(!accepts("0\n", "1e-300\n", &f));
    assert!(accepts("0\n", "-0.0\n", &f));
}

#[test]
fn without_tolerance_floats_are_strings() {
    assert!(!accepts("1.0\n", "1.00\n", &flags()));
    assert!(accepts("1.0\n", "1.0\n", &flags()));
}

#[test]
fn floats_parse_like_strtod() {
    assert_eq!(parse_float(b"1.5"), Some(1.5));
    assert_eq!(parse_float(b"-.5"), Some(-0.5));
    assert_eq!(parse_float(b"+2e3"), Some(2000.0));
    assert_eq!(parse_float(b"0x10"), Some(16.0));
    assert_eq!(parse_float(b"0x1.8p1"), Some(3.0));
    assert_eq!(parse_float(b"-0X.8"), Some(-0.5));
    assert_eq!(parse_float(b"inf"), None);
    assert_eq!(parse_float(b"nan"), None);
    assert_eq!(parse_float(b"1e400"), None);
    assert_eq!(parse_float(b"1e"), None);
    assert_eq!(parse_float(b"1.5x"), None);
    assert_eq!(parse_float(b"0x"), None);
    assert_eq!(parse_float(b""), None);
}

/// Endless output is read in buffer-sized pieces; a token far longer than the
/// judge's is rejected without being held whole.
#[test]
fn huge_outputs_stream() {
    struct Repeat(u64, u8);
    impl io::Read for Repeat {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = usize::try_from(self.0).unwrap_or(usize::MAX).min(buf.len());
            buf[..n].fill(self.1);
            self.0 -= n as u64;
            Ok(n)
        }
    }
    let gib = 1u64 << 30;
    let out = io::BufReader::with_capacity(1 << 16, Repeat(gib / 16, b'a'));
    let j = validate("a\n".as_bytes(), out, &flags()).unwrap();
    assert!(!j.accepted);
    assert!(j.message.len() < 1000);
    let spaces = io::BufReader::with_capacity(1 << 16, Repeat(gib / 16, b' '));
    assert!(validate("".as_bytes(), spaces, &flags()).unwrap().accepted);
}

/// Issue 10 point 7: hexadecimal floats at the exponent and precision edges are
/// read as glibc reads them, and a tolerance may be written in hex.
#[test]
fn hex_floats_at_the_edges_compare_as_glibc_reads_them() {
    let exact = flags()
        .with_args(&["float_tolerance".into(), "0".into()])
        .unwrap();
    // An exponent <= -1024 with a mantissa that brings it back into range.
    assert!(accepts("0x1p-1021\n", "0x10p-1025\n", &exact));
    assert!(accepts("0x1p-1074\n", "0x0.0000000000001p-1022\n", &exact));
    // An exponent >= 1024 on a zero mantissa is 0, not NaN.
    assert!(accepts("0\n", "0x0p2000\n", &exact));
    assert!(accepts("0x0p2000\n", "0\n", &exact));
    // A mantissa longer than 53 bits is rounded once.
    assert!(accepts(
        "1.0000000000000002\n",
        "0x1.000000000000081p0\n",
        &exact
    ));
    assert!(!accepts("1\n", "0x1.000000000000081p0\n", &exact));
    assert!(
        accepts("1\n", "0x1.00000000000008p0\n", &exact),
        "a tie rounds to even"
    );
    // A tolerance written in hex.
    let half = flags()
        .with_args(&["float_tolerance".into(), "0x1p-1".into()])
        .unwrap();
    assert_eq!(half.float_absolute_tolerance, Some(0.5));
    assert!(accepts("1\n", "1.5\n", &half));
    assert!(!accepts("1\n", "1.6\n", &half));
    assert!(
        flags()
            .with_args(&["float_tolerance".into(), "inf".into()])
            .is_err()
    );
}
