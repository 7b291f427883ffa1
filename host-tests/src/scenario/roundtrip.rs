//! One client request through the filter, from the test's side: send the rest of its body, script
//! the upstream's answer or failure, disconnect the client, and read what the client got.

use super::request::Request;
use super::response::{Failure, Response};
use super::upstream;
use crate::envoy::{ClientAnswer, Forwarded, Phase, Worker};
use crate::error::{HarnessError, Result};
use std::cell::RefCell;
use std::rc::Rc;

pub struct Roundtrip {
    worker: Rc<RefCell<Worker>>,
    context: u32,
    request: Request,
    chunks_sent: usize,
}

impl Roundtrip {
    pub(crate) fn new(worker: Rc<RefCell<Worker>>, context: u32, request: Request) -> Self {
        Roundtrip {
            worker,
            context,
            request,
            chunks_sent: 0,
        }
    }

    pub fn context(&self) -> u32 {
        self.context
    }

    pub fn worker(&self) -> usize {
        self.worker.borrow().index()
    }

    /// Sends the next body chunk; false when there was none left.
    pub fn send_next_chunk(&mut self) -> Result<bool> {
        let chunks = self.request.chunks();
        let Some(chunk) = chunks.get(self.chunks_sent) else {
            return Ok(false);
        };
        let last = self.chunks_sent + 1 == chunks.len();
        self.worker
            .borrow_mut()
            .request_body(self.context, chunk, last)?;
        self.chunks_sent += 1;
        Ok(true)
    }

    /// Sends every remaining body chunk, none of them marked the last, then trailers, which end
    /// the request.
    pub fn send_rest_then_trailers(&mut self) -> Result<()> {
        let chunks = self.request.chunks();
        for chunk in chunks.iter().skip(self.chunks_sent) {
            self.worker
                .borrow_mut()
                .request_body(self.context, chunk, false)?;
        }
        self.chunks_sent = chunks.len();
        let mut trailers = crate::envoy::HeaderMap::new();
        trailers.add("x-checksum", b"0");
        self.worker
            .borrow_mut()
            .request_trailers(self.context, trailers)
    }

    /// Sends every remaining body chunk — or, if the request says so, goes away at its abort
    /// point (see [`super::Abort`]).
    pub fn send_rest(&mut self) -> Result<()> {
        use super::request::Abort;
        let leave = |exchange: &Roundtrip| exchange.client_disconnects();
        if self.chunks_sent == 0 && self.request.abort == Some(Abort::AfterHeaders) {
            return leave(self);
        }
        while self.send_next_chunk()? {
            if self.request.abort == Some(Abort::AfterChunk(self.chunks_sent)) {
                return leave(self);
            }
        }
        if self.request.abort == Some(Abort::AfterRequest) && !self.is_done() {
            return leave(self);
        }
        Ok(())
    }

    /// What reached the upstream (headers as the filter left them, body so far).
    pub fn forwarded(&self) -> Option<Forwarded> {
        self.worker
            .borrow()
            .stream(self.context)
            .and_then(|s| s.forwarded.clone())
    }

    /// The upstream was contacted for this request.
    pub fn reached_upstream(&self) -> bool {
        self.worker
            .borrow()
            .stream(self.context)
            .is_some_and(|s| s.upstream_started)
    }

    /// The stream is finished (logged) — answered, or reset.
    pub fn is_done(&self) -> bool {
        self.worker
            .borrow()
            .stream(self.context)
            .is_none_or(|s| s.phase == Phase::Done)
    }

    /// The request is held by the filter (paused, waiting for a resume).
    pub fn is_paused(&self) -> bool {
        self.worker
            .borrow()
            .stream(self.context)
            .is_some_and(|s| s.request_paused)
    }

    /// What the client got (status, headers, body), once the response started.
    pub fn answer(&self) -> Option<ClientAnswer> {
        self.worker
            .borrow()
            .stream(self.context)
            .and_then(|s| s.answer.clone())
    }

    /// The client's answer, or an error saying why there is none yet.
    pub fn expect_answer(&self) -> Result<ClientAnswer> {
        self.answer().ok_or_else(|| {
            HarnessError::Usage(
                "the client has no answer yet (is the request still upstream?)".into(),
            )
        })
    }

    fn require_upstream(&self) -> Result<()> {
        if self.reached_upstream() {
            Ok(())
        } else {
            Err(HarnessError::Usage(
                "the upstream cannot answer a request that never reached it".into(),
            ))
        }
    }

    /// The upstream answers (after `response.delay`, in chunks, possibly cut off).
    pub fn respond(&self, response: Response) -> Result<()> {
        self.require_upstream()?;
        upstream::respond(&mut self.worker.borrow_mut(), self.context, &response)
    }

    /// The upstream fails; Envoy answers the client itself, as it does.
    pub fn upstream_fails(&self, failure: Failure) -> Result<()> {
        self.require_upstream()?;
        upstream::fail(&mut self.worker.borrow_mut(), self.context, failure)
    }

    /// The client goes away before the answer (Envoy resets the stream).
    pub fn client_disconnects(&self) -> Result<()> {
        self.worker
            .borrow_mut()
            .reset(self.context, "downstream_remote_disconnect")
    }
}
