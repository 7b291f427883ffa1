//! The scopes the Istio and Envoy Gateway examples ship, in a real Envoy: `jwt_authn` configured as
//! each platform generates it from the example's JWT manifest, and idemgate configured as
//! `examples/envoy/envoy.yaml` (which `make test-examples` proves the platforms' filter configuration
//! equals but for `scope`) with the scope read from the platform's manifest. So a manifest whose
//! claim path is not where the platform puts the payload fails here:
//!
//! - Istio (`examples/istio/requestauthentication.yaml`, `wasmplugin.yaml`): pilot gives every rule
//!   `payload_in_metadata: payload`, requires the provider or no token at all (`allow_missing`), and
//!   removes the `Authorization` header once verified;
//! - Envoy Gateway (`examples/envoy-gateway/securitypolicy.yaml`, `envoyextensionpolicy.yaml`): its
//!   translator gives a provider `payload_in_metadata: <its issuer>` and `forward: true`, and the
//!   route requires it by name (`requirement_map` and the route's `PerRouteConfig`).
//!
//! In both, a retry sent with a refreshed token is a replay, and another client behind the same
//! address with the same key is a client of its own (were the claim not found, `peer` would make it
//! the first one's replay). On Istio an anonymous request is scoped by its address.

use crate::client::{Request, Response};
use crate::floods::example_filter;
use crate::harness::{Envoy, Setup};
use crate::jwt_authn::{base64url, token_from, KEY, NAT};
use crate::upstream::Upstream;
use serde_json::{json, Value};
use std::net::Ipv4Addr;
use std::path::Path;

/// Another address: an anonymous client of its own.
const ELSEWHERE: Ipv4Addr = Ipv4Addr::new(127, 0, 9, 2);
/// When a token and its refresh were issued.
const ISSUED: u64 = 1_767_225_600;
const REFRESHED: u64 = 1_767_229_200;

fn manifest(path: &str) -> String {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("examples/{path}: {e}"))
}

/// The one `issuer:` of a JWT manifest.
fn issuer(yaml: &str) -> String {
    let found: Vec<&str> = yaml
        .lines()
        .map(|l| l.trim().trim_start_matches("- "))
        .filter_map(|l| l.strip_prefix("issuer:"))
        .map(|v| v.trim().trim_matches('"'))
        .collect();
    assert_eq!(found.len(), 1, "one issuer in the manifest: {found:?}");
    found[0].to_string()
}

/// The filter's `scope` in a platform manifest, as the core's JSON: its list items written
/// `- { property: [a, b, "c"] }` or `- peer` (anything else fails, rather than being misread).
fn scope(yaml: &str) -> Value {
    let lines: Vec<&str> = yaml.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.trim() == "scope:")
        .expect("a scope in the manifest");
    let sources: Vec<Value> = lines[start + 1..]
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.starts_with('#'))
        .map_while(|l| l.strip_prefix("- "))
        .map(|entry| {
            if entry == "peer" {
                return json!("peer");
            }
            let path = entry
                .strip_prefix("{ property: [")
                .and_then(|e| e.strip_suffix("] }"))
                .unwrap_or_else(|| panic!("a scope source written {{ property: [...] }}: {entry}"));
            let path: Vec<&str> = path
                .split(',')
                .map(|s| s.trim().trim_matches('"'))
                .collect();
            json!({ "property": path })
        })
        .collect();
    assert!(!sources.is_empty(), "the scope's sources");
    Value::Array(sources)
}

/// The JWKS of [`KEY`], inline: what istiod hands the gateway after fetching `jwksUri` (and what
/// stands in for Envoy Gateway's `remoteJWKS` here).
fn jwks() -> String {
    let jwks = json!({ "keys": [{ "kty": "oct", "alg": "HS256", "kid": "example",
        "k": base64url(KEY.as_bytes()) }] });
    format!("'{jwks}'")
}

/// The `jwt_authn` Istio generates from a RequestAuthentication with one rule of `issuer`.
fn istio_jwt_authn(issuer: &str) -> String {
    format!(
        r#"- name: envoy.filters.http.jwt_authn
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication
    providers:
      origins-0:
        issuer: "{issuer}"
        local_jwks: {{ inline_string: {jwks} }}
        payload_in_metadata: payload
        normalize_payload_in_metadata: {{ space_delimited_claims: [scope, permission] }}
    rules:
    - match: {{ prefix: "/" }}
      requires:
        requires_any:
          requirements:
          - provider_name: origins-0
          - allow_missing: {{}}
    bypass_cors_preflight: true
"#,
        jwks = jwks()
    )
}

/// The route requirement's name Envoy Gateway gives the HTTPRoute's rule.
const EG_ROUTE: &str = "httproute/shop/orders/rule/0/match/0/*";

/// The `jwt_authn` Envoy Gateway generates from a SecurityPolicy with one provider of `issuer`.
fn envoy_gateway_jwt_authn(issuer: &str) -> String {
    format!(
        r#"- name: envoy.filters.http.jwt_authn
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication
    providers:
      "{EG_ROUTE}/example":
        issuer: "{issuer}"
        local_jwks: {{ inline_string: {jwks} }}
        payload_in_metadata: "{issuer}"
        forward: true
    requirement_map:
      "{EG_ROUTE}": {{ provider_name: "{EG_ROUTE}/example" }}
"#,
        jwks = jwks()
    )
}

/// The guarded route, requiring the provider by name as Envoy Gateway's routes do.
fn envoy_gateway_routes() -> String {
    format!(
        r#"- match: {{ prefix: "/" }}
  route: {{ cluster: app, timeout: 15s }}
  typed_per_filter_config:
    envoy.filters.http.jwt_authn:
      "@type": type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.PerRouteConfig
      requirement_name: "{EG_ROUTE}"
"#
    )
}

/// An Envoy with the example's filter configuration scoped by `scope`, behind `jwt_authn`.
fn start(scope: Value, jwt_authn: String, routes: Option<String>) -> (Envoy, Upstream) {
    let mut filter: Value = serde_json::from_str(&example_filter()).expect("the example's JSON");
    filter["scope"] = scope;
    let upstream = Upstream::start();
    let mut setup = Setup::new(&filter.to_string(), upstream.port);
    setup.vm_env = vec![(
        "IDEMGATE_TOKEN_SECRET".into(),
        "a-jwt-platform-test-secret-long-enough".into(),
    )];
    setup.before_filters = jwt_authn;
    setup.routes = routes;
    (Envoy::start(&setup), upstream)
}

fn order(port: u16, key: &str, from: Ipv4Addr, token: Option<&str>) -> Response {
    let request = Request::post("/orders", key).from(from);
    match token {
        Some(token) => request.header("authorization", &format!("Bearer {token}")),
        None => request,
    }
    .send(port)
}

/// Carol's retry with a refreshed token is a replay; Dave, behind the same address with the same
/// key, is another client; a forged token is refused before idemgate.
fn a_refreshed_token_is_the_same_client(envoy: &Envoy, upstream: &Upstream, issuer: &str) {
    let carol = token_from(issuer, "carol", ISSUED);
    let refreshed = token_from(issuer, "carol", REFRESHED);
    assert_ne!(carol, refreshed);
    let first = order(envoy.port, "order-1", NAT, Some(&carol));
    assert_eq!(first.status, 201, "{}", first.text());
    let retry = order(envoy.port, "order-1", NAT, Some(&refreshed));
    assert!(retry.replayed(), "{} {}", retry.status, retry.text());
    assert_eq!(upstream.path_hits("/orders"), 1);

    let dave = order(
        envoy.port,
        "order-1",
        NAT,
        Some(&token_from(issuer, "dave", ISSUED)),
    );
    assert_eq!(
        (dave.status, dave.replayed()),
        (201, false),
        "Dave is not Carol: the scope must be the claim, not the address: {}",
        dave.text()
    );
    assert_eq!(upstream.path_hits("/orders"), 2);

    let (signed, _) = carol.rsplit_once('.').expect("a JWT");
    let forged = format!("{signed}.{}", base64url(&[0; 32]));
    assert_eq!(order(envoy.port, "order-2", NAT, Some(&forged)).status, 401);
    assert_eq!(upstream.path_hits("/orders"), 2);
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn the_istio_scope_is_the_verified_claim_or_the_address() {
    let issuer = issuer(&manifest("istio/requestauthentication.yaml"));
    let scope = scope(&manifest("istio/wasmplugin.yaml"));
    let (envoy, upstream) = start(scope, istio_jwt_authn(&issuer), None);
    a_refreshed_token_is_the_same_client(&envoy, &upstream, &issuer);

    // Without a token Istio lets the request pass, anonymous: scoped by its address. Its retry
    // from that address is a replay; the same key from another address is another client's.
    let anonymous = order(envoy.port, "order-9", NAT, None);
    assert_eq!(anonymous.status, 201, "{}", anonymous.text());
    assert!(order(envoy.port, "order-9", NAT, None).replayed());
    let elsewhere = order(envoy.port, "order-9", ELSEWHERE, None);
    assert_eq!((elsewhere.status, elsewhere.replayed()), (201, false));
    assert_eq!(upstream.path_hits("/orders"), 4);
}

#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn the_envoy_gateway_scope_is_the_claim_under_the_issuer() {
    let issuer = issuer(&manifest("envoy-gateway/securitypolicy.yaml"));
    let scope = scope(&manifest("envoy-gateway/envoyextensionpolicy.yaml"));
    let (envoy, upstream) = start(
        scope,
        envoy_gateway_jwt_authn(&issuer),
        Some(envoy_gateway_routes()),
    );
    a_refreshed_token_is_the_same_client(&envoy, &upstream, &issuer);

    // The SecurityPolicy requires a token: none is 401 before idemgate.
    assert_eq!(order(envoy.port, "order-9", NAT, None).status, 401);
    assert_eq!(upstream.path_hits("/orders"), 2);
}
