//! `--log-format` and `--log-level`: the shape and filter of the `tracing` output.

use super::ConfigError;

/// The shape of log lines on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
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

/// The levels `--log-level` names (clap checks the flag against them, in any case).
pub(super) const LOG_LEVELS: [&str; 6] = ["error", "warn", "info", "debug", "trace", "off"];

/// `level` is one of [`LOG_LEVELS`] in lower case (clap checked it); `rust_log` is `RUST_LOG`, an
/// `EnvFilter` whose syntax is checked here, so a bad one stops the service before it starts.
pub(super) fn log_settings(
    format: LogFormat,
    level: Option<String>,
    rust_log: Option<String>,
) -> Result<LogSettings, ConfigError> {
    let filter = match (level, rust_log) {
        (Some(level), _) => level,
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
