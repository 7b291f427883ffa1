// A real Envoy with the built filter in front of an in-process upstream, for tests that drive it
// with client libraries written by others. Each stack has its own temp dir and YAML; the listener
// and the admin listen on port 0 (found through --admin-address-path and the admin /listeners);
// Envoy is killed by its PID when the test ends, whether it passed or not (and on process exit).
// The Rust twin of this helper is crates/envoy/tests/envoy/harness.rs.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const started = new Set();
process.on('exit', () => {
  for (const child of started) {
    try { process.kill(child.pid, 'SIGKILL'); } catch { /* already gone */ }
  }
});

export function filterWasm() {
  const wasm = process.env.IDEMGATE_FILTER_WASM
    ?? path.resolve(here, '../../../../target/wasm32-wasip1/release/idemgate_envoy.wasm');
  if (!existsSync(wasm)) {
    throw new Error(`the filter is not built at ${wasm}: run \`make build-filter\``);
  }
  return wasm;
}

/** An HTTP server on 127.0.0.1:0 that collects each request (method, url, headers, body). */
export async function startUpstream(handler) {
  const requests = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const request = { method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks).toString() };
      requests.push(request);
      Promise.resolve(handler(request, res)).catch((e) => {
        res.writeHead(599);
        res.end(String(e));
      });
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    requests,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

function indent(text, spaces) {
  const pad = ' '.repeat(spaces);
  return text.split('\n').map((l) => pad + l).join('\n');
}

// The Envoy of these tests, shaped as the shipped examples/envoy/envoy.yaml: the filter, then the
// buffer and the router; and the re-entry listener `idemgate_reentry`, where a detached exchange
// (`upstream.reentry` in the filter's configuration) comes back in, with the same route
// configuration (the YAML anchor `routes`) and the filters after idemgate (never idemgate itself).
function yaml({ filter, upstreamPort, wasm, envKeys }) {
  const afterIdemgate = `
          - name: envoy.filters.http.buffer
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer
              max_request_bytes: 1048576
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router`;
  return `admin:
  address: { socket_address: { address: 127.0.0.1, port_value: 0 } }
bootstrap_extensions:
- name: envoy.bootstrap.internal_listener
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener
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
          use_remote_address: true
          route_config: &routes
            virtual_hosts:
            - name: app
              domains: ["*"]
              routes:
              - match: { prefix: "/" }
                route: { cluster: app, timeout: 15s }
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
                  code: { local: { filename: "${wasm}" } }
                  environment_variables: { host_env_keys: [${envKeys.map((k) => JSON.stringify(k)).join(', ')}] }
                configuration:
                  "@type": type.googleapis.com/google.protobuf.StringValue
                  value: |
${indent(filter, 20)}${afterIdemgate}
  - name: idemgate_reentry
    internal_listener: {}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: idemgate_reentry
          route_config: *routes
          http_filters:
          - name: envoy.filters.http.header_mutation
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation
              mutations:
                response_mutations:
                - append:
                    header: { key: x-idemgate-reentry, value: "%RESPONSE_CODE_DETAILS%;%UPSTREAM_REQUEST_ATTEMPT_COUNT%" }
                    append_action: OVERWRITE_IF_EXISTS_OR_ADD${afterIdemgate}
  clusters:
  - name: app
    connect_timeout: 1s
    type: STATIC
    load_assignment:
      cluster_name: app
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${upstreamPort} } } }
  - name: idemgate_reentry
    load_assignment:
      cluster_name: idemgate_reentry
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { envoy_internal_address: { server_listener_name: idemgate_reentry } } }
`;
}

async function get(port, urlPath) {
  const res = await fetch(`http://127.0.0.1:${port}${urlPath}`);
  return { status: res.status, text: await res.text() };
}

/**
 * Starts Envoy with `filter` (the core's JSON configuration) in front of `upstreamPort`. `env` is
 * passed to Envoy and made visible to the VM (e.g. a webhook secret for `secret_env`).
 */
export async function startEnvoy({ filter, upstreamPort, env = {} }) {
  const dir = mkdtempSync(path.join(tmpdir(), 'idemgate-clients-'));
  const config = path.join(dir, 'envoy.yaml');
  const adminPath = path.join(dir, 'admin-address');
  const logPath = path.join(dir, 'envoy.log');
  writeFileSync(config, yaml({ filter, upstreamPort, wasm: filterWasm(), envKeys: Object.keys(env) }));
  const log = openSync(logPath, 'w');
  const child = spawn('envoy', [
    '-c', config, '--concurrency', '2', '--disable-hot-restart', '-l', 'warn',
    '--component-log-level', 'wasm:info', '--admin-address-path', adminPath,
  ], { env: { ...process.env, ...env }, stdio: ['ignore', log, log] });
  started.add(child);
  let exited = null;
  child.on('exit', (code, signal) => { exited = { code, signal }; started.delete(child); });
  const logTail = () => {
    try { return readFileSync(logPath, 'utf8').split('\n').slice(-40).join('\n'); } catch { return ''; }
  };
  const stop = async () => {
    if (exited === null) {
      process.kill(child.pid, 'SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
    }
    rmSync(dir, { recursive: true, force: true });
  };
  let admin = 0;
  let port = 0;
  const deadline = Date.now() + 60_000;
  try {
    while (port === 0) {
      if (exited !== null) throw new Error(`envoy exited (${JSON.stringify(exited)}) before ready:\n${logTail()}`);
      if (Date.now() > deadline) throw new Error(`envoy not ready after 60 s:\n${logTail()}`);
      if (admin === 0 && existsSync(adminPath)) {
        admin = Number(readFileSync(adminPath, 'utf8').trim().split(':').pop()) || 0;
      }
      if (admin !== 0) {
        try {
          if ((await get(admin, '/ready')).status === 200) {
            const listeners = JSON.parse((await get(admin, '/listeners?format=json')).text);
            const main = listeners.listener_statuses?.find((l) => l.name === 'main');
            port = main?.local_address?.socket_address?.port_value ?? 0;
          }
        } catch { /* not up yet */ }
      }
      if (port === 0) await new Promise((r) => setTimeout(r, 50));
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    port,
    admin,
    pid: child.pid,
    url: `http://127.0.0.1:${port}`,
    logTail,
    stop,
    /** Envoy's statistic `name` (its full name, e.g. `http.idemgate_reentry.downstream_rq_total`). */
    async stat(name) {
      const stats = (await get(admin, '/stats')).text;
      const line = stats.split('\n').find((l) => l.startsWith(`${name}: `));
      if (!line) throw new Error(`no statistic ${name}`);
      return Number(line.split(': ').pop());
    },
    /** The filter's counter `idemgate.<name>` at the admin /stats. */
    async counter(name) {
      const stats = (await get(admin, '/stats')).text;
      const line = stats.split('\n').find((l) => l.includes(`idemgate.${name}: `));
      if (!line) throw new Error(`no counter idemgate.${name}`);
      return Number(line.split(': ').pop());
    },
  };
}

/**
 * Upstream and Envoy for one test; both are stopped by `t.after` even when the test fails.
 */
export async function startStack(t, { filter, handler, env }) {
  const upstream = await startUpstream(handler);
  t.after(() => upstream.close());
  const envoy = await startEnvoy({ filter, upstreamPort: upstream.port, env });
  t.after(() => envoy.stop());
  return { upstream, envoy };
}

/**
 * Delivers one webhook the way providers do: POST, and on 409 (the same delivery is still being
 * processed) deliver again later, up to `attempts` times. Providers retry on their own schedule
 * (minutes); the test retries after 250 ms and checks the 409 carried a `Retry-After`. Returns
 * every answer's status, the last answer's headers and body.
 */
export async function deliver(url, headers, body, attempts = 10) {
  const statuses = [];
  for (let i = 0; i < attempts; i += 1) {
    const res = await fetch(url, { method: 'POST', headers, body });
    const text = await res.text();
    statuses.push(res.status);
    if (res.status !== 409) return { statuses, headers: res.headers, body: text };
    const wait = Number(res.headers.get('retry-after'));
    if (!(wait >= 1)) throw new Error(`409 without a usable Retry-After: ${res.headers.get('retry-after')}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`still 409 after ${attempts} attempts: ${statuses}`);
}
