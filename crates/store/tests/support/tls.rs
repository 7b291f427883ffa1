//! Redis over TLS for the tests: certificates made with `openssl` at test time (a test CA, a
//! server certificate for 127.0.0.1, a client certificate, and an unrelated CA), and a
//! `redis-server` that listens only on a TLS port (`--port 0 --tls-port`) with an ACL user and
//! the default user off. Killed by PID on drop, like [`super::Redis`].

use super::free_port;
use super::pki::openssl;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The ACL user and its password.
pub const USER: &str = "idemgate";
pub const PASSWORD: &str = "s3cret-Pa55";

/// PEM files in a temporary directory.
pub struct Certs {
    dir: tempfile::TempDir,
}

impl Certs {
    pub fn make() -> Certs {
        let dir = tempfile::tempdir().expect("temp dir");
        let certs = Certs { dir };
        certs.ca("ca");
        certs.ca("other-ca");
        certs.leaf(
            "server",
            "serverAuth",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        );
        certs.leaf("client", "clientAuth", "");
        certs
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn arg(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    fn ca(&self, name: &str) {
        openssl(
            self.dir.path(),
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-days",
                "2",
                "-subj",
                &format!("/CN=idemgate test {name}"),
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.pem"),
            ],
        );
    }

    fn leaf(&self, name: &str, usage: &str, extra: &str) {
        let ext = format!(
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage={usage}\n{extra}"
        );
        std::fs::write(self.path(&format!("{name}.ext")), ext).expect("write ext");
        openssl(
            self.dir.path(),
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-subj",
                &format!("/CN={name}"),
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
            ],
        );
        openssl(
            self.dir.path(),
            &[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                &format!("{name}.ext"),
                "-out",
                &format!("{name}.pem"),
            ],
        );
    }
}

/// A `redis-server` on a TLS port only, with the ACL user [`USER`].
pub struct TlsRedis {
    child: Child,
    pub port: u16,
    dir: tempfile::TempDir,
}

impl TlsRedis {
    /// `auth_clients`: Redis requires a client certificate from the test CA.
    pub fn start(certs: &Certs, auth_clients: bool) -> TlsRedis {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port(false);
        let log = dir.path().join("redis.log");
        let password = format!(">{PASSWORD}");
        let child = Command::new("redis-server")
            .args([
                "--port",
                "0",
                "--tls-port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--tls-cert-file", &certs.arg("server.pem")])
            .args(["--tls-key-file", &certs.arg("server.key")])
            .args(["--tls-ca-cert-file", &certs.arg("ca.pem")])
            .args([
                "--tls-auth-clients",
                if auth_clients { "yes" } else { "no" },
            ])
            .args(["--user", USER, "on", &password, "~*", "&*", "+@all"])
            .args(["--user", "default", "off"])
            .arg("--dir")
            .arg(dir.path())
            .arg("--logfile")
            .arg(&log)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts (apt-get install redis-server)");
        let redis = TlsRedis { child, port, dir };
        redis.wait_ready(&log);
        redis
    }

    /// The log says so (a plain PING cannot reach a TLS-only port).
    fn wait_ready(&self, log: &Path) {
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            if text.contains("Ready to accept connections") {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let text = std::fs::read_to_string(log).unwrap_or_default();
        panic!("TLS redis-server on {} not ready; log:\n{text}", self.port);
    }

    /// `rediss://USER:password@127.0.0.1:port`.
    pub fn url(&self, password: &str) -> String {
        format!("rediss://{USER}:{password}@127.0.0.1:{}", self.port)
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
