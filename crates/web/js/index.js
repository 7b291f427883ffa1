// The `idemgate` package: one entry for browsers, bundlers and Node. The wasm module is loaded by
// ./wasm.js (top-level await) before any of these exports can be used.
export * from './api.js';
