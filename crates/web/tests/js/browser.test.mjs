// Behaviour of the npm package in headless Chromium against a local test server: what a user's
// clicks turn into on the wire. Every wait is on an event (a request arriving, a state in the
// page), bounded by a timeout; nothing sleeps for a fixed time.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from './helpers/chromium.mjs';
import { startServer, gate } from './helpers/server.mjs';
import { pkgDir } from './helpers/paths.mjs';

const PAGE = `<!doctype html>
<meta charset="utf-8"><link rel="icon" href="data:,"><title>idemgate test page</title>
<form id="cart"><input name="sku" value="A1"><input name="qty" value="1">
  <button id="pay" aria-busy="false">Pay</button></form>
<button id="solo" type="button">Solo</button>
<script type="module">
  const realFetch = window.fetch;
  window.fetchCalls = [];
  window.fetch = (input, init) => {
    window.fetchCalls.push(new URL(input instanceof Request ? input.url : String(input), location.href).pathname);
    return realFetch(input, init);
  };
  window.states = [];
  window.idemgate = await import('/pkg/index.js');
  window.ready = true;
</script>`;

const FAST = { retry: { baseDelayMs: 5, maxDelayMs: 20 } };

let browser;
let server;
let other; // a second origin (another port) that exposes Idempotent-Replayed to CORS
let hidden; // a second origin that allows CORS but does not expose it

before(async () => {
  server = await startServer({ mounts: { '/pkg/': pkgDir }, pages: { '/page.html': PAGE } });
  other = await startServer({ cors: { exposeHeaders: 'Idempotent-Replayed' } });
  hidden = await startServer({ cors: {} });
  browser = await launch();
});

after(async () => {
  await browser?.close();
  await server?.close();
  await other?.close();
  await hidden?.close();
});

async function openPage() {
  const page = await browser.newPage();
  await page.goto(`${server.origin}/page.html`);
  await page.waitForFunction(() => window.ready === true);
  return page;
}

/** Binds a guard in the page; its states are pushed to `window.states`. */
function bind(page, selector, url, options = {}) {
  return page.evaluate(([selector, url, options]) => {
    const { payload, ...rest } = options;
    window.guard = window.idemgate.guardSubmit(document.querySelector(selector), {
      url,
      ...(payload !== undefined && { payload: () => payload }),
      ...rest,
      onStateChange: (state) => window.states.push(state),
      onSuccess: (result) => { window.lastResult = { replayed: result.replayed, attempts: result.attempts, key: result.key, reason: result.reason }; },
      onError: (error) => { window.lastError = error instanceof Error ? { code: error.code } : { status: error.response?.status, reason: error.reason }; },
    });
  }, [selector, url, options]);
}

const lastState = (page, state) => page.waitForFunction((s) => window.states.at(-1) === s, state);
const busyOf = (page, selector) => page.evaluate((sel) => {
  const el = document.querySelector(sel);
  return { disabled: el.disabled, ariaBusy: el.getAttribute('aria-busy') };
}, selector);

describe('submit guard in Chromium', () => {
  it('a double and a triple click send one request; the button is disabled and aria-busy in flight, restored after', async () => {
    const page = await openPage();
    const release = gate();
    server.script('/api/once', [{ status: 201, hold: release.promise }]);
    await bind(page, '#solo', '/api/once', { payload: { sku: 'A1' } });
    assert.deepEqual(await busyOf(page, '#solo'), { disabled: false, ariaBusy: null });

    await page.dblclick('#solo');
    await server.waitForRequests('/api/once', 1);
    assert.deepEqual(await busyOf(page, '#solo'), { disabled: true, ariaBusy: 'true' });
    // Clicks on the disabled button and programmatic re-submits join the submission in flight.
    await page.click('#solo', { clickCount: 3, force: true });
    await page.evaluate(() => { window.guard.submit(); window.guard.submit(); });
    release.open();
    await lastState(page, 'succeeded');

    assert.deepEqual(await busyOf(page, '#solo'), { disabled: false, ariaBusy: null });
    assert.equal(server.requests('/api/once').length, 1);
    assert.deepEqual(await page.evaluate(() => window.fetchCalls.filter((p) => p === '/api/once').length), 1);
    assert.deepEqual(await page.evaluate(() => window.states), ['in_flight', 'succeeded']);
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  it('a form: its submit button is disabled, aria-busy set on form and button, both restored', async () => {
    const page = await openPage();
    const release = gate();
    server.script('/api/form', [{ status: 201, hold: release.promise }]);
    await bind(page, '#cart', '/api/form');
    await page.press('input[name=qty]', 'Enter');
    await page.press('input[name=qty]', 'Enter').catch(() => {});
    const [request] = await server.waitForRequests('/api/form', 1);
    assert.deepEqual(JSON.parse(request.body), { sku: 'A1', qty: '1' });
    assert.equal(request.headers['content-type'], 'application/json');
    assert.deepEqual(await busyOf(page, '#pay'), { disabled: true, ariaBusy: 'true' });
    assert.deepEqual(await busyOf(page, '#cart'), { disabled: undefined, ariaBusy: 'true' });
    release.open();
    await lastState(page, 'succeeded');
    assert.deepEqual(await busyOf(page, '#pay'), { disabled: false, ariaBusy: 'false' });
    assert.deepEqual(await busyOf(page, '#cart'), { disabled: undefined, ariaBusy: null });
    assert.equal(server.requests('/api/form').length, 1);
    await page.close();
  });

  it('the second click of a double click answered in between starts no new submission (button and form)', async () => {
    // Under load the first click's answer can arrive before the double click's second click: the
    // button is enabled again by then, and that click (detail 2) must not be a second payment.
    const page = await openPage();
    server.script('/api/fast', [{ status: 201 }, { status: 201 }]);
    server.script('/api/fast-form', [{ status: 201 }, { status: 201 }]);
    for (const [selector, path] of [['#solo', '/api/fast'], ['#cart', '/api/fast-form']]) {
      await page.evaluate(() => { window.guard?.dispose(); window.states = []; });
      await bind(page, selector, path, selector === '#solo' ? { payload: { sku: 'A1' } } : {});
      const box = await page.locator(selector === '#solo' ? '#solo' : '#pay').boundingBox();
      await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
      await page.mouse.down({ clickCount: 1 });
      await page.mouse.up({ clickCount: 1 });
      await lastState(page, 'succeeded');
      // The rest of the same double click (and of a triple click): click events with detail 2 and 3.
      for (const clickCount of [2, 3]) {
        await page.mouse.down({ clickCount });
        await page.mouse.up({ clickCount });
      }
      // A click that submits enters in_flight synchronously, inside its own dispatch: none did.
      assert.deepEqual(await page.evaluate(() => window.states), ['in_flight', 'succeeded'], selector);
      // A new, separate click (detail 1) is a new payment.
      await page.mouse.down({ clickCount: 1 });
      await page.mouse.up({ clickCount: 1 });
      await server.waitForRequests(path, 2);
      await lastState(page, 'succeeded');
      assert.equal(server.requests(path).length, 2, `${selector}: one request per payment`);
    }
    assert.notEqual(server.requests('/api/fast')[0].headers['idempotency-key'], server.requests('/api/fast')[1].headers['idempotency-key']);
    assert.deepEqual(page.errors, []);
    await page.close();
  });

  it('retries (503, 502, 504) keep the key; success ends the intent', async () => {
    const page = await openPage();
    server.script('/api/retry', [{ status: 503 }, { status: 502 }, { status: 504 }, { status: 201 }]);
    await bind(page, '#solo', '/api/retry', { payload: { sku: 'A1' }, fetchOptions: FAST });
    await page.click('#solo');
    await lastState(page, 'succeeded');
    const keys = server.requests('/api/retry').map((r) => r.key);
    assert.equal(keys.length, 4);
    assert.equal(new Set(keys).size, 1, `one key for every retry: ${keys}`);
    assert.match(keys[0], /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.deepEqual(await page.evaluate(() => window.lastResult), { replayed: false, attempts: 4, key: keys[0], reason: 'success' });
    assert.equal(await page.evaluate(() => window.guard.intent.key), null);
    await page.close();
  });

  it('a network error is retried with the same key', async () => {
    const page = await openPage();
    // Cut every connection until the page reports a network error. (Chromium itself may resend a
    // request once when a reused connection dies, so the server can see more requests than the
    // page makes attempts; they all carry the key, which is what makes that harmless.)
    let cut = true;
    await page.exposeFunction('reportRetry', (outcome) => { if (outcome === 'network_error') cut = false; });
    server.script('/api/net', [() => (cut ? { destroy: true } : { status: 201 })]);
    await page.evaluate(() => {
      window.guard = window.idemgate.guardSubmit(document.querySelector('#solo'), {
        url: '/api/net', payload: () => ({ sku: 'A1' }),
        fetchOptions: { retry: { baseDelayMs: 5 }, onRetry: ({ outcome }) => window.reportRetry(outcome) },
        onStateChange: (state) => window.states.push(state),
        onSuccess: (result) => { window.lastResult = { attempts: result.attempts, key: result.key }; },
      });
    });
    await page.click('#solo');
    await lastState(page, 'succeeded');
    const keys = server.requests('/api/net').map((r) => r.key);
    const { attempts, key } = await page.evaluate(() => window.lastResult);
    assert.ok(attempts >= 2 && keys.length >= attempts, `${attempts} attempts, ${keys.length} requests`);
    assert.deepEqual(new Set(keys), new Set([key]));
    await page.close();
  });

  it('422 is not retried, ends the intent, and the next submit gets a new key', async () => {
    const page = await openPage();
    server.script('/api/reused', [{ status: 422, headers: { 'retry-after': '1' } }]);
    await bind(page, '#solo', '/api/reused', { payload: { sku: 'A1' }, fetchOptions: FAST });
    await page.click('#solo');
    await lastState(page, 'failed_final');
    assert.equal(server.requests('/api/reused').length, 1);
    assert.deepEqual(await page.evaluate(() => window.lastError), { status: 422, reason: 'not_retryable' });
    await page.click('#solo');
    await server.waitForRequests('/api/reused', 2);
    await lastState(page, 'failed_final');
    const [first, second] = server.requests('/api/reused');
    assert.notEqual(first.key, second.key);
    assert.equal(server.requests('/api/reused').length, 2);
    await page.close();
  });

  it('other final statuses (400, 401, 403, 404) are not retried either', async () => {
    const page = await openPage();
    for (const status of [400, 401, 403, 404]) {
      server.script(`/api/final${status}`, [{ status }]);
      const result = await page.evaluate(async (url) => {
        const r = await window.idemgate.idempotentFetch(url, { body: '{}' }, { retry: { baseDelayMs: 1 } });
        return { status: r.response.status, attempts: r.attempts, reason: r.reason };
      }, `/api/final${status}`);
      assert.deepEqual(result, { status, attempts: 1, reason: 'not_retryable' });
      assert.equal(server.requests(`/api/final${status}`).length, 1);
    }
    await page.close();
  });

  it('Retry-After is honoured above the back-off cap (409 and 429)', async () => {
    const page = await openPage();
    server.script('/api/later', [{ status: 409, headers: { 'retry-after': '1' } }, { status: 429, headers: { 'retry-after': '1' } }, { status: 201 }]);
    const result = await page.evaluate(async () => {
      const r = await window.idemgate.idempotentFetch('/api/later', { body: '{"a":1}' }, { retry: { baseDelayMs: 5, maxDelayMs: 10 } });
      return { status: r.response.status, attempts: r.attempts };
    });
    assert.deepEqual(result, { status: 201, attempts: 3 });
    const [a, b, c] = server.requests('/api/later');
    // Back-off alone would wait at most 10 ms; Retry-After says 1 s.
    assert.ok(b.at - a.at >= 995, `second attempt after ${b.at - a.at} ms`);
    assert.ok(c.at - b.at >= 995, `third attempt after ${c.at - b.at} ms`);
    assert.equal(new Set([a.key, b.key, c.key]).size, 1);
    await page.close();
  });

  it('reads the replay flag, and cross-origin only when the server exposes it (CORS)', async () => {
    const page = await openPage();
    server.script('/api/replay', [{ status: 201, headers: { 'idempotent-replayed': 'true' } }]);
    server.script('/api/fresh', [{ status: 201 }]);
    for (const origin of [other, hidden]) origin.script('/api/replay', [{ status: 201, headers: { 'idempotent-replayed': 'true' } }]);
    const flags = await page.evaluate(async ([exposing, hiding]) => {
      const f = (url) => window.idemgate.idempotentFetch(url, { body: '{}', headers: { 'content-type': 'application/json' } }).then((r) => r.replayed);
      return [await f('/api/replay'), await f('/api/fresh'), await f(`${exposing}/api/replay`), await f(`${hiding}/api/replay`)];
    }, [other.origin, hidden.origin]);
    // Same origin: readable. Cross-origin: only with Access-Control-Expose-Headers.
    assert.deepEqual(flags, [true, false, true, false]);
    assert.equal(hidden.requests('/api/replay').length, 1);
    await page.close();
  });

  it('a changed payload gets a new key; the same payload keeps it across user retries', async () => {
    const page = await openPage();
    server.script('/api/cart', [{ status: 503 }]);
    await bind(page, '#cart', '/api/cart', { fetchOptions: { retry: { maxAttempts: 1 } } });
    const submitOnce = async (n) => {
      await page.click('#pay');
      await server.waitForRequests('/api/cart', n);
      await lastState(page, 'failed_retryable');
      await page.evaluate(() => { window.states.length = 0; });
    };
    await submitOnce(1);
    await submitOnce(2);
    await page.fill('input[name=qty]', '2');
    await submitOnce(3);
    await submitOnce(4);
    const keys = server.requests('/api/cart').map((r) => r.key);
    assert.equal(keys[0], keys[1], 'same payload, same intent');
    assert.notEqual(keys[2], keys[1], 'changed payload, new key');
    assert.equal(keys[3], keys[2]);
    assert.deepEqual(server.requests('/api/cart').map((r) => JSON.parse(r.body).qty), ['1', '1', '2', '2']);
    await page.close();
  });
});

describe('an update\'s version in Chromium', () => {
  it('a changed ifMatch is a new intent with a new key; the same version keeps it', async () => {
    const page = await openPage();
    server.script('/api/note', [{ status: 503 }]);
    await page.evaluate(() => { window.version = '"v1"'; });
    // The version is read at each submit, as a page reads the ETag of what it shows.
    await page.evaluate(() => {
      window.guard = window.idemgate.guardSubmit(document.querySelector('#solo'), {
        url: '/api/note',
        method: 'PATCH',
        payload: () => ({ note: 'leave at door' }),
        ifMatch: () => window.version,
        fetchOptions: { retry: { maxAttempts: 1 } },
        onStateChange: (state) => window.states.push(state),
      });
    });
    const submitOnce = async (n) => {
      await page.click('#solo');
      await server.waitForRequests('/api/note', n);
      await lastState(page, 'failed_retryable');
      await page.evaluate(() => { window.states.length = 0; });
    };
    await submitOnce(1);
    await submitOnce(2);
    await page.evaluate(() => { window.version = '"v2"'; });
    await submitOnce(3);
    await submitOnce(4);
    const sent = server.requests('/api/note').map((r) => [r.key, r.headers['if-match']]);
    assert.deepEqual(sent.map(([, v]) => v), ['"v1"', '"v1"', '"v2"', '"v2"']);
    assert.equal(sent[1][0], sent[0][0], 'same payload, same version: same intent');
    assert.notEqual(sent[2][0], sent[1][0], 'same payload at another version: a new key');
    assert.equal(sent[3][0], sent[2][0]);
    await page.close();
  });
});

describe('idempotentFetch in Chromium', () => {
  it('an AbortSignal stops it during a retry wait and during an attempt', async () => {
    const page = await openPage();
    const hold = gate();
    server.script('/api/abort', [{ status: 201, hold: hold.promise }]);
    const pending = page.evaluate(async () => {
      window.controller = new AbortController();
      try {
        await window.idemgate.idempotentFetch('/api/abort', { body: 'x', signal: window.controller.signal });
        return 'resolved';
      } catch (error) {
        return { code: error.code, attempts: error.attempts, isError: error instanceof window.idemgate.IdemgateError };
      }
    });
    await server.waitForRequests('/api/abort', 1);
    await page.evaluate(() => window.controller.abort());
    assert.deepEqual(await pending, { code: 'aborted', attempts: 1, isError: true });
    hold.open();

    server.script('/api/abort-wait', [{ status: 503, headers: { 'retry-after': '30' } }]);
    const waiting = page.evaluate(async () => {
      window.controller = new AbortController();
      return window.idemgate.idempotentFetch('/api/abort-wait', { body: 'x', signal: window.controller.signal }, {
        retry: { maxTotalMs: 60_000 },
        onRetry: () => window.controller.abort(),
      }).then(() => 'resolved', (error) => error.code);
    });
    assert.equal(await waiting, 'aborted');
    assert.equal(server.requests('/api/abort-wait').length, 1);
    await page.close();
  });

  it('a timed-out attempt is retried with the same key', async () => {
    const page = await openPage();
    const never = gate();
    server.script('/api/slow', [{ status: 201, hold: never.promise }, { status: 201 }]);
    const result = await page.evaluate(async () => {
      const r = await window.idemgate.idempotentFetch('/api/slow', { body: 'x' }, { timeoutMs: 300, retry: { baseDelayMs: 5 } });
      return { status: r.response.status, attempts: r.attempts };
    });
    assert.deepEqual(result, { status: 201, attempts: 2 });
    const [a, b] = server.requests('/api/slow');
    assert.equal(a.key, b.key);
    never.open();
    await page.close();
  });

  it('network errors until the attempts run out reject with network_error', async () => {
    const page = await openPage();
    server.script('/api/down', [{ destroy: true }]);
    const error = await page.evaluate(() => window.idemgate.idempotentFetch('/api/down', { body: 'x' }, { retry: { maxAttempts: 3, baseDelayMs: 5 } })
      .then(() => null, (e) => ({ code: e.code, attempts: e.attempts, reason: e.reason })));
    assert.deepEqual(error, { code: 'network_error', attempts: 3, reason: 'retry_exhausted_attempts' });
    assert.equal(new Set(server.requests('/api/down').map((r) => r.key)).size, 1);
    await page.close();
  });

  it('fetches a one-time token from the edge endpoint and attaches it as the header it names', async () => {
    const page = await openPage();
    const expires = Date.now() + 60_000;
    server.script('/.idemgate/token', [{ status: 200, body: { token: 'v1.abc.def', header: 'Idemgate-Token', expires_at_ms: expires } }]);
    server.script('/api/with-token', [{ status: 503 }, { status: 201 }]);
    const result = await page.evaluate(async () => {
      const r = await window.idemgate.idempotentFetch('/api/with-token', { body: '{}' }, { token: true, retry: { baseDelayMs: 5 } });
      return r.response.status;
    });
    assert.equal(result, 201);
    assert.equal(server.requests('/.idemgate/token').length, 1, 'one token for the intent');
    assert.equal(server.requests('/.idemgate/token')[0].method, 'POST');
    // Bound to the request it is for: the edge issues it for this method and path only.
    assert.equal(server.requests('/.idemgate/token')[0].path, '/.idemgate/token?method=POST&path=%2Fapi%2Fwith-token');
    assert.deepEqual(server.requests('/api/with-token').map((r) => r.headers['idemgate-token']), ['v1.abc.def', 'v1.abc.def']);

    server.script('/.idemgate/token', [{ status: 503 }]);
    const codes = await page.evaluate(() => window.idemgate.fetchToken().then(() => null, (e) => [e.code, e.status]));
    assert.deepEqual(codes, ['token_unavailable', 503]);
    server.script('/.idemgate/token', [{ status: 200, body: { token: 'x' } }]);
    const bad = await page.evaluate(() => window.idemgate.fetchToken().then(() => null, (e) => e.code));
    assert.equal(bad, 'token_invalid_response');
    await page.close();
  });
});
