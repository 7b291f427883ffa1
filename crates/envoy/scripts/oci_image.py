#!/usr/bin/env python3
"""Packs the shipped filter .wasm as a "compat" Wasm OCI image, offline, into an OCI layout dir.

Istio's WasmPlugin and Envoy Gateway's EnvoyExtensionPolicy (code.type: Image) fetch modules with
one fetcher (istio pkg/wasm/imagefetcher.go). It takes the manifest's LAST layer; the "compat"
variant is a layer of media type application/vnd.oci.image.layer.v1.tar+gzip holding a file
named plugin.wasm. That is the format it tries first and the only one every version accepts; a
single-layer application/wasm artifact (wasm-to-oci, a default `oras push`) is refused.

The image is reproducible: same .wasm in, same manifest digest out. The tar has one entry with
fixed mtime, owner, mode and USTAR format; gzip carries no timestamp or file name; the config's
`created` is fixed; every JSON document is serialized with sorted keys and no spaces.
(The gzip bytes come from this Python's zlib: another zlib version may compress differently.)

Prints the manifest digest; its hex part is what users put in `sha256` (WasmPlugin,
EnvoyExtensionPolicy). Usage:
    oci_image.py --wasm FILTER.wasm --out target/oci/idemgate-envoy --tag 0.1.0
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile

LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
# Fixed time for the tar entry and the config (2000-01-01T00:00:00Z; 0 upsets some tools).
EPOCH = 946684800
CREATED = "2000-01-01T00:00:00Z"


def canonical(doc):
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def layer_tar(wasm):
    """One regular file, plugin.wasm, with nothing that varies between builds."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo("plugin.wasm")
        info.size = len(wasm)
        info.mtime = EPOCH
        info.mode = 0o644
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.type = tarfile.REGTYPE
        tar.addfile(info, io.BytesIO(wasm))
    return out.getvalue()


def gzip_bytes(data):
    out = io.BytesIO()
    # filename="" and mtime=0: the gzip header carries neither a name nor a time.
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, compresslevel=9, mtime=0) as gz:
        gz.write(data)
    return out.getvalue()


def build(wasm, tag):
    """Returns (blobs: {digest: bytes}, manifest digest, manifest size)."""
    tar = layer_tar(wasm)
    layer = gzip_bytes(tar)
    config = canonical(
        {
            "architecture": "wasm",
            "os": "wasip1",
            "created": CREATED,
            "config": {},
            "rootfs": {"type": "layers", "diff_ids": [digest(tar)]},
        }
    )
    annotations = {
        "module.wasm.image/variant": "compat",
        "org.opencontainers.image.title": "idemgate-envoy",
        "org.opencontainers.image.description": "idemgate: exactly-once Idempotency-Key "
        "enforcement as a proxy-wasm HTTP filter for Envoy",
        "org.opencontainers.image.version": tag,
        "org.opencontainers.image.created": CREATED,
    }
    manifest = canonical(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {"mediaType": CONFIG_TYPE, "digest": digest(config), "size": len(config)},
            "layers": [{"mediaType": LAYER_TYPE, "digest": digest(layer), "size": len(layer)}],
            "annotations": annotations,
        }
    )
    blobs = {digest(b): b for b in (layer, config, manifest)}
    return blobs, digest(manifest), len(manifest)


def write_layout(out, blobs, manifest_digest, manifest_size, tag):
    """A fresh OCI image layout: oci-layout, index.json (the tag as ref.name), blobs/sha256/."""
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(os.path.join(out, "blobs", "sha256"))
    for d, data in blobs.items():
        with open(os.path.join(out, "blobs", "sha256", d.split(":", 1)[1]), "wb") as f:
            f.write(data)
    with open(os.path.join(out, "oci-layout"), "wb") as f:
        f.write(canonical({"imageLayoutVersion": "1.0.0"}))
    index = {
        "schemaVersion": 2,
        "mediaType": INDEX_TYPE,
        "manifests": [
            {
                "mediaType": MANIFEST_TYPE,
                "digest": manifest_digest,
                "size": manifest_size,
                "annotations": {"org.opencontainers.image.ref.name": tag},
            }
        ],
    }
    with open(os.path.join(out, "index.json"), "wb") as f:
        f.write(canonical(index))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wasm", required=True, help="the filter .wasm to pack")
    ap.add_argument("--out", required=True, help="OCI layout directory (replaced)")
    ap.add_argument("--tag", required=True, help="the image tag (ref.name in index.json)")
    args = ap.parse_args()
    try:
        with open(args.wasm, "rb") as f:
            wasm = f.read()
    except OSError as e:
        sys.exit(f"oci_image: cannot read the filter: {e} (run `make build-filter`)")
    if wasm[:4] != b"\0asm":
        sys.exit(f"oci_image: {args.wasm} is not a WebAssembly module")
    blobs, manifest_digest, size = build(wasm, args.tag)
    write_layout(args.out, blobs, manifest_digest, size, args.tag)
    print(f"image    oci:{args.out}:{args.tag}")
    print(f"module   sha256:{hashlib.sha256(wasm).hexdigest()}  (plugin.wasm, Envoy code.remote sha256)")
    print(f"manifest {manifest_digest}  (WasmPlugin / EnvoyExtensionPolicy sha256)")


if __name__ == "__main__":
    main()
