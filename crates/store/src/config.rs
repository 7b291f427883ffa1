//! The service's settings, from flags and environment variables (a flag wins over its variable;
//! clap reads both, see [`flags`]). Every setting has a default except in cluster mode, where the
//! seed nodes must be named; a bad value is a typed error that `main` prints before exiting
//! non-zero.

use idemgate_core::time::Span;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

// The command line, transport security and logging: each a concern of its own, each in its own
// module.
mod flags;
mod logging;
mod transport;
#[cfg(test)]
pub(crate) use flags::with_env;
pub use flags::ServiceFlags;
use logging::log_settings;
pub use logging::{LogFormat, LogSettings};
use transport::transport;
pub use transport::Transport;

/// Most `--workers` accepted: far above any useful count, low enough that a typo is refused
/// instead of starting thousands of threads.
const MAX_WORKERS: usize = 1024;

/// The Redis URL when none is given (outside cluster mode, which must name its seeds).
const DEFAULT_REDIS: &str = "redis://127.0.0.1:6379";

/// Which engine holds the records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[non_exhaustive]
pub enum EngineKind {
    /// Redis or Redis Cluster.
    Redis,
    /// PostgreSQL: one table, the primary key is the unique constraint.
    Postgres,
    /// Redis in front of PostgreSQL: Redis answers what it can, PostgreSQL decides.
    #[value(name = "redis+postgres")]
    RedisPostgres,
}

impl EngineKind {
    /// The spelling of `--engine`.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Redis => "redis",
            EngineKind::Postgres => "postgres",
            EngineKind::RedisPostgres => "redis+postgres",
        }
    }

    /// Whether the engine needs `--postgres`.
    pub fn uses_postgres(self) -> bool {
        matches!(self, EngineKind::Postgres | EngineKind::RedisPostgres)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub listen: SocketAddr,
    pub engine: EngineKind,
    /// The PostgreSQL URL (postgres engines only).
    pub postgres: Option<String>,
    pub redis: Vec<String>,
    pub cluster: bool,
    /// TLS to Redis beyond the `rediss://` scheme.
    pub redis_tls: RedisTls,
    pub op_timeout: Duration,
    /// Redis engines: the share of `maxmemory` past which new claims and token uses are refused,
    /// in percent (`None`: never), so a completion always finds room.
    pub claim_memory_limit: Option<u8>,
    pub connect_timeout: Duration,
    /// PostgreSQL engines: time between sweep rounds of expired rows.
    pub sweep_every: Duration,
    pub shutdown_grace: Duration,
    pub key_prefix: String,
    pub max_body: usize,
    /// Runtime worker threads (`None`: one per core). On a machine the service shares with Envoy
    /// and Redis, fewer threads than cores spend less CPU waking each other per operation.
    pub workers: Option<std::num::NonZeroUsize>,
    /// Mutual TLS, or plaintext by explicit choice.
    pub transport: Transport,
    /// Log format and filter.
    pub log: LogSettings,
    /// Operator controls; boxed, as most runs leave them off.
    pub admin: Box<AdminSettings>,
}

/// TLS to Redis beyond what a `rediss://` URL says: a CA to trust instead of the system's roots
/// (a managed Redis's own CA, a test CA) and a client certificate for Redis's mutual TLS.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedisTls {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

impl RedisTls {
    fn is_set(&self) -> bool {
        self.ca.is_some() || self.cert.is_some() || self.key.is_some()
    }
}

/// A value clap accepted that means nothing to the service, or flags that do not go together.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    Invalid { name: &'static str, why: String },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Invalid { name, why } => write!(f, "{name}: {why}"),
        }
    }
}

impl std::error::Error for ConfigError {}

fn invalid<T>(name: &'static str, why: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError::Invalid {
        name,
        why: why.into(),
    })
}

impl Config {
    /// The settings `flags` give, checked; `rust_log` is `RUST_LOG`, the log filter when
    /// `--log-level` is not given.
    pub fn from_flags(
        flags: ServiceFlags,
        rust_log: Option<String>,
    ) -> Result<Config, ConfigError> {
        let mut redis: Vec<String> = flags.redis.iter().flat_map(|v| split_urls(v)).collect();
        if redis.is_empty() {
            if flags.cluster {
                return invalid("--redis", "cluster mode needs the seed nodes' URLs");
            }
            redis.push(DEFAULT_REDIS.into());
        }
        if redis
            .iter()
            .any(|url| !(url.starts_with("redis://") || url.starts_with("rediss://")))
        {
            // Never echo the URL: it may carry a password.
            return invalid("--redis", "is not a redis:// or rediss:// URL");
        }
        let redis_tls = RedisTls {
            ca: flags.redis_ca,
            cert: flags.redis_cert,
            key: flags.redis_key,
        };
        check_redis_tls(&redis_tls, &redis, flags.engine)?;
        if !flags.cluster && redis.len() > 1 {
            return invalid("--redis", "several URLs are only meaningful with --cluster");
        }
        check_postgres(flags.postgres.as_deref(), flags.engine)?;
        let max_body = match flags.max_body.trim().parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => {
                let text = &flags.max_body;
                return invalid(
                    "--max-body",
                    format!("{text:?} is not a positive byte count"),
                );
            }
        };
        let admin = AdminSettings {
            listen: flags.admin_listen,
            token_file: flags.admin_token_file,
            policy: flags.policy,
        };
        Ok(Config {
            listen: flags.listen,
            engine: flags.engine,
            postgres: flags.postgres,
            redis,
            cluster: flags.cluster,
            redis_tls,
            op_timeout: duration("--op-timeout", &flags.op_timeout)?,
            claim_memory_limit: percent_or_off("--claim-memory-limit", &flags.claim_memory_limit)?,
            connect_timeout: duration("--connect-timeout", &flags.connect_timeout)?,
            sweep_every: duration("--sweep-every", &flags.sweep_every)?,
            shutdown_grace: duration("--shutdown-grace", &flags.shutdown_grace)?,
            key_prefix: flags.key_prefix,
            max_body,
            workers: flags.workers,
            transport: transport(
                flags.tls_cert,
                flags.tls_key,
                flags.client_ca,
                flags.plaintext_unauthenticated,
            )?,
            log: log_settings(flags.log_format, flags.log_level, rust_log)?,
            admin: Box::new(admin.checked()?),
        })
    }
}

/// `--postgres` is needed by the postgres engines and only by them, and is a URL.
fn check_postgres(url: Option<&str>, engine: EngineKind) -> Result<(), ConfigError> {
    match (url, engine.uses_postgres()) {
        (None, true) => invalid(
            "--postgres",
            format!("--engine {} needs the PostgreSQL URL", engine.name()),
        ),
        (Some(_), false) => invalid(
            "--postgres",
            "only applies to --engine postgres or redis+postgres",
        ),
        (Some(url), true)
            if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) =>
        {
            // Never echo the URL: it may carry a password.
            invalid(
                "--postgres",
                "is not a postgres:// or postgresql:// URL (the key/value form `host=… sslmode=…` \
                 is not read: write it as a URL, with sslmode=verify-full&sslrootcert=PATH or \
                 sslmode=disable)",
            )
        }
        _ => Ok(()),
    }
}

/// `"90%"` (or `"90"`) as 90, from 1 to 100; `"off"` as `None`.
fn percent_or_off(name: &'static str, text: &str) -> Result<Option<u8>, ConfigError> {
    let text = text.trim();
    if text == "off" {
        return Ok(None);
    }
    match text.strip_suffix('%').unwrap_or(text).parse::<u8>() {
        Ok(p) if (1..=100).contains(&p) => Ok(Some(p)),
        _ => invalid(
            name,
            format!("{text:?} is not a percentage from 1% to 100%, or \"off\""),
        ),
    }
}

/// The Redis TLS files apply only to `rediss://` URLs and an engine that uses Redis, and a client
/// certificate needs its key (and the key its certificate).
fn check_redis_tls(tls: &RedisTls, urls: &[String], engine: EngineKind) -> Result<(), ConfigError> {
    if !tls.is_set() {
        return Ok(());
    }
    if engine == EngineKind::Postgres {
        return invalid(
            "--redis-ca",
            "Redis TLS settings need an engine that uses Redis",
        );
    }
    if !urls.iter().all(|url| url.starts_with("rediss://")) {
        return invalid("--redis-ca", "Redis TLS settings need rediss:// URLs");
    }
    match (&tls.cert, &tls.key) {
        (Some(_), None) => invalid("--redis-cert", "needs --redis-key"),
        (None, Some(_)) => invalid("--redis-key", "needs --redis-cert"),
        _ => Ok(()),
    }
}

/// The operator controls' settings: the admin port, its token, and the filter policy
/// storage keys are derived with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdminSettings {
    /// Where the admin endpoints listen; `None`: no admin port (the default).
    pub listen: Option<SocketAddr>,
    /// The file holding the admin port's bearer token.
    pub token_file: Option<PathBuf>,
    /// The filter's JSON configuration (`None`: the filter's defaults).
    pub policy: Option<PathBuf>,
}

impl AdminSettings {
    /// An admin port needs its token, and a token file without a port is a mistake.
    fn checked(self) -> Result<AdminSettings, ConfigError> {
        match (&self.listen, &self.token_file) {
            (Some(_), None) => invalid(
                "--admin-token-file",
                "the admin port needs a bearer token file; it never starts without one",
            ),
            (None, Some(_)) => invalid("--admin-token-file", "only applies with --admin-listen"),
            _ => Ok(self),
        }
    }
}

/// `--redis` values (and the variable's) may each name several comma-separated URLs.
fn split_urls(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// Durations in the core's own syntax (`250ms`, `2s`), as the filter configuration writes them.
fn duration(name: &'static str, text: &str) -> Result<Duration, ConfigError> {
    match text.parse::<Span>() {
        Ok(span) if span.as_millis() > 0 => Ok(Duration::from_millis(span.as_millis())),
        Ok(_) => invalid(name, "must be longer than zero"),
        Err(e) => invalid(name, format!("{text:?}: {e}")),
    }
}

#[cfg(test)]
mod tests;
