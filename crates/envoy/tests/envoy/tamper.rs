//! Tamper-evident records: whoever can write the remote store's engine cannot make an
//! Envoy replay an answer no filter stored. A record is rewritten straight in a real
//! `redis-server` behind the real store service; the Envoys refuse it at replay (502
//! `record_corrupt`), never forward the request again, and count it. And a replay sends only the
//! headers the replaying Envoy's allow-list names, whatever the record holds.

use crate::client::Request;
use crate::fleet::{envoy, replay, Backend, Engine, Store};
use crate::upstream::Upstream;
use idemgate_core::client::scope::StorageKey;
use idemgate_core::record::{Record, StoredBody};
use idemgate_core::store::remote::StoredValue;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

/// The store service's default Redis key prefix (`--key-prefix`): a record's Redis key is the
/// prefix and the storage key in lowercase hex.
const PREFIX: &str = "idemgate:";

/// A remote store whose answers are sealed with the secret of the default variable
/// `IDEMGATE_RECORD_SECRET` (which [`envoy`] sets).
const FILTER: &str = r#"{ "routes": [{ "prefix": "/" }],
  "store": { "kind": "remote", "cluster": "idemgate_store", "timeout": "2s" } }"#;

/// One Redis command over RESP; the reply's bulk string (`None` for nil), or its status line.
fn redis(port: u16, args: &[&[u8]]) -> Option<Vec<u8>> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to redis");
    let mut command = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        command.extend(format!("${}\r\n", arg.len()).bytes());
        command.extend_from_slice(arg);
        command.extend_from_slice(b"\r\n");
    }
    stream.write_all(&command).expect("send to redis");
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).expect("redis reply");
    let line = line.trim_end();
    match line.as_bytes().first() {
        Some(b'+') => Some(line.as_bytes()[1..].to_vec()),
        Some(b'$') => {
            let len: i64 = line[1..].parse().expect("bulk length");
            if len < 0 {
                return None;
            }
            let mut bulk = vec![0; len as usize + 2];
            reader.read_exact(&mut bulk).expect("bulk");
            bulk.truncate(len as usize);
            Some(bulk)
        }
        Some(b'*') => {
            // KEYS: the names, newline-separated (test keys hold no newline).
            let count: usize = line[1..].parse().expect("array length");
            let mut names = Vec::new();
            for _ in 0..count {
                let mut header = String::new();
                reader.read_line(&mut header).expect("bulk header");
                let len: usize = header.trim_end()[1..].parse().expect("bulk length");
                let mut bulk = vec![0; len + 2];
                reader.read_exact(&mut bulk).expect("bulk");
                bulk.truncate(len);
                names.extend(bulk);
                names.push(b'\n');
            }
            Some(names)
        }
        _ => panic!("redis error: {line}"),
    }
}

/// Every value among the prefix's keys that decodes as a record under its own key (its Redis
/// key, its storage key and the record), and the names of all the prefix's keys, which also hold
/// the payers' ledgers.
fn stored_records(port: u16) -> (Vec<(String, StorageKey, StoredValue)>, String) {
    let names = redis(port, &[b"KEYS", format!("{PREFIX}*").as_bytes()]).expect("keys");
    let names = String::from_utf8(names).expect("utf-8 names");
    let records = names
        .lines()
        .filter_map(|name| {
            let hex = name.strip_prefix(PREFIX).expect("prefixed");
            let bytes: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
                .collect();
            let key = StorageKey::from_stored(bytes.try_into().ok()?);
            let value = redis(port, &[b"GET", name.as_bytes()])?;
            let stored = StoredValue::decode(&key, &value).ok()?;
            Some((name.to_owned(), key, stored))
        })
        .collect();
    (records, names)
}

/// The one record the store holds — its Redis key, its storage key and its value — among the
/// prefix's keys.
fn only_record(port: u16) -> (String, StorageKey, StoredValue) {
    let (records, names) = stored_records(port);
    assert_eq!(
        records.len(),
        1,
        "one record among {} keys: {names:?}",
        names.lines().count()
    );
    records.into_iter().next().expect("one")
}

#[test]
#[ignore = "needs Envoy, the built filter and store, redis-server: make test-envoy"]
fn a_record_rewritten_in_redis_is_refused_at_replay() {
    let backend = Backend::start(Engine::Redis);
    let redis_port = backend.redis.as_ref().expect("redis").port;
    let store = Store::start(&backend);
    let upstream = Upstream::start();
    let (a, _) = envoy(FILTER, &upstream, &store);
    let (b, _) = envoy(FILTER, &upstream, &store);

    let request = Request::post("/pay", "tamper-1");
    let first = request.send(a.port);
    assert_eq!(
        (first.status, first.replayed()),
        (201, false),
        "{}",
        first.text()
    );
    let genuine = replay(&request, b.port);
    assert!(genuine.replayed(), "{} {}", genuine.status, genuine.text());
    assert_eq!(genuine.body, first.body);

    // Whoever can write Redis rewrites the record: a planted `access-control-allow-origin: *` and
    // another body, in the value's own framing (version, storage key, record) so that the store
    // service reads it and sends it on as the key's answer.
    let (name, key, mut stored) = only_record(redis_port);
    let Record::Completed(done) = &mut stored.record else {
        panic!("a completed record: {:?}", stored.record)
    };
    done.response
        .headers
        .push(("access-control-allow-origin".into(), "*".into()));
    done.response.body = StoredBody::Kept(b"{\"refund\":\"to attacker\"}".to_vec());
    let forged = stored.encode(&key);
    let set = redis(redis_port, &[b"SET", name.as_bytes(), &forged, b"KEEPTTL"]);
    assert_eq!(set.as_deref(), Some(&b"OK"[..]));

    for envoy in [&a, &b] {
        let answer = request.send(envoy.port);
        assert_eq!(answer.status, 502, "{}", answer.text());
        assert_eq!(answer.problem_code(), "record_corrupt");
        assert!(!answer.replayed());
        assert!(!answer.has_header("access-control-allow-origin"));
        assert!(!answer.text().contains("attacker"), "{}", answer.text());
        assert_eq!(
            envoy.stat("wasmcustom.idemgate.record_corrupt"),
            Some(1),
            "counted once on each Envoy"
        );
    }
    // Logged where operators look, with the key's log label, never the client's key.
    for envoy in [&a, &b] {
        let log = envoy.log_text();
        assert!(log.contains("not replayed (502 record_corrupt)"), "{log}");
        assert!(!log.contains("tamper-1"));
    }
    // Never run again either: the record says the request may have been executed.
    assert_eq!(upstream.hits("tamper-1"), 1);
    assert_eq!(a.stat("wasmcustom.idemgate.replayed").unwrap_or(0), 0);
}

#[test]
#[ignore = "needs Envoy, the built filter and store, redis-server: make test-envoy"]
fn a_stored_header_outside_the_allow_list_is_not_replayed() {
    let backend = Backend::start(Engine::Redis);
    let store = Store::start(&backend);
    let upstream = Upstream::start();
    // Envoy `wide` stores `x-order-tag` (its allow-list names it); `narrow` has the default list.
    let wide = r#"{ "routes": [{ "prefix": "/" }], "replay_headers": ["content-type", "x-order-tag"],
  "store": { "kind": "remote", "cluster": "idemgate_store", "timeout": "2s" } }"#;
    let (wide, _) = envoy(wide, &upstream, &store);
    let (narrow, _) = envoy(FILTER, &upstream, &store);

    let request = Request::post("/pay", "allow-1").header("x-script", "header=x-order-tag:7");
    let first = request.send(wide.port);
    assert_eq!(first.status, 201, "{}", first.text());
    assert_eq!(first.header("x-order-tag"), Some("7"));
    // Stored with the header: the Envoy whose list names it replays it ...
    let from_wide = replay(&request, wide.port);
    assert!(from_wide.replayed(), "{}", from_wide.text());
    assert_eq!(from_wide.header("x-order-tag"), Some("7"));
    // ... the one whose list does not (a narrowed configuration) drops it at replay.
    let from_narrow = replay(&request, narrow.port);
    assert!(from_narrow.replayed(), "{}", from_narrow.text());
    assert_eq!(from_narrow.header("x-order-tag"), None);
    assert_eq!(from_narrow.body, first.body);
    assert_eq!(upstream.hits("allow-1"), 1);
}

/// The one resource record of the sequencer the store holds (its Redis key, storage key and
/// value), among the delivery ids' records and the payers' ledgers.
fn only_resource(port: u16) -> (String, StorageKey, StoredValue) {
    let (records, names) = stored_records(port);
    let resources: Vec<_> = records
        .into_iter()
        .filter(|(_, _, stored)| matches!(stored.record, Record::Resource(_)))
        .collect();
    assert_eq!(resources.len(), 1, "one resource record: {names:?}");
    resources.into_iter().next().expect("one")
}

#[test]
#[ignore = "needs Envoy, the built filter and store, redis-server: make test-envoy"]
fn a_state_planted_in_redis_is_never_acknowledged_as_illegal() {
    use crate::order::{config_with, event};
    let backend = Backend::start(Engine::Redis);
    let redis_port = backend.redis.as_ref().expect("redis").port;
    let store = Store::start(&backend);
    let upstream = Upstream::start();
    let remote = r#", "store": { "kind": "remote", "cluster": "idemgate_store", "timeout": "2s" }"#;
    let (a, _) = envoy(&config_with(None, remote), &upstream, &store);

    let paid = event("/hooks", "pay-7", "payment.succeeded", 7).send(a.port);
    assert_eq!(paid.status, 201, "{}", paid.text());
    assert_eq!(paid.header("idemgate-order"), Some("applied"));

    // Whoever can write Redis plants `cancelled` for the order, in the value's own framing, so
    // that the store service reads it and applies the table to it.
    // The settle is sent with the answer and may land a moment later: waited for, bounded.
    let state = |stored: &StoredValue| match &stored.record {
        Record::Resource(r) => (r.state.clone(), r.claim.is_some()),
        other => panic!("a resource record: {other:?}"),
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while state(&only_resource(redis_port).2) != ("paid".into(), false)
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (name, key, mut stored) = only_resource(redis_port);
    assert_eq!(state(&stored), ("paid".into(), false), "settled");
    let Record::Resource(resource) = &mut stored.record else {
        panic!("a resource record: {:?}", stored.record)
    };
    resource.state = "cancelled".into();
    let forged = stored.encode(&key);
    let set = redis(redis_port, &[b"SET", name.as_bytes(), &forged, b"KEEPTTL"]);
    assert_eq!(set.as_deref(), Some(&b"OK"[..]));

    // A genuine event for the order: never acknowledged as illegal (which would drop it for
    // good), but refused so that its sender delivers it again once the record is repaired.
    let shipped = event("/hooks", "ship-7", "order.shipped", 7).send(a.port);
    assert_ne!(shipped.header("idemgate-order"), Some("illegal"));
    assert_eq!(shipped.status, 503, "{}", shipped.text());
    assert_eq!(shipped.problem_code(), "order_record_corrupt");
    assert_eq!(
        upstream.path_hits("/hooks"),
        1,
        "the event is not forwarded"
    );
    assert_eq!(a.stat("wasmcustom.idemgate.record_corrupt"), Some(1));
    assert_eq!(a.stat("wasmcustom.idemgate.order.illegal").unwrap_or(0), 0);
}
