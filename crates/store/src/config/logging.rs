//! `--log-format` and `--log-level`: the shape and filter of the `tracing` output.

use super::ConfigError;

/// The shape of log lines on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSettings {
    pub format: LogFormat,
    /// An `EnvFilter` directive: a level from `--log-level`, else `RUST_LOG`, else `info`.
    pub filter: String,
}

const LOG_LEVELS: [&str; 6] = ["error", "warn", "info", "debug", "trace", "off"];

pub(super) fn log_settings(
    format: Option<String>,
    level: Option<String>,
    rust_log: Option<String>,
) -> Result<LogSettings, ConfigError> {
    let format = match format.as_deref().map(str::trim) {
        None | Some("text") => LogFormat::Text,
        Some("json") => LogFormat::Json,
        Some(other) => {
            return Err(ConfigError::Invalid {
                name: "--log-format",
                why: format!("{other:?} is not text or json"),
            })
        }
    };
    let filter = match (level, rust_log) {
        (Some(level), _) => {
            let level = level.trim().to_ascii_lowercase();
            if !LOG_LEVELS.contains(&level.as_str()) {
                return Err(ConfigError::Invalid {
                    name: "--log-level",
                    why: format!("{level:?} is not one of {}", LOG_LEVELS.join(", ")),
                });
            }
            level
        }
        (None, Some(directives)) if !directives.trim().is_empty() => {
            tracing_subscriber::EnvFilter::builder()
                .parse(&directives)
                .map_err(|e| ConfigError::Invalid {
                    name: "RUST_LOG",
                    why: format!("{directives:?}: {e}"),
                })?;
            directives
        }
        (None, _) => "info".into(),
    };
    Ok(LogSettings { format, filter })
}
