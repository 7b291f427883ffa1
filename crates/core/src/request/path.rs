//! One spelling per path. Route rules and the storage key must see the path
//! the upstream will act on, not the bytes the client chose: `//payments`, `/payments;x`,
//! `/%70ayments`, `/a/../payments` and (on a case-insensitive route) `/Payments` all reach a
//! `/payments` handler in common upstreams (Tomcat strips `;params`, most decode percent-escapes
//! and merge slashes), so they must all meet the `/payments` rule — and a retry under another
//! spelling must find the same record.
//!
//! The normalisation is deliberately *wider* than any one upstream's: a spelling that some upstream
//! could route to a guarded prefix is matched to it. Matching more requests to a rule can only add
//! protection; the storage key only ever merges spellings within one client's own scope.

use crate::hash::hex_digit;
use alloc::string::String;
use alloc::vec::Vec;

/// The normalised form of `path` (which must not include its query): percent-escapes of unreserved
/// characters, `/` and `\` decoded (others kept, in upper case; a `%` that starts no escape becomes
/// `%25`), `\` read as `/`, `;params` cut from
/// every segment, empty and `.` segments dropped, `..` resolved (never above the root). A trailing
/// slash is kept, since `/a/` and `/a` are different prefixes.
pub(crate) fn normalize(path: &str) -> String {
    // Most requests spell their path the one way already: one copy, not a decoded copy, a
    // segment list and a rebuilt path.
    if is_normal(path) {
        return path.into();
    }
    rebuild(path)
}

/// Whether [`normalize`] leaves `path` as it is: rooted, nothing to decode (no `%`, no `\`), no
/// `;params`, and no empty (but a trailing slash), `.` or `..` segment.
fn is_normal(path: &str) -> bool {
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    if path.bytes().any(|b| matches!(b, b'%' | b'\\' | b';')) {
        return false;
    }
    let mut segments = rest.split('/').peekable();
    while let Some(segment) = segments.next() {
        let last = segments.peek().is_none();
        if (segment.is_empty() && !last) || segment == "." || segment == ".." {
            return false;
        }
    }
    true
}

/// [`normalize`] the whole way: decoded, cut into segments and put together again.
fn rebuild(path: &str) -> String {
    let decoded = decode(path);
    let trailing = decoded.len() > 1 && decoded.ends_with('/');
    let mut segments: Vec<&str> = Vec::new();
    for segment in decoded.split('/') {
        let segment = segment.split(';').next().unwrap_or_default();
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            other => segments.push(other),
        }
    }
    let mut out = String::with_capacity(decoded.len() + 1);
    for segment in &segments {
        out.push('/');
        out.push_str(segment);
    }
    if out.is_empty() || trailing {
        out.push('/');
    }
    out
}

/// Percent-decodes what a server would decode before routing, and reads `\` as `/`.
fn decode(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let escaped = match (b, bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&hi), Some(&lo)) => hex_digit(hi)
                .zip(hex_digit(lo))
                .map(|(hi, lo)| hi << 4 | lo),
            _ => None,
        };
        match escaped {
            Some(c) if c.is_ascii_alphanumeric() || b"-._~/\\".contains(&c) => {
                out.push(if c == b'\\' { '/' } else { char::from(c) });
                i += 3;
            }
            Some(c) => {
                // Kept escaped, one spelling of the hex digits.
                out.push('%');
                out.push(char::from(HEX[usize::from(c >> 4)]));
                out.push(char::from(HEX[usize::from(c & 0xf)]));
                i += 3;
            }
            None if b == b'%' => {
                // A `%` that starts no escape is itself written as one (`%25`): left bare, it
                // could form a new escape with what a decoded escape puts after it (`%2%44` →
                // `%2D`), and a second pass would decode that too. One spelling, idempotent.
                out.push_str("%25");
                i += 1;
            }
            None => {
                // `path` is a `str`, so copying up to the next ASCII byte keeps it valid UTF-8.
                let end = bytes[i + 1..]
                    .iter()
                    .position(|b| b.is_ascii())
                    .map_or(bytes.len(), |n| i + 1 + n);
                // `i` and `end` are offsets of ASCII bytes (or the end): `get` always finds the
                // text, and keeps a panicking slice out of the modules.
                match path.get(i..end).unwrap_or_default() {
                    "\\" => out.push('/'),
                    text => out.push_str(text),
                }
                i = end;
            }
        }
    }
    out
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_path() {
        for spelling in [
            "/payments",
            "//payments",
            "/payments;x=1",
            "/payments;",
            "/%70ayments",
            "/%70%61yments",
            "/./payments",
            "/a/../payments",
            "/../payments",
            "/payments/%2e%2e/payments",
            "\\payments",
            "/%5Cpayments",
            "/%2Fpayments",
        ] {
            assert_eq!(normalize(spelling), "/payments", "{spelling}");
        }
    }

    #[test]
    fn what_stays() {
        assert_eq!(normalize("/"), "/");
        assert_eq!(normalize(""), "/");
        assert_eq!(normalize("/a/"), "/a/");
        assert_eq!(normalize("/a//b/"), "/a/b/");
        assert_eq!(normalize("/a%20b"), "/a%20b");
        assert_eq!(normalize("/a%3fb"), "/a%3Fb");
        assert_eq!(normalize("/a%zz"), "/a%25zz");
        assert_eq!(normalize("/a%2"), "/a%252");
        assert_eq!(normalize("/%25"), "/%25");
        assert_eq!(normalize("/é/ü"), "/é/ü");
        assert_eq!(normalize("/Payments"), "/Payments");
    }

    #[test]
    fn normalising_twice_changes_nothing() {
        for path in [
            "/%2570",
            "/a/%2e%2e",
            "/a;b/c",
            "/x%2F..%2Fy",
            "//a/./b/../c/",
            "/é%41",
            // Found by the `config` fuzz target: a lone `%` before a decoded escape used to form
            // a new escape (`%2%44` → `%2D`), which a second pass decoded again (→ `-`).
            "/ordC%%%%%%%44z%%%%%%2%44`44l=:9&8",
            "/%2%44",
            "/%%41",
        ] {
            let once = normalize(path);
            assert_eq!(normalize(&once), once, "{path}");
        }
    }

    #[test]
    fn a_path_taken_as_normal_is_what_the_whole_way_gives() {
        for path in [
            "/",
            "/a",
            "/a/",
            "/orders",
            "/a/b/c",
            "/é/ü",
            "/Payments",
            "/a.b/..c/.d",
            "/a?b",
            "",
            "a",
            "//",
            "/a//b",
            "/a/./b",
            "/a/../b",
            "/a/.",
            "/a/..",
            "/./",
            "/a;b",
            "/%41",
            "\\a",
            "/a\\b",
        ] {
            if is_normal(path) {
                assert_eq!(rebuild(path), path, "{path}");
            }
            assert_eq!(normalize(path), rebuild(path), "{path}");
        }
        assert!(is_normal("/orders/ord_1/"));
        assert!(!is_normal("/orders//1"));
    }
}
