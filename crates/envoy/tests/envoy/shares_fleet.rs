//! A share refusal through the fleet names its share: an Envoy on the remote store (the
//! `idemgate-store` service on a real `redis-server` or PostgreSQL), shares as fixed caps, one
//! address past its share. The service's answer says which share refused and whose, so the
//! filter counts it by its reason (`quota_exceeded.address`) and logs the payer's hashed tag,
//! exactly as for the local store; another address is still served.

use crate::fleet::{envoy, Backend, Engine, Store, STORE};
use crate::floods::{keyed, label};
use crate::upstream::Upstream;
use std::net::Ipv4Addr;

/// Records an address group may hold in the fleet's store.
const PEER_SHARE: usize = 3;
/// Fresh keys the flooding address sends: two past its share.
const SENT: usize = PEER_SHARE + 2;

/// Shares as fixed caps (a pressure of 0 %): the address share binds however empty the store.
fn filter() -> String {
    format!(
        r#"{{ "capacity": 1000, "shares": {{ "peer": {PEER_SHARE}, "pressure": "0%" }},
             "routes": [{{ "prefix": "/orders" }}], {STORE} }}"#
    )
}

#[test]
#[ignore = "needs Envoy, the built filter and store, redis-server: make test-envoy"]
fn a_remote_refusal_is_counted_by_its_share_on_redis() {
    a_remote_refusal_is_counted_by_its_share(Engine::Redis);
}

#[test]
#[ignore = "needs Envoy, the built filter and store, PostgreSQL: make test-envoy"]
fn a_remote_refusal_is_counted_by_its_share_on_postgres() {
    a_remote_refusal_is_counted_by_its_share(Engine::Postgres);
}

fn a_remote_refusal_is_counted_by_its_share(engine: Engine) {
    let backend = Backend::start(engine);
    let store = Store::start(&backend);
    let upstream = Upstream::start();
    let (envoy, _) = envoy(&filter(), &upstream, &store);

    let flooder = Ipv4Addr::new(127, 0, 3, 1);
    let labels: Vec<String> = (0..SENT)
        .map(|n| label(&keyed("/orders", &format!("share-{n}"), flooder, None).send(envoy.port)))
        .collect();
    let mut expected = vec!["201".to_string(); PEER_SHARE];
    expected.extend(vec![
        "429 scope_quota_exceeded".to_string();
        SENT - PEER_SHARE
    ]);
    assert_eq!(labels, expected, "its share served, then refused");
    assert_eq!(
        upstream.total(),
        PEER_SHARE,
        "a refused request is not forwarded"
    );

    // Counted by the share that refused and logged with the payer's hashed tag, never its
    // address, as the local store's refusal is.
    envoy.assert_share_refusals("address", SENT - PEER_SHARE, "127.0.3.1");

    // Another address is served: the share is the flooder's, not the store's.
    let other = keyed("/orders", "share-other", Ipv4Addr::new(127, 0, 3, 2), None);
    assert_eq!(label(&other.send(envoy.port)), "201");
}
