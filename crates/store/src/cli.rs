//! The command line: the service's flags ([`crate::config::ServiceFlags`]), or an operator
//! command — `records get`, `records evict`, `stats` — with the same flags, which connects to the
//! engine as the service does and answers what the admin port answers ([`crate::records`]).

use crate::config::{Config, ConfigError, ServiceFlags};
use crate::engine::{Engine, DEFAULT_SCAN_LIMIT, DEFAULT_TOP};
use crate::records::{self, EvictionView, Query, RecordView, SurveyView};
use clap::{Args, Parser, Subcommand};
use serde::Serialize;

const AFTER_HELP: &str = "\
Durations: 250ms, 2s, 1m. Endpoints: POST /v1/op, GET /healthz, /readyz, /metrics.
Operator controls: records get|evict and stats take the same engine options as the service (see \
records --help).";

const RECORDS_USAGE: &str = "\
idemgate-store records get   --key <KEY> --route <PATH> [--scope <VALUE>] [OPTIONS] [--body]
       idemgate-store records evict --key <KEY> --route <PATH> [--scope <VALUE>] [OPTIONS]";

const RECORDS_AFTER_HELP: &str = "\
The storage key is derived as the filter derives it, from the client's request (--key, --route, \
--method, --scope, --scope-source) and the filter's configuration (--policy). `get` prints the \
record as JSON (state in_flight, completed or token_used; status, headers, body size, expiry). \
`evict` deletes it: the next request with that key runs again at the upstream, as if it were the \
first. Engine options as for the service (--engine, --redis, --postgres, --key-prefix, \
--op-timeout, ...; see idemgate-store --help).";

/// What the command line asks for: the service (no command), or an operator command.
#[derive(Debug, Parser)]
#[command(
    name = "idemgate-store",
    about = "Carries the idemgate remote store protocol to Redis, Redis Cluster or PostgreSQL",
    after_help = AFTER_HELP,
    disable_help_subcommand = true,
    // A flag given again replaces its value (`--redis` adds a URL): a wrapper may append flags.
    args_override_self = true
)]
pub struct CommandLine {
    #[command(flatten)]
    pub service: ServiceFlags,
    #[command(subcommand)]
    pub operator: Option<OperatorCommand>,
}

/// The operator commands.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum OperatorCommand {
    /// Look up or evict the record a client's request made
    #[command(subcommand, override_usage = RECORDS_USAGE, after_help = RECORDS_AFTER_HELP)]
    Records(RecordsCommand),
    /// Print records, bytes and the scopes holding the most records (by scope tag, a hash of the
    /// scope) as JSON
    Stats(StatsArgs),
}

/// `records get` and `records evict`.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum RecordsCommand {
    /// Print the record as JSON
    Get {
        #[command(flatten)]
        query: QueryArgs,
        /// Include a kept body (base64)
        #[arg(long)]
        body: bool,
    },
    /// Delete the record: the next request with that key runs again at the upstream
    Evict {
        #[command(flatten)]
        query: QueryArgs,
    },
}

/// The client's request, as the client sent it: what names its record.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
#[command(next_help_heading = "The client's request")]
pub struct QueryArgs {
    /// The Idempotency-Key (or callback delivery id) as the client sent it
    #[arg(long, value_name = "KEY")]
    key: String,
    /// The request path as the client sent it (the policy's route rules normalise it; a callback
    /// route is its own scope)
    #[arg(long, value_name = "PATH")]
    route: String,
    /// The scope value as the client sent it: its Authorization header value, its address without
    /// the port (--scope-source peer), ...
    #[arg(long, value_name = "VALUE")]
    scope: Option<String>,
    /// header:NAME, property:PATH or peer (default: the policy's first source)
    #[arg(long, value_name = "LABEL")]
    scope_source: Option<String>,
    /// The request's method
    #[arg(long, value_name = "METHOD", default_value = "POST")]
    method: String,
}

impl QueryArgs {
    fn into_query(self) -> Query {
        Query {
            key: self.key,
            route: self.route,
            scope: self.scope,
            scope_source: self.scope_source,
            method: self.method.to_ascii_uppercase(),
        }
    }
}

/// `stats`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct StatsArgs {
    /// Scopes listed
    #[arg(
        long,
        value_name = "N",
        default_value_t = DEFAULT_TOP as u64,
        value_parser = clap::value_parser!(u64).range(1..),
        allow_negative_numbers = true
    )]
    top: u64,
    /// On Redis: keys surveyed at most
    #[arg(
        long,
        value_name = "N",
        default_value_t = DEFAULT_SCAN_LIMIT,
        value_parser = clap::value_parser!(u64).range(1..),
        allow_negative_numbers = true
    )]
    scan_limit: u64,
}

/// An operator command, with the settings of the engine it runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    pub action: Action,
    pub config: Config,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Get { query: Query, body: bool },
    Evict { query: Query },
    Stats { top: usize, scan_limit: u64 },
}

impl OperatorCommand {
    /// The command, run with the settings `flags` give (`rust_log`: `RUST_LOG`). An operator
    /// command serves nothing, so it needs no transport settings ([`ServiceFlags::for_operator`]).
    pub fn into_operator(
        self,
        flags: ServiceFlags,
        rust_log: Option<String>,
    ) -> Result<Operator, ConfigError> {
        let config = Config::from_flags(flags.for_operator(), rust_log)?;
        let action = match self {
            OperatorCommand::Records(RecordsCommand::Get { query, body }) => Action::Get {
                query: query.into_query(),
                body,
            },
            OperatorCommand::Records(RecordsCommand::Evict { query }) => Action::Evict {
                query: query.into_query(),
            },
            OperatorCommand::Stats(stats) => Action::Stats {
                top: usize::try_from(stats.top).unwrap_or(usize::MAX),
                scan_limit: stats.scan_limit,
            },
        };
        Ok(Operator { action, config })
    }
}

/// Runs an operator command: its output on stdout; `Err` is the message for a non-zero exit.
pub async fn run(operator: Operator) -> Result<(), String> {
    let Operator { action, config } = operator;
    crate::log::init(&config.log)?;
    match action {
        Action::Get { query, body } => {
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
        Action::Evict { query } => {
            let key = query
                .storage_key(&records::load_policy(config.admin.policy.as_deref())?)
                .map_err(|e| e.to_string())?;
            let engine = Engine::connect(&config).await?;
            let evicted = engine.evict(&key).await.map_err(|e| e.to_string())?;
            records::log_eviction(&key, evicted, "cli");
            emit(&EvictionView::of(&key, evicted))
        }
        Action::Stats { top, scan_limit } => {
            let engine = Engine::connect(&config).await?;
            let survey = engine
                .survey(top, scan_limit)
                .await
                .map_err(|e| e.to_string())?;
            emit(&SurveyView::of(&survey))
        }
    }
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
    use clap::error::ErrorKind;
    use clap::{CommandFactory as _, FromArgMatches as _};

    /// `args` as the command line, with no variables set.
    fn parse(args: &[&str]) -> Result<CommandLine, clap::Error> {
        let command = crate::config::with_env(CommandLine::command(), &[]);
        let argv = std::iter::once("idemgate-store").chain(args.iter().copied());
        CommandLine::from_arg_matches(&command.try_get_matches_from(argv)?)
    }

    fn operator(args: &[&str]) -> Operator {
        let line = parse(args).unwrap();
        line.operator
            .expect("an operator command")
            .into_operator(line.service, None)
            .unwrap()
    }

    fn refused(args: &[&str]) -> ErrorKind {
        parse(args).unwrap_err().kind()
    }

    #[test]
    fn service_options_are_not_commands() {
        assert_eq!(parse(&[]).unwrap().operator, None);
        assert_eq!(parse(&["--listen", "127.0.0.1:0"]).unwrap().operator, None);
    }

    #[test]
    fn commands_take_their_own_and_the_engines_options() {
        let Operator {
            action: Action::Get { query, body },
            config,
        } = operator(&[
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
        // The engine's options before the command count as well.
        let Operator { action, config } = operator(&["--key-prefix", "p:", "stats", "--top", "3"]);
        assert_eq!(
            action,
            Action::Stats {
                top: 3,
                scan_limit: DEFAULT_SCAN_LIMIT
            }
        );
        assert_eq!(config.key_prefix, "p:");
        let Operator { action, .. } = operator(&["stats"]);
        assert_eq!(
            action,
            Action::Stats {
                top: DEFAULT_TOP,
                scan_limit: DEFAULT_SCAN_LIMIT
            }
        );
    }

    #[test]
    fn bad_commands_are_refused() {
        assert_eq!(
            refused(&["records", "get", "--route", "/o"]),
            ErrorKind::MissingRequiredArgument
        );
        assert_eq!(refused(&["records", "frob"]), ErrorKind::InvalidSubcommand);
        assert_eq!(refused(&["serve"]), ErrorKind::InvalidSubcommand);
        assert_eq!(
            refused(&["stats", "--top", "0"]),
            ErrorKind::ValueValidation
        );
        assert_eq!(
            refused(&["stats", "--top", "-1"]),
            ErrorKind::ValueValidation
        );
        assert_eq!(refused(&["stats", "--nope"]), ErrorKind::UnknownArgument);
        assert_eq!(
            refused(&["records", "evict", "--key", "k", "--route", "/o", "--body"]),
            ErrorKind::UnknownArgument
        );
        assert_eq!(refused(&["records", "--help"]), ErrorKind::DisplayHelp);
    }

    #[test]
    fn an_operator_command_needs_no_transport_but_checks_what_it_is_given() {
        let Operator { config, .. } = operator(&["stats"]);
        assert_eq!(
            config.transport,
            crate::config::Transport::PlaintextUnauthenticated
        );
        let line = parse(&["stats", "--tls-cert", "s.pem"]).unwrap();
        let e = line
            .operator
            .unwrap()
            .into_operator(line.service, None)
            .unwrap_err();
        assert!(e.to_string().contains("missing --tls-key"), "{e}");
    }
}
