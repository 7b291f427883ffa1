//! `in_flight`, at the top level (every route's default) and on a route: what a duplicate of a
//! request still in flight gets.

use super::*;

pub(super) const IN_FLIGHT_FIELDS: &[&str] = &["wait"];

/// `{"wait": duration}`; `null` (or the section's absence) is "not given".
pub(super) fn in_flight(path: &str, value: &Value) -> Result<Option<InFlightConfig>, Shape> {
    if value.is_null() {
        return Ok(None);
    }
    let mut c = InFlightConfig::default();
    for (key, value) in members(path, value)? {
        let slot = match IN_FLIGHT_FIELDS.iter().position(|name| name == key) {
            // `wait`
            Some(0) => Slot::Text(&mut c.wait),
            _ => return Err(unknown(path, key, IN_FLIGHT_FIELDS)),
        };
        fill(&join(path, key), value, slot)?;
    }
    Ok(Some(c))
}
