//! The response half of the wire: what the service answers ([`Response`]), and why it could not
//! carry an operation out ([`Failure`]).

use super::bill::{get_refusal, put_refusal};
use super::*;

/// Why the service could not carry an operation out. The filter applies its failure mode to every
/// one of them; none of them wrote anything the operation did not decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// The engine refused or the connection failed.
    Unavailable,
    /// The engine did not answer within the service's timeout.
    Timeout,
    /// Lost too many compare-and-set races on the key in a row.
    Contention,
    /// The key holds bytes that are not a record; nothing was overwritten.
    Corrupt,
    /// The engine is out of memory (`maxmemory` with `noeviction`) for a write that must land.
    Full,
    /// The service could not decode the request.
    BadRequest,
    /// The service is shutting down and takes no new operations. Reserved: `idemgate-store`
    /// finishes every operation it accepted and lets HTTP/2 GOAWAY turn new ones away, so it
    /// does not send this today; a filter treats it like any other failure.
    ShuttingDown,
}

impl Failure {
    const ALL: [Failure; 7] = [
        Failure::Unavailable,
        Failure::Timeout,
        Failure::Contention,
        Failure::Corrupt,
        Failure::Full,
        Failure::BadRequest,
        Failure::ShuttingDown,
    ];

    fn byte(self) -> u8 {
        match self {
            Failure::Unavailable => 1,
            Failure::Timeout => 2,
            Failure::Contention => 3,
            Failure::Corrupt => 4,
            Failure::Full => 5,
            Failure::BadRequest => 6,
            Failure::ShuttingDown => 7,
        }
    }

    fn from_byte(byte: u8) -> Option<Failure> {
        Failure::ALL.into_iter().find(|f| f.byte() == byte)
    }

    /// A stable code for logs and metrics.
    pub fn code(self) -> &'static str {
        match self {
            Failure::Unavailable => "remote_unavailable",
            Failure::Timeout => "remote_timeout",
            Failure::Contention => "remote_contention",
            Failure::Corrupt => "remote_corrupt",
            Failure::Full => "remote_full",
            Failure::BadRequest => "remote_bad_request",
            Failure::ShuttingDown => "remote_shutting_down",
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Failure::Unavailable => "the record store is unavailable",
            Failure::Timeout => "the record store did not answer in time",
            Failure::Contention => "too many concurrent writers on one key",
            Failure::Corrupt => "the stored record is unreadable",
            Failure::Full => "the record store is full",
            Failure::BadRequest => "the store service could not read the request",
            Failure::ShuttingDown => "the store service is shutting down",
        })
    }
}

/// The service's answer: the same outcomes the local protocol gives, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Response {
    Claim(ClaimOutcome),
    Finish(FinishOutcome),
    Consume(ConsumeOutcome),
    /// The sequencer's begin ([`crate::order::BeginOutcome`]), and the state it was decided
    /// on, as read (`None`: no live record), for the filter to check its seal.
    Begin(
        crate::order::BeginOutcome,
        Option<crate::record::resource::ReadState>,
    ),
    /// The sequencer's settle ([`crate::order::SettleOutcome`]).
    Settle(crate::order::SettleOutcome),
    Failed(Failure),
    /// The answers to a batch of finishes ([`super::Incoming::Finishes`]), one per finish in
    /// its order: each a [`Response::Finish`] or a [`Response::Failed`] of that finish alone.
    Finishes(Vec<Response>),
}

/// Response tags: claim outcomes 1–7, finish outcomes 16–19, consume outcomes 32–35, failure 48
/// (the sequencer's 64–82: `order`; a batch's answers 96: `batch`).
struct Tag;
impl Tag {
    const FORWARD: u8 = 1;
    const CONFLICT: u8 = 2;
    const REPLAY: u8 = 3;
    const MISMATCH: u8 = 4;
    const CLAIM_FULL: u8 = 5;
    const CLAIM_QUOTA: u8 = 6;
    const NOT_REPLAYED: u8 = 7;
    const STORED: u8 = 16;
    const RELEASED: u8 = 17;
    const KEPT_IN_FLIGHT: u8 = 18;
    const NOT_OWNER: u8 = 19;
    const CONSUMED: u8 = 32;
    const ALREADY_USED: u8 = 33;
    const CONSUME_FULL: u8 = 34;
    const CONSUME_QUOTA: u8 = 35;
    const FAILED: u8 = 48;
}

impl Response {
    /// The HTTP status the service sends this response with, its body always the encoding: 200
    /// for an outcome (and for a batch's answers, whatever each is), 400 for a request the
    /// service could not read, 503 when no decision was reached. Decided here so the service and every model of it answer alike.
    pub const fn http_status(&self) -> u16 {
        match self {
            Response::Failed(Failure::BadRequest) => 400,
            Response::Failed(_) => 503,
            _ => 200,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.bytes(&RESPONSE_MAGIC);
        w.u8(WIRE_VERSION);
        match self {
            Response::Claim(ClaimOutcome::Forward { owner, takeover }) => {
                w.u8(Tag::FORWARD);
                w.bytes(&owner.0);
                w.u8(u8::from(*takeover));
            }
            Response::Claim(ClaimOutcome::Conflict { retry_after }) => {
                w.u8(Tag::CONFLICT);
                w.u64(retry_after.0);
            }
            Response::Claim(ClaimOutcome::Replay(response)) => {
                w.u8(Tag::REPLAY);
                put_response(&mut w, response);
            }
            Response::Claim(ClaimOutcome::Mismatch) => w.u8(Tag::MISMATCH),
            Response::Claim(ClaimOutcome::NotReplayed) => w.u8(Tag::NOT_REPLAYED),
            Response::Claim(ClaimOutcome::StoreFull { retry_after }) => {
                w.u8(Tag::CLAIM_FULL);
                w.u64(retry_after.0);
            }
            Response::Finish(outcome) => w.u8(match outcome {
                FinishOutcome::Stored => Tag::STORED,
                FinishOutcome::Released => Tag::RELEASED,
                FinishOutcome::KeptInFlight => Tag::KEPT_IN_FLIGHT,
                FinishOutcome::NotOwner => Tag::NOT_OWNER,
            }),
            Response::Claim(ClaimOutcome::QuotaExceeded { retry_after, share }) => {
                w.u8(Tag::CLAIM_QUOTA);
                w.u64(retry_after.0);
                put_refusal(&mut w, share);
            }
            Response::Consume(ConsumeOutcome::Consumed) => w.u8(Tag::CONSUMED),
            Response::Consume(ConsumeOutcome::AlreadyUsed) => w.u8(Tag::ALREADY_USED),
            Response::Consume(ConsumeOutcome::StoreFull { retry_after }) => {
                w.u8(Tag::CONSUME_FULL);
                w.u64(retry_after.0);
            }
            Response::Consume(ConsumeOutcome::QuotaExceeded { retry_after, share }) => {
                w.u8(Tag::CONSUME_QUOTA);
                w.u64(retry_after.0);
                put_refusal(&mut w, share);
            }
            Response::Failed(failure) => {
                w.u8(Tag::FAILED);
                w.u8(failure.byte());
            }
            Response::Begin(..) | Response::Settle(_) => order::put_response(&mut w, self),
            Response::Finishes(answers) => {
                w.u8(batch::TAG_FINISHES);
                batch::put_answers(&mut w, answers);
            }
        }
        w.finish()
    }

    pub fn decode(bytes: &[u8]) -> Result<Response, WireError> {
        Response::decode_within(bytes, true)
    }

    /// [`Response::decode`], refusing a batch's answers unless `batch`: an answer inside a batch
    /// is never itself a batch, so hostile nesting cannot recurse.
    pub(super) fn decode_within(bytes: &[u8], batch: bool) -> Result<Response, WireError> {
        let mut r = Reader::new(bytes);
        header(&mut r, RESPONSE_MAGIC)?;
        let response = match r.u8()? {
            Tag::FORWARD => Response::Claim(ClaimOutcome::Forward {
                owner: OwnerToken(r.array()?),
                takeover: match r.u8()? {
                    0 => false,
                    1 => true,
                    tag => return Err(WireError::UnknownTag(tag)),
                },
            }),
            Tag::CONFLICT => Response::Claim(ClaimOutcome::Conflict {
                retry_after: Span(r.u64()?),
            }),
            Tag::REPLAY => Response::Claim(ClaimOutcome::Replay(get_response(&mut r)?)),
            Tag::MISMATCH => Response::Claim(ClaimOutcome::Mismatch),
            Tag::NOT_REPLAYED => Response::Claim(ClaimOutcome::NotReplayed),
            Tag::CLAIM_FULL => Response::Claim(ClaimOutcome::StoreFull {
                retry_after: Span(r.u64()?),
            }),
            Tag::STORED => Response::Finish(FinishOutcome::Stored),
            Tag::RELEASED => Response::Finish(FinishOutcome::Released),
            Tag::KEPT_IN_FLIGHT => Response::Finish(FinishOutcome::KeptInFlight),
            Tag::NOT_OWNER => Response::Finish(FinishOutcome::NotOwner),
            Tag::CONSUMED => Response::Consume(ConsumeOutcome::Consumed),
            Tag::ALREADY_USED => Response::Consume(ConsumeOutcome::AlreadyUsed),
            Tag::CLAIM_QUOTA => Response::Claim(ClaimOutcome::QuotaExceeded {
                retry_after: Span(r.u64()?),
                share: get_refusal(&mut r)?,
            }),
            Tag::CONSUME_FULL => Response::Consume(ConsumeOutcome::StoreFull {
                retry_after: Span(r.u64()?),
            }),
            Tag::CONSUME_QUOTA => Response::Consume(ConsumeOutcome::QuotaExceeded {
                retry_after: Span(r.u64()?),
                share: get_refusal(&mut r)?,
            }),
            Tag::FAILED => {
                let byte = r.u8()?;
                Response::Failed(Failure::from_byte(byte).ok_or(WireError::UnknownTag(byte))?)
            }
            batch::TAG_FINISHES if batch => batch::get_answers(&mut r)?,
            batch::TAG_FINISHES => return Err(WireError::Batch),
            tag => match order::get_response(tag, &mut r)? {
                Some(response) => response,
                None => return Err(WireError::UnknownTag(tag)),
            },
        };
        end(&r)?;
        Ok(response)
    }

    /// The answer to a claim, as the local protocol would give it. A failure, or an answer to
    /// another operation (a confused service), is an error for the failure mode.
    pub fn into_claim(self) -> Result<ClaimOutcome, ProtocolError> {
        match self {
            Response::Claim(outcome) => Ok(outcome),
            other => Err(other.unexpected()),
        }
    }

    pub fn into_finish(self) -> Result<FinishOutcome, ProtocolError> {
        match self {
            Response::Finish(outcome) => Ok(outcome),
            other => Err(other.unexpected()),
        }
    }

    /// The answers to a batch of `sent` finishes, each as [`Response::into_finish`] reads a
    /// single one. Anything but one answer per finish (a failure of the whole request, a
    /// confused service) is an error for every finish of the batch.
    #[allow(clippy::type_complexity)]
    pub(crate) fn into_finishes(
        self,
        sent: usize,
    ) -> Result<Vec<Result<FinishOutcome, ProtocolError>>, ProtocolError> {
        match self {
            Response::Finishes(answers) if answers.len() == sent => {
                Ok(answers.into_iter().map(Response::into_finish).collect())
            }
            other => Err(other.unexpected()),
        }
    }

    pub(crate) fn into_begin(
        self,
    ) -> Result<
        (
            crate::order::BeginOutcome,
            Option<crate::record::resource::ReadState>,
        ),
        ProtocolError,
    > {
        match self {
            Response::Begin(outcome, read) => Ok((outcome, read)),
            other => Err(other.unexpected()),
        }
    }

    pub(crate) fn into_settle(self) -> Result<crate::order::SettleOutcome, ProtocolError> {
        match self {
            Response::Settle(outcome) => Ok(outcome),
            other => Err(other.unexpected()),
        }
    }

    pub(crate) fn into_consume(self) -> Result<ConsumeOutcome, ProtocolError> {
        match self {
            Response::Consume(outcome) => Ok(outcome),
            other => Err(other.unexpected()),
        }
    }

    fn unexpected(self) -> ProtocolError {
        match self {
            Response::Failed(failure) => {
                ProtocolError::Store(StoreError::Unavailable(String::from(failure.code())))
            }
            _ => ProtocolError::UnexpectedReply,
        }
    }
}
