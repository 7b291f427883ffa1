-- idemgate-store, PostgreSQL engine: schema version 1.
--
-- The service applies this file by itself at start (inside one transaction holding the advisory
-- lock below, so replicas starting together are safe). To apply it by hand instead, as a role that
-- may create tables, in ONE transaction (the lock is held until it ends):
--
--     psql "$URL" -v ON_ERROR_STOP=1 --single-transaction -f crates/store/sql/001_records.sql
--
-- Every statement is idempotent, so applying it twice, or by hand and then by the service, is fine.

-- 7594306392213779557 = 0x6964656d67617465, "idemgate": the migration lock every replica takes.
SELECT pg_advisory_xact_lock(7594306392213779557);

CREATE TABLE IF NOT EXISTS idemgate_schema_version (
    version    integer     PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- One row per record. The primary key is the 32-byte storage key (SHA-256 of scope, method, route
-- and idempotency key): the unique constraint is the final defence against a second execution.
-- `value` is the core's stored value (16-byte random version, then the record); `version` repeats
-- its first 16 bytes so the compare-and-set compares a column; `expires_at` is on the database's
-- clock, and a row past it is never served (and is deleted by the service's sweep).
CREATE TABLE IF NOT EXISTS idemgate_records (
    key        bytea       PRIMARY KEY CHECK (length(key) = 32),
    value      bytea       NOT NULL,
    version    bytea       NOT NULL CHECK (length(version) = 16),
    expires_at timestamptz NOT NULL
);

-- The sweep's index: the oldest expired rows first, in small batches.
CREATE INDEX IF NOT EXISTS idemgate_records_expires_at ON idemgate_records (expires_at);

INSERT INTO idemgate_schema_version (version) VALUES (1) ON CONFLICT (version) DO NOTHING;
