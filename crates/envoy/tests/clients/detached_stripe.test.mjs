// Stripe's own Node SDK (npm `stripe`, pinned) as a client of the filter: it sends an
// Idempotency-Key on every POST and retries timeouts and 409s with the same key. The upstream
// answers after 2.5 s, the SDK gives up on each attempt after 1 s. With detached execution the
// upstream runs once and the SDK call resolves with the object the upstream created.
//
//   node --test crates/envoy/tests/clients/     (after make build-filter; npm ci in this folder)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Stripe from 'stripe';
import { startEnvoy, startUpstream } from './detached_envoy.mjs';

let upstream;
let envoy;

before(async () => {
  // A Stripe-like customers endpoint: the work takes 2.5 s, then the created customer.
  upstream = await startUpstream({
    delayMs: 2500,
    answer: (req, body, n) => {
      const form = new URLSearchParams(body);
      return {
        status: 200,
        body: { id: `cus_${n}`, object: 'customer', email: form.get('email'), created: n },
      };
    },
  });
  envoy = await startEnvoy({
    upstreamPort: upstream.port,
    filter: {
      routes: [{ prefix: '/v1/', methods: ['POST'] }],
      fingerprint: { mode: 'raw' },
      lease: '10s',
      upstream: { reentry: 'idemgate_reentry', timeout: '5s' },
    },
  });
});

after(async () => {
  await envoy?.stop();
  await upstream?.close();
});

test('stripe-node: one execution, and create() resolves with the created customer', async () => {
  const stripe = new Stripe('sk_test_idemgate', {
    host: '127.0.0.1',
    port: envoy.port,
    protocol: 'http',
    timeout: 1000,
    maxNetworkRetries: 6,
  });
  const customer = await stripe.customers.create({ email: 'ada@example.com' });
  assert.equal(customer.object, 'customer');
  assert.equal(customer.email, 'ada@example.com');
  const keys = upstream.keys();
  assert.equal(keys.length, 1, `one idempotency key reached the upstream: ${keys}`);
  assert.ok(keys[0].length > 0, 'the SDK sent an Idempotency-Key');
  assert.equal(upstream.executions(keys[0]), 1, 'exactly one upstream execution');
  assert.equal(customer.id, 'cus_1', 'the object the one execution created');
  // The SDK gave up on the first attempt: the answer was stored without a client to take it.
  assert.equal(await envoy.counter('detached_client_gone'), 1);
  assert.equal(await envoy.counter('stored'), 1);
  assert.equal(await envoy.stat('http.idemgate_reentry.downstream_rq_total'), 1, 'it re-entered Envoy');
});
