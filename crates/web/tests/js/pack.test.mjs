// The published shape: `npm pack` of crates/web/pkg, installed into a fresh directory, imported by
// a plain HTML page in Chromium (no bundler, straight from node_modules) and by Node through the
// package's `exports`.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtemp, rm, writeFile, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { launch } from './helpers/chromium.mjs';
import { startServer } from './helpers/server.mjs';
import { pkgDir } from './helpers/paths.mjs';

const run = promisify(execFile);
const npm = (args, cwd) => run('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, timeout: 60_000 });

const HTML = `<!doctype html>
<meta charset="utf-8"><link rel="icon" href="data:,"><title>plain page</title>
<button id="buy">Buy</button>
<script type="module">
  import { newKey, parseKey, guardSubmit, version } from './node_modules/idemgate/index.js';
  const key = newKey();
  guardSubmit(document.getElementById('buy'), {
    url: '/api/buy',
    payload: () => ({ sku: 'A1' }),
    onSuccess: (result) => { window.done = { key: result.key, status: result.response.status }; },
  });
  window.loaded = { key, parsed: parseKey('"' + key + '"'), version: version() };
</script>`;

let dir;
let tarball;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'idemgate-pack-'));
  const { stdout } = await npm(['pack', fileURLToPath(pkgDir), '--pack-destination', dir, '--json'], dir);
  tarball = join(dir, JSON.parse(stdout)[0].filename);
  await writeFile(join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  await npm(['install', '--offline', '--no-package-lock', tarball], dir);
});

after(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('npm pack', () => {
  it('the tarball holds the package files and nothing else', async () => {
    const installed = await readdir(join(dir, 'node_modules/idemgate'), { recursive: true });
    for (const file of ['package.json', 'README.md', 'index.js', 'index.d.ts', 'idemgate_web.js', 'idemgate_web_bg.wasm']) {
      assert.ok(installed.includes(file), `${file} missing from ${installed}`);
    }
    assert.ok(installed.some((f) => f.startsWith('snippets/')), 'wasm-bindgen snippets missing');
    assert.ok(!installed.some((f) => /\.(rs|mjs|map)$/.test(f) || f.includes('tests')), `unexpected files: ${installed}`);
  });

  it('a plain HTML page imports it from node_modules and a click sends one keyed request', async () => {
    const server = await startServer({ mounts: { '/': pathToFileURL(`${dir}/`) }, pages: { '/': HTML } });
    const browser = await launch();
    try {
      server.script('/api/buy', [{ status: 201 }]);
      const page = await browser.newPage();
      await page.goto(`${server.origin}/`);
      const loaded = await (await page.waitForFunction(() => window.loaded)).jsonValue();
      assert.equal(loaded.parsed, loaded.key);
      assert.match(loaded.version, /^\d+\.\d+\.\d+/);
      await page.dblclick('#buy');
      const done = await (await page.waitForFunction(() => window.done)).jsonValue();
      assert.equal(done.status, 201);
      const requests = server.requests('/api/buy');
      assert.equal(requests.length, 1);
      assert.equal(requests[0].key, done.key);
      assert.deepEqual(page.errors, []);
    } finally {
      await browser.close();
      await server.close();
    }
  });

  it('Node imports it by name through the exports map', async () => {
    const script = "import('idemgate').then((m) => console.log(JSON.stringify([typeof m.idempotentFetch, m.parseKey(' abc '), m.newKey().length])))";
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: dir, timeout: 30_000 });
    assert.deepEqual(JSON.parse(stdout), ['function', 'abc', 36]);
  });
});
