//! `idemgate-store`: a stateless service that carries the idemgate core's remote store protocol to
//! an engine (Redis or Redis Cluster; PostgreSQL; Redis in front of PostgreSQL), so that a fleet of
//! Envoys shares one record store. It decides nothing of its own: every decision is the core's
//! ([`idemgate_core::store::remote`]); this binary moves bytes between HTTP and the engine. See the
//! crate README.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

mod admin;
mod carry;
mod cli;
mod config;
mod desk;
mod engine;
mod entropy;
mod log;
mod metrics;
mod records;
mod server;
mod tls;

use clap::Parser as _;
use config::{Config, Transport};
use std::io::Write as _;
use std::process::ExitCode;

fn main() -> ExitCode {
    let line = match cli::CommandLine::try_parse_from(std::env::args_os()) {
        Ok(line) => line,
        Err(e) => return usage(&e),
    };
    let rust_log = std::env::var("RUST_LOG").ok();
    if let Some(command) = line.operator {
        return operate(command.into_operator(line.service, rust_log));
    }
    let config = match Config::from_flags(line.service, rust_log) {
        Ok(config) => config,
        Err(e) => {
            log::early_error(&e.to_string());
            return ExitCode::from(2);
        }
    };
    if let Err(e) = log::init(&config.log) {
        log::early_error(&e);
        return ExitCode::from(2);
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(workers) = config.workers {
        builder.worker_threads(workers.get());
    }
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!("cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            tracing::error!("{message}");
            ExitCode::from(1)
        }
    }
}

/// What clap says instead of a command line: `--help` on stdout (exit 0), or a bad command line
/// — an unknown flag, a missing or malformed value — on stderr (exit 2).
fn usage(e: &clap::Error) -> ExitCode {
    // A reader that closed the pipe gets no text; the exit status still says what happened.
    let _ = e.print();
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}

/// An operator command (`records get|evict`, `stats`): 0 when done, 2 for settings that do not
/// go together, 1 when the engine could not answer.
fn operate(operator: Result<cli::Operator, config::ConfigError>) -> ExitCode {
    let operator = match operator {
        Ok(operator) => operator,
        Err(e) => {
            eprintln!("idemgate-store: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("idemgate-store: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(cli::run(operator)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("idemgate-store: {message}");
            ExitCode::from(1)
        }
    }
}

async fn run(config: Config) -> Result<(), String> {
    // Certificates first: a bad file is found before any engine connection is made.
    let tls = match &config.transport {
        Transport::MutualTls {
            cert,
            key,
            client_ca,
        } => Some(tokio_rustls::TlsAcceptor::from(
            tls::server_config(cert, key, client_ca).map_err(|e| e.to_string())?,
        )),
        _ => {
            tracing::warn!(
                "--plaintext-unauthenticated: serving HTTP/1.1 and h2c without TLS; anyone who \
                 reaches this port can claim, complete or release any record"
            );
            None
        }
    };
    let admin_port = admin::prepare(&config).await?;
    let engine = engine::Engine::connect(&config).await?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("cannot read the listening address: {e}"))?;
    // The first line on stdout names the address (tests and scripts pass port 0 and read it);
    // its scheme says whether the port speaks TLS.
    let scheme = if tls.is_some() { "https" } else { "http" };
    // Not println!: a reader may close the pipe after this line (EPIPE must not stop the service).
    let _ = writeln!(
        std::io::stdout(),
        "idemgate-store: listening on {scheme}://{addr}"
    );
    // Operator controls: the admin port, on its own address, when configured.
    if let Some(admin) = admin_port {
        let addr = admin.start(engine.clone())?;
        // Not println!: a reader that took only the first line has closed the pipe (EPIPE).
        let _ = writeln!(std::io::stdout(), "idemgate-store: admin on http://{addr}");
    }
    let _ = std::io::stdout().flush();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("cannot watch SIGTERM: {e}"))?;
    let shutdown = async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    };
    server::serve(listener, tls, engine, config, shutdown).await;
    Ok(())
}
