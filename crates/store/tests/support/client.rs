//! An HTTP/2 client of the service that presents a client certificate.

use super::service::Service;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2::SendRequest;
use hyper::{Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use idemgate_core::store::remote;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use tokio_rustls::rustls;

/// A rustls client configuration trusting `ca` for the service, presenting `cert`/`key` if given,
/// offering ALPN `h2` as Envoy's cluster does.
pub fn tls_client_config(ca: &Path, identity: Option<(&Path, &Path)>) -> Arc<rustls::ClientConfig> {
    let pem = |path: &Path| std::fs::read(path).expect("read a PEM file");
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut pem(ca).as_slice()) {
        roots
            .add(cert.expect("a CA certificate"))
            .expect("a usable CA");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots);
    let mut config = match identity {
        Some((cert, key)) => {
            let chain = rustls_pemfile::certs(&mut pem(cert).as_slice())
                .collect::<Result<Vec<_>, _>>()
                .expect("client certificate");
            let key = rustls_pemfile::private_key(&mut pem(key).as_slice())
                .expect("client key")
                .expect("a private key in the file");
            builder
                .with_client_auth_cert(chain, key)
                .expect("client identity")
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Arc::new(config)
}

/// An HTTP/2 client, as an Envoy cluster with `http2_protocol_options` connects: inside mutual
/// TLS with the service's client certificate, or h2c (prior knowledge) to a plaintext service.
#[derive(Clone)]
pub struct Client {
    send: SendRequest<Full<Bytes>>,
    authority: String,
}

impl Client {
    /// To `service`, presenting the client certificate its CA signed (or h2c when it runs
    /// `--plaintext-unauthenticated`).
    pub async fn connect(service: &Service) -> Client {
        match &service.pki {
            Some(pki) => {
                let config = tls_client_config(&pki.ca, Some((&pki.client_cert, &pki.client_key)));
                Client::connect_tls(service.addr, config)
                    .await
                    .expect("mutual TLS with the service's own client certificate")
            }
            None => Client::connect_plain(service.addr)
                .await
                .expect("h2c connection"),
        }
    }

    /// h2c with prior knowledge.
    pub async fn connect_plain(addr: SocketAddr) -> Result<Client, String> {
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| e.to_string())?;
        // As Envoy does upstream: without it Nagle and delayed ACKs add ~40 ms per request.
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        Client::handshake(TokioIo::new(tcp), format!("http://{addr}")).await
    }

    /// HTTP/2 inside TLS with `config` (server name 127.0.0.1). The TLS handshake may succeed
    /// on the client's side and the server still refuse (TLS 1.3 checks the client certificate
    /// after the client's last flight): then the HTTP/2 handshake or the first request fails.
    pub async fn connect_tls(
        addr: SocketAddr,
        config: Arc<rustls::ClientConfig>,
    ) -> Result<Client, String> {
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| e.to_string())?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake: {e}"))?;
        Client::handshake(TokioIo::new(tls), format!("https://{addr}")).await
    }

    async fn handshake<T>(io: TokioIo<T>, authority: String) -> Result<Client, String>
    where
        T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Client { send, authority })
    }

    pub async fn post(&self, path: &str, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
        let request = Request::post(format!("{}{path}", self.authority))
            .header("content-type", remote::CONTENT_TYPE)
            .body(Full::new(Bytes::from(body)))
            .expect("request");
        self.send(request).await
    }

    pub async fn get(&self, path: &str) -> (StatusCode, String) {
        let request = Request::get(format!("{}{path}", self.authority))
            .body(Full::new(Bytes::new()))
            .expect("request");
        let (status, body) = self.send(request).await;
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// A POST that may get no answer (the service died): the error instead of a panic.
    pub async fn try_post(
        &mut self,
        path: &str,
        body: Vec<u8>,
    ) -> Result<StatusCode, hyper::Error> {
        let request = Request::post(format!("{}{path}", self.authority))
            .header("content-type", remote::CONTENT_TYPE)
            .body(Full::new(Bytes::from(body)))
            .expect("request");
        self.send.ready().await?;
        let response = self.send.send_request(request).await?;
        let status = response.status();
        response.into_body().collect().await?;
        Ok(status)
    }

    async fn send(&self, request: Request<Full<Bytes>>) -> (StatusCode, Vec<u8>) {
        let mut send = self.send.clone();
        send.ready().await.expect("connection ready");
        let response = send.send_request(request).await.expect("response");
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes()
            .to_vec();
        (status, body)
    }

    /// One operation: the status and the decoded answer (a test fails on an undecodable body).
    pub async fn op(&self, request: &remote::Request) -> (StatusCode, remote::Response) {
        let (status, body) = self.post("/v1/op", request.encode()).await;
        let response = remote::Response::decode(&body)
            .unwrap_or_else(|e| panic!("undecodable answer ({status}): {e}: {body:?}"));
        (status, response)
    }
}
