//! The one JSON string writer of the workspace: problem bodies, token answers, log lines, the
//! browser module's result objects and documents written back out all quote text with it, so a
//! text is spelled the same wherever idemgate writes it.
//!
//! `"`, `\` and the controls below 0x20 are escaped, with the short forms JSON has (`\"`, `\\`,
//! `\b`, `\f`, `\n`, `\r`, `\t`) and `\u00XX` (lowercase hex) for the other controls; everything
//! else, non-ASCII and U+007F included, is written as is. That is how serde_json writes strings.
//! Runs of bytes that need no escape are copied whole: an escape is always an ASCII byte, so every
//! cut is a char boundary.

use alloc::string::String;
use core::fmt;

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Appends `text` as one JSON string literal (quoted and escaped).
pub fn write_string(out: &mut String, text: &str) {
    out.push('"');
    // Writing into a `String` cannot fail.
    let _ = write_escaped(out, text);
    out.push('"');
}

/// Writes the characters of `text` as they stand inside a JSON string literal, without the
/// quotes: for a literal made of several pieces (a URI prefix and a code), or written into a
/// `Formatter` (`Display` of a document or a quoted log field).
pub fn write_escaped<W: fmt::Write + ?Sized>(out: &mut W, text: &str) -> fmt::Result {
    let mut run = 0;
    for (at, byte) in text.bytes().enumerate() {
        // Nearly every byte needs no escape: one test for those (the run goes on), the match only
        // for the rest. Matched alone, every byte went through the match: a 409's problem body
        // cost the filter about 4,000 wasm operators more (`make bench-work`).
        if byte >= 0x20 && byte != b'"' && byte != b'\\' {
            continue;
        }
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            _ => "",
        };
        out.write_str(text.get(run..at).unwrap_or_default())?;
        if escape.is_empty() {
            out.write_str("\\u00")?;
            out.write_char(char::from(HEX_DIGITS[usize::from(byte >> 4)]))?;
            out.write_char(char::from(HEX_DIGITS[usize::from(byte & 0x0f)]))?;
        } else {
            out.write_str(escape)?;
        }
        run = at + 1;
    }
    out.write_str(text.get(run..).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn literal(text: &str) -> String {
        let mut out = String::new();
        write_string(&mut out, text);
        out
    }

    #[test]
    fn quotes_backslashes_and_controls_are_escaped() {
        assert_eq!(literal(""), r#""""#);
        assert_eq!(literal("plain é ✓"), "\"plain é ✓\"");
        assert_eq!(
            literal("a\"b\\c\nd\re\tf\u{1}g\u{1f}h\u{7f}"),
            r#""a\"b\\c\nd\re\tf\u0001g\u001fh"#.to_string() + "\u{7f}\""
        );
        assert_eq!(literal("\u{8}\u{c}\u{0}/"), r#""\b\f\u0000/""#);
    }

    #[test]
    fn pieces_make_one_literal() {
        let mut out = String::from("\"");
        write_escaped(&mut out, "urn:\"").unwrap();
        write_escaped(&mut out, "x\n").unwrap();
        out.push('"');
        assert_eq!(out, r#""urn:\"x\n""#);
    }

    #[test]
    fn every_control_and_ascii_byte_reads_back() {
        // Each byte below 0x80 alone, and all of them together, read back as themselves.
        let all: String = (0u8..0x80).map(char::from).collect();
        for text in (0u8..0x80)
            .map(|b| char::from(b).to_string())
            .chain([all, "é✓😀".into()])
        {
            let quoted = literal(&text);
            assert_eq!(
                crate::Value::parse(&quoted),
                Ok(crate::Value::String(text.clone())),
                "{quoted}"
            );
        }
    }
}
