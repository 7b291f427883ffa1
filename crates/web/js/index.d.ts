// Type declarations of the `idemgate` package.

/** Every error of the package: `code` is stable (the core's `code()` string or one listed here). */
export declare class IdemgateError extends Error {
  constructor(code: string, message: string, details?: Record<string, unknown>);
  readonly name: 'IdemgateError';
  /**
   * Core codes: `key_*`, `json_*`, `transition_*` (`transition_table_*`: a refused table);
   * package codes: `invalid_argument`, `fingerprinter_state`, `entropy_unavailable`,
   * `network_error`, `timeout`, `aborted`, `token_unavailable`, `token_invalid_response`.
   */
  readonly code: string;
  /** Set on fetch errors: the key every attempt carried. */
  readonly key?: string;
  /** Set on fetch errors: attempts made. */
  readonly attempts?: number;
  /** Set on fetch errors: why retrying stopped. */
  readonly reason?: RetryFinalReason;
  /** Set on `token_unavailable` when the endpoint answered. */
  readonly status?: number;
}

/** A fresh idempotency key: a random UUID v4 (entropy from `crypto.getRandomValues`). */
export declare function newKey(): string;

/**
 * Parses an `Idempotency-Key` value as the edge does (bare or quoted; 1–255 visible ASCII).
 * An array is every occurrence of the header (`null` when empty). Throws `IdemgateError`.
 */
export declare function parseKey(value: string | BufferSource): string;
export declare function parseKey(values: Array<string | BufferSource>): string | null;

export type FingerprintMode = 'auto' | 'raw' | 'json' | 'form' | 'fields' | 'none';

/** The edge's fingerprint configuration. */
export interface FingerprintSpec {
  /** Default `auto`: by `Content-Type`, JSON types canonically, form bodies canonically, the rest raw. */
  mode?: FingerprintMode;
  /** JSON pointers (RFC 6901), `fields` mode only. */
  fields?: string[];
  /** Header names that take part, in order. Default `['content-type']`. */
  headers?: string[];
  /** Default 64. */
  maxDepth?: number;
  /** Default 64. */
  maxNumberLen?: number;
  /**
   * The edge route's `case_sensitive`: the path is hashed as that route spells it. Default `false`
   * (lower-cased), as at the edge.
   */
  caseSensitive?: boolean;
}

export type HeadersLike = Headers | Record<string, string> | Array<[string, string]>;

export type BodyLike = string | BufferSource | Blob | URLSearchParams | ReadableStream<Uint8Array> | null | undefined;

export interface RequestFacts {
  /** Default `POST`. */
  method?: string;
  /** Resolved against the page; only path and query count. Default `/`. */
  url?: string | URL;
  headers?: HeadersLike;
  body?: BodyLike;
}

/** The edge's default fingerprint configuration, from the core (mode `auto` over `content-type`, limits 64/64). */
export declare const DEFAULT_FINGERPRINT: Readonly<Required<Pick<FingerprintSpec, 'mode' | 'headers' | 'fields' | 'maxDepth' | 'maxNumberLen' | 'caseSensitive'>>>;

/** A request as the edge sees it: what a fingerprint hashes. */
export interface RequestTarget {
  /** As `fetch` sends it: DELETE, GET, HEAD, OPTIONS, POST, PUT upper-cased; any other as written. */
  method: string;
  /** Normalised (`//a;x/../b` → `/b`), lower-cased unless `caseSensitive`, with the query. */
  path: string;
}
/** The method and path the edge sees for `fetch(url, { method })` (the core's spelling). */
export declare function requestTarget(method: string, url: string | URL, options?: { caseSensitive?: boolean }): RequestTarget;

/** The edge's request fingerprint, 64 lowercase hex digits. */
export declare function fingerprint(request: RequestFacts | Request, spec?: FingerprintSpec): Promise<string>;

/** Incremental fingerprint: `update` body chunks, then `finish`. */
export declare class Fingerprinter {
  constructor(spec?: FingerprintSpec, request?: Omit<RequestFacts, 'body'>);
  update(chunk: string | BufferSource): this;
  finish(): string;
  /** Frees an unfinished fingerprinter. */
  dispose(): void;
}

export interface RetryPolicy {
  /** Attempts in total, the first included. Default 5. */
  maxAttempts: number;
  /** Cap of the first retry's delay, doubling per attempt. Default 250. */
  baseDelayMs: number;
  /** Largest back-off cap (a `Retry-After` may exceed it). Default 10 000. */
  maxDelayMs: number;
  /** No retry starts later than this after the first attempt. Default 30 000. */
  maxTotalMs: number;
}

export type RetryFinalReason = 'success' | 'not_retryable' | 'retry_exhausted_attempts' | 'retry_exhausted_time';

export interface RetryStep {
  /** 1 after the first attempt. */
  attemptsMade: number;
  /** Since the first attempt started. Default 0. */
  elapsedMs?: number;
  /** Default `response`. */
  outcome?: 'network_error' | 'timeout' | 'response';
  status?: number;
  /** The raw `Retry-After` header. */
  retryAfter?: string | null;
  /** Wall clock, for HTTP-date `Retry-After`. Default `Date.now()`. */
  nowMs?: number;
  /** Uniform u32 for the jitter. Default from `crypto.getRandomValues`. */
  random?: number;
}

export type RetryDecision = { retry: true; delayMs: number } | { retry: false; reason: RetryFinalReason };

/** The core's client retry policy. */
export declare function retryDecision(step: RetryStep, policy?: Partial<RetryPolicy>): RetryDecision;
export declare function retryDefaults(): Readonly<RetryPolicy>;
/** `Retry-After` in milliseconds, or `null` when it is neither delta-seconds nor an HTTP date. */
export declare function parseRetryAfter(value: string, nowMs?: number): number | null;

export type StatusClass =
  | 'success' | 'redirect' | 'in_flight' | 'rate_limited' | 'unavailable' | 'key_reused'
  | 'client_error' | 'server_error' | 'invalid';
export declare function classifyStatus(status: number): StatusClass;

export type SubmitState = 'idle' | 'in_flight' | 'succeeded' | 'failed_retryable' | 'failed_final';
export type SubmitEvent = 'submit' | 'succeed' | 'fail_retryable' | 'fail_final' | 'reset';
export interface TransitionResult<S extends string = string> {
  outcome: 'apply' | 'already_applied';
  /** The next state for `apply`; the state given for `already_applied`. */
  state: S;
}
export interface ArrivalResult<S extends string = string> {
  /**
   * `apply`: legal now; `already_applied`: applied before, or stale (the object is at or past
   * the event's target); `early`: a state the object has not reached yet accepts it (deliver it
   * again later); `illegal`: no later state accepts it.
   */
  outcome: 'apply' | 'already_applied' | 'early' | 'illegal';
  /** The next state for `apply`; the state given otherwise. */
  state: S;
}

/** A state table as data: the format of the edge's `routes[].order.table`. */
export interface TableDeclaration {
  /** Default: the first state. */
  initial?: string;
  /** Default: every state the transitions name, in order of first appearance (`initial` first). */
  states?: string[];
  /** Default: the states with no outgoing transition. */
  terminal?: string[];
  /** `[from, event, to]`; at least one, at most one per `(from, event)`. */
  transitions: Array<[string, string, string]>;
}

/** A state table the core validated; every answer is the core's. */
export declare class StateTable {
  /**
   * A table from its declaration (JSON text or the object). Throws `IdemgateError` with the core's
   * `transition_table_*` code for a table it refuses.
   */
  static fromJSON(table: string | TableDeclaration): StateTable;
  /** The core's submit-button lifecycle (what `Intent` moves through). */
  static readonly submit: StateTable;
  /** Use `StateTable.fromJSON`: the constructor throws `invalid_argument`. */
  private constructor();
  readonly initial: string;
  readonly states: readonly string[];
  readonly terminal: readonly string[];
  /** `event` at `state` as an application applies it; throws `transition_illegal`, `transition_unknown_state`, `transition_unknown_event`. */
  on(state: string, event: string): TransitionResult;
  /** `event` arriving at `state`, as an order-guarded edge decides; throws `transition_unknown_state`, `transition_unknown_event`. */
  arrival(state: string, event: string): ArrivalResult;
}

/** `StateTable.submit.on(state, event)`: the submit button's lifecycle. */
export declare function submitTransition(state: SubmitState, event: SubmitEvent): TransitionResult<SubmitState>;
export declare function version(): string;

/** The header that marks a replayed answer: the core's name, lowercase (header names are case-insensitive). */
export declare const REPLAYED_HEADER: 'idempotent-replayed';

export interface IdempotentFetchOptions {
  /** The key to send; default a fresh `newKey()`. Pass the same key for the same intent. */
  key?: string;
  /** Default `Idempotency-Key`. */
  headerName?: string;
  /**
   * The entity-tag of what the update read (the `ETag` of its GET), sent as `If-Match` on every
   * attempt (may be given in `init` instead). A 412 (it changed since) or 428 (`If-Match`
   * required) answer is final: never retried.
   */
  ifMatch?: string | null;
  retry?: Partial<RetryPolicy>;
  /** Per-attempt timeout; a timed-out attempt is retried. Default none. */
  timeoutMs?: number;
  /** Attach a one-time token from the edge (fetched once, refetched when expired). */
  token?: boolean | TokenOptions;
  fetch?: typeof globalThis.fetch;
  onRetry?: (info: { attempt: number; delayMs: number; status: number | null; outcome: 'response' | 'network_error' | 'timeout'; key: string }) => void;
}

export interface IdempotentResult {
  response: Response;
  key: string;
  /** `Idempotent-Replayed: true`: the edge answered from its record (needs CORS exposure cross-origin). */
  replayed: boolean;
  attempts: number;
  reason: RetryFinalReason;
}

/** `RequestInit` with the version the update read: sent as `If-Match` (see `IdempotentFetchOptions.ifMatch`). */
export interface IdempotentRequestInit extends RequestInit {
  ifMatch?: string | null;
}

/** `fetch` with an `Idempotency-Key` kept across safe, bounded retries. */
export declare function idempotentFetch(url: string | URL | Request, init?: IdempotentRequestInit, options?: IdempotentFetchOptions): Promise<IdempotentResult>;

export interface TokenOptions {
  /** Default `/.idemgate/token`. */
  endpoint?: string;
  /** Default `POST`. */
  method?: string;
  /** The method of the request the token is for (tokens are bound to one route and method). */
  requestMethod?: string;
  /** The path of the request the token is for. */
  requestPath?: string;
  headers?: HeadersLike;
  credentials?: RequestCredentials;
  signal?: AbortSignal;
  fetch?: typeof globalThis.fetch;
}
export interface OneTimeToken {
  token: string;
  /** The header to send it in. */
  header: string;
  expiresAtMs: number;
}
/** The edge's default token endpoint (the core's). */
export declare const TOKEN_ENDPOINT: '/.idemgate/token';
export declare function fetchToken(options?: TokenOptions): Promise<OneTimeToken>;
export declare function attachToken(init: RequestInit | undefined, token: OneTimeToken): RequestInit;
/** Whether `token` is usable at `nowMs` (the edge's rule: strictly before expiry); throws `invalid_argument` for a time that is not a number of ms. */
export declare function tokenIsFresh(token: OneTimeToken | null | undefined, nowMs?: number): boolean;

export type Payload = BodyLike | FormData | object;
export interface SendContext<P = Payload> {
  key: string;
  payload: P;
  /** The version the update read, given to `submit` (send it as `If-Match`). */
  ifMatch?: string;
}

/** One business intent and its key, on the core's submit lifecycle. */
export declare class Intent<P = Payload> {
  constructor(options?: { fingerprint?: FingerprintSpec });
  readonly state: SubmitState;
  readonly key: string | null;
  subscribe(listener: (state: SubmitState, intent: Intent<P>) => void): () => void;
  /** `ifMatch`: the version the update read; the same payload at another version is a new intent (a new key). */
  submit<R>(payload: P, send: (context: SendContext<P>) => Promise<R>, options?: { ifMatch?: string | null }): Promise<R>;
  reset(): void;
}

export interface GuardOptions {
  url?: string | ((element: Element) => string);
  /** Default `POST`. */
  method?: string;
  /** The method of the request the token is for (tokens are bound to one route and method). */
  requestMethod?: string;
  /** The path of the request the token is for. */
  requestPath?: string;
  headers?: HeadersLike;
  /** Reads the payload at each submit; default: the form's fields as JSON (FormData if it has files). */
  payload?: (element: Element) => Payload;
  /** Reads the version the update read (its `ETag`) at each submit, sent as `If-Match`; another version is a new intent. */
  ifMatch?: (element: Element) => string | null;
  /** Sends instead of `idempotentFetch(url, …)`. */
  send?: (context: SendContext) => Promise<unknown>;
  fetchOptions?: Omit<IdempotentFetchOptions, 'key'>;
  fingerprint?: FingerprintSpec;
  intent?: Intent;
  onStateChange?: (state: SubmitState, intent: Intent) => void;
  onSuccess?: (result: any, intent: Intent) => void;
  onError?: (errorOrResult: any, intent: Intent) => void;
}
export interface Guard {
  intent: Intent;
  submit(): Promise<any>;
  dispose(): void;
}
/** Binds an intent to a button (click) or a form (submit). */
export declare function guardSubmit(element: HTMLButtonElement | HTMLInputElement | HTMLFormElement, options?: GuardOptions): Guard;
export declare function formPayload(form: HTMLFormElement): Record<string, string | string[]> | FormData;
export declare function encodePayload(payload: Payload): { body: BodyInit | null; contentType: string | null };
export declare function payloadFingerprint(payload: Payload, spec?: FingerprintSpec | null): Promise<string | null>;
/** A body that sends the same bytes on every attempt (FormData encoded once, streams buffered). */
export declare function encodeBody(body: BodyInit | null | undefined): Promise<{ body: BodyInit | null | undefined; contentType: string | null }>;
