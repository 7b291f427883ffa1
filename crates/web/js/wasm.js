// Instantiates the wasm module, once, before any module that imports this one runs: every export
// of the package is ready to call after `import`. Browsers and bundlers fetch the .wasm next to this
// file (bundlers understand `new URL(…, import.meta.url)`); Node reads it from disk.
import init from './idemgate_web.js';

export * from './idemgate_web.js';

const url = new URL('./idemgate_web_bg.wasm', import.meta.url);
// `process.getBuiltinModule` (Node ≥ 20.16) reads the file without importing a `node:` module,
// which browser bundlers would reject.
const fs = url.protocol === 'file:' ? globalThis.process?.getBuiltinModule?.('node:fs/promises') : null;
await init({ module_or_path: fs ? await fs.readFile(url) : url });
