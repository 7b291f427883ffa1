// Stripe-signed `payment_intent.*` events (signed with the Stripe SDK's own test-header helper)
// delivered out of order and twice through the filter in a real Envoy, on a callback route with an
// `order` table: the resource is the PaymentIntent (`/data/object/id`), the event its
// `type`. The sender behaves as Stripe does: a delivery that is not acknowledged with a 2xx is
// delivered again later (here: after the deliveries queued behind it). The upstream must see each
// transition once and in order. The same deliveries on a route without `order` show what the
// upstream alone would get.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import Stripe from 'stripe';
import { startStack } from './stack.mjs';

const SECRET = 'whsec_idemgate_clients_order_0123456789';
const stripe = new Stripe('sk_test_idemgate');

// A PaymentIntent's lifecycle as Stripe documents it: a failed attempt returns it to
// requires_payment_method; succeeded and canceled end it.
const TABLE = {
  initial: 'requires_payment_method',
  terminal: ['succeeded', 'canceled'],
  transitions: [
    ['requires_payment_method', 'payment_intent.processing', 'processing'],
    ['processing', 'payment_intent.succeeded', 'succeeded'],
    ['processing', 'payment_intent.payment_failed', 'requires_payment_method'],
    ['requires_payment_method', 'payment_intent.canceled', 'canceled'],
    ['processing', 'payment_intent.canceled', 'canceled'],
  ],
};

const callback = (prefix) => ({
  prefix,
  kind: 'callback',
  key_from: [{ json: '/id' }],
  signature: { scheme: 'stripe', secret_env: 'STRIPE_WEBHOOK_SECRET' },
});

const FILTER = JSON.stringify({
  routes: [
    { ...callback('/webhooks/stripe'), order: { resource: { json: '/data/object/id' }, event: { json: '/type' }, table: TABLE } },
    // Unguarded: the same callback route (signature, dedup by event id) without `order`.
    callback('/webhooks/plain'),
  ],
});

let serial = 0;
/** A Stripe event `type` for PaymentIntent `pi` (a new event id each time). */
function event(type, pi) {
  serial += 1;
  const id = `evt_order_${serial}_${Date.now()}`;
  return {
    id,
    payload: JSON.stringify({
      id,
      object: 'event',
      api_version: '2025-01-01',
      created: Math.floor(Date.now() / 1000),
      type,
      data: { object: { id: pi, object: 'payment_intent', amount: 1000 } },
    }),
  };
}

/** The upstream: a webhook handler as Stripe documents it (constructEvent verifies again). */
function handler(seen) {
  return (req, res) => {
    const evt = stripe.webhooks.constructEvent(req.body, req.headers['stripe-signature'], SECRET);
    seen.push({ path: req.url, pi: evt.data.object.id, type: evt.type, id: evt.id });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ received: true, event: evt.id }));
  };
}

/** One delivery, signed afresh (Stripe signs every attempt with a new timestamp). */
async function post(url, { payload }) {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'stripe-signature': stripe.webhooks.generateTestHeaderString({ payload, secret: SECRET }),
    },
    body: payload,
  });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

/**
 * Delivers `deliveries` in the given order as a sender does: a delivery answered with anything
 * but a 2xx goes to the back of the queue and is delivered again. Returns each answer as
 * `<event type> <status> <what the edge did>`: the `idemgate-order` header, or `replayed` for
 * the stored answer of an event id seen before (dedup runs first).
 */
async function send(url, deliveries) {
  const queue = [...deliveries];
  const answers = [];
  for (let round = 0; queue.length > 0; round += 1) {
    assert.ok(round < 50, `never acknowledged: ${JSON.stringify(answers)}`);
    const delivery = queue.shift();
    const d = await post(url, delivery);
    const type = JSON.parse(delivery.payload).type.replace('payment_intent.', '');
    const replayed = d.headers.get('idempotent-replayed') === 'true';
    answers.push(`${type} ${d.status} ${replayed ? 'replayed' : d.headers.get('idemgate-order')}`);
    if (d.status === 409) {
      assert.ok(Number(d.headers.get('retry-after')) >= 1, `a 409 says when to come back: ${d.body}`);
      queue.push(delivery);
    } else {
      assert.ok(d.status >= 200 && d.status < 300, `${type}: ${d.status} ${d.body}`);
    }
  }
  return answers;
}

const typesFor = (seen, path, pi) => seen.filter((s) => s.path === path && s.pi === pi)
  .map((s) => s.type.replace('payment_intent.', ''));

test('payment_intent events out of order and twice: the upstream sees each transition once, in order', async (t) => {
  const seen = [];
  const { envoy } = await startStack(t, { filter: FILTER, handler: handler(seen), env: { STRIPE_WEBHOOK_SECRET: SECRET } });

  // A: succeeded overtakes processing; both are delivered twice, and Stripe's second event for
  // the same success (another event id) arrives last.
  const a = {
    processing: event('payment_intent.processing', 'pi_A'),
    succeeded: event('payment_intent.succeeded', 'pi_A'),
    succeededAgain: event('payment_intent.succeeded', 'pi_A'),
  };
  const deliveriesA = [a.succeeded, a.processing, a.succeeded, a.processing, a.succeededAgain];
  const answersA = await send(`${envoy.url}/webhooks/stripe`, deliveriesA);
  assert.deepEqual(answersA, [
    'succeeded 409 early', // the sender delivers it again after the rest of its queue
    'processing 200 applied',
    'succeeded 200 applied',
    'processing 200 replayed',
    'succeeded 200 already-applied',
    'succeeded 200 replayed',
  ]);

  // B: a failed attempt, then a second attempt that succeeds; every event delivered twice, and a
  // late payment_failed (another event id) after the success, which no later state accepts.
  const b = [
    event('payment_intent.processing', 'pi_B'),
    event('payment_intent.payment_failed', 'pi_B'),
    event('payment_intent.processing', 'pi_B'),
    event('payment_intent.succeeded', 'pi_B'),
  ];
  const late = event('payment_intent.payment_failed', 'pi_B');
  const answersB = await send(`${envoy.url}/webhooks/stripe`, [b[0], b[0], b[1], b[1], b[2], b[3], b[3], late]);
  assert.deepEqual(answersB, [
    'processing 200 applied', 'processing 200 replayed',
    'payment_failed 200 applied', 'payment_failed 200 replayed',
    'processing 200 applied',
    'succeeded 200 applied', 'succeeded 200 replayed',
    'payment_failed 200 illegal',
  ]);

  // C: canceled before processing reached the edge: the late processing is illegal (canceled ends it).
  const c = [event('payment_intent.processing', 'pi_C'), event('payment_intent.canceled', 'pi_C')];
  const answersC = await send(`${envoy.url}/webhooks/stripe`, [c[1], c[0], c[1]]);
  assert.deepEqual(answersC, ['canceled 200 applied', 'processing 200 illegal', 'canceled 200 replayed']);

  assert.deepEqual(typesFor(seen, '/webhooks/stripe', 'pi_A'), ['processing', 'succeeded']);
  assert.deepEqual(typesFor(seen, '/webhooks/stripe', 'pi_B'), ['processing', 'payment_failed', 'processing', 'succeeded']);
  assert.deepEqual(typesFor(seen, '/webhooks/stripe', 'pi_C'), ['canceled']);

  // Unguarded: the same deliveries of A on the route without `order`: dedup by event id still
  // holds, but the upstream alone gets them in arrival order, the early one first, and both
  // successes.
  const plain = await send(`${envoy.url}/webhooks/plain`, deliveriesA);
  assert.deepEqual(plain, ['succeeded 200 null', 'processing 200 null', 'succeeded 200 replayed',
    'processing 200 replayed', 'succeeded 200 null']);
  assert.deepEqual(typesFor(seen, '/webhooks/plain', 'pi_A'), ['succeeded', 'processing', 'succeeded']);
});
