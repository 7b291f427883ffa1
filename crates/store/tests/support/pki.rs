//! Certificates for mutual TLS between a client (Envoy, a test) and the store service,
//! made at test time with the `openssl` command into a directory the caller owns: a CA, a server
//! certificate it signed for `localhost` and `127.0.0.1`, a client certificate it signed, and a
//! second, unrelated CA with a client certificate of its own (which the service must refuse).
//! Standard library only, so the Envoy fleet tests include this file as well (`#[path]`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The files [`make`] wrote (PEM).
#[derive(Debug, Clone)]
pub struct Pki {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// Signed by another CA: a well-formed certificate the service must not accept.
    pub stranger_cert: PathBuf,
    pub stranger_key: PathBuf,
}

impl Pki {
    /// The service's flags for this PKI.
    pub fn service_args(&self) -> Vec<String> {
        let arg = |p: &Path| p.display().to_string();
        vec![
            "--tls-cert".into(),
            arg(&self.server_cert),
            "--tls-key".into(),
            arg(&self.server_key),
            "--client-ca".into(),
            arg(&self.ca),
        ]
    }
}

/// The name the server certificate carries besides `IP:127.0.0.1` (Envoy's `sni` and SAN match).
pub const SERVER_NAME: &str = "localhost";

/// Runs the `openssl` command in `dir` (the PostgreSQL and Redis TLS helpers use it too).
pub fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl runs (apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const EC_KEY: [&str; 5] = [
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
];

fn ca(dir: &Path, name: &str) {
    let (key, pem, subject) = (
        format!("{name}.key"),
        format!("{name}.pem"),
        format!("/CN=idemgate test {name}"),
    );
    let mut args = vec!["req", "-x509"];
    args.extend(EC_KEY);
    args.extend([
        "-keyout",
        &key,
        "-out",
        &pem,
        "-days",
        "2",
        "-subj",
        &subject,
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    openssl(dir, &args);
}

/// `name.key` and `name.pem`, signed by the CA `ca`, with the extensions `ext`.
fn leaf(dir: &Path, ca: &str, name: &str, ext: &str) {
    let (key, csr, pem, ext_file, subject) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.pem"),
        format!("{name}.ext"),
        format!("/CN=idemgate test {name}"),
    );
    let mut args = vec!["req"];
    args.extend(EC_KEY);
    args.extend(["-keyout", &key, "-out", &csr, "-subj", &subject]);
    openssl(dir, &args);
    std::fs::write(dir.join(&ext_file), ext).expect("write the extensions file");
    let (ca_pem, ca_key) = (format!("{ca}.pem"), format!("{ca}.key"));
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_pem,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-out",
            &pem,
            "-days",
            "2",
            "-extfile",
            &ext_file,
        ],
    );
}

/// Makes the certificates in `dir`.
pub fn make(dir: &Path) -> Pki {
    ca(dir, "ca");
    ca(dir, "other-ca");
    let leaf_ext = "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n";
    leaf(
        dir,
        "ca",
        "server",
        &format!(
            "{leaf_ext}subjectAltName=DNS:{SERVER_NAME},IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
        ),
    );
    let client_ext =
        format!("{leaf_ext}subjectAltName=DNS:idemgate-envoy\nextendedKeyUsage=clientAuth\n");
    leaf(dir, "ca", "client", &client_ext);
    leaf(dir, "other-ca", "stranger", &client_ext);
    Pki {
        ca: dir.join("ca.pem"),
        server_cert: dir.join("server.pem"),
        server_key: dir.join("server.key"),
        client_cert: dir.join("client.pem"),
        client_key: dir.join("client.key"),
        stranger_cert: dir.join("stranger.pem"),
        stranger_key: dir.join("stranger.key"),
    }
}

/// The Envoy cluster's `transport_socket` (YAML, indented for a cluster at column 0): the client
/// certificate presented, the service's certificate checked against the CA and its name.
pub fn envoy_transport_socket(pki: &Pki) -> String {
    format!(
        r#"  transport_socket:
    name: envoy.transport_sockets.tls
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
      sni: {SERVER_NAME}
      common_tls_context:
        alpn_protocols: [h2]
        tls_certificates:
        - certificate_chain: {{ filename: "{}" }}
          private_key: {{ filename: "{}" }}
        validation_context:
          trusted_ca: {{ filename: "{}" }}
          match_typed_subject_alt_names:
          - san_type: DNS
            matcher: {{ exact: {SERVER_NAME} }}
"#,
        pki.client_cert.display(),
        pki.client_key.display(),
        pki.ca.display()
    )
}
