// A plain `fetch` client that aborts after 1 s and retries with the same Idempotency-Key, honouring
// Retry-After: the upstream answers after 2.5 s; it runs once and the retry gets the
// object it created.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { startEnvoy, startUpstream } from './detached_envoy.mjs';

let upstream;
let envoy;

before(async () => {
  upstream = await startUpstream({
    delayMs: 2500,
    answer: (req, body, n) => ({ status: 201, body: { id: `order_${n}`, ...JSON.parse(body) } }),
  });
  envoy = await startEnvoy({
    upstreamPort: upstream.port,
    filter: {
      routes: [{ prefix: '/orders', key: 'required' }],
      lease: '10s',
      upstream: { reentry: 'idemgate_reentry', timeout: '5s' },
    },
  });
});

after(async () => {
  await envoy?.stop();
  await upstream?.close();
});

test('fetch: abort at 1 s, retry with the same key → one execution, the created object', async () => {
  const key = randomUUID();
  const send = (signal) => fetch(`http://127.0.0.1:${envoy.port}/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify({ sku: 'beans', qty: 2 }),
    signal,
  });
  await assert.rejects(send(AbortSignal.timeout(1000)), /abort|timeout/i);
  const statuses = [];
  let res;
  for (let attempt = 0; attempt < 20; attempt++) {
    res = await send(AbortSignal.timeout(5000));
    statuses.push(res.status);
    if (res.status !== 409) break;
    assert.equal((await res.json()).code, 'request_in_flight');
    const wait = Number(res.headers.get('retry-after') ?? '1');
    await new Promise((r) => setTimeout(r, Math.min(wait, 1) * 1000));
  }
  assert.equal(statuses[0], 409, `the first retry finds the key in flight: ${statuses}`);
  assert.equal(res.status, 201, `then the replay: ${statuses}`);
  assert.equal(res.headers.get('idempotent-replayed'), 'true');
  assert.deepEqual(await res.json(), { id: 'order_1', sku: 'beans', qty: 2 });
  assert.equal(upstream.executions(key), 1, 'exactly one upstream execution');
  assert.equal(await envoy.counter('detached_client_gone'), 1);
  // The one execution came back into Envoy through the re-entry listener (its routes and filters).
  assert.equal(await envoy.stat('http.idemgate_reentry.downstream_rq_total'), 1);
});
