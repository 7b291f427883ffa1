//! Several finishes in one operation, and one answer per finish:
//!
//! ```text
//!   op 7 finishes : count(1, 1 to MAX_FINISHES) { len(4) finish }*
//!                   each `finish` the whole bytes of an op 2 request, as it would be sent alone
//! response tag 96 : count(1, 1 to MAX_FINISHES) { len(4) answer }*
//!                   one per finish, in the request's order: each the whole bytes of a finish's
//!                   answer (tags 16–19) or of a failure (tag 48)
//! ```
//!
//! Each finish keeps its own bytes, so a finish sent in a batch is the finish sent alone: the
//! service carries each as it carries a single one (its own compare-and-set, its own outcome), and
//! a finish that fails in a batch is sent again by the same rule as a single one. A service that
//! predates op 7 answers the whole body `BadRequest` (unknown operation), which a filter reads as
//! the batch refused, never as the finishes' outcomes.

use super::{end, header, Request, Response, WireError, REQUEST_MAGIC};
use crate::codec::{Reader, Writer};
use alloc::vec::Vec;

pub(super) const OP_FINISHES: u8 = 7;
pub(super) const TAG_FINISHES: u8 = 96;

/// Most finishes one batch carries (and answers): one count byte, and a bound on what one
/// operation asks of the service.
pub(crate) const MAX_FINISHES: usize = 64;

/// What the store service reads from a request body: one operation, or several finishes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Incoming {
    /// Boxed: a request is large beside a batch's vector, and only its owner moves it.
    One(alloc::boxed::Box<Request>),
    /// Finishes only ([`Request::Finish`]), 1 to `MAX_FINISHES` (64), answered by
    /// [`Response::Finishes`] in the same order.
    Finishes(Vec<Request>),
}

impl Incoming {
    pub fn decode(bytes: &[u8]) -> Result<Incoming, WireError> {
        let mut r = Reader::new(bytes);
        header(&mut r, REQUEST_MAGIC)?;
        if r.u8()? != OP_FINISHES {
            return Request::decode(bytes).map(|one| Incoming::One(one.into()));
        }
        let finishes = items(&mut r, |item| match Request::decode(item)? {
            finish @ Request::Finish { .. } => Ok(finish),
            _ => Err(WireError::Batch),
        })?;
        end(&r)?;
        Ok(Incoming::Finishes(finishes))
    }

    /// The bytes [`Incoming::decode`] reads back. A batch of none or of more than
    /// `MAX_FINISHES` (64), or holding another operation, encodes to bytes it refuses.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Incoming::One(request) => request.encode(),
            Incoming::Finishes(finishes) => {
                let bodies: Vec<Vec<u8>> = finishes.iter().map(Request::encode).collect();
                encode_finishes(bodies.iter().map(Vec::as_slice))
            }
        }
    }
}

/// The batch of the finishes already encoded in `bodies` (each a [`Request::Finish`]'s bytes).
pub(crate) fn encode_finishes<'a>(bodies: impl ExactSizeIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut w = Writer::default();
    w.bytes(&REQUEST_MAGIC);
    w.u8(super::WIRE_VERSION);
    w.u8(OP_FINISHES);
    put_items(&mut w, bodies);
    w.finish()
}

/// A batch's answers after the response header and tag: finish outcomes and failures only.
pub(super) fn get_answers(r: &mut Reader<'_>) -> Result<Response, WireError> {
    let answers = items(r, |item| match Response::decode_within(item, false)? {
        answer @ (Response::Finish(_) | Response::Failed(_)) => Ok(answer),
        _ => Err(WireError::Batch),
    })?;
    Ok(Response::Finishes(answers))
}

pub(super) fn put_answers(w: &mut Writer, answers: &[Response]) {
    let bodies: Vec<Vec<u8>> = answers.iter().map(Response::encode).collect();
    put_items(w, bodies.iter().map(Vec::as_slice));
}

/// A count, then each item's length and bytes (a count past one byte is written as is, cut to
/// its low byte: the decoder refuses what does not add up).
fn put_items<'a>(w: &mut Writer, items: impl ExactSizeIterator<Item = &'a [u8]>) {
    w.u8(items.len() as u8);
    for item in items {
        w.u32(item.len() as u32);
        w.bytes(item);
    }
}

fn items<T>(
    r: &mut Reader<'_>,
    decode: impl Fn(&[u8]) -> Result<T, WireError>,
) -> Result<Vec<T>, WireError> {
    let count = usize::from(r.u8()?);
    if count == 0 || count > MAX_FINISHES {
        return Err(WireError::Batch);
    }
    let mut out = Vec::new();
    for _ in 0..count {
        let len = r.u32()? as usize;
        out.push(decode(r.take(len)?)?);
    }
    Ok(out)
}
