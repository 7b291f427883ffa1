// Updates the way the design says, in headless Chromium: a state table the page
// declares itself, answered by the core in the page's wasm; and an update that names the version
// it read (`If-Match`) against a local origin that answers 412 for a stale one and 428 for none.
// The server's request log proves what went on the wire and that a final answer was not retried.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from './helpers/chromium.mjs';
import { startServer } from './helpers/server.mjs';
import { pkgDir } from './helpers/paths.mjs';

const PAGE = `<!doctype html>
<meta charset="utf-8"><link rel="icon" href="data:,"><title>idemgate updates</title>
<script type="module">
  window.idemgate = await import('/pkg/index.js');
  window.ready = true;
</script>`;

// Retries are fast and plentiful: a 412 or 428 that were retried would show in the server's count.
const FAST = { retry: { maxAttempts: 5, baseDelayMs: 5, maxDelayMs: 20 } };

let browser;
let server;

before(async () => {
  server = await startServer({ mounts: { '/pkg/': pkgDir }, pages: { '/page.html': PAGE } });
  browser = await launch();
});

after(async () => {
  await browser?.close();
  await server?.close();
});

async function openPage() {
  const page = await browser.newPage();
  await page.goto(`${server.origin}/page.html`);
  await page.waitForFunction(() => window.ready === true);
  return page;
}

describe('a state table of the page\'s own, in Chromium', () => {
  it('StateTable.fromJSON: apply, already applied, early, illegal, and a refused table\'s code', async () => {
    const page = await openPage();
    const answers = await page.evaluate(() => {
      const { StateTable, IdemgateError } = window.idemgate;
      // As an application would fetch it: JSON text, the edge's `order.table` format.
      const table = StateTable.fromJSON(JSON.stringify({
        initial: 'unpaid',
        transitions: [['unpaid', 'payment.succeeded', 'paid'], ['paid', 'order.shipped', 'shipped'],
          ['unpaid', 'order.cancelled', 'cancelled'], ['paid', 'order.cancelled', 'cancelled']],
      }));
      const thrown = (fn) => {
        try {
          fn();
          return null;
        } catch (error) {
          return { code: error.code, name: error.name, isIdemgateError: error instanceof IdemgateError };
        }
      };
      return {
        initial: table.initial,
        terminal: [...table.terminal],
        apply: table.on(table.initial, 'payment.succeeded'),
        alreadyApplied: table.on('paid', 'payment.succeeded'),
        early: table.arrival('unpaid', 'order.shipped'),
        illegal: table.arrival('shipped', 'order.cancelled'),
        rejected: thrown(() => table.on('unpaid', 'order.shipped')),
        refused: thrown(() => StateTable.fromJSON({ transitions: [['a', 'go', 'b'], ['a', 'go', 'c']] })),
        misspelt: thrown(() => StateTable.fromJSON('{"terminals": [], "transitions": [["a", "go", "b"]]}')),
      };
    });
    assert.deepEqual(answers, {
      initial: 'unpaid',
      terminal: ['shipped', 'cancelled'],
      apply: { outcome: 'apply', state: 'paid' },
      alreadyApplied: { outcome: 'already_applied', state: 'paid' },
      early: { outcome: 'early', state: 'unpaid' },
      illegal: { outcome: 'illegal', state: 'shipped' },
      rejected: { code: 'transition_illegal', name: 'IdemgateError', isIdemgateError: true },
      refused: { code: 'transition_table_duplicate_transition', name: 'IdemgateError', isIdemgateError: true },
      misspelt: { code: 'transition_table_unknown_field', name: 'IdemgateError', isIdemgateError: true },
    });
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});

describe('If-Match from idempotentFetch, in Chromium', () => {
  it('the ETag read goes out as If-Match; a stale one gets 412 and a missing one 428, each final and sent once', async () => {
    const page = await openPage();
    const order = server.resource('/api/orders/7');
    const results = await page.evaluate(async (options) => {
      const { idempotentFetch } = window.idemgate;
      const read = await fetch('/api/orders/7');
      const etag = read.headers.get('ETag');
      const patch = (init, opts = {}) => idempotentFetch('/api/orders/7', {
        method: 'PATCH', headers: { 'content-type': 'application/json' }, body: '{"note":"door"}', ...init,
      }, { ...options, ...opts }).then(({ response, attempts, reason }) => ({
        status: response.status, etag: response.headers.get('ETag'), attempts, reason,
      }));
      return {
        etag,
        current: await patch({ ifMatch: etag }),
        stale: await patch({ ifMatch: etag }),
        missing: await patch({}),
        staleAsOption: await patch({}, { ifMatch: etag }),
      };
    }, FAST);
    assert.equal(results.etag, '"v1"');
    assert.deepEqual(results.current, { status: 200, etag: '"v2"', attempts: 1, reason: 'success' });
    assert.deepEqual(results.stale, { status: 412, etag: null, attempts: 1, reason: 'not_retryable' });
    assert.deepEqual(results.missing, { status: 428, etag: null, attempts: 1, reason: 'not_retryable' });
    assert.deepEqual(results.staleAsOption, { status: 412, etag: null, attempts: 1, reason: 'not_retryable' });
    // What arrived: one GET and one request per update, each If-Match as sent (none for `missing`).
    const arrived = server.requests('/api/orders/7').map((r) => [r.method, r.headers['if-match'] ?? null]);
    assert.deepEqual(arrived, [['GET', null], ['PATCH', '"v1"'], ['PATCH', '"v1"'], ['PATCH', null], ['PATCH', '"v1"']]);
    assert.equal(order.version, 2, 'only the update that named the current version applied');
    const keys = server.requests('/api/orders/7').slice(1).map((r) => r.key);
    assert.equal(new Set(keys).size, 4, 'each update is its own intent');
    // Chromium logs every 4xx as a console error; nothing else went wrong in the page.
    const unexpected = page.errors.filter((e) => !/status of (412|428) /.test(e.message));
    assert.deepEqual(unexpected, []);
    await page.close();
  });

  it('a retried update carries the same If-Match on every attempt', async () => {
    const page = await openPage();
    server.resource('/api/notes/1', { version: 3 });
    const etag = await page.evaluate(async () => (await fetch('/api/notes/1')).headers.get('ETag'));
    assert.equal(etag, '"v3"');
    // The origin is unavailable once (503: it did not act), then compares If-Match.
    server.script('/api/notes/1', [{ status: 503 }, (request) => ({
      status: request.headers['if-match'] === etag ? 200 : 412,
    })]);
    const result = await page.evaluate(async ([etag, options]) => {
      const { response, attempts } = await window.idemgate.idempotentFetch('/api/notes/1',
        { method: 'PATCH', body: '{}', ifMatch: etag }, options);
      return { status: response.status, attempts };
    }, [etag, FAST]);
    assert.deepEqual(result, { status: 200, attempts: 2 });
    const attempts = server.requests('/api/notes/1');
    assert.deepEqual(attempts.map((r) => r.headers['if-match']), ['"v3"', '"v3"']);
    assert.equal(attempts[0].key, attempts[1].key);
    await page.close();
  });
});
