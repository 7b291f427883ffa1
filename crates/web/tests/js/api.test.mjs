// The package's JS layer in Node, without a browser: argument shapes, the intent's state machine,
// and idempotentFetch's decisions against a stub fetch.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { pkgDir } from './helpers/paths.mjs';

const api = await import(new URL('index.js', pkgDir));
const { IdemgateError } = api;

const codeOf = (fn) => {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof IdemgateError, String(error));
    return error.code;
  }
  return null;
};

describe('keys and errors', () => {
  it('newKey gives distinct UUID v4 keys that parse', () => {
    const keys = new Set(Array.from({ length: 100 }, () => api.newKey()));
    assert.equal(keys.size, 100);
    for (const key of keys) assert.equal(api.parseKey(key), key);
  });

  it('errors from the wasm core are IdemgateErrors with the core code', () => {
    assert.equal(codeOf(() => api.parseKey('')), 'key_empty');
    assert.equal(codeOf(() => api.parseKey('x'.repeat(256))), 'key_too_long');
    assert.equal(codeOf(() => api.parseKey(['a', 'b'])), 'key_conflicting');
    assert.equal(codeOf(() => api.submitTransition('idle', 'succeed')), 'transition_illegal');
    assert.equal(codeOf(() => new api.Fingerprinter({ mode: 'xml' })), 'invalid_argument');
    const error = new IdemgateError('network_error', 'x', { attempts: 2 });
    assert.ok(error instanceof Error && error instanceof IdemgateError);
    assert.equal(error.attempts, 2);
    assert.ok(!(new Error('plain') instanceof IdemgateError));
  });
});

describe('fingerprint', () => {
  const facts = { method: 'post', url: 'http://example.test/orders?x=1', headers: { 'Content-Type': 'application/json' } };
  const text = '{"sku":"A1","qty":1}';

  it('every body shape of the same bytes gives the same fingerprint', async () => {
    const expected = await api.fingerprint({ ...facts, body: text });
    const bytes = new TextEncoder().encode(text);
    for (const body of [bytes, bytes.buffer, new Blob([text]), new Response(text).body]) {
      assert.equal(await api.fingerprint({ ...facts, body }), expected);
    }
    const request = new Request(facts.url, { method: 'POST', headers: facts.headers, body: text });
    assert.equal(await api.fingerprint(request), expected);
    const fp = new api.Fingerprinter(undefined, facts);
    assert.equal(fp.update('{"qty":1,').update('"sku":"A1"}').finish(), expected, 'json mode ignores member order');
    assert.equal(codeOf(() => fp.finish()), 'fingerprinter_state');
  });

  it('the path, the query and the configured headers take part; the host does not', async () => {
    const base = await api.fingerprint({ ...facts, body: text });
    assert.equal(await api.fingerprint({ ...facts, url: '/orders?x=1', body: text }), base);
    assert.notEqual(await api.fingerprint({ ...facts, url: '/orders?x=2', body: text }), base);
    assert.notEqual(await api.fingerprint({ ...facts, headers: { 'content-type': 'text/plain' }, body: text }), base);
    assert.equal(await api.fingerprint({ ...facts, headers: { 'content-type': 'application/json', 'x-trace': '1' }, body: text }), base);
  });

  // Browser–edge parity: the edge fingerprints `POST /orders` for every spelling below
  // (the method as fetch sends it, the path as a case-insensitive route spells it).
  it('the method and path are hashed as the edge sees them', async () => {
    const edge = await api.fingerprint({ ...facts, method: 'POST', url: '/orders?x=1', body: text });
    for (const [method, url] of [['post', '/Orders?x=1'], ['Post', 'http://example.test//orders;v=2?x=1'], ['POST', '/a/../%6Frders?x=1']]) {
      assert.equal(await api.fingerprint({ ...facts, method, url, body: text }), edge, `${method} ${url}`);
    }
    assert.deepEqual(api.requestTarget('post', '/Orders//7;v=1?Q=A'), { method: 'POST', path: '/orders/7?Q=A' });
    assert.deepEqual(api.requestTarget('patch', '/Orders', { caseSensitive: true }), { method: 'patch', path: '/Orders' });
    const sensitive = { ...api.DEFAULT_FINGERPRINT, caseSensitive: true };
    assert.notEqual(await api.fingerprint({ ...facts, url: '/Orders?x=1', body: text }, sensitive), edge);
    assert.notEqual(await api.fingerprint({ ...facts, url: '/orders/?x=1', body: text }), edge, 'a trailing slash is another path');
  });

  it('results cross as names and objects, an unknown outcome is an error (no sentinel code)', () => {
    assert.deepEqual(api.retryDecision({ attemptsMade: 1, outcome: 'network_error', random: 0 }), { retry: true, delayMs: 0 });
    assert.deepEqual(api.retryDecision({ attemptsMade: 1, status: 422 }), { retry: false, reason: 'not_retryable' });
    assert.equal(codeOf(() => api.retryDecision({ attemptsMade: 1, outcome: 'sneezed' })), 'invalid_argument');
    assert.equal(api.classifyStatus(429), 'rate_limited');
    assert.deepEqual(api.submitTransition('in_flight', 'submit'), { outcome: 'already_applied', state: 'in_flight' });
  });

  it('FormData must be encoded once; encodeBody gives identical bytes for every attempt', async () => {
    const form = new FormData();
    form.append('sku', 'A1');
    await assert.rejects(api.fingerprint({ body: form }), (e) => e.code === 'invalid_argument');
    const { body, contentType } = await api.encodeBody(form);
    assert.match(contentType, /^multipart\/form-data; boundary=/);
    assert.equal(await body.text(), await body.text());
  });
});

describe('Intent', () => {
  it('a submit while in flight joins it; the key survives retryable failures and payload order', async () => {
    const intent = new api.Intent();
    const states = [];
    intent.subscribe((s) => states.push(s));
    const sent = [];
    let fail = true;
    const send = async ({ key, payload }) => {
      sent.push([key, payload]);
      if (fail) throw new Error('offline');
      return 'ok';
    };
    const a = intent.submit({ sku: 'A1', qty: 1 }, send);
    const b = intent.submit({ sku: 'B2' }, send);
    assert.equal(a, b);
    await assert.rejects(a, /offline/);
    assert.equal(intent.state, 'failed_retryable');
    fail = false;
    assert.equal(await intent.submit({ qty: 1, sku: 'A1' }, send), 'ok');
    assert.equal(sent.length, 2);
    assert.equal(sent[0][0], sent[1][0], 'same payload (member order aside): same key');
    assert.deepEqual(states, ['in_flight', 'failed_retryable', 'in_flight', 'succeeded']);
    assert.equal(intent.key, null);
    await intent.submit({ qty: 1, sku: 'A1' }, send);
    assert.notEqual(sent[2][0], sent[1][0], 'after success: a new intent');
  });

  it('responses are classified by status through the core', async () => {
    const intent = new api.Intent();
    const respond = (status) => async () => new Response(null, { status });
    await intent.submit('x', respond(503));
    assert.equal(intent.state, 'failed_retryable');
    const key = intent.key;
    await intent.submit('x', respond(409));
    assert.equal(intent.key, key);
    await intent.submit('x', respond(500));
    assert.equal(intent.state, 'failed_final');
    assert.equal(intent.key, null);
    await intent.submit('y', respond(201));
    assert.equal(intent.state, 'succeeded');
  });
});

describe('idempotentFetch (stub fetch)', () => {
  const stub = (answers) => {
    const calls = [];
    const impl = async (url, init) => {
      calls.push({ url, init });
      const next = answers[Math.min(calls.length - 1, answers.length - 1)];
      if (next instanceof Error) throw next;
      return new Response(next.body ?? null, { status: next.status, headers: next.headers });
    };
    return { calls, impl };
  };

  it('500 is not retried; the same bytes and key go out on every attempt', async () => {
    const { calls, impl } = stub([{ status: 500 }]);
    const r = await api.idempotentFetch('http://x.test/a', { body: 'b' }, { fetch: impl });
    assert.deepEqual([r.response.status, r.attempts, r.reason], [500, 1, 'not_retryable']);
    const form = new FormData();
    form.append('a', '1');
    const retried = stub([{ status: 503 }, { status: 200 }]);
    await api.idempotentFetch('http://x.test/a', { body: form }, { fetch: retried.impl, retry: { baseDelayMs: 1 } });
    const [first, second] = retried.calls;
    assert.equal(await new Response(first.init.body).text(), await new Response(second.init.body).text());
    assert.equal(first.init.headers.get('idempotency-key'), second.init.headers.get('idempotency-key'));
    assert.equal(first.init.headers.get('content-type'), second.init.headers.get('content-type'));
    assert.equal(first.init.method, 'POST');
  });

  it('stops at max total time and returns the last answer', async () => {
    const { calls, impl } = stub([{ status: 503, headers: { 'retry-after': '60' } }]);
    const r = await api.idempotentFetch('http://x.test/a', {}, { fetch: impl });
    assert.deepEqual([r.response.status, r.reason, calls.length], [503, 'retry_exhausted_time', 1]);
  });

  it('uses the given key and header name', async () => {
    const { calls, impl } = stub([{ status: 201, headers: { 'idempotent-replayed': '?1' } }]);
    const r = await api.idempotentFetch('http://x.test/a', { method: 'PATCH' }, { fetch: impl, key: 'k-1', headerName: 'X-Key' });
    assert.deepEqual([r.key, r.replayed, calls[0].init.headers.get('x-key'), calls[0].init.method], ['k-1', true, 'k-1', 'PATCH']);
  });
});

describe('StateTable', () => {
  const ORDER = {
    initial: 'unpaid',
    transitions: [['unpaid', 'payment.succeeded', 'paid'], ['paid', 'order.shipped', 'shipped'],
      ['unpaid', 'order.cancelled', 'cancelled'], ['paid', 'order.cancelled', 'cancelled']],
  };

  it('a table of your own, from JSON text or an object, answers as the core does', () => {
    for (const source of [ORDER, JSON.stringify(ORDER)]) {
      const table = api.StateTable.fromJSON(source);
      assert.equal(table.initial, 'unpaid');
      assert.deepEqual(table.states, ['unpaid', 'paid', 'shipped', 'cancelled']);
      assert.deepEqual(table.terminal, ['shipped', 'cancelled']);
      assert.deepEqual(table.on('unpaid', 'payment.succeeded'), { outcome: 'apply', state: 'paid' });
      assert.deepEqual(table.on('shipped', 'payment.succeeded'), { outcome: 'already_applied', state: 'shipped' });
      assert.equal(codeOf(() => table.on('unpaid', 'order.shipped')), 'transition_illegal');
      assert.deepEqual(table.arrival('unpaid', 'order.shipped'), { outcome: 'early', state: 'unpaid' });
      assert.deepEqual(table.arrival('shipped', 'order.cancelled'), { outcome: 'illegal', state: 'shipped' });
      assert.deepEqual(table.arrival('paid', 'payment.succeeded'), { outcome: 'already_applied', state: 'paid' });
      assert.equal(codeOf(() => table.arrival('paid', 'charge.refunded')), 'transition_unknown_event');
      assert.equal(codeOf(() => table.arrival('lost', 'order.shipped')), 'transition_unknown_state');
    }
  });

  it('a table the core refuses throws its transition_table_* code', () => {
    const cases = [
      [{ ...ORDER, terminals: ['shipped'] }, 'transition_table_unknown_field'],
      [{ transitions: [] }, 'transition_table_empty'],
      [{ transitions: [['a', 'go']] }, 'transition_table_malformed'],
      [{ transitions: [['a', 'go', 'b'], ['a', 'go', 'c']] }, 'transition_table_duplicate_transition'],
      [{ terminal: ['a'], transitions: [['a', 'go', 'b']] }, 'transition_table_terminal_has_transition'],
      [{ initial: 'x', states: ['a', 'b'], transitions: [['a', 'go', 'b']] }, 'transition_table_unknown_state'],
      ['{"transitions": [', 'transition_table_malformed'],
      [undefined, 'transition_table_malformed'],
    ];
    for (const [source, code] of cases) assert.equal(codeOf(() => api.StateTable.fromJSON(source)), code, JSON.stringify(source));
    const cyclic = {};
    cyclic.self = cyclic;
    assert.equal(codeOf(() => api.StateTable.fromJSON(cyclic)), 'invalid_argument');
    assert.equal(codeOf(() => new api.StateTable(ORDER)), 'invalid_argument');
  });

  it('JSON.parse reads the text and the core sees the parsed value: names as written, any other value refused', () => {
    const table = api.StateTable.fromJSON('{"transitions": [["née", "zahlen ✓", "bezahlt"]]}');
    assert.deepEqual(table.states, ['née', 'bezahlt']);
    assert.deepEqual(table.on('née', 'zahlen ✓'), { outcome: 'apply', state: 'bezahlt' });
    const deep = '['.repeat(100) + ']'.repeat(100);
    for (const source of [{ initial: 5, transitions: [['a', 'go', 'b']] }, { transitions: [['a', 'go', true]] },
      `{"transitions": ${deep}}`, '['.repeat(200000) + ']'.repeat(200000)]) {
      assert.equal(codeOf(() => api.StateTable.fromJSON(source)), 'transition_table_malformed', String(source).slice(0, 40));
    }
    // The core's text for a text it cannot read, as the edge's configuration reader says it.
    assert.throws(() => api.StateTable.fromJSON('{"transitions": '), { code: 'transition_table_malformed', message: 'not JSON' });
  });

  it('the submit lifecycle is the core\'s table too', () => {
    const submit = api.StateTable.submit;
    assert.equal(api.StateTable.submit, submit);
    assert.equal(submit.initial, 'idle');
    assert.deepEqual(submit.terminal, []);
    assert.deepEqual(submit.on('idle', 'submit'), api.submitTransition('idle', 'submit'));
    assert.equal(codeOf(() => submit.on('idle', 'succeed')), 'transition_illegal');
  });
});

describe('idempotentFetch with If-Match (stub fetch)', () => {
  const answering = (status) => {
    const calls = [];
    const impl = async (url, init) => {
      calls.push(init);
      return new Response(null, { status });
    };
    return { calls, impl };
  };

  it('sends ifMatch (in init or options) as If-Match; 412 and 428 are final', async () => {
    for (const status of [412, 428]) {
      const inInit = answering(status);
      const r = await api.idempotentFetch('http://x.test/o/7', { method: 'PATCH', body: '{}', ifMatch: '"v1"' },
        { fetch: inInit.impl, retry: { baseDelayMs: 1 } });
      assert.deepEqual([r.response.status, r.attempts, r.reason], [status, 1, 'not_retryable']);
      assert.equal(inInit.calls.length, 1);
      assert.equal(inInit.calls[0].headers.get('if-match'), '"v1"');
      assert.ok(!('ifMatch' in inInit.calls[0]), 'not passed on to fetch');
      const inOptions = answering(status);
      await api.idempotentFetch('http://x.test/o/7', { method: 'PATCH' }, { fetch: inOptions.impl, ifMatch: 'W/"v2"' });
      assert.deepEqual(inOptions.calls.map((init) => init.headers.get('if-match')), ['W/"v2"']);
    }
    const none = answering(200);
    await api.idempotentFetch('http://x.test/o/7', { method: 'PATCH', ifMatch: null }, { fetch: none.impl });
    assert.equal(none.calls[0].headers.get('if-match'), null);
    await assert.rejects(api.idempotentFetch('http://x.test/o/7', { ifMatch: 3 }, { fetch: none.impl }), (e) => e.code === 'invalid_argument');
  });
});

describe('the module allocator', () => {
  // The shipped .wasm brings its own allocator (lol_alloc's free list, crates/web/Cargo.toml). Many
  // fingerprinters alive at once, fed interleaved chunks of different sizes and finished in a
  // shuffled order, fragment its free list; each must still give exactly the fingerprint it gives
  // alone, so corrupted or shared memory shows up as a wrong hash.
  it('interleaved fingerprinters give the same answers as one at a time', () => {
    const bodies = Array.from({ length: 60 }, (_, i) => JSON.stringify({
      id: i, items: Array.from({ length: (i * 7) % 23 }, (_, j) => ({ sku: `s${j}`, qty: j, note: 'x'.repeat((i * j) % 300) })),
    }));
    const spec = (i) => ({ mode: ['json', 'raw', 'auto'][i % 3], headers: ['content-type'] });
    const request = { method: 'POST', url: '/orders', headers: { 'content-type': 'application/json' } };
    const alone = bodies.map((body, i) => new api.Fingerprinter(spec(i), request).update(body).finish());
    const live = bodies.map((_, i) => new api.Fingerprinter(spec(i), request));
    const bytes = bodies.map((body) => new TextEncoder().encode(body));
    for (let at = 0; bytes.some((b) => at < b.length); at += 97) {
      bytes.forEach((b, i) => { if (at < b.length) live[i].update(b.subarray(at, at + 97)); });
    }
    const order = bodies.map((_, i) => (i * 37) % bodies.length);
    assert.equal(new Set(order).size, bodies.length);
    const together = [];
    for (const i of order) together[i] = live[i].finish();
    assert.deepEqual(together, alone);
  });
});
