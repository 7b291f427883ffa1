//! The structured input (via `arbitrary`): policy knobs, a record, response facts, `now`, and the
//! operations on the protocol, with the bounds that keep one run short.

use super::records::vectors;
use arbitrary::Arbitrary;
use idemgate_core::decision::ResponseFacts;
use idemgate_core::policy::{Capacity, Policy, StoreRule};
use idemgate_core::time::{Span, UnixMillis};

pub(crate) const BASE_NOW: u64 = 1_700_000_000_000;
const NAME_POOL: &[&str] = &[
    "content-type",
    "Location",
    "etag",
    "x-order-id",
    "set-cookie",
    "x-envoy-upstream-service-time",
    "Date",
    "content-length",
    "link",
    "x-a:b",
    "x a",
    "",
    "X-Order-Id",
    "idempotent-replayed",
];
pub(crate) const KEYS: usize = 6;
pub(crate) const MAX_OPS: usize = 64;
pub(crate) const MAX_PENDING: usize = 4;

#[derive(Arbitrary, Debug, Clone)]
pub(crate) enum HeaderName {
    Pool(u8),
    Raw(String),
}

impl HeaderName {
    pub(crate) fn text(&self) -> String {
        match self {
            HeaderName::Pool(i) => NAME_POOL[usize::from(*i) % NAME_POOL.len()].to_string(),
            HeaderName::Raw(s) => s.clone(),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Rule {
    Default,
    Release(Vec<u16>),
    All,
    Success,
}

#[derive(Arbitrary, Debug)]
pub(crate) struct Knobs {
    ttl: u32,
    lease: u32,
    rule: Rule,
    max_response_body: u16,
    replay: Vec<HeaderName>,
    cells: u8,
    per_cell: u8,
}

impl Knobs {
    pub(crate) fn policy(&self) -> Policy {
        let mut p = Policy::defaults();
        p.ttl = Span(u64::from(self.ttl % 120_000) + 1);
        // May exceed the ttl (configuration refuses that, code-built policies may not): the claim
        // must clamp its lease to the record's life.
        p.lease = Span(u64::from(self.lease % 120_000) + 1);
        p.store_rule = match &self.rule {
            Rule::Default => p.store_rule.clone(),
            Rule::Release(list) => StoreRule::ReleaseStatuses(list.clone()),
            Rule::All => StoreRule::StoreAll,
            Rule::Success => StoreRule::SuccessOnly,
        };
        p.max_response_body = u64::from(self.max_response_body);
        if !self.replay.is_empty() {
            p.replay_headers = self.replay.iter().map(HeaderName::text).collect();
        }
        p.capacity = Capacity {
            cells: u32::from(self.cells % 4) + 1,
            per_cell: u16::from(self.per_cell % 4) + 1,
        };
        p
    }
}

/// A time relative to `now` (most interesting) or anywhere.
#[derive(Arbitrary, Debug)]
pub(crate) enum Time {
    Rel(i32),
    Abs(u64),
}

impl Time {
    pub(crate) fn at(&self, now: UnixMillis) -> UnixMillis {
        match self {
            Time::Rel(d) => UnixMillis(
                (i128::from(now.0) + i128::from(*d)).clamp(0, i128::from(u64::MAX)) as u64,
            ),
            Time::Abs(t) => UnixMillis(*t),
        }
    }
}

#[derive(Arbitrary, Debug)]
pub(crate) enum ArbRecord {
    Absent,
    /// A record of `vectors/decision.json`, its times shifted so they relate to `now` as to the
    /// case's `now`.
    Vector(u8),
    InFlight {
        fp: u8,
        owner: u8,
        lease_until: Time,
        expires_at: Time,
    },
    Completed {
        fp: u8,
        status: u16,
        headers: Vec<(HeaderName, String)>,
        body: Option<Vec<u8>>,
        expires_at: Time,
    },
    TokenUsed {
        expires_at: Time,
    },
}

#[derive(Arbitrary, Debug, Clone)]
pub(crate) enum Facts {
    Upstream {
        status: u16,
        headers: Vec<(HeaderName, String)>,
        body: Option<Vec<u8>>,
    },
    NeverReached,
    InDoubt,
    /// The facts of a case of `vectors/completion.json`.
    Vector(u8),
}

impl Facts {
    pub(crate) fn resolve(&self) -> ResponseFacts {
        match self {
            Facts::Upstream {
                status: raw,
                headers,
                body,
            } => ResponseFacts::Upstream {
                status: *raw,
                headers: headers.iter().map(|(n, v)| (n.text(), v.clone())).collect(),
                body: body.clone(),
            },
            Facts::NeverReached => ResponseFacts::NeverReached,
            Facts::InDoubt => ResponseFacts::InDoubt,
            Facts::Vector(i) => {
                let all = &vectors().facts;
                all[usize::from(*i) % all.len()].clone()
            }
        }
    }
}

#[derive(Arbitrary, Debug)]
pub(crate) enum Now {
    Near(u32),
    Any(u64),
}

#[derive(Arbitrary, Debug)]
pub(crate) struct Pure {
    pub(crate) now: Now,
    pub(crate) record: ArbRecord,
    pub(crate) fp: u8,
    pub(crate) owner: u8,
    pub(crate) facts: Facts,
    /// When the response ends, after `now`.
    pub(crate) complete_after: u32,
}

#[derive(Arbitrary, Debug)]
pub(crate) enum Op {
    /// A claim through `Protocol` (the store answers at once).
    Claim {
        key: u8,
        fp: u8,
    },
    /// A claim as a sans-IO transaction, stepped by `Step` between other operations.
    StartClaim {
        key: u8,
        fp: u8,
    },
    Step {
        tx: u8,
    },
    Finish {
        key: u8,
        owner: u8,
        facts: Option<Facts>,
    },
    Consume {
        key: u8,
        ttl: u16,
    },
    Advance(u16),
    AdvancePastLease,
}

#[derive(Arbitrary, Debug)]
pub(crate) struct FuzzInput {
    pub(crate) knobs: Knobs,
    pub(crate) pure: Pure,
    pub(crate) ops: Vec<Op>,
}
