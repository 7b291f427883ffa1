#!/usr/bin/env python3
"""Packs the static idemgate-store binary as an OCI container image, offline, into an OCI layout dir.

The image is one layer: /usr/local/bin/idemgate-store (a static binary: no libc, no loader),
/etc/passwd and /etc/group naming the non-root user 65532 ("nonroot"), and nothing else — no
shell, no package manager. The config runs the binary as 65532:65532 with the binary as the
entrypoint, listening on 0.0.0.0:8787 unless told otherwise.

Reproducible like the filter's image (crates/envoy/scripts/oci_image.py, whose helpers this
reuses): same binary in, same manifest digest out. Tar entries are sorted, with fixed mtime,
owner and modes in USTAR format; gzip carries no time or name; the config's `created` is fixed;
JSON is serialized with sorted keys and no spaces.

Prints the manifest digest (what a Deployment pins with `image: …@sha256:<hex>`). Usage:
    oci_image.py --binary target/x86_64-unknown-linux-musl/release/idemgate-store \
                 --out target/oci/idemgate-store --tag 0.1.0
"""

import argparse
import importlib.util
import io
import os
import struct
import sys
import tarfile

# The filter's image script holds the reproducible OCI helpers; reuse them (under a name of their
# own: this file has the same name) without leaving a __pycache__ in the source tree.
sys.dont_write_bytecode = True
_spec = importlib.util.spec_from_file_location(
    "envoy_oci_image",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../envoy/scripts/oci_image.py"),
)
oci = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(oci)

LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
BINARY = "usr/local/bin/idemgate-store"
USER = 65532
PASSWD = f"nonroot:x:{USER}:{USER}:nonroot:/nonexistent:/sbin/nologin\n".encode()
GROUP = f"nonroot:x:{USER}:\n".encode()
PORT = 8787


def interpreter(binary):
    """The ELF's PT_INTERP (its dynamic loader) or None: a static binary has none."""
    if binary[:4] != b"\x7fELF" or binary[4] != 2 or binary[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    phoff, = struct.unpack_from("<Q", binary, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", binary, 0x36)
    for i in range(phnum):
        kind, = struct.unpack_from("<I", binary, phoff + i * phentsize)
        if kind == 3:  # PT_INTERP
            offset, = struct.unpack_from("<Q", binary, phoff + i * phentsize + 8)
            size, = struct.unpack_from("<Q", binary, phoff + i * phentsize + 32)
            return binary[offset:offset + size].rstrip(b"\0").decode(errors="replace")
    return None


def layer_tar(binary):
    """Directories and files, sorted by path, owned by root, with nothing that varies."""
    entries = [
        ("etc/", None, 0o755),
        ("etc/group", GROUP, 0o644),
        ("etc/passwd", PASSWD, 0o644),
        ("usr/", None, 0o755),
        ("usr/local/", None, 0o755),
        ("usr/local/bin/", None, 0o755),
        (BINARY, binary, 0o755),
    ]
    assert [e[0] for e in entries] == sorted(e[0] for e in entries)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data, mode in entries:
            info = tarfile.TarInfo(name.rstrip("/"))
            info.mtime = oci.EPOCH
            info.mode = mode
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.type = tarfile.REGTYPE
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def build(binary, tag):
    """Returns (blobs: {digest: bytes}, manifest digest, manifest size)."""
    tar = layer_tar(binary)
    layer = oci.gzip_bytes(tar)
    config = oci.canonical(
        {
            "architecture": "amd64",
            "os": "linux",
            "created": oci.CREATED,
            "config": {
                "User": f"{USER}:{USER}",
                "Entrypoint": ["/" + BINARY],
                "Env": [f"IDEMGATE_STORE_LISTEN=0.0.0.0:{PORT}"],
                "ExposedPorts": {f"{PORT}/tcp": {}},
            },
            "rootfs": {"type": "layers", "diff_ids": [oci.digest(tar)]},
        }
    )
    manifest = oci.canonical(
        {
            "schemaVersion": 2,
            "mediaType": oci.MANIFEST_TYPE,
            "config": {"mediaType": oci.CONFIG_TYPE, "digest": oci.digest(config), "size": len(config)},
            "layers": [{"mediaType": LAYER_TYPE, "digest": oci.digest(layer), "size": len(layer)}],
            "annotations": {
                "org.opencontainers.image.title": "idemgate-store",
                "org.opencontainers.image.description": "idemgate-store: the idemgate remote "
                "store protocol over Redis, Redis Cluster or PostgreSQL, for a fleet of Envoys",
                "org.opencontainers.image.version": tag,
                "org.opencontainers.image.created": oci.CREATED,
            },
        }
    )
    blobs = {oci.digest(b): b for b in (layer, config, manifest)}
    return blobs, oci.digest(manifest), len(manifest)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", required=True, help="the static idemgate-store binary")
    ap.add_argument("--out", required=True, help="OCI layout directory (replaced)")
    ap.add_argument("--tag", required=True, help="the image tag (ref.name in index.json)")
    args = ap.parse_args()
    try:
        with open(args.binary, "rb") as f:
            binary = f.read()
    except OSError as e:
        sys.exit(f"oci_image: cannot read the binary: {e} (run `make image-store`)")
    try:
        loader = interpreter(binary)
    except (ValueError, struct.error) as e:
        sys.exit(f"oci_image: {args.binary}: {e}")
    if loader is not None:
        sys.exit(f"oci_image: {args.binary} is dynamically linked (loader {loader}): the image "
                 "has no libc; build it for x86_64-unknown-linux-musl")
    blobs, manifest_digest, size = build(binary, args.tag)
    oci.write_layout(args.out, blobs, manifest_digest, size, args.tag)
    print(f"image    oci:{args.out}:{args.tag}")
    print(f"manifest {manifest_digest}  (image: …/idemgate-store@{manifest_digest})")


if __name__ == "__main__":
    main()
