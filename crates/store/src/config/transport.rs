//! `--tls-cert`, `--tls-key`, `--client-ca` or `--plaintext-unauthenticated`: how the
//! listener talks to its clients. Mutual TLS unless plaintext is asked for by name, so that no
//! service ends up unauthenticated by omission.

use super::ConfigError;
use std::path::PathBuf;

/// How the listener talks to its clients.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transport {
    /// TLS terminated by the service; every client must present a certificate that chains to
    /// `client_ca` (the Envoys' cluster certificate), or it gets no operation at all.
    MutualTls {
        cert: PathBuf,
        key: PathBuf,
        client_ca: PathBuf,
    },
    /// HTTP/1.1 and h2c without TLS or authentication: only behind
    /// `--plaintext-unauthenticated`, so nobody runs it by omission.
    PlaintextUnauthenticated,
}

pub(super) fn transport(
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    client_ca: Option<PathBuf>,
    plaintext: bool,
) -> Result<Transport, ConfigError> {
    match (cert, key, client_ca, plaintext) {
        (None, None, None, true) => Ok(Transport::PlaintextUnauthenticated),
        (_, _, _, true) => Err(ConfigError::Invalid {
            name: "--plaintext-unauthenticated",
            why: "cannot be combined with --tls-cert, --tls-key or --client-ca".into(),
        }),
        (Some(cert), Some(key), Some(client_ca), false) => Ok(Transport::MutualTls {
            cert,
            key,
            client_ca,
        }),
        (None, None, None, false) => Err(ConfigError::Invalid {
            name: "--tls-cert",
            why: "the service requires mutual TLS: give --tls-cert, --tls-key and --client-ca \
                  (anyone who reaches a plaintext port can claim, complete or release any \
                  record; --plaintext-unauthenticated serves h2c anyway)"
                .into(),
        }),
        (cert, key, client_ca, false) => {
            let missing: Vec<&str> = [
                ("--tls-cert", cert.is_none()),
                ("--tls-key", key.is_none()),
                ("--client-ca", client_ca.is_none()),
            ]
            .into_iter()
            .filter_map(|(name, missing)| missing.then_some(name))
            .collect();
            Err(ConfigError::Invalid {
                name: "--tls-cert",
                why: format!(
                    "mutual TLS needs --tls-cert, --tls-key and --client-ca; missing {}",
                    missing.join(", ")
                ),
            })
        }
    }
}
