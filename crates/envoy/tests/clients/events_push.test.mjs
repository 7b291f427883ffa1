// Push deliveries from Google Cloud Pub/Sub and Amazon SNS through the filter in a real Envoy
// (presets `pubsub-push`, `sns`). Neither service ships a library that builds its push requests
// (the Pub/Sub and SNS SDKs publish and pull; SNS's message validators fetch the signing
// certificate from AWS, which these tests cannot reach), so the requests are built here as the
// providers document them:
//   Pub/Sub push, wrapped: JSON `{"message": {"data", "attributes", "messageId", "message_id",
//   "publishTime", "publish_time"}, "subscription"}`; unwrapped (payload unwrapping with
//   metadata): the raw data as the body and `x-goog-pubsub-message-id`,
//   `x-goog-pubsub-subscription-name`, `x-goog-pubsub-publish-time` headers. An answer of 102,
//   200, 201, 202 or 204 acknowledges; anything else is retried.
//   SNS HTTP(S) delivery: `text/plain; charset=UTF-8` JSON body, `x-amz-sns-message-type`
//   (Notification, SubscriptionConfirmation, UnsubscribeConfirmation), `x-amz-sns-message-id`,
//   `x-amz-sns-topic-arn`, `x-amz-sns-subscription-arn` on notifications.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { deliver, startStack } from './stack.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const FILTER = JSON.stringify({
  routes: [
    { prefix: '/push/pubsub', preset: 'pubsub-push' },
    { prefix: '/push/sns', preset: 'sns' },
  ],
});

// --- the two senders -----------------------------------------------------------------------

let serial = 2070443601311540;
const pubsubId = () => String(serial++);
const SUBSCRIPTION = 'projects/idemgate-test/subscriptions/orders-push';

function pubsubWrapped(id, n) {
  const publishTime = new Date().toISOString();
  return {
    headers: { 'content-type': 'application/json', 'user-agent': 'APIs-Google; (+https://developers.google.com/webmasters/APIs-Google.html)' },
    body: JSON.stringify({
      message: {
        attributes: { kind: 'order' },
        data: Buffer.from(JSON.stringify({ order: n })).toString('base64'),
        messageId: id,
        message_id: id,
        publishTime,
        publish_time: publishTime,
      },
      subscription: SUBSCRIPTION,
    }),
  };
}

function pubsubUnwrapped(id, n) {
  return {
    headers: {
      'content-type': 'application/json',
      'x-goog-pubsub-message-id': id,
      'x-goog-pubsub-subscription-name': SUBSCRIPTION,
      'x-goog-pubsub-publish-time': new Date().toISOString(),
      kind: 'order',
    },
    body: JSON.stringify({ order: n }),
  };
}

const TOPIC = 'arn:aws:sns:us-east-1:123456789012:orders';

function sns(type, id, n) {
  const base = {
    Type: type,
    MessageId: id,
    TopicArn: TOPIC,
    Timestamp: new Date().toISOString(),
    SignatureVersion: '1',
    Signature: Buffer.from(`not verified here ${id}`).toString('base64'),
    SigningCertURL: 'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0000000000000000000000.pem',
  };
  const body = type === 'Notification'
    ? { ...base, Subject: `order ${n}`, Message: JSON.stringify({ order: n }), UnsubscribeURL: `https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=${TOPIC}:sub` }
    : { ...base, Token: `token-${id}`, Message: `You have chosen to ${type === 'SubscriptionConfirmation' ? 'subscribe to' : 'unsubscribe from'} the topic ${TOPIC}.`, SubscribeURL: `https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=${TOPIC}&Token=token-${id}` };
  const headers = {
    'content-type': 'text/plain; charset=UTF-8',
    'user-agent': 'Amazon Simple Notification Service Agent',
    'x-amz-sns-message-type': type,
    'x-amz-sns-message-id': id,
    'x-amz-sns-topic-arn': TOPIC,
  };
  if (type === 'Notification') headers['x-amz-sns-subscription-arn'] = `${TOPIC}:2bcfbf39-05c3-41de-beaa-fcfcc21c8f55`;
  return { headers, body: JSON.stringify(body) };
}

/** The upstream: a push endpoint; the message id comes from where each sender puts it. */
function endpoint(processed, { failFirst = new Set(), delayMs = 300 } = {}) {
  return async (req, res) => {
    let id;
    if (req.url.includes('sns')) id = `${req.headers['x-amz-sns-message-type']} ${JSON.parse(req.body).MessageId}`;
    else id = req.headers['x-goog-pubsub-message-id'] ?? JSON.parse(req.body).message.messageId;
    if (failFirst.delete(id)) {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end('not now');
      return;
    }
    processed.push(id);
    await sleep(delayMs);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ ok: true, id }));
  };
}

// --- the same checks for each way of pushing -----------------------------------------------

const ways = [
  ['pubsub-push (wrapped)', '/push/pubsub', pubsubId, pubsubWrapped, (id) => id],
  ['pubsub-push (unwrapped)', '/push/pubsub', pubsubId, pubsubUnwrapped, (id) => id],
  ['sns (Notification)', '/push/sns', randomUUID, (id, n) => sns('Notification', id, n), (id) => `Notification ${id}`],
];

for (const [name, prefix, newId, message, seenAs] of ways) {
  test(`${name}: 8 concurrent duplicates and a late one run the endpoint once, every push acknowledged`, async (t) => {
    const processed = [];
    const { envoy, upstream } = await startStack(t, { filter: FILTER, handler: endpoint(processed) });
    const url = `${envoy.url}${prefix}`;
    const id = newId();
    const m = message(id, 1);
    const concurrent = await Promise.all(Array.from({ length: 8 }, () => deliver(url, m.headers, m.body)));
    const late = await deliver(url, m.headers, m.body);
    for (const d of [...concurrent, late]) {
      assert.equal(d.statuses.at(-1), 200, `every push ends acknowledged: ${d.statuses}`);
      assert.deepEqual(JSON.parse(d.body), { ok: true, id: seenAs(id) });
    }
    assert.ok(concurrent.some((d) => d.statuses[0] === 409), 'a concurrent duplicate met the in-flight claim');
    assert.equal(late.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(processed, [seenAs(id)]);
    assert.equal(upstream.requests.length, 1);
    assert.equal(upstream.requests[0].body, m.body);
    // Another message id is another message.
    const other = newId();
    const o = message(other, 2);
    assert.deepEqual((await deliver(url, o.headers, o.body)).statuses, [200]);
    assert.deepEqual(processed, [seenAs(id), seenAs(other)]);
    assert.equal(await envoy.counter('claimed'), 2);
  });

  test(`${name}: a push the endpoint fails is released, the redelivery runs it`, async (t) => {
    const id = newId();
    const processed = [];
    const { envoy, upstream } = await startStack(t, { filter: FILTER, handler: endpoint(processed, { failFirst: new Set([seenAs(id)]), delayMs: 0 }) });
    const url = `${envoy.url}${prefix}`;
    const m = message(id, 3);
    assert.deepEqual((await deliver(url, m.headers, m.body)).statuses, [500]);
    const retry = await deliver(url, m.headers, m.body);
    assert.deepEqual(retry.statuses, [200]);
    assert.equal(retry.headers.get('idempotent-replayed'), null);
    const again = await deliver(url, m.headers, m.body);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(processed, [seenAs(id)]);
    assert.equal(upstream.requests.length, 2);
    assert.equal(await envoy.counter('released'), 1);
  });

  test(`${name}: unguarded: the same push to a prefix no route matches reaches the endpoint unchanged, every time`, async (t) => {
    const processed = [];
    const { envoy, upstream } = await startStack(t, { filter: FILTER, handler: endpoint(processed, { delayMs: 0 }) });
    const id = newId();
    const m = message(id, 4);
    const path = `/unguarded${prefix}`;
    for (let i = 0; i < 2; i += 1) {
      const res = await fetch(`${envoy.url}${path}`, { method: 'POST', headers: m.headers, body: m.body });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('idempotent-replayed'), null);
    }
    assert.deepEqual(processed, [seenAs(id), seenAs(id)]);
    for (const got of upstream.requests) {
      assert.equal(got.url, path);
      assert.equal(got.body, m.body);
      for (const [h, value] of Object.entries(m.headers)) assert.equal(got.headers[h], value, h);
    }
    assert.equal(await envoy.counter('claimed'), 0);
  });
}

test('pubsub-push: a push with no message-id header and a body that is not JSON is refused with 400 key_body_unreadable', async (t) => {
  const processed = [];
  const { envoy, upstream } = await startStack(t, { filter: FILTER, handler: endpoint(processed, { delayMs: 0 }) });
  const m = pubsubWrapped(pubsubId(), 5);
  const res = await fetch(`${envoy.url}/push/pubsub`, { method: 'POST', headers: m.headers, body: m.body.slice(0, 25) });
  assert.equal(res.status, 400);
  assert.equal(res.headers.get('content-type'), 'application/problem+json');
  assert.equal((await res.json()).code, 'key_body_unreadable');
  assert.equal(upstream.requests.length, 0);
});

test('sns: SubscriptionConfirmation and UnsubscribeConfirmation pass through unguarded every time and are never stored', async (t) => {
  const processed = [];
  const { envoy, upstream } = await startStack(t, { filter: FILTER, handler: endpoint(processed, { delayMs: 0 }) });
  const url = `${envoy.url}/push/sns`;
  const id = randomUUID();
  const confirm = sns('SubscriptionConfirmation', id, 0);
  for (let i = 0; i < 2; i += 1) {
    const res = await fetch(url, { method: 'POST', headers: confirm.headers, body: confirm.body });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { ok: true, id: `SubscriptionConfirmation ${id}` });
    assert.equal(res.headers.get('idempotent-replayed'), null);
  }
  const unsubscribe = sns('UnsubscribeConfirmation', randomUUID(), 0);
  for (let i = 0; i < 2; i += 1) {
    const res = await fetch(url, { method: 'POST', headers: unsubscribe.headers, body: unsubscribe.body });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('idempotent-replayed'), null);
  }
  assert.equal(upstream.requests.length, 4, 'every confirmation reached the endpoint');
  for (const got of upstream.requests.slice(0, 2)) assert.equal(got.body, confirm.body);
  assert.equal(await envoy.counter('claimed'), 0, 'nothing was claimed, nothing stored');
  // Nothing was stored under that message id: a notification that carries it runs.
  const n = sns('Notification', id, 6);
  const d = await deliver(url, n.headers, n.body);
  assert.deepEqual(d.statuses, [200]);
  assert.equal(d.headers.get('idempotent-replayed'), null);
  assert.deepEqual(processed, [
    `SubscriptionConfirmation ${id}`, `SubscriptionConfirmation ${id}`,
    `UnsubscribeConfirmation ${unsubscribe.headers['x-amz-sns-message-id']}`, `UnsubscribeConfirmation ${unsubscribe.headers['x-amz-sns-message-id']}`,
    `Notification ${id}`,
  ]);
});
