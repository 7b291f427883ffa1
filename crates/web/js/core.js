// Thin wrappers over the wasm exports: JS-shaped arguments and results, same rules as the edge.

import * as wasm from './wasm.js';
import { IdemgateError, invalidArgument } from './errors.js';
import { toBytes, headerBytes, headerPairs, pathAndQuery, eachChunk, joinParts } from './bytes.js';
import { StateTable } from './table.js';

/**
 * The core's defaults (retry policy, fingerprint configuration, token endpoint, replay header,
 * how an unanswered submission settles, version), read once.
 */
export const CORE = JSON.parse(wasm.defaults());

/** A fresh idempotency key: a random UUID (v4) from `crypto.getRandomValues`. */
export function newKey() {
  const random = new Uint8Array(16);
  try {
    globalThis.crypto.getRandomValues(random);
  } catch (cause) {
    throw new IdemgateError('entropy_unavailable', 'no randomness: crypto.getRandomValues failed', { cause });
  }
  return wasm.newKey(random);
}

/**
 * Parses an `Idempotency-Key` header value exactly as the edge does (bare or a structured-field
 * string; 1–255 visible ASCII). An array means every occurrence of the header in one request
 * (`null` when empty). Throws `IdemgateError` with `key_empty`, `key_too_long`, … otherwise.
 */
export function parseKey(value) {
  const { joined, lengths } = joinParts((Array.isArray(value) ? value : [value]).map((v) => toBytes(v)));
  return wasm.parseKeyValues(joined, lengths) ?? null;
}

/** The edge's default fingerprint configuration (the core's). */
export const DEFAULT_FINGERPRINT = Object.freeze({
  ...CORE.fingerprint,
  headers: Object.freeze(CORE.fingerprint.headers),
  fields: Object.freeze(CORE.fingerprint.fields),
});

/**
 * An incremental fingerprint: the edge's SHA-256 over method, path and query, the configured
 * headers and the body in the configured mode. Feed body chunks with `update`, then `finish()`
 * returns 64 hex digits. The method and path are hashed as the edge sees them (the core's
 * spelling, see `requestTarget`): `post /Orders` is the edge's `POST /orders`.
 */
export class Fingerprinter {
  #inner;

  /**
   * @param {object} [spec] `{ mode, fields, headers, maxDepth, maxNumberLen, caseSensitive }` as
   *   configured at the edge (`caseSensitive`: the route's setting)
   * @param {object} [request] `{ method, url, headers }`
   */
  constructor(spec = {}, request = {}) {
    // Anything not given is the core's default (mode, header list, limits, case rule).
    const { mode, fields = [], headers, maxDepth, maxNumberLen, caseSensitive } = spec;
    const names = headers == null ? null : [...headers];
    const text = [String(request.method ?? 'POST'), pathAndQuery(request.url ?? '/'), ...fields, ...(names ?? [])];
    const parts = text.map((t) => toBytes(String(t)));
    for (const [name, value] of headerPairs(request.headers)) parts.push(toBytes(name), headerBytes(value));
    const { joined, lengths } = joinParts(parts);
    this.#inner = new wasm.Fingerprinter(mode ?? undefined, maxDepth ?? undefined, maxNumberLen ?? undefined,
      caseSensitive ?? undefined, joined, lengths, text.length - 2 - (names?.length ?? 0), names?.length);
  }

  /** Feeds the next body chunk (a string is UTF-8). */
  update(chunk) {
    this.#live().update(toBytes(chunk));
    return this;
  }

  /** Ends the body and returns the fingerprint (64 lowercase hex digits). */
  finish() {
    const inner = this.#live();
    this.#inner = null;
    try {
      return inner.finish();
    } finally {
      inner.free();
    }
  }

  /** Releases the wasm memory of an unfinished fingerprinter. */
  dispose() {
    this.#inner?.free();
    this.#inner = null;
  }

  #live() {
    if (!this.#inner) throw Object.assign(invalidArgument('this fingerprinter has finished'), { code: 'fingerprinter_state' });
    return this.#inner;
  }
}

/**
 * The fingerprint of a request, as the edge computes it. `request` is `{ method, url, headers,
 * body }` or a `Request`; the body may be a string, BufferSource, Blob, URLSearchParams or
 * ReadableStream. `spec` is the edge's fingerprint configuration (default: auto mode over
 * `content-type`).
 */
export async function fingerprint(request, spec = DEFAULT_FINGERPRINT) {
  const isRequest = typeof Request !== 'undefined' && request instanceof Request;
  const facts = isRequest ? request.clone() : request;
  const fp = new Fingerprinter(spec, { method: facts.method, url: facts.url, headers: facts.headers });
  try {
    await eachChunk(facts.body, (chunk) => fp.update(chunk));
  } catch (error) {
    fp.dispose();
    throw error;
  }
  return fp.finish();
}

/**
 * The request as the edge sees it: `{ method, path }`, the method as `fetch` sends it (`post` →
 * `POST`; `patch` stays `patch`) and the path as a route spells it (normalised, lower-cased unless
 * `caseSensitive`), with the query. What a fingerprint hashes.
 */
export function requestTarget(method, url, { caseSensitive } = {}) {
  return wasm.requestTarget(String(method), pathAndQuery(url), caseSensitive ?? undefined);
}

/**
 * The fingerprint that decides whether a payload is the same as the last one, by the core's rule
 * for its `kind` (`value`, `body`, `form_entries`; the core picks the mode): `null` for a `stream`
 * (never the same). The payload alone: no headers, one method and path for every payload.
 */
export async function fingerprintPayload(kind, body) {
  const mode = wasm.payloadMode(kind);
  if (mode === undefined) return null;
  return fingerprint({ method: 'POST', url: '/', headers: [], body }, { mode, headers: [] });
}

let defaults = null;

/**
 * The core's default client retry policy: `{ maxAttempts, baseDelayMs, maxDelayMs, maxTotalMs }`.
 */
export function retryDefaults() {
  defaults ??= Object.freeze({ ...CORE.retry });
  return defaults;
}

/** A uniform random u32 for full jitter. */
export function randomU32() {
  return globalThis.crypto.getRandomValues(new Uint32Array(1))[0];
}

/**
 * One step of the core's retry policy after attempt `attemptsMade` ended with `outcome`
 * (`'network_error'`, `'timeout'` or `'response'` with `status` and the raw `retryAfter` header).
 * Returns `{ retry: true, delayMs }` or `{ retry: false, reason }` where reason is `success`,
 * `not_retryable`, `retry_exhausted_attempts` or `retry_exhausted_time`.
 */
export function retryDecision(step, policy = {}) {
  const p = { ...retryDefaults(), ...policy };
  const { attemptsMade, elapsedMs = 0, outcome = 'response', status = 0, retryAfter = null, nowMs = Date.now(), random = randomU32() } = step;
  // `{ retry: true, delayMs }` or `{ retry: false, reason }`, from the core; an unknown outcome
  // throws `invalid_argument`.
  return wasm.retryNext(
    p.maxAttempts, p.baseDelayMs, p.maxDelayMs, p.maxTotalMs,
    attemptsMade, elapsedMs, String(outcome), status, retryAfter ?? undefined, nowMs, random,
  );
}

/** A `Retry-After` value in milliseconds (delta-seconds or an HTTP date), or `null`. */
export function parseRetryAfter(value, nowMs = Date.now()) {
  return wasm.parseRetryAfter(String(value), nowMs) ?? null;
}

/**
 * What a status means to a client: `success`, `redirect`, `in_flight` (409), `rate_limited` (429),
 * `unavailable` (502–504), `key_reused` (422), `client_error`, `server_error` or `invalid`.
 */
export function classifyStatus(status) {
  return wasm.classifyStatus(status);
}

/**
 * How a submission answered with `status` settled: `{ event, keepsKey }`, the submit-lifecycle
 * event (`succeed`, `fail_retryable`, `fail_final`) and whether the intent keeps its key.
 */
export function settle(status) {
  return wasm.settle(status);
}

/** Whether an intent in submit state `state` is over (succeeded or failed for good): the core's rule. */
export function intentIsOver(state) {
  return wasm.intentIsOver(String(state));
}

/**
 * Whether the next submit reuses a key made for payload fingerprint `held` (null: no key) and
 * sent with `If-Match: heldIfMatch` (null: none), for a submit of `payload` at `ifMatch`.
 */
export function reusesKey(held, payload, heldIfMatch = null, ifMatch = null) {
  return wasm.reusesKey(held ?? undefined, payload ?? undefined, heldIfMatch ?? undefined, ifMatch ?? undefined);
}

/** Whether an `Idempotent-Replayed` header value (null: absent) marks a replayed answer. */
export function isReplayed(value) {
  return wasm.isReplayed(value ?? undefined);
}

/** Whether a token expiring at `expiresAtMs` is still usable at `nowMs` (the edge's rule). */
export function tokenFresh(expiresAtMs, nowMs) {
  return wasm.tokenIsFresh(expiresAtMs, nowMs);
}

/**
 * The request target asking the token `endpoint` for a token for the request `method path` (a
 * path and query: the core drops the query and spells the method as `fetch` sends it).
 */
export function tokenTarget(endpoint, method, path) {
  return wasm.tokenTarget(endpoint, method, path);
}

/**
 * The submit button's lifecycle (the core's, `StateTable.submit`): `{ outcome: 'apply', state:
 * next }` or `{ outcome: 'already_applied', state }`; a rejected event throws
 * (`transition_illegal`, `transition_unknown_state`, …).
 */
export function submitTransition(state, event) {
  return StateTable.submit.on(state, event);
}

/** The package version (from the Rust crate). */
export function version() {
  return CORE.version;
}
