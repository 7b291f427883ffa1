//! The Redis engine: the two atomic steps the core's exchange needs: *read* (the key's value and Redis's
//! clock) and *compare-and-set* (write or delete only if the value's version is still the one
//! read). Both are Lua scripts on one key, so they run atomically on the node that owns the key and
//! Redis Cluster routes them like any single-key command.
//!
//! Scripts are sent by SHA (`EVALSHA`); a node that does not know one yet (first use, restart,
//! failover) answers `NOSCRIPT` and gets the script once with `EVAL`, which also caches it there.
//! No `SCRIPT LOAD` fan-out, so the same code serves one Redis and a cluster.
//!
//! A compare-and-set that does not write answers, in the same script, with Redis's clock and the
//! key's current value, so the exchange decides again without a read of its own; and a
//! speculative one (decided on the service's clock, see the core's `remote` docs) is refused
//! when the service's clock is more than the core's `CLOCK_TOLERANCE` away from Redis's.
//!
//! TLS (`rediss://`) is rustls with the ring provider; the server is verified against the
//! system's roots or the CA file the service was given, and the service can present a client
//! certificate (Redis `tls-auth-clients yes`). An ACL user and password go in the URL.

use super::{Cas, EngineError};
use crate::config::RedisTls;
use idemgate_core::store::remote::{ValueVersion, Write, CLOCK_TOLERANCE};
use idemgate_core::store::WriteOutcome;
use idemgate_core::time::UnixMillis;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{MultipleNodeRoutingInfo, ResponsePolicy, RoutingInfo};
use redis::{ClientTlsConfig, Cmd, ErrorKind, RedisError, Script, TlsCertificates, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `{seconds, microseconds, value-or-nil}`: the record and the clock it is judged by, together.
const READ: &str = r"
local t = redis.call('TIME')
return {t[1], t[2], redis.call('GET', KEYS[1])}
";

/// ARGV: expected version ('' = the key must be absent), 'set' or 'del', value, PXAT milliseconds,
/// the service's clock in milliseconds for a speculative write ('' = none), the tolerance in
/// milliseconds. Returns 1 when written, else `{0, seconds, microseconds, value-or-nil}`: Redis's
/// clock and what the key holds, for the exchange to decide on.
const CAS: &str = r"
local cur = redis.call('GET', KEYS[1])
local t = redis.call('TIME')
local holds = true
if ARGV[5] ~= '' then
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if math.abs(now - tonumber(ARGV[5])) > tonumber(ARGV[6]) then holds = false end
end
if ARGV[1] == '' then
  if cur then holds = false end
elseif (not cur) or string.sub(cur, 1, #ARGV[1]) ~= ARGV[1] then
  holds = false
end
if not holds then return {0, t[1], t[2], cur} end
if ARGV[2] == 'del' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[3], 'PXAT', ARGV[4])
end
return 1
";

/// A connection to one Redis or to a cluster: both multiplex every operation over pooled
/// connections (one per node) that reconnect on their own.
#[derive(Clone)]
enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

#[derive(Clone)]
pub struct Redis {
    conn: Conn,
    prefix: String,
    read_sha: String,
    cas_sha: String,
    /// Whether Redis is past the claim memory limit, as [`Redis::watch_memory`] last saw it.
    tight: Arc<AtomicBool>,
}

impl Redis {
    /// Connects (bounded by `connect_timeout`); `response_timeout` bounds each command so a
    /// stopped Redis cannot hold a connection's pipeline forever.
    pub async fn connect(
        urls: &[String],
        cluster: bool,
        prefix: String,
        tls: &RedisTls,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Result<Redis, EngineError> {
        // The redis crate builds its rustls config on the process's default provider: make it
        // ring, as for PostgreSQL (an error only says one is installed already).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let certificates = certificates(tls)?;
        let conn = if cluster {
            let mut builder = redis::cluster::ClusterClient::builder(urls.to_vec())
                .connection_timeout(connect_timeout)
                .response_timeout(response_timeout);
            if let Some(certificates) = certificates {
                builder = builder.certs(certificates);
            }
            let client = builder.build()?;
            let connect = client.get_async_connection();
            match tokio::time::timeout(connect_timeout, connect).await {
                Ok(conn) => Conn::Cluster(conn?),
                Err(_) => return Err(EngineError::Unavailable("connect timed out".into())),
            }
        } else {
            let url = urls
                .first()
                .ok_or_else(|| EngineError::Unavailable("no Redis URL".into()))?;
            let client = match certificates {
                None => redis::Client::open(url.as_str())?,
                Some(certificates) => redis::Client::build_with_tls(url.as_str(), certificates)?,
            };
            // One plain connection first: the connection manager retries a refused handshake (a
            // wrong password, an unknown CA) until the timeout, which would hide why.
            let probe = redis::AsyncConnectionConfig::new()
                .set_connection_timeout(connect_timeout)
                .set_response_timeout(response_timeout);
            let probe = client.get_multiplexed_async_connection_with_config(&probe);
            match tokio::time::timeout(connect_timeout, probe).await {
                Ok(probe) => drop(probe?),
                Err(_) => return Err(EngineError::Unavailable("connect timed out".into())),
            }
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(connect_timeout)
                .set_response_timeout(response_timeout)
                .set_number_of_retries(2);
            let connect = ConnectionManager::new_with_config(client, config);
            match tokio::time::timeout(connect_timeout, connect).await {
                Ok(conn) => Conn::Single(conn?),
                Err(_) => return Err(EngineError::Unavailable("connect timed out".into())),
            }
        };
        Ok(Redis {
            conn,
            prefix,
            read_sha: Script::new(READ).get_hash().to_string(),
            cas_sha: Script::new(CAS).get_hash().to_string(),
            tight: Arc::default(),
        })
    }

    /// The Redis key of a storage key: the prefix and the storage key in hex (a SHA-256, so keys
    /// spread evenly over a cluster's slots).
    pub fn redis_key(&self, key: &idemgate_core::client::scope::StorageKey) -> String {
        let mut out = String::with_capacity(self.prefix.len() + 64);
        out.push_str(&self.prefix);
        for byte in key.as_bytes() {
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 15)]));
        }
        out
    }

    /// The key's value and Redis's clock (`TIME`), read in one atomic step.
    pub async fn read(&self, key: &str) -> Result<(UnixMillis, Option<Vec<u8>>), EngineError> {
        let reply = self.script(&self.read_sha, READ, key, &[]).await?;
        parse_read(reply)
    }

    /// Writes (or deletes) only if the key still holds `expect`; the caching engine's call,
    /// which needs only whether it wrote.
    pub async fn compare_and_set(
        &self,
        key: &str,
        expect: Option<ValueVersion>,
        write: &Write,
    ) -> Result<WriteOutcome, EngineError> {
        Ok(
            match self.compare_and_set_found(key, expect, write, None).await? {
                Cas::Written => WriteOutcome::Written,
                Cas::Conflict(_) => WriteOutcome::Conflict,
            },
        )
    }

    /// Writes (or deletes) only if the key still holds `expect` and, for a speculative write, if
    /// `at` is within the tolerance of Redis's clock; else Redis's clock and the key's value.
    pub async fn compare_and_set_found(
        &self,
        key: &str,
        expect: Option<ValueVersion>,
        write: &Write,
        at: Option<UnixMillis>,
    ) -> Result<Cas, EngineError> {
        let expect: &[u8] = match &expect {
            Some(version) => &version.0,
            None => b"",
        };
        let at = at.map(|at| at.0.to_string()).unwrap_or_default();
        let tolerance = CLOCK_TOLERANCE.0.to_string();
        let expiry;
        let (op, value, pxat): (&[u8], &[u8], &[u8]) = match write {
            Write::Set { value, expires_at } => {
                expiry = expires_at.0.to_string();
                (&b"set"[..], value.as_slice(), expiry.as_bytes())
            }
            Write::Delete => (&b"del"[..], &b""[..], &b"0"[..]),
        };
        let args = [expect, op, value, pxat, at.as_bytes(), tolerance.as_bytes()];
        match self.script(&self.cas_sha, CAS, key, &args).await? {
            Value::Int(1) => Ok(Cas::Written),
            Value::Array(mut items) if items.len() == 4 => {
                items.remove(0);
                Ok(Cas::Conflict(Some(parse_read(Value::Array(items))?)))
            }
            other => Err(EngineError::Unavailable(format!(
                "unexpected compare-and-set reply {other:?}"
            ))),
        }
    }

    /// Whether new claims and token uses are refused: some primary uses more of its `maxmemory`
    /// than the claim memory limit, as last seen.
    pub fn is_tight(&self) -> bool {
        self.tight.load(Ordering::Relaxed)
    }

    /// Checks every `every` how much of `maxmemory` each primary uses, for [`Redis::is_tight`]:
    /// past `limit` percent on any, new claims are refused, so the memory left is room
    /// for the finishes of the claims in flight — a completion that found Redis out of memory
    /// would leave its claim to be taken over after the lease, and the request to run twice. A
    /// primary without `maxmemory` never refuses a write for memory, so it never counts as tight.
    /// A failed check keeps the last answer (the operations themselves report Redis down).
    pub fn watch_memory(&self, limit: u8, every: Duration) {
        let redis = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Ok(nodes) = redis.memory().await {
                    let tight = nodes.iter().any(|&(used, max)| {
                        max > 0 && u128::from(used) * 100 >= u128::from(max) * u128::from(limit)
                    });
                    if tight != redis.tight.swap(tight, Ordering::Relaxed) {
                        tracing::warn!(
                            "Redis memory {} the claim limit ({limit}% of maxmemory): new claims {}",
                            if tight { "reached" } else { "is back below" },
                            if tight { "answer store full" } else { "are taken again" },
                        );
                    }
                }
            }
        });
    }

    /// `used_memory` and `maxmemory` of each primary (`INFO memory`).
    async fn memory(&self) -> Result<Vec<(u64, u64)>, EngineError> {
        let mut cmd = redis::cmd("INFO");
        cmd.arg("memory");
        let reply = match &self.conn {
            Conn::Single(conn) => cmd.query_async::<Value>(&mut conn.clone()).await?,
            Conn::Cluster(conn) => {
                let routing = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
                conn.clone().route_command(&cmd, routing).await?
            }
        };
        let mut texts = Vec::new();
        info_texts(&reply, &mut texts);
        Ok(texts.iter().filter_map(|t| parse_memory(t)).collect())
    }

    /// `PING` (every primary of a cluster): what `/readyz` asks.
    pub async fn ping(&self) -> Result<(), EngineError> {
        let cmd = redis::cmd("PING");
        match &self.conn {
            Conn::Single(conn) => {
                cmd.query_async::<Value>(&mut conn.clone()).await?;
            }
            Conn::Cluster(conn) => {
                let routing = RoutingInfo::MultiNode((
                    MultipleNodeRoutingInfo::AllMasters,
                    Some(ResponsePolicy::AllSucceeded),
                ));
                conn.clone()
                    .route_command(&cmd, routing)
                    .await?
                    .extract_error()?;
            }
        }
        Ok(())
    }

    async fn script(
        &self,
        sha: &str,
        source: &str,
        key: &str,
        args: &[&[u8]],
    ) -> Result<Value, EngineError> {
        let mut evalsha = redis::cmd("EVALSHA");
        evalsha.arg(sha).arg(1).arg(key);
        for arg in args {
            evalsha.arg(*arg);
        }
        match self.query(&evalsha).await {
            Err(e) if e.kind() == ErrorKind::NoScriptError => {
                let mut eval = redis::cmd("EVAL");
                eval.arg(source).arg(1).arg(key);
                for arg in args {
                    eval.arg(*arg);
                }
                Ok(self.query(&eval).await?)
            }
            other => Ok(other?),
        }
    }

    async fn query(&self, cmd: &Cmd) -> Result<Value, RedisError> {
        match &self.conn {
            Conn::Single(conn) => cmd.query_async(&mut conn.clone()).await,
            Conn::Cluster(conn) => cmd.query_async(&mut conn.clone()).await,
        }
    }
}

impl From<RedisError> for EngineError {
    fn from(e: RedisError) -> Self {
        if e.code() == Some("OOM") {
            EngineError::Full
        } else if e.is_timeout() {
            EngineError::Timeout
        } else {
            EngineError::Unavailable(format!("redis: {e}"))
        }
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The CA and client certificate files, read: `None` when none was given (a `rediss://` URL then
/// trusts the system's roots).
fn certificates(tls: &RedisTls) -> Result<Option<TlsCertificates>, EngineError> {
    let read = |flag: &str, path: &std::path::Path| {
        std::fs::read(path).map_err(|e| {
            EngineError::Unavailable(format!("cannot read {flag} {}: {e}", path.display()))
        })
    };
    let root_cert = match &tls.ca {
        Some(path) => Some(read("--redis-ca", path)?),
        None => None,
    };
    let client_tls = match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => Some(ClientTlsConfig {
            client_cert: read("--redis-cert", cert)?,
            client_key: read("--redis-key", key)?,
        }),
        _ => None,
    };
    Ok(
        (root_cert.is_some() || client_tls.is_some()).then_some(TlsCertificates {
            client_tls,
            root_cert,
        }),
    )
}

fn parse_read(reply: Value) -> Result<(UnixMillis, Option<Vec<u8>>), EngineError> {
    let bad = |what: &str| EngineError::Unavailable(format!("unexpected read reply: {what}"));
    let items = match reply {
        Value::Array(items) => items,
        other => return Err(bad(&format!("not an array: {other:?}"))),
    };
    let [secs, micros, value] = <[Value; 3]>::try_from(items).map_err(|_| bad("length"))?;
    let number = |v: Value| -> Result<u64, EngineError> {
        match v {
            Value::BulkString(bytes) => std::str::from_utf8(&bytes)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad("time")),
            Value::Int(n) => u64::try_from(n).map_err(|_| bad("time")),
            _ => Err(bad("time")),
        }
    };
    let now = number(secs)?
        .saturating_mul(1000)
        .saturating_add(number(micros)? / 1000);
    let value = match value {
        Value::Nil => None,
        // Whatever the bytes are, the core judges them (and calls a stranger's value corrupt).
        Value::BulkString(bytes) => Some(bytes),
        _ => return Err(bad("value")),
    };
    Ok((UnixMillis(now), value))
}

/// Operator controls: evicting one record, surveying the keyspace.
impl Redis {
    /// `DEL`: whether the key held a value.
    pub async fn evict(&self, key: &str) -> Result<bool, EngineError> {
        match self.query(redis::cmd("DEL").arg(key)).await? {
            Value::Int(n) => Ok(n > 0),
            other => Err(EngineError::Unavailable(format!(
                "unexpected DEL reply {other:?}"
            ))),
        }
    }

    /// Counts the prefix's records and their bytes (`STRLEN`) with a cursor-based `SCAN`, at most
    /// `limit` keys. One Redis only: a cluster's nodes each hold a part of the keyspace.
    pub async fn survey(&self, top: usize, limit: u64) -> Result<super::Survey, EngineError> {
        let Conn::Single(conn) = &self.conn else {
            return Err(EngineError::Unavailable(
                "stats on Redis Cluster is not supported: survey each primary with --redis".into(),
            ));
        };
        let mut conn = conn.clone();
        let pattern = format!("{}*", glob_escape(&self.prefix));
        let mut tally = super::survey::Tally::default();
        let mut seen: u64 = 0;
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await?;
            let keys: Vec<(String, idemgate_core::client::scope::StorageKey)> = keys
                .into_iter()
                .filter_map(|k| {
                    let key = self.storage_key_of(&k)?;
                    Some((k, key))
                })
                .collect();
            if !keys.is_empty() {
                let mut pipe = redis::pipe();
                for (k, _) in &keys {
                    pipe.cmd("STRLEN").arg(k);
                }
                let lengths: Vec<u64> = pipe.query_async(&mut conn).await?;
                for ((_, key), len) in keys.iter().zip(lengths) {
                    // A key that expired between SCAN and STRLEN reads 0: not a record any more.
                    if len > 0 {
                        tally.add(key, len);
                    }
                }
            }
            seen += keys.len() as u64;
            cursor = next;
            if cursor == 0 {
                return Ok(tally.finish(top, true));
            }
            if seen >= limit {
                return Ok(tally.finish(top, false));
            }
        }
    }

    /// The storage key a Redis key names (`None`: not one of ours).
    fn storage_key_of(&self, redis_key: &str) -> Option<idemgate_core::client::scope::StorageKey> {
        let hex = redis_key.strip_prefix(self.prefix.as_str())?;
        let bytes = idemgate_core::hash::from_hex(hex)?;
        Some(idemgate_core::client::scope::StorageKey::from_stored(
            bytes.try_into().ok()?,
        ))
    }
}

/// The `INFO` texts in a reply: one for a single Redis, one per node for a cluster (a map of
/// node to reply).
fn info_texts(reply: &Value, out: &mut Vec<String>) {
    match reply {
        Value::BulkString(bytes) => out.push(String::from_utf8_lossy(bytes).into_owned()),
        Value::VerbatimString { text, .. } | Value::SimpleString(text) => out.push(text.clone()),
        Value::Map(pairs) => pairs.iter().for_each(|(_, v)| info_texts(v, out)),
        Value::Array(items) => items.iter().for_each(|v| info_texts(v, out)),
        _ => {}
    }
}

/// `used_memory` and `maxmemory` from an `INFO memory` text.
fn parse_memory(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.trim().strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some((field("used_memory")?, field("maxmemory")?))
}

/// `text` as a literal in a `SCAN MATCH` glob.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_comes_from_info() {
        let info =
            "# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\nmaxmemory:2097152\r\n";
        assert_eq!(parse_memory(info), Some((1_048_576, 2_097_152)));
        assert_eq!(parse_memory("used_memory:5\r\n"), None);
        let cluster = Value::Map(vec![
            (
                Value::SimpleString("127.0.0.1:7000".into()),
                Value::BulkString(info.as_bytes().to_vec()),
            ),
            (
                Value::SimpleString("127.0.0.1:7001".into()),
                Value::BulkString(b"used_memory:1\r\nmaxmemory:0\r\n".to_vec()),
            ),
        ]);
        let mut texts = Vec::new();
        info_texts(&cluster, &mut texts);
        let nodes: Vec<_> = texts.iter().filter_map(|t| parse_memory(t)).collect();
        assert_eq!(nodes, vec![(1_048_576, 2_097_152), (1, 0)]);
    }

    #[test]
    fn read_reply_shapes() {
        let reply = Value::Array(vec![
            Value::BulkString(b"1700000000".to_vec()),
            Value::BulkString(b"123456".to_vec()),
            Value::Nil,
        ]);
        assert_eq!(
            parse_read(reply).unwrap(),
            (UnixMillis(1_700_000_000_123), None)
        );
        assert!(parse_read(Value::Int(1)).is_err());
        assert!(parse_read(Value::Array(vec![Value::Nil])).is_err());
    }
}
