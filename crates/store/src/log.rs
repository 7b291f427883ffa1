//! Logs: `tracing` events on stderr, as text or JSON lines, filtered by level.
//!
//! Besides operational messages, every record's life is logged: one structured line when a
//! record is created, completed, released, evicted or a token is used — with the storage key's
//! log label (its first 6 bytes, the label the filter's debug logs use), never the whole key (it
//! names the Redis key or row; and a client's idempotency key never reaches the service at all).

use crate::config::{LogFormat, LogSettings};
use idemgate_core::client::scope::StorageKey;
use idemgate_core::store::remote::Response;
use idemgate_core::{ClaimOutcome, ConsumeOutcome, FinishOutcome};
use tracing_subscriber::EnvFilter;

/// The target of record events, so a filter can keep or drop them alone
/// (`RUST_LOG=info,idemgate_store::record=off`).
pub const RECORD_TARGET: &str = "idemgate_store::record";

/// Installs the process-wide subscriber. Called once, before anything is logged.
pub fn init(settings: &LogSettings) -> Result<(), String> {
    let filter = EnvFilter::builder()
        .parse(&settings.filter)
        .map_err(|e| format!("log filter {:?}: {e}", settings.filter))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let installed = match settings.format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
        LogFormat::Text => builder.try_init(),
    };
    installed.map_err(|e| format!("cannot install the logger: {e}"))
}

/// Logs `message` at error level before [`init`] could run (a bad command line): as a text line,
/// since the settings that would say otherwise are what failed.
pub fn early_error(message: &str) {
    let subscriber = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(subscriber, || tracing::error!("{message}"));
}

/// What happened to a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordEvent {
    /// A claim landed: the request goes upstream (a take-over of an expired claim too).
    Created,
    /// The owner's answer is stored and will be replayed.
    Completed,
    /// The owner gave the key back: the next retry runs again.
    Released,
    /// An operator removed the record: the next retry runs again.
    Evicted,
    /// A one-time token was used.
    TokenUsed,
}

impl RecordEvent {
    pub fn name(self) -> &'static str {
        match self {
            RecordEvent::Created => "created",
            RecordEvent::Completed => "completed",
            RecordEvent::Released => "released",
            RecordEvent::Evicted => "evicted",
            RecordEvent::TokenUsed => "token_used",
        }
    }

    /// The event the core's answer means, if it changed a record (a replay, a conflict or a
    /// failure changed nothing).
    pub fn of(response: &Response) -> Option<RecordEvent> {
        match response {
            Response::Claim(ClaimOutcome::Forward { .. }) => Some(RecordEvent::Created),
            Response::Finish(FinishOutcome::Stored) => Some(RecordEvent::Completed),
            Response::Finish(FinishOutcome::Released) => Some(RecordEvent::Released),
            Response::Consume(ConsumeOutcome::Consumed) => Some(RecordEvent::TokenUsed),
            _ => None,
        }
    }
}

/// The storage key's log label ([`StorageKey::log_label`], the same the filter logs): enough to
/// follow one record from Envoy's log to this one. It is a prefix of the engine's key name, so
/// whoever reads the logs and can scan the engine can find the record: guard both alike.
pub fn key_hash(key: &StorageKey) -> String {
    key.log_label()
}

/// One structured line for a record's event (target [`RECORD_TARGET`], level info).
pub fn record_event(event: RecordEvent, key: &StorageKey) {
    tracing::info!(
        target: RECORD_TARGET,
        event = event.name(),
        key_hash = %key_hash(key),
        "record {}",
        event.name()
    );
}

/// [`record_event`] for an operator's action, with where it came from (`cli`, `admin`).
pub fn record_event_via(event: RecordEvent, key: &StorageKey, via: &str) {
    tracing::info!(
        target: RECORD_TARGET,
        event = event.name(),
        key_hash = %key_hash(key),
        via = %via,
        "record {}",
        event.name()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use idemgate_core::hash::to_hex;
    use idemgate_core::record::OwnerToken;

    #[test]
    fn the_hash_is_stable_short_and_not_the_key() {
        let key = StorageKey::from_stored([7u8; 32]);
        let hash = key_hash(&key);
        assert_eq!(hash.len(), 12);
        assert_eq!(hash, key.log_label());
        assert_ne!(hash, to_hex(key.as_bytes()));
        assert_ne!(hash, key_hash(&StorageKey::from_stored([8u8; 32])));
    }

    #[test]
    fn events_follow_the_core_outcome() {
        let forward = Response::Claim(ClaimOutcome::Forward {
            owner: OwnerToken([1; 16]),
            takeover: true,
        });
        assert_eq!(RecordEvent::of(&forward), Some(RecordEvent::Created));
        assert_eq!(
            RecordEvent::of(&Response::Finish(FinishOutcome::Stored)),
            Some(RecordEvent::Completed)
        );
        assert_eq!(
            RecordEvent::of(&Response::Finish(FinishOutcome::Released)),
            Some(RecordEvent::Released)
        );
        assert_eq!(
            RecordEvent::of(&Response::Consume(ConsumeOutcome::Consumed)),
            Some(RecordEvent::TokenUsed)
        );
        for unchanged in [
            Response::Finish(FinishOutcome::NotOwner),
            Response::Finish(FinishOutcome::KeptInFlight),
            Response::Claim(ClaimOutcome::Mismatch),
            Response::Consume(ConsumeOutcome::AlreadyUsed),
        ] {
            assert_eq!(RecordEvent::of(&unchanged), None, "{unchanged:?}");
        }
    }
}
