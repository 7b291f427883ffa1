//! Mutual TLS: the service's only authentication. Whoever reaches `POST /v1/op` can
//! claim, complete or release any record, so every connection must present a client certificate
//! that chains to the configured CA (the Envoys' cluster certificate) before any request is read.
//! rustls with the ring provider, as for PostgreSQL; ALPN offers `h2` then `http/1.1`, and the
//! server serves whichever the client speaks.

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why the TLS settings cannot be used; the service does not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read or parsed as PEM.
    Read {
        flag: &'static str,
        path: PathBuf,
        why: String,
    },
    /// The file holds no item of the kind the flag needs.
    Empty {
        flag: &'static str,
        path: PathBuf,
        what: &'static str,
    },
    /// rustls refused the material (a CA it cannot use, a key that does not match the cert).
    Refused { what: &'static str, why: String },
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::Read { flag, path, why } => {
                write!(f, "{flag} {}: {why}", path.display())
            }
            TlsError::Empty { flag, path, what } => {
                write!(f, "{flag} {}: no {what} in it", path.display())
            }
            TlsError::Refused { what, why } => write!(f, "{what}: {why}"),
        }
    }
}

impl std::error::Error for TlsError {}

fn read(flag: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError::Read {
        flag,
        path: path.into(),
        why: e.to_string(),
    })
}

fn certificates(flag: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(flag, path)?;
    let certs = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Read {
            flag,
            path: path.into(),
            why: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Empty {
            flag,
            path: path.into(),
            what: "PEM certificate",
        });
    }
    Ok(certs)
}

/// The server's TLS configuration: `cert` (chain) and `key` presented, client certificates
/// required and verified against `client_ca`.
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: &Path,
) -> Result<Arc<ServerConfig>, TlsError> {
    let chain = certificates("--tls-cert", cert)?;
    let key_pem = read("--tls-key", key)?;
    let private: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .map_err(|e| TlsError::Read {
            flag: "--tls-key",
            path: key.into(),
            why: e.to_string(),
        })?
        .ok_or_else(|| TlsError::Empty {
            flag: "--tls-key",
            path: key.into(),
            what: "PEM private key",
        })?;
    let mut roots = RootCertStore::empty();
    for ca in certificates("--client-ca", client_ca)? {
        roots.add(ca).map_err(|e| TlsError::Refused {
            what: "--client-ca",
            why: e.to_string(),
        })?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| TlsError::Refused {
            what: "--client-ca",
            why: e.to_string(),
        })?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Refused {
            what: "TLS versions",
            why: e.to_string(),
        })?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, private)
        .map_err(|e| TlsError::Refused {
            what: "--tls-cert and --tls-key",
            why: e.to_string(),
        })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
