// Stripe-signed events (built and signed with the Stripe SDK's own test-header helper) through
// the filter in a real Envoy: a callback route keyed by the event's `id`, signatures verified at
// the edge. Every delivery is acknowledged 2xx and the handler runs once per event; a forged or
// unsigned delivery never reaches it; a failing delivery is released, so the next one runs.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import Stripe from 'stripe';
import { deliver, startStack } from './stack.mjs';

const SECRET = 'whsec_idemgate_clients_test_0123456789';
const stripe = new Stripe('sk_test_idemgate');

const FILTER = JSON.stringify({
  routes: [{
    prefix: '/webhooks/stripe',
    kind: 'callback',
    key_from: [{ json: '/id' }],
    signature: { scheme: 'stripe', secret_env: 'STRIPE_WEBHOOK_SECRET' },
  }],
});

function event(id, order) {
  return JSON.stringify({
    id,
    object: 'event',
    api_version: '2025-01-01',
    created: Math.floor(Date.now() / 1000),
    type: 'payment_intent.succeeded',
    data: { object: { id: `pi_${order}`, object: 'payment_intent', amount: 1000 * order, metadata: { order: String(order) } } },
  });
}

/** The upstream: a webhook handler as Stripe documents it (constructEvent verifies again). */
function handler(processed, { failFirst = new Set(), delayMs = 300 } = {}) {
  return async (req, res) => {
    const evt = stripe.webhooks.constructEvent(req.body, req.headers['stripe-signature'], SECRET);
    if (failFirst.delete(evt.id)) {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end('{"error":"database unavailable"}');
      return;
    }
    processed.push(evt.id);
    await new Promise((r) => setTimeout(r, delayMs));
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ received: true, event: evt.id }));
  };
}

function signed(payload) {
  return {
    'content-type': 'application/json',
    'stripe-signature': stripe.webhooks.generateTestHeaderString({ payload, secret: SECRET }),
  };
}

test('a Stripe event delivered twice and concurrently is processed once, every delivery acknowledged', async (t) => {
  const processed = [];
  const { envoy, upstream } = await startStack(t, {
    filter: FILTER,
    handler: handler(processed),
    env: { STRIPE_WEBHOOK_SECRET: SECRET },
  });
  const url = `${envoy.url}/webhooks/stripe`;
  const payload = event('evt_1Q2w3E4r5T6y', 7);
  // Three concurrent deliveries, each signed anew (Stripe signs every attempt with a new `t`).
  const concurrent = await Promise.all([1, 2, 3].map(() => deliver(url, signed(payload), payload)));
  // A late redelivery of the same event.
  const later = await deliver(url, signed(payload), payload);
  for (const d of [...concurrent, later]) {
    assert.equal(d.statuses.at(-1), 200, `every delivery ends acknowledged: ${d.statuses}`);
    assert.deepEqual(JSON.parse(d.body), { received: true, event: 'evt_1Q2w3E4r5T6y' });
  }
  assert.deepEqual(processed, ['evt_1Q2w3E4r5T6y'], 'the handler ran once');
  assert.equal(upstream.requests.length, 1);
  assert.equal(later.headers.get('idempotent-replayed'), 'true');
  // Concurrent duplicates were told to come back (409 + Retry-After), never acknowledged early.
  assert.ok(concurrent.some((d) => d.statuses[0] === 409), 'a concurrent duplicate met the in-flight claim');
  assert.equal(await envoy.counter('claimed'), 1);

  // Another event is another key.
  const other = event('evt_9Z8x7C6v5B4n', 8);
  assert.equal((await deliver(url, signed(other), other)).statuses.at(-1), 200);
  assert.deepEqual(processed, ['evt_1Q2w3E4r5T6y', 'evt_9Z8x7C6v5B4n']);
});

test('forged, unsigned and stale Stripe deliveries are refused at the edge and cannot pre-empt the real one', async (t) => {
  const processed = [];
  const { envoy, upstream } = await startStack(t, {
    filter: FILTER,
    handler: handler(processed, { delayMs: 0 }),
    env: { STRIPE_WEBHOOK_SECRET: SECRET },
  });
  const url = `${envoy.url}/webhooks/stripe`;
  const payload = event('evt_forged_first', 3);
  const forgedHeader = stripe.webhooks.generateTestHeaderString({ payload, secret: 'whsec_attacker_guess_0000' });
  const stale = stripe.webhooks.generateTestHeaderString({ payload, secret: SECRET, timestamp: Math.floor(Date.now() / 1000) - 3600 });
  const tampered = payload.replace('"amount":3000', '"amount":1');
  const attempts = [
    [{ 'content-type': 'application/json', 'stripe-signature': forgedHeader }, payload, 'signature_mismatch'],
    [{ 'content-type': 'application/json' }, payload, 'signature_missing'],
    [{ 'content-type': 'application/json', 'stripe-signature': stale }, payload, 'signature_stale'],
    [signed(payload), tampered, 'signature_mismatch'],
  ];
  for (const [headers, body, code] of attempts) {
    const res = await fetch(url, { method: 'POST', headers, body });
    assert.equal(res.status, 403);
    assert.equal(res.headers.get('content-type'), 'application/problem+json');
    assert.equal((await res.json()).code, code);
  }
  assert.equal(upstream.requests.length, 0, 'no refused delivery reached the upstream');
  assert.equal(await envoy.counter('signature_rejected'), 4);
  // The real delivery of the same event id still runs.
  const real = await deliver(url, signed(payload), payload);
  assert.equal(real.statuses.at(-1), 200);
  assert.equal(real.headers.get('idempotent-replayed'), null);
  assert.deepEqual(processed, ['evt_forged_first']);
});

// Both ways a claimed delivery reaches the upstream: Envoy's router, and the filter's own detached
// exchange back into Envoy (`upstream.reentry`), where the answer is settled outside the client's stream.
const DETACHED = JSON.stringify({ ...JSON.parse(FILTER), upstream: { reentry: 'idemgate_reentry' } });

for (const [how, filter] of [['router', FILTER], ['detached exchange', DETACHED]]) test(`a delivery the handler fails is released: the next delivery of the event runs and is stored (${how})`, async (t) => {
  const processed = [];
  const { envoy, upstream } = await startStack(t, {
    filter,
    handler: handler(processed, { failFirst: new Set(['evt_fails_once']), delayMs: 0 }),
    env: { STRIPE_WEBHOOK_SECRET: SECRET },
  });
  const url = `${envoy.url}/webhooks/stripe`;
  const payload = event('evt_fails_once', 4);
  assert.deepEqual((await deliver(url, signed(payload), payload)).statuses, [500]);
  const retry = await deliver(url, signed(payload), payload);
  assert.deepEqual(retry.statuses, [200]);
  assert.equal(retry.headers.get('idempotent-replayed'), null, 'the retry ran, it was not a replay of the 500');
  const again = await deliver(url, signed(payload), payload);
  assert.equal(again.headers.get('idempotent-replayed'), 'true');
  assert.deepEqual(processed, ['evt_fails_once']);
  assert.equal(upstream.requests.length, 2);
  assert.equal(await envoy.counter('released'), 1);
  assert.equal(await envoy.counter('detached'), how === 'router' ? 0 : 2);
  assert.equal(await envoy.stat('http.idemgate_reentry.downstream_rq_total'), how === 'router' ? 0 : 2);
});
