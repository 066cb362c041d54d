//! The default output validator, with problemtools' semantics and messages
//! (`support/default_validator/default_validator.cc`), run in-process and
//! streaming: neither the answer nor the submission's output is loaded whole.
//!
//! Tokens are compared one by one; whitespace is skipped unless
//! `space_change_sensitive`; strings compare ASCII-case-insensitively unless
//! `case_sensitive`; when a float tolerance is set and the judge's token is a
//! finite float, the submission's token must be a float within the tolerance
//! (absolute or relative, either suffices).

use std::io::{self, BufRead};

use crate::package::DefaultValidatorFlags;

/// A submission token longer than this is kept only as far as needed: it cannot
/// equal a shorter judge token, and a float written with more characters than
/// this is treated as not a float.
const FLOAT_TOKEN_KEEP: usize = 1 << 20;
/// Tokens quoted in the judge message are cut to this many bytes.
const QUOTE_MAX: usize = 200;

/// What the default validator decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub accepted: bool,
    /// `judgemessage.txt` as problemtools writes it (empty when accepted).
    pub message: String,
}

/// The subset of C's `isspace` in the "C" locale.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// A byte stream with one byte of look-ahead over a `BufRead`.
struct Stream<R> {
    inner: R,
    pos: u64,
    line: u64,
}

/// A token as read; `bytes` holds at most the kept prefix, `len` the full length.
struct Token {
    bytes: Vec<u8>,
    len: u64,
}

impl Token {
    fn truncated(&self) -> bool {
        self.len > self.bytes.len() as u64
    }

    fn quoted(&self) -> String {
        let cut = self.bytes.len().min(QUOTE_MAX);
        let mut s = String::from_utf8_lossy(&self.bytes[..cut]).into_owned();
        if self.truncated() || cut < self.bytes.len() {
            s.push_str("...");
        }
        s
    }
}

impl<R: BufRead> Stream<R> {
    fn new(inner: R) -> Self {
        Stream {
            inner,
            pos: 0,
            line: 1,
        }
    }

    fn peek(&mut self) -> io::Result<Option<u8>> {
        Ok(self.inner.fill_buf()?.first().copied())
    }

    fn next(&mut self) -> io::Result<Option<u8>> {
        let b = self.peek()?;
        if b.is_some() {
            self.inner.consume(1);
        }
        Ok(b)
    }

    /// Reads the next run of non-space bytes (none when at a space or the end),
    /// keeping at most `keep` bytes of it. Does not advance `pos`: the caller
    /// does, as problemtools counts positions per compared token.
    fn token(&mut self, keep: usize) -> io::Result<Option<Token>> {
        let mut tok = Token {
            bytes: Vec::new(),
            len: 0,
        };
        loop {
            let buf = self.inner.fill_buf()?;
            if buf.is_empty() {
                break;
            }
            let n = buf.iter().position(|&b| is_space(b)).unwrap_or(buf.len());
            let room = keep.saturating_sub(tok.bytes.len()).min(n);
            tok.bytes.extend_from_slice(&buf[..room]);
            tok.len += n as u64;
            let done = n < buf.len();
            self.inner.consume(n);
            if done {
                break;
            }
        }
        Ok((tok.len > 0).then_some(tok))
    }
}

/// Parses a float as `sscanf("%lf%10s")` accepts it: the whole token, decimal or
/// C99 hexadecimal (read as glibc reads it: `crate::cfloat`), finite.
pub(crate) fn parse_float(token: &[u8]) -> Option<f64> {
    crate::cfloat::parse_finite(std::str::from_utf8(token).ok()?)
}

fn show_byte(b: Option<u8>) -> i32 {
    b.map_or(-1, i32::from)
}

/// The comparison state: both streams and the flags.
struct Comparison<'f, A, U> {
    judge: Stream<A>,
    user: Stream<U>,
    flags: &'f DefaultValidatorFlags,
}

/// Why the output was rejected (problemtools' wording), or an I/O failure.
enum Stop {
    Wrong(String),
    Io(io::Error),
}

impl From<io::Error> for Stop {
    fn from(e: io::Error) -> Self {
        Stop::Io(e)
    }
}

impl<A: BufRead, U: BufRead> Comparison<'_, A, U> {
    fn skip_space(&mut self) -> Result<(), Stop> {
        let sensitive = self.flags.space_change_sensitive;
        while let Some(c) = self.judge.peek()?.filter(|&b| is_space(b)) {
            self.judge.next()?;
            if sensitive {
                let d = self.user.next()?;
                if d != Some(c) {
                    return Err(Stop::Wrong(format!(
                        "Space change error: got {} expected {}",
                        show_byte(d),
                        c
                    )));
                }
                if d == Some(b'\n') {
                    self.user.line += 1;
                }
                self.user.pos += 1;
            }
            if c == b'\n' {
                self.judge.line += 1;
            }
            self.judge.pos += 1;
        }
        while let Some(d) = self.user.peek()?.filter(|&b| is_space(b)) {
            if sensitive {
                return Err(Stop::Wrong(format!(
                    "Space change error: judge out of space, got {d} from user"
                )));
            }
            self.user.next()?;
            if d == b'\n' {
                self.user.line += 1;
            }
            self.user.pos += 1;
        }
        Ok(())
    }

    fn compare_tokens(&self, judge: &Token, user: &Token) -> Result<(), Stop> {
        let flags = self.flags;
        let abs_tol = flags.float_absolute_tolerance.unwrap_or(-1.0);
        let rel_tol = flags.float_relative_tolerance.unwrap_or(-1.0);
        let use_floats = abs_tol >= 0.0 || rel_tol >= 0.0;
        if let Some(jval) = use_floats.then(|| parse_float(&judge.bytes)).flatten() {
            let Some(tval) = (!user.truncated())
                .then(|| parse_float(&user.bytes))
                .flatten()
            else {
                return Err(Stop::Wrong(format!(
                    "Expected float, got: {}",
                    user.quoted()
                )));
            };
            let diff = (jval - tval).abs();
            // Written as problemtools writes it: a NaN difference is never within tolerance.
            let within = diff <= abs_tol || diff <= rel_tol * jval.abs();
            if !within {
                return Err(Stop::Wrong(format!(
                    "Too large difference.\n Judge: {}\n User: {}\n Difference: {:e}\n (abs tol {:e} rel tol {:e})",
                    judge.quoted(),
                    user.quoted(),
                    jval - tval,
                    abs_tol,
                    rel_tol
                )));
            }
            return Ok(());
        }
        let equal = judge.len == user.len
            && if flags.case_sensitive {
                judge.bytes == user.bytes
            } else {
                judge.bytes.eq_ignore_ascii_case(&user.bytes)
            };
        if equal {
            Ok(())
        } else {
            Err(Stop::Wrong(format!(
                "String tokens mismatch\nJudge: \"{}\"\nUser: \"{}\"",
                judge.quoted(),
                user.quoted()
            )))
        }
    }

    fn run(&mut self) -> Result<(), Stop> {
        for index in 0u64.. {
            self.skip_space()?;
            let Some(judge) = self.judge.token(usize::MAX)? else {
                break;
            };
            let keep = usize::try_from(judge.len)
                .unwrap_or(usize::MAX)
                .max(FLOAT_TOKEN_KEEP)
                .saturating_add(1);
            let Some(user) = self.user.token(keep)? else {
                let what = match (index, self.user.pos) {
                    (0, 0) => "; user output was empty.",
                    (0, _) => "; user output contained no tokens.",
                    _ => "",
                };
                return Err(Stop::Wrong(format!(
                    "User EOF while judge had more output{what}\n(Next judge token: {})",
                    judge.quoted()
                )));
            };
            self.compare_tokens(&judge, &user)?;
            self.judge.pos += judge.len;
            self.user.pos += user.len;
        }
        // Whatever is left: problemtools reads one more token, skipping space.
        while self.user.peek()?.is_some_and(is_space) {
            self.user.next()?;
        }
        if let Some(extra) = self.user.token(QUOTE_MAX + 1)? {
            return Err(Stop::Wrong(format!("Trailing output:\n{}", extra.quoted())));
        }
        Ok(())
    }
}

/// Compares the submission's output with the judge's answer.
/// `Err` only when reading either stream failed.
pub fn validate(
    answer: impl BufRead,
    output: impl BufRead,
    flags: &DefaultValidatorFlags,
) -> io::Result<Judgement> {
    let mut cmp = Comparison {
        judge: Stream::new(answer),
        user: Stream::new(output),
        flags,
    };
    match cmp.run() {
        Ok(()) => Ok(Judgement {
            accepted: true,
            message: String::new(),
        }),
        Err(Stop::Wrong(why)) => Ok(Judgement {
            accepted: false,
            message: format!(
                "Wrong answer on line {} of output (corresponding to line {} in answer file)\n{why}\n",
                cmp.user.line, cmp.judge.line
            ),
        }),
        Err(Stop::Io(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests;
