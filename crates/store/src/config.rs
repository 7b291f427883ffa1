//! The service's settings, from flags and environment variables (a flag wins over its variable).
//! Every setting has a default except in cluster mode, where the seed nodes must be named; a bad
//! value is a typed error that `main` prints before exiting non-zero.

use idemgate_core::time::Span;
use std::fmt;
use std::net::SocketAddr;

// Transport security and logging: each a concern of its own, each in its own module.
mod logging;
mod transport;
use logging::log_settings;
pub use logging::{LogFormat, LogSettings};
use std::path::PathBuf;
use std::time::Duration;
use transport::transport;
pub use transport::Transport;

/// The usage text (`--help`); the README's table mirrors it.
pub const USAGE: &str = "\
idemgate-store: carries the idemgate remote store protocol to Redis, Redis Cluster or PostgreSQL

usage: idemgate-store [options]

  --listen ADDR          address to serve on (HTTPS with mutual env IDEMGATE_STORE_LISTEN   default 127.0.0.1:8787
                         TLS: HTTP/2 and HTTP/1.1 by ALPN)
  --engine NAME          redis, postgres, or redis+postgres     env IDEMGATE_STORE_ENGINE   default redis
                         (Redis answers what it can, PostgreSQL
                         decides)
  --postgres URL         PostgreSQL URL (postgres://user:pass@  env IDEMGATE_STORE_POSTGRES (required by the
                         host:port/db?sslmode=verify-full&                                  postgres engines)
                         sslrootcert=ca.pem)
  --redis URL            Redis URL; repeat (or comma-separate)  env IDEMGATE_STORE_REDIS    default redis://127.0.0.1:6379
                         for the seed nodes of a cluster
  --cluster              the URLs are Redis Cluster seed nodes  env IDEMGATE_STORE_CLUSTER  default off
                         rediss:// is TLS; an ACL user goes in the URL: rediss://user:password@host:port
  --redis-ca FILE        PEM CA to verify Redis's certificate   env IDEMGATE_STORE_REDIS_CA (default: the
                         (rediss:// only)                                                   system's roots)
  --redis-cert FILE      PEM client certificate for Redis       env IDEMGATE_STORE_REDIS_CERT
                         (tls-auth-clients yes; with --redis-key)
  --redis-key FILE       PEM private key of --redis-cert        env IDEMGATE_STORE_REDIS_KEY
  --op-timeout DUR       one operation end to end, Redis calls  env IDEMGATE_STORE_OP_TIMEOUT default 250ms
                         and retries included; then a typed
                         timeout answer (keep it below the
                         filter's callout timeout)
  --claim-memory-limit P Redis engines: refuse new claims and   env IDEMGATE_STORE_CLAIM_MEMORY_LIMIT
                         token uses (store full) once Redis     default 90%
                         uses P of maxmemory, so the rest is
                         room for the finishes of the claims
                         in flight (off: never)
  --connect-timeout DUR  connecting to the engine               env IDEMGATE_STORE_CONNECT_TIMEOUT default 2s
  --sweep-every DUR      postgres engines: time between rounds  env IDEMGATE_STORE_SWEEP_EVERY default 30s
                         of deleting expired rows
  --shutdown-grace DUR   SIGTERM/SIGINT: time for in-flight     env IDEMGATE_STORE_SHUTDOWN_GRACE default 10s
                         operations before exit
  --key-prefix TEXT      prefix of every Redis key              env IDEMGATE_STORE_KEY_PREFIX default idemgate:
  --max-body BYTES       largest request body accepted          env IDEMGATE_STORE_MAX_BODY default 16777216
  --workers N            threads serving operations; 1 on a     env IDEMGATE_STORE_WORKERS  default: one per core
                         machine whose cores it shares (with
                         Envoy, Redis)

  Mutual TLS (required unless --plaintext-unauthenticated):
  --tls-cert FILE        the service's certificate chain (PEM)  env IDEMGATE_STORE_TLS_CERT
  --tls-key FILE         its private key (PEM)                  env IDEMGATE_STORE_TLS_KEY
  --client-ca FILE       CA(s) whose client certificates may    env IDEMGATE_STORE_CLIENT_CA
                         connect (PEM); others are refused
  --plaintext-unauthenticated  serve HTTP/1.1 and h2c without   env IDEMGATE_STORE_PLAINTEXT_UNAUTHENTICATED
                         TLS: anyone who reaches the port can
                         claim, complete or release any record
  --log-format FORMAT    text or json lines on stderr           env IDEMGATE_STORE_LOG_FORMAT default text
  --log-level LEVEL      error, warn, info, debug, trace or off env IDEMGATE_STORE_LOG_LEVEL default info
                         (without either, RUST_LOG's filter)

  --admin-listen ADDR    serve the operator endpoints (records,  env IDEMGATE_STORE_ADMIN_LISTEN default off
                         stats) on this address, never on
                         --listen; needs --admin-token-file
  --admin-token-file F   the admin port's bearer token (at      env IDEMGATE_STORE_ADMIN_TOKEN_FILE
                         least 16 characters)
  --policy FILE          the filter's JSON configuration, to    env IDEMGATE_STORE_POLICY   default: the filter's
                         derive storage keys as the filter does                             defaults
  --help                 this text
Durations: 250ms, 2s, 1m. Endpoints: POST /v1/op, GET /healthz, /readyz, /metrics.

usage: idemgate-store records get|evict --key KEY --route PATH [--scope VALUE] [options]
       idemgate-store stats [--top N] [--scan-limit N] [options]
  (operator controls; the same engine options as the service; see records --help)
";

/// Most `--workers` accepted: far above any useful count, low enough that a typo is refused
/// instead of starting thousands of threads.
const MAX_WORKERS: usize = 1024;

/// Which engine holds the records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EngineKind {
    /// Redis or Redis Cluster.
    Redis,
    /// PostgreSQL: one table, the primary key is the unique constraint.
    Postgres,
    /// Redis in front of PostgreSQL: Redis answers what it can, PostgreSQL decides.
    RedisPostgres,
}

impl EngineKind {
    const ALL: [EngineKind; 3] = [
        EngineKind::Redis,
        EngineKind::Postgres,
        EngineKind::RedisPostgres,
    ];

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

/// What the command line asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(clippy::large_enum_variant)] // made once per process: boxing would buy nothing
pub enum Command {
    Run(Config),
    Help,
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    UnknownFlag(String),
    MissingValue(&'static str),
    Invalid { name: &'static str, why: String },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::UnknownFlag(flag) => write!(f, "unknown option {flag} (see --help)"),
            ConfigError::MissingValue(name) => write!(f, "{name} needs a value"),
            ConfigError::Invalid { name, why } => write!(f, "{name}: {why}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Parses `args` (without the program name), reading defaults from `env`.
pub fn parse(
    args: impl IntoIterator<Item = String>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Command, ConfigError> {
    let mut listen = env("IDEMGATE_STORE_LISTEN");
    let mut engine = env("IDEMGATE_STORE_ENGINE");
    let mut postgres = env("IDEMGATE_STORE_POSTGRES");
    let mut redis: Vec<String> = env("IDEMGATE_STORE_REDIS")
        .map(|v| split_urls(&v))
        .unwrap_or_default();
    let mut cluster = match env("IDEMGATE_STORE_CLUSTER") {
        None => false,
        Some(v) => flag_value("IDEMGATE_STORE_CLUSTER", &v)?,
    };
    let mut op_timeout = env("IDEMGATE_STORE_OP_TIMEOUT");
    let mut connect_timeout = env("IDEMGATE_STORE_CONNECT_TIMEOUT");
    let mut claim_memory_limit = env("IDEMGATE_STORE_CLAIM_MEMORY_LIMIT");
    let mut sweep_every = env("IDEMGATE_STORE_SWEEP_EVERY");
    let mut shutdown_grace = env("IDEMGATE_STORE_SHUTDOWN_GRACE");
    let mut key_prefix = env("IDEMGATE_STORE_KEY_PREFIX");
    let mut max_body = env("IDEMGATE_STORE_MAX_BODY");
    let mut workers = env("IDEMGATE_STORE_WORKERS");
    // Transport security and logging.
    let mut tls_cert = env("IDEMGATE_STORE_TLS_CERT");
    let mut tls_key = env("IDEMGATE_STORE_TLS_KEY");
    let mut client_ca = env("IDEMGATE_STORE_CLIENT_CA");
    let mut plaintext = match env("IDEMGATE_STORE_PLAINTEXT_UNAUTHENTICATED") {
        None => false,
        Some(v) => flag_value("IDEMGATE_STORE_PLAINTEXT_UNAUTHENTICATED", &v)?,
    };
    let mut log_format = env("IDEMGATE_STORE_LOG_FORMAT");
    let mut log_level = env("IDEMGATE_STORE_LOG_LEVEL");
    // TLS to Redis.
    let mut redis_tls = RedisTls {
        ca: env("IDEMGATE_STORE_REDIS_CA").map(PathBuf::from),
        cert: env("IDEMGATE_STORE_REDIS_CERT").map(PathBuf::from),
        key: env("IDEMGATE_STORE_REDIS_KEY").map(PathBuf::from),
    };

    let mut admin = AdminSettings::from_env(env);
    let mut flag_urls: Vec<String> = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag.to_string(), Some(value.into())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &'static str| -> Result<String, ConfigError> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => args.next().ok_or(ConfigError::MissingValue(name)),
            }
        };
        if admin.flag(&flag, &mut value)? {
            continue;
        }
        match flag.as_str() {
            "--help" | "-h" => return Ok(Command::Help),
            "--listen" => listen = Some(value("--listen")?),
            "--engine" => engine = Some(value("--engine")?),
            "--postgres" => postgres = Some(value("--postgres")?),
            "--redis" => flag_urls.extend(split_urls(&value("--redis")?)),
            "--cluster" => {
                cluster = match &inline {
                    Some(v) => flag_value("--cluster", v)?,
                    None => true,
                }
            }
            "--op-timeout" => op_timeout = Some(value("--op-timeout")?),
            "--connect-timeout" => connect_timeout = Some(value("--connect-timeout")?),
            "--claim-memory-limit" => claim_memory_limit = Some(value("--claim-memory-limit")?),
            "--sweep-every" => sweep_every = Some(value("--sweep-every")?),
            "--shutdown-grace" => shutdown_grace = Some(value("--shutdown-grace")?),
            "--key-prefix" => key_prefix = Some(value("--key-prefix")?),
            "--max-body" => max_body = Some(value("--max-body")?),
            "--workers" => workers = Some(value("--workers")?),
            // Transport security and logging.
            "--tls-cert" => tls_cert = Some(value("--tls-cert")?),
            "--tls-key" => tls_key = Some(value("--tls-key")?),
            "--client-ca" => client_ca = Some(value("--client-ca")?),
            "--plaintext-unauthenticated" => {
                plaintext = match &inline {
                    Some(v) => flag_value("--plaintext-unauthenticated", v)?,
                    None => true,
                }
            }
            "--log-format" => log_format = Some(value("--log-format")?),
            "--log-level" => log_level = Some(value("--log-level")?),
            // TLS to Redis.
            "--redis-ca" => redis_tls.ca = Some(value("--redis-ca")?.into()),
            "--redis-cert" => redis_tls.cert = Some(value("--redis-cert")?.into()),
            "--redis-key" => redis_tls.key = Some(value("--redis-key")?.into()),
            _ => return Err(ConfigError::UnknownFlag(arg)),
        }
    }
    if !flag_urls.is_empty() {
        redis = flag_urls;
    }
    if redis.is_empty() {
        if cluster {
            return Err(ConfigError::Invalid {
                name: "--redis",
                why: "cluster mode needs the seed nodes' URLs".into(),
            });
        }
        redis.push("redis://127.0.0.1:6379".into());
    }
    for url in &redis {
        if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
            // Never echo the URL: it may carry a password.
            return Err(ConfigError::Invalid {
                name: "--redis",
                why: "is not a redis:// or rediss:// URL".into(),
            });
        }
    }
    check_redis_tls(&redis_tls, &redis, engine.as_deref())?;
    if !cluster && redis.len() > 1 {
        return Err(ConfigError::Invalid {
            name: "--redis",
            why: "several URLs are only meaningful with --cluster".into(),
        });
    }
    let engine = match engine {
        None => EngineKind::Redis,
        Some(name) => EngineKind::ALL
            .into_iter()
            .find(|kind| kind.name() == name.trim())
            .ok_or_else(|| ConfigError::Invalid {
                name: "--engine",
                why: format!("{name:?} is not redis, postgres or redis+postgres"),
            })?,
    };
    match (&postgres, engine.uses_postgres()) {
        (None, true) => {
            return Err(ConfigError::Invalid {
                name: "--postgres",
                why: format!("--engine {} needs the PostgreSQL URL", engine.name()),
            })
        }
        (Some(_), false) => {
            return Err(ConfigError::Invalid {
                name: "--postgres",
                why: "only applies to --engine postgres or redis+postgres".into(),
            })
        }
        (Some(url), true)
            if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) =>
        {
            // Never echo the URL: it may carry a password.
            return Err(ConfigError::Invalid {
                name: "--postgres",
                why: "is not a postgres:// or postgresql:// URL (the key/value form `host=… sslmode=…` is not read: write it as a URL, with sslmode=verify-full&sslrootcert=PATH or sslmode=disable)".into(),
            });
        }
        _ => {}
    }
    let listen = listen.unwrap_or_else(|| "127.0.0.1:8787".into());
    let listen = listen.parse().map_err(|_| ConfigError::Invalid {
        name: "--listen",
        why: format!("{listen:?} is not an address such as 127.0.0.1:8787"),
    })?;
    let key_prefix = key_prefix.unwrap_or_else(|| "idemgate:".into());
    let max_body = match max_body {
        None => 16 * 1024 * 1024,
        Some(text) => match text.parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => {
                return Err(ConfigError::Invalid {
                    name: "--max-body",
                    why: format!("{text:?} is not a positive byte count"),
                })
            }
        },
    };
    let workers = match workers {
        None => None,
        Some(text) => match text.trim().parse::<std::num::NonZeroUsize>() {
            Ok(n) if n.get() <= MAX_WORKERS => Some(n),
            _ => {
                return Err(ConfigError::Invalid {
                    name: "--workers",
                    why: format!("{text:?} is not a thread count from 1 to {MAX_WORKERS}"),
                })
            }
        },
    };
    Ok(Command::Run(Config {
        listen,
        engine,
        postgres,
        redis,
        cluster,
        redis_tls,
        op_timeout: duration("--op-timeout", op_timeout, "250ms")?,
        claim_memory_limit: percent_or_off(
            "--claim-memory-limit",
            claim_memory_limit.as_deref().unwrap_or("90%"),
        )?,
        connect_timeout: duration("--connect-timeout", connect_timeout, "2s")?,
        sweep_every: duration("--sweep-every", sweep_every, "30s")?,
        shutdown_grace: duration("--shutdown-grace", shutdown_grace, "10s")?,
        key_prefix,
        max_body,
        workers,
        transport: transport(tls_cert, tls_key, client_ca, plaintext)?,
        log: log_settings(log_format, log_level, env("RUST_LOG"))?,
        admin: Box::new(admin.validated()?),
    }))
}

/// `"90%"` (or `"90"`) as 90, from 1 to 100; `"off"` as `None`.
fn percent_or_off(name: &'static str, text: &str) -> Result<Option<u8>, ConfigError> {
    let text = text.trim();
    if text == "off" {
        return Ok(None);
    }
    match text.strip_suffix('%').unwrap_or(text).parse::<u8>() {
        Ok(p) if (1..=100).contains(&p) => Ok(Some(p)),
        _ => Err(ConfigError::Invalid {
            name,
            why: format!("{text:?} is not a percentage from 1% to 100%, or \"off\""),
        }),
    }
}

/// The Redis TLS files apply only to `rediss://` URLs and an engine that uses Redis, and a client
/// certificate needs its key (and the key its certificate).
fn check_redis_tls(
    tls: &RedisTls,
    urls: &[String],
    engine: Option<&str>,
) -> Result<(), ConfigError> {
    let invalid = |name, why: &str| {
        Err(ConfigError::Invalid {
            name,
            why: why.into(),
        })
    };
    if !tls.is_set() {
        return Ok(());
    }
    if engine.map(str::trim) == Some("postgres") {
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
    pub token_file: Option<std::path::PathBuf>,
    /// The filter's JSON configuration (`None`: the filter's defaults).
    pub policy: Option<std::path::PathBuf>,
    listen_text: Option<String>,
}

impl AdminSettings {
    fn from_env(env: &dyn Fn(&str) -> Option<String>) -> AdminSettings {
        AdminSettings {
            listen_text: env("IDEMGATE_STORE_ADMIN_LISTEN"),
            token_file: env("IDEMGATE_STORE_ADMIN_TOKEN_FILE").map(Into::into),
            policy: env("IDEMGATE_STORE_POLICY").map(Into::into),
            listen: None,
        }
    }

    /// Takes `flag` if it is one of ours.
    fn flag(
        &mut self,
        flag: &str,
        value: &mut dyn FnMut(&'static str) -> Result<String, ConfigError>,
    ) -> Result<bool, ConfigError> {
        match flag {
            "--admin-listen" => self.listen_text = Some(value("--admin-listen")?),
            "--admin-token-file" => self.token_file = Some(value("--admin-token-file")?.into()),
            "--policy" => self.policy = Some(value("--policy")?.into()),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// An admin port needs its token, and a token file without a port is a mistake.
    fn validated(mut self) -> Result<AdminSettings, ConfigError> {
        if let Some(text) = self.listen_text.take() {
            self.listen = Some(text.parse().map_err(|_| ConfigError::Invalid {
                name: "--admin-listen",
                why: format!("{text:?} is not an address such as 127.0.0.1:8788"),
            })?);
        }
        match (&self.listen, &self.token_file) {
            (Some(_), None) => Err(ConfigError::Invalid {
                name: "--admin-token-file",
                why: "the admin port needs a bearer token file; it never starts without one".into(),
            }),
            (None, Some(_)) => Err(ConfigError::Invalid {
                name: "--admin-token-file",
                why: "only applies with --admin-listen".into(),
            }),
            _ => Ok(self),
        }
    }
}

fn split_urls(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

fn flag_value(name: &'static str, text: &str) -> Result<bool, ConfigError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" | "" => Ok(false),
        _ => Err(ConfigError::Invalid {
            name,
            why: format!("{text:?} is not true or false"),
        }),
    }
}

/// Durations in the core's own syntax (`250ms`, `2s`), as the filter configuration writes them.
fn duration(
    name: &'static str,
    text: Option<String>,
    default: &str,
) -> Result<Duration, ConfigError> {
    let text = text.unwrap_or_else(|| default.into());
    match text.parse::<Span>() {
        Ok(span) if span.as_millis() > 0 => Ok(Duration::from_millis(span.as_millis())),
        Ok(_) => Err(ConfigError::Invalid {
            name,
            why: "must be longer than zero".into(),
        }),
        Err(e) => Err(ConfigError::Invalid {
            name,
            why: format!("{text:?}: {e}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `args` with the plaintext opt-out first, unless they (or `env`) speak of TLS.
    fn run(args: &[&str], env: &[(&str, &str)]) -> Result<Command, ConfigError> {
        let tls = args
            .iter()
            .any(|a| a.starts_with("--tls-") || a.starts_with("--client-ca"))
            || env.iter().any(|(k, _)| {
                k.starts_with("IDEMGATE_STORE_TLS") || k.starts_with("IDEMGATE_STORE_PLAINTEXT")
            });
        let mut with = vec!["--plaintext-unauthenticated"];
        if tls {
            with.clear();
        }
        with.extend(args);
        run_raw(&with, env)
    }

    fn run_raw(args: &[&str], env: &[(&str, &str)]) -> Result<Command, ConfigError> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parse(args.iter().map(|s| s.to_string()), &move |name| {
            env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    }

    fn config(args: &[&str], env: &[(&str, &str)]) -> Config {
        match run(args, env) {
            Ok(Command::Run(config)) => config,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_claim_memory_limit_is_a_percentage_or_off() {
        assert_eq!(config(&[], &[]).claim_memory_limit, Some(90));
        let c = config(&["--claim-memory-limit", "75%"], &[]);
        assert_eq!(c.claim_memory_limit, Some(75));
        let c = config(&[], &[("IDEMGATE_STORE_CLAIM_MEMORY_LIMIT", "off")]);
        assert_eq!(c.claim_memory_limit, None);
        for bad in ["0%", "101", "most", "-5%"] {
            let e = run(&["--claim-memory-limit", bad], &[]).unwrap_err();
            assert!(e.to_string().contains("--claim-memory-limit"), "{e}");
        }
    }

    #[test]
    fn defaults() {
        let c = config(&[], &[]);
        assert_eq!(c.listen.to_string(), "127.0.0.1:8787");
        assert_eq!(c.redis, vec!["redis://127.0.0.1:6379".to_string()]);
        assert!(!c.cluster);
        assert_eq!(c.op_timeout, Duration::from_millis(250));
        assert_eq!(c.key_prefix, "idemgate:");
        assert_eq!(c.sweep_every, Duration::from_secs(30));
        let c = config(&["--sweep-every", "250ms"], &[]);
        assert_eq!(c.sweep_every, Duration::from_millis(250));
        let c = config(&[], &[("IDEMGATE_STORE_SWEEP_EVERY", "1m")]);
        assert_eq!(c.sweep_every, Duration::from_secs(60));
    }

    #[test]
    fn flags_win_over_env() {
        let c = config(
            &["--listen=127.0.0.1:9", "--op-timeout", "1s"],
            &[
                ("IDEMGATE_STORE_LISTEN", "127.0.0.1:8"),
                ("IDEMGATE_STORE_OP_TIMEOUT", "5s"),
                ("IDEMGATE_STORE_KEY_PREFIX", "x:"),
            ],
        );
        assert_eq!(c.listen.to_string(), "127.0.0.1:9");
        assert_eq!(c.op_timeout, Duration::from_secs(1));
        assert_eq!(c.key_prefix, "x:");
    }

    #[test]
    fn workers_default_to_one_per_core_and_refuse_nonsense() {
        assert_eq!(config(&[], &[]).workers, None);
        let one = std::num::NonZeroUsize::new(1);
        assert_eq!(config(&["--workers", "1"], &[]).workers, one);
        let c = config(&["--workers=1"], &[("IDEMGATE_STORE_WORKERS", "4")]);
        assert_eq!(c.workers, one);
        let c = config(&[], &[("IDEMGATE_STORE_WORKERS", "4")]);
        assert_eq!(c.workers.map(|n| n.get()), Some(4));
        for bad in ["0", "-1", "two", "", "1025"] {
            assert!(
                matches!(
                    run(&["--workers", bad], &[]),
                    Err(ConfigError::Invalid {
                        name: "--workers",
                        ..
                    })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn cluster_seeds() {
        let c = config(
            &[
                "--cluster",
                "--redis",
                "redis://a:1,redis://b:2",
                "--redis",
                "redis://c:3",
            ],
            &[],
        );
        assert!(c.cluster);
        assert_eq!(c.redis.len(), 3);
        let c = config(
            &[],
            &[
                ("IDEMGATE_STORE_CLUSTER", "true"),
                ("IDEMGATE_STORE_REDIS", "redis://a:1"),
            ],
        );
        assert!(c.cluster);
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        assert_eq!(
            run(&["--nope"], &[]),
            Err(ConfigError::UnknownFlag("--nope".into()))
        );
        assert_eq!(
            run(&["--listen"], &[]),
            Err(ConfigError::MissingValue("--listen"))
        );
        for args in [
            &["--listen", "nowhere"][..],
            &["--op-timeout", "soon"],
            &["--op-timeout", "0ms"],
            &["--redis", "http://x"],
            &["--redis", "redis://a,redis://b"],
            &["--cluster"],
            &["--max-body", "-1"],
            &["--sweep-every", "0s"],
        ] {
            assert!(
                matches!(run(args, &[]), Err(ConfigError::Invalid { .. })),
                "{args:?}"
            );
        }
        assert_eq!(run(&["--help"], &[]), Ok(Command::Help));
    }

    #[test]
    fn redis_tls() {
        assert_eq!(config(&[], &[]).redis_tls, RedisTls::default());
        let c = config(
            &["--redis", "rediss://app:pw@h:6380", "--redis-ca", "ca.pem"],
            &[
                ("IDEMGATE_STORE_REDIS_CERT", "c.pem"),
                ("IDEMGATE_STORE_REDIS_KEY", "k.pem"),
            ],
        );
        assert_eq!(
            c.redis_tls,
            RedisTls {
                ca: Some("ca.pem".into()),
                cert: Some("c.pem".into()),
                key: Some("k.pem".into()),
            }
        );
        for args in [
            &["--redis-ca", "ca.pem"][..],
            &["--redis", "rediss://h", "--redis-cert", "c.pem"],
            &["--redis", "rediss://h", "--redis-key", "k.pem"],
        ] {
            assert!(
                matches!(run(args, &[]), Err(ConfigError::Invalid { .. })),
                "{args:?}"
            );
        }
        let e = run(&["--redis", "http://u:hunter2@h"], &[]).unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    #[test]
    fn the_admin_port_is_off_by_default_and_needs_its_token() {
        assert_eq!(*config(&[], &[]).admin, AdminSettings::default());
        let c = config(
            &["--admin-listen", "127.0.0.1:9", "--admin-token-file=/t"],
            &[("IDEMGATE_STORE_POLICY", "/p.json")],
        );
        assert_eq!(c.admin.listen.map(|a| a.port()), Some(9));
        assert_eq!(c.admin.token_file, Some("/t".into()));
        assert_eq!(c.admin.policy, Some("/p.json".into()));
        for (args, env) in [
            (&["--admin-listen", "127.0.0.1:9"][..], &[][..]),
            (&["--admin-token-file", "/t"], &[]),
            (&[], &[("IDEMGATE_STORE_ADMIN_LISTEN", "127.0.0.1:9")]),
            (
                &["--admin-listen", "nowhere", "--admin-token-file", "/t"],
                &[],
            ),
        ] {
            assert!(
                matches!(run(args, env), Err(ConfigError::Invalid { .. })),
                "{args:?} {env:?}"
            );
        }
    }

    #[test]
    fn engines() {
        assert_eq!(config(&[], &[]).engine, EngineKind::Redis);
        let url = "postgres://idemgate@127.0.0.1:5432/idemgate";
        let c = config(&["--engine", "postgres", "--postgres", url], &[]);
        assert_eq!(
            (c.engine, c.postgres.as_deref()),
            (EngineKind::Postgres, Some(url))
        );
        let c = config(
            &[],
            &[
                ("IDEMGATE_STORE_ENGINE", "redis+postgres"),
                ("IDEMGATE_STORE_POSTGRES", url),
            ],
        );
        assert_eq!(c.engine, EngineKind::RedisPostgres);
        for args in [
            &["--engine", "postgres"][..],
            &["--engine", "mysql"],
            &["--postgres", url],
            &["--engine", "postgres", "--postgres", "mysql://x"],
        ] {
            assert!(
                matches!(run(args, &[]), Err(ConfigError::Invalid { .. })),
                "{args:?}"
            );
        }
        // A password in a bad URL is never echoed.
        let e = run(&["--engine=postgres", "--postgres=pg://u:hunter2@h/d"], &[]).unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    #[test]
    fn mutual_tls_or_an_explicit_plaintext_opt_out() {
        let tls = [
            "--tls-cert",
            "s.pem",
            "--tls-key",
            "s.key",
            "--client-ca",
            "ca.pem",
        ];
        assert_eq!(
            config(&tls, &[]).transport,
            Transport::MutualTls {
                cert: "s.pem".into(),
                key: "s.key".into(),
                client_ca: "ca.pem".into(),
            }
        );
        let c = config(
            &[],
            &[
                ("IDEMGATE_STORE_TLS_CERT", "a"),
                ("IDEMGATE_STORE_TLS_KEY", "b"),
                ("IDEMGATE_STORE_CLIENT_CA", "c"),
            ],
        );
        assert!(matches!(c.transport, Transport::MutualTls { .. }));
        assert_eq!(
            config(&["--plaintext-unauthenticated"], &[]).transport,
            Transport::PlaintextUnauthenticated
        );
        let c = run(&[], &[("IDEMGATE_STORE_PLAINTEXT_UNAUTHENTICATED", "1")]);
        assert!(matches!(
            c,
            Ok(Command::Run(Config {
                transport: Transport::PlaintextUnauthenticated,
                ..
            }))
        ));
        // Nothing said: no service at all, and the message says how to get one.
        let e = run_raw(&[], &[]).unwrap_err();
        assert!(e.to_string().contains("--plaintext-unauthenticated"), "{e}");
        let e = run(&["--tls-cert", "s.pem", "--client-ca", "ca.pem"], &[]).unwrap_err();
        assert!(e.to_string().contains("missing --tls-key"), "{e}");
        let mut both = tls.to_vec();
        both.push("--plaintext-unauthenticated");
        assert!(matches!(run(&both, &[]), Err(ConfigError::Invalid { .. })));
    }

    #[test]
    fn log_format_and_level() {
        let c = config(&[], &[]);
        assert_eq!(
            c.log,
            LogSettings {
                format: LogFormat::Text,
                filter: "info".into()
            }
        );
        let c = config(&["--log-format", "json", "--log-level", "WARN"], &[]);
        assert_eq!(
            (c.log.format, c.log.filter.as_str()),
            (LogFormat::Json, "warn")
        );
        let c = config(&[], &[("RUST_LOG", "idemgate_store=debug")]);
        assert_eq!(c.log.filter, "idemgate_store=debug");
        let c = config(&["--log-level=error"], &[("RUST_LOG", "debug")]);
        assert_eq!(c.log.filter, "error");
        for args in [&["--log-format", "xml"][..], &["--log-level", "loud"]] {
            assert!(
                matches!(run(args, &[]), Err(ConfigError::Invalid { .. })),
                "{args:?}"
            );
        }
    }
}
