//! The sequencer's two operations on the wire, beside claim, finish and consume:
//!
//! ```text
//!   op 4 order begin  : key(32) owner(16) lease_ms(8) ttl_ms(8) retry_after_ms(8)
//!                       forward_after(1) [ forward_after_ms(8) ] event(s) table
//!        table        : initial(s) states(2){s} terminal(2){s} transitions(2){from(s) event(s) to(s)}
//!   op 5 order settle : key(32) owner(16) ttl_ms(8) applied(1) to(s) sealed(1) [ seal(32) ]
//!   (s) = length(2) UTF-8 bytes
//! response tags: begin outcomes 64–73, settle outcomes 80–82 (see `put_outcome`); a begin's
//!   outcome is followed by the state it was decided on:
//!   read(1) [ state(s) version(8) sealed(1) [ seal(32) ] ]
//! ```
//!
//! The table travels with each begin, so the service decides with the route's own table (the
//! service has no filter configuration) and a table change takes effect with the Envoys'.

use super::bill::{get_bill, get_refusal, put_bill, put_refusal};
use super::{span, ttl, Request, Response, WireError};
use crate::client::scope::StorageKey;
use crate::codec::{Reader, Writer};
use crate::order::transition::DeclaredTable;
use crate::order::{BeginOutcome, SettleOutcome};
use crate::record::resource::ReadState;
use crate::record::seal::Seal;
use crate::record::{DecodeError, OwnerToken};
use crate::time::Span;
use alloc::string::String;
use alloc::vec::Vec;

pub(super) const OP_BEGIN: u8 = 4;
pub(super) const OP_SETTLE: u8 = 5;

const APPLY: u8 = 64;
const ALREADY_APPLIED: u8 = 65;
const ILLEGAL: u8 = 66;
const EARLY: u8 = 67;
const FORWARD_EARLY: u8 = 68;
const BUSY: u8 = 69;
const UNKNOWN_STATE: u8 = 70;
const NOT_ORDERED: u8 = 71;
const BEGIN_FULL: u8 = 72;
const BEGIN_QUOTA: u8 = 73;
const ADVANCED: u8 = 80;
const RELEASED: u8 = 81;
const NOT_OWNER: u8 = 82;

fn text(r: &mut Reader<'_>) -> Result<String, WireError> {
    String::from_utf8(r.short_bytes()?.to_vec())
        .map_err(|_| WireError::Record(DecodeError::InvalidResource))
}

fn put_seal(w: &mut Writer, seal: &Option<Seal>) {
    match seal {
        None => w.u8(0),
        Some(seal) => {
            w.u8(1);
            w.bytes(&seal.0);
        }
    }
}

fn seal(r: &mut Reader<'_>) -> Result<Option<Seal>, WireError> {
    match r.u8()? {
        0 => Ok(None),
        1 => Ok(Some(Seal(r.array()?))),
        tag => Err(WireError::UnknownTag(tag)),
    }
}

fn put_read(w: &mut Writer, read: &Option<ReadState>) {
    match read {
        None => w.u8(0),
        Some(read) => {
            w.u8(1);
            w.short_bytes(read.state.as_bytes());
            w.u64(read.version);
            put_seal(w, &read.seal);
        }
    }
}

fn read_state(r: &mut Reader<'_>) -> Result<Option<ReadState>, WireError> {
    match r.u8()? {
        0 => Ok(None),
        1 => Ok(Some(ReadState {
            state: text(r)?,
            version: r.u64()?,
            seal: seal(r)?,
        })),
        tag => Err(WireError::UnknownTag(tag)),
    }
}

fn texts(r: &mut Reader<'_>) -> Result<Vec<String>, WireError> {
    let count = r.u16()?;
    (0..count).map(|_| text(r)).collect()
}

fn put_texts<'a>(w: &mut Writer, list: impl Iterator<Item = &'a str>) {
    let list: Vec<&str> = list.collect();
    w.u16(list.len() as u16);
    for item in list {
        w.short_bytes(item.as_bytes());
    }
}

pub(super) fn put_table(w: &mut Writer, table: &DeclaredTable) {
    let t = table.table();
    w.short_bytes(table.initial().as_bytes());
    put_texts(w, t.states());
    put_texts(w, t.terminal_states());
    w.u16(t.transitions().count() as u16);
    for (from, event, to) in t.transitions() {
        w.short_bytes(from.as_bytes());
        w.short_bytes(event.as_bytes());
        w.short_bytes(to.as_bytes());
    }
}

fn get_table(r: &mut Reader<'_>) -> Result<DeclaredTable, WireError> {
    let initial = text(r)?;
    let states = texts(r)?;
    let terminal = texts(r)?;
    let count = r.u16()?;
    let mut transitions = Vec::new();
    for _ in 0..count {
        transitions.push((text(r)?, text(r)?, text(r)?));
    }
    DeclaredTable::new(states, terminal, transitions, initial).map_err(WireError::Table)
}

/// The body of an `OrderBegin` or `OrderSettle` request (after its op byte).
pub(super) fn put_request(w: &mut Writer, request: &Request) {
    match request {
        Request::OrderBegin {
            key,
            owner,
            lease,
            ttl,
            retry_after,
            forward_after,
            event,
            table,
            payers,
            fill,
        } => {
            w.u8(OP_BEGIN);
            w.bytes(&key.0);
            w.bytes(&owner.0);
            w.u64(lease.0);
            w.u64(ttl.0);
            w.u64(retry_after.0);
            match forward_after {
                None => w.u8(0),
                Some(span) => {
                    w.u8(1);
                    w.u64(span.0);
                }
            }
            w.short_bytes(event.as_bytes());
            put_table(w, table);
            put_bill(w, payers, fill);
        }
        Request::OrderSettle {
            key,
            owner,
            ttl,
            to,
            applied,
            seal,
        } => {
            w.u8(OP_SETTLE);
            w.bytes(&key.0);
            w.bytes(&owner.0);
            w.u64(ttl.0);
            w.u8(u8::from(*applied));
            w.short_bytes(to.as_bytes());
            put_seal(w, seal);
        }
        _ => {}
    }
}

pub(super) fn get_request(op: u8, r: &mut Reader<'_>) -> Result<Request, WireError> {
    let key = StorageKey(r.array()?);
    let owner = OwnerToken(r.array()?);
    match op {
        OP_BEGIN => {
            let lease = span(r)?;
            let ttl = ttl(r)?;
            let retry_after = span(r)?;
            let forward_after = match r.u8()? {
                0 => None,
                1 => Some(span(r)?),
                tag => return Err(WireError::UnknownTag(tag)),
            };
            let event = text(r)?;
            let table = get_table(r)?;
            let (payers, fill) = get_bill(r)?;
            Ok(Request::OrderBegin {
                key,
                owner,
                lease,
                ttl,
                retry_after,
                forward_after,
                event,
                table,
                payers,
                fill,
            })
        }
        _ => Ok(Request::OrderSettle {
            key,
            owner,
            ttl: ttl(r)?,
            applied: match r.u8()? {
                0 => false,
                1 => true,
                tag => return Err(WireError::UnknownTag(tag)),
            },
            to: text(r)?,
            seal: seal(r)?,
        }),
    }
}

pub(super) fn put_response(w: &mut Writer, response: &Response) {
    match response {
        Response::Begin(outcome, read) => {
            put_outcome(w, outcome);
            put_read(w, read);
        }
        Response::Settle(SettleOutcome::Advanced { version }) => {
            w.u8(ADVANCED);
            w.u64(*version);
        }
        Response::Settle(SettleOutcome::Released) => w.u8(RELEASED),
        Response::Settle(_) => w.u8(NOT_OWNER),
        _ => {}
    }
}

fn put_outcome(w: &mut Writer, outcome: &BeginOutcome) {
    let with_text = |w: &mut Writer, tag: u8, text: &str| {
        w.u8(tag);
        w.short_bytes(text.as_bytes());
    };
    let with_span = |w: &mut Writer, tag: u8, span: &Span| {
        w.u8(tag);
        w.u64(span.0);
    };
    match outcome {
        BeginOutcome::Apply { to } => with_text(w, APPLY, to),
        BeginOutcome::AlreadyApplied { state } => with_text(w, ALREADY_APPLIED, state),
        BeginOutcome::Illegal { state, terminal } => {
            with_text(w, ILLEGAL, state);
            w.u8(u8::from(*terminal));
        }
        BeginOutcome::Early { retry_after } => with_span(w, EARLY, retry_after),
        BeginOutcome::ForwardEarly => w.u8(FORWARD_EARLY),
        BeginOutcome::Busy { retry_after } => with_span(w, BUSY, retry_after),
        BeginOutcome::UnknownState { state } => with_text(w, UNKNOWN_STATE, state),
        BeginOutcome::StoreFull { retry_after } => with_span(w, BEGIN_FULL, retry_after),
        BeginOutcome::QuotaExceeded { retry_after, share } => {
            with_span(w, BEGIN_QUOTA, retry_after);
            put_refusal(w, share);
        }
        _ => w.u8(NOT_ORDERED),
    }
}

/// The response for `tag`, if it is one of the sequencer's.
pub(super) fn get_response(tag: u8, r: &mut Reader<'_>) -> Result<Option<Response>, WireError> {
    let outcome = match tag {
        APPLY => BeginOutcome::Apply { to: text(r)? },
        ALREADY_APPLIED => BeginOutcome::AlreadyApplied { state: text(r)? },
        ILLEGAL => {
            let state = text(r)?;
            let terminal = match r.u8()? {
                0 => false,
                1 => true,
                tag => return Err(WireError::UnknownTag(tag)),
            };
            BeginOutcome::Illegal { state, terminal }
        }
        EARLY => BeginOutcome::Early {
            retry_after: Span(r.u64()?),
        },
        FORWARD_EARLY => BeginOutcome::ForwardEarly,
        BUSY => BeginOutcome::Busy {
            retry_after: Span(r.u64()?),
        },
        UNKNOWN_STATE => BeginOutcome::UnknownState { state: text(r)? },
        NOT_ORDERED => BeginOutcome::NotOrdered,
        BEGIN_FULL => BeginOutcome::StoreFull {
            retry_after: Span(r.u64()?),
        },
        BEGIN_QUOTA => BeginOutcome::QuotaExceeded {
            retry_after: Span(r.u64()?),
            share: get_refusal(r)?,
        },
        ADVANCED => {
            return Ok(Some(Response::Settle(SettleOutcome::Advanced {
                version: r.u64()?,
            })))
        }
        RELEASED => return Ok(Some(Response::Settle(SettleOutcome::Released))),
        NOT_OWNER => return Ok(Some(Response::Settle(SettleOutcome::NotOwner))),
        _ => return Ok(None),
    };
    Ok(Some(Response::Begin(outcome, read_state(r)?)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Record;
    use crate::store::remote::operation::{apply, Change};
    use crate::store::share::{
        Billed, Fill, FillShard, PayerTag, Share, ShareReason, ShareRefusal,
    };
    use crate::time::UnixMillis;

    fn table() -> DeclaredTable {
        DeclaredTable::parse(
            r#"{"initial":"unpaid","terminal":["shipped"],"transitions":[["unpaid","pay","paid"],["paid","ship","shipped"]]}"#,
        )
        .unwrap()
    }

    fn begin_request(event: &str) -> Request {
        begin_by(event, 4)
    }

    fn begin_by(event: &str, owner: u8) -> Request {
        Request::OrderBegin {
            key: StorageKey([3; 32]),
            owner: OwnerToken([owner; 16]),
            lease: Span(60_000),
            ttl: Span(3_600_000),
            retry_after: Span(10_000),
            forward_after: Some(Span(5_000)),
            event: event.into(),
            table: table(),
            payers: Vec::new(),
            fill: None,
        }
    }

    #[test]
    fn requests_and_responses_round_trip() {
        let settle = |seal| Request::OrderSettle {
            key: StorageKey([3; 32]),
            owner: OwnerToken([4; 16]),
            ttl: Span(1),
            to: "paid".into(),
            applied: true,
            seal,
        };
        for request in [
            begin_request("pay"),
            settle(None),
            settle(Some(Seal([9; 32]))),
        ] {
            let bytes = request.encode();
            assert_eq!(Request::decode(&bytes), Ok(request));
            for cut in 0..bytes.len() {
                assert!(Request::decode(&bytes[..cut]).is_err());
            }
        }
        // A begin that makes a new resource record carries its bill, as a claim does.
        let mut billed = begin_request("pay");
        if let Request::OrderBegin { payers, fill, .. } = &mut billed {
            payers.push(Billed {
                tag: PayerTag([5, 0, 0, 0, 0, 0, 0, 1]),
                share: Share {
                    records: 100,
                    bytes: 1 << 20,
                },
            });
            *fill = Some(Fill {
                shard: FillShard {
                    tag: PayerTag([6, 0, 0, 0, 0, 0, 0, 2]),
                    capacity: 1024,
                },
                pressure: 20,
            });
        }
        assert_eq!(Request::decode(&billed.encode()), Ok(billed));
        let outcomes = [
            BeginOutcome::Apply { to: "paid".into() },
            BeginOutcome::AlreadyApplied { state: "s".into() },
            BeginOutcome::Illegal {
                state: "s".into(),
                terminal: true,
            },
            BeginOutcome::Early {
                retry_after: Span(7),
            },
            BeginOutcome::ForwardEarly,
            BeginOutcome::Busy {
                retry_after: Span(8),
            },
            BeginOutcome::UnknownState { state: "x".into() },
            BeginOutcome::NotOrdered,
            BeginOutcome::StoreFull {
                retry_after: Span(9),
            },
            BeginOutcome::QuotaExceeded {
                retry_after: Span(10),
                share: None,
            },
            BeginOutcome::QuotaExceeded {
                retry_after: Span(11),
                share: Some(ShareRefusal {
                    reason: ShareReason::Address,
                    payer: PayerTag([5; 8]),
                }),
            },
        ];
        let reads = [
            None,
            Some(ReadState {
                state: "paid".into(),
                version: 1,
                seal: Some(Seal([8; 32])),
            }),
            Some(ReadState {
                state: "unpaid".into(),
                version: 0,
                seal: None,
            }),
        ];
        let mut responses: Vec<Response> = outcomes
            .into_iter()
            .zip(reads.iter().cycle())
            .map(|(outcome, read)| Response::Begin(outcome, read.clone()))
            .collect();
        responses.extend([
            Response::Settle(SettleOutcome::Advanced { version: 3 }),
            Response::Settle(SettleOutcome::Released),
            Response::Settle(SettleOutcome::NotOwner),
        ]);
        for response in responses {
            assert_eq!(Response::decode(&response.encode()), Ok(response));
        }
    }

    #[test]
    fn a_table_that_is_not_one_is_refused() {
        let mut w = Writer::default();
        w.bytes(&StorageKey([3; 32]).0);
        w.bytes(&[4; 16]);
        for span in [1u64, 1, 1] {
            w.u64(span);
        }
        w.u8(0);
        w.short_bytes(b"pay");
        w.short_bytes(b"nowhere");
        put_texts(&mut w, ["a", "b"].into_iter());
        put_texts(&mut w, core::iter::empty());
        w.u16(1);
        for part in ["a", "pay", "b"] {
            w.short_bytes(part.as_bytes());
        }
        let bytes = w.finish();
        let got = get_request(OP_BEGIN, &mut Reader::new(&bytes));
        assert_eq!(
            got.map_err(|e| e.code()),
            Err("transition_table_unknown_state")
        );
    }

    #[test]
    fn the_service_decides_with_the_core_rules() {
        let now = UnixMillis(1_000);
        let (response, change) = apply(&begin_request("pay"), None, now);
        // A new record: nothing was read.
        assert_eq!(
            response,
            Response::Begin(BeginOutcome::Apply { to: "paid".into() }, None)
        );
        let Change::Put(Record::Resource(claimed)) = change else {
            panic!("{change:?}")
        };
        let record = Record::Resource(claimed);
        let (busy, _) = apply(&begin_by("pay", 5), Some(&record), now);
        assert!(matches!(
            busy,
            Response::Begin(BeginOutcome::Busy { .. }, _)
        ));
        let sealed = Seal([7; 32]);
        let settle = Request::OrderSettle {
            key: StorageKey([3; 32]),
            owner: OwnerToken([4; 16]),
            ttl: Span(3_600_000),
            to: "paid".into(),
            applied: true,
            seal: Some(sealed),
        };
        let (settled, change) = apply(&settle, Some(&record), now);
        assert_eq!(
            settled,
            Response::Settle(SettleOutcome::Advanced { version: 1 })
        );
        let Change::Put(paid) = change else {
            panic!("{change:?}")
        };
        let (again, change) = apply(&begin_request("pay"), Some(&paid), now);
        assert_eq!(
            again,
            Response::Begin(
                BeginOutcome::AlreadyApplied {
                    state: "paid".into()
                },
                // The state it was decided on, with the settling filter's seal.
                Some(ReadState {
                    state: "paid".into(),
                    version: 1,
                    seal: Some(sealed),
                })
            )
        );
        assert_eq!(change, Change::Keep);
        // A key holding another kind of record is not a resource's.
        let token = Record::TokenUsed {
            expires_at: UnixMillis(5_000),
        };
        let (refused, _) = apply(&begin_request("pay"), Some(&token), now);
        assert!(matches!(refused, Response::Failed(_)));
    }
}
