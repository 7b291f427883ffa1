//! HTTP: HTTP/2 and HTTP/1.1 on one port — inside mutual TLS (see [`crate::tls`]), or as
//! plaintext HTTP/1.1 and h2c behind `--plaintext-unauthenticated`. `POST /v1/op` carries one
//! operation per round trip, or a batch of finishes (each carried as if sent alone, at once, and
//! answered one by one); `/healthz`, `/readyz` and `/metrics` serve orchestration and
//! monitoring (over the same listener: a probe needs a client certificate too).
//!
//! Shutdown (SIGTERM, SIGINT): stop accepting, tell every connection to finish (HTTP/2 GOAWAY,
//! HTTP/1.1 close after the current response), wait for in-flight operations up to the grace
//! period, then exit.

use crate::carry::carry;
use crate::config::Config;
use crate::engine::Engine;
use crate::metrics::Metrics;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use idemgate_core::store::remote::{self, Failure};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// Longest a client may take to finish its TLS handshake before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

struct State {
    engine: Engine,
    metrics: Metrics,
    config: Config,
}

/// Serves until a shutdown signal, then drains. Returns when every connection has finished or
/// the grace period is over.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    engine: Engine,
    config: Config,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let state = Arc::new(State {
        engine,
        metrics: Metrics::default(),
        config,
    });
    let builder = auto::Builder::new(TokioExecutor::new());
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let state = Arc::clone(&state);
                let builder = builder.clone();
                // Taken before the task runs: a shutdown during the handshake still reaches it.
                let watcher = graceful.watcher();
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        None => serve_connection(&builder, stream, state, watcher).await,
                        Some(acceptor) => {
                            let handshake = tokio::time::timeout(
                                HANDSHAKE_TIMEOUT,
                                acceptor.accept(stream),
                            );
                            match handshake.await {
                                Ok(Ok(stream)) => {
                                    serve_connection(&builder, stream, state, watcher).await;
                                }
                                Ok(Err(e)) => refused(&state, peer, &e.to_string()),
                                Err(_) => refused(&state, peer, "handshake timed out"),
                            }
                        }
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    tracing::info!("shutting down, finishing in-flight operations");
    tokio::select! {
        () = graceful.shutdown() => tracing::info!("all connections finished"),
        () = tokio::time::sleep(state.config.shutdown_grace) => {
            tracing::warn!("grace period over, exiting with connections open");
        }
    }
}

/// A connection that did not complete mutual TLS (no certificate, one from another CA, no TLS at
/// all): it is closed without reading a request. Info, not warn: a port scanner is not an error.
fn refused(state: &State, peer: SocketAddr, why: &str) {
    state.metrics.tls_refused();
    tracing::info!(%peer, why, "TLS connection refused");
}

async fn serve_connection<S>(
    builder: &auto::Builder<TokioExecutor>,
    stream: S,
    state: Arc<State>,
    watcher: hyper_util::server::graceful::Watcher,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        let state = Arc::clone(&state);
        async move { Ok::<_, Infallible>(handle(&state, req).await) }
    });
    let conn = builder
        .serve_connection(TokioIo::new(stream), service)
        .into_owned();
    let _ = watcher.watch(conn).await;
}

async fn handle(state: &Arc<State>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    match (req.method(), req.uri().path()) {
        (&Method::POST, path) if path == remote::client::PATH => operation(state, req).await,
        (&Method::GET, "/healthz") => text(StatusCode::OK, "ok\n"),
        (&Method::GET, "/readyz") => {
            let ping = tokio::time::timeout(state.config.op_timeout, state.engine.ping()).await;
            match ping {
                Ok(Ok(())) => text(StatusCode::OK, "ready\n"),
                Ok(Err(e)) => text(StatusCode::SERVICE_UNAVAILABLE, &format!("{e}\n")),
                Err(_) => text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the store engine did not answer in time\n",
                ),
            }
        }
        (&Method::GET, "/metrics") => {
            let mut body = state.metrics.render();
            body.push_str(&state.engine.render_metrics());
            let mut response = text(StatusCode::OK, &body);
            response.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4"),
            );
            response
        }
        (_, path) if [remote::client::PATH, "/healthz", "/readyz", "/metrics"].contains(&path) => {
            text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n")
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

async fn operation(state: &Arc<State>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let body = match Limited::new(req.into_body(), state.config.max_body)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return answer(remote::Response::Failed(Failure::BadRequest)),
    };
    let request = match remote::Incoming::decode(&body) {
        Ok(remote::Incoming::One(request)) => *request,
        Ok(remote::Incoming::Finishes(finishes)) => {
            state.metrics.finish_batch();
            return answer(remote::Response::Finishes(carry_all(state, finishes).await));
        }
        Ok(_) => return answer(remote::Response::Failed(Failure::BadRequest)),
        Err(e) => {
            tracing::warn!(error = %e, "bad request");
            state
                .metrics
                .operation("invalid", e.code(), std::time::Duration::ZERO);
            return answer(remote::Response::Failed(Failure::BadRequest));
        }
    };
    let response = carry(
        &state.engine,
        &state.metrics,
        request,
        state.config.op_timeout,
    )
    .await;
    answer(response)
}

/// Carries each finish of a batch as if it came alone, all at once (on Redis, the engine
/// connection pipelines their calls), and answers in the batch's order. A finish whose task
/// ends without an answer (never expected) answers unavailable: its filter sends it again.
async fn carry_all(state: &Arc<State>, finishes: Vec<remote::Request>) -> Vec<remote::Response> {
    let mut tasks = tokio::task::JoinSet::new();
    let count = finishes.len();
    for (index, finish) in finishes.into_iter().enumerate() {
        let state = Arc::clone(state);
        tasks.spawn(async move {
            let response = carry(
                &state.engine,
                &state.metrics,
                finish,
                state.config.op_timeout,
            )
            .await;
            (index, response)
        });
    }
    let mut answers = vec![remote::Response::Failed(Failure::Unavailable); count];
    while let Some(joined) = tasks.join_next().await {
        if let Ok((index, response)) = joined {
            if let Some(slot) = answers.get_mut(index) {
                *slot = response;
            }
        }
    }
    answers
}

/// Every answer to `/v1/op` has the binary body, with the status the core gives it
/// ([`remote::Response::http_status`]: an outcome, a request the service could not read, or a
/// failure to reach a decision).
fn answer(response: remote::Response) -> Response<Full<Bytes>> {
    let status = match StatusCode::from_u16(response.http_status()) {
        Ok(status) => status,
        Err(e) => {
            tracing::error!(error = %e, "the core gave a status HTTP cannot carry");
            StatusCode::INTERNAL_SERVER_ERROR
        }
    };
    let mut out = Response::new(Full::new(Bytes::from(response.encode())));
    *out.status_mut() = status;
    out.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(remote::CONTENT_TYPE));
    out
}

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut out = Response::new(Full::new(Bytes::from(body.to_owned())));
    *out.status_mut() = status;
    out.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    out
}
