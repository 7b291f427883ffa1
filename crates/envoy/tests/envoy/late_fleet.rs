//! Late signed redeliveries on a fleet: two real Envoys on one remote store (the `idemgate-store`
//! service on redis-server, PostgreSQL, or both). A Stripe delivery acknowledged through one Envoy
//! and redelivered through the other with a signature past the tolerance gets that acknowledgement
//! (a read-only look-up on the service); a new message that old is refused and leaves nothing
//! behind, on the router path and on detached routes.

use crate::client::{Request, Response};
use crate::fleet::{envoy, replay, Backend, Engine, Store, STORE};
use crate::upstream::Upstream;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::time::{SystemTime, UNIX_EPOCH};

const SECRET: &str = "whsec_fleet_late_deliveries_0123";

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// A Stripe event delivery of `id`, signed at `t` (unix seconds) as Stripe signs it.
fn delivery(id: &str, t: u64) -> Request {
    let body = format!(r#"{{"id":"{id}","object":"event","type":"payment_intent.succeeded"}}"#);
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{t}.{body}").as_bytes());
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Request::new("POST", "/hooks/stripe")
        .header("stripe-signature", &format!("t={t},v1={hex}"))
        .json(&body)
}

fn late_redeliveries_are_acknowledged_across_the_fleet(engine: Engine) {
    let backend = Backend::start(engine);
    let store = Store::start(&backend);
    let upstream = Upstream::start();
    let route = format!(
        r#"{{ "prefix": "/hooks/stripe", "preset": "stripe", "signature": {{ "secret": "{SECRET}" }} }}"#
    );
    let detached = r#", "upstream": { "reentry": "idemgate_reentry", "timeout": "5s" }"#;
    for (n, rest) in ["", detached].into_iter().enumerate() {
        let filter = format!(r#"{{ "routes": [{route}], {STORE}{rest} }}"#);
        let (a, _) = envoy(&filter, &upstream, &store);
        let (b, _) = envoy(&filter, &upstream, &store);
        let before = upstream.path_hits("/hooks/stripe");
        let id = format!("evt_fleet_late_{n}");
        let first = delivery(&id, now_s()).send(a.port);
        assert_eq!(first.status, 201, "{}", first.text());
        // The answer is stored just after the client got it: a timely duplicate waits (409) until
        // it is, as a late delivery cannot (only a stored answer answers it).
        assert!(replay(&delivery(&id, now_s()), b.port).replayed());
        // Signed ten minutes ago, through the other Envoy: the acknowledgement, not a 403.
        let late = delivery(&id, now_s() - 600);
        let again: Response = late.send(b.port);
        assert_eq!(again.status, 201, "{}", again.text());
        assert!(again.replayed());
        assert_eq!(again.body, first.body);
        // A message never acknowledged, signed that long ago: refused on both Envoys...
        let other = format!("evt_fleet_new_{n}");
        for port in [a.port, b.port] {
            let refused = delivery(&other, now_s() - 600).send(port);
            assert_eq!(refused.status, 403, "{}", refused.text());
            assert_eq!(refused.problem_code(), "signature_stale");
        }
        assert_eq!(upstream.path_hits("/hooks/stripe"), before + 1, "ran once");
        // ...and it left nothing: the same message delivered in time runs.
        let in_time = delivery(&other, now_s()).send(b.port);
        assert_eq!(in_time.status, 201, "{}", in_time.text());
        assert!(!in_time.replayed());
        assert_eq!(upstream.path_hits("/hooks/stripe"), before + 2);
        // Unguarded (the same Envoys, a path no route matches): the late delivery reaches the
        // upstream, which would run it again.
        let mut bare = late.clone();
        bare.path = "/unguarded".into();
        assert_eq!(bare.send(a.port).status, 201);
        assert_eq!(upstream.path_hits("/unguarded"), n + 1);
    }
}

mod late_redeliveries_are_acknowledged_across_the_fleet {
    use super::Engine;

    #[test]
    #[ignore = "needs Envoy, the built filter and store, redis-server: make test-envoy"]
    fn redis() {
        super::late_redeliveries_are_acknowledged_across_the_fleet(Engine::Redis);
    }

    #[test]
    #[ignore = "needs Envoy, the built filter and store, PostgreSQL: make test-envoy"]
    fn postgres() {
        super::late_redeliveries_are_acknowledged_across_the_fleet(Engine::Postgres);
    }

    #[test]
    #[ignore = "needs Envoy, the built filter and store, redis-server, PostgreSQL: make test-envoy"]
    fn redis_postgres() {
        super::late_redeliveries_are_acknowledged_across_the_fleet(Engine::RedisPostgres);
    }
}
