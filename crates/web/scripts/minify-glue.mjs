// Minifies wasm-bindgen's JS glue (idemgate_web.js) with terser: its exports are internal to the
// package (the public API is js/*.js with index.d.ts), so its comments, JSDoc blocks (1.7 KB of
// the 5.5 KB gzipped glue once) and long local names are only weight: 4 065 → 2 994 B gzipped.
// Exported names and the property names the .wasm imports and exports by (`wasm.fingerprinter_new`,
// `__wbg_idemgate_error_…`) are kept: only local names are mangled. Usage: node minify-glue.mjs <glue.js>
import { readFile, writeFile } from 'node:fs/promises';
import { minify } from 'terser';

const [file] = process.argv.slice(2);
const glue = await readFile(file, 'utf8');
const { code } = await minify(glue, { module: true, compress: { passes: 2 }, mangle: true, format: { comments: false } });
if (!code || !code.includes('export')) throw new Error(`${file}: terser gave no module`);
await writeFile(file, code);
