// fetch with an Idempotency-Key that survives its retries, retried only when the core says so.

import { IdemgateError, invalidArgument } from './errors.js';
import { newKey, retryDecision, randomU32, isReplayed, CORE } from './core.js';
import { encodeBody, pathAndQuery } from './bytes.js';
import { fetchToken, attachToken, tokenIsFresh } from './token.js';

/** The header that marks a stored answer replayed by the edge (the core's name, lowercase). */
export const REPLAYED_HEADER = CORE.replayedHeader;

const now = () => (globalThis.performance?.now() ?? Date.now());

/** Resolves after `ms`, or rejects with the abort error as soon as `signal` aborts. */
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(aborted(signal));
    const onAbort = () => {
      clearTimeout(timer);
      reject(aborted(signal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function aborted(signal, details = {}) {
  return new IdemgateError('aborted', 'the request was aborted', { cause: signal?.reason, ...details });
}

/**
 * One attempt, bounded by `timeoutMs` when set. Resolves `{ response }` or `{ failure }` where
 * failure is `'timeout'` or `'network_error'`; rejects only when `signal` aborted.
 */
async function attempt(fetchImpl, url, init, signal, timeoutMs) {
  const controller = new AbortController();
  let timedOut = false;
  const forward = () => controller.abort(signal.reason);
  signal?.addEventListener('abort', forward, { once: true });
  const timer = timeoutMs > 0 ? setTimeout(() => { timedOut = true; controller.abort(); }, timeoutMs) : null;
  try {
    const response = await fetchImpl(url, { ...init, signal: controller.signal });
    return { response };
  } catch (error) {
    if (signal?.aborted) throw aborted(signal);
    return { failure: timedOut ? 'timeout' : 'network_error', error };
  } finally {
    if (timer !== null) clearTimeout(timer);
    signal?.removeEventListener('abort', forward);
  }
}

/**
 * `fetch` with an `Idempotency-Key`, retried on network errors, timeouts, 409, 429 and 502/503/504
 * with exponential back-off and full jitter (the core's policy), honouring `Retry-After`. Never
 * retries other statuses (400, 401, 403, 404, 412, 422, 428, …). Every attempt carries the same
 * key and the same body bytes.
 *
 * Resolves `{ response, key, replayed, attempts, reason }` for any HTTP answer the retries ended
 * with (like `fetch`, an error status is not a rejection; `reason` says why retrying stopped:
 * `success`, `not_retryable`, `retry_exhausted_attempts`, `retry_exhausted_time`). Rejects with
 * an `IdemgateError`: `network_error` / `timeout` when no attempt got an answer, `aborted` when
 * `signal` aborted.
 *
 * `ifMatch` (in `init` or `options`): the entity-tag of what the update read (the `ETag` of its
 * GET), sent as `If-Match` on every attempt. The origin answers 412 when the resource changed
 * since; that answer and a 428 (an `If-Match` was required) are final, like every status the
 * core does not retry: re-sending the same stale version cannot succeed.
 *
 * @param {string|URL|Request} url
 * @param {RequestInit & { ifMatch?: string }} [init] `method` defaults to POST
 * @param {object} [options] `{ key, headerName, ifMatch, retry, timeoutMs, token, fetch, onRetry }`
 */
export async function idempotentFetch(url, init = {}, options = {}) {
  const {
    key = newKey(),
    headerName = CORE.keyHeader,
    retry = {},
    timeoutMs = 0,
    token = false,
    fetch: fetchImpl = globalThis.fetch,
    onRetry,
  } = options;
  const { ifMatch: initIfMatch, ...fetchInit } = init;
  const ifMatch = options.ifMatch ?? initIfMatch;
  if (typeof fetchImpl !== 'function') throw invalidArgument('no fetch implementation');
  if (ifMatch != null && typeof ifMatch !== 'string') throw invalidArgument('ifMatch is an entity-tag string (an ETag value)');
  const request = typeof Request !== 'undefined' && url instanceof Request ? url : null;
  const signal = init.signal ?? request?.signal ?? null;
  const headers = new Headers(request?.headers);
  new Headers(init.headers).forEach((value, name) => headers.set(name, value));
  headers.set(headerName, key);
  if (ifMatch != null) headers.set('if-match', ifMatch);
  const method = init.method ?? request?.method ?? 'POST';
  const source = 'body' in init ? init.body : request && request.body ? request.clone().body : null;
  const encoded = await encodeBody(source);
  if (encoded.contentType && !headers.has('content-type')) headers.set('content-type', encoded.contentType);
  const target = request ? request.url : url;
  const base = { ...fetchInit, method, headers, body: encoded.body ?? undefined };
  if (request) {
    for (const field of ['credentials', 'mode', 'cache', 'redirect', 'referrer', 'integrity']) {
      if (!(field in init)) base[field] = request[field];
    }
  }

  const tokenOptions = token === true ? {} : token || null;
  let currentToken = null;
  const started = now();
  for (let attempts = 1; ; attempts++) {
    if (signal?.aborted) throw aborted(signal, { key, attempts: attempts - 1 });
    let sendInit = base;
    if (tokenOptions) {
      if (!tokenIsFresh(currentToken)) {
        currentToken = await fetchToken({
          fetch: fetchImpl,
          signal,
          requestMethod: method,
          // The request's path and query; the core drops the query and spells the method.
          requestPath: pathAndQuery(target),
          ...tokenOptions,
        });
      }
      sendInit = attachToken(base, currentToken);
    }
    const result = await attempt(fetchImpl, target, sendInit, signal, timeoutMs).catch((error) => {
      throw Object.assign(error, { key, attempts });
    });
    const { response } = result;
    const decision = retryDecision({
      attemptsMade: attempts,
      elapsedMs: now() - started,
      outcome: response ? 'response' : result.failure,
      status: response ? response.status : 0,
      retryAfter: response ? response.headers.get('retry-after') : null,
      random: randomU32(),
    }, retry);
    if (!decision.retry) {
      if (response) {
        return { response, key, replayed: isReplayed(response.headers.get(REPLAYED_HEADER)), attempts, reason: decision.reason };
      }
      const what = result.failure === 'timeout' ? 'timed out' : 'failed';
      throw new IdemgateError(result.failure, `the request ${what} (${attempts} attempt(s), ${decision.reason})`, {
        cause: result.error, key, attempts, reason: decision.reason,
      });
    }
    onRetry?.({ attempt: attempts, delayMs: decision.delayMs, status: response?.status ?? null, outcome: response ? 'response' : result.failure, key });
    // Free the connection of an answer we are not going to read.
    await response?.body?.cancel().catch(() => {});
    try {
      await sleep(decision.delayMs, signal);
    } catch (error) {
      throw Object.assign(error, { key, attempts });
    }
  }
}
