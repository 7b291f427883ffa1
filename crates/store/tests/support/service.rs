//! The built `idemgate-store` binary, started with certificates made for it (mutual TLS) and
//! killed by PID on drop.

use super::pki::{self, Pki};
use super::redis_server::signal;
use std::io::BufRead;
use std::io::BufReader;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
