//! The streaming canonical form hasher on arbitrary bytes, cut at arbitrary points.
//!
//! Input: a split spec (see `Input::splits`), then the body.
//!
//! Checks: chunking (seeded cuts, one byte per chunk, empty chunks) never changes the digest nor
//! the error; an error sticks; and a model written from the module docs the other way round
//! (split the whole body at `&` and the first `=`, decode each piece, stable-sort, encode) gives the
//! same digest or refuses the same `%` offset.
#![no_main]

use idemgate_core::hash::sha256;
use idemgate_core::request::form::{FormError, FormHasher};
use idemgate_core_fuzz::{chunks, Input, BYTEWISE_MAX};
use libfuzzer_sys::fuzz_target;

fn digest(pieces: &[&[u8]]) -> Result<[u8; 32], FormError> {
    let mut hasher = FormHasher::new();
    let mut first_error = None;
    for piece in pieces {
        match (&first_error, hasher.update(piece)) {
            (None, Err(e)) => first_error = Some(e),
            (Some(e), later) => assert_eq!(later.as_ref(), Err(e), "error did not stick"),
            (None, Ok(())) => {}
        }
    }
    let result = hasher.finish();
    if let Some(e) = first_error {
        assert_eq!(result.as_ref(), Err(&e), "finish forgot the error");
    }
    result
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// Decodes one name or value starting at body offset `at`.
fn decode(piece: &[u8], at: usize) -> Result<Vec<u8>, FormError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < piece.len() {
        match piece[i] {
            b'%' => {
                let pair = piece
                    .get(i + 1..i + 3)
                    .and_then(|h| Some((hex(h[0])?, hex(h[1])?)));
                let Some((hi, lo)) = pair else {
                    return Err(FormError::InvalidEscape {
                        offset: (at + i) as u64,
                    });
                };
                out.push(hi << 4 | lo);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Ok(out)
}

fn esc(x: &[u8], out: &mut Vec<u8>) {
    for &b in x {
        if b == 0 {
            out.extend_from_slice(&[0, 1]);
        } else {
            out.push(b);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

fn model(body: &[u8]) -> Result<[u8; 32], FormError> {
    let mut pairs: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    let mut at = 0;
    for piece in body.split(|&b| b == b'&') {
        if !piece.is_empty() {
            match piece.iter().position(|&b| b == b'=') {
                Some(eq) => pairs.push((
                    decode(&piece[..eq], at)?,
                    Some(decode(&piece[eq + 1..], at + eq + 1)?),
                )),
                None => pairs.push((decode(piece, at)?, None)),
            }
        }
        at += piece.len() + 1;
    }
    pairs.sort_by(|a, b| a.0.cmp(&b.0)); // stable
    let mut pre = Vec::new();
    for (name, value) in &pairs {
        esc(name, &mut pre);
        match value {
            None => pre.push(0),
            Some(v) => {
                pre.push(1);
                esc(v, &mut pre);
            }
        }
    }
    Ok(sha256(&pre))
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let cuts = input.splits();
    let body = input.rest();
    let whole = digest(&[body]);
    assert_eq!(whole, digest(&chunks(body, &cuts)), "cut at {cuts:?}");
    if body.len() <= BYTEWISE_MAX {
        let bytewise: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(
            whole,
            digest(&bytewise),
            "bytewise feeding changed the result"
        );
    }
    assert_eq!(
        whole,
        digest(&[b"", body, b""]),
        "empty chunks changed the result"
    );
    assert_eq!(whole, model(body), "differs from the split-and-sort model");
});
