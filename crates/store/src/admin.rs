//! The admin port: the operator commands over HTTP, on an address of their own and
//! behind a bearer token of their own — never on the store port, whose clients are Envoys.
//!
//! ```text
//! GET    /v1/records?key=K&route=PATH[&scope=V][&scope_source=S][&method=M][&body=1]
//! DELETE /v1/records?key=K&route=PATH[&scope=V][&scope_source=S][&method=M]
//! GET    /v1/stats[?top=N][&scan_limit=N]
//! ```
//!
//! Every request must carry `Authorization: Bearer <token>` (the token file's content); the
//! token is compared in constant time (as SHA-256 digests, so not even its length leaks). The
//! port is off unless `--admin-listen` is given, and it refuses to start without a token file.

use crate::config::Config;
use crate::engine::{Engine, DEFAULT_SCAN_LIMIT, DEFAULT_TOP};
use crate::records::{self, load_policy, EvictionView, Query, RecordView, SurveyView};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use idemgate_core::hash::sha256;
use idemgate_core::policy::Policy;
use serde::Serialize;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

/// Shortest token accepted: a guessable token would make the port an open door.
pub const MIN_TOKEN_LEN: usize = 16;

struct Admin {
    engine: Engine,
    policy: Policy,
    token_digest: [u8; 32],
}

/// The admin port, checked and ready to serve: its token read, the policy loaded, its address
/// bound. Prepared before the engine is connected, so a bad token file fails fast.
pub struct Prepared {
    listener: TcpListener,
    policy: Policy,
    token_digest: [u8; 32],
}

/// Reads the token, loads the policy and binds the admin port, if one is configured.
pub async fn prepare(config: &Config) -> Result<Option<Prepared>, String> {
    let (Some(listen), Some(token_file)) = (config.admin.listen, &config.admin.token_file) else {
        return Ok(None);
    };
    let token = std::fs::read_to_string(token_file).map_err(|e| {
        format!(
            "--admin-token-file: cannot read {}: {e}",
            token_file.display()
        )
    })?;
    let token = token.trim();
    if token.len() < MIN_TOKEN_LEN {
        return Err(format!(
            "--admin-token-file: the token in {} is shorter than {MIN_TOKEN_LEN} characters",
            token_file.display()
        ));
    }
    let policy = load_policy(config.admin.policy.as_deref())?;
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|e| format!("cannot listen on {listen} (--admin-listen): {e}"))?;
    Ok(Some(Prepared {
        listener,
        policy,
        token_digest: sha256(token.as_bytes()),
    }))
}

impl Prepared {
    /// Serves the admin endpoints in the background; the address they listen on.
    pub fn start(self, engine: Engine) -> Result<SocketAddr, String> {
        let addr = self
            .listener
            .local_addr()
            .map_err(|e| format!("cannot read the admin address: {e}"))?;
        let admin = Arc::new(Admin {
            engine,
            policy: self.policy,
            token_digest: self.token_digest,
        });
        tokio::spawn(serve(self.listener, admin));
        Ok(addr)
    }
}

async fn serve(listener: TcpListener, admin: Arc<Admin>) {
    let builder = auto::Builder::new(TokioExecutor::new());
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("admin port: accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let admin = Arc::clone(&admin);
        let service = hyper::service::service_fn(move |req| {
            let admin = Arc::clone(&admin);
            async move { Ok::<_, Infallible>(handle(&admin, req).await) }
        });
        let conn = builder
            .serve_connection(TokioIo::new(stream), service)
            .into_owned();
        tokio::spawn(async move {
            let _ = conn.await;
        });
    }
}

async fn handle(admin: &Admin, req: Request<Incoming>) -> Response<Full<Bytes>> {
    if !authorized(admin, &req) {
        let mut out = problem(
            StatusCode::UNAUTHORIZED,
            "a valid admin bearer token is needed",
        );
        out.headers_mut()
            .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return out;
    }
    let params = match Params::parse(req.uri().query().unwrap_or_default()) {
        Ok(params) => params,
        Err(why) => return problem(StatusCode::BAD_REQUEST, &why),
    };
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/v1/records") => record(admin, &params, false).await,
        (&Method::DELETE, "/v1/records") => record(admin, &params, true).await,
        (&Method::GET, "/v1/stats") => stats(admin, &params).await,
        (_, "/v1/records" | "/v1/stats") => {
            problem(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
        }
        _ => problem(StatusCode::NOT_FOUND, "not found"),
    }
}

/// Whether the request carries the admin token (compared as digests, in constant time).
fn authorized(admin: &Admin, req: &Request<Incoming>) -> bool {
    let Some(value) = req.headers().get(AUTHORIZATION) else {
        return false;
    };
    let Some((scheme, token)) = value.to_str().unwrap_or_default().split_once(' ') else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return false;
    }
    let presented = sha256(token.trim().as_bytes());
    let diff = presented
        .iter()
        .zip(admin.token_digest.iter())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    diff == 0
}

async fn record(admin: &Admin, params: &Params, evict: bool) -> Response<Full<Bytes>> {
    let query = match params.query() {
        Ok(query) => query,
        Err(why) => return problem(StatusCode::BAD_REQUEST, &why),
    };
    let key = match query.storage_key(&admin.policy) {
        Ok(key) => key,
        Err(e) => return problem(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    if evict {
        return match admin.engine.evict(&key).await {
            Ok(evicted) => {
                records::log_eviction(&key, evicted, "admin");
                json(StatusCode::OK, &EvictionView::of(&key, evicted))
            }
            Err(e) => problem(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
        };
    }
    match admin.engine.read(&key, true).await {
        Ok((now, Some(bytes))) => json(
            StatusCode::OK,
            &RecordView::of(&key, &bytes, now, params.flag("body")),
        ),
        Ok((_, None)) => json(StatusCode::NOT_FOUND, &RecordView::absent(&key)),
        Err(e) => problem(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
}

async fn stats(admin: &Admin, params: &Params) -> Response<Full<Bytes>> {
    let number = |name: &str, default: u64| -> Result<u64, String> {
        match params.get(name) {
            None => Ok(default),
            Some(text) => match text.parse::<u64>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!("{name}: {text:?} is not a positive number")),
            },
        }
    };
    let (top, scan_limit) = match (
        number("top", DEFAULT_TOP as u64),
        number("scan_limit", DEFAULT_SCAN_LIMIT),
    ) {
        (Ok(top), Ok(limit)) => (top, limit),
        (Err(why), _) | (_, Err(why)) => return problem(StatusCode::BAD_REQUEST, &why),
    };
    match admin
        .engine
        .survey(usize::try_from(top).unwrap_or(usize::MAX), scan_limit)
        .await
    {
        Ok(survey) => json(StatusCode::OK, &SurveyView::of(&survey)),
        Err(e) => problem(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
}

/// A URL query's parameters, percent-decoded (`+` is a space), each at most once.
struct Params(Vec<(String, String)>);

const KNOWN: [&str; 8] = [
    "key",
    "route",
    "scope",
    "scope_source",
    "method",
    "body",
    "top",
    "scan_limit",
];

impl Params {
    fn parse(query: &str) -> Result<Params, String> {
        let mut out: Vec<(String, String)> = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let name = percent_decode(name)?;
            if !KNOWN.contains(&name.as_str()) {
                return Err(format!(
                    "unknown parameter {}",
                    serde_json::Value::from(name)
                ));
            }
            if out.iter().any(|(n, _)| *n == name) {
                return Err(format!("parameter {name} given twice"));
            }
            out.push((name, percent_decode(value)?));
        }
        Ok(Params(out))
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn flag(&self, name: &str) -> bool {
        matches!(self.get(name), Some("1" | "true" | "yes"))
    }

    fn query(&self) -> Result<Query, String> {
        let required = |name: &str| {
            self.get(name)
                .map(String::from)
                .ok_or_else(|| format!("the {name} parameter is required"))
        };
        Ok(Query {
            key: required("key")?,
            route: required("route")?,
            scope: self.get("scope").map(String::from),
            scope_source: self.get("scope_source").map(String::from),
            method: self.get("method").unwrap_or("POST").to_ascii_uppercase(),
        })
    }
}

fn percent_decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = text
                    .get(i + 1..i + 3)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| "a bad %-escape in the query".to_string())?;
                out.push(hex);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| "the query is not UTF-8".to_string())
}

fn json(status: StatusCode, body: &impl Serialize) -> Response<Full<Bytes>> {
    encoded(status, body, "application/json")
}

/// An RFC 9457 problem: the status, its reason, and what was wrong.
#[derive(Serialize)]
struct Problem<'a> {
    status: u16,
    title: &'a str,
    detail: &'a str,
}

fn problem(status: StatusCode, detail: &str) -> Response<Full<Bytes>> {
    let problem = Problem {
        status: status.as_u16(),
        title: status.canonical_reason().unwrap_or("error"),
        detail,
    };
    encoded(status, &problem, "application/problem+json")
}

/// `body` as one line of JSON. The views are plain structs of strings and numbers, which always
/// serialize; were one ever to fail, the answer is a 500 that says so, not an empty body.
fn encoded(
    status: StatusCode,
    body: &impl Serialize,
    content_type: &'static str,
) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match serde_json::to_vec(body) {
        Ok(mut bytes) => {
            bytes.push(b'\n');
            (status, content_type, bytes)
        }
        Err(e) => {
            tracing::error!(error = %e, "admin port: an answer could not be encoded");
            let text = b"the answer could not be encoded\n".to_vec();
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain; charset=utf-8",
                text,
            )
        }
    };
    let mut out = Response::new(Full::new(Bytes::from(body)));
    *out.status_mut() = status;
    out.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parameters() {
        let p = Params::parse("key=k%201&route=/orders&scope=Bearer+alice&body=1").unwrap();
        let q = p.query().unwrap();
        assert_eq!(
            (q.key.as_str(), q.scope.as_deref(), q.method.as_str()),
            ("k 1", Some("Bearer alice"), "POST")
        );
        assert!(p.flag("body"));
        assert!(Params::parse("nope=1").is_err());
        assert!(Params::parse("key=a&key=b").is_err());
        assert!(Params::parse("key=%zz").is_err());
        assert!(Params::parse("route=/o").unwrap().query().is_err());
    }
}
