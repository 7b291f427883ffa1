// Thin wrappers over the wasm exports: JS-shaped arguments and results, same rules as the edge.

import * as wasm from './wasm.js';
import { invalidArgument } from './errors.js';
import { toBytes, headerBytes, headerPairs, pathAndQuery, eachChunk } from './bytes.js';

/** A fresh idempotency key: a random UUID (v4) from `crypto.getRandomValues`. */
export function newKey() {
  return wasm.newKey();
}

/**
 * Parses an `Idempotency-Key` header value exactly as the edge does (bare or a structured-field
 * string; 1–255 visible ASCII). An array means every occurrence of the header in one request
 * (`null` when empty). Throws `IdemgateError` with `key_empty`, `key_too_long`, … otherwise.
 */
export function parseKey(value) {
  if (!Array.isArray(value)) return wasm.parseKey(toBytes(value));
  const parts = value.map((v) => toBytes(v));
  const joined = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    joined.set(part, at);
    at += part.length;
  }
  return wasm.parseKeyValues(joined, Uint32Array.from(parts, (p) => p.length)) ?? null;
}

/** The edge's default fingerprint configuration. */
export const DEFAULT_FINGERPRINT = Object.freeze({ mode: 'auto', headers: ['content-type'], fields: [] });

/**
 * An incremental fingerprint: the edge's SHA-256 over method, path and query, the configured
 * headers and the body in the configured mode. Feed body chunks with `update`, then `finish()`
 * returns 64 hex digits.
 */
export class Fingerprinter {
  #inner;

  /**
   * @param {object} [spec] `{ mode, fields, headers, maxDepth, maxNumberLen }` as configured at the edge
   * @param {object} [request] `{ method, url, headers }`
   */
  constructor(spec = {}, request = {}) {
    const { mode = DEFAULT_FINGERPRINT.mode, fields = [], headers = DEFAULT_FINGERPRINT.headers, maxDepth = 64, maxNumberLen = 64 } = spec;
    const inner = new wasm.Fingerprinter(mode);
    try {
      for (const field of fields) inner.addField(field);
      for (const name of headers) inner.addHeaderName(name);
      inner.setLimits(maxDepth, maxNumberLen);
      inner.setRequest(String(request.method ?? 'POST').toUpperCase(), pathAndQuery(request.url ?? '/'));
      for (const [name, value] of headerPairs(request.headers)) inner.addHeader(name, headerBytes(value));
    } catch (error) {
      inner.free();
      throw error;
    }
    this.#inner = inner;
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

let defaults = null;

/**
 * The core's default client retry policy: `{ maxAttempts, baseDelayMs, maxDelayMs, maxTotalMs }`.
 */
export function retryDefaults() {
  if (!defaults) {
    const [maxAttempts, baseDelayMs, maxDelayMs, maxTotalMs] = wasm.retryPolicyDefaults();
    defaults = Object.freeze({ maxAttempts, baseDelayMs, maxDelayMs, maxTotalMs });
  }
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
  const answer = wasm.retryNext(
    p.maxAttempts, p.baseDelayMs, p.maxDelayMs, p.maxTotalMs,
    attemptsMade, elapsedMs, outcome, status, retryAfter ?? undefined, nowMs, random,
  );
  return answer.startsWith('retry:')
    ? { retry: true, delayMs: Number(answer.slice(6)) }
    : { retry: false, reason: answer.slice(6) };
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
 * The core's answer for `event` at `state` in a built-in table (`'submit'`, or the example
 * `'order'`): `{ outcome: 'apply', state: next }` or `{ outcome: 'already_applied', state }`.
 * A rejected event throws (`transition_illegal`, `transition_unknown_state`, …).
 */
export function transition(table, state, event) {
  const answer = wasm.transition(table, state, event);
  return answer === 'already_applied'
    ? { outcome: 'already_applied', state }
    : { outcome: 'apply', state: answer.slice(6) };
}

/** `transition('submit', state, event)`: the submit button's lifecycle. */
export function submitTransition(state, event) {
  return transition('submit', state, event);
}

/** The package version (from the Rust crate). */
export function version() {
  return wasm.version();
}
