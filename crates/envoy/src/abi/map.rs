//! Header maps and property paths as the proxy-wasm ABI serialises them: read without panics
//! (a malformed map is none at all), written for the host.

#[allow(unused_imports)]
use crate::prelude::*;

/// A header map as the host gives it: names are lowercase text, values are bytes. It keeps the
/// host's buffer and, per pair, where its name and value are: reading a map costs two
/// allocations (the names, validated as text once, and the index) instead of two per header.
#[derive(Debug, Clone, Default)]
pub struct Headers {
    /// The serialised map as the host sent it; the values are slices of it.
    bytes: Vec<u8>,
    /// Every name, one after the other.
    names: String,
    /// Per pair: the end of its name in `names` (it starts where the previous one ended) and its
    /// value's range in `bytes`.
    pairs: Vec<(usize, usize, usize)>,
}

impl Headers {
    /// Each (name, value), in the host's order.
    pub fn iter(&self) -> HeaderIter<'_> {
        HeaderIter {
            headers: self,
            next: 0,
            name_start: 0,
        }
    }

    /// Every (name, value) borrowed into one slice, in the host's order: what a reader that
    /// scans the map many times walks (the core's rules look up a header per rule), at the cost
    /// of one allocation instead of an indexed step per pair per scan.
    pub fn pairs(&self) -> Vec<(&str, &[u8])> {
        let mut pairs = Vec::with_capacity(self.pairs.len());
        pairs.extend(self.iter());
        pairs
    }

    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// A map of owned pairs (tests, and maps the filter builds itself): the values one after
    /// the other in `bytes`, indexed as a host's map is.
    pub fn from_pairs<'a>(pairs: impl Iterator<Item = (&'a str, &'a [u8])> + Clone) -> Headers {
        let mut headers = Headers::default();
        for (name, value) in pairs {
            headers.names.push_str(name);
            let start = headers.bytes.len();
            headers.bytes.extend_from_slice(value);
            let end = headers.bytes.len();
            headers.pairs.push((headers.names.len(), start, end));
        }
        headers
    }
}

/// The pairs of a [`Headers`], in order.
#[derive(Debug, Clone)]
pub struct HeaderIter<'a> {
    headers: &'a Headers,
    next: usize,
    name_start: usize,
}

impl<'a> Iterator for HeaderIter<'a> {
    type Item = (&'a str, &'a [u8]);

    // One copy of this, not one inlined into every loop over a map: the filter's size.
    #[inline(never)]
    fn next(&mut self) -> Option<Self::Item> {
        let &(name_end, start, end) = self.headers.pairs.get(self.next)?;
        self.next += 1;
        let name = self.headers.names.get(self.name_start..name_end)?;
        self.name_start = name_end;
        Some((name, self.headers.bytes.get(start..end)?))
    }
}

/// Serialises a header map: `u32` count, then (`u32` name length, `u32` value length) per pair,
/// then each name and value followed by a NUL byte.
pub fn serialize_map<'a>(pairs: impl Iterator<Item = (&'a str, &'a [u8])> + Clone) -> Vec<u8> {
    let count = pairs.clone().count();
    let size: usize = pairs
        .clone()
        .map(|(n, v)| n.len() + v.len() + 10)
        .sum::<usize>()
        + 4;
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&(count as u32).to_le_bytes());
    for (name, value) in pairs.clone() {
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    }
    for (name, value) in pairs {
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        out.extend_from_slice(value);
        out.push(0);
    }
    out
}

/// Reads a serialised header map (empty: a map with no headers, as Envoy hands over an absent
/// one); `None` for a malformed map, which a conforming host never sends — never a panic, and
/// never the pairs before the fault taken for the whole map (no silent fallback: a request read
/// without its key would go unguarded). Names that are not UTF-8 are skipped.
pub fn deserialize_map(bytes: Vec<u8>) -> Option<Headers> {
    if bytes.is_empty() {
        return Some(Headers::default());
    }
    let word = |at: usize| -> Option<usize> {
        let b = bytes.get(at..at.checked_add(4)?)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let count = word(0)?;
    let mut data = count.checked_mul(8).and_then(|n| n.checked_add(4))?;
    // The names are gathered as bytes and made text in one pass at the end: each is known to
    // be text on its own first (an ASCII name, the usual one, needs no decoding to know it).
    let mut names = Vec::with_capacity(bytes.len().saturating_sub(data));
    let mut pairs = Vec::with_capacity(count.min(bytes.len() / 10));
    for i in 0..count {
        let (Some(name_len), Some(value_len)) = (word(4 + i * 8), word(8 + i * 8)) else {
            return None;
        };
        let name_end = data.saturating_add(name_len);
        let value_start = name_end.saturating_add(1);
        let value_end = value_start.saturating_add(value_len);
        let (Some(name), Some(_)) = (bytes.get(data..name_end), bytes.get(value_start..value_end))
        else {
            return None;
        };
        if name.is_ascii() || core::str::from_utf8(name).is_ok() {
            names.extend_from_slice(name);
            pairs.push((names.len(), value_start, value_end));
        }
        data = value_end.saturating_add(1);
    }
    // Text pieces one after the other are text, each piece's end a character boundary.
    let names = String::from_utf8(names).ok()?;
    Some(Headers {
        bytes,
        names,
        pairs,
    })
}

/// Longest joined path [`with_path`] builds on the stack (the filter's own are about 30 bytes).
const PATH_ON_STACK: usize = 48;

/// Calls `use_path` with `path` as the host wants it (as `serialize_path` joins it), without a heap
/// buffer when it can: a one-part path is its own bytes, a short one is joined on the stack.
/// The filter reads and sets properties several times per request.
pub fn with_path<R>(path: &[&str], use_path: impl FnOnce(&[u8]) -> R) -> R {
    if let [part] = path {
        return use_path(part.as_bytes());
    }
    let len = path.iter().map(|part| part.len()).sum::<usize>() + path.len().saturating_sub(1);
    let mut stack = [0u8; PATH_ON_STACK];
    let Some(joined) = stack.get_mut(..len) else {
        return use_path(&serialize_path(path));
    };
    // The buffer is zeroed: the NUL between two parts is left as it is.
    let mut at = 0;
    for part in path {
        if let Some(slot) = joined.get_mut(at..at + part.len()) {
            slot.copy_from_slice(part.as_bytes());
        }
        at += part.len() + 1;
    }
    use_path(joined)
}

/// A property path as the host wants it: the parts joined by NUL bytes.
pub fn serialize_path(path: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, part) in path.iter().enumerate() {
        if i > 0 {
            out.push(0);
        }
        out.extend_from_slice(part.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_joined_as_serialize_path_joins_them() {
        let long = "x".repeat(PATH_ON_STACK);
        let paths: [&[&str]; 6] = [
            &[],
            &["one"],
            &["upstream", "request_attempt_count"],
            &["a", "", "c"],
            &["response", &long],
            &[&long[..PATH_ON_STACK - 2], "z"],
        ];
        for path in paths {
            assert_eq!(
                with_path(path, <[u8]>::to_vec),
                serialize_path(path),
                "{path:?}"
            );
        }
    }

    #[test]
    fn maps_round_trip() {
        let pairs: Vec<(&str, &[u8])> = vec![
            (":method", b"POST"),
            ("x-empty", b""),
            ("content-type", b"application/json"),
        ];
        let bytes = serialize_map(pairs.iter().copied());
        let back = deserialize_map(bytes).expect("well formed");
        assert_eq!(back.len(), 3);
        assert_eq!(back.iter().collect::<Vec<_>>(), pairs);
        let none = deserialize_map(serialize_map(core::iter::empty())).expect("well formed");
        assert!(none.is_empty());
    }

    #[test]
    fn malformed_maps_never_panic() {
        let good = serialize_map([("a", b"b".as_slice()), ("cc", b"dd".as_slice())].into_iter());
        // Cut anywhere before its last value ends, the map is malformed: never the pairs before
        // the cut. (Only the last NUL missing loses nothing: still read whole.)
        for cut in 1..good.len() - 1 {
            assert!(
                deserialize_map(good[..cut].to_vec()).is_none(),
                "cut at {cut}"
            );
        }
        assert_eq!(deserialize_map(good.clone()).map(|h| h.len()), Some(2));
        // Nothing at all is how Envoy hands over an absent map: no headers.
        assert!(deserialize_map(Vec::new()).is_some_and(|h| h.is_empty()));
        assert!(deserialize_map(vec![0xff, 0xff, 0xff, 0xff]).is_none());
        let mut lying = good.clone();
        lying[4] = 200; // the first name claims 200 bytes
        assert!(deserialize_map(lying).is_none());
    }

    #[test]
    fn a_name_that_is_not_text_is_left_out() {
        let pairs: [(&[u8], &[u8]); 4] = [
            (b"a", b"1"),
            (b"\xff\xfe", b"2"),
            ("\u{e9}t\u{e9}".as_bytes(), b"3"),
            (b"b", b"4"),
        ];
        let mut bytes = (pairs.len() as u32).to_le_bytes().to_vec();
        for (name, value) in pairs {
            bytes.extend_from_slice(&(name.len() as u32).to_le_bytes());
            bytes.extend_from_slice(&(value.len() as u32).to_le_bytes());
        }
        for (name, value) in pairs {
            bytes.extend_from_slice(name);
            bytes.push(0);
            bytes.extend_from_slice(value);
            bytes.push(0);
        }
        let map = deserialize_map(bytes).expect("well formed");
        let read: Vec<(&str, &[u8])> = map.iter().collect();
        let expected: [(&str, &[u8]); 3] = [("a", b"1"), ("\u{e9}t\u{e9}", b"3"), ("b", b"4")];
        assert_eq!(read, expected);
    }

    #[test]
    fn paths_are_nul_joined() {
        assert_eq!(
            serialize_path(&["response", "code_details"]),
            b"response\0code_details"
        );
        assert!(serialize_path(&[]).is_empty());
    }
}
