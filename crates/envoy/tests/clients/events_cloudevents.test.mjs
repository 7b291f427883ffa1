// CloudEvents over HTTP (preset `cloudevents`) through the filter in a real Envoy: events built
// with the `cloudevents` SDK (`new CloudEvent(...)`) and put on the wire with its own
// `HTTP.binary` / `HTTP.structured`; the upstream reads them back with `HTTP.toEvent`. The key is
// (source, id): duplicates collapse in both modes, the same id from another source is another
// event, and the batched mode is refused (415) before anything reaches the upstream.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { CloudEvent, CONSTANTS, HTTP } from 'cloudevents';
import { deliver, startStack } from './stack.mjs';

const FILTER = JSON.stringify({ routes: [{ prefix: '/events/cloudevents', preset: 'cloudevents' }] });

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function orderEvent({ id = randomUUID(), source = '/shop/orders', n = 1 } = {}) {
  return new CloudEvent({
    id,
    source,
    type: 'com.example.order.created',
    time: new Date().toISOString(),
    datacontenttype: 'application/json',
    data: { order: n, amount: 100 * n },
  });
}

/** The upstream: a CloudEvents consumer (the SDK parses the request back into an event). */
function consumer(processed, { failFirst = new Set(), delayMs = 300 } = {}) {
  return async (req, res) => {
    let event;
    try {
      event = HTTP.toEvent({ headers: req.headers, body: req.body });
    } catch (e) {
      res.writeHead(400);
      res.end(String(e));
      return;
    }
    if (Array.isArray(event)) {
      res.writeHead(202);
      res.end('batch');
      processed.push(...event.map((e) => `${e.source} ${e.id}`));
      return;
    }
    const key = `${event.source} ${event.id}`;
    if (failFirst.delete(key)) {
      res.writeHead(503, { 'content-type': 'text/plain' });
      res.end('try later');
      return;
    }
    processed.push(key);
    await sleep(delayMs);
    res.writeHead(202, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ accepted: event.id, source: event.source }));
  };
}

for (const [mode, toMessage] of [['binary', HTTP.binary], ['structured', HTTP.structured]]) {
  test(`cloudevents (${mode}): 8 concurrent duplicates and a late one run the consumer once; the same id from another source runs again`, async (t) => {
    const processed = [];
    const { envoy, upstream } = await startStack(t, { filter: FILTER, handler: consumer(processed) });
    const url = `${envoy.url}/events/cloudevents`;
    const event = orderEvent({ n: 2 });
    const message = toMessage(event);
    if (mode === 'structured') assert.ok(message.headers['content-type'].startsWith('application/cloudevents+json'));
    else assert.equal(message.headers['ce-id'], event.id);
    const concurrent = await Promise.all(Array.from({ length: 8 }, () => deliver(url, message.headers, message.body)));
    const late = await deliver(url, message.headers, message.body);
    for (const d of [...concurrent, late]) {
      assert.equal(d.statuses.at(-1), 202, `every delivery ends acknowledged: ${d.statuses}`);
      assert.deepEqual(JSON.parse(d.body), { accepted: event.id, source: '/shop/orders' });
    }
    assert.ok(concurrent.some((d) => d.statuses[0] === 409), 'a concurrent duplicate met the in-flight claim');
    assert.equal(late.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(processed, [`/shop/orders ${event.id}`]);
    assert.equal(upstream.requests.length, 1);
    assert.equal(upstream.requests[0].body, message.body, 'the event reached the consumer as sent');

    // The same id from another source is another event.
    const elsewhere = toMessage(orderEvent({ id: event.id, source: '/warehouse/orders', n: 2 }));
    const d = await deliver(url, elsewhere.headers, elsewhere.body);
    assert.deepEqual(d.statuses, [202]);
    assert.equal(d.headers.get('idempotent-replayed'), null);
    assert.deepEqual(processed, [`/shop/orders ${event.id}`, `/warehouse/orders ${event.id}`]);
    assert.equal(await envoy.counter('claimed'), 2);
  });

  test(`cloudevents (${mode}): a delivery the consumer fails is released, the retry runs it`, async (t) => {
    const event = orderEvent({ n: 3 });
    const processed = [];
    const { envoy, upstream } = await startStack(t, {
      filter: FILTER,
      handler: consumer(processed, { failFirst: new Set([`/shop/orders ${event.id}`]), delayMs: 0 }),
    });
    const url = `${envoy.url}/events/cloudevents`;
    const message = toMessage(event);
    assert.deepEqual((await deliver(url, message.headers, message.body)).statuses, [503]);
    const retry = await deliver(url, message.headers, message.body);
    assert.deepEqual(retry.statuses, [202]);
    assert.equal(retry.headers.get('idempotent-replayed'), null);
    const again = await deliver(url, message.headers, message.body);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(processed, [`/shop/orders ${event.id}`]);
    assert.equal(upstream.requests.length, 2);
    assert.equal(await envoy.counter('released'), 1);
  });

  test(`cloudevents (${mode}): unguarded: the same event to a prefix no route matches reaches the consumer unchanged, every time`, async (t) => {
    const processed = [];
    const { envoy, upstream } = await startStack(t, { filter: FILTER, handler: consumer(processed, { delayMs: 0 }) });
    const event = orderEvent({ n: 4 });
    const message = toMessage(event);
    for (let i = 0; i < 2; i += 1) {
      const res = await fetch(`${envoy.url}/unguarded/cloudevents`, { method: 'POST', headers: message.headers, body: message.body });
      assert.equal(res.status, 202);
      assert.equal(res.headers.get('idempotent-replayed'), null);
    }
    assert.deepEqual(processed, [`/shop/orders ${event.id}`, `/shop/orders ${event.id}`]);
    for (const got of upstream.requests) {
      assert.equal(got.body, message.body);
      for (const [name, value] of Object.entries(message.headers)) assert.equal(got.headers[name], value, name);
    }
    assert.equal(await envoy.counter('claimed'), 0);
  });
}

test('cloudevents: a batch (application/cloudevents-batch+json) is refused with 415 cloudevents_batch_unsupported', async (t) => {
  const processed = [];
  const { envoy, upstream } = await startStack(t, { filter: FILTER, handler: consumer(processed, { delayMs: 0 }) });
  const events = [orderEvent({ n: 5 }), orderEvent({ n: 6 })];
  // The SDK's batched mode: its content type, a JSON array of structured events. The SDK itself
  // reads this message back as a batch (two events).
  const batch = {
    headers: { 'content-type': `${CONSTANTS.MIME_CE_BATCH}; charset=utf-8` },
    body: JSON.stringify(events.map((e) => e.toJSON())),
  };
  const parsed = HTTP.toEvent(batch);
  assert.ok(Array.isArray(parsed) && parsed.length === 2, 'the SDK sees a batch');
  const res = await fetch(`${envoy.url}/events/cloudevents`, { method: 'POST', headers: batch.headers, body: batch.body });
  assert.equal(res.status, 415);
  assert.equal(res.headers.get('content-type'), 'application/problem+json');
  assert.equal((await res.json()).code, 'cloudevents_batch_unsupported');
  assert.equal(upstream.requests.length, 0);
  // Unguarded, the same batch reaches the consumer.
  const plain = await fetch(`${envoy.url}/unguarded/cloudevents`, { method: 'POST', headers: batch.headers, body: batch.body });
  assert.equal(plain.status, 202);
  assert.equal(upstream.requests.length, 1);
});

test('cloudevents: a structured event whose body is not JSON is refused with 400 key_body_unreadable', async (t) => {
  const processed = [];
  const { envoy, upstream } = await startStack(t, { filter: FILTER, handler: consumer(processed, { delayMs: 0 }) });
  const message = HTTP.structured(orderEvent({ n: 7 }));
  const res = await fetch(`${envoy.url}/events/cloudevents`, { method: 'POST', headers: message.headers, body: message.body.slice(0, 30) });
  assert.equal(res.status, 400);
  assert.equal(res.headers.get('content-type'), 'application/problem+json');
  assert.equal((await res.json()).code, 'key_body_unreadable');
  assert.equal(upstream.requests.length, 0);
});

test('cloudevents: the preset takes a signature scheme as an override (Standard Webhooks signing, key still (source, id))', async (t) => {
  const { Webhook } = await import('standardwebhooks');
  const secret = `whsec_${Buffer.from('cloudevents signed with standard webhooks').toString('base64')}`;
  const filter = JSON.stringify({
    routes: [{ prefix: '/events/cloudevents', preset: 'cloudevents', signature: { scheme: 'standard-webhooks', secret } }],
  });
  const processed = [];
  const { envoy, upstream } = await startStack(t, { filter, handler: consumer(processed, { delayMs: 0 }) });
  const url = `${envoy.url}/events/cloudevents`;
  const event = orderEvent({ n: 8 });
  const message = HTTP.binary(event);
  const signed = (id) => {
    const date = new Date();
    return {
      ...message.headers,
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(date.getTime() / 1000)),
      'webhook-signature': new Webhook(secret).sign(id, date, message.body),
    };
  };
  const unsigned = await fetch(url, { method: 'POST', headers: message.headers, body: message.body });
  assert.equal(unsigned.status, 403);
  assert.equal((await unsigned.json()).code, 'signature_missing');
  assert.equal(upstream.requests.length, 0);
  // Two signed deliveries of the event under different webhook-ids: the key is still (source, id).
  assert.deepEqual((await deliver(url, signed('msg_a'), message.body)).statuses, [202]);
  const second = await deliver(url, signed('msg_b'), message.body);
  assert.deepEqual(second.statuses, [202]);
  assert.equal(second.headers.get('idempotent-replayed'), 'true');
  assert.deepEqual(processed, [`/shop/orders ${event.id}`]);
});
