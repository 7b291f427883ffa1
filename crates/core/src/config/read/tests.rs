use super::*;
use alloc::format;

fn message(text: &str) -> String {
    match Config::from_json(text) {
        Err(ConfigError::Syntax { message }) => message,
        other => panic!("{text}: {other:?}"),
    }
}

#[test]
fn errors_name_the_field_and_the_reason() {
    let cases = [
        ("[]", "the document: expected an object, found an array"),
        ("{\"ttll\": \"1h\"}", "`ttll`: unknown field, expected one of `header`"),
        (
            "{\"routes\": [{\"prefix\": \"/\", \"method\": []}]}",
            "`routes[0].method`: unknown field, expected one of `prefix`, `methods`, `key`, `token`",
        ),
        ("{\"routes\": [{}]}", "`routes[0].prefix`: missing field"),
        (
            "{\"capacity\": \"many\"}",
            "`capacity`: expected an integer from 0 to 4294967295, found a string",
        ),
        (
            "{\"records_per_cell\": 70000}",
            "`records_per_cell`: expected an integer from 0 to 65535, found 70000",
        ),
        (
            "{\"release_statuses\": [200, -1]}",
            "`release_statuses[1]`: expected an integer from 0 to 65535, found -1",
        ),
        (
            "{\"on_store_full\": \"explode\"}",
            "`on_store_full`: unknown value \"explode\", expected one of \"reject\", \"pass_through\"",
        ),
        ("{\"scope\": [\"peer\", {\"cookie\": \"x\"}]}", "`scope[1].cookie`: unknown scope source"),
        ("{\"scope\": [{\"header\": 1}]}", "`scope[0].header`: expected a string, found a number"),
        ("{\"token\": {\"secret\": 12345678901234567890}}", "`token.secret`: expected a string, found a number"),
        ("{\"max_request_body\": 1.5}", "`max_request_body`: expected a byte count"),
        ("{\"ttl\": \"1h\", \"ttl\": \"2h\"}", "duplicate key `ttl` at byte 14"),
        ("{ttl: 24h}", "JSON syntax error at byte 1"),
    ];
    for (text, want) in cases {
        let got = message(text);
        assert!(
            got.starts_with(want) || got == want,
            "{text}\n  got  {got}\n  want {want}"
        );
    }
}

/// Fields of the same kind get distinct values, so a reader arm out of step with its section's
/// list of names would put one where another belongs.
#[test]
fn each_member_lands_in_its_field() {
    let c = Config::from_json(
        r#"{"header":"h","ttl":"t","lease":"l","replay_headers":["r"],
            "max_request_body":1,"hashing_budget":2,"max_response_body":3,"capacity":4,
            "hashing_budget_per_peer":10,"relay_budget":13,"relay_budget_per_peer":14,
            "records_per_cell":5,"shares":{"identity":6,"peer":"7%","ipv4_prefix":24,"ipv6_prefix":48,"pressure":"30%",
              "identity_bytes":11,"peer_bytes":"12MiB"},
            "max_memory":"1GiB",
            "on_store_full":"pass_through","on_store_error":"reject",
            "routes":[{"prefix":"/p","methods":["M"],"key":"required","token":"required",
              "forward":"detached","cluster":"c","upstream_timeout":"u","case_sensitive":true,
              "kind":"callback","key_from":[{"header":"k"}],
              "signature":{"scheme":"stripe","secret":"s","secret_env":"e","tolerance":"o",
                "secrets":["s1"],"secrets_env":["e1"]},
              "preset":"sns","pass_through":{"header":"ph","values":["pv"]}}],
            "fingerprint":{"mode":"raw","headers":["fh"],"fields":["/ff"],"max_depth":8},
            "token":{"secret":"ts","secret_env":"te","ttl":"tt","issue_path":"/ti","header":"th"},
            "upstream":{"reentry":"ur","cluster_skipping_routes_and_filters":"us","timeout":"ut","max_body":9,"cluster":"uc"},
            "store":{"kind":"sk","cluster":"sc","timeout":"st","record_secret_env":"rs",
              "record_secrets_env":["r1"]}}"#,
    )
    .unwrap();
    let shown = format!("{c:?}");
    let want = [
        "header: Some(\"h\")",
        "ttl: Some(\"t\")",
        "lease: Some(\"l\")",
        "replay_headers: Some([\"r\"])",
        "max_request_body: Some(Bytes(1))",
        "hashing_budget: Some(Bytes(2))",
        "hashing_budget_per_peer: Some(Bytes(10))",
        "relay_budget: Some(Bytes(13))",
        "relay_budget_per_peer: Some(Bytes(14))",
        "max_response_body: Some(Bytes(3))",
        "capacity: Some(4)",
        "records_per_cell: Some(5)",
        "shares: Some(SharesConfig { identity: Some(Records(6)), peer: Some(Text(\"7%\")), identity_bytes: Some(Bytes(11)), peer_bytes: Some(Text(\"12MiB\")), ipv4_prefix: Some(24), ipv6_prefix: Some(48), pressure: Some(\"30%\") })",
        "max_memory: Some(Text(\"1GiB\"))",
        "on_store_full: Some(PassThrough)",
        "on_store_error: Some(Reject)",
        "prefix: \"/p\"",
        "methods: Some([\"M\"])",
        "key: Some(Required)",
        "token: Some(Required)",
        "case_sensitive: Some(true)",
        "forward: Some(Detached)",
        "cluster: Some(\"c\")",
        "upstream_timeout: Some(\"u\")",
        "kind: Some(Callback)",
        "key_from: Some([Header(\"k\")])",
        "scheme: Some(Stripe), secret: Some(\"s\"), secret_env: Some(\"e\"), secrets: Some([\"s1\"]), secrets_env: Some([\"e1\"]), tolerance: Some(\"o\")",
        "preset: Some(Sns)",
        "pass_through: Some(PassThroughConfig { header: Some(\"ph\"), json: None, values: [\"pv\"] })",
        "mode: Some(Raw), headers: Some([\"fh\"]), fields: Some([\"/ff\"]), max_depth: Some(8)",
        "secret: Some(\"ts\"), secret_env: Some(\"te\"), ttl: Some(\"tt\"), issue_path: Some(\"/ti\"), header: Some(\"th\")",
        "reentry: Some(\"ur\"), cluster_skipping_routes_and_filters: Some(\"us\"), cluster: Some(\"uc\"), timeout: Some(\"ut\"), max_body: Some(Bytes(9))",
        "kind: Some(\"sk\"), cluster: Some(\"sc\"), timeout: Some(\"st\"), record_secret_env: Some(\"rs\"), record_secrets_env: Some([\"r1\"])",
    ];
    for part in want {
        assert!(shown.contains(part), "{part} missing from {shown}");
    }
}

#[test]
fn null_means_not_given() {
    let c = Config::from_json(
        r#"{"header": null, "routes": [{"prefix": "/a", "methods": null}], "token": {"ttl": null}}"#,
    )
    .unwrap();
    assert!(c.header.is_none());
    let routes = c.routes.unwrap();
    assert_eq!(routes[0].prefix, "/a");
    assert!(routes[0].methods.is_none());
    assert!(c.token.unwrap().ttl.is_none());
}

#[test]
fn every_field_reads() {
    let c = Config::from_json(
        r#"{"header":"h","routes":[{"prefix":"/","methods":["POST"],"key":"required","token":"none"}],
            "scope":["peer",{"header":"x"},{"property":["a","b"]}],
            "fingerprint":{"mode":"fields","headers":["h"],"fields":["/a"],"max_depth":3},
            "ttl":"1h","lease":"1s","replay_headers":["a"],"store_responses":"2xx",
            "release_statuses":[500],"max_request_body":"1KiB","max_response_body":10,
            "capacity":5,"records_per_cell":2,"on_store_full":"pass_through",
            "on_store_error":"reject","token":{"secret":"s","secret_env":"E","ttl":"1m",
            "issue_path":"/t","header":"t"}}"#,
    )
    .unwrap();
    let shown = format!("{c:?}");
    for part in [
        "Required",
        "Property([\"a\", \"b\"])",
        "Fields",
        "max_depth: Some(3)",
        "Success",
        "Text(\"1KiB\")",
        "Bytes(10)",
        "PassThrough",
        "issue_path: Some(\"/t\")",
    ] {
        assert!(shown.contains(part), "{part} missing from {shown}");
    }
}

/// The configuration's description (`config/describe`, which the reference page and the JSON
/// Schema are rendered from) names each section's members exactly as the reader does, and each
/// choice's spellings: neither can gain or lose a field or a value without the other.
#[test]
fn the_description_names_what_the_reader_reads() {
    use crate::config::describe::{section, Type};
    let sections: [(&str, &[&str]); 16] = [
        ("", CONFIG_FIELDS),
        ("routes[]", ROUTE_FIELDS),
        ("routes[].signature", SIGNATURE_FIELDS),
        ("routes[].pass_through", PASS_THROUGH_FIELDS),
        ("routes[].order", ORDER_FIELDS),
        (
            "routes[].order.table",
            crate::order::transition::TABLE_FIELDS,
        ),
        ("routes[].order.early", EARLY_FIELDS),
        ("routes[].in_flight", in_flight::IN_FLIGHT_FIELDS),
        ("in_flight", in_flight::IN_FLIGHT_FIELDS),
        ("scope[]", &["header", "verified"]),
        ("upstream", UPSTREAM_FIELDS),
        ("fingerprint", FINGERPRINT_FIELDS),
        ("problems", problems::PROBLEMS_FIELDS),
        ("shares", SHARES_FIELDS),
        ("store", STORE_FIELDS),
        ("token", TOKEN_FIELDS),
    ];
    for (path, read) in sections {
        let described = section(path).unwrap_or_else(|| panic!("`{path}` is not described"));
        let mut named: Vec<&str> = described.fields.iter().map(|f| f.name).collect();
        let mut read = read.to_vec();
        named.sort_unstable();
        read.sort_unstable();
        assert_eq!(
            named, read,
            "the description of `{path}` and the reader's list differ"
        );
    }
    assert_eq!(
        sections.len(),
        crate::config::describe::SECTIONS.len(),
        "a described section the reader does not read"
    );
    let choices: [(&str, &str, &[&str]); 15] = [
        ("", "store_responses", &STORE_RESPONSES.0),
        ("", "on_store_full", &FAILURES.0),
        ("", "on_store_error", &FAILURES.0),
        ("", "key_mismatch", &keys::MISMATCHES.0),
        ("", "key_scope", &keys::SCOPES.0),
        ("routes[]", "key", &KEYS.0),
        ("routes[]", "token", &TOKENS.0),
        ("routes[]", "forward", &FORWARDS.0),
        ("routes[]", "kind", &ROUTE_KINDS.0),
        ("routes[]", "preset", &PRESETS.0),
        ("routes[]", "precondition", &PRECONDITIONS.0),
        ("routes[].signature", "scheme", &SCHEMES.0),
        ("routes[].order", "unsigned", &UNSIGNED.0),
        ("fingerprint", "mode", &MODES.0),
        ("problems", "compat", &problems::COMPAT.0),
    ];
    for (path, name, read) in choices {
        let field = section(path)
            .and_then(|s| s.fields.iter().find(|f| f.name == name))
            .unwrap_or_else(|| panic!("`{path}.{name}` is not described"));
        let Type::Choice(described) = field.ty else {
            panic!("`{path}.{name}` is not described as a choice");
        };
        assert_eq!(described, read, "the choices of `{path}.{name}` differ");
    }
}
