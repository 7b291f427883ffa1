//! The command line as the built binary reads it, environment included: `--help` names each
//! flag's variable and default (never a variable's value), a variable is a flag's fallback (the
//! flag wins), and a bad value — from a flag or a variable — exits 2 with a message naming the
//! flag. Needs nothing but the binary: no engine is reached (the one named is not there).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::process::{Command, Output};

/// The binary with `args` and only the variables in `env` (none of the caller's).
fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(support::service_binary())
        .env_clear()
        .envs(env.iter().copied())
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Settings enough to get past the command line to the engine, which is not there.
const UNREACHABLE: [&str; 5] = [
    "--redis",
    "redis://127.0.0.1:1",
    "--connect-timeout",
    "200ms",
    "--plaintext-unauthenticated",
];

#[test]
fn help_names_each_flag_with_its_variable_and_default() {
    let secret = "postgres://idemgate:hunter2@db/idemgate";
    let out = run(&["--help"], &[("IDEMGATE_STORE_POSTGRES", secret)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "listen",
        "engine",
        "postgres",
        "redis",
        "cluster",
        "redis-ca",
        "redis-cert",
        "redis-key",
        "op-timeout",
        "claim-memory-limit",
        "connect-timeout",
        "sweep-every",
        "shutdown-grace",
        "key-prefix",
        "max-body",
        "workers",
        "tls-cert",
        "tls-key",
        "client-ca",
        "plaintext-unauthenticated",
        "log-format",
        "log-level",
        "admin-listen",
        "admin-token-file",
        "policy",
    ] {
        let variable = format!("IDEMGATE_STORE_{}", flag.to_uppercase().replace('-', "_"));
        assert!(help.contains(&format!("--{flag}")), "--{flag}: {help}");
        assert!(
            help.contains(&format!("[env: {variable}]")),
            "{variable}: {help}"
        );
    }
    for default in [
        "127.0.0.1:8787",
        "250ms",
        "90%",
        "2s",
        "30s",
        "10s",
        "16777216",
    ] {
        assert!(
            help.contains(&format!("[default: {default}]")),
            "{default}: {help}"
        );
    }
    assert!(help.contains("records"), "{help}");
    assert!(help.contains("stats"), "{help}");
    assert!(!help.contains("hunter2"), "{help}");
}

#[test]
fn a_variable_is_the_flags_fallback_and_the_flag_wins() {
    // The variable alone: its bad value is refused, naming the flag.
    let out = run(&UNREACHABLE, &[("IDEMGATE_STORE_WORKERS", "0")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--workers"), "{}", stderr(&out));
    let out = run(&UNREACHABLE, &[("IDEMGATE_STORE_OP_TIMEOUT", "soon")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--op-timeout"), "{}", stderr(&out));
    // The flag given: the variable is not read, and the service goes on to its engine (exit 1:
    // not there).
    let mut args = UNREACHABLE.to_vec();
    args.extend(["--workers", "1", "--op-timeout", "1s"]);
    let env = [
        ("IDEMGATE_STORE_WORKERS", "0"),
        ("IDEMGATE_STORE_OP_TIMEOUT", "soon"),
    ];
    let out = run(&args, &env);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(!stderr(&out).contains("--workers"), "{}", stderr(&out));
}

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    for (args, names) in [
        (&["--nope"][..], "--nope"),
        (&["--listen"], "--listen"),
        (&["--listen", "nowhere"], "--listen"),
        (&["--engine", "mysql"], "--engine"),
        (&["--max-body", "-1"], "--max-body"),
        (&["--claim-memory-limit", "-5%"], "--claim-memory-limit"),
        (&["--cluster=maybe"], "--cluster"),
    ] {
        let mut with = UNREACHABLE.to_vec();
        with.extend(args);
        let out = run(&with, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(names), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
