// Runs a wasm32-wasip1 program (the core's bench) in V8 through Node's WASI: the same engine Envoy
// uses for the filter. Usage: node wasi-run.mjs prog.wasm [args...]; env IDEMGATE_BENCH_SMOKE passes.
import { readFile } from "node:fs/promises";
import { WASI } from "node:wasi";
import process from "node:process";

const [file, ...args] = process.argv.slice(2);
const env = {};
if (process.env.IDEMGATE_BENCH_SMOKE) env.IDEMGATE_BENCH_SMOKE = process.env.IDEMGATE_BENCH_SMOKE;
const wasi = new WASI({ version: "preview1", args: [file, ...args], env, returnOnExit: true });
const module = await WebAssembly.compile(await readFile(file));
const instance = await WebAssembly.instantiate(module, wasi.getImportObject());
process.exitCode = wasi.start(instance);
