//! The records and facts the decisions are checked on: built field by field from the input, or
//! taken from `vectors/decision.json` and `vectors/completion.json` with their times shifted to
//! `now`.

use super::input::ArbRecord;
use idemgate_core::client::payer::Payers;
use idemgate_core::decision::ResponseFacts;
use idemgate_core::record::{Completed, InFlight, OwnerToken, Record, StoredBody, StoredResponse};
use idemgate_core::request::fingerprint::Fingerprint;
use idemgate_core::time::UnixMillis;
use serde_json::Value;
use std::sync::OnceLock;

/// Fingerprints come from a small set so that equal ones are common.
pub(crate) fn fingerprint(b: u8) -> Fingerprint {
    Fingerprint([b"ABCD"[usize::from(b % 4)]; 32])
}

pub(crate) struct Vectors {
    /// (case now, record)
    records: Vec<(u64, Record)>,
    pub(crate) facts: Vec<ResponseFacts>,
}

pub(crate) fn vectors() -> &'static Vectors {
    static V: OnceLock<Vectors> = OnceLock::new();
    V.get_or_init(|| {
        let decision: Value =
            serde_json::from_str(include_str!("../../../../../vectors/decision.json")).unwrap();
        let completion: Value =
            serde_json::from_str(include_str!("../../../../../vectors/completion.json")).unwrap();
        let fp = |v: &Value| Fingerprint([v.as_str().unwrap().as_bytes()[0]; 32]);
        let t = |v: &Value| UnixMillis(v.as_u64().unwrap());
        let headers = |v: &Value| -> Vec<(String, String)> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .map(|h| (h[0].as_str().unwrap().into(), h[1].as_str().unwrap().into()))
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut records = Vec::new();
        for case in decision["cases"].as_array().unwrap() {
            let input = &case["input"];
            let r = &input["record"];
            let record = match r["state"].as_str() {
                Some("in_flight") => Record::InFlight(InFlight {
                    fingerprint: fp(&r["fingerprint"]),
                    owner: OwnerToken([1; 16]),
                    lease_until: t(&r["lease_until"]),
                    expires_at: t(&r["expires_at"]),
                    payers: Payers::NONE,
                }),
                Some("completed") => Record::Completed(Completed {
                    fingerprint: fp(&r["fingerprint"]),
                    response: StoredResponse {
                        status: r["status"].as_u64().unwrap() as u16,
                        headers: headers(&r["headers"]),
                        body: match r["body"].as_str() {
                            Some(b) => StoredBody::Kept(b.as_bytes().to_vec()),
                            None => StoredBody::NotKept,
                        },
                        seal: None,
                    },
                    expires_at: t(&r["expires_at"]),
                }),
                _ => continue,
            };
            records.push((input["now"].as_u64().unwrap(), record));
        }
        let mut facts = Vec::new();
        for case in completion["cases"].as_array().unwrap() {
            let f = &case["input"]["facts"];
            facts.push(match f.as_str() {
                Some("never_reached") => ResponseFacts::NeverReached,
                Some("in_doubt") => ResponseFacts::InDoubt,
                _ => ResponseFacts::Upstream {
                    status: f["status"].as_u64().unwrap() as u16,
                    headers: headers(&f["headers"]),
                    body: f["body"].as_str().map(|b| b.as_bytes().to_vec()),
                },
            });
        }
        Vectors { records, facts }
    })
}

fn shift(t: UnixMillis, from: u64, to: UnixMillis) -> UnixMillis {
    UnixMillis(
        (i128::from(to.0) + i128::from(t.0) - i128::from(from)).clamp(0, i128::from(u64::MAX))
            as u64,
    )
}

pub(crate) fn build_record(r: &ArbRecord, now: UnixMillis) -> Option<Record> {
    Some(match r {
        ArbRecord::Absent => return None,
        ArbRecord::Vector(i) => {
            let all = &vectors().records;
            let (case_now, record) = &all[usize::from(*i) % all.len()];
            match record.clone() {
                Record::InFlight(mut f) => {
                    f.lease_until = shift(f.lease_until, *case_now, now);
                    f.expires_at = shift(f.expires_at, *case_now, now);
                    Record::InFlight(f)
                }
                Record::Completed(mut c) => {
                    c.expires_at = shift(c.expires_at, *case_now, now);
                    Record::Completed(c)
                }
                other => other,
            }
        }
        ArbRecord::InFlight {
            fp,
            owner,
            lease_until,
            expires_at,
        } => Record::InFlight(InFlight {
            fingerprint: fingerprint(*fp),
            owner: OwnerToken([*owner; 16]),
            lease_until: lease_until.at(now),
            expires_at: expires_at.at(now),
            payers: Payers::NONE,
        }),
        ArbRecord::Completed {
            fp,
            status,
            headers,
            body,
            expires_at,
        } => Record::Completed(Completed {
            fingerprint: fingerprint(*fp),
            response: StoredResponse {
                status: *status,
                headers: headers.iter().map(|(n, v)| (n.text(), v.clone())).collect(),
                body: body.clone().map_or(StoredBody::NotKept, StoredBody::Kept),
                seal: None,
            },
            expires_at: expires_at.at(now),
        }),
        ArbRecord::TokenUsed { expires_at } => Record::TokenUsed {
            expires_at: expires_at.at(now),
        },
    })
}
