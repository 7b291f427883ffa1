// One business intent, one key (`docs/semantics.md` §9): the key is made at the first submit, kept for every
// retry of the same payload, and dropped after a final outcome or when the payload changes. The
// states and moves are the core's submit lifecycle (idle → in_flight → succeeded /
// failed_retryable / failed_final); a submit while in flight is "already applied", which is how a
// double click becomes one request.

import { newKey, fingerprint, fingerprintPayload, submitTransition, settle, intentIsOver, reusesKey, CORE } from './core.js';
import { idempotentFetch } from './fetch.js';

const isInstance = (value, name) => typeof globalThis[name] === 'function' && value instanceof globalThis[name];

/** Whether `payload` is sent as it is (not JSON-encoded). */
function isBody(payload) {
  return typeof payload === 'string' || payload instanceof ArrayBuffer || ArrayBuffer.isView(payload)
    || ['Blob', 'URLSearchParams', 'FormData', 'ReadableStream'].some((name) => isInstance(payload, name));
}

/**
 * How a payload goes on the wire: a body as it is, or anything else as JSON.
 * Returns `{ body, contentType }`.
 */
export function encodePayload(payload) {
  if (payload === undefined || payload === null) return { body: null, contentType: null };
  if (isBody(payload)) return { body: payload, contentType: null };
  return { body: JSON.stringify(payload), contentType: 'application/json' };
}

/**
 * The fingerprint that decides whether a payload is "the same" as the last one, by the core's
 * rule for its kind (`idemgate_core::browser::intent::Payload`): canonical JSON for values sent as JSON
 * (member order does not matter), the bytes of a body, FormData by its entries (its multipart
 * encoding differs on every request); `null` for a stream (read once: never the same). JS only
 * tells the kinds apart and encodes the bytes. A `spec` (the intent's `fingerprint` option)
 * fingerprints the bytes with that configuration instead.
 */
export async function payloadFingerprint(payload, spec) {
  let body = encodePayload(payload).body;
  let kind = isBody(payload) ? 'body' : 'value';
  if (isInstance(payload, 'FormData')) {
    body = JSON.stringify([...payload.entries()].map(([name, value]) => [name, typeof value === 'string'
      ? value : { name: value.name, size: value.size, type: value.type, lastModified: value.lastModified }]));
    kind = 'form_entries';
  } else if (isInstance(payload, 'ReadableStream')) {
    kind = 'stream';
  }
  if (spec == null || kind === 'stream') return fingerprintPayload(kind, body);
  return fingerprint({ method: 'POST', url: '/', headers: [], body }, spec);
}

/**
 * How a resolved `send` settled (`{ event, keepsKey }`): by the status of its HTTP answer (an
 * `idempotentFetch` result's final response, or a `Response`), as the core settles it; any other
 * value is a success.
 */
function settleResult(result) {
  const response = isInstance(result, 'Response') ? result
    : result && typeof result.reason === 'string' && 'response' in result ? result.response : null;
  return response ? settle(response.status) : CORE.resolved;
}

/**
 * A business intent with its key. `submit(payload, send, { ifMatch })` calls
 * `send({ key, payload, ifMatch })` unless a submission is already in flight (then it returns that
 * submission's promise). `ifMatch` is the version an update read (its `ETag`, sent as `If-Match`):
 * the same payload at another version is another request, so a new intent with a new key.
 *
 * Outcomes: `send` resolving with an `idempotentFetch` result or a `Response` is classified by
 * status (2xx/3xx succeeded; 409, 429, 502–504 failed_retryable; other statuses failed_final); any
 * other resolved value is a success; a rejection is failed_retryable (the outcome is unknown, so
 * the key is kept: repeating it can never cause a duplicate).
 */
export class Intent {
  #state = 'idle';
  #key = null;
  #fingerprint = null;
  #ifMatch = null;
  #pending = null;
  #listeners = new Set();
  #spec;

  /** @param {object} [options] `{ fingerprint }`: a fingerprint spec for comparing payloads */
  constructor(options = {}) {
    this.#spec = options.fingerprint ?? null;
  }

  /** `idle`, `in_flight`, `succeeded`, `failed_retryable` or `failed_final`. */
  get state() {
    return this.#state;
  }

  /** The key of the current intent (`null` before the first submit and after a final outcome). */
  get key() {
    return this.#key;
  }

  /** Calls `listener(state, intent)` after every change; returns the unsubscribe function. */
  subscribe(listener) {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Submits `payload` through `send({ key, payload, ifMatch })`; one submission at a time. */
  submit(payload, send, options = {}) {
    const ifMatch = options.ifMatch ?? null;
    if (ifMatch !== null && typeof ifMatch !== 'string') throw new TypeError('ifMatch is an entity-tag string (an ETag value)');
    if (intentIsOver(this.#state)) this.reset();
    const step = submitTransition(this.#state, 'submit');
    if (step.outcome === 'already_applied') return this.#pending;
    this.#pending = this.#run(payload, send, ifMatch);
    this.#enter(step.state);
    return this.#pending;
  }

  /** Ends a finished intent (succeeded or failed_final): back to idle, without a key. */
  reset() {
    const step = submitTransition(this.#state, 'reset');
    this.#key = null;
    this.#fingerprint = null;
    this.#ifMatch = null;
    this.#enter(step.state);
  }

  async #run(payload, send, ifMatch) {
    await null; // the state is in_flight before send runs, so a re-entrant submit joins this one
    let outcome;
    try {
      const print = await payloadFingerprint(payload, this.#spec);
      if (!reusesKey(this.#key === null ? null : this.#fingerprint, print, this.#ifMatch, ifMatch)) this.#key = newKey();
      this.#fingerprint = print;
      this.#ifMatch = ifMatch;
      const result = await send({ key: this.#key, payload, ifMatch: ifMatch ?? undefined });
      outcome = { ...settleResult(result), result };
    } catch (error) {
      // No answer to judge: the request may have run (the core's `unanswered`: keep the key).
      outcome = { ...CORE.unanswered, error };
    }
    this.#pending = null;
    const step = submitTransition(this.#state, outcome.event);
    if (!outcome.keepsKey) {
      this.#key = null;
      this.#fingerprint = null;
      this.#ifMatch = null;
    }
    this.#enter(step.state);
    if ('error' in outcome) throw outcome.error;
    return outcome.result;
  }

  #enter(state) {
    this.#state = state;
    for (const listener of [...this.#listeners]) listener(state, this);
  }
}

const SUBMITTERS = 'button:not([type]), button[type="submit"], input[type="submit"], input[type="image"]';

/** A form's fields as a JSON-ready object (repeated names become arrays); FormData if it has files. */
export function formPayload(form) {
  const data = new FormData(form);
  const out = {};
  for (const [name, value] of data.entries()) {
    if (typeof value !== 'string') return data;
    if (!(name in out)) out[name] = value;
    else out[name] = [].concat(out[name], value);
  }
  return out;
}

/**
 * Binds an intent to a button (click) or a form (submit). While a submission is in flight the
 * button — or the form's submit buttons — are disabled and `aria-busy="true"`; both are restored
 * afterwards. The request goes through `idempotentFetch`, or through `send` if given.
 *
 * @param {HTMLButtonElement|HTMLFormElement} element
 * @param {object} options `{ url, method, headers, payload, ifMatch, send, fetchOptions,
 *   fingerprint, intent, onStateChange, onSuccess, onError }`; `ifMatch(element)` gives the
 *   version the update read at each submit (sent as `If-Match`; another version, a new key)
 * @returns {{ intent: Intent, submit: () => Promise<any>, dispose: () => void }}
 */
export function guardSubmit(element, options = {}) {
  const { url, method = 'POST', headers, payload, ifMatch, send, fetchOptions = {}, onStateChange, onSuccess, onError } = options;
  const isForm = isInstance(element, 'HTMLFormElement');
  const form = isForm ? element : element.form ?? null;
  const intent = options.intent ?? new Intent({ fingerprint: options.fingerprint });
  const controls = isForm ? [...element.querySelectorAll(SUBMITTERS)] : [element];
  const busyTargets = isForm ? [element, ...controls] : controls;
  let saved = null;

  const busy = () => {
    if (saved) return;
    saved = busyTargets.map((el) => [el, el.disabled, el.getAttribute('aria-busy')]);
    for (const el of controls) el.disabled = true;
    for (const el of busyTargets) el.setAttribute('aria-busy', 'true');
  };
  const restore = () => {
    if (!saved) return;
    for (const [el, disabled, ariaBusy] of saved) {
      if (controls.includes(el)) el.disabled = disabled;
      if (ariaBusy === null) el.removeAttribute('aria-busy');
      else el.setAttribute('aria-busy', ariaBusy);
    }
    saved = null;
  };
  const unsubscribe = intent.subscribe((state) => {
    if (state === 'in_flight') busy();
    else restore();
    onStateChange?.(state, intent);
  });

  const defaultSend = async ({ key, payload: value, ifMatch: version }) => {
    if (!url) throw new TypeError('guardSubmit needs `url` (or `send`)');
    const { body, contentType } = encodePayload(value);
    const requestHeaders = new Headers(headers);
    if (contentType && !requestHeaders.has('content-type')) requestHeaders.set('content-type', contentType);
    const target = typeof url === 'function' ? url(element) : url;
    return idempotentFetch(target, { method, headers: requestHeaders, body }, { ...fetchOptions, key, ...(version != null && { ifMatch: version }) });
  };

  const submit = () => {
    const value = payload ? payload(element) : form ? formPayload(form) : null;
    const version = ifMatch ? ifMatch(element) : null;
    return intent.submit(value, send ?? defaultSend, { ifMatch: version }).then(
      (result) => {
        if (intent.state === 'succeeded') onSuccess?.(result, intent);
        else onError?.(result, intent);
        return result;
      },
      (error) => {
        onError?.(error, intent);
        throw error;
      },
    );
  };
  // The 2nd and later clicks of one double or triple click (`detail` > 1) belong to the gesture whose
  // first click submitted: they never start a submission. While it is in flight the disabled button
  // swallows them; but a fast answer (or a loaded machine) can re-enable the button between the
  // clicks, and that second click would otherwise be a new intent with a new key: a second payment.
  const isRepeatClick = (event) => event.type === 'click' && event.detail > 1;
  const onEvent = (event) => {
    event.preventDefault();
    if (isRepeatClick(event)) return;
    submit().catch(() => {});
  };
  // A form submits from its buttons' clicks: a repeat click is cancelled before it submits the form.
  const onControlClick = (event) => {
    if (isRepeatClick(event)) event.preventDefault();
  };
  const eventName = isForm ? 'submit' : 'click';
  element.addEventListener(eventName, onEvent);
  if (isForm) for (const el of controls) el.addEventListener('click', onControlClick);

  return {
    intent,
    submit,
    dispose() {
      element.removeEventListener(eventName, onEvent);
      if (isForm) for (const el of controls) el.removeEventListener('click', onControlClick);
      unsubscribe();
      restore();
    },
  };
}
