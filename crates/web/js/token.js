// One-time anti-resubmit tokens issued by the edge (`docs/semantics.md` §7): fetch one, attach it.

import { IdemgateError } from './errors.js';
import { CORE, tokenTarget, tokenFresh } from './core.js';

/** The edge's default token endpoint (the core's). */
export const TOKEN_ENDPOINT = CORE.tokenEndpoint;

const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * Asks the edge for a one-time token. Resolves `{ token, header, expiresAtMs }`: attach it with
 * `attachToken` as the header it names. Rejects with `token_unavailable` (no answer or a non-2xx
 * status, with `status`) or `token_invalid_response` (not the documented JSON).
 *
 * A token is bound to the method and path of the request it is for (the edge refuses it on any
 * other route or method): `requestMethod` and `requestPath` name them, sent as
 * `?method=…&path=…` by the core's rule (the method as `fetch` sends it, the path without its
 * query). `idempotentFetch` fills them in.
 *
 * @param {object} [options] `{ endpoint, method, requestMethod, requestPath, headers, credentials, signal, fetch }`
 */
export async function fetchToken(options = {}) {
  const {
    endpoint: base = TOKEN_ENDPOINT,
    method = 'POST',
    requestMethod,
    requestPath,
    headers,
    credentials = 'same-origin',
    signal,
    fetch: fetchImpl = globalThis.fetch,
  } = options;
  const endpoint = requestMethod && requestPath ? tokenTarget(base, requestMethod, requestPath) : base;
  let response;
  try {
    response = await fetchImpl(endpoint, { method, headers, credentials, signal, cache: 'no-store' });
  } catch (error) {
    if (signal?.aborted) throw new IdemgateError('aborted', 'the token request was aborted', { cause: signal.reason });
    throw new IdemgateError('token_unavailable', 'the token endpoint could not be reached', { cause: error });
  }
  if (!response.ok) {
    await response.body?.cancel().catch(() => {});
    throw new IdemgateError('token_unavailable', `the token endpoint answered ${response.status}`, { status: response.status });
  }
  let body;
  try {
    body = await response.json();
  } catch (error) {
    throw new IdemgateError('token_invalid_response', 'the token endpoint did not answer JSON', { cause: error });
  }
  const { token, header, expires_at_ms: expiresAtMs } = body ?? {};
  if (typeof token !== 'string' || !token || typeof header !== 'string' || !HEADER_NAME.test(header)
      || !Number.isFinite(expiresAtMs)) {
    throw new IdemgateError('token_invalid_response', 'expected {"token", "header", "expires_at_ms"} from the token endpoint');
  }
  return { token, header, expiresAtMs };
}

/** A copy of `init` whose headers carry `token` (as returned by `fetchToken`). */
export function attachToken(init = {}, token) {
  const headers = new Headers(init.headers);
  headers.set(token.header, token.token);
  return { ...init, headers };
}

/**
 * Whether a token is still usable at `nowMs` (wall clock; the edge's rule: strictly before expiry).
 * Throws `invalid_argument` when a time is not a number of milliseconds from 0 to 2^53-1.
 */
export function tokenIsFresh(token, nowMs = Date.now()) {
  return token != null && tokenFresh(token.expiresAtMs, nowMs);
}
