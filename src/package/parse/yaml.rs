//! Reading the package's YAML files leniently but precisely: a value of the wrong
//! shape is an error naming the file and the key, an unknown key a warning.

use std::fs;
use std::io;
use std::path::Path;

use serde_yaml_ng::{Mapping, Value};

use super::words::split_words;
use crate::package::error::PackageError;

/// Loads a YAML mapping. A missing file is `None`, an empty one an empty mapping;
/// anything that is not a mapping is an error naming the file.
pub(super) fn load_mapping(path: &Path) -> Result<Option<Mapping>, PackageError> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(PackageError::invalid(path, format!("cannot read: {e}"))),
    };
    let value: Value = serde_yaml_ng::from_str(&text)
        .map_err(|e| PackageError::invalid(path, format!("not valid YAML: {e}")))?;
    match value {
        Value::Null => Ok(Some(Mapping::new())),
        Value::Mapping(map) => Ok(Some(map)),
        _ => Err(PackageError::invalid(path, "expected a mapping of keys")),
    }
}

/// The keys of `map` as strings (non-string keys are shown as YAML).
pub(super) fn keys(map: &Mapping) -> impl Iterator<Item = String> + '_ {
    map.keys().map(|k| match k {
        Value::String(s) => s.clone(),
        other => serde_yaml_ng::to_string(other)
            .unwrap_or_default()
            .trim()
            .to_string(),
    })
}

/// A typed view of one YAML file for error messages.
pub(super) struct Doc<'a> {
    pub path: &'a Path,
    pub map: &'a Mapping,
}

impl<'a> Doc<'a> {
    pub fn error(&self, key: &str, expected: &str) -> PackageError {
        PackageError::invalid(self.path, format!("`{key}`: expected {expected}"))
    }

    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// A string (numbers and booleans are taken as written).
    pub fn string(&self, key: &str) -> Result<Option<String>, PackageError> {
        self.get(key)
            .map(|v| scalar_string(v).ok_or_else(|| self.error(key, "a string")))
            .transpose()
    }

    /// A number, or a string holding one.
    pub fn number(&self, key: &str) -> Result<Option<f64>, PackageError> {
        self.get(key)
            .map(|v| number(v).ok_or_else(|| self.error(key, "a number")))
            .transpose()
    }

    /// A positive number.
    pub fn positive(&self, key: &str) -> Result<Option<f64>, PackageError> {
        match self.number(key)? {
            Some(n) if n > 0.0 && n.is_finite() => Ok(Some(n)),
            Some(_) => Err(self.error(key, "a number greater than 0")),
            None => Ok(None),
        }
    }

    /// Words: a string split like a shell would, or a sequence of strings.
    pub fn words(&self, key: &str) -> Result<Option<Vec<String>>, PackageError> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        if let Some(seq) = value.as_sequence() {
            return seq
                .iter()
                .map(|v| scalar_string(v).ok_or_else(|| self.error(key, "a list of strings")))
                .collect::<Result<Vec<_>, _>>()
                .map(Some);
        }
        let text = scalar_string(value).ok_or_else(|| self.error(key, "a string or a list"))?;
        split_words(&text)
            .map(Some)
            .map_err(|e| PackageError::invalid(self.path, format!("`{key}`: {e}")))
    }

    pub fn mapping(&self, key: &str) -> Result<Option<&'a Mapping>, PackageError> {
        self.get(key)
            .map(|v| v.as_mapping().ok_or_else(|| self.error(key, "a mapping")))
            .transpose()
    }
}

pub(super) fn scalar_string(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A YAML number, or a string that parses as one (`inf`, `-inf`, `+inf` included).
pub(super) fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => parse_float(s),
        _ => None,
    }
}

pub(super) fn parse_float(text: &str) -> Option<f64> {
    let t = text.trim();
    let t = t.strip_prefix('+').unwrap_or(t);
    t.parse::<f64>().ok().filter(|v| !v.is_nan())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn typed_access() {
        let map: Mapping =
            serde_yaml_ng::from_str("a: 2\nb: '1.5'\nc: x y 'z w'\nd: [p, q]\ne: -1\nf: [1, {}]")
                .unwrap();
        let doc = Doc {
            path: Path::new("t.yaml"),
            map: &map,
        };
        assert_eq!(doc.number("a").unwrap(), Some(2.0));
        assert_eq!(doc.positive("b").unwrap(), Some(1.5));
        assert!(doc.positive("e").is_err());
        assert_eq!(doc.words("c").unwrap().unwrap(), ["x", "y", "z w"]);
        assert_eq!(doc.words("d").unwrap().unwrap(), ["p", "q"]);
        assert!(doc.words("f").is_err());
        assert_eq!(doc.string("missing").unwrap(), None);
        assert_eq!(parse_float("+inf"), Some(f64::INFINITY));
        assert_eq!(parse_float("-inf"), Some(f64::NEG_INFINITY));
    }
}
