//! Reading the `problems` section: how the edge writes its problem answers.

use super::shape::{join, members, opt_pick, opt_string, unknown, Shape};
use super::Choices;
use crate::config::ProblemsConfig;
use crate::policy::problems::Compat;
use crate::request::json::Value;

pub(super) const PROBLEMS_FIELDS: &[&str] = &["type_base", "describedby", "compat"];
pub(super) const COMPAT: Choices<Compat, 2> = (["none", "stripe"], [Compat::None, Compat::Stripe]);

/// The section at `path`; `null` is "not given".
pub(super) fn read(path: &str, value: &Value) -> Result<Option<ProblemsConfig>, Shape> {
    if value.is_null() {
        return Ok(None);
    }
    let mut p = ProblemsConfig::default();
    for (key, value) in members(path, value)? {
        let at = join(path, key);
        match PROBLEMS_FIELDS.iter().position(|name| name == key) {
            Some(0) => p.type_base = opt_string(&at, value)?,
            Some(1) => p.describedby = opt_string(&at, value)?,
            Some(2) => p.compat = opt_pick(&at, value, &COMPAT)?,
            _ => return Err(unknown(path, key, PROBLEMS_FIELDS)),
        }
    }
    Ok(Some(p))
}
