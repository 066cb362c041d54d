//! Sizes and durations as operators write them on the command line ("256M", "1G",
//! "1.5"). A leaf module: every other module may use it, it uses none of ours.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A byte count parsed from `1234`, `64K`, `256M`, `1G` or `2T` (binary multiples;
/// an optional trailing `B`/`iB` is accepted, case-insensitive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub const fn bytes(self) -> u64 {
        self.0
    }
    pub const fn mib(n: u64) -> Self {
        ByteSize(n * 1024 * 1024)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("invalid size {0:?}: expected bytes or a number with K, M, G or T (e.g. 256M)")]
    Size(String),
    #[error("invalid duration {0:?}: expected seconds, e.g. 1.5")]
    Seconds(String),
}

impl FromStr for ByteSize {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || UnitError::Size(s.to_string());
        let t = s.trim();
        let lower = t.to_ascii_lowercase();
        let body = lower
            .strip_suffix("ib")
            .or_else(|| lower.strip_suffix('b'))
            .unwrap_or(&lower);
        let (digits, shift) = match body.chars().last() {
            Some('k') => (&body[..body.len() - 1], 10),
            Some('m') => (&body[..body.len() - 1], 20),
            Some('g') => (&body[..body.len() - 1], 30),
            Some('t') => (&body[..body.len() - 1], 40),
            Some(c) if c.is_ascii_digit() => (body, 0),
            _ => return Err(bad()),
        };
        let digits = digits.trim();
        if digits.is_empty() {
            return Err(bad());
        }
        if let Ok(n) = digits.parse::<u64>() {
            return n.checked_mul(1u64 << shift).map(ByteSize).ok_or_else(bad);
        }
        // "1.5G": fractional sizes are allowed with a unit, rounded down to a byte.
        let f: f64 = digits.parse().map_err(|_| bad())?;
        let bytes = f * (1u64 << shift) as f64;
        if !bytes.is_finite() || bytes < 0.0 || bytes >= u64::MAX as f64 || shift == 0 {
            return Err(bad());
        }
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Ok(ByteSize(bytes as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 4] = [
            (1 << 40, "T"),
            (1 << 30, "G"),
            (1 << 20, "M"),
            (1 << 10, "K"),
        ];
        for (size, unit) in UNITS {
            if self.0 >= size && self.0.is_multiple_of(size) {
                return write!(f, "{}{unit}", self.0 / size);
            }
        }
        write!(f, "{}", self.0)
    }
}

/// A non-negative number of seconds, possibly fractional ("0.5", "2").
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Seconds(pub f64);

impl Seconds {
    pub fn duration(self) -> Duration {
        Duration::from_secs_f64(self.0)
    }
}

impl FromStr for Seconds {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let t = t.strip_suffix('s').unwrap_or(t);
        match t.parse::<f64>() {
            Ok(v) if v.is_finite() && (0.0..1e9).contains(&v) => Ok(Seconds(v)),
            _ => Err(UnitError::Seconds(s.to_string())),
        }
    }
}

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!("1234".parse::<ByteSize>(), Ok(ByteSize(1234)));
        assert_eq!("64K".parse::<ByteSize>(), Ok(ByteSize(64 << 10)));
        assert_eq!("256M".parse::<ByteSize>(), Ok(ByteSize(256 << 20)));
        assert_eq!("256MiB".parse::<ByteSize>(), Ok(ByteSize(256 << 20)));
        assert_eq!("1g".parse::<ByteSize>(), Ok(ByteSize(1 << 30)));
        assert_eq!("1.5G".parse::<ByteSize>(), Ok(ByteSize(3 << 29)));
        assert!("".parse::<ByteSize>().is_err());
        assert!("M".parse::<ByteSize>().is_err());
        assert!("-1".parse::<ByteSize>().is_err());
        assert!("12X".parse::<ByteSize>().is_err());
        assert!("99999999999T".parse::<ByteSize>().is_err());
        assert_eq!(ByteSize(256 << 20).to_string(), "256M");
        assert_eq!(ByteSize(1000).to_string(), "1000");
    }

    #[test]
    fn seconds_parse() {
        assert_eq!("1.5".parse::<Seconds>(), Ok(Seconds(1.5)));
        assert_eq!("2s".parse::<Seconds>(), Ok(Seconds(2.0)));
        assert!("-1".parse::<Seconds>().is_err());
        assert!("inf".parse::<Seconds>().is_err());
        assert!("x".parse::<Seconds>().is_err());
    }
}
