//! Floating-point numbers as C's `strtod` reads them, for the default output
//! validator's tokens and its `float_tolerance` flags (a leaf: imports nothing of ours).
//!
//! Decimal numbers go through Rust's parser, which rounds correctly as glibc does.
//! C99 hexadecimal floats (`0x1.8p3`) are read as glibc reads them: the whole
//! mantissa (its first 60 significant bits, the rest kept as a sticky bit), the
//! binary exponent added without overflow, then one correctly rounded step to a
//! double (round to nearest, ties to even; subnormals rounded at their own
//! precision; past the range → infinity, below it → zero). So `0x10p-1025` is the
//! normal number 2^-1021, `0x0p2000` is 0, and a mantissa of 30 digits is rounded
//! once, not digit by digit.

/// The whole of `s` as a finite float, decimal or hexadecimal, with an optional
/// sign; `None` for anything else (`inf`, `nan`, `1e`, `0x`, a value out of range).
pub fn parse_finite(s: &str) -> Option<f64> {
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    let bytes = unsigned.as_bytes();
    let value = match bytes {
        [b'0', b'x' | b'X', ..] => {
            let v = parse_hex(&unsigned[2..])?;
            if s.starts_with('-') { -v } else { v }
        }
        [first, ..] if first.is_ascii_digit() || *first == b'.' => s.parse::<f64>().ok()?,
        // "inf", "nan" and friends: strtod reads them, the validator does not.
        _ => return None,
    };
    value.is_finite().then_some(value)
}

/// Significant bits of the mantissa kept exactly; the rest only as "not zero".
const KEPT_BITS: u32 = 60;
/// Exponents are clamped here: far past where any value rounds to 0 or infinity.
const EXP_CLAMP: i64 = 1 << 40;

/// `HEX[.HEX][(p|P)[+-]DEC]` after the `0x` prefix; `None` when malformed.
fn parse_hex(s: &str) -> Option<f64> {
    let (mantissa, exp) = match s.find(['p', 'P']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    // value = (mant + sticky fraction) * 2^exp2
    let mut mant: u64 = 0;
    let mut sticky = false;
    let mut exp2: i64 = 0;
    for (digits, fraction) in [(int_part, false), (frac_part, true)] {
        for c in digits.bytes() {
            let d = u64::from(char::from(c).to_digit(16)?);
            if mant >> (KEPT_BITS - 4) == 0 {
                mant = mant * 16 + d;
                if fraction {
                    exp2 -= 4;
                }
            } else {
                sticky |= d != 0;
                if !fraction {
                    exp2 += 4;
                }
            }
        }
    }
    if let Some(e) = exp {
        let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let mut value: i64 = 0;
        for b in digits.bytes() {
            value = (value * 10 + i64::from(b - b'0')).min(EXP_CLAMP);
        }
        exp2 += if e.starts_with('-') { -value } else { value };
    }
    Some(round_to_f64(
        mant,
        sticky,
        exp2.clamp(-EXP_CLAMP, EXP_CLAMP),
    ))
}

/// `(mant + ε) * 2^exp2` rounded once to the nearest double, ties to even, where
/// ε is in (0, 1) when `sticky` and 0 otherwise.
fn round_to_f64(mant: u64, sticky: bool, exp2: i64) -> f64 {
    if mant == 0 {
        return 0.0; // a sticky bit needs a non-zero digit before it
    }
    let bits = i64::from(64 - mant.leading_zeros());
    // The exponent of the leading bit, and how many bits the result keeps:
    // 53 for a normal double, fewer for a subnormal one (none below 2^-1075).
    let top = exp2 + bits - 1;
    if top > 1023 {
        return f64::INFINITY;
    }
    let keep = if top >= -1022 { 53 } else { 53 - (-1022 - top) };
    if keep < 0 {
        return 0.0; // below half the smallest subnormal
    }
    let drop = bits - keep;
    let (q, scale) = if drop <= 0 {
        (mant, exp2)
    } else {
        // drop ≤ 64 here (keep ≥ 0, bits ≤ 64).
        let drop = u32::try_from(drop).unwrap_or(64);
        let q = mant.checked_shr(drop).unwrap_or(0);
        let rest = mant & (u64::MAX.checked_shr(64 - drop).unwrap_or(0));
        let half = 1u64 << (drop - 1);
        let q = if rest > half || (rest == half && (sticky || q & 1 == 1)) {
            q + 1
        } else {
            q
        };
        (q, exp2 + i64::from(drop))
    };
    // q < 2^54 is exact as a double. Scaling by powers of two in steps is exact
    // too: the rounding above made the final value representable (or it
    // overflows, correctly, to infinity), and every step before it has the same
    // bits at a higher exponent.
    #[allow(clippy::cast_precision_loss)]
    let mut value = q as f64;
    let mut k = scale;
    while k > 0 {
        let step = k.min(1000);
        value *= pow2(step);
        k -= step;
    }
    while k < 0 {
        let step = k.max(-1000);
        value *= pow2(step);
        k -= step;
    }
    value
}

/// 2^e for |e| ≤ 1000, exactly.
fn pow2(e: i64) -> f64 {
    // 1023 + e is in 23..=2023: a normal double's biased exponent.
    let biased = u64::try_from(1023 + e).unwrap_or(1023);
    f64::from_bits(biased << 52)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::float_cmp)]
    use super::*;

    fn hex(s: &str) -> f64 {
        parse_finite(s).unwrap()
    }

    #[test]
    fn plain_hex() {
        assert_eq!(hex("0x1p0"), 1.0);
        assert_eq!(hex("0x1.8p1"), 3.0);
        assert_eq!(hex("-0X.8"), -0.5);
        assert_eq!(hex("0xAp-1"), 5.0);
        assert_eq!(hex("0x1."), 1.0);
        assert!(parse_finite("0x").is_none());
        assert!(parse_finite("0x.p1").is_none());
        assert!(parse_finite("0x1p").is_none());
        assert!(parse_finite("0x1g").is_none());
    }

    #[test]
    fn exponent_edges() {
        assert_eq!(hex("0x10p-1025"), hex("0x1p-1021"));
        assert_eq!(hex("0x10p-1025"), f64::from_bits(2 << 52), "2^-1021");
        assert_eq!(hex("0x0p2000"), 0.0);
        assert!(parse_finite("0x0.0000001p99999999999999999999").is_none());
        assert_eq!(hex("0x0.0000001p-99999999999999999999"), 0.0);
        assert_eq!(hex("0x1p-1074"), f64::from_bits(1));
        assert_eq!(hex("0x1p-1075"), 0.0, "a tie rounds to even: 0");
        assert_eq!(hex("0x1.0000001p-1075"), f64::from_bits(1));
        assert_eq!(hex("0x3p-1076"), f64::from_bits(1), "0.75 ulp rounds up");
        assert_eq!(hex("0x1.fffffffffffffp1023"), f64::MAX);
        assert!(parse_finite("0x1p1024").is_none());
        assert!(
            parse_finite("0x1.fffffffffffff8p1023").is_none(),
            "rounds up to 2^1024"
        );
        assert_eq!(hex("0x8p1020"), 2f64.powi(1023));
        assert_eq!(hex("0x0.00000000001p1063"), 2f64.powi(1019));
        assert!(parse_finite("0x0.00000000001p1068").is_none());
        assert_eq!(hex("0x1p-1022"), f64::MIN_POSITIVE);
        assert_eq!(
            hex("0x0.fffffffffffff8p-1022"),
            f64::MIN_POSITIVE,
            "rounds up to normal"
        );
    }

    #[test]
    fn long_mantissas_round_once() {
        // 1 + 2^-53 + tiny: above the halfway point, so it rounds up.
        assert_eq!(hex("0x1.000000000000081p0"), 1.0 + f64::EPSILON);
        // Exactly halfway: ties to even (down here, up from an odd last bit).
        assert_eq!(hex("0x1.00000000000008p0"), 1.0);
        assert_eq!(hex("0x1.00000000000018p0"), 1.0 + 2.0 * f64::EPSILON);
        // The sticky bit decides a tie that a 60-bit prefix cannot see.
        assert_eq!(
            hex("0x1.000000000000080000000000000000001p0"),
            1.0 + f64::EPSILON
        );
        assert_eq!(hex(&format!("0x1{}p-104", "0".repeat(26))), 1.0);
        assert_eq!(hex("0x000000000000000000000000001p0"), 1.0);
    }

    #[test]
    fn decimal_and_refused() {
        assert_eq!(parse_finite("1.5"), Some(1.5));
        assert_eq!(parse_finite("+.5e1"), Some(5.0));
        assert_eq!(parse_finite("1."), Some(1.0));
        for bad in [
            "inf",
            "nan",
            "-infinity",
            "1e",
            "1e+",
            ".",
            "",
            "+",
            "1e400",
            "0x1p5000",
        ] {
            assert!(parse_finite(bad).is_none(), "{bad}");
        }
    }
}
