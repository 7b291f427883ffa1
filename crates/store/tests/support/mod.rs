//! Real parts for the service's tests: `redis-server` processes (single, or three cluster
//! primaries) on free ports in temporary directories, the built `idemgate-store` binary with
//! certificates made for it by `openssl` (mutual TLS), and an HTTP/2 client that
//! presents a client certificate. Every process is killed by PID when its handle drops, also when
//! a test fails.
#![allow(dead_code)]

pub mod pki;
pub mod postgres;
pub mod tls;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2::SendRequest;
use hyper::{Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use idemgate_core::client::scope::{Scope, StorageKey};
use idemgate_core::record::{OwnerToken, StoredBody, StoredResponse};
use idemgate_core::request::fingerprint::Fingerprint;
use idemgate_core::request::key::IdempotencyKey;
use idemgate_core::store::protocol::ClaimOutcome;
use idemgate_core::store::remote;
use idemgate_core::time::Span;
use pki::Pki;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_rustls::rustls;

/// A port free on 127.0.0.1 (and, for cluster nodes, its bus port + 10000 too).
pub fn free_port(with_bus: bool) -> u16 {
    for _ in 0..200 {
        let Ok(listener) = TcpListener::bind("127.0.0.1:0") else {
            continue;
        };
        let Ok(addr) = listener.local_addr() else {
            continue;
        };
        let port = addr.port();
        if with_bus && (port > 55_000 || TcpListener::bind(("127.0.0.1", port + 10_000)).is_err()) {
            continue;
        }
        return port;
    }
    panic!("no free port");
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill {sig} {pid}");
}

/// One `redis-server`, killed by PID on drop.
pub struct Redis {
    child: Option<Child>,
    pub port: u16,
    dir: tempfile::TempDir,
    args: Vec<String>,
}

impl Redis {
    pub fn start(aof: bool) -> Redis {
        let mut args = vec![];
        if aof {
            args.extend(["--appendonly", "yes", "--appendfsync", "always"].map(String::from));
        } else {
            args.extend(["--appendonly", "no"].map(String::from));
        }
        Redis::start_with(free_port(false), args)
    }

    pub fn start_cluster_node() -> Redis {
        let args = [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            "5000",
            "--appendonly",
            "no",
        ]
        .map(String::from)
        .to_vec();
        Redis::start_with(free_port(true), args)
    }

    fn start_with(port: u16, args: Vec<String>) -> Redis {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut redis = Redis {
            child: None,
            port,
            dir,
            args,
        };
        redis.spawn();
        redis
    }

    fn spawn(&mut self) {
        let log = self.dir.path().join("redis.log");
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--protected-mode", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(&log)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts (apt-get install redis-server)");
        self.child = Some(child);
        wait_for_pong(self.port, &log);
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn stop(&self) {
        signal(self.pid(), "-STOP");
    }

    pub fn cont(&self) {
        signal(self.pid(), "-CONT");
    }

    /// SIGKILL (no shutdown save: only what the AOF already holds survives), then the same
    /// server again on the same port and directory.
    pub fn crash_and_restart(&mut self) {
        self.kill();
        self.spawn();
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = signal_quiet(child.id(), "-CONT");
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

fn signal_quiet(pid: u32, sig: &str) -> std::io::Result<std::process::ExitStatus> {
    Command::new("kill")
        .args([sig, &pid.to_string()])
        .stderr(Stdio::null())
        .status()
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

fn wait_for_pong(port: u16, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
            let mut reply = [0u8; 64];
            if stream.write_all(b"PING\r\n").is_ok() {
                if let Ok(n) = stream.read(&mut reply) {
                    if reply[..n].starts_with(b"+PONG") {
                        return;
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = std::fs::read_to_string(log).unwrap_or_default();
    panic!("redis-server on {port} did not answer PING; log:\n{log}");
}

/// Three cluster primaries with all 16384 slots assigned.
pub struct Cluster {
    pub nodes: Vec<Redis>,
}

impl Cluster {
    pub fn start() -> Cluster {
        let nodes: Vec<Redis> = (0..3).map(|_| Redis::start_cluster_node()).collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("redis-cli --cluster create runs");
        assert!(
            out.status.success(),
            "cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ok = nodes
                .iter()
                .all(|n| n.cli(&["cluster", "info"]).contains("cluster_state:ok"));
            if ok {
                break;
            }
            assert!(Instant::now() < deadline, "cluster never reached state ok");
            std::thread::sleep(Duration::from_millis(100));
        }
        Cluster { nodes }
    }

    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(Redis::url)
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The binary under test: cargo names it for integration tests; examples (the load run) get it
/// from `IDEMGATE_STORE_BIN`.
pub fn service_binary() -> String {
    match option_env!("CARGO_BIN_EXE_idemgate-store") {
        Some(path) => path.to_string(),
        None => std::env::var("IDEMGATE_STORE_BIN")
            .expect("IDEMGATE_STORE_BIN names the service binary"),
    }
}

/// The built service, killed by PID on drop.
pub struct Service {
    child: Option<Child>,
    pub addr: SocketAddr,
    /// The service's stderr goes to a file (a pipe nobody reads would block it when full).
    log: tempfile::NamedTempFile,
    /// Its certificates and the client's (`None`: started `--plaintext-unauthenticated`).
    pub pki: Option<Pki>,
    _certs: Option<tempfile::TempDir>,
}

impl Service {
    /// On Redis at `redis_urls`, with mutual TLS.
    pub fn start(redis_urls: &str, extra: &[&str]) -> Service {
        let mut command = Command::new(service_binary());
        command
            .args(["--listen", "127.0.0.1:0", "--redis", redis_urls])
            .args(extra);
        Service::launch(command, true)
    }

    /// Runs `command` (the binary with its engine flags) on port 0 — with certificates made for
    /// it and the mutual TLS flags when `tls`, else as given — and reads the address it printed.
    pub fn launch(mut command: Command, tls: bool) -> Service {
        let (pki, certs) = if tls {
            let dir = tempfile::tempdir().expect("temp dir");
            let pki = pki::make(dir.path());
            command.args(pki.service_args());
            (Some(pki), Some(dir))
        } else {
            (None, None)
        };
        let log = tempfile::NamedTempFile::new().expect("log file");
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(log.reopen().expect("log file"))
            .spawn()
            .expect("the service starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut service = Service {
            child: Some(child),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            log,
            pki,
            _certs: certs,
        };
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let scheme = if tls { "https://" } else { "http://" };
        let addr = line
            .trim()
            .strip_prefix("idemgate-store: listening on ")
            .and_then(|rest| rest.strip_prefix(scheme))
            .and_then(|a| a.parse().ok());
        match addr {
            Some(addr) => service.addr = addr,
            None => panic!("service did not start: {line:?}, {}", service.take_stderr()),
        }
        service
    }

    /// The service's PKI (it was started with mutual TLS).
    pub fn pki(&self) -> &Pki {
        self.pki.as_ref().expect("the service runs with mutual TLS")
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn terminate(&self) {
        signal(self.pid(), "-TERM");
    }

    /// Waits for the process to exit (after [`Service::terminate`]), at most `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        let child = self.child.as_mut()?;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn take_stderr(&mut self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

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

/// Generous: these tests check outcomes, not speed, on a shared 2-core machine.
pub const SLOW_OK: &str = "5s";

/// Owner token number `n`.
pub fn owner(n: u32) -> OwnerToken {
    let mut token = [0u8; 16];
    token[..4].copy_from_slice(&n.to_be_bytes());
    OwnerToken(token)
}

/// A 70 KB answer of every byte value, so a lossy conversion anywhere would show.
pub fn stored_response(seed: u8) -> StoredResponse {
    let body: Vec<u8> = (0..70_000u32)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect();
    StoredResponse {
        status: 201,
        headers: vec![
            ("content-type".into(), "application/octet-stream".into()),
            ("location".into(), format!("/orders/{seed}")),
        ],
        body: StoredBody::Kept(body),
        seal: None,
    }
}

/// `n` concurrent claims of each key (owner `k << 16 | i`), spread over `clients` connections:
/// per key, the number of Forward and Conflict answers (anything else fails the test).
pub async fn concurrent_claims(
    clients: &[Client],
    keys: &[impl AsRef<str>],
    n: u32,
) -> Vec<(usize, usize)> {
    let mut tasks = Vec::new();
    for (k, name) in keys.iter().enumerate() {
        for i in 0..n {
            let client = clients[i as usize % clients.len()].clone();
            let request = claim(skey(name.as_ref()), 7, (k as u32) << 16 | i);
            tasks.push((k, tokio::spawn(async move { client.op(&request).await })));
        }
    }
    let mut counts = vec![(0, 0); keys.len()];
    for (k, task) in tasks {
        match task.await.unwrap() {
            (
                StatusCode::OK,
                remote::Response::Claim(ClaimOutcome::Forward {
                    takeover: false, ..
                }),
            ) => counts[k].0 += 1,
            (StatusCode::OK, remote::Response::Claim(ClaimOutcome::Conflict { retry_after })) => {
                assert!(retry_after > Span(0) && retry_after <= Span::from_secs(30));
                counts[k].1 += 1
            }
            other => panic!("unexpected answer to a claim: {other:?}"),
        }
    }
    counts
}

/// The answer to `request` once the engine is back (restarted, resumed): a typed failure (503) is
/// retried for up to 20 s while the service reconnects; any other answer ends the wait.
pub async fn once_recovered(
    client: &Client,
    request: &remote::Request,
    what: &str,
) -> remote::Response {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match client.op(request).await {
            (StatusCode::OK, answer) => return answer,
            (status, remote::Response::Failed(_)) if Instant::now() < deadline => {
                assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{what}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => panic!("{what}: {other:?}"),
        }
    }
}

/// A real storage key (SHA-256 of scope, method, route and key), so keys spread over cluster slots.
pub fn skey(name: &str) -> StorageKey {
    let key = IdempotencyKey::parse(name.as_bytes()).expect("a valid key");
    let scope = Scope {
        source: "header:authorization",
        value: b"Bearer fleet-test",
    };
    StorageKey::derive(scope, "POST", "/orders", &key)
}

pub fn claim(key: StorageKey, fingerprint: u8, owner: u32) -> remote::Request {
    remote::Request::Claim {
        key,
        fingerprint: Fingerprint([fingerprint; 32]),
        owner: self::owner(owner),
        lease: Span::from_secs(30),
        ttl: Span::from_secs(3600),
        payers: vec![],
        fill: None,
    }
}
