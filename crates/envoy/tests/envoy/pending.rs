//! A request paused for the remote store keeps its place until the store answers, whatever Envoy
//! does meanwhile. Here Envoy answers the client itself (its `stream_idle_timeout`: 504 to a request received whole) while the
//! claim waits on a frozen backend: the claim lands after the stream is gone, and the machine
//! that waited for it must take the answer and give the claim back, so a retry runs at once
//! instead of meeting 409 for the whole lease.

use crate::client::Request;
use crate::fleet::{retry_once_released, Backend, Engine, Store, RECORD_SECRET, STORE};
use crate::harness::{Envoy, Setup};
use crate::upstream::Upstream;

#[test]
#[ignore = "needs Envoy, redis-server and the built filter and store: make test-envoy"]
fn a_claim_granted_after_envoys_own_reply_is_released() {
    let backend = Backend::start(Engine::Redis);
    // The service waits on the frozen backend longer than Envoy waits for the request, and the
    // filter waits for the service longer still: the claim lands, and its answer comes back.
    let store = Store::start_with(backend.args(), "5s");
    let upstream = Upstream::start();
    let filter = format!(r#"{{ "routes": [{{ "prefix": "/" }}], {STORE} }}"#)
        .replace(r#""timeout": "2s""#, r#""timeout": "10s""#);
    let mut setup = Setup::new(&filter, upstream.port);
    setup.clusters = store.cluster();
    setup.hcm_extra = "stream_idle_timeout: 1s".into();
    setup
        .vm_env
        .push(("IDEMGATE_RECORD_SECRET".into(), RECORD_SECRET.into()));
    let envoy = Envoy::start(&setup);
    let request = Request::post("/pay", "timed-out");

    backend.freeze();
    let timed_out = request.send(envoy.port);
    backend.thaw();
    assert_eq!(timed_out.status, 504, "{}", timed_out.text());
    assert_eq!(upstream.hits("timed-out"), 0);

    // The claim lands now, for a stream that is gone: it is released.
    let retry = retry_once_released(&envoy, &request);
    assert_eq!(
        (retry.status, retry.replayed()),
        (201, false),
        "the first claim still holds the key: {}",
        retry.text()
    );
    assert_eq!(upstream.hits("timed-out"), 1);
    assert_eq!(envoy.counter("released"), 1);
}
