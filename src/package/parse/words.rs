//! Splitting flag strings (`validator_flags: float_tolerance 1e-6`) into words the
//! way a POSIX shell would (Kattis splits them with Python's `shlex.split`).

/// Splits `text` into words: whitespace separates, `'...'` is literal, `"..."`
/// honours `\"`, `\\`, `\$` and `` \` ``, and a backslash outside quotes escapes the
/// next character. An unterminated quote is an error.
pub(crate) fn split_words(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err(format!("unterminated ' in {text:?}")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some('\n') => {}
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err(format!("unterminated \" in {text:?}")),
                        },
                        Some(c) => word.push(c),
                        None => return Err(format!("unterminated \" in {text:?}")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some('\n') | None => {}
                    Some(c) => word.push(c),
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_a_shell() {
        assert_eq!(
            split_words("  float_tolerance 1e-6\tcase_sensitive ").unwrap(),
            ["float_tolerance", "1e-6", "case_sensitive"]
        );
        assert_eq!(
            split_words(r#"a 'b c' "d \"e\"" f\ g ''"#).unwrap(),
            ["a", "b c", "d \"e\"", "f g", ""]
        );
        assert!(split_words("").unwrap().is_empty());
        assert!(split_words("'open").is_err());
        assert!(split_words("\"open").is_err());
    }
}
