//! Helpers the core's unit tests share.

use alloc::vec::Vec;

/// Every value of the header `name` among `headers` (lowercase names), as a host's header
/// lookup gives them to [`crate::decision::admission::admit`], a key source or a signature rule.
pub(crate) fn header_values<'a>(headers: &'a [(&'a str, &'a str)], name: &str) -> Vec<&'a [u8]> {
    headers
        .iter()
        .filter(|(n, _)| *n == name)
        .map(|(_, v)| v.as_bytes())
        .collect()
}
