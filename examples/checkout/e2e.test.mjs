// End-to-end: real Chromium (Debian's, driven by playwright-core) → the checkout page → the
// `idemgate` npm package → a real Envoy with the filter → the order service. Starts `make demo`'s
// stack (demo.py) on free ports and stops it afterwards, even when a test fails.
//
//   node --test examples/checkout/e2e.test.mjs      (after `make build-filter build-web`)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { createHmac, randomBytes } from 'node:crypto';
import { createOrder, here, launchBrowser, requireClients, startDemo } from './e2e_stack.mjs';

const { Webhook } = requireClients('standardwebhooks');

let demo;
let stack;
let browser;

before(async () => {
  demo = await startDemo();
  stack = demo.stack;
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await demo?.stop();
});

async function orders() {
  const res = await fetch(`${stack.url}/api/orders`);
  assert.equal(res.status, 200);
  return res.json();
}

async function openPage(query = '', { beforeLoad } = {}) {
  const page = await browser.newPage();
  await beforeLoad?.(page);
  await page.goto(`${stack.url}/${query}`);
  // Ready when the guard is on the Pay button (app.js sets data-ready). Not the `load` event: the
  // package's wasm loads by top-level await, which `load` does not wait for, and a click before the
  // guard is there submits the form natively (a navigation, no order, then a timeout).
  await page.waitForFunction(() => document.getElementById('cart').dataset.ready === 'true');
  return page;
}

/** The page's "What happened" list: clicks on Pay and requests, in order. */
function happened(page) {
  return page.evaluate(() => [...document.querySelectorAll('#attempts li')].map((li) => ({
    kind: li.dataset.kind, click: li.dataset.click, status: li.dataset.status, decision: li.dataset.decision,
    text: li.textContent,
  })));
}

/** What the page says the server holds (refreshed before it says how a payment ended). */
function pageCounts(page) {
  return page.evaluate(() => ({
    count: Number(document.getElementById('count').textContent),
    events: Number(document.getElementById('events').textContent),
  }));
}

async function outcome(page) {
  await page.waitForFunction(() => ['succeeded', 'failed_final'].includes(document.getElementById('status').dataset.state),
    null, { timeout: 30_000 });
  return page.evaluate(() => ({
    state: document.getElementById('status').dataset.state,
    text: document.getElementById('status').textContent,
    key: document.getElementById('key').textContent,
    disabled: document.getElementById('pay').disabled,
  }));
}

test('a double and a triple click on Pay make one order each', async () => {
  const page = await openPage();
  const before = await orders();
  await page.click('#pay', { clickCount: 2 });
  const first = await outcome(page);
  assert.equal(first.state, 'succeeded');
  const afterDouble = await orders();
  assert.equal(afterDouble.count, before.count + 1, 'one order for a double click');
  assert.equal(afterDouble.received, before.received + 1, 'only one request reached the order service');
  // The page's count is the server's by the time it says the order is placed.
  assert.equal((await pageCounts(page)).count, afterDouble.count, first.text);

  await page.evaluate(() => { document.getElementById('status').dataset.state = 'idle'; });
  await page.click('#pay', { clickCount: 3 });
  const done = await outcome(page);
  assert.equal(done.state, 'succeeded');
  assert.equal(done.disabled, false, 'the button is enabled again');
  const afterTriple = await orders();
  assert.equal(afterTriple.count, afterDouble.count + 1, 'one order for a triple click');
  assert.equal(afterTriple.received, afterDouble.received + 1);
  const orderId = afterTriple.orders.at(-1).id;
  assert.match(done.text, new RegExp(`Order #${orderId} placed`));
  assert.deepEqual(await pageCounts(page), { count: afterTriple.count, events: afterTriple.events_applied },
    'the page shows what the server holds, no lag behind the placed order');
  assert.equal(await page.textContent('#last'), `#${orderId} unpaid`, 'and the last order\'s status');

  // What happened, as a person did it: five clicks, two payments. Each gesture's first click
  // started a payment (one request, claimed); every other click was absorbed into that payment.
  await page.waitForFunction(() => document.querySelectorAll('#attempts li[data-kind="click"]').length >= 5);
  const seen = await happened(page);
  const story = JSON.stringify(seen, null, 1);
  const clicks = seen.filter((e) => e.kind === 'click');
  const requests = seen.filter((e) => e.kind === 'request');
  assert.deepEqual(clicks.map((e) => e.click), ['submitted', 'absorbed', 'submitted', 'absorbed', 'absorbed'], story);
  assert.deepEqual(requests.map((e) => [e.status, e.decision]), [['201', 'claimed'], ['201', 'claimed']], story);
  [1, 1, 2, 2, 2].forEach((payment, i) => assert.match(clicks[i].text, new RegExp(`payment ${payment}\\b`), story));
  for (const e of clicks.filter((x) => x.click === 'absorbed')) assert.match(e.text, /click absorbed/, story);
  assert.match(requests[0].text, new RegExp(`payment 1, .*→ order #${afterDouble.orders.at(-1).id}$`), story);
  assert.match(requests[1].text, new RegExp(`payment 2, .*→ order #${orderId}$`), story);
  assert.ok(seen.indexOf(requests[1]) > seen.indexOf(clicks[2]), `payment 2's request follows its click: ${story}`);
  // A test run never rewrites tracked files: the picture goes to target/ unless asked for.
  const shot = process.env.IDEMGATE_UPDATE_SCREENSHOT === '1'
    ? join(here, 'screenshot.png')
    : join(here, '..', '..', 'target', 'checkout-screenshot.png');
  mkdirSync(dirname(shot), { recursive: true });
  await page.screenshot({ path: shot, fullPage: true });
  await page.close();
});

test('a loaded machine: a slow package load and a double click answered between its clicks still make one order', async () => {
  // The package's wasm arrives 1.5 s late (as on a busy machine): Pay stays disabled until the
  // guard is on it, so the test's click cannot submit the form natively (a navigation, no order).
  const page = await openPage('', {
    beforeLoad: (p) => p.route('**/idemgate_web_bg.wasm', async (route) => {
      await new Promise((r) => setTimeout(r, 1500));
      await route.continue();
    }),
  });
  const url = page.url();
  const before = await orders();
  // The double click's first click, then its answer, then its second click (detail 2) and a third:
  // the button is enabled again by then, and those clicks must not be a second payment.
  const box = await page.locator('#pay').boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.mouse.down({ clickCount: 1 });
  await page.mouse.up({ clickCount: 1 });
  const first = await outcome(page);
  assert.equal(first.state, 'succeeded', first.text);
  assert.equal(first.disabled, false, 'the button is enabled again before the second click');
  for (const clickCount of [2, 3]) {
    await page.mouse.down({ clickCount });
    await page.mouse.up({ clickCount });
  }
  // A click that submits says in_flight synchronously, inside its own dispatch: none did.
  assert.equal(await page.evaluate(() => document.getElementById('status').dataset.state), 'succeeded');
  // The page decides a click's fate by the next task: wait until all three are listed.
  await page.waitForFunction(() => document.querySelectorAll('#attempts li[data-kind="click"]').length >= 3);
  const seen = await happened(page);
  const story = JSON.stringify(seen, null, 1);
  const after = await orders();
  assert.equal(page.url(), url, 'no native form submission');
  assert.equal(after.count, before.count + 1, `one order for one double click: ${story}`);
  assert.equal(after.received, before.received + 1, 'only one request reached the order service');
  assert.equal(seen.filter((e) => e.kind === 'request').length, 1, story);
  // Shown as they happened: the clicks after the answer were absorbed, not paid again.
  assert.deepEqual(seen.filter((e) => e.kind === 'click').map((e) => e.click), ['submitted', 'absorbed', 'absorbed'], story);
  assert.match(seen.at(-1).text, /click absorbed — click 3 of the triple click whose first click started payment 1/, story);
  await page.close();
});

test('a lost response: the page retries with the same key and still one order', async () => {
  // The order service answers 2.5 s after committing; the page gives up after 1 s. The edge's
  // detached exchange still receives and stores that answer: the page's retries wait at the edge
  // for it (`in_flight.wait`), and the one still waiting gets the replay of the created order.
  // One order, one request received, success.
  const page = await openPage('?delay=2500&timeout=1000');
  const before = await orders();
  await page.click('#pay');
  const done = await outcome(page);
  assert.equal(done.state, 'succeeded', done.text);
  const after = await orders();
  assert.equal(after.count, before.count + 1, 'still one order');
  // Only the first attempt reached the service: every retry waited at the edge, then the replay.
  assert.equal(after.received, before.received + 1, 'the service received the order exactly once');
  // From now on the stored answer is replayed to any retry of that payment.
  const replay = await page.evaluate(async (key) => {
    const res = await fetch('/api/orders', {
      method: 'POST',
      headers: { authorization: 'Bearer demo-user', 'idempotency-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ items: [{ sku: 'beans', qty: 1, price_cents: 2400 }] }),
    });
    return { status: res.status, replayed: res.headers.get('idempotent-replayed'), order: await res.json() };
  }, done.key);
  assert.equal(replay.status, 201);
  assert.equal(replay.replayed, 'true');
  assert.equal((await orders()).count, after.count, 'the replay made no order');
  assert.match(done.text, new RegExp(`Order #${replay.order.id} placed`));
  await page.close();
});

test('a changed cart is a new intent: a new key and a new order', async () => {
  const page = await openPage();
  const before = await orders();
  await page.click('#pay');
  const first = await outcome(page);
  await page.fill('input[name=grinder]', '1');
  await page.evaluate(() => { document.getElementById('status').dataset.state = 'idle'; });
  await page.click('#pay');
  const second = await outcome(page);
  assert.equal(first.state, 'succeeded');
  assert.equal(second.state, 'succeeded');
  assert.notEqual(first.key, second.key, 'a new key for the new cart');
  const after = await orders();
  assert.equal(after.count, before.count + 2);
  assert.equal(after.orders.at(-1).total_cents, 2400 + 8900);
  await page.close();
});

/** A Stripe-style signed delivery: `Stripe-Signature: t=<now>,v1=<HMAC-SHA256(secret, "t.body")>`. */
function deliverEvent(body, secret = stack.webhook_secret) {
  const t = Math.floor(Date.now() / 1000);
  const v1 = createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');
  return fetch(`${stack.url}/api/webhooks/payments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'stripe-signature': `t=${t},v1=${v1}` },
    body,
  });
}

/** Delivers until acknowledged, as a provider does: a 409 (in flight) is delivered again later. */
async function deliverUntilAcknowledged(body) {
  const statuses = [];
  for (let i = 0; i < 20; i += 1) {
    const res = await deliverEvent(body);
    statuses.push(res.status);
    if (res.status !== 409) return { statuses, res, json: await res.json() };
    assert.ok(Number(res.headers.get('retry-after')) >= 1, 'a 409 says when to come back');
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`never acknowledged: ${statuses}`);
}

test('a payment event delivered again and again marks the order paid once; every delivery gets 200', async () => {
  const created = await fetch(`${stack.url}/api/orders`, {
    method: 'POST',
    headers: { authorization: 'Bearer webhook-test', 'idempotency-key': `order-${Date.now()}`, 'content-type': 'application/json' },
    body: JSON.stringify({ items: [{ sku: 'beans', qty: 2, price_cents: 2400 }] }),
  });
  assert.equal(created.status, 201);
  const order = await created.json();
  const before = await orders();
  assert.equal(before.orders.find((o) => o.id === order.id).status, 'unpaid');

  const event = JSON.stringify({ id: `evt_${order.id}_${Date.now()}`, type: 'payment_succeeded', data: { order: order.id } });
  // A forged delivery (wrong secret) is refused at the edge and does not pre-empt the real one.
  const forged = await deliverEvent(event, 'whsec_not_the_secret');
  assert.equal(forged.status, 403);
  assert.equal((await forged.json()).code, 'signature_mismatch');
  assert.equal((await orders()).events_applied, before.events_applied);

  // Three concurrent deliveries, then a late redelivery of the same event.
  const concurrent = await Promise.all([1, 2, 3].map(() => deliverUntilAcknowledged(event)));
  const late = await deliverUntilAcknowledged(event);
  for (const d of [...concurrent, late]) {
    assert.deepEqual(d.statuses.at(-1), 200, `acknowledged: ${d.statuses}`);
    assert.equal(d.json.status, 'paid');
  }
  assert.equal(late.res.headers.get('idempotent-replayed'), 'true');
  const after = await orders();
  assert.equal(after.events_applied, before.events_applied + 1, 'the event was applied once');
  assert.equal(after.orders.find((o) => o.id === order.id).status, 'paid');

  // An event for an order that does not exist is not acknowledged (404) and not stored: once
  // the order exists, the provider's next delivery of the same event is applied.
  const missing = JSON.stringify({ id: `evt_missing_${Date.now()}`, type: 'payment_succeeded', data: { order: 999999 } });
  for (const attempt of [1, 2]) {
    const res = await deliverEvent(missing);
    // Read to the end, as a provider does, before it delivers again.
    const problem = await res.json();
    assert.equal(res.status, 404, `attempt ${attempt}: a failed delivery is released, never replayed`);
    assert.equal(problem.title, 'no_such_order');
  }
});

/** A new unpaid order (its own client and key). */
const newOrder = (client) => createOrder(stack.url, client);

const statusOf = async (id) => (await orders()).orders.find((o) => o.id === id).status;

/** Sends until acknowledged, as a sender does: a 409 (in flight) is sent again later. */
async function untilAcknowledged(send) {
  const statuses = [];
  for (let i = 0; i < 40; i += 1) {
    const res = await send();
    statuses.push(res.status);
    const body = await res.text();
    if (res.status !== 409) return { statuses, res, body };
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`never acknowledged: ${statuses}`);
}

// Standard Webhooks: `webhook-signature: v1,<base64 HMAC-SHA256(key, "{id}.{timestamp}.{body}")>`,
// signed by the reference implementation, the npm `standardwebhooks` (pinned for test-clients).
function standardSignature(secret, id, timestamp, body) {
  return new Webhook(secret).sign(id, new Date(Number(timestamp) * 1000), body);
}

function deliverStandard(id, body, { secret = stack.standard_webhook_secret, age = 0, to = stack.url, signature } = {}) {
  const timestamp = String(Math.floor(Date.now() / 1000) - age);
  const headers = { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': timestamp };
  if (signature !== null) headers['webhook-signature'] = signature ?? standardSignature(secret, id, timestamp, body);
  return fetch(`${to}/api/webhooks/standard`, { method: 'POST', headers, body });
}

test('a Standard Webhooks delivery sent 8 times at once and once late marks the order paid once; forged and stale ones are refused', async () => {
  const order = await newOrder('standard-webhooks-test');
  const before = await orders();
  const id = `msg_${order.id}_${Date.now()}`;
  const body = JSON.stringify({ type: 'payment.succeeded', data: { order: order.id } });

  // Refused at the edge (403, problem+json), never applied, and none of them takes the id: the
  // real delivery after them is applied.
  const forgedSecret = `whsec_${randomBytes(32).toString('base64')}`;
  for (const [what, options, code] of [
    ['forged (another secret)', { secret: forgedSecret }, 'signature_mismatch'],
    ['stale (signed 10 minutes ago)', { age: 600 }, 'signature_stale'],
    ['unsigned', { signature: null }, 'signature_missing'],
  ]) {
    const res = await deliverStandard(id, body, options);
    assert.equal(res.status, 403, what);
    assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/, what);
    assert.equal((await res.json()).code, code, what);
  }
  assert.equal((await orders()).events_applied, before.events_applied, 'no refused delivery was applied');
  assert.equal(await statusOf(order.id), 'unpaid');
  // Past the edge, the order service checks the signature too (defence in depth): 401, not applied.
  const direct = await deliverStandard(id, body, { secret: forgedSecret, to: `http://127.0.0.1:${stack.orders}` });
  assert.equal(direct.status, 401);
  await direct.arrayBuffer();
  assert.equal((await orders()).events_applied, before.events_applied);

  // 8 concurrent deliveries of one message (each attempt signed afresh, as a sender's retry is),
  // then a late one: every one acknowledged with a 2xx, the order service applies it once.
  const concurrent = await Promise.all(Array.from({ length: 8 }, () => untilAcknowledged(() => deliverStandard(id, body))));
  const late = await untilAcknowledged(() => deliverStandard(id, body));
  for (const d of [...concurrent, late]) {
    assert.ok(d.res.status >= 200 && d.res.status < 300, `acknowledged: ${d.statuses} ${d.body}`);
    assert.ok(d.statuses.slice(0, -1).every((st) => st === 409), `only 409 (in flight) before: ${d.statuses}`);
    assert.equal(JSON.parse(d.body).status, 'paid', d.body);
  }
  assert.equal(late.res.headers.get('idempotent-replayed'), 'true');
  // The provider redelivers the applied message with a signature made 10 minutes ago (past the
  // 5-minute tolerance): the stored acknowledgement, not a 403, and it is not applied again.
  const redelivered = await deliverStandard(id, body, { age: 600 });
  assert.equal(redelivered.status, late.res.status, 'a late redelivery of an applied message is acknowledged');
  assert.equal(redelivered.headers.get('idempotent-replayed'), 'true');
  assert.equal((await redelivered.json()).status, 'paid');
  const after = await orders();
  assert.equal(after.events_applied, before.events_applied + 1, 'applied exactly once');
  assert.equal(after.orders.find((o) => o.id === order.id).status, 'paid');
});

/** A CloudEvent over HTTP: binary mode (ce-* headers, the body is the data) or structured mode. */
function deliverCloudEvent(mode, { id, source, data, type = 'payment.succeeded' }) {
  const init = mode === 'binary'
    ? {
      headers: { 'content-type': 'application/json', 'ce-specversion': '1.0', 'ce-id': id, 'ce-source': source, 'ce-type': type },
      body: JSON.stringify(data),
    }
    : {
      headers: { 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify({ specversion: '1.0', id, source, type, datacontenttype: 'application/json', data }),
    };
  return fetch(`${stack.url}/api/events`, { method: 'POST', ...init });
}

for (const mode of ['binary', 'structured']) {
  test(`CloudEvents (${mode} mode): applied once per (source, id); the same id from another source is another event`, async () => {
    const order = await newOrder(`cloudevents-${mode}-test`);
    const before = await orders();
    const event = { id: `pay-${mode}-${order.id}-${Date.now()}`, source: `/e2e/${mode}/provider-a`, data: { order: order.id } };
    const deliveries = await Promise.all([1, 2, 3, 4].map(() => untilAcknowledged(() => deliverCloudEvent(mode, event))));
    const late = await untilAcknowledged(() => deliverCloudEvent(mode, event));
    for (const d of [...deliveries, late]) {
      assert.equal(d.res.status, 200, `acknowledged: ${d.statuses} ${d.body}`);
      assert.deepEqual([JSON.parse(d.body).id, JSON.parse(d.body).source], [event.id, event.source]);
    }
    assert.equal(late.res.headers.get('idempotent-replayed'), 'true');
    const once = await orders();
    assert.equal(once.events_applied, before.events_applied + 1, 'applied once for (source, id)');
    assert.equal(once.orders.find((o) => o.id === order.id).status, 'paid');

    // The same id from another source: another event, applied (and then once only, too).
    const other = { ...event, source: `/e2e/${mode}/provider-b` };
    const first = await untilAcknowledged(() => deliverCloudEvent(mode, other));
    assert.equal(first.res.status, 200, first.body);
    assert.notEqual(first.res.headers.get('idempotent-replayed'), 'true', 'not a replay of provider-a\'s event');
    const again = await untilAcknowledged(() => deliverCloudEvent(mode, other));
    assert.equal(again.res.headers.get('idempotent-replayed'), 'true');
    assert.equal((await orders()).events_applied, before.events_applied + 2, 'one more, for the other source');
  });
}

test('CloudEvents batched mode is refused (415), never applied', async () => {
  const order = await newOrder('cloudevents-batch-test');
  const before = await orders();
  const res = await fetch(`${stack.url}/api/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/cloudevents-batch+json' },
    body: JSON.stringify([{ specversion: '1.0', id: `batch-${order.id}`, source: '/e2e/batch', type: 'payment.succeeded', data: { order: order.id } }]),
  });
  await res.arrayBuffer();
  assert.equal(res.status, 415);
  const after = await orders();
  assert.equal(after.events_applied, before.events_applied);
  assert.equal(after.orders.find((o) => o.id === order.id).status, 'unpaid');
});

test('the page lists every attempt with the edge\'s decision for it', async () => {
  const attempts = async (page) => (await happened(page)).filter((e) => e.kind === 'request');
  // A double click: one request, claimed and forwarded.
  const page = await openPage();
  await page.click('#pay', { clickCount: 2 });
  assert.equal((await outcome(page)).state, 'succeeded');
  const clicked = await attempts(page);
  assert.deepEqual(clicked.map((a) => [a.status, a.decision]), [['201', 'claimed']], JSON.stringify(clicked));
  assert.match(clicked[0].text, /edge: claimed the key/);
  await page.close();
  // A lost response: no answer, then retries held at the edge while its detached exchange runs
  // (each the page gives up on after its 1 s is not answered), then the replay — never a 409.
  const lost = await openPage('?delay=2500&timeout=1000');
  await lost.click('#pay');
  assert.equal((await outcome(lost)).state, 'succeeded');
  const seen = await attempts(lost);
  const story = JSON.stringify(seen, null, 1);
  assert.equal(seen[0].status, 'none', story);
  assert.match(seen[0].text, /no answer: the page gave up/, story);
  assert.equal(seen.at(-1).decision, 'replayed', story);
  assert.equal(seen.at(-1).status, '201', story);
  const between = seen.slice(1, -1);
  for (const a of between) assert.equal(a.status, 'none', `no 409 while the first attempt ran: ${story}`);
  await lost.close();
});
