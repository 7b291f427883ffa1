//! The HTTP stream flow around the filter's callbacks on one worker, as Envoy's connection manager
//! drives it: headers, body chunks, the after-callback actions (local reply, resume, reset), the
//! response, the log.
//!
//! `Continue` from a request callback passes the request on (the upstream request starts when the
//! headers pass, or when the whole request has, with a buffer filter after ours — see [`Chain`]);
//! `Pause` buffers the body until a later `Continue` or a `proxy_continue_stream`; a local reply is
//! sent after the callback returns and then runs through the filter's own response callbacks (with
//! `response.code_details` set to its details), as Envoy's filter manager does.

use super::headers::HeaderMap;
use super::stream::{uint_property, ClientAnswer, Forwarded, Phase, StreamState, ATTEMPT_COUNT};
use super::vm::Chain;
use super::worker::{Worker, CONTINUE};
use super::world::UpstreamCall;
use crate::error::{HarnessError, Result};
use std::collections::BTreeMap;

impl Worker {
    /// Creates the HTTP context of a new stream with these stream properties.
    pub fn open(&mut self, properties: BTreeMap<String, Vec<u8>>) -> Result<u32> {
        let context = self.next_context;
        self.next_context += 1;
        self.store
            .data_mut()
            .streams
            .insert(context, StreamState::new(properties));
        let root = self.root_context() as i32;
        let create = self.exports.on_context_create.clone();
        self.call(
            "proxy_on_context_create",
            context,
            &create,
            (context as i32, root),
        )?;
        Ok(context)
    }

    /// The request headers arrive (names are lowercased, as Envoy's codec does).
    pub fn request_headers(
        &mut self,
        context: u32,
        headers: HeaderMap,
        end_of_stream: bool,
    ) -> Result<()> {
        let stream = self.stream_mut(context)?;
        if stream.phase != Phase::Request || stream.request_headers.is_some() {
            return Err(HarnessError::Usage("request headers sent twice".into()));
        }
        let count = headers.pairs().len() as i32;
        stream.request_headers = Some(headers);
        stream.request_ended = end_of_stream;
        let action = match self.exports.on_request_headers.clone() {
            Some(f) => self.call(
                "proxy_on_request_headers",
                context,
                &f,
                (context as i32, count, end_of_stream as i32),
            )?,
            None => CONTINUE,
        };
        self.after_request_callback(context, action)
    }

    /// A request body chunk arrives. Ignored once the stream has left the request phase (after a
    /// local reply Envoy stops calling the filter for the rest of the request).
    pub fn request_body(&mut self, context: u32, chunk: &[u8], end_of_stream: bool) -> Result<()> {
        let stream = self.stream_mut(context)?;
        if stream.phase != Phase::Request || stream.local_reply_sent {
            return Ok(());
        }
        if stream.request_ended {
            return Err(HarnessError::Usage(
                "request body sent after the end of the request".into(),
            ));
        }
        stream.request_body.extend_from_slice(chunk);
        stream.request_ended = end_of_stream;
        let size = stream.request_body.len() as i32;
        let action = match self.exports.on_request_body.clone() {
            Some(f) => self.call(
                "proxy_on_request_body",
                context,
                &f,
                (context as i32, size, end_of_stream as i32),
            )?,
            None => CONTINUE,
        };
        self.after_request_callback(context, action)
    }

    /// The request trailers arrive: they end the request (Envoy ignores them once the stream has
    /// left the request phase, as it does body chunks).
    pub fn request_trailers(&mut self, context: u32, trailers: HeaderMap) -> Result<()> {
        let stream = self.stream_mut(context)?;
        if stream.phase != Phase::Request || stream.local_reply_sent {
            return Ok(());
        }
        if stream.request_ended {
            return Err(HarnessError::Usage(
                "request trailers sent after the end of the request".into(),
            ));
        }
        stream.request_ended = true;
        let count = trailers.pairs().len() as i32;
        let action = match self.exports.on_request_trailers.clone() {
            Some(f) => self.call(
                "proxy_on_request_trailers",
                context,
                &f,
                (context as i32, count),
            )?,
            None => CONTINUE,
        };
        self.after_request_callback(context, action)
    }

    fn after_request_callback(&mut self, context: u32, action: i32) -> Result<()> {
        if self.after_any_callback(context)? {
            return Ok(());
        }
        let stream = self.stream_mut(context)?;
        if stream.phase != Phase::Request {
            return Ok(());
        }
        if action == CONTINUE || std::mem::take(&mut stream.continue_request) {
            stream.request_paused = false;
            self.pass_request(context)?;
        } else {
            stream.request_paused = true;
        }
        Ok(())
    }

    /// Acts on what the filter asked for during a callback on `context`: a local reply, a reset,
    /// a resume. Returns true when the stream ended.
    pub(super) fn after_any_callback(&mut self, context: u32) -> Result<bool> {
        let stream = self.stream_mut(context)?;
        if stream.local_reply.is_some() {
            self.send_local_reply(context)?;
            return Ok(true);
        }
        if std::mem::take(&mut stream.reset_requested) {
            self.reset(context, "filter_closed_stream")?;
            return Ok(true);
        }
        if stream.request_paused && std::mem::take(&mut stream.continue_request) {
            stream.request_paused = false;
            self.pass_request(context)?;
        }
        let stream = self.stream_mut(context)?;
        if stream.response_paused && std::mem::take(&mut stream.continue_response) {
            stream.response_paused = false;
            self.pass_response(context)?;
        }
        Ok(false)
    }

    /// The request passes the filter: the upstream request starts (when the headers pass) and
    /// receives the buffered body.
    fn pass_request(&mut self, context: u32) -> Result<()> {
        let index = self.index;
        let now = self.world().clock().now_ms();
        let chain = self.store.data().chain;
        let stream = self.stream_mut(context)?;
        let headers = stream.request_headers.clone().unwrap_or_default();
        let forwarded = stream.forwarded.get_or_insert_with(|| Forwarded {
            headers: headers.clone(),
            ..Forwarded::default()
        });
        forwarded.body.append(&mut stream.request_body);
        forwarded.complete = stream.request_ended;
        let starts = !stream.upstream_started && (chain == Chain::Streaming || forwarded.complete);
        if starts {
            stream.upstream_started = true;
            // The router's first attempt (`setAttemptCount` as it creates the upstream request).
            stream
                .properties
                .insert(ATTEMPT_COUNT.into(), uint_property(1));
            let call = UpstreamCall {
                worker: index,
                context,
                method: headers.get_str(":method").unwrap_or_default().to_string(),
                path: headers.get_str(":path").unwrap_or_default().to_string(),
                key: headers.get_str("idempotency-key").map(str::to_string),
                at_ms: now,
                writes_before: self.world().shared_data().log().len(),
            };
            self.world().record_upstream(call);
        }
        Ok(())
    }

    /// The router made `attempts` upstream attempts in all (its retry policy retried): what
    /// `upstream.request_attempt_count` reads from now on.
    pub fn set_attempt_count(&mut self, context: u32, attempts: u64) -> Result<()> {
        self.stream_mut(context)?
            .properties
            .insert(ATTEMPT_COUNT.into(), uint_property(attempts));
        Ok(())
    }

    /// The response headers arrive (from the upstream, or an error reply Envoy makes itself);
    /// `details` is what `response.code_details` will read (`via_upstream` for an upstream answer).
    pub fn response_headers(
        &mut self,
        context: u32,
        status: u16,
        headers: HeaderMap,
        end_of_stream: bool,
        details: &str,
    ) -> Result<()> {
        let stream = self.stream_mut(context)?;
        if stream.phase == Phase::Done {
            return Err(HarnessError::Usage(
                "response sent to a finished stream".into(),
            ));
        }
        if stream.local_reply_sent {
            return Ok(());
        }
        let mut map = HeaderMap::new();
        map.add(":status", status.to_string().as_bytes());
        map.0.extend(headers.0);
        let count = map.pairs().len() as i32;
        stream.phase = Phase::Response;
        stream.response_headers = Some(map);
        stream.response_ended = end_of_stream;
        set_response_properties(stream, status, details);
        stream.answer = Some(ClientAnswer {
            status,
            local: details != "via_upstream",
            ..ClientAnswer::default()
        });
        let action = match self.exports.on_response_headers.clone() {
            Some(f) => self.call(
                "proxy_on_response_headers",
                context,
                &f,
                (context as i32, count, end_of_stream as i32),
            )?,
            None => CONTINUE,
        };
        self.after_response_callback(context, action)
    }

    /// A response body chunk arrives.
    pub fn response_body(&mut self, context: u32, chunk: &[u8], end_of_stream: bool) -> Result<()> {
        let stream = self.stream_mut(context)?;
        if stream.phase != Phase::Response || stream.local_reply_sent {
            return Ok(());
        }
        stream.response_body.extend_from_slice(chunk);
        stream.response_ended = end_of_stream;
        let size = stream.response_body.len() as i32;
        let action = match self.exports.on_response_body.clone() {
            Some(f) => self.call(
                "proxy_on_response_body",
                context,
                &f,
                (context as i32, size, end_of_stream as i32),
            )?,
            None => CONTINUE,
        };
        self.after_response_callback(context, action)
    }

    fn after_response_callback(&mut self, context: u32, action: i32) -> Result<()> {
        if self.after_any_callback(context)? {
            return Ok(());
        }
        let stream = self.stream_mut(context)?;
        if stream.phase != Phase::Response {
            return Ok(());
        }
        if action == CONTINUE || std::mem::take(&mut stream.continue_response) {
            stream.response_paused = false;
            self.pass_response(context)?;
        } else {
            stream.response_paused = true;
        }
        Ok(())
    }

    /// The response passes the filter to the client; at its end the stream completes.
    fn pass_response(&mut self, context: u32) -> Result<()> {
        let stream = self.stream_mut(context)?;
        let headers = stream.response_headers.clone().unwrap_or_default();
        let answer = stream.answer.get_or_insert_with(ClientAnswer::default);
        if !stream.response_headers_sent {
            stream.response_headers_sent = true;
            answer.status = headers
                .get_str(":status")
                .and_then(|s| s.parse().ok())
                .unwrap_or(answer.status);
            answer.headers = HeaderMap(
                headers
                    .0
                    .into_iter()
                    .filter(|(n, _)| !n.starts_with(':'))
                    .collect(),
            );
        }
        answer.body.append(&mut stream.response_body);
        if stream.response_ended {
            answer.complete = true;
            self.end(context)?;
        }
        Ok(())
    }

    /// Sends the filter's local reply: the upstream request (if started) is reset, the reply runs
    /// through the filter's response callbacks, the client gets it, the stream ends.
    fn send_local_reply(&mut self, context: u32) -> Result<()> {
        let stream = self.stream_mut(context)?;
        let Some(reply) = stream.local_reply.take() else {
            return Ok(());
        };
        let reenter = !stream.local_reply_sent && stream.phase == Phase::Request;
        stream.local_reply_sent = true;
        stream.request_paused = false;
        let mut map = HeaderMap::new();
        map.add(":status", reply.status.to_string().as_bytes());
        map.0.extend(reply.headers.0.clone());
        if !reply.body.is_empty() {
            map.replace("content-length", reply.body.len().to_string().as_bytes());
        }
        stream.phase = Phase::Response;
        stream.response_headers = Some(map.clone());
        stream.response_body.clear();
        stream.response_ended = true;
        set_response_properties(stream, reply.status, &reply.details);
        if reenter {
            let count = map.pairs().len() as i32;
            let eos = reply.body.is_empty();
            if let Some(f) = self.exports.on_response_headers.clone() {
                self.call(
                    "proxy_on_response_headers",
                    context,
                    &f,
                    (context as i32, count, eos as i32),
                )?;
            }
            if !eos {
                self.stream_mut(context)?.response_body = reply.body.clone();
                if let Some(f) = self.exports.on_response_body.clone() {
                    let size = reply.body.len() as i32;
                    self.call(
                        "proxy_on_response_body",
                        context,
                        &f,
                        (context as i32, size, 1),
                    )?;
                }
            }
            let world = self.world().clone();
            let stream = self.stream_mut(context)?;
            if stream.local_reply.take().is_some() {
                world.anomaly("a local reply was asked for while the filter's own local reply was being sent; Envoy ignores it".into());
            }
        }
        let stream = self.stream_mut(context)?;
        let headers = stream.response_headers.clone().unwrap_or_default();
        let body = if reenter && !reply.body.is_empty() {
            std::mem::take(&mut stream.response_body)
        } else {
            reply.body
        };
        stream.answer = Some(ClientAnswer {
            status: headers
                .get_str(":status")
                .and_then(|s| s.parse().ok())
                .unwrap_or(reply.status),
            headers: HeaderMap(
                headers
                    .0
                    .into_iter()
                    .filter(|(n, _)| !n.starts_with(':'))
                    .collect(),
            ),
            body,
            complete: true,
            local: true,
        });
        stream.response_headers_sent = true;
        self.end(context)
    }

    /// The stream is reset midway (upstream reset after the response started, client gone, a
    /// truncated body): no complete answer; the filter is logged and deleted.
    pub fn reset(&mut self, context: u32, details: &str) -> Result<()> {
        let stream = self.stream_mut(context)?;
        if stream.phase == Phase::Done {
            return Ok(());
        }
        stream
            .properties
            .insert("response.code_details".into(), details.as_bytes().to_vec());
        if let Some(answer) = stream.answer.as_mut() {
            answer.complete = false;
        }
        self.end(context)
    }

    /// Access log, done, delete — the end of every stream.
    fn end(&mut self, context: u32) -> Result<()> {
        let stream = self.stream_mut(context)?;
        if stream.phase == Phase::Done {
            return Ok(());
        }
        stream.phase = Phase::Done;
        let ctx = context as i32;
        if let Some(f) = self.exports.on_log.clone() {
            self.call("proxy_on_log", context, &f, ctx)?;
        }
        if let Some(f) = self.exports.on_done.clone() {
            self.call("proxy_on_done", context, &f, ctx)?;
        }
        if let Some(f) = self.exports.on_delete.clone() {
            self.call("proxy_on_delete", context, &f, ctx)?;
        }
        self.stream_mut(context)?.deleted = true;
        Ok(())
    }
}

fn set_response_properties(stream: &mut StreamState, status: u16, details: &str) {
    stream
        .properties
        .insert("response.code_details".into(), details.as_bytes().to_vec());
    stream.properties.insert(
        "response.code".into(),
        i64::from(status).to_le_bytes().to_vec(),
    );
}
