// Standard Webhooks (preset `standard-webhooks`) through the filter in a real Envoy: deliveries
// signed with the `standardwebhooks` library's own `Webhook#sign` and verified upstream with its
// `Webhook#verify`. The common checks are in signed_suite.mjs; here also the asymmetric `v1a`
// (Ed25519, signed with node:crypto: the library signs only `v1`) against a configured `whpk_` key,
// and a signature header listing several signatures, any one of which may match.

import assert from 'node:assert/strict';
import { generateKeyPairSync, randomUUID, sign as edSign, verify as edVerify } from 'node:crypto';
import { test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { filterFor, receiver, signedSchemeTests } from './signed_suite.mjs';
import { deliver, startStack } from './stack.mjs';

const secret = (text) => `whsec_${Buffer.from(text).toString('base64')}`;

const s = {
  name: 'standard',
  preset: 'standard-webhooks',
  secret: secret('idemgate standard webhooks main'),
  wrong: secret('an attacker guessing the secret'),
  rotation: [secret('idemgate standard rotation old'), secret('idemgate standard rotation new')],
  signature: { secret_env: 'STANDARD_WEBHOOK_SECRET' },
  rotationConfig: { secrets_env: ['STANDARD_WEBHOOK_SECRET_OLD', 'STANDARD_WEBHOOK_SECRET_NEW'] },
  newId: () => `msg_${randomUUID().replaceAll('-', '')}`,
  body: (id, n) => JSON.stringify({ type: 'invoice.paid', timestamp: new Date().toISOString(), data: { invoice: `inv_${n}`, amount: 100 * n, ref: id } }),
  sign: ({ id, body, secret: key, date }) => ({
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(date.getTime() / 1000)),
    'webhook-signature': new Webhook(key).sign(id, date, body),
  }),
  signatureHeaders: ['webhook-signature'],
  stale: true,
  tamper: (body) => body.replace('"amount":', '"amount":9'),
  verify: (req, secrets) => {
    const errors = [];
    for (const key of secrets) {
      try {
        new Webhook(key).verify(req.body, req.headers);
        return req.headers['webhook-id'];
      } catch (e) { errors.push(String(e)); }
    }
    throw new Error(errors.join('; '));
  },
};
s.env = {
  STANDARD_WEBHOOK_SECRET: s.secret,
  STANDARD_WEBHOOK_SECRET_OLD: s.rotation[0],
  STANDARD_WEBHOOK_SECRET_NEW: s.rotation[1],
};

signedSchemeTests(s);

test('standard: a signature list where only one signature matches verifies (and a list of none refuses)', async (t) => {
  const processed = [];
  const { envoy, upstream } = await startStack(t, { filter: filterFor(s), handler: receiver(s, processed, { delayMs: 0 }), env: s.env });
  const url = `${envoy.url}/webhooks/standard`;
  const id = s.newId();
  const body = s.body(id, 9);
  const date = new Date();
  const good = s.sign({ id, body, secret: s.secret, date });
  const forged = s.sign({ id, body, secret: s.wrong, date });
  const listed = { ...good, 'webhook-signature': `${forged['webhook-signature']} ${good['webhook-signature']}` };
  const none = { ...good, 'webhook-signature': `${forged['webhook-signature']} ${s.sign({ id, body, secret: s.rotation[0], date })['webhook-signature']}` };
  const res = await fetch(url, { method: 'POST', headers: none, body });
  assert.equal(res.status, 403);
  assert.equal((await res.json()).code, 'signature_mismatch');
  const d = await deliver(url, listed, body);
  assert.deepEqual(d.statuses, [200], d.body);
  assert.deepEqual(processed, [id]);
  assert.equal(upstream.requests.length, 1);
});

// v1a: Ed25519 over "{id}.{ts}.{body}", signed with node:crypto as the Standard Webhooks spec
// describes; the route is configured with the public key as `whpk_<base64 of the 32 raw bytes>`.
function ed25519() {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x, 'base64url');
  assert.equal(raw.length, 32);
  return { publicKey, privateKey, whpk: `whpk_${raw.toString('base64')}` };
}

function signV1a(privateKey, { id, body, date }) {
  const ts = String(Math.floor(date.getTime() / 1000));
  const sig = edSign(null, Buffer.from(`${id}.${ts}.${body}`), privateKey).toString('base64');
  return { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': ts, 'webhook-signature': `v1a,${sig}` };
}

test('standard: v1a (Ed25519) deliveries verify against the configured whpk_ key, are deduplicated, and forged or tampered ones are refused', async (t) => {
  const sender = ed25519();
  const attacker = ed25519();
  const processed = [];
  const filter = JSON.stringify({
    routes: [{ prefix: '/webhooks/standard-ed25519', preset: 'standard-webhooks', signature: { secret: sender.whpk } }],
  });
  const { envoy, upstream } = await startStack(t, {
    filter,
    handler: async (req, res) => {
      // The receiver checks v1a itself (node:crypto), as the library has no Ed25519 verify.
      const { 'webhook-id': id, 'webhook-timestamp': ts, 'webhook-signature': header } = req.headers;
      const signed = Buffer.from(`${id}.${ts}.${req.body}`);
      const sigs = header.split(' ').filter((x) => x.startsWith('v1a,')).map((x) => Buffer.from(x.slice(4), 'base64'));
      if (!sigs.some((sig) => edVerify(null, signed, sender.publicKey, sig))) {
        res.writeHead(401);
        res.end('bad v1a');
        return;
      }
      processed.push(id);
      await new Promise((r) => setTimeout(r, 300));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ received: true, id }));
    },
  });
  const url = `${envoy.url}/webhooks/standard-ed25519`;
  const id = s.newId();
  const body = s.body(id, 10);
  const concurrent = await Promise.all(Array.from({ length: 8 }, () => deliver(url, signV1a(sender.privateKey, { id, body, date: new Date() }), body)));
  const late = await deliver(url, signV1a(sender.privateKey, { id, body, date: new Date() }), body);
  for (const d of [...concurrent, late]) assert.equal(d.statuses.at(-1), 200, `${d.statuses} ${d.body}`);
  assert.equal(late.headers.get('idempotent-replayed'), 'true');
  assert.deepEqual(processed, [id]);

  const other = s.newId();
  const otherBody = s.body(other, 11);
  const refusals = [
    [signV1a(attacker.privateKey, { id: other, body: otherBody, date: new Date() }), otherBody, 'signature_mismatch'],
    [signV1a(sender.privateKey, { id: other, body: otherBody, date: new Date() }), s.tamper(otherBody), 'signature_mismatch'],
    [signV1a(sender.privateKey, { id: other, body: otherBody, date: new Date(Date.now() - 600_000) }), otherBody, 'signature_stale'],
  ];
  for (const [headers, b, code] of refusals) {
    const res = await fetch(url, { method: 'POST', headers, body: b });
    assert.equal(res.status, 403);
    assert.equal(res.headers.get('content-type'), 'application/problem+json');
    assert.equal((await res.json()).code, code);
  }
  assert.equal(upstream.requests.length, 1, 'no refused delivery reached the upstream');
  assert.equal(await envoy.counter('signature_rejected'), refusals.length);
  // A list with a forged v1a first and the sender's after it verifies.
  const good = signV1a(sender.privateKey, { id: other, body: otherBody, date: new Date() });
  const bad = signV1a(attacker.privateKey, { id: other, body: otherBody, date: new Date() });
  const listed = { ...good, 'webhook-signature': `${bad['webhook-signature']} ${good['webhook-signature']}` };
  assert.deepEqual((await deliver(url, listed, otherBody)).statuses, [200]);
  assert.deepEqual(processed, [id, other]);
});

test('standard: `tolerance` widens the timestamp window: 10 min old verifies under "1h", 2 h old is stale', async (t) => {
  const processed = [];
  const filter = JSON.stringify({
    routes: [{ prefix: '/tolerant/standard', preset: 'standard-webhooks', signature: { secret: s.secret, tolerance: '1h' } }],
  });
  const { envoy } = await startStack(t, { filter, handler: receiver({ ...s, secret: s.secret }, processed, { delayMs: 0 }) });
  const url = `${envoy.url}/tolerant/standard`;
  const id = s.newId();
  const body = s.body(id, 12);
  const old = await fetch(url, { method: 'POST', headers: s.sign({ id, body, secret: s.secret, date: new Date(Date.now() - 2 * 3600_000) }), body });
  assert.equal(old.status, 403);
  assert.equal((await old.json()).code, 'signature_stale');
  // The receiver's own library keeps its 5-minute window: it is only the edge's that is wider.
  const tenMinutes = await fetch(url, { method: 'POST', headers: s.sign({ id, body, secret: s.secret, date: new Date(Date.now() - 600_000) }), body });
  assert.equal(tenMinutes.status, 401, 'the edge let it through; the receiver library refused it as too old');
  assert.match(await tenMinutes.text(), /too old/i);
  assert.deepEqual(processed, []);
});
