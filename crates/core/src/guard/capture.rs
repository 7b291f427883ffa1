//! An upstream's answer as a record keeps it: its status, the headers the
//! policy replays, and its body within `max_response_body` — streamed in on the router path,
//! whole from a detached exchange. Both paths were the Envoy filter's, each written out; now they
//! hand over the same facts and get the same [`ResponseFacts`].
//!
//! What cannot be kept whole makes the outcome in doubt, never an answer nobody sent: a missing or
//! unreadable `:status` (never a status 0 stored), or a head or body chunk the host could not hand
//! over. A body over `max_response_body` is passed on but not kept: the answer completes the key
//! without a replayable body (the core's decision says what that means).

use crate::answer::parse_status;
use crate::decision::ResponseFacts;
use crate::policy::Policy;
use alloc::borrow::ToOwned;
use alloc::string::String;
use alloc::vec::Vec;

/// An upstream answer being kept for its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    /// `None`: missing or not a number, or a part the host could not hand over — in doubt.
    status: Option<u16>,
    headers: Vec<(String, String)>,
    /// `None` once the body went over the limit (passed on, not kept) or could not be read.
    body: Option<Vec<u8>>,
    limit: u64,
}

impl Capture {
    /// The answer's head, as `(name, value)` pairs with `:status` among them. Only the headers
    /// the policy replays are kept, and only with UTF-8 values.
    pub fn head<'h>(
        headers: impl IntoIterator<Item = (&'h str, &'h [u8])>,
        policy: &Policy,
    ) -> Capture {
        let mut status = None;
        let headers = headers
            .into_iter()
            .filter(|(name, value)| {
                if *name == ":status" {
                    status = parse_status(value);
                }
                policy.replays_header(name)
            })
            .filter_map(|(name, value)| {
                let value = core::str::from_utf8(value).ok()?;
                Some((name.to_owned(), value.to_owned()))
            })
            .collect();
        Capture {
            status,
            headers,
            body: Some(Vec::new()),
            limit: policy.max_response_body,
        }
    }

    /// A head the host could not hand over: the upstream answered, but what cannot be read.
    pub fn unreadable(policy: &Policy) -> Capture {
        Capture {
            status: None,
            headers: Vec::new(),
            body: None,
            limit: policy.max_response_body,
        }
    }

    /// The answer's status, if it could be read.
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// Whether the host should read the next `size` body bytes and hand them to
    /// [`Capture::chunk`]: `false` once the body is not kept, which a chunk taking it over the
    /// limit makes so (the rest is passed on, never copied for nothing).
    pub(crate) fn wants(&mut self, size: u64) -> bool {
        let Some(body) = &self.body else {
            return false;
        };
        if (body.len() as u64).saturating_add(size) > self.limit {
            self.body = None;
            return false;
        }
        true
    }

    /// The host passes the rest of the body on without reading it (a detached exchange's body
    /// over the relay limit): the answer is kept without its body.
    pub(crate) fn pass(&mut self) {
        self.body = None;
    }

    /// The body bytes asked for by [`Capture::wants`]; `None`: the host could not hand them
    /// over, so the answer cannot be kept whole — in doubt.
    pub(crate) fn chunk(&mut self, chunk: Option<&[u8]>) {
        match (chunk, &mut self.body) {
            (Some(chunk), Some(body)) => body.extend_from_slice(chunk),
            (Some(_), None) => {}
            (None, _) => {
                self.status = None;
                self.body = None;
            }
        }
    }

    /// What the complete answer tells the claim.
    pub(crate) fn facts(self) -> ResponseFacts {
        match self.status {
            Some(status) => ResponseFacts::Upstream {
                status,
                headers: self.headers,
                body: self.body,
            },
            None => ResponseFacts::InDoubt,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn policy() -> Policy {
        let mut policy = Policy::defaults();
        policy.max_response_body = 4;
        policy.replay_headers = vec!["content-type".into(), "set-cookie".into()];
        policy
    }

    fn head(pairs: &[(&'static str, &'static [u8])]) -> Capture {
        Capture::head(pairs.iter().copied(), &policy())
    }

    #[test]
    fn the_status_the_replayed_headers_and_the_body_are_kept() {
        let mut capture = head(&[
            (":status", b"201"),
            ("content-type", b"application/json"),
            ("x-other", b"1"),
            ("set-cookie", b"\xff"),
        ]);
        assert_eq!(capture.status(), Some(201));
        assert!(capture.wants(2));
        capture.chunk(Some(b"{}"));
        assert!(capture.wants(2));
        capture.chunk(Some(b"[]"));
        assert_eq!(
            capture.facts(),
            ResponseFacts::Upstream {
                status: 201,
                headers: vec![("content-type".into(), "application/json".into())],
                body: Some(b"{}[]".to_vec()),
            }
        );
    }

    #[test]
    fn a_body_over_the_limit_is_passed_on_not_kept() {
        let mut capture = head(&[(":status", b"200")]);
        assert!(capture.wants(3));
        capture.chunk(Some(b"abc"));
        assert!(!capture.wants(2), "3 + 2 bytes are over the 4-byte limit");
        assert!(!capture.wants(0), "a body dropped stays dropped");
        capture.chunk(Some(b"de"));
        let mut passed = head(&[(":status", b"200")]);
        passed.pass();
        assert!(!passed.wants(1));
        assert_eq!(passed, capture);
        assert_eq!(
            capture.facts(),
            ResponseFacts::Upstream {
                status: 200,
                headers: vec![],
                body: None,
            }
        );
    }

    #[test]
    fn what_cannot_be_read_whole_is_in_doubt() {
        for status in [&b""[..], b"abc", b"0", b"99", b"1000"] {
            let capture = head(&[(":status", status)]);
            assert_eq!(capture.facts(), ResponseFacts::InDoubt, "{status:?}");
        }
        assert_eq!(head(&[]).facts(), ResponseFacts::InDoubt);
        assert_eq!(
            Capture::unreadable(&policy()).facts(),
            ResponseFacts::InDoubt
        );
        let mut capture = head(&[(":status", b"200")]);
        assert!(capture.wants(1));
        capture.chunk(None);
        assert!(!capture.wants(1));
        assert_eq!(capture.facts(), ResponseFacts::InDoubt);
    }
}
