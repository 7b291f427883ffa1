//! The proxy-wasm serialisation of header maps: a little-endian pair count, then (name length,
//! value length) for every pair, then every name and value each followed by a NUL byte.

/// Encodes pairs as proxy-wasm serialises a map.
pub fn encode(pairs: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(pairs.len() as u32).to_le_bytes());
    for (name, value) in pairs {
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

fn u32_at(bytes: &[u8], at: usize) -> Option<usize> {
    let raw: [u8; 4] = bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_le_bytes(raw) as usize)
}

/// Decodes a serialised map; `None` if it is malformed. Empty input is an empty map.
pub fn decode(bytes: &[u8]) -> Option<Vec<(String, Vec<u8>)>> {
    if bytes.is_empty() {
        return Some(Vec::new());
    }
    let count = u32_at(bytes, 0)?;
    let mut data = count.checked_mul(8)?.checked_add(4)?;
    let mut pairs = Vec::with_capacity(count.min(1024));
    for i in 0..count {
        let name_len = u32_at(bytes, 4 + i * 8)?;
        let value_len = u32_at(bytes, 8 + i * 8)?;
        let name = bytes.get(data..data.checked_add(name_len)?)?;
        data += name_len + 1;
        let value = bytes.get(data..data.checked_add(value_len)?)?;
        data += value_len + 1;
        pairs.push((String::from_utf8_lossy(name).into_owned(), value.to_vec()));
    }
    Some(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_sdk_layout() {
        let pairs = vec![
            (":method".to_string(), b"GET".to_vec()),
            ("a".to_string(), b"".to_vec()),
        ];
        let bytes = encode(&pairs);
        assert_eq!(&bytes[..4], &[2, 0, 0, 0]);
        assert_eq!(&bytes[4..12], &[7, 0, 0, 0, 3, 0, 0, 0]);
        assert_eq!(&bytes[20..28], b":method\0");
        assert_eq!(decode(&bytes), Some(pairs));
        assert_eq!(decode(&bytes[..bytes.len() - 3]), None);
        assert_eq!(decode(b""), Some(vec![]));
    }
}
