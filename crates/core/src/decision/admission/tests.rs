use super::*;
use crate::config::ConfigError;
use crate::hash::to_hex;
use crate::policy::Policy;
use alloc::format;
use alloc::vec;
use hmac::{Hmac, Mac};
use sha2::Sha256;

const SECRET: &str = "whsec_0123456789";
const NOW: UnixMillis = UnixMillis(1_700_000_000_000);

fn policy(routes: &str) -> Result<Policy, ConfigError> {
    Policy::from_json(&format!(r#"{{"routes": {routes}}}"#), &|name| {
        (name == "HOOK_SECRET").then(|| SECRET.into())
    })
}

fn stripe_header(body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("1700000000.{body}").as_bytes());
    format!("t=1700000000,v1={}", to_hex(&mac.finalize().into_bytes()))
}

/// Admits a request through the policy's first route: headers, then the body in 3-byte pieces.
fn run(policy: &Policy, headers: &[(&str, &str)], body: &str) -> Result<Option<String>, String> {
    let route = &policy.routes[0];
    let lookup = |name: &str| crate::testing::header_values(headers, name);
    let mut admission = admit(route, &lookup, NOW).map_err(|e| String::from(e.code()))?;
    for piece in body.as_bytes().chunks(3) {
        admission.update(piece);
    }
    admission
        .finish()
        .map(|k| k.map(|k| k.key.as_str().into()))
        .map_err(|e| e.code().into())
}

#[test]
fn stripe_callback_route() {
    let policy = policy(
        r#"[{"prefix": "/hooks/stripe", "kind": "callback", "key_from": [{"json": "/id"}],
             "signature": {"scheme": "stripe", "secret_env": "HOOK_SECRET"}}]"#,
    )
    .unwrap();
    let route = &policy.routes[0];
    assert_eq!(route.methods, vec![String::from("POST")]);
    assert_eq!(route.key, KeyRequirement::Required);
    let body = r#"{"id":"evt_1","type":"payment_succeeded"}"#;
    let signed = stripe_header(body);
    assert_eq!(
        run(&policy, &[("stripe-signature", &signed)], body),
        Ok(Some("evt_1".into()))
    );
    // Unsigned, or signed for another body: refused, whatever key the body names.
    assert_eq!(run(&policy, &[], body), Err("signature_missing".into()));
    let forged = body.replace("evt_1", "evt_2");
    assert_eq!(
        run(&policy, &[("stripe-signature", &signed)], &forged),
        Err("signature_mismatch".into())
    );
    // Signed but without an id: the key is required on callback routes.
    let no_id = r#"{"type":"ping"}"#;
    let err = admit(route, &|_| vec![], NOW).unwrap_err();
    assert_eq!(err.code(), "signature_missing");
    assert_eq!(
        run(
            &policy,
            &[("stripe-signature", &stripe_header(no_id))],
            no_id
        ),
        Err("key_missing".into())
    );
    assert_eq!(
        route.own_scope(),
        Some(Scope {
            source: ROUTE_SCOPE_SOURCE,
            value: b"/hooks/stripe"
        })
    );
}

/// A valid signature past the tolerance is admitted late, with its key; without a key (a
/// control message, an optional key absent) it is refused as stale, never passed unguarded.
#[test]
fn a_late_signature_is_admitted_late_and_never_without_a_key() {
    let policy = policy(
        r#"[{"prefix": "/hooks/stripe", "kind": "callback", "key": "optional",
             "key_from": [{"json": "/id"}],
             "signature": {"scheme": "stripe", "secret_env": "HOOK_SECRET"}}]"#,
    )
    .unwrap();
    let route = &policy.routes[0];
    let late = UnixMillis(NOW.0 + 301_000);
    let run = |body: &str, now| {
        let signed = stripe_header(body);
        let headers = [("stripe-signature", signed.as_str())];
        let lookup = |name: &str| crate::testing::header_values(&headers, name);
        let mut admission = admit(route, &lookup, now)?;
        admission.update(body.as_bytes());
        admission.finish()
    };
    let event = r#"{"id":"evt_1"}"#;
    let freshness = |now| run(event, now).unwrap().map(|a| a.freshness);
    assert_eq!(freshness(NOW), Some(Freshness::Fresh));
    assert_eq!(freshness(late), Some(Freshness::Late));
    let ping = r#"{"type":"ping"}"#;
    assert_eq!(run(ping, NOW), Ok(None));
    assert_eq!(
        run(ping, late).map_err(|e| e.code()),
        Err("signature_stale")
    );
}

#[test]
fn github_callback_route_keys_from_a_header() {
    let policy = policy(
        r#"[{"prefix": "/hooks/gh", "kind": "callback",
             "key_from": [{"header": "X-GitHub-Delivery"}],
             "signature": {"scheme": "github", "secret": "whsec_0123456789"}}]"#,
    )
    .unwrap();
    let body = r#"{"action":"opened"}"#;
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(body.as_bytes());
    let sig = format!("sha256={}", to_hex(&mac.finalize().into_bytes()));
    let headers = [
        ("x-hub-signature-256", sig.as_str()),
        ("x-github-delivery", "d-1"),
    ];
    assert_eq!(run(&policy, &headers, body), Ok(Some("d-1".into())));
    assert_eq!(
        run(&policy, &headers, r#"{"action":"closed"}"#),
        Err("signature_mismatch".into())
    );
    assert_eq!(
        run(&policy, &[("x-hub-signature-256", sig.as_str())], body),
        Err("key_missing".into())
    );
}

#[test]
fn api_route_with_body_key_sources() {
    let policy = policy(
        r#"[{"prefix": "/orders", "key": "required",
             "key_from": [{"header": "idempotency-key"}, {"json": "/ClientToken"}, {"form": "client_token"}]}]"#,
    )
    .unwrap();
    assert_eq!(policy.routes[0].own_scope(), None);
    assert_eq!(
        run(&policy, &[("idempotency-key", "h1")], "{}"),
        Ok(Some("h1".into()))
    );
    assert_eq!(
        run(&policy, &[], r#"{"ClientToken":"c1"}"#),
        Ok(Some("c1".into()))
    );
    let form = [("content-type", "application/x-www-form-urlencoded")];
    assert_eq!(
        run(&policy, &form, "client_token=f1"),
        Ok(Some("f1".into()))
    );
    assert_eq!(
        run(&policy, &[], r#"{"ClientToken":"a b"}"#),
        Err("key_invalid_character".into())
    );
    let route = &policy.routes[0];
    let Err(Refusal::MissingKey { sources }) = run_admission(route, "{}") else {
        panic!("a required key missing from every source is refused")
    };
    assert_eq!(
        sources,
        "the idempotency-key header, the JSON body field /ClientToken or the form field client_token"
    );
    // A required header-only key is refused before the body.
    let policy = self::policy(r#"[{"prefix": "/orders", "key": "required"}]"#).unwrap();
    assert_eq!(
        admit(&policy.routes[0], &|_| vec![], NOW)
            .map(|_| ())
            .map_err(|e| e.code()),
        Err("key_missing")
    );
}

/// Each preset fills what the sender needs; what the route sets wins.
#[test]
fn presets_fill_and_yield() {
    let route = |json: &str| policy(&format!("[{json}]")).map(|p| p.routes[0].clone());
    let github = route(
        r#"{"prefix": "/gh", "preset": "github", "signature": {"secret_env": "HOOK_SECRET"}}"#,
    )
    .unwrap();
    assert_eq!(github.kind, RouteKind::Callback);
    assert_eq!(github.key, KeyRequirement::Required);
    assert_eq!(github.methods, vec![String::from("POST")]);
    assert_eq!(
        github.signature.as_ref().map(|s| s.scheme),
        Some(crate::client::signature::SignatureScheme::GitHub)
    );
    assert_eq!(
        describe_sources(&github.key_from),
        "the x-github-delivery header"
    );
    // Signed presets need the secret; an API kind contradicts a preset.
    for (json, field) in [
        (
            r#"{"prefix": "/gh", "preset": "github"}"#,
            "routes[0].signature",
        ),
        (
            r#"{"prefix": "/s", "preset": "svix", "kind": "api", "signature": {"secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}"#,
            "routes[0].kind",
        ),
        (
            r#"{"prefix": "/c", "preset": "cloudevents", "signature": {"secret": "0123456789"}}"#,
            "routes[0].signature.scheme",
        ),
        (
            r#"{"prefix": "/c", "kind": "callback", "key_from": [{"header": "x"}], "signature": {"scheme": "github"}}"#,
            "routes[0].signature.secret",
        ),
        (
            r#"{"prefix": "/c", "preset": "shopify", "signature": {"secret": "0123456789", "tolerance": "1m"}}"#,
            "routes[0].signature.tolerance",
        ),
        (
            r#"{"prefix": "/c", "pass_through": {"header": "x", "values": ["a"]}}"#,
            "routes[0].pass_through",
        ),
        (
            r#"{"prefix": "/c", "preset": "sns", "pass_through": {"header": "x", "values": []}}"#,
            "routes[0].pass_through.values",
        ),
    ] {
        let e = route(json).unwrap_err();
        assert!(
            alloc::format!("{e}").contains(&alloc::format!("`{field}`")),
            "{json}: {e}"
        );
    }
    // Overrides: the route's own key source, key requirement and methods win.
    let custom = route(
        r#"{"prefix": "/st", "preset": "stripe", "key_from": [{"json": "/data/object/id"}],
            "key": "optional", "methods": ["PUT"], "signature": {"secret": "whsec_0123456789"}}"#,
    )
    .unwrap();
    assert_eq!(
        describe_sources(&custom.key_from),
        "the JSON body field /data/object/id"
    );
    assert_eq!(custom.key, KeyRequirement::Optional);
    assert_eq!(custom.methods, vec![String::from("PUT")]);
    // Rotation: several secrets, from the environment.
    let rotated = policy(
        r#"[{"prefix": "/gh", "preset": "github", "signature": {"secrets_env": ["HOOK_SECRET", "OTHER"]}}]"#,
    )
    .unwrap_err();
    assert!(
        alloc::format!("{rotated}").contains("`OTHER` is not set"),
        "{rotated}"
    );
}

#[test]
fn sns_confirmations_pass_and_notifications_are_keyed() {
    let policy = policy(r#"[{"prefix": "/sns", "preset": "sns"}]"#).unwrap();
    let id = "165545c9-2a5c-472c-8df2-7ff2be2b3b1b";
    let body = |kind: &str| format!(r#"{{"Type":"{kind}","MessageId":"{id}","Message":"m"}}"#);
    for kind in ["SubscriptionConfirmation", "UnsubscribeConfirmation"] {
        assert_eq!(
            run(&policy, &[], &body(kind)),
            Ok(None),
            "{kind} passes unguarded"
        );
    }
    assert_eq!(
        run(&policy, &[], &body("Notification")),
        Ok(Some(id.into()))
    );
    // The unsigned headers decide nothing: a notification re-sent with a confirmation type or
    // another message id in them is the same delivery.
    assert_eq!(
        run(
            &policy,
            &[
                ("x-amz-sns-message-type", "SubscriptionConfirmation"),
                ("x-amz-sns-message-id", "forged")
            ],
            &body("Notification")
        ),
        Ok(Some(id.into()))
    );
    assert_eq!(
        run(&policy, &[], r#"{"Type":"Notification"}"#),
        Err("key_missing".into())
    );
    assert_eq!(
        run(&policy, &[], "not json"),
        Err("key_body_unreadable".into())
    );
}

#[test]
fn a_pass_through_from_the_body_keeps_its_own_copy_behind_a_header_key() {
    let policy = policy(
        r#"[{"prefix": "/h", "kind": "callback", "key_from": [{"header": "x-id"}],
             "pass_through": {"json": "/kind", "values": ["ping"]}}]"#,
    )
    .unwrap();
    assert_eq!(run(&policy, &[], r#"{"kind":"ping"}"#), Ok(None));
    assert_eq!(
        run(&policy, &[("x-id", "d-1")], r#"{"kind":"event"}"#),
        Ok(Some("d-1".into()))
    );
    assert_eq!(
        run(&policy, &[], r#"{"kind":"event"}"#),
        Err("key_missing".into())
    );
    let route = &policy.routes[0];
    let admission = admit(route, &|_| vec![], NOW).unwrap();
    assert!(admission.needs_body() && admission.keeps_body());
    assert_eq!(route.body_copies(), 2);
}

#[test]
fn cloudevents_and_pubsub_presets() {
    let policy = policy(
        r#"[{"prefix": "/events", "preset": "cloudevents"}, {"prefix": "/push", "preset": "pubsub-push"}]"#,
    )
    .unwrap();
    let batch = admit(
        &policy.routes[0],
        &|n| match n {
            "content-type" => vec![b"application/cloudevents-batch+json".as_slice()],
            _ => vec![],
        },
        NOW,
    )
    .unwrap_err();
    assert_eq!(batch.code(), "cloudevents_batch_unsupported");
    assert_eq!(
        crate::answer::refusal(&batch, &crate::policy::ProblemStyle::DEFAULT).status,
        415
    );
    let push = Policy {
        routes: vec![policy.routes[1].clone()],
        ..policy.clone()
    };
    assert_eq!(
        run(
            &push,
            &[("x-goog-pubsub-message-id", "136969346945")],
            "raw payload"
        ),
        Ok(Some("136969346945".into()))
    );
    assert_eq!(
        run(
            &push,
            &[],
            r#"{"message":{"data":"e30=","messageId":"2070443601311540","message_id":"2070443601311540"},"subscription":"projects/p/subscriptions/s"}"#
        ),
        Ok(Some("2070443601311540".into()))
    );
    let unreadable = run_admission(&push.routes[0], "raw payload").unwrap_err();
    assert_eq!(unreadable.code(), "key_body_unreadable");
    assert_eq!(
        crate::answer::refusal(&unreadable, &crate::policy::ProblemStyle::DEFAULT).status,
        400
    );
}

fn run_admission(route: &Route, body: &str) -> Result<Option<IdempotencyKey>, Refusal> {
    let mut admission = admit(route, &|_| vec![], NOW)?;
    admission.update(body.as_bytes());
    admission.finish().map(|k| k.map(|k| k.key))
}

#[test]
fn only_2xx_is_a_deliverys_outcome() {
    let answer = |status| ResponseFacts::Upstream {
        status,
        headers: vec![],
        body: None,
    };
    for status in [400, 401, 404, 409, 422, 500, 503] {
        assert_eq!(
            RouteKind::Callback.screen(answer(status)),
            ResponseFacts::NeverReached
        );
        assert_eq!(RouteKind::Api.screen(answer(status)), answer(status));
    }
    assert_eq!(RouteKind::Callback.screen(answer(200)), answer(200));
    assert_eq!(RouteKind::Callback.screen(answer(204)), answer(204));
    assert_eq!(
        RouteKind::Callback.screen(ResponseFacts::InDoubt),
        ResponseFacts::InDoubt
    );
}

/// The guide's worked example of `order` and `precondition` is a valid configuration that
/// says what the text says: the demo's order table on its webhook route, If-Match on PATCH.
#[test]
fn readme_order_example_compiles() {
    let readme = include_str!("../../../../../docs/guide/ordering.md");
    let section = &readme[readme.find("## Worked example: the demo's orders").unwrap()..];
    let fence = "```json config\n";
    let block = &section[section.find(fence).unwrap() + fence.len()..];
    let json = &block[..block.find("```").unwrap()];
    let env = |_: &str| Some(String::from("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"));
    let policy = Policy::from_json(json, &env).unwrap_or_else(|e| panic!("{json}: {e}"));
    assert_eq!(policy.routes.len(), 2);
    let order = policy.routes[0]
        .order
        .as_ref()
        .expect("the webhook route is ordered");
    assert_eq!(order.table.initial(), "unpaid");
    assert_eq!(
        order.table.table().arrival("unpaid", "order.shipped"),
        crate::order::transition::Arrival::Early
    );
    assert!(policy.routes[1].order.is_none());
    assert!(policy.routes[1].precondition.is_some());
}

/// The guide's copyable examples are valid configurations, and mean what they say: one
/// per preset, then the routes written out.
#[test]
fn readme_examples_compile() {
    let section = include_str!("../../../../../docs/guide/callbacks-and-presets.md");
    let env = |name: &str| {
        name.contains("SECRET")
            .then(|| String::from("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
    };
    let mut policies = Vec::new();
    for block in section.split("```json config\n").skip(1) {
        let json = &block[..block.find("```").unwrap()];
        policies.push(Policy::from_json(json, &env).unwrap_or_else(|e| panic!("{json}: {e}")));
    }
    assert_eq!(
        policies.len(),
        10,
        "one example per preset, then the written-out routes"
    );
    for policy in &policies[..9] {
        assert_eq!(policy.routes.len(), 1);
        assert_eq!(policy.routes[0].kind, RouteKind::Callback);
    }
    let signed = policies[..9]
        .iter()
        .filter(|p| p.routes[0].signature.is_some())
        .count();
    assert_eq!(signed, 6, "the six senders that sign with a shared secret");
    let policy = &policies[9];
    let kinds: Vec<RouteKind> = policy.routes.iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        [RouteKind::Callback, RouteKind::Callback, RouteKind::Api]
    );
    assert!(policy.routes[..2].iter().all(|r| r.signature.is_some()));
    assert_eq!(policy.routes[2].key_from.len(), 2);
}

#[test]
fn configuration_errors() {
    let field = |routes: &str| policy(routes).unwrap_err().field().map(String::from);
    assert_eq!(
        field(r#"[{"prefix": "/h", "kind": "callback"}]"#),
        Some("routes[0].key_from".into())
    );
    assert_eq!(
        field(
            r#"[{"prefix": "/h", "signature": {"scheme": "github", "secret": "whsec_0123456789"}}]"#
        ),
        Some("routes[0].signature".into())
    );
    assert_eq!(
        field(
            r#"[{"prefix": "/h", "kind": "callback", "key_from": [{"json": "/id"}], "signature": {"scheme": "github", "secret": "whsec_0123456789", "tolerance": "5m"}}]"#
        ),
        Some("routes[0].signature.tolerance".into())
    );
    assert_eq!(
        field(
            r#"[{"prefix": "/h", "kind": "callback", "key_from": [{"json": "/id"}], "signature": {"scheme": "stripe", "secret_env": "UNSET"}}]"#
        ),
        Some("routes[0].signature.secret_env".into())
    );
    assert_eq!(
        field(
            r#"[{"prefix": "/h", "kind": "callback", "key_from": [{"json": "/id"}], "signature": {"scheme": "stripe", "secret": "short"}}]"#
        ),
        Some("routes[0].signature.secret".into())
    );
    assert_eq!(
        field(r#"[{"prefix": "/h", "key_from": [{"json": "id"}]}]"#),
        Some("routes[0].key_from[0]".into())
    );
    assert_eq!(
        field(r#"[{"prefix": "/h", "key_from": []}]"#),
        Some("routes[0].key_from".into())
    );
    let syntax = policy(r#"[{"prefix": "/h", "key_from": [{"query": "id"}]}]"#).unwrap_err();
    assert_eq!(syntax.code(), "config_syntax");
    let syntax = policy(r#"[{"prefix": "/h", "kind": "webhook"}]"#).unwrap_err();
    assert_eq!(syntax.code(), "config_syntax");
}
