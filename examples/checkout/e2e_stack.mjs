// The end-to-end tests' stack: `make demo`'s demo.py (the order service behind a real Envoy with
// the filter) on free ports, and Debian's Chromium driven by playwright-core. Each test file starts
// one and stops it in its `after`, even when a test failed.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

export const here = dirname(fileURLToPath(import.meta.url));
// playwright-core comes from crates/web's dev tools (`make setup-npm`); the senders' SDKs
// (`standardwebhooks`, `stripe`) from the client tests' package (crates/envoy/tests/clients,
// installed by `make test-e2e` as by `make test-clients`): pinned there, not copied here.
export const requireWeb = createRequire(join(here, '../../crates/web/package.json'));
export const requireClients = createRequire(join(here, '../../crates/envoy/tests/clients/package.json'));

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--no-first-run', '--disable-sync', '--disable-quic'];

/**
 * Starts demo.py on free ports and waits for its ready file. Returns `{ stack, stop }`: `stack`
 * is demo.py's ready document (`url`, `admin`, `orders`, the webhook secrets), `stop` ends the
 * demo (SIGTERM to its PID; demo.py stops what it started) and removes the work dir.
 */
export async function startDemo() {
  const work = mkdtempSync(join(tmpdir(), 'idemgate-e2e-'));
  const ready = join(work, 'ready.json');
  const demo = spawn('python3', [join(here, 'demo.py'), '--port', '0', '--admin-port', '0', '--quiet',
    '--ready-file', ready], { stdio: ['ignore', 'inherit', 'inherit'] });
  const stop = async () => {
    if (demo.exitCode === null && demo.signalCode === null) {
      const gone = new Promise((resolve) => demo.once('exit', resolve));
      demo.kill('SIGTERM');
      await gone;
    }
    rmSync(work, { recursive: true, force: true });
  };
  try {
    const exited = new Promise((resolve) => demo.once('exit', resolve));
    const deadline = Date.now() + 60_000;
    while (!existsSync(ready)) {
      const code = await Promise.race([exited, new Promise((r) => setTimeout(r, 100, 'waiting'))]);
      assert.equal(code, 'waiting', `demo.py exited (${code}) before it was ready`);
      assert.ok(Date.now() < deadline, 'demo.py not ready after 60 s');
    }
    return { stack: JSON.parse(readFileSync(ready, 'utf8')), stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** Headless Chromium; playwright gives it a fresh, temporary profile of its own. */
export function launchBrowser() {
  const { chromium } = requireWeb('playwright-core');
  return chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
}

/** A new unpaid order at the demo behind `url`, for `client` (its own key). */
export async function createOrder(url, client) {
  const res = await fetch(`${url}/api/orders`, {
    method: 'POST',
    headers: { authorization: `Bearer ${client}`, 'idempotency-key': `order-${Date.now()}-${Math.random()}`, 'content-type': 'application/json' },
    body: JSON.stringify({ items: [{ sku: 'beans', qty: 1, price_cents: 2400 }] }),
  });
  assert.equal(res.status, 201);
  const order = await res.json();
  assert.equal(order.status, 'unpaid');
  return order;
}
