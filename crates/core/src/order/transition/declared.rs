//! A state table declared as data — the one format the edge's `routes[].order.table` and the
//! browser's `StateTable.fromJSON` read, so a table an application writes once means the same on
//! both:
//!
//! ```json
//! { "initial": "unpaid",
//!   "transitions": [["unpaid", "payment.succeeded", "paid"], ["paid", "order.shipped", "shipped"]],
//!   "states": ["unpaid", "paid", "shipped"],
//!   "terminal": ["shipped"] }
//! ```
//!
//! Only `transitions` is required. `states` defaults to every state named, in order of first
//! appearance (`initial` first); `terminal` to the states with no outgoing transition; `initial`
//! to the first state. Any other member is refused rather than ignored: a misspelt `"terminals"`
//! would otherwise silently change which events are acknowledged.

use super::{StateTable, TableError};
use crate::request::json::Value;
use alloc::string::String;
use alloc::vec::Vec;

/// A validated table with the state a new object starts in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredTable {
    table: StateTable<String>,
    initial: String,
}

pub(crate) const FIELDS: &[&str] = &["initial", "states", "terminal", "transitions"];

impl DeclaredTable {
    /// Parses and validates the JSON text of a table declaration.
    pub fn parse(text: &str) -> Result<DeclaredTable, TableError> {
        let value = Value::parse(text).map_err(|_| TableError::NOT_JSON)?;
        DeclaredTable::from_value(&value)
    }

    /// Reads and validates a table declaration already parsed (a member of a larger document).
    pub fn from_value(value: &Value) -> Result<DeclaredTable, TableError> {
        let members = value
            .as_object()
            .ok_or(TableError::Malformed("a table is a JSON object"))?;
        if let Some((name, _)) = members.iter().find(|(k, _)| !FIELDS.contains(&k.as_str())) {
            return Err(TableError::UnknownField(name.clone()));
        }
        let transitions = transitions(value.get("transitions"))?;
        let initial = match value.get("initial") {
            None => None,
            Some(v) => Some(String::from(
                v.as_str()
                    .ok_or(TableError::Malformed("initial is a string"))?,
            )),
        };
        let states = match value.get("states") {
            Some(v) => names(v, "states is an array of strings")?,
            None => {
                let mut states: Vec<String> = initial.iter().cloned().collect();
                for (from, _, to) in &transitions {
                    for s in [from, to] {
                        if !states.contains(s) {
                            states.push(s.clone());
                        }
                    }
                }
                states
            }
        };
        let terminal = match value.get("terminal") {
            Some(v) => names(v, "terminal is an array of strings")?,
            None => states
                .iter()
                .filter(|s| !transitions.iter().any(|(from, _, _)| from == *s))
                .cloned()
                .collect(),
        };
        let initial = match initial.or_else(|| states.first().cloned()) {
            Some(initial) => initial,
            None => return Err(TableError::Empty),
        };
        let table = StateTable::new(states, terminal, transitions)?;
        if !table.is_state(&initial) {
            return Err(TableError::UnknownState(initial));
        }
        Ok(DeclaredTable { table, initial })
    }

    /// A declaration from its parts, as [`DeclaredTable::from_value`] would make it from JSON
    /// that names them all (the remote store's wire format carries a table this way).
    pub fn new(
        states: Vec<String>,
        terminal: Vec<String>,
        transitions: Vec<(String, String, String)>,
        initial: String,
    ) -> Result<DeclaredTable, TableError> {
        if transitions.is_empty() {
            return Err(TableError::Empty);
        }
        let table = StateTable::new(states, terminal, transitions)?;
        if !table.is_state(&initial) {
            return Err(TableError::UnknownState(initial));
        }
        Ok(DeclaredTable { table, initial })
    }

    pub fn table(&self) -> &StateTable<String> {
        &self.table
    }

    /// The state of an object no event has moved yet.
    pub fn initial(&self) -> &str {
        &self.initial
    }
}

// Loops rather than `collect::<Result<Vec<_>, _>>()`: the same answers, and no `GenericShunt`
// adapter compiled for each (the browser module's size).
fn names(value: &Value, shape: &'static str) -> Result<Vec<String>, TableError> {
    let list = value.as_array().ok_or(TableError::Malformed(shape))?;
    let mut names = Vec::with_capacity(list.len());
    for name in list {
        names.push(String::from(
            name.as_str().ok_or(TableError::Malformed(shape))?,
        ));
    }
    Ok(names)
}

type Edge = (String, String, String);

fn transitions(value: Option<&Value>) -> Result<Vec<Edge>, TableError> {
    const SHAPE: &str = "transitions is an array of [from, event, to]";
    let list = value
        .ok_or(TableError::Malformed("transitions is required"))?
        .as_array()
        .ok_or(TableError::Malformed(SHAPE))?;
    if list.is_empty() {
        return Err(TableError::Empty);
    }
    let mut edges = Vec::with_capacity(list.len());
    for edge in list {
        let Some([from, event, to]) = edge.as_array() else {
            return Err(TableError::Malformed(SHAPE));
        };
        let (Some(f), Some(e), Some(t)) = (from.as_str(), event.as_str(), to.as_str()) else {
            return Err(TableError::Malformed(SHAPE));
        };
        edges.push((f.into(), e.into(), t.into()));
    }
    Ok(edges)
}
