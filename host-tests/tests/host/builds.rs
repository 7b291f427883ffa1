//! The shipped filter and its test build are the same filter: the test build (feature
//! `conformance`, `make build-filter`) adds one export, `idemgate_conformance`, which the vectors run
//! through. Proven here: the shipped file has no such export, the two link the same imports and
//! export the same entry points otherwise, and they decide identically — the same stories and every
//! interleaving of the same concurrent plans give the same answers, upstream calls, shared-data
//! writes and metrics through both.

use crate::support::{created, filter, filter_test_build, order};
use idemgate_host_tests::artifacts;
use idemgate_host_tests::envoy::{CalloutFault, InnerPass, InnerReply};
use idemgate_host_tests::explore::{run, DepthFirst, Plan};
use idemgate_host_tests::runtime::FilterModule;
use idemgate_host_tests::scenario::{
    Envoy, EnvoyBuilder, Failure, Forwarding, Orders, Request, Response, Upstream,
};
use std::collections::BTreeSet;
use std::time::Duration;

const CONFORMANCE_EXPORT: &str = "idemgate_conformance";

fn exports(module: &FilterModule) -> BTreeSet<String> {
    module
        .module
        .exports()
        .map(|e| format!("{} {:?}", e.name(), e.ty()))
        .collect()
}

fn imports(module: &FilterModule) -> BTreeSet<String> {
    module
        .module
        .imports()
        .map(|i| format!("{}::{} {:?}", i.module(), i.name(), i.ty()))
        .collect()
}

#[test]
fn the_test_build_is_the_shipped_build_plus_the_conformance_export() {
    let (shipped, test) = (filter(), filter_test_build());
    assert_ne!(shipped.path, test.path, "two different files");
    let (shipped_exports, test_exports) = (exports(&shipped), exports(&test));
    let extra: Vec<&String> = test_exports.difference(&shipped_exports).collect();
    assert_eq!(extra.len(), 1, "{extra:?}");
    assert!(
        extra[0].starts_with(&format!("{CONFORMANCE_EXPORT} ")),
        "{extra:?}"
    );
    assert!(
        shipped_exports.is_subset(&test_exports),
        "the test build lacks: {:?}",
        shipped_exports
            .difference(&test_exports)
            .collect::<Vec<_>>()
    );
    assert_eq!(imports(&shipped), imports(&test));
}

/// One story through a simulated Envoy built by `builder`, told as text: every answer, whether it
/// reached the upstream, then the upstream calls, metrics, shared-data writes and anomalies.
fn story(builder: EnvoyBuilder, steps: &dyn Fn(&Envoy, &mut Vec<String>)) -> Vec<String> {
    let envoy = builder.start().unwrap();
    let mut told = Vec::new();
    steps(&envoy, &mut told);
    told.push(format!("upstream calls {:?}", envoy.upstream_calls()));
    told.push(format!("metrics {:?}", envoy.metrics()));
    told.push(format!("writes {:?}", envoy.shared_data().log()));
    told.push(format!("anomalies {:?}", envoy.anomalies()));
    told
}

fn send(envoy: &Envoy, worker: usize, request: Request, told: &mut Vec<String>) {
    let exchange = envoy.worker(worker).send(request).unwrap();
    told.push(format!(
        "w{worker}: upstream {} answer {:?}",
        exchange.reached_upstream(),
        exchange.answer()
    ));
}

fn send_and_respond(
    envoy: &Envoy,
    worker: usize,
    request: Request,
    response: Response,
    told: &mut Vec<String>,
) {
    let exchange = envoy.worker(worker).send(request).unwrap();
    let reached = exchange.reached_upstream();
    if reached {
        exchange.respond(response).unwrap();
    }
    told.push(format!(
        "w{worker}: upstream {reached} answer {:?}",
        exchange.answer()
    ));
}

/// The stories, each run through `wasm` (a path to either build).
fn stories(wasm: &std::path::Path) -> Vec<Vec<String>> {
    let builder = |config: &str| {
        Envoy::builder()
            .workers(2)
            .seed(11)
            .config(config)
            .wasm(wasm.to_path_buf())
    };
    let checkout = |envoy: &Envoy, told: &mut Vec<String>| {
        let first = envoy.worker(0).send(order("k-1")).unwrap();
        envoy.advance(Duration::from_secs(3)).unwrap();
        send(envoy, 1, order("k-1"), told); // 409 while in flight
        first.respond(created()).unwrap();
        told.push(format!("w0: answer {:?}", first.answer()));
        send(envoy, 1, order("k-1").chunks_of(3), told); // replay
        let other = Request::post("/orders")
            .key("k-1")
            .header("authorization", "Bearer alice")
            .json(r#"{"sku":"B2","qty":1}"#);
        send(envoy, 0, other, told); // 422
        send(envoy, 0, Request::post("/orders").key("").json("{}"), told);
        send(envoy, 1, Request::get("/orders/7").key("k-1"), told);
        let failing = envoy.worker(0).send(order("k-2")).unwrap();
        failing.upstream_fails(Failure::ConnectionFailure).unwrap();
        told.push(format!("w0: answer {:?}", failing.answer()));
        send_and_respond(envoy, 1, order("k-2"), Response::new(503), told);
        send_and_respond(envoy, 0, order("k-2"), created(), told);
        let in_doubt = envoy.worker(1).send(order("k-3")).unwrap();
        in_doubt.upstream_fails(Failure::Timeout).unwrap();
        told.push(format!("w1: answer {:?}", in_doubt.answer()));
        send(envoy, 0, order("k-3"), told);
        envoy.advance(Duration::from_secs(61)).unwrap();
        send_and_respond(envoy, 0, order("k-3"), created(), told);
    };
    let limits = |envoy: &Envoy, told: &mut Vec<String>| {
        send(envoy, 0, order("k-4"), told); // 413
        let big = Response::new(200).json(r#"{"a":"0123456789012345678901234567890"}"#);
        send_and_respond(envoy, 1, order("k-5").json("{}"), big, told);
        send(envoy, 0, order("k-5").json("{}"), told);
    };
    let routes = |envoy: &Envoy, told: &mut Vec<String>| {
        send(
            envoy,
            0,
            Request::post("/payments").json(r#"{"amount":1}"#),
            told,
        );
        let pay = |key: &str, amount: &str| {
            Request::post("/payments")
                .key(key)
                .header("authorization", "Bearer bob")
                .json(&format!(
                    r#"{{"amount":{amount},"currency":"eur","note":"x"}}"#
                ))
        };
        send_and_respond(envoy, 0, pay("p-1", "1.50"), created(), told);
        send(envoy, 1, pay("p-1", "1.5"), told); // same fields: replay
        send(envoy, 1, pay("p-1", "2"), told); // other amount: 422
        send_and_respond(
            envoy,
            1,
            Request::post("/carts").json("{}"),
            created(),
            told,
        );
    };
    // Re-entry: detached exchanges through the re-entry listener, and what its inner pass answers.
    let reentering = |envoy: &Envoy, told: &mut Vec<String>| {
        let cluster = Forwarding::Reentry.cluster();
        let answered = |envoy: &Envoy, told: &mut Vec<String>, worker: usize, key: &str| {
            let exchange = envoy.worker(worker).send(order(key)).unwrap();
            let records = envoy.answer_callouts().unwrap();
            told.push(format!(
                "w{worker} {key}: marks {:?} answer {:?}",
                records.iter().map(|r| r.mark()).collect::<Vec<_>>(),
                exchange.answer()
            ));
        };
        answered(envoy, told, 0, "r-1");
        answered(envoy, told, 1, "r-1"); // replay
        let rbac = CalloutFault::Inner(InnerPass::LocalReply(InnerReply::RBAC_DENIED));
        envoy.faults().callout(cluster, rbac, 1);
        answered(envoy, told, 0, "r-2"); // 403, released
        answered(envoy, told, 1, "r-2");
        let retried = CalloutFault::Inner(InnerPass::RetriedThenRefused { attempts: 3 });
        envoy.faults().callout(cluster, retried, 1);
        answered(envoy, told, 0, "r-3"); // in doubt
        answered(envoy, told, 1, "r-3"); // 409
        envoy
            .faults()
            .callout(cluster, CalloutFault::Inner(InnerPass::Unmarked), 1);
        answered(envoy, told, 0, "r-4");
        let routed = Request::post("/r5")
            .key("r-5")
            .header("x-envoy-retry-on", "5xx")
            .json("{}");
        let router = envoy.worker(1).send(routed).unwrap();
        told.push(format!(
            "w1 r-5: upstream {} forwarded {:?}",
            router.reached_upstream(),
            router.forwarded()
        ));
    };
    let reentry_config = format!(
        r#"{{"capacity": 64, {}, "routes": [{{"prefix": "/orders"}}, {{"prefix": "/r5", "forward": "router"}}]}}"#,
        Forwarding::Reentry.upstream("15s")
    );
    let retrying = |envoy: &Envoy, told: &mut Vec<String>| {
        let first = envoy.worker(0).send(order("t-1")).unwrap();
        first
            .upstream_fails(Failure::RetriedThenRefused { attempts: 2 })
            .unwrap();
        told.push(format!("w0: answer {:?}", first.answer()));
        send(envoy, 1, order("t-1"), told); // in doubt: 409
    };
    vec![
        story(
            builder(&reentry_config)
                .forwarding(Forwarding::Reentry, std::sync::Arc::new(Orders::new())),
            &reentering,
        ),
        story(builder(r#"{"capacity": 64}"#), &retrying),
        story(builder(r#"{"capacity": 64}"#), &checkout),
        story(
            builder(r#"{"capacity": 64, "fingerprint": {"mode": "raw"}, "lease": "5s"}"#),
            &checkout,
        ),
        story(
            builder(r#"{"capacity": 64, "max_request_body": 8, "max_response_body": 16}"#),
            &limits,
        ),
        story(
            builder(
                r#"{"capacity": 64, "routes": [{"prefix": "/payments", "key": "required"}, {"prefix": "/carts"}],
                    "fingerprint": {"mode": "fields", "fields": ["/amount", "/currency"]}}"#,
            ),
            &routes,
        ),
    ]
}

#[test]
fn the_shipped_and_test_builds_tell_every_story_alike() {
    let shipped = artifacts::filter_wasm().unwrap_or_else(|e| panic!("{e}"));
    let test = artifacts::filter_test_wasm().unwrap_or_else(|e| panic!("{e}"));
    let (a, b) = (stories(&shipped), stories(&test));
    assert_eq!(a.len(), b.len());
    for (i, (a, b)) in a.iter().zip(&b).enumerate() {
        assert!(a.len() > 4, "story {i} told nothing: {a:?}");
        for (line_a, line_b) in a.iter().zip(b) {
            assert_eq!(line_a, line_b, "story {i}: shipped vs test build");
        }
        assert_eq!(a.len(), b.len(), "story {i}");
    }
}

/// A run as text, everything but the bytes of the shared-data values: those hold owner tokens drawn
/// from the world's entropy by worker threads in whatever order they start, so they differ from run
/// to run of one build alike; their lengths, keys, CAS values and times must not.
fn told(run: &run::Run) -> String {
    let writes: Vec<String> = run
        .writes
        .iter()
        .map(|w| {
            format!(
                "w{} {} {:?} -> {} bytes, cas {} -> {} at {}",
                w.worker,
                w.key,
                w.before.as_ref().map(Vec::len),
                w.value.len(),
                w.cas_given,
                w.cas,
                w.at_ms
            )
        })
        .collect();
    format!(
        "trace {:#?}\nactors {:#?}\nupstream {:#?}\ncallouts {:#?}\nwrites {writes:#?}\nfollowup {:#?}\nanomalies {:#?}\nclock jumped {}",
        run.trace,
        run.actors,
        run.upstream_calls,
        run.callouts,
        run.followup,
        run.anomalies,
        run.clock_jumped
    )
}

/// Every schedule of `plan` through both builds, the test build following the shipped build's
/// choices: each run's trace and results must be equal. Returns the number of schedules.
fn every_schedule_alike(plan: &Plan, shipped: &FilterModule, test: &FilterModule) -> usize {
    let mut prefix = Vec::new();
    let mut schedules = 0;
    loop {
        let mut chooser = DepthFirst::new(prefix.clone());
        let a = told(&run::run(plan, shipped, &mut chooser).unwrap());
        let b = told(&run::run(plan, test, &mut DepthFirst::new(prefix)).unwrap());
        schedules += 1;
        if a != b {
            let first = a
                .lines()
                .zip(b.lines())
                .position(|(x, y)| x != y)
                .unwrap_or(0);
            let around = |s: &str| {
                s.lines()
                    .skip(first.saturating_sub(3))
                    .take(8)
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            panic!(
                "schedule {schedules}: the builds differ at line {first}:\nshipped:\n{}\ntest build:\n{}",
                around(&a),
                around(&b)
            );
        }
        match chooser.next_prefix() {
            Some(next) if schedules < 5_000 => prefix = next,
            _ => return schedules,
        }
    }
}

#[test]
fn the_shipped_and_test_builds_decide_every_interleaving_alike() {
    let (shipped, test) = (filter(), filter_test_build());
    let plans = [
        Plan::concurrent(2, order("k"), created()).with_lease_expiry(),
        Plan::concurrent(2, order("k").chunked_at(&[4, 9]), created())
            .upstream(vec![
                Upstream::Fail(Failure::ConnectionFailure),
                Upstream::Respond(created()),
            ])
            .max_upstream_calls(2),
        Plan::detached(2, order("k").chunked_at(&[6])).clients_may_leave(),
        Plan::detached_via(
            Forwarding::SkippingRoutesAndFilters,
            2,
            order("k").chunked_at(&[6]),
        )
        .clients_may_leave(),
        Plan::detached(2, order("k").chunked_at(&[6])).callout_fault(
            CalloutFault::Inner(InnerPass::RetriedThenRefused { attempts: 2 }),
            1,
        ),
        Plan::concurrent(2, order("k"), created()).upstream(vec![
            Upstream::Fail(Failure::RetriedThenRefused { attempts: 2 }),
            Upstream::Respond(created()),
        ]),
    ];
    for plan in &plans {
        let schedules = every_schedule_alike(plan, &shipped, &test);
        println!("{schedules} schedules alike");
        assert!(schedules > 10);
    }
}
