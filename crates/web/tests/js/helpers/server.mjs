// A scriptable HTTP server on 127.0.0.1 (a free port) for the browser tests: serves static files
// and answers API paths from a per-path script, recording every request it receives.
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { EventEmitter } from 'node:events';
import { extname, normalize, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const TYPES = { '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html; charset=utf-8', '.json': 'application/json' };

/** A promise with its resolver: a step the test opens when it is ready. */
export function gate() {
  let open;
  const promise = new Promise((resolve) => { open = resolve; });
  return { promise, open };
}

/**
 * Starts a server. `mounts` maps a URL prefix to a directory URL; `pages` maps a path to HTML.
 * `cors` (optional): `{ exposeHeaders }` answers preflights and allows any origin.
 */
export async function startServer({ mounts = {}, pages = {}, cors = null } = {}) {
  const scripts = new Map();
  const log = new Map();
  const events = new EventEmitter();
  const open = new Set();

  const server = createServer(async (req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    const path = url.pathname;
    if (cors) {
      res.setHeader('access-control-allow-origin', req.headers.origin ?? '*');
      if (cors.exposeHeaders) res.setHeader('access-control-expose-headers', cors.exposeHeaders);
      if (req.method === 'OPTIONS') {
        res.writeHead(204, {
          'access-control-allow-methods': 'GET, POST, PATCH',
          'access-control-allow-headers': req.headers['access-control-request-headers'] ?? '',
          'access-control-max-age': '0',
        });
        return res.end();
      }
    }
    if (pages[path] !== undefined) {
      res.writeHead(200, { 'content-type': TYPES['.html'] });
      return res.end(pages[path]);
    }
    for (const [prefix, dir] of Object.entries(mounts)) {
      if (!path.startsWith(prefix)) continue;
      const rel = normalize(decodeURIComponent(path.slice(prefix.length)));
      if (rel.startsWith('..')) break;
      try {
        const body = await readFile(join(fileURLToPath(dir), rel));
        res.writeHead(200, { 'content-type': TYPES[extname(rel)] ?? 'application/octet-stream' });
        return res.end(body);
      } catch {
        break;
      }
    }
    const script = scripts.get(path);
    if (!script) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      return res.end('not found');
    }
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const entry = {
      method: req.method,
      path: req.url,
      key: req.headers['idempotency-key'] ?? null,
      headers: req.headers,
      body: Buffer.concat(chunks).toString('utf8'),
      at: performance.now(),
    };
    const entries = log.get(path) ?? [];
    entries.push(entry);
    log.set(path, entries);
    const scripted = script[Math.min(entries.length - 1, script.length - 1)];
    const step = typeof scripted === 'function' ? scripted(entry) : scripted;
    events.emit('request', path);
    if (step.hold) await step.hold;
    if (step.destroy) return req.socket.destroy();
    const body = typeof step.body === 'string' ? step.body : JSON.stringify(step.body ?? { n: entries.length });
    res.writeHead(step.status ?? 200, { 'content-type': 'application/json', ...step.headers });
    res.end(body);
  });
  server.on('connection', (socket) => {
    open.add(socket);
    socket.on('close', () => open.delete(socket));
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address();

  return {
    origin: `http://127.0.0.1:${port}`,
    /**
     * Answers requests to `path` with these steps in order; the last one repeats. A step is
     * `{ status, headers, body, hold, destroy }` or a function of the request returning one.
     */
    script(path, steps) {
      scripts.set(path, steps);
      log.delete(path);
    },
    requests(path) {
      return log.get(path) ?? [];
    },
    /**
     * A resource at `path` with a version, answered as an origin that checks `If-Match` does
     * (RFC 9110 §13.1.1, strong comparison of one entity-tag): GET → 200 with `ETag: "v<n>"`; any
     * other method → 428 without `If-Match`, 412 when it names another version, else 200 with the
     * next version's `ETag`. Returns `{ version }` (the current one); `requests(path)` counts.
     */
    resource(path, { version = 1 } = {}) {
      const current = { version };
      const etag = () => `"v${current.version}"`;
      this.script(path, [(request) => {
        if (request.method === 'GET') return { status: 200, headers: { etag: etag() }, body: { version: current.version } };
        const ifMatch = request.headers['if-match'];
        if (ifMatch === undefined) return { status: 428, body: { type: 'precondition_required' } };
        if (ifMatch !== etag()) return { status: 412, body: { type: 'precondition_failed', current: etag() } };
        current.version += 1;
        return { status: 200, headers: { etag: etag() }, body: { version: current.version } };
      }]);
      return current;
    },
    /** Resolves when `path` has received `count` requests; rejects after `timeoutMs`. */
    waitForRequests(path, count, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if ((log.get(path)?.length ?? 0) >= count) {
            cleanup();
            resolve(log.get(path));
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`${path}: ${log.get(path)?.length ?? 0} of ${count} requests after ${timeoutMs} ms`));
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          events.off('request', check);
        };
        events.on('request', check);
        check();
      });
    },
    async close() {
      for (const socket of open) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
