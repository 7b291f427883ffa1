//! Declarative state tables and optimistic versions (`docs/semantics.md` §8).
//!
//! A business object moves one way through a table of `(from, event, to)` transitions. For an event
//! at the object's current state, [`StateTable::on`] answers:
//!
//! 1. **Apply** — `(current, event)` is in the table: move to its `to`.
//! 2. **Already applied** — acknowledge with success and change nothing — when both hold:
//!    - (a) `current` is reachable from a target of `event` by a path on which no state after the
//!      first is a source of `event` (returning to a source would make the event pending again, so
//!      such a path proves nothing); a target equal to `current` is the empty path;
//!    - (b) `current` is **not** reachable from any source of `event` by transitions other than
//!      `event` — otherwise the object may have got here without the event ever happening, and
//!      acknowledging it would silently drop it.
//!
//!    So a repeated payment callback after PAID, or after SHIPPED, is acknowledged; but PAY after
//!    CANCELLED is rejected, because an order can be cancelled while still unpaid: that payment was
//!    never applied and needs a human (a refund), not a silent success.
//! 3. **Reject** otherwise: an unknown state or event, or `Illegal` (stale or out of order). An
//!    event that only self-loops (`take_over`) is never "already applied" elsewhere, since (b)
//!    always finds the path that skipped it.
//!
//! Versions: an update names the version (or entity-tag) it read; a mismatch is a conflict, never a
//! silent overwrite — see `check_if_match` and `check_version`. A relative update (`x = x + n`)
//! is never idempotent — each retry moves the value again — so it needs an idempotency key or a
//! version check in front of it; an absolute one (`x = 5`) is safe to repeat.

use crate::text::{self, Text};
use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

mod declared;

pub use declared::DeclaredTable;
/// The table's members, which the configuration's description names too.
#[cfg(test)]
pub(crate) use declared::FIELDS as TABLE_FIELDS;

type Edge<S> = (S, S, S);

/// A state machine given as data: states, terminal states (no way out), and `(from, event, to)`
/// transitions. `S` is `&'static str` for tables compiled in and `String` for tables built from
/// user data; both answer alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateTable<S: 'static + Clone = &'static str> {
    states: Cow<'static, [S]>,
    terminal: Cow<'static, [S]>,
    edges: Cow<'static, [Edge<S>]>,
}

/// What an event does at a state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition<'t> {
    Apply { to: &'t str },
    AlreadyApplied,
    Reject(TransitionError),
}

/// What an event arriving at an order-guarded edge does ([`StateTable::arrival`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Arrival<'t> {
    /// Legal now: forward it; the state moves to `to` once the receiver has acted (a 2xx).
    Apply { to: &'t str },
    /// Applied before, or stale (the object is already at or past the event's target).
    AlreadyApplied,
    /// Applies to a state the object has not reached yet: deliver it again later.
    Early,
    /// Legal neither now nor from any later state.
    Illegal { terminal: bool },
    /// An unknown state or event.
    Reject(TransitionError),
}

impl Arrival<'_> {
    /// The name hosts show (a header value, a log field, a vector answer).
    pub fn name(&self) -> &'static str {
        match self {
            Arrival::Apply { .. } => "apply",
            Arrival::AlreadyApplied => "already_applied",
            Arrival::Early => "early",
            Arrival::Illegal { .. } => "illegal",
            Arrival::Reject(e) => e.code(),
        }
    }
}

impl StateTable {
    /// A table compiled into the program. Not validated here (a `const fn` cannot report); the
    /// built-in tables are checked by [`StateTable::validate`] in tests, and yours should be too.
    pub(crate) const fn from_static(
        states: &'static [&'static str],
        terminal: &'static [&'static str],
        transitions: &'static [Edge<&'static str>],
    ) -> StateTable {
        StateTable {
            states: Cow::Borrowed(states),
            terminal: Cow::Borrowed(terminal),
            edges: Cow::Borrowed(transitions),
        }
    }
}

impl StateTable<String> {
    /// A table built from user data, validated.
    pub fn new(
        states: Vec<String>,
        terminal: Vec<String>,
        transitions: Vec<Edge<String>>,
    ) -> Result<StateTable<String>, TableError> {
        let table = StateTable {
            states: Cow::Owned(states),
            terminal: Cow::Owned(terminal),
            edges: Cow::Owned(transitions),
        };
        table.validate()?;
        Ok(table)
    }
}

impl<S: AsRef<str> + Clone + 'static> StateTable<S> {
    fn edges(&self) -> impl Iterator<Item = (&str, &str, &str)> + '_ {
        self.edges
            .iter()
            .map(|(f, e, t)| (f.as_ref(), e.as_ref(), t.as_ref()))
    }

    fn index(&self, state: &str) -> Option<usize> {
        self.states.iter().position(|s| s.as_ref() == state)
    }

    /// Every state named once; transitions and terminal states name known states; at most one
    /// transition per `(from, event)` (the table is deterministic); terminal states have no
    /// outgoing transition.
    pub(crate) fn validate(&self) -> Result<(), TableError> {
        for (i, state) in self.states.iter().enumerate() {
            if self.index(state.as_ref()) != Some(i) {
                return Err(TableError::DuplicateState(state.as_ref().into()));
            }
        }
        if let Some(t) = self.terminal.iter().find(|t| !self.is_state(t.as_ref())) {
            return Err(TableError::UnknownState(t.as_ref().into()));
        }
        for (i, (from, event, to)) in self.edges().enumerate() {
            if let Some(unknown) = [from, to].into_iter().find(|s| !self.is_state(s)) {
                return Err(TableError::UnknownState(unknown.into()));
            }
            if self
                .edges()
                .take(i)
                .any(|(f, e, _)| f == from && e == event)
            {
                let (from, event) = (from.into(), event.into());
                return Err(TableError::DuplicateTransition { from, event });
            }
            if self.is_terminal(from) {
                return Err(TableError::TerminalHasTransition(from.into()));
            }
        }
        Ok(())
    }

    /// The states, in the order the table lists them.
    pub fn states(&self) -> impl Iterator<Item = &str> + '_ {
        self.states.iter().map(AsRef::as_ref)
    }

    /// The terminal states, in the order the table lists them.
    pub(crate) fn terminal_states(&self) -> impl Iterator<Item = &str> + '_ {
        self.terminal.iter().map(AsRef::as_ref)
    }

    /// The transitions `(from, event, to)`, in the order the table lists them.
    pub(crate) fn transitions(&self) -> impl Iterator<Item = (&str, &str, &str)> + '_ {
        self.edges()
    }

    pub(crate) fn is_state(&self, state: &str) -> bool {
        self.index(state).is_some()
    }

    pub fn is_terminal(&self, state: &str) -> bool {
        self.terminal.iter().any(|t| t.as_ref() == state)
    }

    /// The same table holding its own strings. A host that also reads tables from data (the
    /// browser module) answers a built-in table through this copy, so the rules are compiled
    /// once, for `StateTable<String>`, instead of once per string type (code size).
    pub fn to_owned_strings(&self) -> StateTable<String> {
        let owned = |names: &[S]| names.iter().map(|s| String::from(s.as_ref())).collect();
        let edges = self.edges().map(|(f, e, t)| (f.into(), e.into(), t.into()));
        StateTable {
            states: Cow::Owned(owned(&self.states)),
            terminal: Cow::Owned(owned(&self.terminal)),
            edges: Cow::Owned(edges.collect()),
        }
    }

    /// Whether `(from, event)` is a transition of the table (what [`StateTable::on`] applies).
    pub(crate) fn has(&self, from: &str, event: &str) -> bool {
        self.edges().any(|(f, e, _)| f == from && e == event)
    }

    /// Whether any transition of the table is taken on `event`.
    pub(crate) fn has_event(&self, event: &str) -> bool {
        self.edges().any(|(_, e, _)| e == event)
    }

    /// The answer for `event` at `current`; the rule is in the module documentation.
    pub fn on(&self, current: &str, event: &str) -> Transition<'_> {
        if !self.is_state(current) {
            return Transition::Reject(TransitionError::UnknownState);
        }
        if !self.edges().any(|(_, e, _)| e == event) {
            return Transition::Reject(TransitionError::UnknownEvent);
        }
        if let Some((_, _, to)) = self.edges().find(|(f, e, _)| *f == current && *e == event) {
            return Transition::Apply { to };
        }
        let is_source = |state: &str| self.edges().any(|(f, e, _)| f == state && e == event);
        let with_event = || self.edges().filter(|(_, e, _)| *e == event);
        let mut targets = with_event().map(|(_, _, to)| to);
        let applied = self.reaches(&mut targets, current, &|_, to| !is_source(to));
        let mut sources = with_event().map(|(from, _, _)| from);
        let bypassed = self.reaches(&mut sources, current, &|e, _| e != event);
        if applied && !bypassed {
            Transition::AlreadyApplied
        } else {
            let terminal = self.is_terminal(current);
            Transition::Reject(TransitionError::Illegal { terminal })
        }
    }

    /// What an event arriving at `current` does at an edge that guards the order of events (a
    /// callback route's `order`): [`StateTable::on`], with its rejections told apart, because a
    /// sender must retry one kind and must not retry the other:
    ///
    /// - [`Arrival::Early`] — not applicable yet, but a source of `event` is reachable from
    ///   `current`: the event arrived before the one that leads there (Stripe documents that events
    ///   arrive in any order), so the sender should deliver it again later;
    /// - [`Arrival::Illegal`] — applicable neither now nor in any later state: delivering it again
    ///   cannot help, so the edge acknowledges it (and counts and logs it) instead of forwarding.
    pub fn arrival(&self, current: &str, event: &str) -> Arrival<'_> {
        match self.on(current, event) {
            Transition::Apply { to } => Arrival::Apply { to },
            Transition::AlreadyApplied => Arrival::AlreadyApplied,
            Transition::Reject(TransitionError::Illegal { terminal }) => {
                let mut sources = self
                    .edges()
                    .filter(|(_, e, _)| *e == event)
                    .map(|(from, _, _)| from);
                let later = || {
                    self.edges()
                        .filter(|(f, _, _)| *f == current)
                        .map(|(_, _, to)| to)
                };
                let reachable =
                    sources.any(|source| self.reaches(&mut later(), source, &|_, _| true));
                if reachable {
                    Arrival::Early
                } else {
                    Arrival::Illegal { terminal }
                }
            }
            Transition::Reject(e) => Arrival::Reject(e),
        }
    }

    /// Whether `goal` is reachable from any of `starts` (a start equal to `goal` counts) through
    /// the transitions `follow(event, to)` admits. Trait objects rather than generics: one
    /// compiled copy for its three callers (the browser module's size), not one per closure.
    fn reaches<'a>(
        &'a self,
        starts: &mut dyn Iterator<Item = &'a str>,
        goal: &str,
        follow: &dyn Fn(&str, &str) -> bool,
    ) -> bool {
        let mut seen = vec![false; self.states.len()];
        let mut stack: Vec<usize> = starts.filter_map(|s| self.index(s)).collect();
        while let Some(at) = stack.pop() {
            match seen.get_mut(at) {
                Some(done) if !*done => *done = true,
                _ => continue,
            }
            let here = self.states.get(at).map_or("", AsRef::as_ref);
            if here == goal {
                return true;
            }
            let next = self
                .edges()
                .filter(|(f, e, to)| *f == here && follow(e, to));
            stack.extend(next.filter_map(|(_, _, to)| self.index(to)));
        }
        false
    }
}

/// A submit button (`docs/semantics.md` §9). A `submit` while `in_flight` is already applied: that
/// is how a double click becomes one request. A retryable failure submits again; a final outcome
/// needs a `reset` (a new intent) first.
pub static SUBMIT_LIFECYCLE: StateTable = StateTable::from_static(
    &[
        "idle",
        "in_flight",
        "succeeded",
        "failed_retryable",
        "failed_final",
    ],
    &[],
    &[
        ("idle", "submit", "in_flight"),
        ("failed_retryable", "submit", "in_flight"),
        ("in_flight", "succeed", "succeeded"),
        ("in_flight", "fail_retryable", "failed_retryable"),
        ("in_flight", "fail_final", "failed_final"),
        ("succeeded", "reset", "idle"),
        ("failed_final", "reset", "idle"),
    ],
);

/// An update names the version it read; any other current version is a conflict, never a silent
/// overwrite of someone else's change.
pub fn check_version(expected: u64, current: u64) -> Result<(), PreconditionError> {
    if expected == current {
        Ok(())
    } else {
        Err(PreconditionError::VersionConflict { expected, current })
    }
}

/// Evaluates `If-Match` (RFC 9110 §13.1.1) against the resource's current `ETag` value (an
/// entity-tag as sent, e.g. `"v3"`). Absent → no precondition. `*` → true (the caller checks that
/// the resource exists). Otherwise a comma-separated list of entity-tags, compared *strongly*: a weak
/// tag (`W/"v3"`) on either side never matches. No match → `precondition_failed` (412). A value
/// that is not `*` or a list of entity-tags — including one naming no tag at all, since the client
/// meant to name a version and did not — is `precondition_malformed` (400).
pub(crate) fn check_if_match(
    if_match: Option<&[u8]>,
    current_etag: &str,
) -> Result<(), PreconditionError> {
    let Some(raw) = if_match else {
        return Ok(());
    };
    let mut rest = trim_ows(raw);
    if rest == b"*" {
        return Ok(());
    }
    let current = match entity_tag(trim_ows(current_etag.as_bytes())) {
        Some((false, opaque, [])) => Some(opaque),
        _ => None,
    };
    let (mut any, mut matched) = (false, false);
    loop {
        while let [b' ' | b'\t' | b',', tail @ ..] = rest {
            rest = tail;
        }
        if rest.is_empty() {
            break;
        }
        let (weak, opaque, tail) = entity_tag(rest).ok_or(PreconditionError::Malformed)?;
        any = true;
        matched |= !weak && current == Some(opaque);
        rest = trim_ows(tail);
        if !rest.is_empty() && rest[0] != b',' {
            return Err(PreconditionError::Malformed);
        }
    }
    match (any, matched) {
        (false, _) => Err(PreconditionError::Malformed),
        (true, true) => Ok(()),
        (true, false) => Err(PreconditionError::Failed),
    }
}

/// `[W/] DQUOTE *etagc DQUOTE` at the start of `bytes` → (weak, opaque, rest). etagc is `!`,
/// `#`..`~` and obs-text: anything but controls, space, `"` and DEL (a comma is allowed).
fn entity_tag(bytes: &[u8]) -> Option<(bool, &[u8], &[u8])> {
    let (weak, bytes) = match bytes.strip_prefix(b"W/") {
        Some(rest) => (true, rest),
        None => (false, bytes),
    };
    let body = bytes.strip_prefix(b"\"")?;
    let end = body.iter().position(|&b| b == b'"')?;
    let opaque = &body[..end];
    let etagc = |b: &u8| *b == 0x21 || (0x23..=0x7e).contains(b) || *b >= 0x80;
    opaque
        .iter()
        .all(etagc)
        .then_some((weak, opaque, &body[end + 1..]))
}

fn trim_ows(mut raw: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = raw {
        raw = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = raw {
        raw = rest;
    }
    raw
}

/// A version or `If-Match` precondition that did not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PreconditionError {
    /// No entity-tag in `If-Match` strongly matches the current one.
    Failed,
    /// `If-Match` is not `*` or a list of entity-tags.
    Malformed,
    /// The version the update read is not the current one.
    VersionConflict { expected: u64, current: u64 },
}

impl PreconditionError {
    pub fn code(&self) -> &'static str {
        match self {
            PreconditionError::Failed => "precondition_failed",
            PreconditionError::Malformed => "precondition_malformed",
            PreconditionError::VersionConflict { .. } => "version_conflict",
        }
    }
}

impl fmt::Display for PreconditionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PreconditionError::Failed => f.write_str("If-Match names no current entity-tag"),
            PreconditionError::Malformed => f.write_str("If-Match is not \"*\" or entity-tags"),
            PreconditionError::VersionConflict { expected, current } => {
                write!(f, "read version {expected}, current is {current}")
            }
        }
    }
}

/// Why an event was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransitionError {
    UnknownState,
    UnknownEvent,
    /// Stale or out of order; `terminal` when the object's life is over.
    Illegal {
        terminal: bool,
    },
}

impl TransitionError {
    pub fn code(&self) -> &'static str {
        match self {
            TransitionError::UnknownState => "transition_unknown_state",
            TransitionError::UnknownEvent => "transition_unknown_event",
            TransitionError::Illegal { .. } => "transition_illegal",
        }
    }

    /// The same text as `Display`, without `core::fmt`: `to_string()` alone would bring
    /// `fmt::write` into the browser module (see `crate::text`).
    pub fn message(&self) -> &'static str {
        match self {
            TransitionError::UnknownState => "unknown state",
            TransitionError::UnknownEvent => "unknown event",
            TransitionError::Illegal { terminal: true } => "event not allowed: final state",
            TransitionError::Illegal { terminal: false } => "event not allowed in this state",
        }
    }
}

impl fmt::Display for TransitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

/// Why a user-defined table was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TableError {
    DuplicateState(String),
    UnknownState(String),
    DuplicateTransition {
        from: String,
        event: String,
    },
    TerminalHasTransition(String),
    /// A declaration ([`DeclaredTable`]) with no transitions.
    Empty,
    /// A declaration that is not the documented JSON shape.
    Malformed(&'static str),
    /// A declaration member the format does not have.
    UnknownField(String),
}

impl TableError {
    /// A declaration whose text is not a JSON document (or nests deeper than
    /// [`idemgate_json::document::MAX_DEPTH`]): what every host answers when it cannot read
    /// the text at all, whoever parsed it (the core here, `JSON.parse` in the browser).
    pub const NOT_JSON: TableError = TableError::Malformed("not JSON");

    pub fn code(&self) -> &'static str {
        match self {
            TableError::DuplicateState(_) => "transition_table_duplicate_state",
            TableError::UnknownState(_) => "transition_table_unknown_state",
            TableError::DuplicateTransition { .. } => "transition_table_duplicate_transition",
            TableError::TerminalHasTransition(_) => "transition_table_terminal_has_transition",
            TableError::Empty => "transition_table_empty",
            TableError::Malformed(_) => "transition_table_malformed",
            TableError::UnknownField(_) => "transition_table_unknown_field",
        }
    }

    /// The same text as `Display`, without `core::fmt` (see `crate::text`): what the browser
    /// module shows when `StateTable.fromJSON` refuses a table.
    pub fn message(&self) -> String {
        text::message(|out| self.write_text(out))
    }

    fn write_text<T: Text>(&self, out: &mut T) -> fmt::Result {
        // A name between quotes as written: a table's names are the application's own words.
        let quoted = |out: &mut T, before: &str, name: &str, after: &str| {
            out.put(before)?;
            out.put("\"")?;
            out.put(name)?;
            out.put("\"")?;
            out.put(after)
        };
        match self {
            TableError::DuplicateState(s) => quoted(out, "state ", s, " is listed twice"),
            TableError::UnknownState(s) => quoted(out, "state ", s, " is not in the state list"),
            TableError::DuplicateTransition { from, event } => {
                quoted(out, "event ", event, " has two transitions from ")?;
                quoted(out, "", from, "")
            }
            TableError::TerminalHasTransition(s) => {
                quoted(out, "terminal state ", s, " has an outgoing transition")
            }
            TableError::Empty => out.put("a table needs at least one transition"),
            TableError::Malformed(shape) => out.put(shape),
            TableError::UnknownField(name) => quoted(out, "a table has no member ", name, ""),
        }
    }
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_text(f)
    }
}

#[cfg(test)]
mod tests;
