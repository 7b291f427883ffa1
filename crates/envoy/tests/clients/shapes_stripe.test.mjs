// The Stripe Node SDK as a client of the filter in its *default* configuration (`{}`), in a real
// Envoy, against an upstream that speaks Stripe's API shape (form bodies in, JSON objects out).
// Form bodies are accepted, a retry with the SDK's key is replayed (the upstream acts once), and
// the key reused with a changed parameter is a 422 that the SDK surfaces as an error. The error
// classes for the edge's other answers (409, 429) are in problems_stripe.test.mjs.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import Stripe from 'stripe';
import { startStack } from './stack.mjs';

/** A tiny Stripe-shaped API: POST /v1/customers creates `cus_<n>`; `fail_once` emails get one 500. */
function api(created, failOnce) {
  return (req, res) => {
    if (req.method !== 'POST' || req.url !== '/v1/customers') {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { type: 'invalid_request_error', message: `no route ${req.url}` } }));
      return;
    }
    assert.equal(req.headers['content-type'], 'application/x-www-form-urlencoded');
    const params = Object.fromEntries(new URLSearchParams(req.body));
    if (failOnce.delete(params.email)) {
      created.push({ failed: params.email, key: req.headers['idempotency-key'] });
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { type: 'api_error', message: 'database unavailable' } }));
      return;
    }
    const customer = {
      id: `cus_${created.length + 1}`,
      object: 'customer',
      email: params.email,
      name: params.name ?? null,
      metadata: Object.fromEntries(
        Object.entries(params).filter(([k]) => k.startsWith('metadata[')).map(([k, v]) => [k.slice(9, -1), v]),
      ),
    };
    created.push({ ...customer, key: req.headers['idempotency-key'] });
    res.writeHead(200, { 'content-type': 'application/json', 'request-id': `req_${created.length}` });
    res.end(JSON.stringify(customer));
  };
}

function client(envoy, options = {}) {
  return new Stripe('sk_test_idemgate_clients', {
    host: '127.0.0.1',
    port: envoy.port,
    protocol: 'http',
    maxNetworkRetries: 0,
    ...options,
  });
}

// conformance: D6, D8, S3
test('the Stripe SDK creates objects through the default configuration; a retry with its key is replayed', async (t) => {
  const created = [];
  const { envoy } = await startStack(t, { filter: '{}', handler: api(created, new Set()) });
  const stripe = client(envoy);

  // Form bodies (with nested `metadata[...]`) pass the default fingerprint; the SDK's own
  // automatic key reaches the upstream.
  const first = await stripe.customers.create({ email: 'ada@example.com', name: 'Ada', metadata: { plan: 'pro' } });
  assert.equal(first.id, 'cus_1');
  assert.deepEqual(first.metadata, { plan: 'pro' });
  assert.match(created[0].key, /^stripe-node-retry-/);

  // The application retries with the key it chose: same object, the upstream acted once.
  const params = { email: 'grace@example.com', name: 'Grace' };
  const a = await stripe.customers.create(params, { idempotencyKey: 'signup-grace-1' });
  const b = await stripe.customers.create({ name: 'Grace', email: 'grace@example.com' }, { idempotencyKey: 'signup-grace-1' });
  assert.equal(a.id, 'cus_2');
  assert.equal(b.id, a.id);
  assert.equal(b.lastResponse.headers['idempotent-replayed'], 'true');
  assert.equal(a.lastResponse.headers['idempotent-replayed'], undefined);
  assert.equal(created.length, 2);

  // The same key with a changed parameter: 422, which the SDK throws (it picks the class by
  // status: only a 400 or 404 of type `idempotency_error` is a StripeIdempotencyError, so a 422
  // is a StripeAPIError; the problem's `error` member gives its code and type). Final: the edge
  // says a retry cannot help.
  await assert.rejects(
    stripe.customers.create({ email: 'grace@example.com', name: 'Grace Hopper' }, { idempotencyKey: 'signup-grace-1' }),
    (err) => {
      assert.ok(err instanceof Stripe.errors.StripeAPIError, `${err.constructor.name}: ${err}`);
      assert.ok(!(err instanceof Stripe.errors.StripeIdempotencyError));
      assert.equal(err.headers['stripe-should-retry'], 'false');
      assert.equal(err.statusCode, 422);
      assert.equal(err.code, 'key_reused');
      assert.equal(err.rawType, 'idempotency_error');
      assert.match(err.message, /different payload/);
      return true;
    },
  );
  assert.equal(created.length, 2, 'the 422 never reached the upstream');
  assert.equal(await envoy.counter('mismatch'), 1);
});

// conformance: S2, S7, S10
test("the SDK's automatic retry reuses its key, gets the stored answer and stops there (Stripe-Should-Retry: false)", async (t) => {
  const created = [];
  const { envoy } = await startStack(t, { filter: '{}', handler: api(created, new Set(['flaky@example.com'])) });
  // The SDK retries a 500 with the same automatic Idempotency-Key (as it does against Stripe).
  const stripe = client(envoy, { maxNetworkRetries: 2 });
  await assert.rejects(stripe.customers.create({ email: 'flaky@example.com' }), (err) => {
    assert.equal(err.statusCode, 500);
    assert.equal(err.headers['idempotent-replayed'], 'true');
    assert.equal(err.headers['stripe-should-retry'], 'false');
    return true;
  });
  // The upstream ran the request once; the SDK's retry got the stored 500 replayed (the Stripe
  // rule: once an endpoint started executing, its answer is the result), marked
  // `Stripe-Should-Retry: false`, so the SDK does not ask a second time.
  assert.equal(created.length, 1);
  assert.match(created[0].key, /^stripe-node-retry-/);
  assert.equal(await envoy.counter('replayed'), 1);
  // A new intent (the SDK makes a new key per call) runs.
  const ok = await stripe.customers.create({ email: 'flaky@example.com' });
  assert.equal(ok.email, 'flaky@example.com');
  assert.equal(created.length, 2);
});
