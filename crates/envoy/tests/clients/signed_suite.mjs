// The checks every signed webhook preset gets, with the sender's own library doing the signing
// and the receiver's own library verifying upstream (see each *.test.mjs for the scheme). One
// scheme is described by:
//   name        test titles
//   preset      the route preset (`routes[].preset`)
//   secret      the signing secret of the main route; `wrong` a secret nobody configured
//   rotation    [first, second]: the two secrets of the rotating route; `rotationConfig` how the
//               route names them (`{secrets_env: [...]}` or `{secrets: [...]}`), `env` their env vars
//   signature   the route's `signature` object for the main route (e.g. `{secret_env: 'X'}`)
//   newId()     a fresh delivery id; body(id, n) a delivery's body
//   sign({id, body, secret, date}) the headers of one delivery (signed anew on every attempt)
//   signatureHeaders  the header names an unsigned delivery lacks
//   stale       whether the scheme carries a timestamp (then a delivery signed 10 min ago is stale,
//               unless it redelivers a message already acknowledged: then it gets that acknowledgement)
//   tamper(body) the body changed on the way
//   verify(req, secrets) upstream: the receiver library's verification; the delivery's id, or throws
//
// Per the project rule "a test for a guarded path also runs the same request unguarded", every
// scheme also delivers to /unguarded/<name>, a prefix no route matches.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { deliver, startStack } from './stack.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function routes(s) {
  const out = [
    { prefix: `/webhooks/${s.name}`, preset: s.preset, signature: s.signature },
    { prefix: `/rotating/${s.name}`, preset: s.preset, signature: s.rotationConfig },
  ];
  // A short window, so that the very bytes of a delivery become late within a test.
  if (s.stale) out.push({ prefix: `/brief/${s.name}`, preset: s.preset, signature: { ...s.signature, tolerance: '2s' } });
  return out;
}

export function filterFor(s, extraRoutes = [], extra = {}) {
  return JSON.stringify({ routes: [...routes(s), ...extraRoutes], ...extra });
}

/** The upstream: verifies with the receiver's library, fails once for ids in `failFirst`. */
export function receiver(s, processed, { failFirst = new Set(), delayMs = 300 } = {}) {
  return async (req, res) => {
    const secrets = req.url.startsWith('/rotating/') ? s.rotation : [s.secret];
    let id;
    try {
      id = await s.verify(req, secrets);
    } catch (e) {
      res.writeHead(401, { 'content-type': 'text/plain' });
      res.end(`receiver refused: ${e}`);
      return;
    }
    if (failFirst.delete(id)) {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end('{"error":"database unavailable"}');
      return;
    }
    processed.push(id);
    await sleep(delayMs);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ received: true, id }));
  };
}

async function stack(t, s, opts, extra = {}) {
  const processed = [];
  const { envoy, upstream } = await startStack(t, {
    filter: filterFor(s, [], extra),
    handler: receiver(s, processed, opts),
    env: s.env,
  });
  return { envoy, upstream, processed };
}

async function refused(url, headers, body, code) {
  const res = await fetch(url, { method: 'POST', headers, body });
  const text = await res.text();
  assert.equal(res.status, 403, `${code}: ${text}`);
  assert.equal(res.headers.get('content-type'), 'application/problem+json');
  assert.equal(JSON.parse(text).code, code, text);
}

export function signedSchemeTests(s) {
  test(`${s.name}: 8 concurrent duplicates and a late one run the handler once, every delivery acknowledged`, async (t) => {
    const { envoy, upstream, processed } = await stack(t, s);
    const url = `${envoy.url}/webhooks/${s.name}`;
    const id = s.newId();
    const body = s.body(id, 1);
    const sent = [];
    const one = async () => {
      const headers = await s.sign({ id, body, secret: s.secret, date: new Date() });
      sent.push(headers);
      return deliver(url, headers, body);
    };
    const concurrent = await Promise.all(Array.from({ length: 8 }, one));
    const late = await one();
    for (const d of [...concurrent, late]) {
      assert.equal(d.statuses.at(-1), 200, `every delivery ends acknowledged: ${d.statuses}`);
      assert.deepEqual(JSON.parse(d.body), { received: true, id });
    }
    assert.deepEqual(processed, [id], 'the handler ran once');
    assert.equal(upstream.requests.length, 1);
    assert.ok(concurrent.some((d) => d.statuses[0] === 409), 'a concurrent duplicate met the in-flight claim');
    assert.equal(late.headers.get('idempotent-replayed'), 'true');
    assert.equal(await envoy.counter('claimed'), 1);
    // The delivery that ran reached the upstream as sent: same body, same signature headers.
    const [got] = upstream.requests;
    assert.equal(got.method, 'POST');
    assert.equal(got.body, body);
    assert.ok(
      sent.some((h) => s.signatureHeaders.every((name) => got.headers[name] === h[name])),
      'the signature headers reached the upstream unchanged',
    );

    // Another id is another delivery.
    const other = s.newId();
    const otherBody = s.body(other, 2);
    const d = await deliver(url, await s.sign({ id: other, body: otherBody, secret: s.secret, date: new Date() }), otherBody);
    assert.deepEqual(d.statuses, [200]);
    assert.deepEqual(processed, [id, other]);
  });

  test(`${s.name}: forged, ${s.stale ? 'stale, ' : ''}tampered and unsigned deliveries are refused with 403 and never reach the upstream`, async (t) => {
    const { envoy, upstream, processed } = await stack(t, s, { delayMs: 0 });
    const url = `${envoy.url}/webhooks/${s.name}`;
    const id = s.newId();
    const body = s.body(id, 3);
    const now = new Date();
    const attempts = [
      ['forged (wrong secret)', await s.sign({ id, body, secret: s.wrong, date: now }), body, 'signature_mismatch'],
      ['tampered (body changed)', await s.sign({ id, body, secret: s.secret, date: now }), s.tamper(body), 'signature_mismatch'],
    ];
    if (s.stale) {
      const old = new Date(Date.now() - 10 * 60 * 1000);
      attempts.push(['stale (signed 10 min ago)', await s.sign({ id, body, secret: s.secret, date: old }), body, 'signature_stale']);
    }
    const unsigned = { ...(await s.sign({ id, body, secret: s.secret, date: now })) };
    for (const name of s.signatureHeaders) delete unsigned[name];
    attempts.push(['unsigned', unsigned, body, 'signature_missing']);
    for (const [, headers, b, code] of attempts) await refused(url, headers, b, code);
    assert.equal(upstream.requests.length, 0, 'no refused delivery reached the upstream');
    assert.equal(await envoy.counter('signature_rejected'), attempts.length);
    // The refused ones used the real id; the real delivery still runs.
    const real = await deliver(url, await s.sign({ id, body, secret: s.secret, date: new Date() }), body);
    assert.deepEqual(real.statuses, [200]);
    assert.equal(real.headers.get('idempotent-replayed'), null);
    assert.deepEqual(processed, [id]);
  });

  // On the router path, and detached (the claimed delivery re-enters Envoy on its own exchange).
  const paths = [['router', {}], ['detached', { upstream: { reentry: 'idemgate_reentry', timeout: '5s' }, lease: '10s' }]];
  for (const [path, extra] of s.stale ? paths : []) {
    test(`${s.name} (${path}): a late redelivery (signature valid, timestamp past the tolerance) of an acknowledged message is acknowledged again without running; a new message that old is refused`, async (t) => {
      const { envoy, upstream, processed } = await stack(t, s, { delayMs: 0 }, extra);
      const url = `${envoy.url}/webhooks/${s.name}`;
      const id = s.newId();
      const body = s.body(id, 13);
      const first = await deliver(url, await s.sign({ id, body, secret: s.secret, date: new Date() }), body);
      assert.deepEqual(first.statuses, [200], first.body);
      // The answer is stored as the client gets it: a timely duplicate waits (409) until it is.
      const stored = await deliver(url, await s.sign({ id, body, secret: s.secret, date: new Date() }), body);
      assert.equal(stored.headers.get('idempotent-replayed'), 'true');
      // The provider (or a relay) delivers the message again with a signature made 10 minutes ago.
      const tenMinutesAgo = new Date(Date.now() - 10 * 60 * 1000);
      const late = await s.sign({ id, body, secret: s.secret, date: tenMinutesAgo });
      const again = await fetch(url, { method: 'POST', headers: late, body });
      assert.equal(again.status, 200, 'the stored acknowledgement, not 403');
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(await again.json(), { received: true, id });
      // A late delivery never claims, so a late forgery of the same message is still refused.
      await refused(url, await s.sign({ id, body, secret: s.wrong, date: tenMinutesAgo }), body, 'signature_mismatch');
      // A message the edge never acknowledged, signed that long ago: refused, never forwarded.
      const other = s.newId();
      const otherBody = s.body(other, 14);
      await refused(url, await s.sign({ id: other, body: otherBody, secret: s.secret, date: tenMinutesAgo }), otherBody, 'signature_stale');
      assert.deepEqual(processed, [id], 'the handler ran once');
      assert.equal(upstream.requests.length, 1);
      assert.equal(await envoy.counter('claimed'), 1);
      // ...and it took nothing: delivered in time, that message runs.
      const inTime = await deliver(url, await s.sign({ id: other, body: otherBody, secret: s.secret, date: new Date() }), otherBody);
      assert.deepEqual(inTime.statuses, [200], inTime.body);
      assert.deepEqual(processed, [id, other]);

      // The very bytes of a delivery, sent again once they are past a route's (2 s) window.
      const brief = `${envoy.url}/brief/${s.name}`;
      const third = s.newId();
      const thirdBody = s.body(third, 15);
      const headers = await s.sign({ id: third, body: thirdBody, secret: s.secret, date: new Date() });
      assert.deepEqual((await deliver(brief, headers, thirdBody)).statuses, [200]);
      await sleep(3200);
      const same = await fetch(brief, { method: 'POST', headers, body: thirdBody });
      assert.equal(same.status, 200);
      assert.equal(same.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(await same.json(), { received: true, id: third });
      assert.deepEqual(processed, [id, other, third]);

      // Unguarded, the same late redelivery reaches the receiver, whose own library refuses it as
      // too old: the sender is told the endpoint failed for a message it had applied.
      const bare = await fetch(`${envoy.url}/unguarded/${s.name}`, { method: 'POST', headers: late, body });
      assert.equal(bare.status, 401, await bare.text());
      assert.deepEqual(processed, [id, other, third]);
      if (path === 'detached') assert.equal(await envoy.counter('stored'), 3, 'the three ran detached');
    });
  }

  test(`${s.name}: a delivery the handler fails (500) is released, so the sender's retry runs it`, async (t) => {
    const id = s.newId();
    const { envoy, upstream, processed } = await stack(t, s, { failFirst: new Set([id]), delayMs: 0 });
    const url = `${envoy.url}/webhooks/${s.name}`;
    const body = s.body(id, 4);
    const first = await deliver(url, await s.sign({ id, body, secret: s.secret, date: new Date() }), body);
    assert.deepEqual(first.statuses, [500]);
    const retry = await deliver(url, await s.sign({ id, body, secret: s.secret, date: new Date() }), body);
    assert.deepEqual(retry.statuses, [200]);
    assert.equal(retry.headers.get('idempotent-replayed'), null, 'the retry ran, it was not a replay of the 500');
    const again = await deliver(url, await s.sign({ id, body, secret: s.secret, date: new Date() }), body);
    assert.deepEqual(again.statuses, [200]);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(processed, [id]);
    assert.equal(upstream.requests.length, 2);
    assert.equal(await envoy.counter('released'), 1);
  });

  test(`${s.name}: rotation: with two secrets configured, a delivery signed with the second (or the first) verifies`, async (t) => {
    const { envoy, upstream, processed } = await stack(t, s, { delayMs: 0 });
    const url = `${envoy.url}/rotating/${s.name}`;
    const [first, second] = s.rotation;
    const a = s.newId();
    const bodyA = s.body(a, 5);
    const byNew = await deliver(url, await s.sign({ id: a, body: bodyA, secret: second, date: new Date() }), bodyA);
    assert.deepEqual(byNew.statuses, [200], byNew.body);
    const b = s.newId();
    const bodyB = s.body(b, 6);
    const byOld = await deliver(url, await s.sign({ id: b, body: bodyB, secret: first, date: new Date() }), bodyB);
    assert.deepEqual(byOld.statuses, [200], byOld.body);
    // The main route's secret is not one of the rotating route's.
    const c = s.newId();
    const bodyC = s.body(c, 7);
    await refused(url, await s.sign({ id: c, body: bodyC, secret: s.secret, date: new Date() }), bodyC, 'signature_mismatch');
    assert.deepEqual(processed, [a, b]);
    assert.equal(upstream.requests.length, 2);
    // A redelivery signed with the other secret is still the same delivery.
    const redelivery = await deliver(url, await s.sign({ id: a, body: bodyA, secret: first, date: new Date() }), bodyA);
    assert.deepEqual(redelivery.statuses, [200]);
    assert.equal(redelivery.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(processed, [a, b]);
  });

  test(`${s.name}: unguarded: the same delivery to a prefix no route matches reaches the upstream unchanged, every time`, async (t) => {
    const { envoy, upstream, processed } = await stack(t, s, { delayMs: 0 });
    const url = `${envoy.url}/unguarded/${s.name}`;
    const id = s.newId();
    const body = s.body(id, 8);
    const headers = await s.sign({ id, body, secret: s.secret, date: new Date() });
    for (let i = 0; i < 2; i += 1) {
      const res = await fetch(url, { method: 'POST', headers, body });
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { received: true, id });
      assert.equal(res.headers.get('idempotent-replayed'), null);
    }
    assert.deepEqual(processed, [id, id], 'no route, no deduplication: the handler ran twice');
    for (const got of upstream.requests) {
      assert.equal(got.url, `/unguarded/${s.name}`);
      assert.equal(got.body, body);
      for (const [name, value] of Object.entries(headers)) assert.equal(got.headers[name.toLowerCase()], value, name);
    }
    assert.equal(await envoy.counter('claimed'), 0);
  });
}
