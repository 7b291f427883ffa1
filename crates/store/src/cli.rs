//! The operator commands: `records get`, `records evict` and `stats`. They connect to
//! the engine with the same options as the service ([`crate::config`]) and answer what the admin
//! port answers ([`crate::records`]).

use crate::config::{self, Config, ConfigError};
use crate::engine::{Engine, DEFAULT_SCAN_LIMIT, DEFAULT_TOP};
use crate::records::{self, EvictionView, Query, RecordView, SurveyView};
use serde::Serialize;
use std::fmt;

/// The usage text of the operator commands.
pub const USAGE: &str = "\
usage: idemgate-store records get   --key KEY --route PATH [--scope VALUE] [options] [--body]
       idemgate-store records evict --key KEY --route PATH [--scope VALUE] [options]
       idemgate-store stats [--top N] [--scan-limit N] [options]

The storage key is derived as the filter derives it, from the client's request:
  --key KEY              the Idempotency-Key (or callback delivery id) as the client sent it
  --route PATH           the request path as the client sent it (the policy's route rules
                         normalise it; a callback route is its own scope)
  --scope VALUE          the scope value as the client sent it: its Authorization header value,
                         its address without the port (--scope-source peer), ...
  --scope-source LABEL   header:NAME, property:PATH or peer    default: the policy's first source
  --method METHOD        default POST
  --policy FILE          the filter's JSON configuration       default: the filter's defaults
  --body                 get: include a kept body (base64)
  --top N                stats: scopes listed                   default 10
  --scan-limit N         stats on Redis: keys surveyed at most  default 1000000

`get` prints the record as JSON (state in_flight, completed or token_used; status, headers, body
size, expiry). `evict` deletes it: the next request with that key runs again at the upstream, as
if it were the first. `stats` prints records, bytes and the scopes holding the most records (by
scope tag, a hash of the scope). Engine options as for the service (--engine, --redis,
--postgres, --key-prefix, --op-timeout, ...; see idemgate-store --help).
";

/// An operator command, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operator {
    Get {
        query: Query,
        body: bool,
        config: Config,
    },
    Evict {
        query: Query,
        config: Config,
    },
    Stats {
        top: usize,
        scan_limit: u64,
        config: Config,
    },
    Help,
}

/// Why a command line is not an operator command.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CliError {
    UnknownCommand(String),
    Missing(&'static str),
    Invalid { name: &'static str, why: String },
    Config(ConfigError),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::UnknownCommand(word) => write!(
                f,
                "unknown command {word:?}: records get, records evict or stats (see records --help)"
            ),
            CliError::Missing(name) => write!(f, "{name} is required (see records --help)"),
            CliError::Invalid { name, why } => write!(f, "{name}: {why}"),
            CliError::Config(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CliError {}

impl From<ConfigError> for CliError {
    fn from(e: ConfigError) -> Self {
        CliError::Config(e)
    }
}

/// `None` when `args` (without the program name) are the service's own options; otherwise the
/// operator command they name.
pub fn parse(
    args: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<Result<Operator, CliError>> {
    let first = args.first()?;
    if first.starts_with('-') {
        return None;
    }
    Some(parse_command(args, env))
}

fn parse_command(
    args: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Operator, CliError> {
    let (verb, rest) = match args {
        [group, verb, rest @ ..] if group == "records" && !verb.starts_with('-') => {
            (format!("records {verb}"), rest)
        }
        [group, rest @ ..] if group == "records" => ("records".to_string(), rest),
        [stats, rest @ ..] if stats == "stats" => ("stats".to_string(), rest),
        [other, ..] => return Err(CliError::UnknownCommand(other.clone())),
        [] => return Err(CliError::UnknownCommand(String::new())),
    };
    let mut own = Own::default();
    let mut engine_args = Vec::new();
    let mut rest = rest.iter().cloned();
    while let Some(arg) = rest.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag.to_string(), Some(value.into())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &'static str| -> Result<String, CliError> {
            inline
                .clone()
                .or_else(|| rest.next())
                .ok_or(CliError::Config(ConfigError::MissingValue(name)))
        };
        match flag.as_str() {
            "--help" | "-h" => return Ok(Operator::Help),
            "--key" => own.key = Some(value("--key")?),
            "--route" => own.route = Some(value("--route")?),
            "--scope" => own.scope = Some(value("--scope")?),
            "--scope-source" => own.scope_source = Some(value("--scope-source")?),
            "--method" => own.method = Some(value("--method")?),
            "--body" => own.body = true,
            "--top" => own.top = Some(count("--top", &value("--top")?)?),
            "--scan-limit" => {
                own.scan_limit = Some(count("--scan-limit", &value("--scan-limit")?)?)
            }
            _ => {
                engine_args.push(arg.clone());
                if inline.is_none() && takes_value(&flag) {
                    engine_args.extend(rest.next());
                }
            }
        }
    }
    // An operator command serves nothing, so the service's listener needs no TLS settings here;
    // any that are given (flags or the service's environment) are still checked.
    let transport = [
        ("--tls-cert", "IDEMGATE_STORE_TLS_CERT"),
        ("--tls-key", "IDEMGATE_STORE_TLS_KEY"),
        ("--client-ca", "IDEMGATE_STORE_CLIENT_CA"),
        (
            "--plaintext-unauthenticated",
            "IDEMGATE_STORE_PLAINTEXT_UNAUTHENTICATED",
        ),
    ];
    let transport_given = transport.iter().any(|(flag, var)| {
        env(var).is_some()
            || engine_args
                .iter()
                .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
    });
    if !transport_given {
        engine_args.push("--plaintext-unauthenticated".into());
    }
    let config = match config::parse(engine_args, env)? {
        config::Command::Run(config) => config,
        config::Command::Help => return Ok(Operator::Help),
    };
    match verb.as_str() {
        "records get" => Ok(Operator::Get {
            body: own.body,
            query: own.query()?,
            config,
        }),
        "records evict" => Ok(Operator::Evict {
            query: own.query()?,
            config,
        }),
        "stats" => Ok(Operator::Stats {
            top: own.top.map_or(DEFAULT_TOP, |n| n as usize),
            scan_limit: own.scan_limit.unwrap_or(DEFAULT_SCAN_LIMIT),
            config,
        }),
        _ => Err(CliError::UnknownCommand(verb)),
    }
}

#[derive(Default)]
struct Own {
    key: Option<String>,
    route: Option<String>,
    scope: Option<String>,
    scope_source: Option<String>,
    method: Option<String>,
    body: bool,
    top: Option<u64>,
    scan_limit: Option<u64>,
}

impl Own {
    fn query(self) -> Result<Query, CliError> {
        Ok(Query {
            key: self.key.ok_or(CliError::Missing("--key"))?,
            route: self.route.ok_or(CliError::Missing("--route"))?,
            scope: self.scope,
            scope_source: self.scope_source,
            method: self
                .method
                .unwrap_or_else(|| "POST".into())
                .to_ascii_uppercase(),
        })
    }
}

/// The service's options that take a value (the flag form without `=`), so their value is passed
/// on with them; `--cluster` alone is a switch.
fn takes_value(flag: &str) -> bool {
    flag.starts_with("--") && !matches!(flag, "--cluster" | "--plaintext-unauthenticated")
}

fn count(name: &'static str, text: &str) -> Result<u64, CliError> {
    match text.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(CliError::Invalid {
            name,
            why: format!("{text:?} is not a positive number"),
        }),
    }
}

/// Runs an operator command: its output on stdout; `Err` is the message for a non-zero exit.
pub async fn run(operator: Operator) -> Result<(), String> {
    if let Operator::Get { config, .. }
    | Operator::Evict { config, .. }
    | Operator::Stats { config, .. } = &operator
    {
        crate::log::init(&config.log)?;
    }
    match operator {
        Operator::Help => print_usage(),
        Operator::Get {
            query,
            body,
            config,
        } => {
            let key = query
                .storage_key(&records::load_policy(config.admin.policy.as_deref())?)
                .map_err(|e| e.to_string())?;
            let engine = Engine::connect(&config).await?;
            let (now, value) = engine.read(&key, true).await.map_err(|e| e.to_string())?;
            match value {
                Some(bytes) => emit(&RecordView::of(&key, &bytes, now, body)),
                None => emit(&RecordView::absent(&key)),
            }
        }
        Operator::Evict { query, config } => {
            let key = query
                .storage_key(&records::load_policy(config.admin.policy.as_deref())?)
                .map_err(|e| e.to_string())?;
            let engine = Engine::connect(&config).await?;
            let evicted = engine.evict(&key).await.map_err(|e| e.to_string())?;
            records::log_eviction(&key, evicted, "cli");
            emit(&EvictionView::of(&key, evicted))
        }
        Operator::Stats {
            top,
            scan_limit,
            config,
        } => {
            let engine = Engine::connect(&config).await?;
            let survey = engine
                .survey(top, scan_limit)
                .await
                .map_err(|e| e.to_string())?;
            emit(&SurveyView::of(&survey))
        }
    }
}

/// The usage text on stdout.
fn print_usage() -> Result<(), String> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", USAGE.trim_end())
        .and_then(|()| stdout.flush())
        .map_err(|e| format!("cannot write the output: {e}"))
}

/// A command's answer as one line of JSON on stdout. Not `println!`: a reader that closed the
/// pipe (`… | head -c 100`) must get an error exit, not a panic.
fn emit(answer: &impl Serialize) -> Result<(), String> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer(&mut stdout, answer)
        .map_err(std::io::Error::from)
        .and_then(|()| writeln!(stdout))
        .and_then(|()| stdout.flush())
        .map_err(|e| format!("cannot write the output: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Option<Result<Operator, CliError>> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        parse(&args, &|_| None)
    }

    #[test]
    fn service_options_are_not_commands() {
        assert_eq!(run(&[]), None);
        assert_eq!(run(&["--listen", "127.0.0.1:0"]), None);
    }

    #[test]
    fn commands_take_their_own_and_the_engines_options() {
        let Some(Ok(Operator::Get {
            query,
            body,
            config,
        })) = run(&[
            "records",
            "get",
            "--key",
            "k1",
            "--redis",
            "redis://127.0.0.1:7000",
            "--route=/orders",
            "--scope",
            "Bearer a",
            "--body",
            "--cluster",
            "--method",
            "patch",
        ])
        else {
            panic!("not a get")
        };
        assert_eq!(
            (
                query.key.as_str(),
                query.route.as_str(),
                query.method.as_str()
            ),
            ("k1", "/orders", "PATCH")
        );
        assert_eq!(query.scope.as_deref(), Some("Bearer a"));
        assert!(body);
        assert!(config.cluster);
        assert_eq!(config.redis, vec!["redis://127.0.0.1:7000".to_string()]);
        assert!(matches!(
            run(&["stats", "--top", "3"]),
            Some(Ok(Operator::Stats { top: 3, .. }))
        ));
    }

    #[test]
    fn bad_commands_are_typed_errors() {
        assert_eq!(
            run(&["records", "get", "--route", "/o"]),
            Some(Err(CliError::Missing("--key")))
        );
        assert!(matches!(
            run(&["records", "frob"]),
            Some(Err(CliError::UnknownCommand(_)))
        ));
        assert!(matches!(
            run(&["serve"]),
            Some(Err(CliError::UnknownCommand(_)))
        ));
        assert!(matches!(
            run(&["stats", "--top", "0"]),
            Some(Err(CliError::Invalid { .. }))
        ));
        assert!(matches!(
            run(&["stats", "--nope"]),
            Some(Err(CliError::Config(ConfigError::UnknownFlag(_))))
        ));
    }
}
