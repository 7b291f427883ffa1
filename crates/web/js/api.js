// The public API of the `idemgate` package, re-exported by index.js.

export { IdemgateError } from './errors.js';
export {
  newKey, parseKey, fingerprint, Fingerprinter, DEFAULT_FINGERPRINT, requestTarget, retryDecision,
  retryDefaults, parseRetryAfter, classifyStatus, submitTransition, version,
} from './core.js';
export { StateTable } from './table.js';
export { idempotentFetch, REPLAYED_HEADER } from './fetch.js';
export { fetchToken, attachToken, tokenIsFresh, TOKEN_ENDPOINT } from './token.js';
export { Intent, guardSubmit, formPayload, encodePayload, payloadFingerprint } from './intent.js';
export { encodeBody } from './bytes.js';
