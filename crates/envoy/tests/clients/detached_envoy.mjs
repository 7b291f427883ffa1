// A scripted upstream that counts executions per key, for the client tests of detached execution,
// and Envoy started by stack.mjs's launcher. Everything listens on 127.0.0.1 on free
// ports; `stop()` kills Envoy by its PID and closes the upstream, also when a test fails (call it
// from `after`).
import { createServer } from 'node:http';
import { startEnvoy as startStackEnvoy } from './stack.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/// An upstream that answers `answer(req, body, n)` after `delayMs`, counting executions per
/// `Idempotency-Key` (an execution is a request that reached it; the delay is "the work").
export async function startUpstream({ delayMs, answer }) {
  const executions = new Map();
  let sequence = 0;
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const n = ++sequence;
      const key = req.headers['idempotency-key'] ?? '';
      executions.set(key, (executions.get(key) ?? 0) + 1);
      await sleep(delayMs);
      const { status, body } = answer(req, Buffer.concat(chunks).toString(), n);
      const text = JSON.stringify(body);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: server.address().port,
    executions: (key) => executions.get(key) ?? 0,
    keys: () => [...executions.keys()],
    close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); }),
  };
}

/// Envoy (two workers) with the filter configured by `filter` (the core's JSON, as an object) in
/// front of the upstream on `upstreamPort`: the one launcher of these client tests, in stack.mjs.
export async function startEnvoy({ upstreamPort, filter }) {
  return startStackEnvoy({ upstreamPort, filter: JSON.stringify(filter) });
}
