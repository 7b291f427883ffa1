// GitHub-style deliveries through the filter in a real Envoy: keyed by `X-GitHub-Delivery`,
// signed with @octokit/webhooks (`X-Hub-Signature-256`), and handled upstream by an
// @octokit/webhooks handler (`verifyAndReceive`). A delivery redelivered, and delivered
// concurrently, runs the handler once and every delivery is acknowledged 2xx; a forged
// signature is refused at the edge and never reaches the upstream.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { Webhooks } from '@octokit/webhooks';
import { deliver, startStack } from './stack.mjs';

const SECRET = 'gh_webhook_secret_for_clients_test';
const github = new Webhooks({ secret: SECRET });

const FILTER = JSON.stringify({
  routes: [{
    prefix: '/webhooks/github',
    kind: 'callback',
    key_from: [{ header: 'x-github-delivery' }],
    signature: { scheme: 'github', secret: SECRET },
  }],
});

function issueOpened(number) {
  return JSON.stringify({
    action: 'opened',
    issue: { number, title: `Issue ${number}`, user: { login: 'octocat' } },
    repository: { id: 1296269, full_name: 'octocat/Hello-World' },
    sender: { login: 'octocat' },
  });
}

/** The upstream: an @octokit/webhooks receiver, verifying the signature itself too. */
async function receiver(handled) {
  const app = new Webhooks({ secret: SECRET });
  app.on('issues.opened', async ({ id, payload }) => {
    handled.push({ id, number: payload.issue.number });
    await new Promise((r) => setTimeout(r, 300));
  });
  return async (req, res) => {
    try {
      await app.verifyAndReceive({
        id: req.headers['x-github-delivery'],
        name: req.headers['x-github-event'],
        payload: req.body,
        signature: req.headers['x-hub-signature-256'],
      });
      res.writeHead(202, { 'content-type': 'text/plain' });
      res.end('accepted');
    } catch (e) {
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end(String(e));
    }
  };
}

async function headers(id, payload, secretSigner = github) {
  return {
    'content-type': 'application/json',
    'user-agent': 'GitHub-Hookshot/idemgate-test',
    'x-github-event': 'issues',
    'x-github-delivery': id,
    'x-hub-signature-256': await secretSigner.sign(payload),
  };
}

test('a GitHub delivery redelivered and delivered concurrently is handled once, every delivery acknowledged', async (t) => {
  const handled = [];
  const { envoy, upstream } = await startStack(t, { filter: FILTER, handler: await receiver(handled) });
  const url = `${envoy.url}/webhooks/github`;
  const id = randomUUID();
  const payload = issueOpened(42);
  const h = await headers(id, payload);
  const concurrent = await Promise.all([1, 2, 3].map(() => deliver(url, h, payload)));
  const redelivery = await deliver(url, h, payload);
  for (const d of [...concurrent, redelivery]) {
    assert.equal(d.statuses.at(-1), 202, `every delivery ends acknowledged: ${d.statuses}`);
    assert.equal(d.body, 'accepted');
  }
  assert.equal(redelivery.headers.get('idempotent-replayed'), 'true');
  assert.deepEqual(handled, [{ id, number: 42 }]);
  assert.equal(upstream.requests.length, 1);

  // The same payload under another delivery id is another delivery (GitHub's id is the key).
  const second = randomUUID();
  assert.equal((await deliver(url, await headers(second, payload), payload)).statuses.at(-1), 202);
  assert.deepEqual(handled.map((x) => x.id), [id, second]);
  assert.equal(await envoy.counter('claimed'), 2);
});

test('a forged GitHub delivery is refused at the edge and never reaches the upstream', async (t) => {
  const handled = [];
  const { envoy, upstream } = await startStack(t, { filter: FILTER, handler: await receiver(handled) });
  const url = `${envoy.url}/webhooks/github`;
  const id = randomUUID();
  const payload = issueOpened(7);
  const attacker = new Webhooks({ secret: 'not-the-shared-secret' });
  const forged = await fetch(url, { method: 'POST', headers: await headers(id, payload, attacker), body: payload });
  assert.equal(forged.status, 403);
  assert.equal(forged.headers.get('content-type'), 'application/problem+json');
  assert.equal((await forged.json()).code, 'signature_mismatch');
  // Signed, but the body was changed on the way.
  const tampered = await fetch(url, { method: 'POST', headers: await headers(id, payload), body: issueOpened(8) });
  assert.equal(tampered.status, 403);
  const unsigned = { ...(await headers(id, payload)) };
  delete unsigned['x-hub-signature-256'];
  const missing = await fetch(url, { method: 'POST', headers: unsigned, body: payload });
  assert.equal(missing.status, 403);
  assert.equal((await missing.json()).code, 'signature_missing');
  assert.equal(upstream.requests.length, 0, 'nothing refused reached the upstream');
  // The forged deliveries used the real delivery id; the real delivery still runs.
  const real = await deliver(url, await headers(id, payload), payload);
  assert.deepEqual(real.statuses, [202]);
  assert.deepEqual(handled, [{ id, number: 7 }]);
  // A signed delivery without a delivery id is refused too: the id is the key of a callback route.
  const noId = { ...(await headers(id, payload)) };
  delete noId['x-github-delivery'];
  const res = await fetch(url, { method: 'POST', headers: noId, body: payload });
  assert.equal(res.status, 400);
  assert.equal((await res.json()).code, 'key_missing');
  assert.equal(upstream.requests.length, 1);
});
