//! The space a record takes in its payers' usage: until when, and how many bytes —
//! what a share counts, for every kind of record, in both stores.

use crate::policy::RECORD_OVERHEAD;
use crate::record::{InFlight, Record, StoredBody, StoredResponse};
use crate::time::UnixMillis;

/// The space one record takes in its payers' usage: until when, and how many bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Space {
    pub(crate) until: UnixMillis,
    pub(crate) bytes: u64,
}

impl Space {
    /// What `record` takes: [`Record::holds_space_until`], and its bytes in memory.
    pub(crate) fn of(record: &Record) -> Space {
        let bytes = match record {
            Record::Completed(completed) => answer_bytes(&completed.response),
            _ => RECORD_OVERHEAD,
        };
        Space {
            until: record.holds_space_until(),
            bytes,
        }
    }

    /// What a claim takes: until its lease ends, the record alone (its answer is not known yet).
    pub(crate) fn of_claim(claim: &InFlight) -> Space {
        Space {
            until: claim.holds_space_until(),
            bytes: RECORD_OVERHEAD,
        }
    }

    /// What a stored `answer` takes until `until`.
    pub(crate) fn of_answer(answer: &StoredResponse, until: UnixMillis) -> Space {
        Space {
            until,
            bytes: answer_bytes(answer),
        }
    }

    /// What a record without an answer takes until `until` (a token use).
    pub(crate) fn bare(until: UnixMillis) -> Space {
        Space {
            until,
            bytes: RECORD_OVERHEAD,
        }
    }
}

/// A stored answer's bytes in memory: body, replayed headers, and the record's overhead.
fn answer_bytes(answer: &StoredResponse) -> u64 {
    let body = match &answer.body {
        StoredBody::Kept(body) => body.len(),
        StoredBody::NotKept => 0,
    };
    let headers: usize = answer
        .headers
        .iter()
        .map(|(name, value)| name.len() + value.len())
        .sum();
    RECORD_OVERHEAD.saturating_add(u64::try_from(body + headers).unwrap_or(u64::MAX))
}
