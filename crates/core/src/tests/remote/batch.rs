//! Finishes in one operation: a batch round-trips, each finish in it is the finish sent alone,
//! and anything else — empty, too long, mixed, nested, cut short — gets a typed error.

use super::support::{claim, finish_store, samples};
use crate::store::protocol::FinishOutcome;
use crate::store::remote::{Failure, Incoming, Request, Response, WireError, MAX_FINISHES};
use proptest::prelude::*;
use std::prelude::rust_2021::Vec;

fn finishes(n: usize) -> Vec<Request> {
    (0..n)
        .map(|i| finish_store(i as u8, 1, &[i as u8; 3]))
        .collect()
}

#[test]
fn a_batch_round_trips_and_carries_each_finish_as_sent_alone() {
    for n in [1, 2, MAX_FINISHES] {
        let batch = Incoming::Finishes(finishes(n));
        let bytes = batch.encode();
        assert_eq!(Incoming::decode(&bytes), Ok(batch));
        // Header 3 + op 1 + count 1, then each finish's own bytes behind its length.
        let alone: usize = finishes(n).iter().map(|f| 4 + f.encode().len()).sum();
        assert_eq!(bytes.len(), 5 + alone);
    }
    // A single operation reads as before.
    for request in samples() {
        let bytes = request.encode();
        assert_eq!(
            Incoming::decode(&bytes),
            Ok(Incoming::One(request.clone().into()))
        );
        assert_eq!(Incoming::One(request.into()).encode(), bytes);
    }
}

#[test]
fn a_batch_that_is_empty_too_long_or_mixed_is_refused() {
    assert_eq!(
        Incoming::decode(&Incoming::Finishes(Vec::new()).encode()),
        Err(WireError::Batch)
    );
    let too_long = Incoming::Finishes(finishes(MAX_FINISHES + 1)).encode();
    assert_eq!(Incoming::decode(&too_long), Err(WireError::Batch));
    let mixed = Incoming::Finishes(vec![finish_store(1, 1, b"a"), claim(2, 2, 2)]);
    assert_eq!(Incoming::decode(&mixed.encode()), Err(WireError::Batch));
    // The old single decoder does not know the operation: what a service before batches says.
    let batch = Incoming::Finishes(finishes(2)).encode();
    assert_eq!(Request::decode(&batch), Err(WireError::UnknownOp(7)));
    // Cut anywhere, typed errors.
    for cut in 0..batch.len() {
        assert!(Incoming::decode(&batch[..cut]).is_err(), "cut at {cut}");
    }
    let mut long = batch.clone();
    long.push(0);
    assert_eq!(Incoming::decode(&long), Err(WireError::TrailingBytes));
    // A finish inside whose own bytes are damaged is the finish's error.
    let mut damaged = batch;
    damaged[5 + 4 + 3] = 99;
    assert_eq!(Incoming::decode(&damaged), Err(WireError::UnknownOp(99)));
}

#[test]
fn a_batch_is_answered_one_answer_per_finish() {
    let answers = Response::Finishes(vec![
        Response::Finish(FinishOutcome::Stored),
        Response::Failed(Failure::Timeout),
        Response::Finish(FinishOutcome::NotOwner),
    ]);
    assert_eq!(answers.http_status(), 200, "whatever each answer is");
    assert_eq!(Response::decode(&answers.encode()), Ok(answers));
    // Only a finish's answers or failures, never a claim's, never a batch inside a batch.
    let claim_answer = Response::Finishes(vec![Response::Claim(
        crate::store::protocol::ClaimOutcome::Mismatch,
    )]);
    assert_eq!(
        Response::decode(&claim_answer.encode()),
        Err(WireError::Batch)
    );
    let nested = Response::Finishes(vec![Response::Finishes(vec![Response::Finish(
        FinishOutcome::Stored,
    )])]);
    assert_eq!(Response::decode(&nested.encode()), Err(WireError::Batch));
    assert_eq!(
        Response::decode(&Response::Finishes(Vec::new()).encode()),
        Err(WireError::Batch)
    );
}

proptest! {
    /// Untrusted bytes after a batch's header: never a panic, and what decodes re-encodes to
    /// exactly the input (one spelling per message).
    #[test]
    fn arbitrary_batches_decode_or_err(tail in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut request = Incoming::Finishes(finishes(1)).encode()[..4].to_vec();
        request.extend_from_slice(&tail);
        if let Ok(decoded) = Incoming::decode(&request) {
            prop_assert_eq!(decoded.encode(), request);
        }
        let mut response = Response::Finishes(vec![Response::Finish(FinishOutcome::Stored)])
            .encode()[..4]
            .to_vec();
        response.extend_from_slice(&tail);
        if let Ok(decoded) = Response::decode(&response) {
            prop_assert_eq!(decoded.encode(), response);
        }
    }
}
