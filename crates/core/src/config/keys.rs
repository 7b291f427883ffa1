//! `key_format`, `key_mismatch` and `key_scope` ([`crate::request::key_format`]): per route, with
//! the document's top-level fields as the default of every API route. A callback route's keys are
//! its provider's delivery ids in the route's own namespace, so it takes only its own fields.

use super::*;
use crate::request::key::MAX_KEY_LEN;
use crate::request::key_format::{KeyFormat, KeyMismatch, KeyPattern, KeyRules, KeyScope};

/// The three fields as written, at the top level or on a route.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyRulesConfig {
    pub(crate) format: Option<KeyFormatConfig>,
    pub(crate) mismatch: Option<KeyMismatch>,
    pub(crate) scope: Option<KeyScope>,
}

/// `"uuid"`, `{"prefix": text}` or `{"pattern": text}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyFormatConfig {
    Uuid,
    Prefix(String),
    Pattern(String),
}

impl Config {
    /// Route `i`'s key rules (`None`: the route list is the default one), its own fields over the
    /// top-level defaults on an API route. `key` is whether the route requires a key.
    pub(super) fn compile_keys(
        &self,
        route: Option<(usize, &KeyRulesConfig)>,
        kind: RouteKind,
        key: KeyRequirement,
    ) -> Result<KeyRules, Refusal> {
        let top = &self.keys;
        let own = route.map(|(_, own)| own);
        // Where a field came from: the route's own, or the top-level default.
        let at = |name: &str, own_given: bool| match route {
            Some((i, _)) if own_given => item("routes", i, &[".", name].concat()),
            _ => copy(name),
        };
        let callback = kind == RouteKind::Callback;
        let format_own = own.is_some_and(|o| o.format.is_some());
        let format = own.and_then(|o| o.format.as_ref()).or(if callback {
            None
        } else {
            top.format.as_ref()
        });
        let format = match format {
            None => None,
            Some(KeyFormatConfig::Uuid) => Some(KeyFormat::Uuid),
            Some(KeyFormatConfig::Prefix(prefix)) => {
                let field = [at("key_format", format_own).as_str(), ".prefix"].concat();
                if prefix.is_empty() || prefix.len() >= MAX_KEY_LEN {
                    return Err(refuse(
                        field,
                        &["must have 1 to 254 characters (a key has at most 255, and one follows the prefix)"],
                    ));
                }
                if !prefix.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
                    return Err(refuse(
                        field,
                        &["may hold only visible ASCII, as keys do: no key could start with it"],
                    ));
                }
                Some(KeyFormat::Prefix(copy(prefix)))
            }
            Some(KeyFormatConfig::Pattern(pattern)) => match KeyPattern::parse(pattern) {
                Ok(pattern) => Some(KeyFormat::Pattern(pattern)),
                Err(error) => {
                    let field = [at("key_format", format_own).as_str(), ".pattern"].concat();
                    return Err(refuse(field, &[error.reason()]));
                }
            },
        };
        let mismatch_own = own.is_some_and(|o| o.mismatch.is_some());
        let mismatch = own
            .and_then(|o| o.mismatch)
            .or(if callback { None } else { top.mismatch })
            .unwrap_or(KeyMismatch::Refuse);
        // A top-level "ignore" is a default: it does nothing on a route without a format.
        if mismatch == KeyMismatch::Ignore && format.is_none() && mismatch_own {
            return Err(refuse(
                at("key_mismatch", true),
                &["only applies with a `key_format`"],
            ));
        }
        // Named on the route, even when the default says "ignore": that is where to fix it.
        if mismatch == KeyMismatch::Ignore && format.is_some() && key == KeyRequirement::Required {
            return Err(refuse(
                at("key_mismatch", route.is_some()),
                &["\"ignore\" takes a key of another format for no key, and this route requires one: set `key` to \"optional\", or `key_mismatch` to \"refuse\""],
            ));
        }
        let scope = match own.and_then(|o| o.scope) {
            Some(KeyScope::Client) if callback => {
                return Err(refuse(
                    at("key_scope", true),
                    &["only applies to routes of kind \"api\": a callback route's delivery ids live in the route's own namespace"],
                ))
            }
            Some(scope) => scope,
            None if callback => KeyScope::Route,
            None => top.scope.unwrap_or(KeyScope::Route),
        };
        Ok(KeyRules {
            format,
            mismatch,
            scope,
        })
    }
}
