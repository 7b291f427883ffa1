//! Routes an earlier route hides. The first matching route wins ([`crate::policy::Policy::match_request`]),
//! so a route placed after one that matches all its requests never runs: its signature, token,
//! sequencer or precondition would silently never be checked (a provider's signed route after
//! a catch-all `/` forwards unsigned deliveries). Such a configuration is refused, naming both
//! routes, whatever the hidden route carries: it never does what it says.

use super::{item, refuse, Refusal};
use crate::policy::Route;

/// Refuses the first route one of whose methods an earlier route always takes.
pub(super) fn refuse_shadowed(routes: &[Route]) -> Result<(), Refusal> {
    for (i, later) in routes.iter().enumerate() {
        let earlier = routes.get(..i).unwrap_or_default();
        for method in &later.methods {
            if let Some((j, first)) = earlier
                .iter()
                .enumerate()
                .find(|(_, route)| route.covers(later, method))
            {
                return Err(refuse(
                    item("routes", i, ""),
                    &[
                        "route `",
                        &later.prefix,
                        "` can never match ",
                        method,
                        ": routes[",
                        &super::decimal(j as u64),
                        "] (`",
                        &first.prefix,
                        "`) comes first and matches every such request; put the more specific route first",
                    ],
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::ConfigError;
    use crate::policy::Policy;

    #[test]
    fn the_refusal_names_the_hidden_route_and_the_one_that_hides_it() {
        let config = r#"{"routes": [
            {"prefix": "/orders"},
            {"prefix": "/"},
            {"prefix": "/hooks/stripe", "preset": "stripe", "signature": {"secret": "whsec_a-stripe-secret-for-tests"}}
        ]}"#;
        let error = Policy::from_json(config, &|_| None).expect_err("a hidden route is refused");
        let ConfigError::Invalid { field, reason } = &error else {
            panic!("not a refusal of a field: {error:?}");
        };
        assert_eq!(field, "routes[2]");
        assert!(
            reason.contains("`/hooks/stripe`") && reason.contains("routes[1] (`/`)"),
            "{reason}"
        );
        assert!(reason.contains("POST"), "{reason}");
    }
}
