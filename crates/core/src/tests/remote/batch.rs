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

mod queue {
    use super::finishes;
    use crate::client::scope::StorageKey;
    use crate::store::protocol::FinishOutcome;
    use crate::store::remote::client::CalloutReply;
    use crate::store::remote::{
        BatchStep, Failure, FinishQueue, FinishStep, Finishing, Incoming, Response, BATCH_DELAY,
        MAX_FINISHES,
    };
    use crate::time::{Span, UnixMillis};
    use std::prelude::rust_2021::Vec;

    fn at(ms: u64) -> UnixMillis {
        UnixMillis(1_700_000_000_000 + ms)
    }

    fn queued(n: usize) -> Vec<Finishing> {
        finishes(n).iter().map(Finishing::new).collect()
    }

    fn reply(status: u16, body: &[u8]) -> CalloutReply<'_> {
        CalloutReply {
            status: Some(status),
            body,
        }
    }

    #[test]
    fn a_finish_waits_for_others_at_most_the_delay() {
        let mut queue = FinishQueue::default();
        assert!(queue.due(at(0)).is_none(), "nothing queued");
        let mut three = queued(3).into_iter();
        assert!(queue.push(three.next().unwrap(), at(0)).is_none());
        assert_eq!(BATCH_DELAY, Span(10));
        assert!(queue.push(three.next().unwrap(), at(4)).is_none());
        assert!(queue.push(three.next().unwrap(), at(9)).is_none());
        assert!(queue.due(at(9)).is_none(), "the oldest has waited 9 ms");
        let batch = queue.due(at(10)).expect("due once the oldest waited 10 ms");
        assert_eq!(batch.len(), 3);
        assert!(queue.is_empty() && queue.due(at(1_000)).is_none());
        // The batch is the three finishes' own bytes, in order.
        assert_eq!(
            Incoming::decode(batch.body()),
            Ok(Incoming::Finishes(finishes(3)))
        );
        let keys: Vec<StorageKey> = batch.keys().collect();
        assert_eq!(
            keys,
            finishes(3).iter().map(|f| *f.key()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_full_queue_sends_at_once() {
        let mut queue = FinishQueue::default();
        let mut sent = Vec::new();
        for finishing in queued(MAX_FINISHES + 1) {
            if let Some(batch) = queue.push(finishing, at(0)) {
                sent.push(batch.len());
            }
        }
        assert_eq!(sent, [MAX_FINISHES], "the 64th finish sends the batch");
        assert_eq!(queue.flush().map(|b| b.len()), Some(1));
        assert!(queue.flush().is_none());
        // By bytes: two finishes of 600 KB each do not share a batch.
        let big =
            |key: u8| Finishing::new(&super::super::support::finish_store(key, 1, &[7; 600_000]));
        assert!(queue.push(big(1), at(0)).is_none());
        let first = queue
            .push(big(2), at(1))
            .expect("the first goes before the queue overflows");
        assert_eq!(first.len(), 1);
        assert!(
            queue.due(at(10)).is_none(),
            "the second waits from its own queueing"
        );
        assert_eq!(queue.due(at(11)).map(|b| b.len()), Some(1));
    }

    #[test]
    fn each_finish_of_a_batch_keeps_the_resend_rule_of_a_single_finish() {
        let mut queue = FinishQueue::default();
        for finishing in queued(3) {
            assert!(queue.push(finishing, at(0)).is_none());
        }
        let batch = queue.due(at(10)).unwrap();
        // One decided, one not owner (landed unseen before), one the engine failed.
        let answers = Response::Finishes(vec![
            Response::Finish(FinishOutcome::Stored),
            Response::Finish(FinishOutcome::NotOwner),
            Response::Failed(Failure::Timeout),
        ])
        .encode();
        let step = batch.answered(reply(200, &answers));
        let BatchStep::Answered(steps) = &step else {
            panic!("{step:?}")
        };
        assert!(matches!(
            steps[0].1,
            FinishStep::Done(FinishOutcome::Stored)
        ));
        assert!(matches!(
            steps[1].1,
            FinishStep::Done(FinishOutcome::NotOwner)
        ));
        assert!(matches!(steps[2].1, FinishStep::SendAgain { .. }));
        let again = step.resend().expect("the failed finish is sent again");
        assert_eq!(again.len(), 1);
        assert_eq!(
            Incoming::decode(again.body()),
            Ok(Incoming::Finishes(vec![finishes(3)[2].clone()])),
            "the same bytes again"
        );
        // No usable answer, twice more: given up, the claim in flight until its lease ends.
        let step = again.answered(CalloutReply {
            status: None,
            body: &[],
        });
        let again = step.resend().expect("attempt 2");
        let last = again.answered(reply(200, b"garbage"));
        let BatchStep::Answered(steps) = &last else {
            panic!("{last:?}")
        };
        assert!(matches!(steps[0].1, FinishStep::GiveUp(_)));
        assert!(last.resend().is_none());
    }

    #[test]
    fn an_answer_that_is_not_one_per_finish_sends_the_whole_batch_again() {
        let mut queue = FinishQueue::default();
        for finishing in queued(2) {
            assert!(queue.push(finishing, at(0)).is_none());
        }
        let batch = queue.due(at(Span::from_secs(1).as_millis())).unwrap();
        let body = batch.body().to_vec();
        let short = Response::Finishes(vec![Response::Finish(FinishOutcome::Stored)]).encode();
        let single = Response::Finish(FinishOutcome::Stored).encode();
        let busy = Response::Failed(Failure::Unavailable).encode();
        for (status, answer) in [(200, &short), (200, &single), (503, &busy)] {
            let step = batch.clone().answered(reply(status, answer));
            let BatchStep::Answered(steps) = &step else {
                panic!("{step:?}")
            };
            assert!(steps
                .iter()
                .all(|(_, s)| matches!(s, FinishStep::SendAgain { .. })));
            assert_eq!(step.resend().map(|b| b.body().to_vec()), Some(body.clone()));
        }
    }

    #[test]
    fn a_batch_refused_whole_is_not_sent_again() {
        let mut queue = FinishQueue::default();
        for finishing in queued(2) {
            assert!(queue.push(finishing, at(0)).is_none());
        }
        let batch = queue.flush().unwrap();
        let refused = Response::Failed(Failure::BadRequest).encode();
        let step = batch.answered(reply(400, &refused));
        let BatchStep::Refused(keys) = &step else {
            panic!("{step:?}")
        };
        assert_eq!(keys.len(), 2);
        assert!(step.resend().is_none());
    }
}
