//! Why a configuration is refused: [`ConfigError`], naming the field and the reason, and the
//! helpers that build one.

use super::*;

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// Not JSON, or not of the document's shape (unknown field, wrong type, missing `prefix`);
    /// `message` names the byte offset (not JSON) or the field's path and what was expected.
    Syntax { message: String },
    /// A field holds a value the rules refuse.
    Invalid { field: String, reason: String },
    /// A route's state table (`routes[i].order.table`) is not a valid table: the code is the
    /// table's own (`transition_table_*`), the same one the browser module reports.
    Table { field: String, error: TableError },
}

/// A refusal of `field`, for the reason `reason`'s pieces say (joined). Out of line: configuration
/// is read once, so its code is written for size.
#[cold]
#[inline(never)]
pub(super) fn invalid(field: &str, reason: &[&str]) -> Refusal {
    refuse(copy(field), reason)
}

/// [`invalid`] for a field path built for the error.
#[cold]
#[inline(never)]
pub(super) fn refuse(field: String, reason: &[&str]) -> Refusal {
    Refusal(Box::new(ConfigError::Invalid {
        field,
        reason: reason.concat(),
    }))
}

/// A [`ConfigError::Invalid`], boxed: one word, so that every `?` of the validation passes a
/// pointer on rather than a whole `ConfigError`.
pub(super) struct Refusal(pub(super) Box<ConfigError>);

/// `list[i]` and then `rest`: the path of a list's item (`routes[1]`) or of its field
/// (`routes[1].methods`).
pub(super) fn item(list: &str, i: usize, rest: &str) -> String {
    [list, "[", &decimal(i as u64), "]", rest].concat()
}

/// Owned copies of `names` (the default lists).
pub(super) fn owned(names: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for name in names {
        out.push(copy(name));
    }
    out
}

/// An owned copy of `text`. Out of line, so that the many places that keep a configured name
/// share one copy routine (configuration is read once; its code is written for size).
#[inline(never)]
pub(super) fn copy(text: &str) -> String {
    String::from(text)
}

/// An error's text, by one out-of-line `to_string` for every error type.
#[inline(never)]
pub(super) fn shown(error: &dyn fmt::Display) -> String {
    error.to_string()
}

/// `n` in decimal.
pub(super) fn decimal(n: u64) -> String {
    let mut out = String::new();
    // Writing into a `String` cannot fail.
    let _ = out.put_u64(n);
    out
}

impl ConfigError {
    pub fn code(&self) -> &'static str {
        match self {
            ConfigError::Syntax { .. } => "config_syntax",
            ConfigError::Invalid { .. } => "config_invalid",
            ConfigError::Table { error, .. } => error.code(),
        }
    }

    /// The field at fault (`"routes[1].methods"`), when known.
    pub fn field(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { field, .. } | ConfigError::Table { field, .. } => Some(field),
            ConfigError::Syntax { .. } => None,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Syntax { message } => write!(f, "configuration is not valid: {message}"),
            ConfigError::Invalid { field, reason } => {
                write!(f, "configuration field `{field}`: {reason}")
            }
            ConfigError::Table { field, error } => {
                write!(
                    f,
                    "configuration field `{field}`: {} ({error})",
                    error.code()
                )
            }
        }
    }
}
