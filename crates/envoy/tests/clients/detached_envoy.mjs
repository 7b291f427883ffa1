// A real Envoy with the built filter, and a scripted upstream, for the client tests of detached
// execution (issue 12). Everything listens on 127.0.0.1 on free ports; `stop()` kills Envoy by its
// PID and closes the upstream, also when a test fails (call it from `after`).
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../../../..');
export const FILTER_WASM = process.env.IDEMGATE_FILTER_WASM
  ?? join(root, 'target/wasm32-wasip1/release/idemgate_envoy.wasm');

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

function envoyYaml({ upstreamPort, filter }) {
  const config = JSON.stringify(filter);
  return `admin:
  address: { socket_address: { address: 127.0.0.1, port_value: 0 } }
static_resources:
  listeners:
  - name: main
    address: { socket_address: { address: 127.0.0.1, port_value: 0 } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          route_config:
            virtual_hosts:
            - name: app
              domains: ["*"]
              routes:
              - match: { prefix: "/" }
                route: { cluster: app, timeout: 5s }
          http_filters:
          - name: envoy.filters.http.wasm
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm
              config:
                name: idemgate
                root_id: idemgate
                vm_config:
                  vm_id: idemgate
                  runtime: envoy.wasm.runtime.v8
                  code: { local: { filename: "${FILTER_WASM}" } }
                configuration:
                  "@type": type.googleapis.com/google.protobuf.StringValue
                  value: ${JSON.stringify(config)}
          - name: envoy.filters.http.buffer
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer
              max_request_bytes: 1048576
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: app
    connect_timeout: 1s
    type: STATIC
    load_assignment:
      cluster_name: app
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${upstreamPort} } } }
`;
}

/// Starts Envoy (two workers) with the filter configured by `filter` (the core's JSON, as an
/// object) in front of the upstream on `upstreamPort`; resolves once it serves.
export async function startEnvoy({ upstreamPort, filter }) {
  if (!existsSync(FILTER_WASM)) throw new Error(`no filter at ${FILTER_WASM}: run make build-filter`);
  const dir = mkdtempSync(join(tmpdir(), 'idemgate-clients-'));
  const config = join(dir, 'envoy.yaml');
  const adminPath = join(dir, 'admin-address');
  writeFileSync(config, envoyYaml({ upstreamPort, filter }));
  const log = [];
  const child = spawn(process.env.ENVOY ?? 'envoy', ['-c', config, '--concurrency', '2',
    '--disable-hot-restart', '-l', 'warn', '--admin-address-path', adminPath],
  { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.on('data', (d) => log.push(d.toString()));
  child.stderr.on('data', (d) => log.push(d.toString()));
  let exited = null;
  child.on('exit', (code) => { exited = code; });
  const stop = async () => {
    if (exited === null) {
      process.kill(child.pid, 'SIGKILL');
      await new Promise((r) => child.once('exit', r));
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 60_000;
  let admin = 0;
  for (;;) {
    if (exited !== null) { await stop(); throw new Error(`envoy exited (${exited}):\n${log.join('')}`); }
    if (Date.now() > deadline) { await stop(); throw new Error(`envoy not ready:\n${log.join('')}`); }
    try {
      if (!admin && existsSync(adminPath)) admin = Number(readFileSync(adminPath, 'utf8').trim().split(':').pop());
      if (admin) {
        const listeners = await (await fetch(`http://127.0.0.1:${admin}/listeners?format=json`)).json();
        const main = listeners.listener_statuses?.find((l) => l.name === 'main');
        const port = main?.local_address?.socket_address?.port_value;
        if (port) {
          const counter = async (name) => {
            const stats = await (await fetch(`http://127.0.0.1:${admin}/stats`)).text();
            const line = stats.split('\n').find((l) => l.split(': ')[0].endsWith(`idemgate.${name}`));
            return line ? Number(line.split(': ').pop()) : NaN;
          };
          return { port, admin, counter, stop, log: () => log.join('') };
        }
      }
    } catch { /* not up yet */ }
    await sleep(50);
  }
}
