#!/usr/bin/env python3
"""Certificates for mutual TLS between Envoy and idemgate-store, made with the `openssl`
command: a CA, a server certificate it signs for the service's names, and a client certificate it
signs for the Envoys. The fleet demo and the fleet bench import it; operators can run it to try
the Kubernetes example (a real deployment issues these from its own CA, e.g. cert-manager).

    python3 examples/store/certs.py OUT_DIR [--server-name NAME ...] [--server-ip IP ...] [--days N]

Writes OUT_DIR/{ca.pem, ca.key, store.pem, store.key, envoy.pem, envoy.key}. Default names:
localhost and 127.0.0.1.
"""
import argparse
import os
import subprocess
import sys

EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(out_dir, *args):
    done = subprocess.run(["openssl", *args], cwd=out_dir, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)}: {done.stderr.strip()}")


def _leaf(out_dir, name, subject, extensions, days):
    _openssl(out_dir, "req", *EC, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject)
    with open(os.path.join(out_dir, f"{name}.ext"), "w") as f:
        f.write(extensions)
    _openssl(out_dir, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{name}.pem", "-days", str(days), "-extfile", f"{name}.ext")
    os.chmod(os.path.join(out_dir, f"{name}.key"), 0o600)


def make(out_dir, server_names=("localhost",), server_ips=("127.0.0.1",), days=2):
    """Makes the CA, the service's and the Envoys' certificates in `out_dir`; returns their paths
    (absolute): ca, store_cert, store_key, envoy_cert, envoy_key."""
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    _openssl(out_dir, "req", "-x509", *EC, "-keyout", "ca.key", "-out", "ca.pem", "-days", str(days),
             "-subj", "/CN=idemgate-store CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    os.chmod(os.path.join(out_dir, "ca.key"), 0o600)
    leaf = "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
    sans = ",".join([f"DNS:{n}" for n in server_names] + [f"IP:{ip}" for ip in server_ips])
    _leaf(out_dir, "store", "/CN=idemgate-store", f"{leaf}subjectAltName={sans}\nextendedKeyUsage=serverAuth\n", days)
    _leaf(out_dir, "envoy", "/CN=idemgate-envoy",
          f"{leaf}subjectAltName=DNS:idemgate-envoy\nextendedKeyUsage=clientAuth\n", days)
    path = lambda name: os.path.join(out_dir, name)  # noqa: E731
    return {"ca": path("ca.pem"), "store_cert": path("store.pem"), "store_key": path("store.key"),
            "envoy_cert": path("envoy.pem"), "envoy_key": path("envoy.key")}


def store_args(paths):
    """The service's flags for these certificates."""
    return ["--tls-cert", paths["store_cert"], "--tls-key", paths["store_key"],
            "--client-ca", paths["ca"]]


def transport_socket(paths, server_name="localhost", alpn=("h2",)):
    """The Envoy cluster's `transport_socket` (as a dict, for JSON configurations): the Envoys'
    client certificate presented, the service's certificate checked against the CA and its name.
    `alpn`: the protocols offered, the cluster's HTTP version (`h2`, or `http/1.1`)."""
    return {
        "name": "envoy.transport_sockets.tls",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
            "sni": server_name,
            "common_tls_context": {
                "alpn_protocols": list(alpn),
                "tls_certificates": [{"certificate_chain": {"filename": paths["envoy_cert"]},
                                      "private_key": {"filename": paths["envoy_key"]}}],
                "validation_context": {
                    "trusted_ca": {"filename": paths["ca"]},
                    "match_typed_subject_alt_names": [
                        {"san_type": "DNS", "matcher": {"exact": server_name}}],
                },
            },
        },
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--server-name", action="append", help="a DNS name of the service (repeat)")
    ap.add_argument("--server-ip", action="append", help="an IP address of the service (repeat)")
    ap.add_argument("--days", type=int, default=365)
    args = ap.parse_args()
    names = args.server_name or ["localhost"]
    ips = args.server_ip if args.server_ip is not None else ([] if args.server_name else ["127.0.0.1"])
    paths = make(args.out_dir, names, ips, args.days)
    for name, path in paths.items():
        print(f"{name}: {path}")


if __name__ == "__main__":
    sys.exit(main())
