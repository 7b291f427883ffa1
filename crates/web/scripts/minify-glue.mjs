// Drops the JSDoc blocks wasm-bindgen copies from the Rust doc comments into its JS glue: the
// exports they describe are internal to the package (the public API is js/*.js with index.d.ts),
// and they were 1.7 KB of the 5.5 KB gzipped glue. Only blocks that fill whole lines are removed,
// so nothing inside a string or code can match. Usage: node trim-glue.mjs <glue.js>
import { readFile, writeFile } from 'node:fs/promises';

const [file] = process.argv.slice(2);
const glue = await readFile(file, 'utf8');
const trimmed = glue.replace(/^[ \t]*\/\*\*(?:[^*]|\*(?!\/))*\*\/[ \t]*\n/gm, '');
if (trimmed.includes('/**')) throw new Error(`${file}: a doc block was left; the glue's layout changed`);
await writeFile(file, trimmed);
