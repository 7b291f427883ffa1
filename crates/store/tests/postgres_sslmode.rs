//! The PostgreSQL TLS settings the service does not implement are refused at start, however they
//! are written: the service reads `sslmode` itself (TLS that verifies the server, or none), and a
//! mode that reached the driver unseen was silently turned into plaintext. Against a real
//! PostgreSQL with TLS on; run with `make test-store`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use support::postgres as pg;

/// The service process, killed by PID when dropped.
struct Started(Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What became of a start on `url`.
enum Start {
    /// It exited: its code and stderr.
    Refused(Option<i32>, String),
    /// It serves: how many of its PostgreSQL connections are without TLS.
    Serving { plaintext: u32 },
}

/// Starts the service on `url` and waits (bounded by its `--connect-timeout`) until it either
/// serves or exits.
fn start(postgres: &pg::Postgres, url: &str) -> Start {
    let log = tempfile::NamedTempFile::new().expect("log file");
    let child = Command::new(support::service_binary())
        .args([
            "--listen",
            "127.0.0.1:0",
            "--engine",
            "postgres",
            "--postgres",
        ])
        .arg(url)
        .args(["--plaintext-unauthenticated", "--connect-timeout", "3s"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log.reopen().expect("log file"))
        .spawn()
        .expect("the service runs");
    let mut started = Started(child);
    let mut line = String::new();
    // Returns at the first line, or at the end of the output when it exits.
    let _ = BufReader::new(started.0.stdout.take().expect("stdout")).read_line(&mut line);
    if line.contains("listening") {
        let plaintext = postgres
            .psql(
                "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
                 WHERE NOT s.ssl AND a.application_name = 'idemgate-store'",
            )
            .parse()
            .unwrap();
        return Start::Serving { plaintext };
    }
    let status = started.0.wait().expect("it exits");
    let stderr = std::fs::read_to_string(log.path()).unwrap_or_default();
    Start::Refused(status.code(), stderr)
}

#[test]
#[ignore = "needs PostgreSQL and openssl: make test-store"]
fn an_sslmode_the_service_does_not_implement_is_refused_in_every_spelling() {
    let (postgres, _certs) = pg::start_tls();
    let (user, port, db) = (pg::USER, postgres.port, pg::DATABASE);
    let base = format!("postgres://{user}@127.0.0.1:{port}/{db}");
    let cases = [
        // The parameter's name percent-encoded: the driver decodes it, the service did not.
        ("an encoded name", format!("{base}?ssl%6Dode=require")),
        ("an encoded name", format!("{base}?%73slmode=prefer")),
        // A `?` in the password: the service took it for the start of the query.
        (
            "a `?` in the password",
            format!("postgres://{user}:pass?word@127.0.0.1:{port}/{db}?sslmode=require"),
        ),
        // The key/value form.
        (
            "the key/value form",
            format!("host=127.0.0.1 port={port} user={user} dbname={db} sslmode=require"),
        ),
    ];
    for (what, url) in &cases {
        match start(&postgres, url) {
            Start::Refused(code, stderr) => {
                assert!(code.is_some_and(|c| c != 0), "{what}: {code:?} {stderr}");
                assert!(stderr.contains("--postgres"), "{what}: {stderr}");
                assert!(!stderr.contains("pass?word"), "{what}: {stderr}");
            }
            Start::Serving { plaintext } => panic!(
                "{what}: {url} asks for TLS; the service started with {plaintext} connection(s) without it"
            ),
        }
    }
    // What the service implements starts: without TLS when asked for none, in plaintext (the
    // same observation as above, so the refusals are not a failure to observe).
    match start(&postgres, &format!("{base}?sslmode=disable")) {
        Start::Serving { plaintext } => assert!(plaintext >= 1, "{plaintext}"),
        Start::Refused(code, stderr) => panic!("sslmode=disable must start: {code:?} {stderr}"),
    }
}
