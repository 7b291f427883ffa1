// Writes pkg/package.json and pkg/README.md for the npm package `idemgate`.
// Usage: node assemble.mjs <workspace root> <pkg dir>
import { readFile, writeFile, readdir, copyFile } from 'node:fs/promises';
import { join } from 'node:path';

const [root, out] = process.argv.slice(2);
const workspace = await readFile(join(root, 'Cargo.toml'), 'utf8');
const section = workspace.split('[workspace.package]')[1] ?? '';
const version = /^version\s*=\s*"([^"]+)"/m.exec(section)?.[1];
const license = /^license\s*=\s*"([^"]+)"/m.exec(section)?.[1];
if (!version) throw new Error('no [workspace.package] version in Cargo.toml');

await copyFile(join(root, 'crates/web/README.md'), join(out, 'README.md'));
const files = (await readdir(out)).filter((f) => f !== 'package.json').sort();
const pkg = {
  name: 'idemgate',
  version,
  description: 'Idempotency keys, submit guards and safe retries for browser apps, with the same rules as the idemgate edge (Rust core compiled to WebAssembly).',
  license,
  type: 'module',
  main: './index.js',
  types: './index.d.ts',
  exports: {
    '.': {
      types: './index.d.ts',
      default: './index.js',
    },
    './idemgate_web_bg.wasm': './idemgate_web_bg.wasm',
    './package.json': './package.json',
  },
  files,
  sideEffects: false,
  engines: { node: '>=20.16' },
  keywords: ['idempotency', 'idempotency-key', 'retry', 'double-submit', 'wasm', 'fetch'],
};
await writeFile(join(out, 'package.json'), JSON.stringify(pkg, null, 2) + '\n');
