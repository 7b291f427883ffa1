//! Host failure injection: rules the simulated Envoy consults before answering a shared-data call,
//! a property read, a body read or an HTTP callout. A test adds rules; each fires on the calls it matches, a given number of
//! times, and the harness counts how often each fired so a test can prove it was exercised.

use super::callouts::CalloutFault;
use crate::abi::Status;

/// Which host call a rule intercepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SharedOp {
    Get,
    Set,
}

/// What happens instead of the normal answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Answer this status and do nothing (a failing host call).
    Fail(Status),
    /// Just before the guest's `set`, another writer rewrites the key with its current value (or
    /// creates it empty), so the guest's CAS is stale: a real `CasMismatch` under Envoy's rules (for
    /// a `get`, the rewrite happens right after the guest read, so its CAS is stale by the time it
    /// writes).
    ConcurrentRewrite,
}

#[derive(Debug, Clone)]
struct Rule {
    op: SharedOp,
    key_prefix: String,
    effect: Effect,
    remaining: usize,
    fired: usize,
}

/// What happens to a `proxy_get_buffer_bytes` read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferFault {
    /// The host hands back at most this many bytes.
    Truncate(usize),
    /// The host answers `NotFound`, as if the buffer did not exist.
    Absent,
}

/// The fault plan of one simulated Envoy.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    rules: Vec<Rule>,
    hidden_properties: Vec<String>,
    /// Buffer type → fault and remaining firings.
    buffers: Vec<(i32, BufferFault, usize)>,
    /// Cluster → callout fault, remaining firings, firings so far.
    callouts: Vec<(String, CalloutFault, usize, usize)>,
    /// How many more clock reads fail (`proxy_get_current_time_nanoseconds` answers an error).
    clock_failures: usize,
    /// Header map type → remaining failing `proxy_get_header_map_pairs` calls.
    header_maps: Vec<(i32, usize)>,
    /// How many header map reads failed so far.
    header_maps_failed: usize,
    /// Property path (dotted) → remaining failing `proxy_get_property` calls.
    properties: Vec<(String, usize)>,
    /// How many property reads failed so far.
    properties_failed: usize,
}

impl Faults {
    /// Adds a rule for the next `times` calls of `op` on keys starting with `key_prefix`.
    pub fn add(&mut self, op: SharedOp, key_prefix: &str, effect: Effect, times: usize) {
        self.rules.push(Rule {
            op,
            key_prefix: key_prefix.to_string(),
            effect,
            remaining: times,
            fired: 0,
        });
    }

    /// The effect to apply to this call, if a rule matches (and uses up one of its firings).
    pub fn take(&mut self, op: SharedOp, key: &str) -> Option<Effect> {
        let rule = self
            .rules
            .iter_mut()
            .find(|r| r.op == op && r.remaining > 0 && key.starts_with(r.key_prefix.as_str()))?;
        rule.remaining -= 1;
        rule.fired += 1;
        Some(rule.effect.clone())
    }

    /// How many times rules fired in total.
    pub fn fired(&self) -> usize {
        self.rules.iter().map(|r| r.fired).sum()
    }

    /// Makes a property path (segments joined with `.`) answer `NotFound`.
    pub fn hide_property(&mut self, path: &str) {
        self.hidden_properties.push(path.to_string());
    }

    /// Makes the next `times` reads of buffer type `kind` (0 request body, 1 response body) fail so.
    pub fn buffer(&mut self, kind: i32, fault: BufferFault, times: usize) {
        self.buffers.push((kind, fault, times));
    }

    pub fn take_buffer(&mut self, kind: i32) -> Option<BufferFault> {
        let slot = self
            .buffers
            .iter_mut()
            .find(|(k, _, left)| *k == kind && *left > 0)?;
        slot.2 -= 1;
        Some(slot.1)
    }

    /// Makes the next `times` callouts to `cluster` fail so (in dispatch order, across workers).
    pub fn callout(&mut self, cluster: &str, fault: CalloutFault, times: usize) {
        self.callouts.push((cluster.to_string(), fault, times, 0));
    }

    /// The fault for a callout to `cluster` being dispatched now, if a rule matches.
    pub fn take_callout(&mut self, cluster: &str) -> Option<CalloutFault> {
        let slot = self
            .callouts
            .iter_mut()
            .find(|(c, _, left, _)| c == cluster && *left > 0)?;
        slot.2 -= 1;
        slot.3 += 1;
        Some(slot.1)
    }

    /// How many callout faults fired.
    pub fn callouts_fired(&self) -> usize {
        self.callouts.iter().map(|c| c.3).sum()
    }

    /// The next `times` clock reads fail.
    pub fn fail_clock(&mut self, times: usize) {
        self.clock_failures = times;
    }

    /// Whether this clock read fails (and counts it).
    pub fn take_clock(&mut self) -> bool {
        let fails = self.clock_failures > 0;
        self.clock_failures = self.clock_failures.saturating_sub(1);
        fails
    }

    /// Makes the next `times` reads of the whole header map `kind` (0 request headers, 2
    /// response headers, 6 a callout's answer) fail with `InternalFailure`.
    pub fn fail_header_map(&mut self, kind: i32, times: usize) {
        self.header_maps.push((kind, times));
    }

    /// Whether this read of header map `kind` fails (and counts it).
    pub fn take_header_map(&mut self, kind: i32) -> bool {
        let fails = take_one(&mut self.header_maps, |k| *k == kind);
        self.header_maps_failed += usize::from(fails);
        fails
    }

    /// How many header map reads failed.
    pub fn header_maps_failed(&self) -> usize {
        self.header_maps_failed
    }

    /// Makes the next `times` reads of property `path` (dotted) fail with `InternalFailure` — a
    /// failing call, unlike [`Faults::hide_property`]'s absent property.
    pub fn fail_property(&mut self, path: &str, times: usize) {
        self.properties.push((path.to_string(), times));
    }

    /// Whether this read of property `path` fails (and counts it).
    pub fn take_property(&mut self, path: &str) -> bool {
        let fails = take_one(&mut self.properties, |p| p == path);
        self.properties_failed += usize::from(fails);
        fails
    }

    /// How many property reads failed.
    pub fn properties_failed(&self) -> usize {
        self.properties_failed
    }

    pub fn is_hidden(&self, path: &str) -> bool {
        self.hidden_properties.iter().any(|p| p == path)
    }
}

/// Uses up one firing of the first rule `matches` picks that has firings left; whether one did.
fn take_one<K>(rules: &mut [(K, usize)], matches: impl Fn(&K) -> bool) -> bool {
    match rules
        .iter_mut()
        .find(|(rule, left)| matches(rule) && *left > 0)
    {
        Some((_, left)) => {
            *left -= 1;
            true
        }
        None => false,
    }
}
