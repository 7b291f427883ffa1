use super::*;
use clap::error::ErrorKind;
use clap::{CommandFactory as _, FromArgMatches as _};

/// The service's flags alone, as the binary's command line carries them.
#[derive(Debug, clap::Parser)]
#[command(args_override_self = true)]
struct Line {
    #[command(flatten)]
    flags: ServiceFlags,
}

/// Why a command line gives no configuration.
#[derive(Debug)]
enum Refused {
    /// clap's: an unknown flag, a missing value, a value of the wrong shape.
    Usage(clap::Error),
    /// The service's own checks.
    Config(ConfigError),
}

/// `args` with the plaintext opt-out first, unless they (or `env`) speak of TLS.
fn run(args: &[&str], env: &[(&str, &'static str)]) -> Result<Config, Refused> {
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

/// `args` read with `env` as the environment (`RUST_LOG` included).
fn run_raw(args: &[&str], env: &[(&str, &'static str)]) -> Result<Config, Refused> {
    let command = with_env(Line::command(), env);
    let argv = std::iter::once("idemgate-store").chain(args.iter().copied());
    let matches = command.try_get_matches_from(argv).map_err(Refused::Usage)?;
    let line = Line::from_arg_matches(&matches).map_err(Refused::Usage)?;
    let rust_log = env
        .iter()
        .find(|(k, _)| *k == "RUST_LOG")
        .map(|(_, v)| v.to_string());
    Config::from_flags(line.flags, rust_log).map_err(Refused::Config)
}

fn config(args: &[&str], env: &[(&str, &'static str)]) -> Config {
    match run(args, env) {
        Ok(config) => config,
        other => panic!("{other:?}"),
    }
}

/// The service's own refusal of `args`.
fn refused(args: &[&str], env: &[(&str, &'static str)]) -> ConfigError {
    match run(args, env) {
        Err(Refused::Config(e)) => e,
        other => panic!("{args:?} {env:?}: {other:?}"),
    }
}

/// clap's refusal of `args`, which names `flag`.
fn usage_error(args: &[&str], flag: &str) -> ErrorKind {
    match run(args, &[]) {
        Err(Refused::Usage(e)) => {
            let message = e.to_string();
            assert!(message.contains(flag), "{args:?}: {message}");
            e.kind()
        }
        other => panic!("{args:?}: {other:?}"),
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
        let e = refused(&["--claim-memory-limit", bad], &[]);
        assert!(e.to_string().contains("--claim-memory-limit"), "{e}");
    }
}

#[test]
fn defaults() {
    let c = config(&[], &[]);
    assert_eq!(c.listen.to_string(), "127.0.0.1:8787");
    assert_eq!(c.engine, EngineKind::Redis);
    assert_eq!(c.redis, vec!["redis://127.0.0.1:6379".to_string()]);
    assert!(!c.cluster);
    assert_eq!(c.op_timeout, Duration::from_millis(250));
    assert_eq!(c.connect_timeout, Duration::from_secs(2));
    assert_eq!(c.shutdown_grace, Duration::from_secs(10));
    assert_eq!(c.key_prefix, "idemgate:");
    assert_eq!(c.max_body, 16 * 1024 * 1024);
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
    // The last of a flag given twice wins.
    let c = config(&["--op-timeout", "1s", "--op-timeout=2s"], &[]);
    assert_eq!(c.op_timeout, Duration::from_secs(2));
    // A repeated flag replaces the variable's URLs, it does not add to them.
    let c = config(
        &["--redis", "redis://a:1", "--cluster"],
        &[("IDEMGATE_STORE_REDIS", "redis://b:2,redis://c:3")],
    );
    assert_eq!(c.redis, vec!["redis://a:1".to_string()]);
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
        assert_eq!(
            usage_error(&["--workers", bad], "--workers"),
            ErrorKind::ValueValidation,
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
    // The switch takes a value only after `=`; off is off however it is spelled.
    for off in ["--cluster=false", "--cluster=0", "--cluster=OFF"] {
        assert!(!config(&[off], &[]).cluster, "{off}");
    }
    assert!(!config(&[], &[("IDEMGATE_STORE_CLUSTER", "")]).cluster);
    assert_eq!(
        usage_error(&["--cluster=maybe"], "--cluster"),
        ErrorKind::ValueValidation
    );
}

#[test]
fn bad_input_is_refused_naming_the_flag() {
    assert_eq!(
        usage_error(&["--nope"], "--nope"),
        ErrorKind::UnknownArgument
    );
    assert_eq!(
        usage_error(&["--listen"], "--listen"),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        usage_error(&["--listen", "nowhere"], "--listen"),
        ErrorKind::ValueValidation
    );
    for (args, flag) in [
        (&["--op-timeout", "soon"][..], "--op-timeout"),
        (&["--op-timeout", "0ms"], "--op-timeout"),
        (&["--redis", "http://x"], "--redis"),
        (&["--redis", "redis://a,redis://b"], "--redis"),
        // Cluster mode names its seeds: no default Redis.
        (&["--cluster"], "--redis"),
        (&["--max-body", "-1"], "--max-body"),
        (&["--max-body", "0"], "--max-body"),
        (&["--sweep-every", "0s"], "--sweep-every"),
    ] {
        let ConfigError::Invalid { name, .. } = refused(args, &[]);
        assert_eq!(name, flag, "{args:?}");
    }
    assert_eq!(usage_error(&["--help"], "--listen"), ErrorKind::DisplayHelp);
}

#[test]
fn help_lists_each_flag_with_its_variable_and_default() {
    let help = Line::command().render_help().to_string();
    for (flag, variable) in [
        ("--listen <ADDR>", "IDEMGATE_STORE_LISTEN"),
        ("--engine <NAME>", "IDEMGATE_STORE_ENGINE"),
        ("--redis <URL>", "IDEMGATE_STORE_REDIS"),
        ("--cluster[=<BOOL>]", "IDEMGATE_STORE_CLUSTER"),
        ("--op-timeout <DUR>", "IDEMGATE_STORE_OP_TIMEOUT"),
        ("--workers <N>", "IDEMGATE_STORE_WORKERS"),
        ("--tls-cert <FILE>", "IDEMGATE_STORE_TLS_CERT"),
        ("--log-level <LEVEL>", "IDEMGATE_STORE_LOG_LEVEL"),
        ("--admin-listen <ADDR>", "IDEMGATE_STORE_ADMIN_LISTEN"),
        ("--policy <FILE>", "IDEMGATE_STORE_POLICY"),
    ] {
        assert!(help.contains(flag), "{flag}: {help}");
        assert!(
            help.contains(&format!("[env: {variable}]")),
            "{variable}: {help}"
        );
    }
    // Never a variable's value: a URL may carry a password.
    assert!(!help.contains("[env: IDEMGATE_STORE_POSTGRES="), "{help}");
    for default in [
        "[default: 127.0.0.1:8787]",
        "[default: redis]",
        "[default: 250ms]",
        "[default: 90%]",
        "[default: idemgate:]",
        "[default: 16777216]",
        "[default: text]",
    ] {
        assert!(help.contains(default), "{default}: {help}");
    }
    assert!(help.contains("[possible values: redis, postgres, redis+postgres]"));
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
        &[
            "--engine",
            "postgres",
            "--postgres",
            "postgres://h/d",
            "--redis-ca",
            "ca.pem",
        ],
    ] {
        refused(args, &[]);
    }
    let e = refused(&["--redis", "http://u:hunter2@h"], &[]);
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
    ] {
        let ConfigError::Invalid { name, .. } = refused(args, env);
        assert_eq!(name, "--admin-token-file", "{args:?} {env:?}");
    }
    assert_eq!(
        usage_error(
            &["--admin-listen", "nowhere", "--admin-token-file", "/t"],
            "--admin-listen"
        ),
        ErrorKind::ValueValidation
    );
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
        &["--postgres", url],
        &["--engine", "postgres", "--postgres", "mysql://x"],
    ] {
        let ConfigError::Invalid { name, .. } = refused(args, &[]);
        assert_eq!(name, "--postgres", "{args:?}");
    }
    assert_eq!(
        usage_error(&["--engine", "mysql"], "--engine"),
        ErrorKind::InvalidValue
    );
    // A password in a bad URL is never echoed.
    let e = refused(&["--engine=postgres", "--postgres=pg://u:hunter2@h/d"], &[]);
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
    let c = config(&[], &[("IDEMGATE_STORE_PLAINTEXT_UNAUTHENTICATED", "1")]);
    assert_eq!(c.transport, Transport::PlaintextUnauthenticated);
    // Nothing said: no service at all, and the message says how to get one.
    let e = match run_raw(&[], &[]) {
        Err(Refused::Config(e)) => e,
        other => panic!("{other:?}"),
    };
    assert!(e.to_string().contains("--plaintext-unauthenticated"), "{e}");
    let e = refused(&["--tls-cert", "s.pem", "--client-ca", "ca.pem"], &[]);
    assert!(e.to_string().contains("missing --tls-key"), "{e}");
    let mut both = tls.to_vec();
    both.push("--plaintext-unauthenticated");
    let ConfigError::Invalid { name, .. } = refused(&both, &[]);
    assert_eq!(name, "--plaintext-unauthenticated");
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
    let ConfigError::Invalid { name, .. } = refused(&[], &[("RUST_LOG", "idemgate_store=loud")]);
    assert_eq!(name, "RUST_LOG");
    assert_eq!(
        usage_error(&["--log-format", "xml"], "--log-format"),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        usage_error(&["--log-level", "loud"], "--log-level"),
        ErrorKind::InvalidValue
    );
}
