//! One-time tokens: required on every path, also when the store is full, and valid only on their
//! route and method.

use crate::client::Request;
use crate::harness::{Envoy, Setup};
use crate::upstream::Upstream;

const TOKEN_SECRET_ENV: &str = "IDEMGATE_HARDENING_SECRET";

fn token_setup(config: &str, upstream: &Upstream) -> Setup {
    let mut setup = Setup::new(config, upstream.port);
    setup.vm_env = vec![(
        TOKEN_SECRET_ENV.into(),
        "a-hardening-secret-long-enough".into(),
    )];
    setup
}

/// A token from the issuing endpoint for `method path`, as `who`.
fn token(port: u16, who: &str, method: &str, path: &str) -> String {
    let issued = Request::new(
        "POST",
        &format!("/.idemgate/token?method={method}&path={path}"),
    )
    .header("authorization", who)
    .send(port);
    assert_eq!(issued.status, 200, "{}", issued.text());
    issued.json()["token"]
        .as_str()
        .expect("a token")
        .to_string()
}

/// Finding 3: with `pass_through`, a full store used to forward a token-guarded request without
/// looking at its token, and a valid token whose use could not be recorded was forwarded unused
/// (so it could be used again). The token is now checked first, and a use that cannot be recorded
/// is refused.
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_token_is_required_on_every_path_even_when_the_store_is_full() {
    let upstream = Upstream::start();
    let config = format!(
        r#"{{ "routes": [{{ "prefix": "/pay", "key": "optional", "token": "required" }},
                        {{ "prefix": "/" }}],
             "capacity": 1, "records_per_cell": 1, "on_store_full": "pass_through",
             "on_store_error": "pass_through",
             "token": {{ "secret_env": "{TOKEN_SECRET_ENV}" }} }}"#
    );
    let envoy = Envoy::start(&token_setup(&config, &upstream));
    let port = envoy.port;
    let who = "Bearer alice";
    let valid = token(port, who, "POST", "/pay");
    // One record fills the store (one cell of one record).
    let fill = Request::post("/o", "fill")
        .header("authorization", who)
        .send(port);
    assert_eq!(fill.status, 201, "{}", fill.text());
    let pay = |key: Option<&str>, token: Option<&str>| {
        let mut request = Request::new("POST", "/pay")
            .header("authorization", who)
            .json("{\"amount\":5}")
            .header("x-script", "status=201");
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        if let Some(token) = token {
            request = request.header("idemgate-token", token);
        }
        request.send(port)
    };
    for (what, key, token, status, code) in [
        ("keyed, no token", Some("p1"), None, 403, "token_missing"),
        (
            "keyed, forged token",
            Some("p2"),
            Some("v1.forged"),
            403,
            "token_malformed",
        ),
        ("no key, no token", None, None, 403, "token_missing"),
        // Valid, but its use cannot be recorded: refused, never forwarded unused.
        (
            "keyed, valid token, full store",
            Some("p3"),
            Some(valid.as_str()),
            503,
            "store_full",
        ),
        (
            "no key, valid token, full store",
            None,
            Some(valid.as_str()),
            503,
            "store_full",
        ),
    ] {
        let response = pay(key, token);
        assert_eq!(
            (response.status, response.problem_code().as_str()),
            (status, code),
            "{what}: {}",
            response.text()
        );
    }
    assert_eq!(upstream.path_hits("/pay"), 0, "nothing reached /pay");
}

/// Finding 7: a token is bound to the route and method it was issued for.
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn a_token_works_only_on_its_route_and_method() {
    let upstream = Upstream::start();
    let config = format!(
        r#"{{ "routes": [{{ "prefix": "/pay", "methods": ["POST", "PATCH"], "token": "required" }},
                        {{ "prefix": "/transfer", "token": "required" }}],
             "token": {{ "secret_env": "{TOKEN_SECRET_ENV}" }} }}"#
    );
    let envoy = Envoy::start(&token_setup(&config, &upstream));
    let port = envoy.port;
    let who = "Bearer alice";
    let use_on = |method: &str, path: &str, key: &str, token: &str| {
        let mut request = Request::post(path, key)
            .header("authorization", who)
            .header("idemgate-token", token);
        request.method = method.into();
        request.send(port)
    };
    let for_transfer = token(port, who, "POST", "/transfer");
    let wrong_route = use_on("POST", "/pay", "r1", &for_transfer);
    assert_eq!(wrong_route.status, 403, "{}", wrong_route.text());
    let for_patch = token(port, who, "PATCH", "/pay/7");
    let wrong_method = use_on("POST", "/pay/7", "r2", &for_patch);
    assert_eq!(wrong_method.status, 403, "{}", wrong_method.text());
    assert_eq!(upstream.total(), 0, "never forwarded");
    // On their own route and method they work, once.
    assert_eq!(use_on("POST", "/transfer", "r3", &for_transfer).status, 201);
    assert_eq!(use_on("PATCH", "/pay/7", "r4", &for_patch).status, 201);
    // A token for a path no token route guards is not issued.
    let nowhere = Request::new("POST", "/.idemgate/token?method=POST&path=/elsewhere")
        .header("authorization", who)
        .send(port);
    assert_eq!(nowhere.status, 400, "{}", nowhere.text());
}
