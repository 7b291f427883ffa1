// End-to-end: real Chromium (Debian's, driven by playwright-core) → the checkout page → the
// `idemgate` npm package → a real Envoy with the filter → the order service. Starts `make demo`'s
// stack (demo.py) on free ports and stops it afterwards, even when a test fails.
//
//   node --test examples/checkout/e2e.test.mjs      (after `make build-filter build-web`)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, '../../crates/web/package.json'));
const { chromium } = require('playwright-core');

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--no-first-run', '--disable-sync', '--disable-quic'];

let demo;
let stack;
let browser;
const work = mkdtempSync(join(tmpdir(), 'idemgate-e2e-'));

before(async () => {
  const ready = join(work, 'ready.json');
  demo = spawn('python3', [join(here, 'demo.py'), '--port', '0', '--admin-port', '0', '--quiet',
    '--ready-file', ready], { stdio: ['ignore', 'inherit', 'inherit'] });
  const exited = new Promise((resolve) => demo.once('exit', resolve));
  const deadline = Date.now() + 60_000;
  while (!existsSync(ready)) {
    const code = await Promise.race([exited, new Promise((r) => setTimeout(r, 100, 'waiting'))]);
    assert.equal(code, 'waiting', `demo.py exited (${code}) before it was ready`);
    assert.ok(Date.now() < deadline, 'demo.py not ready after 60 s');
  }
  stack = JSON.parse(readFileSync(ready, 'utf8'));
  // playwright gives the browser a fresh, temporary profile of its own.
  browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
});

after(async () => {
  await browser?.close();
  if (demo && demo.exitCode === null) {
    const gone = new Promise((resolve) => demo.once('exit', resolve));
    demo.kill('SIGTERM');
    await gone;
  }
  rmSync(work, { recursive: true, force: true });
});

async function orders() {
  const res = await fetch(`${stack.url}/api/orders`);
  assert.equal(res.status, 200);
  return res.json();
}

async function openPage(query = '') {
  const page = await browser.newPage();
  await page.goto(`${stack.url}/${query}`);
  await page.waitForFunction(() => document.getElementById('count').textContent !== '');
  return page;
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
  assert.equal((await outcome(page)).state, 'succeeded');
  const afterDouble = await orders();
  assert.equal(afterDouble.count, before.count + 1, 'one order for a double click');
  assert.equal(afterDouble.received, before.received + 1, 'only one request reached the order service');

  await page.evaluate(() => { document.getElementById('status').dataset.state = 'idle'; });
  await page.click('#pay', { clickCount: 3 });
  const done = await outcome(page);
  assert.equal(done.state, 'succeeded');
  assert.equal(done.disabled, false, 'the button is enabled again');
  const afterTriple = await orders();
  assert.equal(afterTriple.count, afterDouble.count + 1, 'one order for a triple click');
  assert.equal(afterTriple.received, afterDouble.received + 1);
  // A test run never rewrites tracked files: the picture goes to target/ unless asked for.
  const shot = process.env.IDEMGATE_UPDATE_SCREENSHOT === '1'
    ? join(here, 'screenshot.png')
    : join(here, '..', '..', 'target', 'checkout-screenshot.png');
  mkdirSync(dirname(shot), { recursive: true });
  await page.screenshot({ path: shot });
  await page.close();
});

test('a lost response: the page retries with the same key and still one order', async () => {
  // The order service answers 2.5 s after committing; the page gives up after 1 s. The edge's
  // detached exchange still receives and stores that answer: the page's retries get 409 while it
  // runs, then the replay of the created order. One order, one request received, success.
  const page = await openPage('?delay=2500&timeout=1000');
  const before = await orders();
  await page.click('#pay');
  const done = await outcome(page);
  assert.equal(done.state, 'succeeded', done.text);
  const after = await orders();
  assert.equal(after.count, before.count + 1, 'still one order');
  // Only the first attempt reached the service: every retry got 409 from the edge, then the replay.
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

test('the page lists every attempt with the edge\'s decision for it', async () => {
  const attempts = (page) => page.evaluate(() => [...document.querySelectorAll('#attempts li')]
    .map((li) => ({ status: li.dataset.status, decision: li.dataset.decision, text: li.textContent })));
  // A double click: one request, claimed and forwarded.
  const page = await openPage();
  await page.click('#pay', { clickCount: 2 });
  assert.equal((await outcome(page)).state, 'succeeded');
  const clicked = await attempts(page);
  assert.deepEqual(clicked.map((a) => [a.status, a.decision]), [['201', 'claimed']], JSON.stringify(clicked));
  assert.match(clicked[0].text, /edge: claimed the key/);
  await page.close();
  // A lost response: no answer, then 409s while the edge's detached exchange runs, then the replay.
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
  assert.ok(between.length >= 1, `at least one 409 while the first attempt ran: ${story}`);
  for (const a of between) assert.ok(a.decision === 'conflict' || a.status === 'none', story);
  assert.ok(between.some((a) => a.status === '409' && a.decision === 'conflict'), story);
  await lost.close();
});
