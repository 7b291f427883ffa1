use super::*;
use idemgate_core::client::scope::StorageKey;
use idemgate_core::decision::new_claim;
use idemgate_core::policy::Policy;
use idemgate_core::record::{Completed, OwnerToken, StoredBody, StoredResponse};
use idemgate_core::request::fingerprint::Fingerprint;
use idemgate_core::time::UnixMillis;

const NOW: u64 = 1_000_000;

fn claim(owner: u8) -> Vec<u8> {
    let mut bucket = Bucket::default();
    let record = new_claim(
        Fingerprint([1; 32]),
        OwnerToken([owner; 16]),
        UnixMillis(NOW),
        &Policy::defaults(),
    );
    bucket.put(StorageKey::from_stored([9; 32]), Record::InFlight(record));
    bucket.encode()
}

fn completed() -> Vec<u8> {
    let mut bucket = Bucket::default();
    let done = Completed {
        fingerprint: Fingerprint([1; 32]),
        response: StoredResponse {
            status: 201,
            headers: vec![],
            body: StoredBody::Kept(b"ok".to_vec()),
            seal: None,
        },
        expires_at: UnixMillis(NOW + 86_400_000),
    };
    bucket.put(StorageKey::from_stored([9; 32]), Record::Completed(done));
    bucket.encode()
}

fn write(worker: usize, before: Option<Vec<u8>>, value: Vec<u8>, at_ms: u64) -> Write {
    Write {
        worker,
        key: "idemgate/c/0".into(),
        before,
        value,
        cas_given: 0,
        cas: 1,
        at_ms,
    }
}

#[test]
fn a_naive_second_claim_over_a_live_one_is_caught() {
    let writes = [
        write(0, None, claim(1), NOW),
        write(1, Some(claim(1)), claim(2), NOW),
    ];
    let err = transitions(&writes, &[0, 1]).unwrap_err();
    assert!(err.contains("two owners at once"), "{err}");
    // The same writes are legal if worker 0 never acted on its (tentative) claim …
    assert!(transitions(&writes, &[1]).is_ok());
    // … or once its lease ended.
    let later = [
        write(0, None, claim(1), NOW),
        write(1, Some(claim(1)), claim(2), NOW + 61_000),
    ];
    assert!(transitions(&later, &[0, 1]).is_ok());
}

#[test]
fn a_stale_owner_completing_a_newer_claim_is_caught() {
    let writes = [
        write(0, None, claim(1), NOW),
        write(1, Some(claim(1)), claim(2), NOW + 61_000),
        write(0, Some(claim(2)), completed(), NOW + 62_000),
    ];
    let err = transitions(&writes, &[0, 1]).unwrap_err();
    assert!(err.contains("stale owner"), "{err}");
    let own = [
        write(0, None, claim(1), NOW),
        write(0, Some(claim(1)), completed(), NOW + 1),
    ];
    assert!(transitions(&own, &[0]).is_ok());
}

#[test]
fn replacing_a_completed_record_is_caught() {
    let writes = [write(3, Some(completed()), claim(4), NOW + 10)];
    assert!(transitions(&writes, &[3]).is_err());
    let nothing = [write(3, None, completed(), NOW)];
    assert!(transitions(&nothing, &[3])
        .unwrap_err()
        .contains("no claim"));
}

#[test]
fn an_execution_after_the_record_was_completed_is_caught() {
    let writes = [
        write(0, None, claim(1), NOW),
        write(0, Some(claim(1)), completed(), NOW + 1),
    ];
    let first = Execution {
        worker: 0,
        writes_before: 1,
    };
    assert!(no_execution_after_completion(&writes, std::slice::from_ref(&first)).is_ok());
    let second = Execution {
        worker: 1,
        writes_before: 2,
    };
    let err = no_execution_after_completion(&writes, &[first, second]).unwrap_err();
    assert!(err.contains("worker 1"), "{err}");
}

#[test]
fn a_replay_that_no_completed_record_holds_is_caught() {
    let writes = [
        write(0, None, claim(1), NOW),
        write(0, Some(claim(1)), completed(), NOW + 1),
    ];
    let records = completed_responses(&writes).unwrap();
    assert_eq!(records, vec![(201, Some(b"ok".to_vec()), 1)]);
    let mut replay = ClientAnswer {
        status: 201,
        body: b"ok".to_vec(),
        complete: true,
        ..ClientAnswer::default()
    };
    replay.headers.add("idempotent-replayed", b"true");
    assert!(replay_is_the_record(&replay, &records).is_ok());
    replay.body = br#"{"id":2}"#.to_vec();
    assert!(replay_is_the_record(&replay, &records).is_err());
    assert!(replay_is_the_record(&replay, &[]).is_err());
}

#[test]
fn a_release_after_an_attempt_that_may_have_reached_the_upstream_is_caught() {
    use crate::envoy::UpstreamCall;
    use crate::scenario::{Failure, Request};
    let writes = vec![
        write(0, None, claim(1), NOW),
        write(0, Some(claim(1)), Bucket::default().encode(), NOW + 1),
    ];
    let run = Run {
        trace: Vec::new(),
        actors: Vec::new(),
        upstream_calls: vec![UpstreamCall {
            worker: 0,
            context: 2,
            method: "POST".into(),
            path: "/orders".into(),
            key: Some("k".into()),
            at_ms: NOW,
            writes_before: 1,
        }],
        callouts: Vec::new(),
        writes,
        store_log: Vec::new(),
        followup: Ok(None),
        followup_ran: false,
        anomalies: Vec::new(),
        clock_jumped: false,
    };
    let ending = |failure| {
        Plan::concurrent(1, Request::post("/orders"), Response::new(201))
            .upstream(vec![Upstream::Fail(failure)])
    };
    let retried = ending(Failure::RetriedThenRefused { attempts: 2 });
    let err = no_release_in_doubt(&retried, &run).unwrap_err();
    assert!(err.contains("released its key"), "{err}");
    assert!(no_release_in_doubt(&ending(Failure::ConnectionFailure), &run).is_ok());
    let answered_503 = Plan::concurrent(1, Request::post("/orders"), Response::new(503));
    assert!(no_release_in_doubt(&answered_503, &run).is_ok());
}

#[test]
fn a_key_nobody_completed_must_run_again_after_the_lease() {
    use crate::scenario::Request;
    let plan = Plan::detached(1, Request::post("/orders"));
    let created = ClientAnswer {
        status: 201,
        body: b"ok".to_vec(),
        complete: true,
        ..ClientAnswer::default()
    };
    let conflict = ClientAnswer {
        status: 409,
        ..created.clone()
    };
    let run = |answer: &ClientAnswer, ran| Run {
        trace: Vec::new(),
        actors: Vec::new(),
        upstream_calls: Vec::new(),
        callouts: Vec::new(),
        writes: Vec::new(),
        store_log: Vec::new(),
        followup: Ok(Some(answer.clone())),
        followup_ran: ran,
        anomalies: Vec::new(),
        clock_jumped: false,
    };
    assert!(released_key_runs_again(&plan, &run(&created, true), &[]).is_ok());
    for (answer, ran) in [(&created, false), (&conflict, true)] {
        let err = released_key_runs_again(&plan, &run(answer, ran), &[]).unwrap_err();
        assert!(err.contains("must run again"), "{err}");
    }
    // A completed record is replayed instead (checked by `replay_is_the_record`).
    let completed = [(201, Some(b"ok".to_vec()), 0)];
    assert!(released_key_runs_again(&plan, &run(&conflict, false), &completed).is_ok());
}
