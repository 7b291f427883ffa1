//! `--engine redis+postgres`: Redis in front, PostgreSQL decides.
//!
//! - **Every compare-and-set goes to PostgreSQL** and is final only once PostgreSQL has it; its
//!   version check (and the primary key under it) is what makes a claim, a finish, a release or a
//!   token use land exactly once. After PostgreSQL accepted a write it is written through to
//!   Redis, as a compare-and-set there too (the value replaces exactly the version PostgreSQL
//!   replaced; anything else Redis holds for the key is deleted), so out-of-order write-throughs
//!   from several replicas leave Redis absent rather than wrong. A failed write-through is logged
//!   and counted and never fails the operation.
//! - **Reads** are answered by Redis when it holds the key (in-flight duplicates, replays), unless
//!   the exchange asks for the source of truth (`authoritative`: its compare-and-set met another
//!   version) or PostgreSQL is not known to be up. A Redis miss, a Redis failure or an
//!   authoritative read reads PostgreSQL, with the database's clock. Redis is filled from a
//!   PostgreSQL read only with settled values (a completed answer, a token's use: nothing but
//!   expiry changes them), and an authoritative read removes what Redis holds for the key if it
//!   is not what PostgreSQL holds.
//! - **What Redis may hold**: only values PostgreSQL accepted, a settled one until it expires, a
//!   claim in flight only until [`LEASE_MARGIN`] before its lease ends. So a stale entry can only
//!   cost a conflict (a 409 within a lease, or a compare-and-set that PostgreSQL refuses, after
//!   which the exchange reads PostgreSQL): every decision that forwards a request (a claim of an
//!   absent key, a takeover after a lease) is made on a PostgreSQL read, on its clock, and every
//!   write is checked by PostgreSQL. Redis losing every key only turns hits into misses.
//! - **PostgreSQL's health** is kept by every call to it and by a heartbeat (`SELECT 1` each
//!   [`HEARTBEAT`] when no call succeeded meanwhile): while it is down, or has not answered for
//!   [`PG_FRESH`], Redis answers nothing, so every operation fails the typed way whatever Redis
//!   holds.
//! - **Redis's health**: a failed or slow Redis call (bounded by a share of the operation timeout)
//!   sends every operation to PostgreSQL alone for [`REDIS_BACKOFF`]; Redis is never a reason to
//!   fail. A Redis that cannot be reached at start is connected in the background.

use super::{EngineError, Postgres, Redis};
use idemgate_core::client::scope::StorageKey;
use idemgate_core::store::remote::{cache_hold, CacheHold, VERSION_LEN};
use idemgate_core::store::remote::{ValueVersion, Write};
use idemgate_core::store::WriteOutcome;
use idemgate_core::time::UnixMillis;
use std::fmt::Write as _;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

/// Between PostgreSQL heartbeats (skipped while operations keep succeeding).
pub const HEARTBEAT: Duration = Duration::from_secs(1);
/// Redis answers only while PostgreSQL answered within this long.
pub const PG_FRESH: Duration = Duration::from_secs(3);
/// After a Redis failure, PostgreSQL alone answers for this long before Redis is tried again.
pub const REDIS_BACKOFF: Duration = Duration::from_secs(1);
/// A claim in flight leaves Redis this long before its lease ends, so the clocks of Redis and
/// PostgreSQL may disagree by up to this much before a takeover (decided on PostgreSQL) could
/// meet an old claim still served by Redis.
pub const LEASE_MARGIN: Duration = Duration::from_secs(1);
/// Between attempts to connect a Redis that was down at start.
const REDIS_RECONNECT: Duration = Duration::from_secs(1);

/// Redis in front of PostgreSQL. Clones share connections, health and counters.
#[derive(Clone)]
pub struct RedisPostgres {
    /// Set once connected (at start, or later in the background).
    redis: Arc<OnceLock<Redis>>,
    postgres: Postgres,
    /// Bounds each Redis call: a stopped Redis costs this, not the operation.
    redis_budget: Duration,
    state: Arc<State>,
    _tasks: Arc<Tasks>,
}

#[derive(Default)]
struct State {
    /// Whether the last PostgreSQL call (or heartbeat) got an answer.
    pg_up: AtomicBool,
    /// Milliseconds since `epoch` of the last answer from PostgreSQL.
    pg_last_ok: AtomicU64,
    /// Milliseconds since `epoch` until which Redis is not asked.
    redis_skip_until: AtomicU64,
    redis_hits: AtomicU64,
    redis_misses: AtomicU64,
    redis_failures: AtomicU64,
    redis_fills: AtomicU64,
    write_through_failures: AtomicU64,
    /// Reads that went to PostgreSQL because it was not known to be up.
    pg_down_reads: AtomicU64,
    epoch: Epoch,
}

struct Epoch(Instant);

impl Default for Epoch {
    fn default() -> Self {
        Epoch(Instant::now())
    }
}

/// Background tasks, aborted when the last clone drops.
struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// How to reach Redis (what [`Redis::connect`] takes).
pub struct RedisSettings {
    pub urls: Vec<String>,
    pub cluster: bool,
    pub prefix: String,
    pub tls: crate::config::RedisTls,
    pub connect_timeout: Duration,
}

impl State {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.0.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn pg_answered(&self) {
        self.pg_last_ok.store(self.now_ms(), Ordering::Relaxed);
        if !self.pg_up.swap(true, Ordering::Relaxed) {
            tracing::info!("PostgreSQL answers again; Redis answers reads again");
        }
    }

    fn pg_failed(&self, e: &EngineError) {
        if self.pg_up.swap(false, Ordering::Relaxed) {
            tracing::warn!("PostgreSQL failed ({e}); Redis answers nothing until it is back");
        }
    }

    /// Whether Redis may answer a read: PostgreSQL is up and answered lately.
    fn pg_trusted(&self) -> bool {
        self.pg_up.load(Ordering::Relaxed)
            && self
                .now_ms()
                .saturating_sub(self.pg_last_ok.load(Ordering::Relaxed))
                < millis(PG_FRESH)
    }

    fn redis_failed(&self, what: &str, e: &dyn std::fmt::Display) {
        self.redis_failures.fetch_add(1, Ordering::Relaxed);
        let now = self.now_ms();
        let was = self
            .redis_skip_until
            .swap(now.saturating_add(millis(REDIS_BACKOFF)), Ordering::Relaxed);
        if was <= now {
            tracing::warn!(
                "Redis {what} failed ({e}); PostgreSQL alone answers for {REDIS_BACKOFF:?}"
            );
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl RedisPostgres {
    /// Puts `redis` in front of `postgres` (already connected: PostgreSQL must be there at start,
    /// Redis need not be) and starts the heartbeat.
    pub async fn connect(
        redis: RedisSettings,
        postgres: Postgres,
        op_timeout: Duration,
    ) -> RedisPostgres {
        // A share of the operation: a stopped Redis must leave time for PostgreSQL.
        let redis_budget =
            (op_timeout / 4).clamp(Duration::from_millis(10), Duration::from_millis(500));
        // PostgreSQL just answered: it was connected and migrated.
        let state = Arc::new(State {
            pg_up: AtomicBool::new(true),
            ..State::default()
        });
        let slot = Arc::new(OnceLock::new());
        let mut tasks = vec![tokio::spawn(heartbeat(
            postgres.clone(),
            Arc::downgrade(&state),
        ))];
        match connect_redis(&redis, redis_budget).await {
            Ok(connected) => {
                let _ = slot.set(connected);
            }
            Err(e) => {
                tracing::warn!(
                    "cannot connect to Redis yet ({e}); PostgreSQL alone answers until it can"
                );
                tasks.push(tokio::spawn(reconnect(
                    redis,
                    redis_budget,
                    Arc::downgrade(&slot),
                )));
            }
        }
        RedisPostgres {
            redis: slot,
            postgres,
            redis_budget,
            state,
            _tasks: Arc::new(Tasks(tasks)),
        }
    }

    /// The key's value and a clock: Redis's (`TIME`) for a Redis hit, the database's otherwise.
    pub async fn read(
        &self,
        key: &StorageKey,
        authoritative: bool,
    ) -> Result<(UnixMillis, Option<Vec<u8>>), EngineError> {
        let pg_trusted = self.state.pg_trusted();
        let redis = self.redis();
        // Whether Redis was asked and had nothing: a settled value read now may fill it.
        let mut missed = false;
        if !authoritative && !pg_trusted {
            self.state.pg_down_reads.fetch_add(1, Ordering::Relaxed);
        }
        if let (false, true, Some(redis)) = (authoritative, pg_trusted, redis) {
            let rkey = redis.redis_key(key);
            match self.redis_call("read", redis.read(&rkey)).await {
                Some((now, Some(value))) => {
                    self.state.redis_hits.fetch_add(1, Ordering::Relaxed);
                    return Ok((now, Some(value)));
                }
                Some((_, None)) => {
                    self.state.redis_misses.fetch_add(1, Ordering::Relaxed);
                    missed = true;
                }
                None => {}
            }
        }
        let (now, value) = self.pg(self.postgres.read(key)).await?;
        if let Some(redis) = self.redis() {
            if authoritative {
                self.correct(redis, key, value.as_deref()).await;
            } else if missed {
                self.fill(redis, key, value.as_deref()).await;
            }
        }
        Ok((now, value))
    }

    /// PostgreSQL's compare-and-set; once written, the same write through to Redis.
    pub async fn compare_and_set(
        &self,
        key: &StorageKey,
        expect: Option<ValueVersion>,
        write: &Write,
    ) -> Result<WriteOutcome, EngineError> {
        let outcome = self
            .pg(self.postgres.compare_and_set(key, expect, write))
            .await?;
        if outcome == WriteOutcome::Written {
            if let Some(redis) = self.redis() {
                self.write_through(redis, key, expect, write).await;
            }
        }
        Ok(outcome)
    }

    /// PostgreSQL's `SELECT 1`: Redis does not make the service ready or unready.
    pub async fn ping(&self) -> Result<(), EngineError> {
        self.pg(self.postgres.ping()).await
    }

    /// The counters of this engine, in Prometheus text.
    pub fn render_metrics(&self) -> String {
        let s = &self.state;
        let mut out = String::new();
        let counters: [(&str, &str, &AtomicU64); 6] = [
            ("redis_hits", "Reads Redis answered.", &s.redis_hits),
            (
                "redis_misses",
                "Reads Redis had no value for (PostgreSQL answered).",
                &s.redis_misses,
            ),
            (
                "redis_failures",
                "Redis calls that failed or timed out (PostgreSQL answered alone).",
                &s.redis_failures,
            ),
            (
                "redis_fills",
                "Settled values copied from PostgreSQL into Redis.",
                &s.redis_fills,
            ),
            (
                "redis_write_through_failures",
                "Writes PostgreSQL accepted that could not be written through to Redis.",
                &s.write_through_failures,
            ),
            (
                "postgres_down_reads",
                "Reads Redis was not asked for because PostgreSQL was not known to be up.",
                &s.pg_down_reads,
            ),
        ];
        for (name, help, counter) in counters {
            let _ = writeln!(out, "# HELP idemgate_store_{name}_total {help}");
            let _ = writeln!(out, "# TYPE idemgate_store_{name}_total counter");
            let _ = writeln!(
                out,
                "idemgate_store_{name}_total {}",
                counter.load(Ordering::Relaxed)
            );
        }
        out.push_str(
            "# HELP idemgate_store_postgres_up Whether PostgreSQL answered the last call.\n",
        );
        out.push_str("# TYPE idemgate_store_postgres_up gauge\n");
        let _ = writeln!(
            out,
            "idemgate_store_postgres_up {}",
            u8::from(s.pg_up.load(Ordering::Relaxed))
        );
        out
    }

    /// Redis, when connected and not backing off after a failure.
    fn redis(&self) -> Option<&Redis> {
        let skip_until = self.state.redis_skip_until.load(Ordering::Relaxed);
        if skip_until > self.state.now_ms() {
            return None;
        }
        self.redis.get()
    }

    /// One PostgreSQL call, keeping the health flag.
    async fn pg<T>(
        &self,
        call: impl Future<Output = Result<T, EngineError>>,
    ) -> Result<T, EngineError> {
        let result = call.await;
        match &result {
            // Out of space is an answer: the database is there.
            Ok(_) | Err(EngineError::Full) => self.state.pg_answered(),
            Err(e) => self.state.pg_failed(e),
        }
        result
    }

    /// One Redis call, bounded by the Redis budget; a failure is counted and starts the backoff.
    async fn redis_call<T>(
        &self,
        what: &str,
        call: impl Future<Output = Result<T, EngineError>>,
    ) -> Option<T> {
        match tokio::time::timeout(self.redis_budget, call).await {
            Ok(Ok(answer)) => Some(answer),
            Ok(Err(e)) => {
                self.state.redis_failed(what, &e);
                None
            }
            Err(_) => {
                self.state.redis_failed(what, &"no answer in time");
                None
            }
        }
    }

    /// After PostgreSQL wrote `write` over `expect`: the same change in Redis, or, where Redis
    /// holds something else, nothing for the key.
    async fn write_through(
        &self,
        redis: &Redis,
        key: &StorageKey,
        expect: Option<ValueVersion>,
        write: &Write,
    ) {
        let rkey = redis.redis_key(key);
        let through = match write {
            Write::Set { value, .. } => match cache_hold(key, value) {
                Some(CacheHold::Settled { until }) => Write::Set {
                    value: value.clone(),
                    expires_at: until,
                },
                Some(CacheHold::InFlight { lease_until }) => {
                    match lease_until.0.checked_sub(millis(LEASE_MARGIN)) {
                        Some(until) if until > 0 => Write::Set {
                            value: value.clone(),
                            expires_at: UnixMillis(until),
                        },
                        _ => Write::Delete,
                    }
                }
                None => Write::Delete,
            },
            Write::Delete => Write::Delete,
        };
        match self
            .redis_call(
                "write-through",
                redis.compare_and_set(&rkey, expect, &through),
            )
            .await
        {
            Some(WriteOutcome::Written) => {}
            // Redis held another version than PostgreSQL did (a write-through lost or out of
            // order): whatever it holds is not PostgreSQL's value any more.
            Some(WriteOutcome::Conflict) => {
                let fresh = match &through {
                    Write::Set { value, .. } => Some(value.as_slice()),
                    Write::Delete => None,
                };
                if !self.evict_unless(redis, &rkey, fresh).await {
                    self.state
                        .write_through_failures
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
            _ => {
                self.state
                    .write_through_failures
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// After a PostgreSQL read on a Redis miss: a settled value goes into Redis (only if Redis
    /// still has nothing for the key).
    async fn fill(&self, redis: &Redis, key: &StorageKey, value: Option<&[u8]>) {
        let Some(value) = value else { return };
        let Some(CacheHold::Settled { until }) = cache_hold(key, value) else {
            return;
        };
        let write = Write::Set {
            value: value.to_vec(),
            expires_at: until,
        };
        let rkey = redis.redis_key(key);
        if let Some(WriteOutcome::Written) = self
            .redis_call("fill", redis.compare_and_set(&rkey, None, &write))
            .await
        {
            self.state.redis_fills.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// After an authoritative read: Redis keeps the key only if it holds what PostgreSQL holds;
    /// a settled value PostgreSQL holds is filled in.
    async fn correct(&self, redis: &Redis, key: &StorageKey, value: Option<&[u8]>) {
        let rkey = redis.redis_key(key);
        if !self.evict_unless(redis, &rkey, value).await {
            return;
        }
        self.fill(redis, key, value).await;
    }

    /// Deletes what Redis holds under `rkey` unless it is `keep`. Whether Redis now holds `keep`
    /// or nothing (false: Redis failed, or another write came first).
    async fn evict_unless(&self, redis: &Redis, rkey: &str, keep: Option<&[u8]>) -> bool {
        let Some((_, current)) = self.redis_call("read", redis.read(rkey)).await else {
            return false;
        };
        let Some(current) = current else { return true };
        if Some(current.as_slice()) == keep {
            return true;
        }
        let Some(version) = current.first_chunk::<VERSION_LEN>() else {
            // Not a value this protocol writes; leave it to the core to call corrupt.
            return false;
        };
        matches!(
            self.redis_call(
                "evict",
                redis.compare_and_set(rkey, Some(ValueVersion(*version)), &Write::Delete),
            )
            .await,
            Some(WriteOutcome::Written)
        )
    }
}

async fn connect_redis(settings: &RedisSettings, budget: Duration) -> Result<Redis, EngineError> {
    Redis::connect(
        &settings.urls,
        settings.cluster,
        settings.prefix.clone(),
        &settings.tls,
        settings.connect_timeout,
        budget,
    )
    .await
}

/// Connects Redis in the background until it answers (or the engine is gone).
async fn reconnect(settings: RedisSettings, budget: Duration, slot: Weak<OnceLock<Redis>>) {
    loop {
        tokio::time::sleep(REDIS_RECONNECT).await;
        if slot.strong_count() == 0 {
            return;
        }
        if let Ok(redis) = connect_redis(&settings, budget).await {
            if let Some(slot) = slot.upgrade() {
                let _ = slot.set(redis);
                tracing::info!("connected to Redis; it answers reads again");
            }
            return;
        }
    }
}

/// `SELECT 1` every [`HEARTBEAT`] unless an operation got an answer from PostgreSQL meanwhile:
/// it notices a database that stopped answering while Redis answers every read, and one that is
/// back while nothing asks it.
async fn heartbeat(postgres: Postgres, state: Weak<State>) {
    loop {
        tokio::time::sleep(HEARTBEAT).await;
        let Some(state) = state.upgrade() else { return };
        let since_ok = state
            .now_ms()
            .saturating_sub(state.pg_last_ok.load(Ordering::Relaxed));
        if state.pg_up.load(Ordering::Relaxed) && since_ok < millis(HEARTBEAT) {
            continue;
        }
        match postgres.ping().await {
            Ok(()) => state.pg_answered(),
            Err(e) => state.pg_failed(&e),
        }
    }
}
/// Operator controls.
impl RedisPostgres {
    /// Deletes the record from PostgreSQL, then Redis's copy. A Redis that cannot be reached is an
    /// error (its copy of a settled answer would otherwise go on replaying until it expires); the
    /// eviction may then be repeated.
    pub async fn evict(&self, key: &StorageKey) -> Result<bool, EngineError> {
        let in_postgres = self.pg(self.postgres.evict(key)).await?;
        let Some(redis) = self.redis.get() else {
            return Ok(in_postgres);
        };
        let rkey = redis.redis_key(key);
        let unreachable = |e: EngineError| {
            EngineError::Unavailable(format!(
                "evicted from PostgreSQL, but Redis still holds a copy ({e}); evict again"
            ))
        };
        let in_redis = redis.evict(&rkey).await.map_err(unreachable)?;
        // A read that found the row in PostgreSQL just before it was deleted may still fill
        // Redis with it (a fill is one Redis call, bounded by the Redis budget): delete again
        // once any such fill has landed or given up, so no copy outlives the eviction.
        tokio::time::sleep(self.redis_budget).await;
        let filled_since = redis.evict(&rkey).await.map_err(unreachable)?;
        Ok(in_postgres || in_redis || filled_since)
    }

    /// PostgreSQL's survey: it holds every record.
    pub async fn survey(&self, top: usize) -> Result<super::Survey, EngineError> {
        self.pg(self.postgres.survey(top)).await
    }
}
