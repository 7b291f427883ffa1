//! A signed callback delivered again past its signature's tolerance (a provider's or a relay's
//! redelivery with the original signature): through the whole guard, over the local store and the
//! remote store's rules. Only the answer stored for that message answers it; it never claims, takes
//! over or releases a record, and is never forwarded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::edge::Edge;
use crate::guard::{self, Action, Ask, Capture, Headed, Host, Reply};
use crate::hash::to_hex;
use crate::record::Record;
use crate::store::remote::{apply, Change};
use crate::store::remote::{Request, Response};
use crate::store::StoreError;
use crate::{ClaimOutcome, MemoryStore, OwnerToken, Policy, Protocol, ProtocolError, UnixMillis};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::prelude::rust_2021::{String, ToOwned, Vec};

const SECRET: &str = "whsec_late_deliveries_0123";
/// When the provider first sent its messages (unix seconds).
const SENT: u64 = 1_700_000_000;
/// An hour later: far past the default tolerance of five minutes.
const LATE: u64 = SENT + 3600;

fn policy(extra: &str) -> Policy {
    let json = format!(
        r#"{{"routes": [{{"prefix": "/hooks/stripe", "preset": "stripe",
             "signature": {{"secret": "{SECRET}"}}}}]{extra}}}"#
    );
    Policy::from_json(&json, &|_| None).unwrap()
}

/// Stripe's signature of `body` made at `t` (unix seconds).
fn stripe_signature(body: &str, t: u64) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{t}.{body}").as_bytes());
    format!("t={t},v1={}", to_hex(&mac.finalize().into_bytes()))
}

fn event(id: &str) -> String {
    format!(r#"{{"id":"{id}","type":"payment_intent.succeeded"}}"#)
}

/// What became of one delivery.
#[derive(Debug, Default)]
struct Seen {
    status: Option<u16>,
    replayed: bool,
    problem: Option<String>,
    forwarded: bool,
    /// The store questions it asked, by kind.
    asks: Vec<&'static str>,
}

/// One delivery of `body`, signed with `signature`, at the edge's clock. `store` answers at once;
/// `hold` leaves a forwarded delivery unfinished (its claim in flight), else the upstream answers
/// 200 and the answer is stored. `fail` answers every store question with a store error.
fn deliver(
    policy: &Policy,
    edge: &Edge,
    store: &mut MemoryStore,
    body: &str,
    signature: &str,
    hold: bool,
    fail: bool,
) -> Seen {
    let headers = [
        (":method", &b"POST"[..]),
        (":path", b"/hooks/stripe"),
        ("content-type", b"application/json"),
        ("stripe-signature", signature.as_bytes()),
    ];
    let (headed, _) = guard::head(policy, headers, true, edge);
    let mut seen = Seen::default();
    let keyed = match headed {
        Headed::Keyed(keyed) => keyed,
        Headed::Answer(http) => {
            seen.status = Some(http.status);
            seen.problem = problem_type(&http.body);
            return seen;
        }
        other => panic!("not keyed: {other:?}"),
    };
    let mut machine = keyed.take::<(), ()>(policy, |_| ());
    if machine.body_wants(body.len() as u64) {
        machine.body_chunk(Some(body.as_bytes()));
    }
    machine.body_end();
    let now = edge.now().unwrap();
    let mut protocol = Protocol { store, policy };
    let failed = || Err(ProtocolError::Store(StoreError::Unavailable("down".into())));
    while let Some(action) = machine.poll() {
        match action {
            Action::Ask(Ask::Claim(c)) => {
                seen.asks.push("claim");
                let outcome = if fail {
                    failed()
                } else {
                    protocol.claim(c.key, c.fingerprint, c.owner, c.payers, now)
                };
                machine.answered(Reply::Claim(outcome), policy);
            }
            Action::Ask(Ask::Replay { key, fingerprint }) => {
                seen.asks.push("replay");
                let outcome = if fail {
                    failed()
                } else {
                    protocol.replay(key, fingerprint, now)
                };
                machine.answered(Reply::Claim(outcome), policy);
            }
            Action::Forward => {
                seen.forwarded = true;
                if hold {
                    continue;
                }
                let head = [
                    (":status", &b"200"[..]),
                    ("content-type", b"application/json"),
                ];
                machine.upstream_head(Capture::head(head, policy));
                let ack = br#"{"received":true}"#;
                if machine.upstream_wants(ack.len() as u64) {
                    machine.upstream_chunk(Some(ack));
                }
                seen.status = Some(200);
                machine.ended(true, || unreachable!("the answer came whole"));
            }
            Action::Finish {
                key, owner, facts, ..
            } => {
                protocol.finish(key, owner, Some(facts), now).unwrap();
            }
            Action::Answer(http) => {
                seen.status = Some(http.status);
                seen.replayed = http.header("idempotent-replayed") == Some("true");
                seen.problem = problem_type(&http.body);
            }
            Action::Warn(_) => {}
            Action::Pass => {
                seen.forwarded = true;
                seen.asks.push("passed");
            }
            other => panic!("not on this route: {other:?}"),
        }
    }
    seen
}

fn problem_type(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    Some(value.get("type")?.as_str()?.rsplit(':').next()?.to_owned())
}

fn edge() -> Edge {
    Edge::at(UnixMillis(SENT * 1000))
}

#[test]
fn a_completed_message_redelivered_late_gets_its_acknowledgement_and_runs_once() {
    let policy = policy("");
    let edge = edge();
    let mut store = MemoryStore::new();
    let body = event("evt_1");
    let signed = stripe_signature(&body, SENT);
    let first = deliver(&policy, &edge, &mut store, &body, &signed, false, false);
    assert!(first.forwarded);
    assert_eq!(first.status, Some(200));
    // An hour later the provider sends the very same bytes again.
    edge.set_secs(LATE);
    let again = deliver(&policy, &edge, &mut store, &body, &signed, false, false);
    assert_eq!(
        (again.status, again.replayed, again.forwarded),
        (Some(200), true, false),
        "{again:?}"
    );
    assert_eq!(again.asks, ["replay"], "looked up, never claimed");
}

#[test]
fn a_new_message_that_old_is_refused_and_holds_nothing() {
    let policy = policy("");
    let edge = edge();
    let mut store = MemoryStore::new();
    edge.set_secs(LATE);
    let body = event("evt_new");
    let old = stripe_signature(&body, SENT);
    let late = deliver(&policy, &edge, &mut store, &body, &old, false, false);
    assert_eq!(late.status, Some(403));
    assert_eq!(late.problem.as_deref(), Some("signature_stale"));
    assert!(!late.forwarded);
    assert_eq!(late.asks, ["replay"]);
    // It wrote nothing: the message signed now is a first delivery, forwarded.
    let fresh = stripe_signature(&body, LATE);
    let now = deliver(&policy, &edge, &mut store, &body, &fresh, false, false);
    assert!(now.forwarded, "{now:?}");
}

#[test]
fn a_late_redelivery_of_a_message_in_flight_is_refused_and_leaves_its_claim() {
    let policy = policy(r#", "lease": "10m""#);
    let edge = edge();
    let mut store = MemoryStore::new();
    let body = event("evt_slow");
    let signed = stripe_signature(&body, SENT);
    // The first delivery is still running when its timestamp is already past the tolerance.
    let first = deliver(&policy, &edge, &mut store, &body, &signed, true, false);
    assert!(first.forwarded);
    edge.set_secs(SENT + 301);
    let late = deliver(&policy, &edge, &mut store, &body, &signed, false, false);
    assert_eq!(late.status, Some(403));
    assert_eq!(late.problem.as_deref(), Some("signature_stale"));
    assert!(!late.forwarded);
    // The claim is untouched: a timely delivery of the same message is still told it runs.
    let fresh = stripe_signature(&body, SENT + 301);
    let retry = deliver(&policy, &edge, &mut store, &body, &fresh, false, false);
    assert_eq!(retry.status, Some(409), "{retry:?}");
    // Past the lease, the late one still takes nothing over.
    edge.set_secs(LATE);
    let late = deliver(&policy, &edge, &mut store, &body, &signed, false, false);
    assert_eq!((late.status, late.forwarded), (Some(403), false));
}

#[test]
fn a_forged_late_delivery_is_refused_without_asking_the_store() {
    let policy = policy("");
    let edge = edge();
    let mut store = MemoryStore::new();
    let body = event("evt_1");
    let signed = stripe_signature(&body, SENT);
    assert!(deliver(&policy, &edge, &mut store, &body, &signed, false, false).forwarded);
    edge.set_secs(LATE);
    // The stored message's id, under a signature that does not match the body.
    let forged = event("evt_1").replace("succeeded", "failed");
    let late = deliver(&policy, &edge, &mut store, &forged, &signed, false, false);
    assert_eq!(late.status, Some(403));
    assert_eq!(late.problem.as_deref(), Some("signature_mismatch"));
    assert!(late.asks.is_empty(), "no store look-up: {late:?}");
    // Dated ahead of the tolerance: refused on its headers, as before.
    edge.set_secs(SENT - 301);
    let ahead = deliver(&policy, &edge, &mut store, &body, &signed, false, false);
    assert_eq!(ahead.problem.as_deref(), Some("signature_stale"));
    assert!(ahead.asks.is_empty());
}

#[test]
fn a_store_that_cannot_answer_a_late_delivery_never_passes_it_through() {
    let policy = policy(r#", "on_store_error": "pass_through""#);
    let edge = edge();
    let mut store = MemoryStore::new();
    let body = event("evt_1");
    let signed = stripe_signature(&body, SENT);
    // The failure mode lets a timely delivery through unguarded...
    let timely = deliver(&policy, &edge, &mut store, &body, &signed, false, true);
    assert_eq!(timely.asks, ["claim", "passed"], "{timely:?}");
    // ...but a late one is only ever answered from the store: 503, the sender tries again.
    edge.set_secs(LATE);
    let late = deliver(&policy, &edge, &mut store, &body, &signed, false, true);
    assert_eq!(
        (late.status, late.forwarded),
        (Some(503), false),
        "{late:?}"
    );
}

/// The remote store service decides a late delivery by the same rule, and writes nothing.
#[test]
fn the_remote_store_looks_up_and_never_writes() {
    use crate::record::{Completed, InFlight, StoredBody, StoredResponse};
    use crate::{Fingerprint, Payers, Span, StorageKey};
    let key = StorageKey::from_stored([1; 32]);
    let fingerprint = Fingerprint([2; 32]);
    let now = UnixMillis(SENT * 1000);
    let request = Request::Replay { key, fingerprint };
    assert_eq!(Request::decode(&request.encode()), Ok(request.clone()));
    let claim = InFlight {
        fingerprint,
        owner: OwnerToken([3; 16]),
        lease_until: now.after(Span::from_secs(60)),
        expires_at: now.after(Span::from_secs(86_400)),
        payers: Payers::NONE,
    };
    let stored = StoredResponse {
        status: 200,
        headers: vec![],
        body: StoredBody::Kept(b"ok".to_vec()),
        seal: None,
    };
    let done = Record::Completed(Completed {
        fingerprint,
        response: stored.clone(),
        expires_at: now.after(Span::from_secs(60)),
    });
    let lapsed = Record::InFlight(InFlight {
        lease_until: UnixMillis(0),
        ..claim.clone()
    });
    let cases = [
        (None, Response::Claim(ClaimOutcome::NotReplayed)),
        (Some(&lapsed), Response::Claim(ClaimOutcome::NotReplayed)),
        (
            Some(&done),
            Response::Claim(ClaimOutcome::Replay(stored.clone())),
        ),
    ];
    for (record, expected) in cases {
        let (response, change) = apply(&request, record, now);
        assert_eq!(response, expected);
        assert_eq!(change, Change::Keep);
        assert_eq!(Response::decode(&response.encode()), Ok(response));
    }
}
