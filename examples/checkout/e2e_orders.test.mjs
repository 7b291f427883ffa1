// End-to-end, the ordering guard: the demo's order table and If-Match, through the real demo behind a real
// Envoy (demo.py on free ports, stopped afterwards even when a test fails). Standard Webhooks
// deliveries are signed by the npm `standardwebhooks` package (the reference implementation), the
// If-Match flow runs in real Chromium through the `idemgate` npm package. Every guarded request is
// also sent where no guard is (straight to the order service): what the origin alone does.
//
//   node --test examples/checkout/e2e_orders.test.mjs      (after `make build-filter build-web`)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createOrder, launchBrowser, requireClients, startDemo } from './e2e_stack.mjs';

const { Webhook } = requireClients('standardwebhooks');

let demo;
let stack;
let origin;
let browser;

before(async () => {
  demo = await startDemo();
  stack = demo.stack;
  origin = `http://127.0.0.1:${stack.orders}`;
});

after(async () => {
  await browser?.close();
  await demo?.stop();
});

async function orders(base = stack.url) {
  const res = await fetch(`${base}/api/orders`);
  assert.equal(res.status, 200);
  return res.json();
}

const orderOf = async (id) => (await orders()).orders.find((o) => o.id === id);

const newOrder = (client) => createOrder(stack.url, client);

/**
 * One Standard Webhooks delivery of event `type` for order `order` with message id `id`, signed
 * afresh by `standardwebhooks` (a sender signs every attempt anew), to the edge or to `to`.
 * Answers `{ status, headers, body, json }` (json: the body parsed, or null).
 */
async function deliver(id, type, order, { to = stack.url } = {}) {
  const body = JSON.stringify({ type, data: { order } });
  const now = new Date();
  const res = await fetch(`${to}/api/webhooks/standard`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': new Webhook(stack.standard_webhook_secret).sign(id, now, body),
    },
    body,
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, headers: res.headers, body: text, json };
}

const story = (d) => `${d.status} ${JSON.stringify([...d.headers])} ${d.body}`;

test('the order table at the edge: early, applied, already applied, illegal; the origin alone applies all of them', async () => {
  const order = await newOrder('order-table-test');
  const before = await orders();
  const stamp = `${order.id}_${Date.now()}`;

  // order.shipped before the payment: early. 409 with Retry-After (the demo's 10 s), never forwarded.
  const early = await deliver(`msg_ship_${stamp}`, 'order.shipped', order.id);
  assert.equal(early.status, 409, story(early));
  assert.equal(early.headers.get('retry-after'), '10', story(early));
  assert.equal(early.headers.get('idemgate-order'), 'early', story(early));
  assert.match(early.headers.get('content-type') ?? '', /^application\/problem\+json/);
  assert.equal(early.json.code, 'order_event_early', story(early));
  assert.equal((await orders()).events_applied, before.events_applied, 'the early event was not applied');
  assert.equal((await orderOf(order.id)).status, 'unpaid');

  // The payment: applied (forwarded, the service's 2xx advances the edge's state).
  const paid = await deliver(`msg_pay_${stamp}`, 'payment.succeeded', order.id);
  assert.equal(paid.status, 200, story(paid));
  assert.equal(paid.headers.get('idemgate-order'), 'applied', story(paid));
  assert.equal(paid.json.status, 'paid');

  // The sender's redelivery of the early event (same webhook-id): now it applies.
  const shipped = await deliver(`msg_ship_${stamp}`, 'order.shipped', order.id);
  assert.equal(shipped.status, 200, story(shipped));
  assert.equal(shipped.headers.get('idemgate-order'), 'applied', story(shipped));
  assert.notEqual(shipped.headers.get('idempotent-replayed'), 'true', 'the 409 was not stored as its answer');
  assert.equal(shipped.json.status, 'shipped');

  // A second payment.succeeded under a new webhook-id (providers send two events for one
  // transition): acknowledged by the edge, not forwarded.
  const again = await deliver(`msg_pay2_${stamp}`, 'payment.succeeded', order.id);
  assert.ok(again.status >= 200 && again.status < 300, story(again));
  assert.equal(again.headers.get('idemgate-order'), 'already-applied', story(again));
  assert.deepEqual(again.json, { order: 'already_applied', state: 'shipped' });

  // order.cancelled for a shipped order: no later state takes it. Acknowledged, not forwarded.
  const cancel = await deliver(`msg_cancel_${stamp}`, 'order.cancelled', order.id);
  assert.ok(cancel.status >= 200 && cancel.status < 300, story(cancel));
  assert.equal(cancel.headers.get('idemgate-order'), 'illegal', story(cancel));
  assert.deepEqual(cancel.json, { order: 'illegal', state: 'shipped' });

  // The same delivery twice is still a replay of the stored answer (dedup runs first).
  const replay = await deliver(`msg_pay_${stamp}`, 'payment.succeeded', order.id);
  assert.equal(replay.status, 200, story(replay));
  assert.equal(replay.headers.get('idempotent-replayed'), 'true', story(replay));

  // The service's own counts: exactly the two events that should have reached it.
  const after = await orders();
  assert.equal(after.events_applied, before.events_applied + 2, 'payment and shipment, once each');
  const final = after.orders.find((o) => o.id === order.id);
  assert.deepEqual([final.status, final.events_applied], ['shipped', 2]);

  // Unguarded: the same five deliveries straight to the order service (signed alike). The
  // origin alone applies every one of them: it ships an unpaid order, pays it twice and cancels
  // a shipped order.
  const bare = await newOrder('order-table-unguarded');
  const direct = [];
  for (const [id, type] of [['ship', 'order.shipped'], ['pay', 'payment.succeeded'], ['ship', 'order.shipped'],
    ['pay2', 'payment.succeeded'], ['cancel', 'order.cancelled']]) {
    const d = await deliver(`msg_${id}_bare_${stamp}`, type, bare.id, { to: origin });
    assert.equal(d.status, 200, story(d));
    assert.equal(d.headers.get('idemgate-order'), null);
    direct.push(d.json.status);
  }
  assert.deepEqual(direct, ['shipped', 'paid', 'shipped', 'paid', 'cancelled']);
  const bareAfter = await orderOf(bare.id);
  assert.deepEqual([bareAfter.status, bareAfter.events_applied], ['cancelled', 5]);
});

test('an event type the table does not track passes as without `order`; a tracked one without an order id is 400', async () => {
  const order = await newOrder('order-untracked-test');
  const stamp = `${order.id}_${Date.now()}`;
  const other = await deliver(`msg_refund_${stamp}`, 'refund.created', order.id);
  assert.equal(other.status, 200, story(other));
  assert.equal(other.headers.get('idemgate-order'), null, 'not ordered');
  assert.equal(other.json.ignored, 'refund.created', 'forwarded to the service, which ignores it');

  const body = JSON.stringify({ type: 'payment.succeeded', data: {} });
  const now = new Date();
  const id = `msg_noorder_${stamp}`;
  const res = await fetch(`${stack.url}/api/webhooks/standard`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(Math.floor(now / 1000)),
      'webhook-signature': new Webhook(stack.standard_webhook_secret).sign(id, now, body),
    },
    body,
  });
  const problem = await res.json();
  assert.equal(res.status, 400);
  assert.equal(problem.code, 'order_resource_missing');
});

async function patch(base, id, note, ifMatch) {
  const headers = { 'content-type': 'application/json' };
  if (ifMatch !== undefined) headers['if-match'] = ifMatch;
  const res = await fetch(`${base}/api/orders/${id}`, { method: 'PATCH', headers, body: JSON.stringify({ note }) });
  return { status: res.status, etag: res.headers.get('etag'), json: await res.json() };
}

test('If-Match on PATCH /api/orders/N: missing 428 at the edge, malformed 400, current 200 with a new ETag, stale 412 from the service', async () => {
  const order = await newOrder('if-match-test');
  const read = await fetch(`${stack.url}/api/orders/${order.id}`);
  assert.equal(read.status, 200);
  const etag = read.headers.get('etag');
  assert.match(etag ?? '', /^"[^"]+"$/, 'a strong ETag');
  await read.arrayBuffer();
  const received = async () => (await orders()).updates_received;
  const before = await received();

  const missing = await patch(stack.url, order.id, 'leave at the door');
  assert.equal(missing.status, 428);
  assert.equal(missing.json.code, 'precondition_required');
  const malformed = await patch(stack.url, order.id, 'leave at the door', 'v1');
  assert.equal(malformed.status, 400);
  assert.equal(malformed.json.code, 'precondition_malformed');
  assert.equal(await received(), before, 'the edge answered both: the service saw neither');

  const current = await patch(stack.url, order.id, 'leave at the door', etag);
  assert.equal(current.status, 200, JSON.stringify(current.json));
  assert.match(current.etag ?? '', /^"[^"]+"$/);
  assert.notEqual(current.etag, etag, 'a new version, a new ETag');
  assert.equal(current.json.note, 'leave at the door');

  const stale = await patch(stack.url, order.id, 'ring twice', etag);
  assert.equal(stale.status, 412, 'the service compared the stale tag');
  assert.equal(stale.json.title, 'precondition_failed');
  assert.equal(await received(), before + 2);
  assert.equal((await orderOf(order.id)).note, 'leave at the door', 'the stale write changed nothing');

  // Unguarded: straight to the service. It refuses a missing If-Match itself (defence in depth,
  // its own problem type) and compares tags as behind the edge.
  const bareMissing = await patch(origin, order.id, 'ring twice');
  assert.equal(bareMissing.status, 428);
  assert.equal(bareMissing.json.type, 'urn:idemgate-demo:problem:precondition_required');
  const bareStale = await patch(origin, order.id, 'ring twice', etag);
  assert.equal(bareStale.status, 412);
  const bareCurrent = await patch(origin, order.id, 'ring twice', current.etag);
  assert.equal(bareCurrent.status, 200);
  assert.equal(await received(), before + 5);
});

test('the browser carries the ETag it read into If-Match; a 412 is final, never retried', async () => {
  const order = await newOrder('browser-if-match-test');
  browser = await launchBrowser();
  const page = await browser.newPage();
  await page.goto(`${stack.url}/`);
  const before = (await orders()).updates_received;
  const result = await page.evaluate(async (id) => {
    const { idempotentFetch } = await import('/pkg/index.js');
    const url = `/api/orders/${id}`;
    const read = await fetch(url);
    const etag = read.headers.get('etag');
    // idempotentFetch sends an Idempotency-Key, and the demo scopes keys by Authorization (a
    // request with a key and without it is 503 scope_unavailable), as the checkout page does.
    const update = (note) => idempotentFetch(url, {
      method: 'PATCH',
      ifMatch: etag,
      headers: { authorization: 'Bearer browser-if-match', 'content-type': 'application/json' },
      body: JSON.stringify({ note }),
    }, { retry: { maxAttempts: 5, maxTotalMs: 10_000 } });
    const first = await update('from the browser');
    const second = await update('from a stale tab');
    const summary = async (r) => ({
      status: r.response?.status, attempts: r.attempts, reason: r.reason, etag: r.response?.headers.get('etag'),
    });
    return { etag, first: await summary(first), second: await summary(second) };
  }, order.id);
  const told = JSON.stringify(result);
  assert.equal(result.first.status, 200, told);
  assert.notEqual(result.first.etag, result.etag, told);
  assert.equal(result.second.status, 412, told);
  assert.equal(result.second.attempts, 1, `412 is final: ${told}`);
  assert.equal((await orders()).updates_received, before + 2, `one request each reached the service: ${told}`);
  assert.equal((await orderOf(order.id)).note, 'from the browser');
  await page.close();
});
