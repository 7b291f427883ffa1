//! The threat's floods: one identity, made-up identities from one address, two anonymous
//! addresses; none fills the store for the others.

use super::example::{example_filter, keyed, MALLORY, MALLORY_TOO, UNKNOWN};
use super::traffic::flood_then_others;

/// The first flood: `Authorization: Bearer mallory` on 14,000 fresh keys to a path the app
/// answers 404. It used to store 9,621, then answer 503 `store_full` — to mallory and to every other
/// client, with a Retry-After of about a day.
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn one_identity_cannot_fill_the_store() {
    flood_then_others("flood 1 (Bearer mallory)", &example_filter(), None, |n| {
        let key = format!("mallory-{n}");
        (
            "mallory",
            keyed(UNKNOWN, &key, MALLORY, Some("Bearer mallory")),
        )
    });
}

/// The second: a made-up `Authorization` on every request, from one address. Each request is
/// another identity, so only the address can carry the charge.
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn made_up_identities_from_one_address_cannot_fill_the_store() {
    flood_then_others(
        "flood 2 (made-up Authorization)",
        &example_filter(),
        None,
        |n| {
            let key = format!("forged-{n}");
            let who = format!("Bearer forged-{n}");
            (
                "127.0.0.2 (forged identities)",
                keyed(UNKNOWN, &key, MALLORY, Some(&who)),
            )
        },
    );
}

/// The third: no `Authorization`, from two addresses (7,000 each, interleaved). Their two peer
/// shares of every cell used to make the whole cell, so a third client was refused.
#[test]
#[ignore = "needs Envoy and the built filter: make test-envoy"]
fn two_anonymous_addresses_cannot_fill_the_store() {
    flood_then_others(
        "flood 3 (two addresses, no Authorization)",
        &example_filter(),
        None,
        |n| {
            let key = format!("anon-{n}");
            if n % 2 == 0 {
                ("127.0.0.2", keyed(UNKNOWN, &key, MALLORY, None))
            } else {
                ("127.0.0.3", keyed(UNKNOWN, &key, MALLORY_TOO, None))
            }
        },
    );
}
