#!/usr/bin/env python3
"""`make test-image-store`: the store's OCI image, checked for real.

- two builds of the same binary give the same manifest digest, and the layout on disk is that one;
- `skopeo inspect` reads the layout: linux/amd64, the digest index.json names, user 65532:65532,
  the binary as the entrypoint;
- the layer holds only the binary, /etc/passwd and /etc/group (no shell), owned by root, with
  fixed mtimes; the binary has no dynamic loader;
- the binary unpacked from the layer runs: `--help` exits 0, and against a real redis-server
  (started here on a free port, killed by PID) it serves `/healthz` and `/readyz`.

Usage: image_test.py --layout target/oci/idemgate-store --tag 0.1.0
"""

import argparse
import gzip
import hashlib
import importlib.util
import io
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..",
                                "examples", "store"))
import certs  # noqa: E402  (examples/store/certs.py: the mutual TLS certificates)
_spec = importlib.util.spec_from_file_location(
    "store_oci_image",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts/oci_image.py"),
)
store_image = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(store_image)

failures = []


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f": {detail}" if detail and not ok else ""))
    if not ok:
        failures.append(name)


def blob(layout, digest):
    with open(os.path.join(layout, "blobs", "sha256", digest.split(":", 1)[1]), "rb") as f:
        return f.read()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, limit=10.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def kill(proc):
    if proc and proc.poll() is None:
        proc.kill()
        proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layout", required=True)
    ap.add_argument("--tag", required=True)
    args = ap.parse_args()
    layout = args.layout

    with open(os.path.join(layout, "index.json")) as f:
        index = json.load(f)
    manifest_digest = index["manifests"][0]["digest"]
    manifest = json.loads(blob(layout, manifest_digest))
    config_bytes = blob(layout, manifest["config"]["digest"])
    layer = blob(layout, manifest["layers"][0]["digest"])
    check("one layer", len(manifest["layers"]) == 1)
    tar_bytes = gzip.decompress(layer)
    members = tarfile.open(fileobj=io.BytesIO(tar_bytes)).getmembers()
    names = [m.name for m in members]
    check("the layer holds the binary, passwd and group only",
          names == ["etc", "etc/group", "etc/passwd", "usr", "usr/local", "usr/local/bin",
                    "usr/local/bin/idemgate-store"], str(names))
    check("no shell in the image", not any(n.endswith("/sh") or n.endswith("bash") for n in names))
    check("entries are root's, with the fixed mtime",
          all(m.uid == 0 and m.gid == 0 and m.mtime == store_image.oci.EPOCH for m in members))
    binary = tarfile.open(fileobj=io.BytesIO(tar_bytes)).extractfile(
        "usr/local/bin/idemgate-store").read()
    check("the binary is static (no dynamic loader)", store_image.interpreter(binary) is None)
    passwd = tarfile.open(fileobj=io.BytesIO(tar_bytes)).extractfile("etc/passwd").read()
    check("passwd names only the non-root user 65532", passwd.startswith(b"nonroot:x:65532:65532:")
          and passwd.count(b"\n") == 1, passwd.decode())

    # Reproducible: the same binary gives the same digest, twice.
    again, again_digest, _ = store_image.build(binary, args.tag)
    twice, twice_digest, _ = store_image.build(binary, args.tag)
    check("two builds give the same manifest digest",
          again_digest == twice_digest == manifest_digest, f"{again_digest} {manifest_digest}")
    check("the diff_id is the layer's tar digest",
          json.loads(config_bytes)["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(tar_bytes).hexdigest()])

    # skopeo reads the layout as a registry client would.
    ref = f"oci:{layout}:{args.tag}"
    inspect = subprocess.run(["skopeo", "inspect", ref], capture_output=True, text=True)
    check("skopeo inspect reads the image", inspect.returncode == 0, inspect.stderr)
    if inspect.returncode == 0:
        info = json.loads(inspect.stdout)
        check("skopeo: linux/amd64", (info.get("Os"), info.get("Architecture")) == ("linux", "amd64"))
        check("skopeo: the digest index.json names", info.get("Digest") == manifest_digest,
              f"{info.get('Digest')} != {manifest_digest}")
    config = subprocess.run(["skopeo", "inspect", "--config", ref], capture_output=True, text=True)
    check("skopeo inspect --config reads the config", config.returncode == 0, config.stderr)
    if config.returncode == 0:
        cfg = json.loads(config.stdout)["config"]
        check("runs as 65532:65532", cfg.get("User") == "65532:65532", str(cfg.get("User")))
        check("the binary is the entrypoint",
              cfg.get("Entrypoint") == ["/usr/local/bin/idemgate-store"], str(cfg.get("Entrypoint")))

    # The binary from the layer runs.
    work = tempfile.mkdtemp(prefix="idemgate-image-")
    redis = service = None
    try:
        tarfile.open(fileobj=io.BytesIO(tar_bytes)).extractall(work, filter="tar")
        exe = os.path.join(work, "usr/local/bin/idemgate-store")
        help_run = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=30)
        check("--help exits 0", help_run.returncode == 0 and "usage:" in help_run.stdout.lower(),
              help_run.stderr)
        port = free_port()
        redis = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly",
                                  "no", "--dir", work], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        check("redis-server starts", wait_port(port))
        # As deployed: mutual TLS, with certificates made here (examples/store/certs.py).
        pki = certs.make(os.path.join(work, "certs"))
        service = subprocess.Popen([exe, "--listen", "127.0.0.1:0", "--redis",
                                    f"redis://127.0.0.1:{port}", *certs.store_args(pki)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = service.stdout.readline().strip()
        addr = line.rsplit("https://", 1)[-1] if "https://" in line else None
        check("the service from the layer listens (mutual TLS)", addr is not None,
              line + service.stderr.read() if addr is None else "")
        if addr:
            tls = ssl.create_default_context(cafile=pki["ca"])
            tls.load_cert_chain(pki["envoy_cert"], pki["envoy_key"])
            for path, body in (("/healthz", "ok"), ("/readyz", "ready")):
                with urllib.request.urlopen(f"https://{addr}{path}", timeout=10,
                                            context=tls) as r:
                    text = r.read().decode().strip()
                    check(f"GET {path} → 200 {body}", r.status == 200 and text == body, text)
            # Without a client certificate the handshake is refused.
            anonymous = ssl.create_default_context(cafile=pki["ca"])
            try:
                urllib.request.urlopen(f"https://{addr}/healthz", timeout=10, context=anonymous)
                refused = False
            except (OSError, ssl.SSLError):
                refused = True
            check("a client without a certificate is refused", refused)
    finally:
        kill(service)
        kill(redis)
        shutil.rmtree(work, ignore_errors=True)

    if failures:
        sys.exit(f"test-image-store: {len(failures)} check(s) failed: {', '.join(failures)}")
    print(f"test-image-store: all checks passed ({manifest_digest})")


if __name__ == "__main__":
    main()
