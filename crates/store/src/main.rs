//! `idemgate-store`: a stateless service that carries the idemgate core's remote store protocol
//! to an engine (Redis or Redis Cluster; PostgreSQL; Redis in front of PostgreSQL), so that a
//! fleet of Envoys shares one record store. It decides nothing of its own: every decision is the
//! core's ([`idemgate_core::remote`]); this binary moves bytes between HTTP and the engine. See
//! the crate README.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

mod carry;
mod config;
mod engine;
mod log;
mod metrics;
mod server;
mod tls;

use config::{Command, Config, Transport};
use std::io::Write as _;
use std::process::ExitCode;

fn main() -> ExitCode {
    let command = match config::parse(std::env::args().skip(1), &|name| std::env::var(name).ok()) {
        Ok(command) => command,
        Err(e) => {
            log::early_error(&e.to_string());
            return ExitCode::from(2);
        }
    };
    let config = match command {
        Command::Help => {
            print!("{}", config::USAGE);
            return ExitCode::SUCCESS;
        }
        Command::Run(config) => config,
    };
    if let Err(e) = log::init(&config.log) {
        log::early_error(&e);
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
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
    println!("idemgate-store: listening on {scheme}://{addr}");
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
