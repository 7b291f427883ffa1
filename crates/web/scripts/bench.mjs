// Fingerprint throughput of the built package in Node (V8), to see what a size choice costs in
// speed. Bounded: each case runs for about `ms` milliseconds, in 10 windows; the best window is
// reported, since on a shared machine the others measure the neighbours. Compare builds with
// interleaved runs. Usage: node bench.mjs <pkg dir> [ms]
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';

const [dir = 'pkg', ms = '500'] = process.argv.slice(2);
const api = await import(pathToFileURL(resolve(dir, 'index.js')).href);

const size = 64 * 1024;
const raw = new Uint8Array(size).map((_, i) => (i * 31) & 0xff);
const items = [];
while (JSON.stringify(items).length < size) items.push({ id: items.length, name: `item ${items.length}`, price: 12.5, tags: ['a', 'b'] });
const jsonBody = new TextEncoder().encode(JSON.stringify(items));

for (const [name, mode, body] of [['raw 64 KB', 'raw', raw], ['json 64 KB', 'json', jsonBody], ['raw 1 KB', 'raw', raw.subarray(0, 1024)]]) {
  let best = Infinity;
  for (let window = 0; window < 10; window++) {
    let n = 0;
    const start = performance.now();
    while (performance.now() - start < Number(ms) / 10) {
      new api.Fingerprinter({ mode, headers: [] }).update(body).finish();
      n++;
    }
    best = Math.min(best, (performance.now() - start) / 1000 / n);
  }
  const [n, secs] = [1, best];
  console.log(`${name.padEnd(12)} ${(n * body.length / secs / 1e6).toFixed(1).padStart(8)} MB/s  ${(secs / n * 1e6).toFixed(1).padStart(9)} µs/op`);
}
