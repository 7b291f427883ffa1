//! `Policy::defaults()` is built directly; the compiled empty configuration must be the same
//! policy, field by field (so neither can drift from the other).
#![allow(clippy::unwrap_used)]

use idemgate_core::policy::Policy;

fn shown(policy: &Policy) -> String {
    format!("{policy:#?}")
}

#[test]
fn the_defaults_are_the_compiled_empty_configuration() {
    let direct = shown(&Policy::defaults());
    for text in ["{}", "", "  \n"] {
        let compiled = Policy::from_json(text, &|_| None).unwrap();
        assert_eq!(direct, shown(&compiled), "configuration {text:?}");
    }
}

#[test]
fn the_defaults_guard_posts_and_patches_everywhere() {
    let policy = Policy::defaults();
    assert_eq!(policy.routes.len(), 1);
    assert!(policy.route_for("POST", "/orders").is_some());
    assert!(policy.route_for("PATCH", "/anything/else").is_some());
    assert!(policy.route_for("GET", "/orders").is_none());
    assert_eq!(policy.capacity.cells, 1250);
    assert_eq!(policy.capacity.per_cell, 8);
}
