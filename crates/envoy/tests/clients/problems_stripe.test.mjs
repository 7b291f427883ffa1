// The Stripe Node SDK reading the edge's own answers, in a real Envoy: which error class it
// raises for a request in flight (409) and for a client over its share (429), the codes it sees
// in the default style and with `problems.compat: "stripe"`, and `Stripe-Should-Retry`, which it
// obeys before its own rules. The SDK table of docs/reference/problem-types.md states
// the same classes.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import Stripe from 'stripe';
import { startStack } from './stack.mjs';

/** POST /v1/customers creates `cus_<n>`; an email starting with `slow` is answered after 1.5 s. */
function api(created) {
  return async (req, res) => {
    const params = Object.fromEntries(new URLSearchParams(req.body));
    if (params.email?.startsWith('slow')) await new Promise((r) => setTimeout(r, 1500));
    created.push(params.email);
    const customer = { id: `cus_${created.length}`, object: 'customer', email: params.email };
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(customer));
  };
}

function client(envoy) {
  return new Stripe('sk_test_idemgate_clients', {
    host: '127.0.0.1',
    port: envoy.port,
    protocol: 'http',
    maxNetworkRetries: 0,
  });
}

/** A second create with `key` while the first (slow) one is still running: its error. */
async function inFlight(stripe, key) {
  const first = stripe.customers.create({ email: 'slow@example.com' }, { idempotencyKey: key });
  await new Promise((r) => setTimeout(r, 400));
  const err = await stripe.customers
    .create({ email: 'slow@example.com' }, { idempotencyKey: key })
    .then(() => assert.fail('the second request got an answer while the first ran'), (e) => e);
  assert.equal((await first).id, 'cus_1');
  return err;
}

// conformance: S9, S10
test('a request in flight is a 409 the SDK raises as a StripeAPIError it may retry', async (t) => {
  const created = [];
  const { envoy } = await startStack(t, { filter: '{}', handler: api(created) });
  const err = await inFlight(client(envoy), 'in-flight-1');
  // stripe-node picks the class by status: a 409 is a StripeAPIError whatever its type.
  assert.ok(err instanceof Stripe.errors.StripeAPIError, `${err.constructor.name}: ${err}`);
  assert.equal(err.statusCode, 409);
  assert.equal(err.code, 'request_in_flight', 'the default style keeps idemgate\'s code');
  assert.equal(err.rawType, 'idempotency_error');
  assert.equal(err.headers['stripe-should-retry'], 'true');
  assert.ok(Number(err.headers['retry-after']) >= 1);
  assert.equal(created.length, 1);
});

// conformance: S9
test('with problems.compat "stripe" the 409 carries Stripe\'s code, idempotency_key_in_use', async (t) => {
  const created = [];
  const filter = JSON.stringify({
    problems: { compat: 'stripe', describedby: 'https://docs.example.com/idempotency' },
  });
  const { envoy } = await startStack(t, { filter, handler: api(created) });
  const err = await inFlight(client(envoy), 'in-flight-2');
  assert.ok(err instanceof Stripe.errors.StripeAPIError, `${err.constructor.name}: ${err}`);
  assert.equal(err.code, 'idempotency_key_in_use');
  assert.equal(err.rawType, 'idempotency_error');
  assert.equal(err.headers.link, '<https://docs.example.com/idempotency>; rel="describedby"');
  assert.equal(err.raw.type, 'idempotency_error');
});

// conformance: S10
test('a client over its share is a 429 the SDK raises as a StripeRateLimitError', async (t) => {
  const created = [];
  // One record per client, binding at once: the second key of the same client is over its share.
  const filter = JSON.stringify({ shares: { identity: 1, peer: 1, pressure: '0%' } });
  const { envoy } = await startStack(t, { filter, handler: api(created) });
  const stripe = client(envoy);
  await stripe.customers.create({ email: 'a@example.com' }, { idempotencyKey: 'share-1' });
  await assert.rejects(
    stripe.customers.create({ email: 'b@example.com' }, { idempotencyKey: 'share-2' }),
    (err) => {
      assert.ok(err instanceof Stripe.errors.StripeRateLimitError, `${err.constructor.name}: ${err}`);
      assert.equal(err.statusCode, 429);
      assert.equal(err.code, 'scope_quota_exceeded');
      assert.equal(err.rawType, 'rate_limit_error');
      assert.equal(err.headers['stripe-should-retry'], 'true');
      return true;
    },
  );
  assert.equal(created.length, 1);
});

test('an unusable key is a 400 of type idempotency_error: the SDK raises a StripeIdempotencyError', async (t) => {
  const created = [];
  const { envoy } = await startStack(t, { filter: '{}', handler: api(created) });
  await assert.rejects(
    client(envoy).customers.create({ email: 'a@example.com' }, { idempotencyKey: 'k'.repeat(300) }),
    (err) => {
      assert.ok(err instanceof Stripe.errors.StripeIdempotencyError, `${err.constructor.name}: ${err}`);
      assert.equal(err.statusCode, 400);
      assert.equal(err.code, 'key_too_long');
      assert.equal(err.headers['stripe-should-retry'], 'false');
      return true;
    },
  );
  assert.equal(created.length, 0);
});
