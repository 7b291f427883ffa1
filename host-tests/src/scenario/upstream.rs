//! Delivering the upstream's scripted behaviour to a stream on a worker: an answer (in chunks,
//! possibly cut off) or a failure Envoy reports with its own reply. Shared by [`super::Roundtrip`]
//! and the interleaving explorer.

use super::response::{Failure, Response};
use crate::envoy::{HeaderMap, Worker};
use crate::error::Result;

/// What the upstream does with a forwarded request.
#[derive(Debug, Clone)]
pub enum Upstream {
    Respond(Response),
    Fail(Failure),
    /// The client disconnects while the upstream is working.
    ClientGone,
}

/// The upstream answers (after `response.delay`, in chunks, possibly cut off).
pub fn respond(worker: &mut Worker, context: u32, response: &Response) -> Result<()> {
    worker.world().clock().advance(response.delay);
    let chunks = response.chunks();
    let truncated = response.cut_after.is_some();
    let headers_only = chunks.is_empty() && !truncated;
    worker.response_headers(
        context,
        response.status,
        response.header_map(),
        headers_only,
        "via_upstream",
    )?;
    for (i, chunk) in chunks.iter().enumerate() {
        let last = i + 1 == chunks.len() && !truncated;
        worker.response_body(context, chunk, last)?;
    }
    if truncated {
        worker.reset(
            context,
            "upstream_reset_after_response_started{remote_reset}",
        )?;
    }
    Ok(())
}

/// The upstream fails; Envoy answers the client itself.
pub fn fail(worker: &mut Worker, context: u32, failure: Failure) -> Result<()> {
    let (status, details, body) = failure.envoy_reply();
    worker.set_attempt_count(context, failure.attempts())?;
    let mut headers = HeaderMap::new();
    headers.add("content-type", b"text/plain");
    headers.add("content-length", body.len().to_string().as_bytes());
    worker.response_headers(context, status, headers, false, details)?;
    worker.response_body(context, body.as_bytes(), true)
}

/// Carries out `upstream` on the stream.
pub fn deliver(worker: &mut Worker, context: u32, upstream: &Upstream) -> Result<()> {
    match upstream {
        Upstream::Respond(response) => respond(worker, context, response),
        Upstream::Fail(failure) => fail(worker, context, *failure),
        Upstream::ClientGone => worker.reset(context, "downstream_remote_disconnect"),
    }
}
