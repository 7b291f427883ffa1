//! The PostgreSQL engine: one table (`idemgate_records`) whose primary key is the storage key, so
//! the database's unique constraint is the final defence against a second execution. The two
//! atomic steps the core's exchange needs are single statements:
//!
//! - *read*: the row's value, only if `expires_at` is still ahead of the database's clock, and that
//!   clock (`clock_timestamp()`), in one statement: the database's clock is the one clock, and an
//!   expired row is never served;
//! - *compare-and-set*: expecting absence, `INSERT … ON CONFLICT (key) DO UPDATE … WHERE` the
//!   existing row has expired (an expired row counts as absent); expecting a version, `UPDATE` (or
//!   `DELETE`) `WHERE key = $1 AND version = $2` and the row is live. Zero rows is a conflict: the
//!   exchange reads again and the core decides again. Under READ COMMITTED a concurrent writer of
//!   the same key waits for the row lock and then re-checks the `WHERE` on the committed row, so two
//!   writers can never both see the version they expected.
//!
//! These mirror the Redis engine's scripts exactly (`engine/redis.rs`; Redis never serves an
//! expired key). Statements are prepared once per pooled connection. The schema is created and
//! migrated at start ([`migrate`], `sql/*.sql`), and a background sweep deletes expired rows in
//! small batches ([`Postgres::connect`] starts it; it stops when the last handle drops).

use super::EngineError;
use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use idemgate_core::client::scope::StorageKey;
use idemgate_core::store::remote::{ValueVersion, Write};
use idemgate_core::store::WriteOutcome;
use idemgate_core::time::UnixMillis;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::config::SslMode;
use tokio_postgres::error::SqlState;

mod settings;
use settings::Settings;

/// The migrations, in order: (version, SQL). Each file records its own version in
/// `idemgate_schema_version`, so a file applied by hand counts as applied.
const MIGRATIONS: &[(i32, &str)] = &[(1, include_str!("../../sql/001_records.sql"))];

/// The advisory lock every replica's migration holds (`"idemgate"` in ASCII); the SQL files take
/// the same one.
const MIGRATION_LOCK: i64 = 0x6964_656d_6761_7465;

/// `{now in unix ms, value or NULL}`: one `clock_timestamp()` for both the filter and the answer.
const READ: &str = "\
WITH now AS (SELECT clock_timestamp() AS t)
SELECT floor(extract(epoch FROM now.t) * 1000)::int8,
       (SELECT r.value FROM idemgate_records r WHERE r.key = $1 AND r.expires_at > now.t)
FROM now";

/// Set, expecting absence: a live row makes it a conflict (0 rows); an expired one is replaced.
const INSERT: &str = "\
INSERT INTO idemgate_records (key, value, version, expires_at)
VALUES ($1, $2, $3, timestamptz 'epoch' + $4::int8 * interval '1 millisecond')
ON CONFLICT (key) DO UPDATE
SET value = EXCLUDED.value, version = EXCLUDED.version, expires_at = EXCLUDED.expires_at
WHERE idemgate_records.expires_at <= clock_timestamp()";

/// Set, expecting a version: only the live row still at that version.
const UPDATE: &str = "\
UPDATE idemgate_records
SET value = $3, version = $4, expires_at = timestamptz 'epoch' + $5::int8 * interval '1 millisecond'
WHERE key = $1 AND version = $2 AND expires_at > clock_timestamp()";

/// Delete, expecting a version: the row goes if it is at that version; the answer is whether it
/// was live (an expired row is absent to every reader, so deleting it is a conflict, as in Redis).
const DELETE: &str = "\
DELETE FROM idemgate_records WHERE key = $1 AND version = $2
RETURNING expires_at > clock_timestamp()";

/// Delete, expecting absence: nothing to delete; written exactly when no live row is there.
const ABSENT: &str = "\
SELECT NOT EXISTS (SELECT 1 FROM idemgate_records WHERE key = $1 AND expires_at > clock_timestamp())";

/// One sweep batch: at most [`SWEEP_BATCH`] expired rows, oldest first. `SKIP LOCKED` keeps the
/// sweep (and other replicas' sweeps) from waiting on rows an operation is writing, and the outer
/// condition is re-checked on a row that changed meanwhile, so a row revived by a new claim stays.
const SWEEP: &str = "\
DELETE FROM idemgate_records
WHERE key IN (SELECT key FROM idemgate_records WHERE expires_at < clock_timestamp()
              ORDER BY expires_at LIMIT 500 FOR UPDATE SKIP LOCKED)
  AND expires_at < clock_timestamp()";

/// Rows per sweep batch (the `LIMIT` in [`SWEEP`]).
const SWEEP_BATCH: u64 = 500;
/// Batches per sweep round at most: a backlog is worked off over several rounds, never in one
/// long burst.
const SWEEP_MAX_BATCHES: usize = 20;
/// One batch's bound.
const SWEEP_BATCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections in the pool.
const POOL_SIZE: usize = 16;
/// The latest `expires_at` written (9999-12-31): far beyond any TTL, inside `timestamptz`.
const MAX_EXPIRY_MS: u64 = 253_402_300_799_999;

/// Why the engine could not start: a typed error `main` prints (never with the password).
#[derive(Debug)]
#[non_exhaustive]
pub enum StartError {
    /// The URL or its TLS settings are not usable.
    Settings(String),
    /// The CA file named by `sslrootcert` could not be read.
    Tls(String),
    /// No connection could be made.
    Connect(EngineError),
    /// The schema could not be created or migrated.
    Migrate(String),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Settings(why) => write!(f, "bad --postgres setting: {why}"),
            StartError::Tls(why) => write!(f, "cannot set up TLS: {why}"),
            StartError::Connect(e) => write!(f, "cannot connect to PostgreSQL: {e}"),
            StartError::Migrate(why) => write!(f, "cannot migrate the PostgreSQL schema: {why}"),
        }
    }
}

impl std::error::Error for StartError {}

/// A pool of connections to one PostgreSQL database. Clones share the pool and the sweep.
#[derive(Clone)]
pub struct Postgres {
    pool: Pool,
    op_timeout: Duration,
    /// Scrubs the password out of error text.
    redact: Arc<Redact>,
    /// Aborts the sweep when the last clone drops (the service shutting down).
    _sweep: Arc<SweepGuard>,
}

struct SweepGuard(tokio::task::JoinHandle<()>);

impl Drop for SweepGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Postgres {
    /// Connects to `url` (a `postgres://` URL; `sslmode=verify-full&sslrootcert=PATH` for TLS that
    /// verifies the chain and the host name, `sslmode=disable` or none for plain TCP), migrates
    /// the schema, and starts the sweep (a round every `sweep_every`). `connect_timeout` bounds
    /// each new connection; `op_timeout` bounds each statement and each wait for a pooled
    /// connection, so a stopped database gives [`EngineError::Timeout`], never a hang.
    pub async fn connect(
        url: &str,
        connect_timeout: Duration,
        op_timeout: Duration,
        sweep_every: Duration,
    ) -> Result<Postgres, StartError> {
        let settings = Settings::parse(url)?;
        let redact = Arc::new(Redact(
            settings
                .pg
                .get_password()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .filter(|p| !p.is_empty()),
        ));
        let mut pg = settings.pg;
        pg.connect_timeout(connect_timeout)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(30));
        if pg.get_application_name().is_none() {
            pg.application_name("idemgate-store");
        }
        let manager_config = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let manager = match settings.root_cert {
            None => {
                pg.ssl_mode(SslMode::Disable);
                Manager::from_config(pg, tokio_postgres::NoTls, manager_config)
            }
            Some(path) => {
                pg.ssl_mode(SslMode::Require);
                let tls = tls_connector(&path)?;
                Manager::from_config(pg, tls, manager_config)
            }
        };
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(op_timeout))
            .create_timeout(Some(connect_timeout))
            .recycle_timeout(Some(op_timeout))
            .build()
            .map_err(|e| StartError::Settings(e.to_string()))?;
        // The first connection is made here, so a wrong CA, a wrong host name or a database that
        // is not there stops the service at start with the reason.
        let mut client = match tokio::time::timeout(connect_timeout, pool.get()).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => return Err(StartError::Connect(pool_error(&redact, e))),
            Err(_) => return Err(StartError::Connect(EngineError::Timeout)),
        };
        let migrate_limit = connect_timeout.max(Duration::from_secs(10));
        match tokio::time::timeout(migrate_limit, migrate(&mut client)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(StartError::Migrate(redact.describe(&e))),
            Err(_) => {
                return Err(StartError::Migrate(format!(
                    "not done within {migrate_limit:?} (another session holding the lock?)"
                )))
            }
        }
        drop(client);
        let sweep = tokio::spawn(sweep_loop(pool.clone(), Arc::clone(&redact), sweep_every));
        Ok(Postgres {
            pool,
            op_timeout,
            redact,
            _sweep: Arc::new(SweepGuard(sweep)),
        })
    }

    /// The key's value and the database's clock, read in one statement.
    pub async fn read(
        &self,
        key: &StorageKey,
    ) -> Result<(UnixMillis, Option<Vec<u8>>), EngineError> {
        self.bounded(async {
            let client = self.pool.get().await.map_err(|e| self.pool_error(e))?;
            let statement = client.prepare_cached(READ).await.map_err(|e| self.pg(e))?;
            let row = client
                .query_one(&statement, &[&key.as_bytes().as_slice()])
                .await
                .map_err(|e| self.pg(e))?;
            let now: i64 = row.try_get(0).map_err(|e| self.pg(e))?;
            let value: Option<Vec<u8>> = row.try_get(1).map_err(|e| self.pg(e))?;
            let now = u64::try_from(now).map_err(|_| {
                EngineError::Unavailable(format!("the database's clock is before 1970: {now}"))
            })?;
            Ok((UnixMillis(now), value))
        })
        .await
    }

    /// Writes (or deletes) only if the key still holds `expect` (`None`: no live row).
    pub async fn compare_and_set(
        &self,
        key: &StorageKey,
        expect: Option<ValueVersion>,
        write: &Write,
    ) -> Result<WriteOutcome, EngineError> {
        self.bounded(async {
            let client = self.pool.get().await.map_err(|e| self.pool_error(e))?;
            let key = key.as_bytes().as_slice();
            let written = match (write, &expect) {
                (Write::Set { value, expires_at }, expect) => {
                    let version = value.get(..16).ok_or_else(|| {
                        EngineError::Unavailable("a value shorter than its version".into())
                    })?;
                    let expires_at = i64::try_from(expires_at.0.min(MAX_EXPIRY_MS))
                        .map_err(|_| EngineError::Unavailable("expiry out of range".into()))?;
                    let value = value.as_slice();
                    let rows = match expect {
                        None => {
                            let st = client
                                .prepare_cached(INSERT)
                                .await
                                .map_err(|e| self.pg(e))?;
                            client
                                .execute(&st, &[&key, &value, &version, &expires_at])
                                .await
                        }
                        Some(expect) => {
                            let st = client
                                .prepare_cached(UPDATE)
                                .await
                                .map_err(|e| self.pg(e))?;
                            let expect = expect.0.as_slice();
                            client
                                .execute(&st, &[&key, &expect, &value, &version, &expires_at])
                                .await
                        }
                    }
                    .map_err(|e| self.pg(e))?;
                    rows == 1
                }
                (Write::Delete, Some(expect)) => {
                    let st = client
                        .prepare_cached(DELETE)
                        .await
                        .map_err(|e| self.pg(e))?;
                    let expect = expect.0.as_slice();
                    let row = client
                        .query_opt(&st, &[&key, &expect])
                        .await
                        .map_err(|e| self.pg(e))?;
                    match row {
                        Some(row) => row.try_get::<_, bool>(0).map_err(|e| self.pg(e))?,
                        None => false,
                    }
                }
                (Write::Delete, None) => {
                    let st = client
                        .prepare_cached(ABSENT)
                        .await
                        .map_err(|e| self.pg(e))?;
                    let row = client
                        .query_one(&st, &[&key])
                        .await
                        .map_err(|e| self.pg(e))?;
                    row.try_get::<_, bool>(0).map_err(|e| self.pg(e))?
                }
            };
            Ok(if written {
                WriteOutcome::Written
            } else {
                WriteOutcome::Conflict
            })
        })
        .await
    }

    /// `SELECT 1`: what `/readyz` asks.
    pub async fn ping(&self) -> Result<(), EngineError> {
        self.bounded(async {
            let client = self.pool.get().await.map_err(|e| self.pool_error(e))?;
            client
                .simple_query("SELECT 1")
                .await
                .map_err(|e| self.pg(e))?;
            Ok(())
        })
        .await
    }

    /// Every call is bounded by the operation timeout (the carry loop bounds the whole operation
    /// too; this keeps `/readyz` and a single slow statement from outliving it).
    async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, EngineError>>,
    ) -> Result<T, EngineError> {
        match tokio::time::timeout(self.op_timeout, call).await {
            Ok(result) => result,
            Err(_) => Err(EngineError::Timeout),
        }
    }

    fn pg(&self, e: tokio_postgres::Error) -> EngineError {
        classify(&e, &self.redact)
    }

    fn pool_error(&self, e: PoolError) -> EngineError {
        pool_error(&self.redact, e)
    }
}

/// A pool that cannot hand out a connection in time (all busy on a stopped database, or a new
/// connection not made within its bound) is a timeout; a failed connection is classified.
fn pool_error(redact: &Redact, e: PoolError) -> EngineError {
    match e {
        PoolError::Timeout(_) => EngineError::Timeout,
        PoolError::Backend(e) => classify(&e, redact),
        other => EngineError::Unavailable(redact.scrub(format!("postgres pool: {other}"))),
    }
}

/// Out of space (class 53: disk full, out of memory) is [`EngineError::Full`]; a cancelled
/// statement or a connect timeout is [`EngineError::Timeout`]; everything else is unavailable.
fn classify(e: &tokio_postgres::Error, redact: &Redact) -> EngineError {
    match e.code() {
        Some(code)
            if *code == SqlState::DISK_FULL
                || *code == SqlState::OUT_OF_MEMORY
                || *code == SqlState::INSUFFICIENT_RESOURCES =>
        {
            EngineError::Full
        }
        Some(code) if *code == SqlState::QUERY_CANCELED => EngineError::Timeout,
        _ if e.to_string() == "timeout waiting for server" => EngineError::Timeout,
        _ => EngineError::Unavailable(redact.describe(e)),
    }
}

/// The password, to scrub out of any error text before it is logged or printed.
struct Redact(Option<String>);

impl Redact {
    /// The error and its causes, `a: b: c`, without the password.
    fn describe(&self, e: &(dyn std::error::Error + 'static)) -> String {
        let mut text = format!("postgres: {e}");
        let mut source = e.source();
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        self.scrub(text)
    }

    fn scrub(&self, text: String) -> String {
        match &self.0 {
            Some(password) if text.contains(password.as_str()) => text.replace(password, "***"),
            _ => text,
        }
    }
}

/// Creates or migrates the schema: one transaction holding [`MIGRATION_LOCK`], so replicas that
/// start together apply each migration once, one after the other.
async fn migrate(client: &mut deadpool_postgres::Client) -> Result<(), tokio_postgres::Error> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS idemgate_schema_version (
             version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await?;
    let row = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM idemgate_schema_version",
            &[],
        )
        .await?;
    let current: i32 = row.try_get(0)?;
    for (version, sql) in MIGRATIONS {
        if *version > current {
            tx.batch_execute(sql).await?;
            tracing::info!("PostgreSQL schema migrated to version {version}");
        }
    }
    tx.commit().await
}

/// Every `every`, deletes expired rows: batches of at most [`SWEEP_BATCH`], at most
/// [`SWEEP_MAX_BATCHES`] a round. Errors are logged and the next round tries again.
async fn sweep_loop(pool: Pool, redact: Arc<Redact>, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await; // the first tick is immediate: the first round waits a full period
    loop {
        ticks.tick().await;
        for _ in 0..SWEEP_MAX_BATCHES {
            match tokio::time::timeout(SWEEP_BATCH_TIMEOUT, sweep_batch(&pool, &redact)).await {
                Ok(Ok(deleted)) if deleted < SWEEP_BATCH => break,
                Ok(Ok(_)) => {}
                Ok(Err(why)) => {
                    tracing::warn!("sweep of expired rows failed: {why}");
                    break;
                }
                Err(_) => {
                    tracing::warn!("sweep of expired rows timed out");
                    break;
                }
            }
        }
    }
}

async fn sweep_batch(pool: &Pool, redact: &Redact) -> Result<u64, String> {
    let client = pool.get().await.map_err(|e| match e {
        PoolError::Backend(e) => redact.describe(&e),
        other => redact.scrub(other.to_string()),
    })?;
    let statement = client
        .prepare_cached(SWEEP)
        .await
        .map_err(|e| redact.describe(&e))?;
    client
        .execute(&statement, &[])
        .await
        .map_err(|e| redact.describe(&e))
}

/// TLS with rustls (ring provider): the chain must lead to a CA in `path`, and the certificate
/// must name the host the URL connects to (`verify-full`).
fn tls_connector(path: &str) -> Result<tokio_postgres_rustls::MakeRustlsConnect, StartError> {
    let pem =
        std::fs::read(path).map_err(|e| StartError::Tls(format!("sslrootcert {path}: {e}")))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
        let cert = cert.map_err(|e| StartError::Tls(format!("sslrootcert {path}: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| StartError::Tls(format!("sslrootcert {path}: {e}")))?;
    }
    if roots.is_empty() {
        return Err(StartError::Tls(format!(
            "sslrootcert {path}: no PEM certificate in it"
        )));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StartError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// Operator controls: evicting one record, surveying the table.
impl Postgres {
    /// `DELETE` the key's row: whether it held a live record.
    pub async fn evict(&self, key: &StorageKey) -> Result<bool, EngineError> {
        self.bounded(async {
            let client = self.pool.get().await.map_err(|e| self.pool_error(e))?;
            let row = client
                .query_opt(EVICT, &[&key.as_bytes().as_slice()])
                .await
                .map_err(|e| self.pg(e))?;
            match row {
                Some(row) => row.try_get::<_, bool>(0).map_err(|e| self.pg(e)),
                None => Ok(false),
            }
        })
        .await
    }

    /// Live records and their bytes, in total and for the `top` scopes with the most records
    /// (grouped by the quota tag, bytes 4..8 of the key), as SQL aggregates.
    pub async fn survey(&self, top: usize) -> Result<super::Survey, EngineError> {
        // Aggregates over the whole table: bounded by their own, longer timeout.
        let survey = async {
            let client = self.pool.get().await.map_err(|e| self.pool_error(e))?;
            let totals = client
                .query_one(SURVEY_TOTALS, &[&LEDGER_TAG])
                .await
                .map_err(|e| self.pg(e))?;
            let count = |v: i64| u64::try_from(v).unwrap_or(0);
            let records: i64 = totals.try_get(0).map_err(|e| self.pg(e))?;
            let bytes: i64 = totals.try_get(1).map_err(|e| self.pg(e))?;
            let limit = i64::try_from(top).unwrap_or(i64::MAX);
            let rows = client
                .query(SURVEY_SCOPES, &[&limit, &LEDGER_TAG])
                .await
                .map_err(|e| self.pg(e))?;
            let mut scopes = Vec::with_capacity(rows.len());
            for row in rows {
                let tag: Vec<u8> = row.try_get(0).map_err(|e| self.pg(e))?;
                let Ok(tag) = <[u8; 4]>::try_from(tag) else {
                    continue;
                };
                scopes.push(super::UsageOfScope {
                    tag: idemgate_core::client::scope::QuotaTag(tag),
                    records: count(row.try_get(1).map_err(|e| self.pg(e))?),
                    bytes: count(row.try_get(2).map_err(|e| self.pg(e))?),
                });
            }
            Ok(super::Survey {
                records: count(records),
                bytes: count(bytes),
                top: super::survey::top_of(scopes, top),
                complete: true,
            })
        };
        tokio::time::timeout(super::survey::SURVEY_TIMEOUT, survey)
            .await
            .unwrap_or(Err(EngineError::Timeout))
    }
}

/// Deletes the key's row, live or expired; says whether it was live.
const EVICT: &str = "\
DELETE FROM idemgate_records WHERE key = $1 RETURNING expires_at > clock_timestamp()";

/// The quota tag of payers' ledgers: their rows are not records.
const LEDGER_TAG: &[u8] = &idemgate_core::client::scope::QuotaTag::LEDGER.0;

const SURVEY_TOTALS: &str = "\
SELECT count(*)::int8, coalesce(sum(octet_length(value)), 0)::int8
FROM idemgate_records WHERE expires_at > clock_timestamp() AND substring(key FROM 5 FOR 4) <> $1";

const SURVEY_SCOPES: &str = "\
SELECT substring(key FROM 5 FOR 4), count(*)::int8, coalesce(sum(octet_length(value)), 0)::int8
FROM idemgate_records WHERE expires_at > clock_timestamp() AND substring(key FROM 5 FOR 4) <> $2
GROUP BY 1 ORDER BY 2 DESC, 3 DESC LIMIT $1";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_scrubbed() {
        let redact = Redact(Some("hunter2".into()));
        assert_eq!(
            redact.scrub("auth failed for hunter2".into()),
            "auth failed for ***"
        );
    }

    #[test]
    fn every_migration_records_its_version() {
        for (version, sql) in MIGRATIONS {
            assert!(
                sql.contains(&format!(
                    "INSERT INTO idemgate_schema_version (version) VALUES ({version})"
                )),
                "migration {version}"
            );
            assert!(sql.contains(&format!("pg_advisory_xact_lock({MIGRATION_LOCK})")));
        }
    }
}
