// Prints raw and gzipped sizes of the package's shipped code. Usage: node size.mjs <pkg dir> [--json]
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

const [dir, flag] = process.argv.slice(2);
const rows = [];
async function walk(sub) {
  for (const entry of await readdir(join(dir, sub), { withFileTypes: true })) {
    const rel = join(sub, entry.name);
    if (entry.isDirectory()) await walk(rel);
    else if (/\.(js|wasm)$/.test(entry.name)) {
      const bytes = await readFile(join(dir, rel));
      rows.push({ file: rel, raw: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length });
    }
  }
}
await walk('');
rows.sort((a, b) => b.raw - a.raw);
const sum = (pick) => rows.reduce((n, r) => n + r[pick], 0);
const wasm = rows.filter((r) => r.file.endsWith('.wasm'));
const js = rows.filter((r) => r.file.endsWith('.js'));
const total = { wasm: { raw: wasm.reduce((n, r) => n + r.raw, 0), gzip: wasm.reduce((n, r) => n + r.gzip, 0) },
  js: { raw: js.reduce((n, r) => n + r.raw, 0), gzip: js.reduce((n, r) => n + r.gzip, 0) }, raw: sum('raw'), gzip: sum('gzip') };
if (flag === '--json') {
  console.log(JSON.stringify({ rows, total }));
} else {
  for (const r of rows) console.log(`${r.file.padEnd(48)} ${String(r.raw).padStart(8)} B  ${String(r.gzip).padStart(7)} B gzip`);
  console.log(`${'total (.wasm + .js, each file gzipped)'.padEnd(48)} ${String(total.raw).padStart(8)} B  ${String(total.gzip).padStart(7)} B gzip`);
  // The size goal counts the module: the .wasm and wasm-bindgen's glue (idemgate_web.js).
  const module = rows.filter((r) => ['idemgate_web_bg.wasm', 'idemgate_web.js'].includes(r.file));
  const raw = module.reduce((n, r) => n + r.raw, 0);
  const gzip = module.reduce((n, r) => n + r.gzip, 0);
  console.log(`${'module (.wasm + wasm-bindgen glue)'.padEnd(48)} ${String(raw).padStart(8)} B  ${String(gzip).padStart(7)} B gzip`);
}
