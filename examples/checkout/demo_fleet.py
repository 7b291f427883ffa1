#!/usr/bin/env python3
"""`make demo-fleet`: the checkout demo (same API and pages as `make demo`) behind TWO Envoys that
share one record store: the idemgate-store service in front of redis-server, PostgreSQL
or both, in the foreground.

    python3 examples/checkout/demo_fleet.py [--engine redis|postgres|redis+postgres]
                                            [--port 10000] [--admin-port 9901]
                                            [--port-b 10001] [--admin-port-b 9902] [--ready-file F]

The engine defaults to $ENGINE, else `redis` (`make demo-fleet ENGINE=postgres`). `redis` starts a
redis-server; `postgres` starts no redis-server but a PostgreSQL of its own (initdb in the demo's
temp dir, as the `postgres` user when run as root); `redis+postgres` starts both. Ports default to
$DEMO_PORT / $DEMO_ADMIN_PORT (Envoy A: 10000 / 9901) and $DEMO_PORT_B / $DEMO_ADMIN_PORT_B (Envoy
B: 10001 / 9902); 0 picks free ones. Redis, PostgreSQL and the service take free ports. The Envoys
reach the service over mutual TLS with certificates made at start in the demo's temp dir
(examples/store/certs.py). A request sent to A and its retry sent to B behave as if there were one
Envoy. Prints both URLs, runs until
Ctrl-C (or SIGTERM), and stops everything it started (also when a start fails). With
`--ready-file`, once everything answers, it writes {"url", "url_b", "admin", "admin_b", "orders",
"store", "engine", "redis", "postgres", "webhook_secret", "standard_webhook_secret"} there (redis
and postgres: the URL, or null when the engine has none). The secrets are as in demo.py, one set
for both.
"""
import argparse
import glob
import json
import os
import secrets
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile

from demo import (DEFAULT_PKG, DEFAULT_WASM, HERE, ROOT, fail, get, keeper, listener_port,
                  standard_webhook_curl, standard_webhook_secret, wait_for)

sys.path.insert(0, os.path.join(ROOT, "examples", "store"))
import certs  # noqa: E402  (examples/store/certs.py: the mutual TLS certificates)

DEFAULT_STORE = os.path.join(ROOT, "target", "release", "idemgate-store")
STORE_CONFIG = ('"store": { "kind": "remote", "cluster": "idemgate_store", "timeout": "1s",'
                ' "record_secret_env": "IDEMGATE_RECORD_SECRET" },')
STORE_CLUSTER = """
  - name: idemgate_store
    connect_timeout: 1s
    type: STATIC
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: { max_concurrent_streams: 100 } }
    transport_socket: %s
    load_assignment:
      cluster_name: idemgate_store
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: %d } } }
"""


ENGINES = ("redis", "postgres", "redis+postgres")


def postgres_binary(name):
    """A PostgreSQL binary: on PATH, else Debian's /usr/lib/postgresql/<version>/bin."""
    found = shutil.which(name) or (sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [None])[-1]
    return found or fail(f"`{name}` is not installed: run `make setup-postgres`")


class Postgres(subprocess.Popen):
    """The postmaster. Its `terminate` is a fast shutdown (SIGINT: clients disconnected, then
    exit) rather than SIGTERM's smart shutdown, which waits for every client to leave."""

    def terminate(self):
        self.send_signal(signal.SIGINT)


def start_postgres(work, children):
    """initdb in `work`/postgres and a postgres on a free port of 127.0.0.1 (TCP only, trust
    auth, user `idemgate`); as root, both run as the `postgres` user. Returns its URL."""
    initdb, postgres = postgres_binary("initdb"), postgres_binary("postgres")
    user = {}
    data = os.path.join(work, "postgres")
    os.mkdir(data, 0o700)
    if os.geteuid() == 0:
        import pwd
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            fail("running as root needs a `postgres` user: run `make setup-postgres`")
        user = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
        os.chmod(work, 0o711)  # the postgres user reaches its own dir, and lists nothing else
        os.chown(data, pw.pw_uid, pw.pw_gid)
    out = subprocess.run(
        [initdb, "-D", data, "-U", "idemgate", "--auth=trust", "-E", "UTF8", "--locale=C",
         "--no-sync", "--no-instructions"], cwd=work, capture_output=True, text=True, **user)
    if out.returncode != 0:
        fail(f"initdb failed: {out.stderr.strip()}")
    port = free_port()
    log_path = os.path.join(work, "postgres.log")
    log = open(log_path, "w")
    proc = Postgres(
        [postgres, "-D", data, "-p", str(port), "-c", "listen_addresses=127.0.0.1",
         "-c", "unix_socket_directories="],
        cwd=work, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, **user)
    children.append(proc)
    wait_for("postgres", lambda: "ready to accept connections" in open(log_path).read(), proc)
    return f"postgres://idemgate@127.0.0.1:{port}/postgres"


def start_redis(work, children, redis_server):
    """A redis-server on a free port (AOF, fsync always: records outlive a crash). Returns its URL."""
    port = free_port()
    redis = subprocess.Popen(
        [redis_server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "yes", "--appendfsync", "always", "--dir", work,
         "--maxmemory-policy", "noeviction", "--protected-mode", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children.append(redis)

    def redis_pong():
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")

    wait_for("redis-server", redis_pong, redis)
    return f"redis://127.0.0.1:{port}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fleet_config(port, admin, orders_port, wasm, store_port, tls):
    """The demo's envoy.yaml with the remote store: one line in the filter configuration (after
    `lease`) and the service's cluster (mutual TLS with the certificates `tls`)."""
    text = string.Template(open(os.path.join(HERE, "envoy.yaml")).read()).substitute(
        PORT=port, ADMIN_PORT=admin, ORDERS_PORT=orders_port, FILTER_WASM=wasm)
    anchor = '"lease": "5s",'
    if text.count(anchor) != 1 or not text.rstrip().endswith("}"):
        fail("examples/checkout/envoy.yaml changed shape: update demo_fleet.py")
    text = text.replace(anchor, anchor + "\n                      " + STORE_CONFIG)
    # The VM reads the record secret (it seals every stored answer) from Envoy's env.
    keys = 'host_env_keys: ["IDEMGATE_TOKEN_SECRET",'
    if text.count(keys) != 1:
        fail("examples/checkout/envoy.yaml changed shape: update demo_fleet.py")
    text = text.replace(keys, 'host_env_keys: ["IDEMGATE_RECORD_SECRET", "IDEMGATE_TOKEN_SECRET",')
    socket = json.dumps(certs.transport_socket(tls))  # JSON is YAML
    return text.rstrip("\n") + "\n" + STORE_CLUSTER % (socket, store_port)


def main():
    ap = argparse.ArgumentParser(description="idemgate checkout demo, two Envoys sharing one store")
    ap.add_argument("--engine", choices=ENGINES, default=os.environ.get("ENGINE") or "redis",
                    help="the store service's engine (default: $ENGINE, else redis)")
    ap.add_argument("--port", type=int, default=int(os.environ.get("DEMO_PORT", 10000)))
    ap.add_argument("--admin-port", type=int, default=int(os.environ.get("DEMO_ADMIN_PORT", 9901)))
    ap.add_argument("--port-b", type=int, default=int(os.environ.get("DEMO_PORT_B", 10001)))
    ap.add_argument("--admin-port-b", type=int,
                    default=int(os.environ.get("DEMO_ADMIN_PORT_B", 9902)))
    ap.add_argument("--wasm", default=os.environ.get("IDEMGATE_FILTER_WASM", DEFAULT_WASM))
    ap.add_argument("--store", default=os.environ.get("IDEMGATE_STORE_BIN", DEFAULT_STORE))
    ap.add_argument("--pkg", default=DEFAULT_PKG)
    ap.add_argument("--ready-file")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()

    if not os.path.isfile(args.wasm):
        fail(f"the filter is not built at {args.wasm}: run `make build-filter`")
    if not os.path.isfile(args.store):
        fail(f"the store service is not built at {args.store}: run `make build-store`")
    if not os.path.isfile(os.path.join(args.pkg, "index.js")):
        fail(f"the npm package is not built at {args.pkg}: run `make build-web`")
    envoy = shutil.which("envoy") or fail("`envoy` is not installed: run `make setup-envoy`")
    uses_redis, uses_postgres = args.engine != "postgres", args.engine != "redis"
    redis_server = None
    if uses_redis:
        redis_server = shutil.which("redis-server") or fail(
            "`redis-server` is not installed: run `make setup-redis`")
    if uses_postgres:
        postgres_binary("initdb")

    env = dict(os.environ)
    # One secret for both Envoys: a token issued by A is verified by B.
    env.setdefault("IDEMGATE_TOKEN_SECRET", secrets.token_hex(32))
    # One record secret for both Envoys: an answer sealed by A is checked by B (the service never
    # sees it).
    env.setdefault("IDEMGATE_RECORD_SECRET", secrets.token_hex(32))
    # The payment provider's webhook signing secret (Stripe-style `whsec_…`), as in demo.py.
    env.setdefault("IDEMGATE_WEBHOOK_SECRET", "whsec_" + secrets.token_hex(16))
    # The Standard Webhooks sender's secret (both Envoys and the order service verify with it).
    standard_secret, standard_key = standard_webhook_secret(env)

    work = tempfile.mkdtemp(prefix="idemgate-demo-fleet-")
    children, stop = keeper(work)

    signal.signal(signal.SIGTERM, lambda *_: (stop(), sys.exit(0)))
    # Ctrl-C stops the demo even when it was started with SIGINT ignored (a shell without job
    # control ignores it in everything it starts in the background, and children inherit that).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        redis_url = start_redis(work, children, redis_server) if uses_redis else None
        postgres_url = start_postgres(work, children) if uses_postgres else None

        store_port = free_port()
        try:
            tls = certs.make(os.path.join(work, "certs"))
        except (OSError, RuntimeError) as e:
            fail(f"cannot make the mutual TLS certificates: {e}")
        store = subprocess.Popen(
            [args.store, "--listen", f"127.0.0.1:{store_port}", "--engine", args.engine]
            + (["--redis", redis_url] if redis_url else [])
            + (["--postgres", postgres_url] if postgres_url else [])
            + certs.store_args(tls),
            stdout=subprocess.PIPE, text=True)
        children.append(store)
        line = store.stdout.readline()
        if "https://" not in line:
            fail(f"the store service did not start: {line!r}")

        orders = subprocess.Popen(
            [sys.executable, "-u", os.path.join(HERE, "order_service.py"), "--port", "0",
             "--pkg", args.pkg],
            stdout=subprocess.PIPE, text=True, env=env)
        children.append(orders)
        line = orders.stdout.readline()
        if "listening on" not in line:
            fail(f"order service did not start: {line!r}")
        orders_port = int(line.rsplit(":", 1)[1])

        urls = []
        admins = []
        for name, port, admin_port, base in (("a", args.port, args.admin_port, 0),
                                             ("b", args.port_b, args.admin_port_b, 1)):
            config_path = os.path.join(work, f"envoy-{name}.yaml")
            with open(config_path, "w") as f:
                f.write(fleet_config(port, admin_port, orders_port, args.wasm, store_port, tls))
            admin_file = os.path.join(work, f"admin-address-{name}")
            log = open(os.path.join(work, f"envoy-{name}.log"), "w")
            proxy = subprocess.Popen(
                [envoy, "-c", config_path, "--concurrency", "2", "--admin-address-path",
                 admin_file, "--log-level", "warn",
                 "--base-id", str((os.getpid() % 30000) * 2 + 1000 + base)],
                stdout=log, stderr=subprocess.STDOUT, env=env)
            children.append(proxy)

            def admin_port_of(path=admin_file):
                text = open(path).read().strip() if os.path.exists(path) else ""
                return int(text.rsplit(":", 1)[1]) if ":" in text else None

            admin = wait_for(f"envoy {name} admin", admin_port_of, proxy)
            wait_for(f"envoy {name} ready",
                     lambda: get(f"http://127.0.0.1:{admin}/ready").strip() == "LIVE", proxy)
            bound = port or wait_for(f"envoy {name} listener", lambda: listener_port(admin), proxy)
            url = f"http://127.0.0.1:{bound}"
            wait_for(f"the page through envoy {name}", lambda: "Checkout" in get(url + "/"), proxy)
            urls.append(url)
            admins.append(f"http://127.0.0.1:{admin}")

        if args.ready_file:
            with open(args.ready_file + ".tmp", "w") as f:
                json.dump({"url": urls[0], "url_b": urls[1], "admin": admins[0],
                           "admin_b": admins[1], "orders": orders_port,
                           "store": f"https://127.0.0.1:{store_port}", "pid": os.getpid(),
                           "engine": args.engine, "redis": redis_url, "postgres": postgres_url,
                           "webhook_secret": env["IDEMGATE_WEBHOOK_SECRET"],
                           "standard_webhook_secret": standard_secret}, f)
            os.replace(args.ready_file + ".tmp", args.ready_file)
        if not args.quiet:
            a, b = urls
            what = {"redis": "Redis", "postgres": "PostgreSQL",
                    "redis+postgres": "Redis in front of PostgreSQL"}[args.engine]
            backends = "   ".join(f"{name}: {url}" for name, url in
                                   (("Redis", redis_url), ("PostgreSQL", postgres_url)) if url)
            print(f"""
  idemgate fleet demo is running: two Envoys, one record store ({what} via idemgate-store,
  --engine {args.engine})
    Envoy A:  {a}    (admin {admins[0]}/stats?filter=idemgate)
    Envoy B:  {b}    (admin {admins[1]}/stats?filter=idemgate)
    store:    https://127.0.0.1:{store_port}/metrics   (mutual TLS: curl --cacert {tls['ca']} \\
                --cert {tls['envoy_cert']} --key {tls['envoy_key']})
    {backends}

  Try: a request sent to A, its retry sent to B (the second answer is the replay,
  Idempotent-Replayed: true; one order):
    for url in {a} {b}; do
      curl -si -X POST $url/api/orders -H 'authorization: Bearer me' \\
        -H 'idempotency-key: fleet-1' -H 'content-type: application/json' \\
        -d '{{"items":[{{"sku":"beans","qty":1,"price_cents":2400}}]}}'; done
    curl -s {a}/api/orders
  The pages at {a}/ and {b}/ work as in `make demo`, and so do the payment events: a
  Standard Webhooks delivery (DEMO_STANDARD_WEBHOOK_SECRET={standard_secret}) sent to A, then
  the same line with B's URL, is applied once:
    {standard_webhook_curl(a, standard_key)}

  Ctrl-C stops it.
""", flush=True)
        while all(proc.poll() is None for proc in children):
            try:
                children[-1].wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        fail("a demo process exited unexpectedly (see above)")
    except KeyboardInterrupt:
        pass
    finally:
        stop()


if __name__ == "__main__":
    main()
