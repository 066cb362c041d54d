//! Java's main class (contract §2, 2026-12): the class declaring
//! `public static void main(String[])`, package-qualified, whatever the files
//! are called. Found after compiling, in the class files javac wrote (JVMS §4),
//! not in the sources: comments, strings, generics, annotations, `String...
//! args` or `final String[] a` are javac's business, and a class file states
//! its binary name, its methods' flags and descriptors, and the source file it
//! came from exactly.
//!
//! The class files were written by a sandboxed compiler, so they are read as
//! untrusted input: regular files only (no links followed), bounded in size,
//! count and depth, parsed with bounds checks (a malformed file is skipped).

use std::path::Path;

/// `main`'s descriptor: one `String[]` argument, `void`.
const MAIN_DESCRIPTOR: &[u8] = b"([Ljava/lang/String;)V";
const ACC_PUBLIC: u16 = 0x0001;
const ACC_STATIC: u16 = 0x0008;
const ACC_MODULE: u16 = 0x8000;
/// Larger class files than this are not looked into (javac's are far smaller).
const CLASS_FILE_MAX: u64 = 16 << 20;
const FILES_MAX: usize = 10_000;
const DEPTH_MAX: usize = 32;

/// A class with a `main` method, as its class file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MainClass {
    /// Binary name with dots: `a.b.Main`, `Outer$Inner`.
    pub name: String,
    /// The `SourceFile` attribute: the source file's name, without directories.
    pub source: Option<String>,
    /// Declared `public`.
    pub public: bool,
}

/// The main class of a compiled submission in `dir`; `sources` are the
/// submission's source files in the order they were given. Several: the one
/// from the first source; then a public class before others, a top-level one
/// (no `$` in its name) before a nested one, then by name.
pub(crate) fn main_class(dir: &Path, sources: &[String]) -> Result<String, String> {
    let mut found = Vec::new();
    let mut budget = FILES_MAX;
    walk(dir, 0, &mut budget, &mut found);
    let rank = |c: &MainClass| {
        let source = c
            .source
            .as_ref()
            .and_then(|s| sources.iter().position(|x| x == s))
            .unwrap_or(usize::MAX);
        (source, !c.public, c.name.contains('$'), c.name.clone())
    };
    found
        .into_iter()
        .min_by_key(rank)
        .map(|c| c.name)
        .ok_or_else(|| "no class declares `public static void main(String[])`".to_string())
}

fn walk(dir: &Path, depth: usize, budget: &mut usize, found: &mut Vec<MainClass>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        // `file_type` does not follow links: a link is neither a dir nor a file.
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() && depth < DEPTH_MAX {
            walk(&path, depth + 1, budget, found);
        } else if kind.is_file()
            && path.extension().is_some_and(|e| e == "class")
            && let Some(c) = read_class(&path)
        {
            found.push(c);
        }
    }
}

fn read_class(path: &Path) -> Option<MainClass> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > CLASS_FILE_MAX {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(CLASS_FILE_MAX).read_to_end(&mut bytes).ok()?;
    parse(&bytes)
}

/// A big-endian reader that answers `None` past the end.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let slice = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(slice)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

#[derive(Clone, Copy)]
enum Constant<'a> {
    Utf8(&'a [u8]),
    Class(u16),
    Other,
}

/// Whether a class file declares `public static void main(String[])`; its
/// name and source file when it does.
pub(crate) fn parse(bytes: &[u8]) -> Option<MainClass> {
    let mut r = Reader { bytes, at: 0 };
    if r.u32()? != 0xCAFE_BABE {
        return None;
    }
    r.take(4)?; // minor, major version
    let count = usize::from(r.u16()?);
    let mut pool: Vec<Constant<'_>> = vec![Constant::Other; count.max(1)];
    let mut i = 1;
    while i < count {
        let tag = r.u8()?;
        let mut slots = 1;
        pool[i] = match tag {
            1 => {
                let len = usize::from(r.u16()?);
                Constant::Utf8(r.take(len)?)
            }
            7 => Constant::Class(r.u16()?),
            8 | 16 | 19 | 20 => {
                r.take(2)?;
                Constant::Other
            }
            15 => {
                r.take(3)?;
                Constant::Other
            }
            3 | 4 | 9 | 10 | 11 | 12 | 17 | 18 => {
                r.take(4)?;
                Constant::Other
            }
            5 | 6 => {
                r.take(8)?;
                slots = 2;
                Constant::Other
            }
            _ => return None,
        };
        i += slots;
    }
    let utf8 = |index: u16| match pool.get(usize::from(index)) {
        Some(Constant::Utf8(s)) => Some(*s),
        _ => None,
    };
    let access = r.u16()?;
    let this_class = r.u16()?;
    if access & ACC_MODULE != 0 {
        return None;
    }
    let name = match pool.get(usize::from(this_class)) {
        Some(Constant::Class(n)) => utf8(*n)?,
        _ => return None,
    };
    r.u16()?; // super class
    let interfaces = usize::from(r.u16()?);
    r.take(interfaces.checked_mul(2)?)?;
    skip_members(&mut r)?; // fields
    let mut has_main = false;
    for _ in 0..r.u16()? {
        let flags = r.u16()?;
        let method = utf8(r.u16()?)?;
        let descriptor = utf8(r.u16()?)?;
        skip_attributes(&mut r)?;
        let wanted = ACC_PUBLIC | ACC_STATIC;
        if method == b"main" && descriptor == MAIN_DESCRIPTOR && flags & wanted == wanted {
            has_main = true;
        }
    }
    if !has_main {
        return None;
    }
    let mut source = None;
    for _ in 0..r.u16()? {
        let attribute = utf8(r.u16()?)?;
        let len = usize::try_from(r.u32()?).ok()?;
        let body = r.take(len)?;
        if attribute == b"SourceFile" && body.len() == 2 {
            let file = utf8(u16::from_be_bytes([body[0], body[1]]))?;
            source = Some(String::from_utf8_lossy(file).into_owned());
        }
    }
    Some(MainClass {
        name: String::from_utf8_lossy(name).replace('/', "."),
        source,
        public: access & ACC_PUBLIC != 0,
    })
}

fn skip_attributes(r: &mut Reader<'_>) -> Option<()> {
    for _ in 0..r.u16()? {
        r.u16()?;
        let len = usize::try_from(r.u32()?).ok()?;
        r.take(len)?;
    }
    Some(())
}

fn skip_members(r: &mut Reader<'_>) -> Option<()> {
    for _ in 0..r.u16()? {
        r.take(6)?; // access, name, descriptor
        skip_attributes(r)?;
    }
    Some(())
}

/// The names a Java submission's files are written under: a source whose
/// public top-level type is `X` becomes `X.java` (javac insists), unless another
/// file already has that name; every other file keeps its own.
pub(crate) fn file_names(
    files: &[super::SourceFile],
    is_source: impl Fn(&str) -> bool,
) -> Vec<String> {
    let mut taken: std::collections::HashSet<String> =
        files.iter().map(|f| f.name.clone()).collect();
    files
        .iter()
        .map(|f| {
            let own = f.name.clone();
            if !is_source(&f.name) {
                return own;
            }
            let Some(ext) = f.name.rsplit_once('.').map(|(_, e)| e) else {
                return own;
            };
            let Some(public) = public_type(&String::from_utf8_lossy(&f.content)) else {
                return own;
            };
            let wanted = format!("{public}.{ext}");
            if wanted == own || wanted.len() > 255 || taken.contains(&wanted) {
                return own;
            }
            taken.insert(wanted.clone());
            wanted
        })
        .collect()
}

/// The public top-level type a Java source declares (`public class X`,
/// `public final class X`, `public interface X`, `public enum X`, `public
/// record X`, `public @interface X`), if any. javac wants such a type in a file
/// named `X.java`; the judge writes the source under that name, so a
/// submission's file names never matter (contract §2: "whatever the file
/// names"). A small scanner: comments, string and character literals and text
/// blocks are skipped, and only tokens outside every brace and parenthesis
/// count. A mistake here costs nothing worse than javac's own error.
pub(crate) fn public_type(source: &str) -> Option<String> {
    let b = source.as_bytes();
    let mut i = 0;
    let mut depth = 0usize; // braces and parentheses
    let mut public = false; // `public` among this declaration's modifiers
    let mut expect_name = false; // just after class/interface/enum/record
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                i += 1;
            }
            i += 2;
        } else if b[i..].starts_with(b"\"\"\"") {
            i += 3;
            while i < b.len() && !b[i..].starts_with(b"\"\"\"") {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 3;
        } else if c == b'"' || c == b'\'' {
            i += 1;
            while i < b.len() && b[i] != c && b[i] != b'\n' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == b'{' || c == b'(' {
            depth += 1;
            expect_name = false;
            i += 1;
        } else if c == b'}' || c == b')' {
            depth = depth.saturating_sub(1);
            if depth == 0 && c == b'}' {
                public = false;
            }
            i += 1;
        } else if c == b';' {
            if depth == 0 {
                public = false;
            }
            i += 1;
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b'$' || c >= 0x80 {
            let start = i;
            while i < b.len()
                && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$' || b[i] >= 0x80)
            {
                i += 1;
            }
            if depth > 0 {
                continue;
            }
            // Bytes, not `str` slices: a stray escape may leave `start` inside
            // a multi-byte character.
            let word = &b[start..i];
            if expect_name {
                if public {
                    return Some(String::from_utf8_lossy(word).into_owned());
                }
                expect_name = false;
                continue;
            }
            match word {
                b"public" => public = true,
                b"class" | b"interface" | b"enum" | b"record" => expect_name = true,
                _ => {}
            }
        } else {
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A minimal class file: `this_class` named `name`, one method.
    fn class_file(name: &str, flags: u16, method: &str, descriptor: &str) -> Vec<u8> {
        let mut b = vec![0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0, 61];
        let utf8 = |b: &mut Vec<u8>, s: &str| {
            b.push(1);
            b.extend_from_slice(&u16::try_from(s.len()).unwrap().to_be_bytes());
            b.extend_from_slice(s.as_bytes());
        };
        b.extend_from_slice(&8u16.to_be_bytes()); // constants 1..=7
        utf8(&mut b, name); // 1
        b.extend_from_slice(&[7, 0, 1]); // 2: Class #1
        utf8(&mut b, method); // 3
        utf8(&mut b, descriptor); // 4
        b.extend_from_slice(&[5, 0, 0, 0, 0, 0, 0, 0, 9]); // 5-6: a Long
        utf8(&mut b, "SourceFile"); // 7
        b.extend_from_slice(&ACC_PUBLIC.to_be_bytes());
        b.extend_from_slice(&[0, 2, 0, 0, 0, 0, 0, 0]); // this, super, 0 interfaces, 0 fields
        b.extend_from_slice(&[0, 1]); // one method
        b.extend_from_slice(&flags.to_be_bytes());
        b.extend_from_slice(&[0, 3, 0, 4, 0, 0]);
        b.extend_from_slice(&[0, 1, 0, 7, 0, 0, 0, 2, 0, 1]); // SourceFile = #1
        b
    }

    #[test]
    fn finds_public_static_main_with_its_package() {
        let b = class_file(
            "a/b/Main",
            ACC_PUBLIC | ACC_STATIC,
            "main",
            "([Ljava/lang/String;)V",
        );
        let c = parse(&b).unwrap();
        assert_eq!(c.name, "a.b.Main");
        assert!(c.public);
        assert_eq!(c.source.as_deref(), Some("a/b/Main"));
    }

    #[test]
    fn other_mains_are_not_entry_points() {
        for (flags, name, desc) in [
            (ACC_PUBLIC, "main", "([Ljava/lang/String;)V"),
            (ACC_STATIC, "main", "([Ljava/lang/String;)V"),
            (ACC_PUBLIC | ACC_STATIC, "main", "()V"),
            (ACC_PUBLIC | ACC_STATIC, "main", "([Ljava/lang/Object;)V"),
            (ACC_PUBLIC | ACC_STATIC, "Main", "([Ljava/lang/String;)V"),
        ] {
            assert!(
                parse(&class_file("M", flags, name, desc)).is_none(),
                "{name} {desc}"
            );
        }
    }

    #[test]
    fn truncated_or_garbage_files_are_skipped() {
        let b = class_file(
            "M",
            ACC_PUBLIC | ACC_STATIC,
            "main",
            "([Ljava/lang/String;)V",
        );
        for end in 0..b.len() {
            assert!(parse(&b[..end]).is_none(), "prefix of {end} bytes");
        }
        assert!(parse(b"not a class file").is_none());
    }
    #[test]
    fn the_public_type_of_a_source() {
        let cases = [
            ("public class Main {}", Some("Main")),
            ("class Main {}", None),
            (
                "package a.b;\nimport java.util.*;\npublic final class Sol<T> { }",
                Some("Sol"),
            ),
            (
                "/* public class Fake {} */ // public class Fake2\npublic interface I {}",
                Some("I"),
            ),
            (
                "class A { public class Inner {} }\npublic enum E { X }",
                Some("E"),
            ),
            (
                "@SuppressWarnings({\"a\", \"b\"})\npublic record R(int x) {}",
                Some("R"),
            ),
            ("public @interface Note {}", Some("Note")),
            ("class A { String s = \"public class S {\"; }", None),
            (
                "class A { char c = '{'; String t = \"\"\"\n}\"\"\"; }\npublic class B {}",
                Some("B"),
            ),
            (
                "public abstract sealed class Shape permits Sq {}",
                Some("Shape"),
            ),
            ("", None),
            ("public class", None),
            ("\"unterminated", None),
            (
                "class A { String s = \"\\é\"; }\npublic class Ü {}",
                Some("Ü"),
            ),
        ];
        for (src, want) in cases {
            assert_eq!(public_type(src).as_deref(), want, "{src}");
        }
    }
}
