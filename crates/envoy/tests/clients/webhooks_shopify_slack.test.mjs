// Shopify and Slack deliveries through the filter in a real Envoy (presets `shopify`, `slack`).
//
// Shopify: signed with @shopify/shopify-api's own test helper `getHmac` (base64 HMAC-SHA256 of
// the body), verified upstream with `shopify.webhooks.validate`, as a Shopify app does; keyed by
// `X-Shopify-Webhook-Id`. Shopify signs no timestamp, so there is no stale case.
//
// Slack: @slack/bolt has no signing helper, so deliveries are signed with node:crypto as Slack
// documents it ("Verifying requests from Slack": `v0=` + hex HMAC-SHA256 of
// `v0:{X-Slack-Request-Timestamp}:{body}`) and verified upstream with Bolt's `verifySlackRequest`.
// Keyed by the body's `event_id`; the url_verification challenge has none and passes.
//
// The common checks are in signed_suite.mjs.

import assert from 'node:assert/strict';
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { test } from 'node:test';
import '@shopify/shopify-api/adapters/node';
import { ApiVersion, LogSeverity, shopifyApi } from '@shopify/shopify-api';
import { getHmac } from '@shopify/shopify-api/test-helpers';
import { verifySlackRequest } from '@slack/bolt';
import { filterFor, signedSchemeTests } from './signed_suite.mjs';
import { deliver, startStack } from './stack.mjs';

// --- Shopify -------------------------------------------------------------------------------

const shopifyApps = new Map();
function shopifyApp(apiSecretKey) {
  if (!shopifyApps.has(apiSecretKey)) {
    shopifyApps.set(apiSecretKey, shopifyApi({
      apiKey: 'idemgate-test-app',
      apiSecretKey,
      scopes: ['read_orders'],
      hostName: '127.0.0.1',
      apiVersion: ApiVersion.July25,
      isEmbeddedApp: false,
      logger: { level: LogSeverity.Error },
    }));
  }
  return shopifyApps.get(apiSecretKey);
}

const shopifyRotation = ['shpss_idemgate_rotation_old_0001', 'shpss_idemgate_rotation_new_0002'];
signedSchemeTests({
  name: 'shopify',
  preset: 'shopify',
  secret: 'shpss_idemgate_clients_test_main',
  wrong: 'shpss_somebody_elses_app_secret',
  rotation: shopifyRotation,
  signature: { secret_env: 'SHOPIFY_API_SECRET' },
  rotationConfig: { secrets_env: ['SHOPIFY_API_SECRET_OLD', 'SHOPIFY_API_SECRET_NEW'] },
  env: {
    SHOPIFY_API_SECRET: 'shpss_idemgate_clients_test_main',
    SHOPIFY_API_SECRET_OLD: shopifyRotation[0],
    SHOPIFY_API_SECRET_NEW: shopifyRotation[1],
  },
  newId: () => randomUUID(),
  body: (id, n) => JSON.stringify({ id: 820982911946154500 + n, email: `jon${n}@example.com`, total_price: `${n}99.00`, note: id }),
  sign: ({ id, body, secret }) => ({
    'content-type': 'application/json',
    'x-shopify-topic': 'orders/create',
    'x-shopify-shop-domain': 'idemgate-test.myshopify.com',
    'x-shopify-api-version': '2025-07',
    'x-shopify-webhook-id': id,
    'x-shopify-triggered-at': new Date().toISOString(),
    'x-shopify-hmac-sha256': getHmac(body, secret),
  }),
  signatureHeaders: ['x-shopify-hmac-sha256'],
  stale: false,
  tamper: (body) => body.replace('99.00', '0.01'),
  verify: async (req, secrets) => {
    const reasons = [];
    for (const key of secrets) {
      const check = await shopifyApp(key).webhooks.validate({ rawBody: req.body, rawRequest: req, rawResponse: {} });
      if (check.valid) return check.webhookId;
      reasons.push(check.reason);
    }
    throw new Error(`shopify validate: ${reasons.join(', ')}`);
  },
});

// --- Slack ---------------------------------------------------------------------------------

const SLACK_SECRET = 'slack_signing_secret_idemgate_main';
const slackRotation = ['slack_signing_secret_old_0001', 'slack_signing_secret_new_0002'];

/** Slack's documented signing (node:crypto; Bolt only verifies). */
function slackSign({ body, secret, date }) {
  const ts = String(Math.floor(date.getTime() / 1000));
  const sig = `v0=${createHmac('sha256', secret).update(`v0:${ts}:${body}`).digest('hex')}`;
  return { 'content-type': 'application/json', 'x-slack-request-timestamp': ts, 'x-slack-signature': sig };
}

function slackVerify(req, secrets) {
  const errors = [];
  for (const signingSecret of secrets) {
    try {
      verifySlackRequest({
        signingSecret,
        body: req.body,
        headers: {
          'x-slack-signature': req.headers['x-slack-signature'],
          'x-slack-request-timestamp': Number(req.headers['x-slack-request-timestamp']),
        },
      });
      return JSON.parse(req.body);
    } catch (e) { errors.push(e.message); }
  }
  throw new Error(errors.join('; '));
}

function slackEvent(id, n) {
  return JSON.stringify({
    token: 'XXYYZZ',
    team_id: 'T061EG9R6',
    api_app_id: 'A0PNCHHK2',
    event: { type: 'app_mention', user: 'U061F7AUR', text: `<@U0LAN0Z89> order ${n}`, ts: `1515449522.${n}`, channel: 'C0LAN2Q65' },
    type: 'event_callback',
    event_id: id,
    event_time: Math.floor(Date.now() / 1000),
  });
}

const slack = {
  name: 'slack',
  preset: 'slack',
  secret: SLACK_SECRET,
  wrong: 'slack_signing_secret_of_nobody',
  rotation: slackRotation,
  signature: { secret_env: 'SLACK_SIGNING_SECRET' },
  rotationConfig: { secrets: slackRotation },
  env: { SLACK_SIGNING_SECRET: SLACK_SECRET },
  newId: () => `Ev${randomBytes(5).toString('hex').toUpperCase()}`,
  body: slackEvent,
  sign: slackSign,
  signatureHeaders: ['x-slack-signature'],
  stale: true,
  tamper: (body) => body.replace('order', 'refund'),
  verify: (req, secrets) => slackVerify(req, secrets).event_id,
};
signedSchemeTests(slack);

/** A Slack app's endpoint: answers the url_verification challenge, acknowledges events. */
function slackApp(seen) {
  return async (req, res) => {
    let payload;
    try {
      payload = slackVerify(req, [SLACK_SECRET]);
    } catch (e) {
      res.writeHead(401);
      res.end(String(e));
      return;
    }
    seen.push({ type: payload.type, id: payload.event_id ?? null, retry: req.headers['x-slack-retry-num'] ?? null });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(payload.type === 'url_verification' ? { challenge: payload.challenge } : { ok: true, event_id: payload.event_id }));
  };
}

test('slack: the url_verification challenge (no event_id) passes, still signature-checked, and is never stored', async (t) => {
  const seen = [];
  const { envoy, upstream } = await startStack(t, { filter: filterFor(slack), handler: slackApp(seen), env: slack.env });
  const url = `${envoy.url}/webhooks/slack`;
  const body = JSON.stringify({ token: 'Jhj5dZrVaK7ZwHHjRyZWjbDl', challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P', type: 'url_verification' });
  for (let i = 0; i < 2; i += 1) {
    const res = await fetch(url, { method: 'POST', headers: slackSign({ body, secret: SLACK_SECRET, date: new Date() }), body });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P' }, 'the answer is relayed');
    assert.equal(res.headers.get('idempotent-replayed'), null);
  }
  assert.equal(upstream.requests.length, 2, 'both challenges reached the app');
  assert.equal(await envoy.counter('claimed'), 0);
  // A forged challenge is refused: no key, but the signature is still checked.
  const forged = await fetch(url, { method: 'POST', headers: slackSign({ body, secret: 'guess', date: new Date() }), body });
  assert.equal(forged.status, 403);
  assert.equal((await forged.json()).code, 'signature_mismatch');
  assert.equal(upstream.requests.length, 2);
});

test('slack: a retry (X-Slack-Retry-Num / X-Slack-Retry-Reason) gets the stored acknowledgement', async (t) => {
  const seen = [];
  const { envoy, upstream } = await startStack(t, { filter: filterFor(slack), handler: slackApp(seen), env: slack.env });
  const url = `${envoy.url}/webhooks/slack`;
  const id = slack.newId();
  const body = slackEvent(id, 12);
  const first = await deliver(url, slackSign({ body, secret: SLACK_SECRET, date: new Date() }), body);
  assert.deepEqual(first.statuses, [200]);
  for (const [num, reason] of [['1', 'http_timeout'], ['2', 'http_error']]) {
    const headers = { ...slackSign({ body, secret: SLACK_SECRET, date: new Date() }), 'x-slack-retry-num': num, 'x-slack-retry-reason': reason };
    const retry = await deliver(url, headers, body);
    assert.deepEqual(retry.statuses, [200]);
    assert.equal(retry.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(JSON.parse(retry.body), { ok: true, event_id: id });
  }
  assert.deepEqual(seen, [{ type: 'event_callback', id, retry: null }]);
  assert.equal(upstream.requests.length, 1);
});

test('slack: a signed body the key parser cannot read is refused with 400 key_body_unreadable', async (t) => {
  const seen = [];
  const { envoy, upstream } = await startStack(t, { filter: filterFor(slack), handler: slackApp(seen), env: slack.env });
  const body = slackEvent(slack.newId(), 13).slice(0, 40);
  const res = await fetch(`${envoy.url}/webhooks/slack`, { method: 'POST', headers: slackSign({ body, secret: SLACK_SECRET, date: new Date() }), body });
  assert.equal(res.status, 400);
  assert.equal(res.headers.get('content-type'), 'application/problem+json');
  assert.equal((await res.json()).code, 'key_body_unreadable');
  assert.equal(upstream.requests.length, 0);
});
