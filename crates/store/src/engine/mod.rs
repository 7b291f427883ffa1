//! The engines the service carries the core's exchange to. Each gives the exchange the same two
//! atomic steps — *read* (a key's value and the engine's clock, together) and *compare-and-set*
//! (write or delete only if the value's version is still the one read) — so every decision about a
//! record stays the core's ([`idemgate_core::store::remote::Operation`]), whatever holds the
//! records.

mod postgres;
mod recall;
mod redis;
mod survey;
mod tiered;

pub use self::postgres::Postgres;
pub use self::recall::Recall;
pub use self::redis::Redis;
pub use self::survey::{Survey, UsageOfScope, DEFAULT_SCAN_LIMIT, DEFAULT_TOP};
pub use self::tiered::RedisPostgres;

use crate::config::{Config, EngineKind};
use idemgate_core::client::scope::StorageKey;
use idemgate_core::store::remote::{ValueVersion, Write};
use idemgate_core::store::WriteOutcome;
use idemgate_core::time::UnixMillis;
use std::fmt;

/// How often a Redis engine checks its memory against `--claim-memory-limit`: the claims
/// admitted between two checks are what the headroom above the limit must hold.
const MEMORY_CHECK_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// Why an engine did not give an answer.
#[derive(Debug)]
#[non_exhaustive]
pub enum EngineError {
    /// Out of space (Redis `maxmemory` with `noeviction`, a full disk): a write that cannot land.
    Full,
    /// The engine did not answer within the response timeout.
    Timeout,
    /// Connection failure, an error reply, or a reply of the wrong shape.
    Unavailable(String),
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::Full => f.write_str("the store engine is out of space"),
            EngineError::Timeout => f.write_str("the store engine did not answer in time"),
            EngineError::Unavailable(why) => write!(f, "the store engine is unavailable: {why}"),
        }
    }
}

/// What a compare-and-set did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cas {
    Written,
    /// Not written: the key held another version (or a speculative write was off the engine's
    /// clock). An engine that read the key in the same atomic step gives its clock and the key's
    /// value, so the exchange decides again without a read.
    Conflict(Option<(UnixMillis, Option<Vec<u8>>)>),
}

/// The configured engine.
#[derive(Clone)]
#[non_exhaustive]
pub enum Engine {
    /// Redis or Redis Cluster, with what this replica wrote for the claims it forwarded.
    Redis(Redis, std::sync::Arc<Recall>),
    Postgres(Postgres),
    /// Redis in front of PostgreSQL: Redis answers what it can, PostgreSQL decides.
    RedisPostgres(RedisPostgres),
}

impl Engine {
    /// Connects to the engine `config` names (bounded by its connect timeout).
    pub async fn connect(config: &Config) -> Result<Engine, String> {
        match config.engine {
            EngineKind::Redis => Redis::connect(
                &config.redis,
                config.cluster,
                config.key_prefix.clone(),
                &config.redis_tls,
                config.connect_timeout,
                config.op_timeout,
            )
            .await
            .map(|redis| {
                if let Some(limit) = config.claim_memory_limit {
                    redis.watch_memory(limit, MEMORY_CHECK_EVERY);
                }
                Engine::Redis(redis, Default::default())
            })
            .map_err(|e| {
                let urls: Vec<String> = config.redis.iter().map(|u| redacted(u)).collect();
                format!("cannot connect to {}: {e}", urls.join(","))
            }),
            EngineKind::Postgres => {
                let url = config
                    .postgres
                    .as_deref()
                    .ok_or("--engine postgres needs --postgres")?;
                Postgres::connect(
                    url,
                    config.connect_timeout,
                    config.op_timeout,
                    config.sweep_every,
                )
                .await
                .map(Engine::Postgres)
                .map_err(|e| e.to_string())
            }
            EngineKind::RedisPostgres => {
                let url = config
                    .postgres
                    .as_deref()
                    .ok_or("--engine redis+postgres needs --postgres")?;
                let postgres = Postgres::connect(
                    url,
                    config.connect_timeout,
                    config.op_timeout,
                    config.sweep_every,
                )
                .await
                .map_err(|e| e.to_string())?;
                let redis = tiered::RedisSettings {
                    urls: config.redis.clone(),
                    cluster: config.cluster,
                    prefix: config.key_prefix.clone(),
                    tls: config.redis_tls.clone(),
                    connect_timeout: config.connect_timeout,
                };
                Ok(Engine::RedisPostgres(
                    RedisPostgres::connect(redis, postgres, config.op_timeout).await,
                ))
            }
        }
    }

    /// The key's value and the engine's clock, read in one atomic step. `authoritative`: the
    /// exchange read before and its compare-and-set met another version — an engine with a
    /// cache in front reads its source of truth this time.
    pub async fn read(
        &self,
        key: &StorageKey,
        authoritative: bool,
    ) -> Result<(UnixMillis, Option<Vec<u8>>), EngineError> {
        let _ = authoritative;
        match self {
            Engine::Redis(redis, _) => redis.read(&redis.redis_key(key)).await,
            Engine::Postgres(postgres) => postgres.read(key).await,
            Engine::RedisPostgres(tiered) => tiered.read(key, authoritative).await,
        }
    }

    /// Writes (or deletes) only if the key still holds `expect` (`None`: absent). `at`: the
    /// service's clock for a speculative write, which only an engine that [`speculates`]
    /// carries out; any other refuses it (a conflict with nothing found: the exchange reads).
    ///
    /// [`speculates`]: Engine::speculates
    pub async fn compare_and_set(
        &self,
        key: &StorageKey,
        expect: Option<ValueVersion>,
        write: &Write,
        at: Option<UnixMillis>,
    ) -> Result<Cas, EngineError> {
        let plain = |outcome| match outcome {
            WriteOutcome::Written => Cas::Written,
            WriteOutcome::Conflict => Cas::Conflict(None),
        };
        match self {
            Engine::Redis(redis, _) => {
                redis
                    .compare_and_set_found(&redis.redis_key(key), expect, write, at)
                    .await
            }
            _ if at.is_some() => Ok(Cas::Conflict(None)),
            Engine::Postgres(postgres) => postgres
                .compare_and_set(key, expect, write)
                .await
                .map(plain),
            Engine::RedisPostgres(tiered) => {
                tiered.compare_and_set(key, expect, write).await.map(plain)
            }
        }
    }

    /// Whether the exchange may start with a speculative compare-and-set (one round trip): only
    /// Redis, whose script checks the clock and answers a refusal with what it found. The
    /// PostgreSQL engines keep read → compare-and-set (two steps).
    pub fn speculates(&self) -> bool {
        matches!(self, Engine::Redis(..))
    }

    /// Whether new claims and token uses are refused for memory (Redis past
    /// `--claim-memory-limit`): the rest of `maxmemory` is kept for finishes.
    pub fn refuses_new_records(&self) -> bool {
        match self {
            Engine::Redis(redis, _) => redis.is_tight(),
            _ => false,
        }
    }

    /// What this replica remembers writing for the claims it forwarded (Redis only).
    pub fn recall(&self) -> Option<&Recall> {
        match self {
            Engine::Redis(_, recall) => Some(recall),
            _ => None,
        }
    }

    /// The engine's own counters in Prometheus text (only `redis+postgres` has some), for
    /// `/metrics` to append.
    pub fn render_metrics(&self) -> String {
        match self {
            Engine::RedisPostgres(tiered) => tiered.render_metrics(),
            _ => String::new(),
        }
    }

    /// Whether the engine answers: what `/readyz` asks.
    pub async fn ping(&self) -> Result<(), EngineError> {
        match self {
            Engine::Redis(redis, _) => redis.ping().await,
            Engine::Postgres(postgres) => postgres.ping().await,
            Engine::RedisPostgres(tiered) => tiered.ping().await,
        }
    }
}

/// Operator controls: what `records evict` and `stats` ask of every engine.
impl Engine {
    /// Deletes the record under `key`, whatever it holds: the next claim of the key forwards
    /// again. Whether there was one.
    pub async fn evict(&self, key: &StorageKey) -> Result<bool, EngineError> {
        match self {
            Engine::Redis(redis, _) => redis.evict(&redis.redis_key(key)).await,
            Engine::Postgres(postgres) => postgres.evict(key).await,
            Engine::RedisPostgres(tiered) => tiered.evict(key).await,
        }
    }

    /// Records, bytes and the `top` scopes by records (a Redis survey sees at most `scan_limit`
    /// keys).
    pub async fn survey(&self, top: usize, scan_limit: u64) -> Result<Survey, EngineError> {
        match self {
            Engine::Redis(redis, _) => redis.survey(top, scan_limit).await,
            Engine::Postgres(postgres) => postgres.survey(top).await,
            Engine::RedisPostgres(tiered) => tiered.survey(top).await,
        }
    }
}

/// `url` without its password (`rediss://user:***@host`), for messages: a URL may carry one.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "(not a URL)".into();
    };
    // Everything before the last '@' is user information, even if it holds a '/' or a '?'
    // that should have been percent-encoded.
    match rest.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
            let hidden = if userinfo.contains(':') { ":***" } else { "" };
            format!("{scheme}://{user}{hidden}@{host}")
        }
        None => url.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn passwords_are_never_in_messages() {
        assert_eq!(
            redacted("rediss://app:hunter2@cache:6380/0"),
            "rediss://app:***@cache:6380/0"
        );
        assert_eq!(redacted("redis://:hunter2@h"), "redis://:***@h");
        assert_eq!(redacted("redis://h:1"), "redis://h:1");
        assert_eq!(redacted("redis://user@h"), "redis://user@h");
        assert_eq!(redacted("nonsense hunter2"), "(not a URL)");
        assert!(!redacted("rediss://a:b@c:hunter2@h/x").contains("hunter2"));
        assert_eq!(redacted("rediss://u:hun/ter2@h:1"), "rediss://u:***@h:1");
    }
}
