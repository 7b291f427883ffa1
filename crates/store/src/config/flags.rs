//! The service's flags as clap reads them: each with its environment variable (a flag wins over
//! its variable), its default and its line of `--help` — which names the variable, never its
//! value (a URL may carry a password). The operator commands take the same flags (they are
//! global: accepted after `records get` or `stats` too).
//!
//! clap checks what one value alone can be — an address, a name from a list, a thread count, a
//! switch; [`super::Config::from_flags`] checks the rest as typed errors: durations, sizes, URLs
//! (never echoed: they may carry a password) and flags that only make sense together.

use super::logging::LOG_LEVELS;
use super::{EngineKind, LogFormat, MAX_WORKERS};
use clap::builder::{PossibleValuesParser, TypedValueParser as _};
use clap::{ArgAction, Args};
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;

const TLS: &str = "Mutual TLS (required unless --plaintext-unauthenticated)";
const LOGS: &str = "Logs";
const ADMIN: &str = "Operator controls";

/// Every setting of the service, as given (flag, else variable, else default).
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct ServiceFlags {
    /// Address to serve on (HTTPS with mutual TLS: HTTP/2 and HTTP/1.1 by ALPN; port 0: any, the
    /// first stdout line names it)
    #[arg(
        long,
        global = true,
        value_name = "ADDR",
        env = "IDEMGATE_STORE_LISTEN",
        hide_env_values = true,
        default_value = "127.0.0.1:8787"
    )]
    pub listen: SocketAddr,

    /// Where the records are: Redis or Redis Cluster, PostgreSQL, or Redis in front of
    /// PostgreSQL (Redis answers what it can, PostgreSQL decides)
    #[arg(
        long,
        global = true,
        value_name = "NAME",
        env = "IDEMGATE_STORE_ENGINE",
        hide_env_values = true,
        value_enum,
        default_value_t = EngineKind::Redis
    )]
    pub engine: EngineKind,

    /// PostgreSQL URL, required by the postgres engines
    /// (postgres://user:pass@host:port/db?sslmode=verify-full&sslrootcert=ca.pem)
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "IDEMGATE_STORE_POSTGRES",
        hide_env_values = true
    )]
    pub postgres: Option<String>,

    /// Redis URL (default redis://127.0.0.1:6379); repeat or comma-separate the seed nodes of a
    /// cluster. rediss:// is TLS; an ACL user goes in the URL: rediss://user:password@host:port
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "IDEMGATE_STORE_REDIS",
        hide_env_values = true
    )]
    pub redis: Vec<String>,

    /// The URLs are Redis Cluster seed nodes
    #[arg(
        long,
        global = true,
        value_name = "BOOL",
        env = "IDEMGATE_STORE_CLUSTER",
        hide_env_values = true,
        action = ArgAction::Set,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        default_value = "false",
        value_parser = switch
    )]
    pub cluster: bool,

    /// PEM CA to verify Redis's certificate, rediss:// only (default: the system's roots)
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "IDEMGATE_STORE_REDIS_CA",
        hide_env_values = true
    )]
    pub redis_ca: Option<PathBuf>,

    /// PEM client certificate for Redis (tls-auth-clients yes; with --redis-key)
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "IDEMGATE_STORE_REDIS_CERT",
        hide_env_values = true
    )]
    pub redis_cert: Option<PathBuf>,

    /// PEM private key of --redis-cert
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "IDEMGATE_STORE_REDIS_KEY",
        hide_env_values = true
    )]
    pub redis_key: Option<PathBuf>,

    /// One operation end to end, engine calls and retries included; then a typed timeout answer
    /// (keep it below the filter's callout timeout)
    #[arg(
        long,
        global = true,
        value_name = "DUR",
        env = "IDEMGATE_STORE_OP_TIMEOUT",
        hide_env_values = true,
        default_value = "250ms"
    )]
    pub op_timeout: String,

    /// Redis engines: refuse new claims and token uses (store full) once Redis uses P of
    /// maxmemory, so the rest is room for the finishes of the claims in flight (off: never)
    #[arg(
        long,
        global = true,
        value_name = "P",
        env = "IDEMGATE_STORE_CLAIM_MEMORY_LIMIT",
        hide_env_values = true,
        allow_hyphen_values = true,
        default_value = "90%"
    )]
    pub claim_memory_limit: String,

    /// Connecting to the engine
    #[arg(
        long,
        global = true,
        value_name = "DUR",
        env = "IDEMGATE_STORE_CONNECT_TIMEOUT",
        hide_env_values = true,
        default_value = "2s"
    )]
    pub connect_timeout: String,

    /// Postgres engines: time between rounds of deleting expired rows
    #[arg(
        long,
        global = true,
        value_name = "DUR",
        env = "IDEMGATE_STORE_SWEEP_EVERY",
        hide_env_values = true,
        default_value = "30s"
    )]
    pub sweep_every: String,

    /// SIGTERM/SIGINT: time for in-flight operations before exit
    #[arg(
        long,
        global = true,
        value_name = "DUR",
        env = "IDEMGATE_STORE_SHUTDOWN_GRACE",
        hide_env_values = true,
        default_value = "10s"
    )]
    pub shutdown_grace: String,

    /// Prefix of every Redis key
    #[arg(
        long,
        global = true,
        value_name = "TEXT",
        env = "IDEMGATE_STORE_KEY_PREFIX",
        hide_env_values = true,
        default_value = "idemgate:"
    )]
    pub key_prefix: String,

    /// Largest request body accepted
    #[arg(
        long,
        global = true,
        value_name = "BYTES",
        env = "IDEMGATE_STORE_MAX_BODY",
        hide_env_values = true,
        allow_negative_numbers = true,
        default_value = "16777216"
    )]
    pub max_body: String,

    /// Threads serving operations, 1 to 1024 (default: one per core); 1 on a machine whose cores
    /// it shares (with Envoy, Redis)
    #[arg(
        long,
        global = true,
        value_name = "N",
        env = "IDEMGATE_STORE_WORKERS",
        hide_env_values = true,
        allow_negative_numbers = true,
        value_parser = thread_count
    )]
    pub workers: Option<NonZeroUsize>,

    /// The service's certificate chain (PEM)
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "IDEMGATE_STORE_TLS_CERT",
        hide_env_values = true,
        help_heading = TLS
    )]
    pub tls_cert: Option<PathBuf>,

    /// Its private key (PEM)
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "IDEMGATE_STORE_TLS_KEY",
        hide_env_values = true,
        help_heading = TLS
    )]
    pub tls_key: Option<PathBuf>,

    /// CA(s) whose client certificates may connect (PEM); others are refused
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "IDEMGATE_STORE_CLIENT_CA",
        hide_env_values = true,
        help_heading = TLS
    )]
    pub client_ca: Option<PathBuf>,

    /// Serve HTTP/1.1 and h2c without TLS: anyone who reaches the port can claim, complete or
    /// release any record
    #[arg(
        long,
        global = true,
        value_name = "BOOL",
        env = "IDEMGATE_STORE_PLAINTEXT_UNAUTHENTICATED",
        hide_env_values = true,
        action = ArgAction::Set,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        default_value = "false",
        value_parser = switch,
        help_heading = TLS
    )]
    pub plaintext_unauthenticated: bool,

    /// Log lines on stderr: text, or one JSON object per line
    #[arg(
        long,
        global = true,
        value_name = "FORMAT",
        env = "IDEMGATE_STORE_LOG_FORMAT",
        hide_env_values = true,
        value_enum,
        default_value_t = LogFormat::Text,
        help_heading = LOGS
    )]
    pub log_format: LogFormat,

    /// Least severe level logged (default: RUST_LOG's filter if set, else info)
    #[arg(
        long,
        global = true,
        value_name = "LEVEL",
        env = "IDEMGATE_STORE_LOG_LEVEL",
        hide_env_values = true,
        ignore_case = true,
        value_parser = PossibleValuesParser::new(LOG_LEVELS).map(|level| level.to_ascii_lowercase()),
        help_heading = LOGS
    )]
    pub log_level: Option<String>,

    /// Serve the operator endpoints (records, stats) on this address, never on --listen; needs
    /// --admin-token-file (default: off)
    #[arg(
        long,
        global = true,
        value_name = "ADDR",
        env = "IDEMGATE_STORE_ADMIN_LISTEN",
        hide_env_values = true,
        help_heading = ADMIN
    )]
    pub admin_listen: Option<SocketAddr>,

    /// The admin port's bearer token (at least 16 characters)
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "IDEMGATE_STORE_ADMIN_TOKEN_FILE",
        hide_env_values = true,
        help_heading = ADMIN
    )]
    pub admin_token_file: Option<PathBuf>,

    /// The filter's JSON configuration, to derive storage keys as the filter does (default: the
    /// filter's defaults)
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "IDEMGATE_STORE_POLICY",
        hide_env_values = true,
        help_heading = ADMIN
    )]
    pub policy: Option<PathBuf>,
}

impl ServiceFlags {
    /// An operator command serves nothing, so it needs no transport settings of its own: without
    /// any, it runs as if plaintext had been chosen. Any that are given are still checked.
    pub fn for_operator(mut self) -> ServiceFlags {
        let tls = self.tls_cert.is_some() || self.tls_key.is_some() || self.client_ca.is_some();
        if !tls {
            self.plaintext_unauthenticated = true;
        }
        self
    }
}

/// A switch's value, from `--cluster=VALUE` or its variable: 1/true/yes/on or 0/false/no/off (any
/// case); empty is off, as an unset variable.
fn switch(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" | "" => Ok(false),
        _ => Err("not true or false".into()),
    }
}

/// A runtime's worker thread count: far above any useful count is a typo, refused instead of
/// starting thousands of threads.
fn thread_count(text: &str) -> Result<NonZeroUsize, String> {
    match text.trim().parse::<NonZeroUsize>() {
        Ok(n) if n.get() <= MAX_WORKERS => Ok(n),
        _ => Err(format!("not a thread count from 1 to {MAX_WORKERS}")),
    }
}

/// `command` with its variables read from `env` instead of the process's environment (clap reads
/// a flag's variable when the command is built): each variable set becomes its flag's fallback
/// value, below the command line as a variable is, and the process's own are ignored.
#[cfg(test)]
pub(crate) fn with_env(command: clap::Command, env: &[(&str, &'static str)]) -> clap::Command {
    command.mut_args(|arg| {
        let Some(name) = arg
            .get_env()
            .and_then(|name| name.to_str())
            .map(String::from)
        else {
            return arg;
        };
        let arg = arg.env(None::<&'static str>);
        match env.iter().find(|(variable, _)| *variable == name) {
            Some((_, value)) => arg.default_value(*value),
            None => arg,
        }
    })
}
