//! The core's defaults and code tables, handed to JS once as one JSON document, so the package's
//! defaults (retry policy, fingerprint configuration, token endpoint, replay header) and the names
//! behind the numeric codes other exports return are the core's, with one small export instead of
//! one per value (each export costs JS glue).

use crate::retry::{OUTCOMES, REASONS};
use alloc::string::String;
use idemgate_core::fingerprint::FingerprintSpec;
use idemgate_core::intent::Settled;
use idemgate_core::retry::{RetryPolicy, StatusClass};
use wasm_bindgen::prelude::*;

/// The core's defaults and code tables as JSON:
///
/// ```json
/// {"version":"0.1.0",
///  "retry":{"maxAttempts":5,"baseDelayMs":250,"maxDelayMs":10000,"maxTotalMs":30000},
///  "fingerprint":{"mode":"auto","headers":["content-type"],"fields":[],"maxDepth":64,"maxNumberLen":64},
///  "tokenEndpoint":"/.idemgate/token","keyHeader":"idempotency-key",
///  "replayedHeader":"idempotent-replayed",
///  "outcomes":[…],"reasons":[…],"statusClasses":[…],"settled":[["succeed",false],…],
///  "unanswered":1,"resolved":0}
/// ```
///
/// `outcomes` names `retryNext`'s outcome codes, `reasons` its final reasons (`-1 - code`),
/// `statusClasses` the codes of `classifyStatus`, `settled` the codes of `settle` (event, whether
/// the key is kept); `unanswered` and `resolved` are the `settled` codes of a submission without
/// an answer and of a sender that resolved without an HTTP answer.
#[wasm_bindgen]
pub fn defaults() -> String {
    let mut out = Json(String::with_capacity(640));
    out.raw("{\"version\":");
    out.string(env!("CARGO_PKG_VERSION"));
    let retry = RetryPolicy::default();
    out.raw(",\"retry\":{\"maxAttempts\":");
    out.number(u64::from(retry.max_attempts));
    out.raw(",\"baseDelayMs\":");
    out.number(retry.base_delay.as_millis());
    out.raw(",\"maxDelayMs\":");
    out.number(retry.max_delay.as_millis());
    out.raw(",\"maxTotalMs\":");
    out.number(retry.max_total.as_millis());
    let fp = FingerprintSpec::default();
    out.raw("},\"fingerprint\":{\"mode\":");
    out.string(fp.mode.name());
    out.raw(",\"headers\":");
    out.strings(fp.headers.iter().map(String::as_str));
    out.raw(",\"fields\":[],\"maxDepth\":");
    out.number(u64::from(fp.json_limits.max_depth));
    out.raw(",\"maxNumberLen\":");
    out.number(u64::from(fp.json_limits.max_number_len));
    out.raw("},\"tokenEndpoint\":");
    out.string(idemgate_core::token::ISSUE_PATH);
    out.raw(",\"keyHeader\":");
    out.string(idemgate_core::key::HEADER);
    out.raw(",\"replayedHeader\":");
    out.string(idemgate_core::answer::REPLAYED_HEADER);
    out.raw(",\"outcomes\":");
    out.strings(OUTCOMES.iter().copied());
    out.raw(",\"reasons\":");
    out.strings(REASONS.iter().map(|r| r.code()));
    out.raw(",\"statusClasses\":");
    out.strings(StatusClass::ALL.iter().map(|c| c.name()));
    out.raw(",\"settled\":[");
    for (i, settled) in Settled::ALL.iter().enumerate() {
        out.raw(if i == 0 { "[" } else { ",[" });
        out.string(settled.event());
        out.raw(if settled.keeps_key() {
            ",true]"
        } else {
            ",false]"
        });
    }
    out.raw("],\"unanswered\":");
    out.number(settled_code(Settled::UNANSWERED));
    out.raw(",\"resolved\":");
    out.number(settled_code(Settled::RESOLVED));
    out.raw("}");
    out.0
}

/// The code of `settled` (its index in `Settled::ALL`).
pub fn settled_code(settled: Settled) -> u64 {
    let index = Settled::ALL.iter().position(|s| *s == settled);
    index.unwrap_or(Settled::ALL.len()) as u64
}

/// A minimal JSON writer: the values above are ASCII names and paths without `"` or `\` (checked
/// by the tests), and whole numbers, so no escaping and no `core::fmt` (size).
struct Json(String);

impl Json {
    fn raw(&mut self, text: &str) {
        self.0.push_str(text);
    }

    fn string(&mut self, text: &str) {
        self.0.push('"');
        self.0.push_str(text);
        self.0.push('"');
    }

    fn strings<'a>(&mut self, items: impl Iterator<Item = &'a str>) {
        self.0.push('[');
        for (i, item) in items.enumerate() {
            if i > 0 {
                self.0.push(',');
            }
            self.string(item);
        }
        self.0.push(']');
    }

    fn number(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for &d in &digits[at..] {
            self.0.push(char::from(d));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names_are_plain_json() {
        let mut out = Json(String::new());
        for n in [0, 7, 10, 30_000, u64::MAX] {
            out.number(n);
            out.raw(" ");
        }
        assert_eq!(out.0, "0 7 10 30000 18446744073709551615 ");
        let text = defaults();
        assert!(text.starts_with("{\"version\":\""));
        assert!(text.ends_with(",\"unanswered\":1,\"resolved\":0}"));
        assert!(text.contains(
            "\"retry\":{\"maxAttempts\":5,\"baseDelayMs\":250,\"maxDelayMs\":10000,\"maxTotalMs\":30000}"
        ));
        assert!(text.contains(
            "\"settled\":[[\"succeed\",false],[\"fail_retryable\",true],[\"fail_final\",false]]"
        ));
        // No name needs escaping: between the quotes there is never a backslash.
        assert!(!text.contains('\\'));
    }
}
