//! The VM's byte budgets and one peer group's part of each: the hashing budget
//! (`hashing_budget`, `hashing_budget_per_peer`: request bodies being fingerprinted) and the
//! relay budget (`relay_budget`, `relay_budget_per_peer`: what a VM's detached exchanges may have
//! Envoy buffer at once, each counted at `upstream.max_body`). Both follow one rule
//! ([`crate::request::budget`]), compiled here once.

use super::{defaults, invalid, size, Config, Refusal};
use crate::config::Size;

/// One budget as configured: its two fields, their values, and what one unit of work (a stream,
/// an exchange) holds alone.
pub(super) struct BudgetFields<'a> {
    pub(crate) total: (&'static str, Option<&'a Size>),
    pub(crate) per_peer: (&'static str, Option<&'a Size>),
    /// The total when none is configured.
    pub(crate) default_total: u64,
    /// What one unit holds: the total and a peer's part must each hold it.
    pub(crate) one: u64,
    /// Why a budget under `one` is refused.
    pub(crate) at_least: &'a [&'a str],
}

impl BudgetFields<'_> {
    /// The budget's total and one peer group's part (by default the total divided among
    /// `PEER_SHARES` groups, and at least `one`); each must hold one unit, and a part is no
    /// more than the whole.
    pub(super) fn compile(&self) -> Result<(u64, u64), Refusal> {
        let (total_field, total_value) = self.total;
        let (part_field, part_value) = self.per_peer;
        let total = size(total_field, total_value, self.default_total.max(self.one))?;
        if total < self.one {
            return Err(invalid(total_field, self.at_least));
        }
        let per_peer = size(
            part_field,
            part_value,
            (total / defaults::PEER_SHARES).max(self.one),
        )?;
        if per_peer > total {
            return Err(invalid(
                part_field,
                &["must not be more than `", total_field, "`"],
            ));
        }
        if per_peer < self.one {
            return Err(invalid(part_field, self.at_least));
        }
        Ok((total, per_peer))
    }
}

impl Config {
    /// The VM's relay budget and one peer group's part of it, for exchanges whose answers are
    /// bounded by `max_relay_body`. Each must hold one exchange (else no detached request could
    /// ever be sent).
    pub(super) fn compile_relay_budget(&self, max_relay_body: u64) -> Result<(u64, u64), Refusal> {
        BudgetFields {
            total: ("relay_budget", self.relay_budget.as_ref()),
            per_peer: ("relay_budget_per_peer", self.relay_budget_per_peer.as_ref()),
            default_total: max_relay_body.saturating_mul(defaults::RELAY_EXCHANGES),
            one: max_relay_body,
            at_least: &[
                "must be at least `upstream.max_body` (one exchange alone could never be sent)",
            ],
        }
        .compile()
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::Policy;
    use alloc::string::{String, ToString};

    fn refusal(json: &str) -> String {
        match Policy::from_json(json, &|_| None) {
            Ok(_) => panic!("{json}: accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn each_refusal_names_the_field_and_its_bound() {
        for (json, field, reason) in [
            (
                r#"{"relay_budget": "4MiB"}"#,
                "relay_budget",
                "at least `upstream.max_body`",
            ),
            (
                r#"{"upstream": {"max_body": "1MiB"}, "relay_budget": "2MiB", "relay_budget_per_peer": "3MiB"}"#,
                "relay_budget_per_peer",
                "not be more than `relay_budget`",
            ),
            (
                r#"{"relay_budget_per_peer": "1MiB"}"#,
                "relay_budget_per_peer",
                "at least `upstream.max_body`",
            ),
        ] {
            let message = refusal(json);
            assert!(
                message.contains(field) && message.contains(reason),
                "{json}: {message}"
            );
        }
    }

    #[test]
    fn the_defaults_follow_upstream_max_body() {
        let policy = Policy::from_json(r#"{"upstream": {"max_body": "1MiB"}}"#, &|_| None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(policy.relay_budget, 64 << 20);
        assert_eq!(policy.relay_budget_per_peer, 8 << 20);
        // A budget of one exchange: its part is that one exchange, not an eighth of it.
        let one = r#"{"upstream": {"max_body": "1MiB"}, "relay_budget": "1MiB"}"#;
        let policy = Policy::from_json(one, &|_| None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(policy.relay_budget_per_peer, 1 << 20);
    }
}
