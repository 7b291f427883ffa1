//! A real PostgreSQL for the tests: `initdb` in a temporary directory, `postgres` on a free port
//! (TCP on 127.0.0.1 only, its socket in the same directory), killed by PID when the handle drops,
//! also when a test fails. Needs PostgreSQL's server binaries (`initdb`, `postgres`) and `psql`;
//! the TLS helpers need the `openssl` command.
//!
//! Root: `initdb` and `postgres` refuse to run as root, and these tests run as root in CI. Then the
//! data directory is handed (chown) to the `postgres` system user (the Debian package creates it)
//! and both programs run as that user: the child process switches uid/gid itself before it
//! executes (`CommandExt::uid`/`gid`), so the PID the test holds is the postmaster's, with no
//! `su`/`runuser` process in between that a signal would hit instead. Run as any other user, they
//! run as that user.
//!
//! Signals go to the postmaster and to each of its children (by PID, listed with `pgrep -P` while
//! the postmaster is stopped, so it forks no new one meanwhile): SIGSTOP must freeze the backends
//! that serve open connections too, and a SIGKILL must leave no orphaned backend holding the
//! shared memory a restart needs. (A process group would not do: every backend calls `setsid`.)

use super::pki::openssl;
use super::{service_binary, Service};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The role `initdb` creates (trust authentication: the tests' database is theirs alone).
pub const USER: &str = "idemgate";
/// The database the service uses.
pub const DATABASE: &str = "idemgate";

/// One PostgreSQL server, killed (the whole process group) on drop.
pub struct Postgres {
    child: Option<Child>,
    pub port: u16,
    dir: tempfile::TempDir,
    /// Extra `-c name=value` settings (TLS), kept for restarts.
    settings: Vec<String>,
}

/// The uid and gid to run PostgreSQL as: `postgres`'s when the tests run as root.
fn run_as() -> Option<(u32, u32)> {
    let id = |args: &[&str]| -> Option<u32> {
        let out = Command::new("id").args(args).output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    if id(&["-u"])? != 0 {
        return None;
    }
    let uid = id(&["-u", "postgres"]).expect("running as root: a `postgres` system user to run PostgreSQL as (apt-get install postgresql)");
    let gid = id(&["-g", "postgres"]).expect("the postgres user's group");
    Some((uid, gid))
}

fn as_owner(command: &mut Command) -> &mut Command {
    if let Some((uid, gid)) = run_as() {
        command.uid(uid).gid(gid);
    }
    command
}

/// Hands `path` to the user PostgreSQL runs as.
pub fn chown(path: &Path) {
    if let Some((uid, gid)) = run_as() {
        std::os::unix::fs::chown(path, Some(uid), Some(gid)).expect("chown to postgres");
    }
}

impl Postgres {
    pub fn start() -> Postgres {
        Postgres::start_with(Vec::new())
    }

    /// A server with extra `-c` settings (`ssl=on`, …); files they name may live in [`dir`].
    pub fn start_with(settings: Vec<String>) -> Postgres {
        let postgres = Postgres::init();
        postgres.finish_start(settings)
    }

    /// `initdb` only: a directory to put files in (certificates) before [`finish_start`].
    pub fn init() -> Postgres {
        let dir = tempfile::tempdir().expect("temp dir");
        chown(dir.path());
        let out = as_owner(&mut Command::new("initdb"))
            .arg("-D")
            .arg(dir.path().join("data"))
            .args(["-U", USER, "--auth=trust", "--no-sync", "-E", "UTF8"])
            .current_dir(dir.path())
            .output()
            .expect("initdb runs (apt-get install postgresql)");
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Postgres {
            child: None,
            port: super::free_port(false),
            dir,
            settings: Vec::new(),
        }
    }

    pub fn finish_start(mut self, settings: Vec<String>) -> Postgres {
        self.settings = settings;
        self.spawn();
        self.psql_in("postgres", &format!("CREATE DATABASE {DATABASE}"));
        self
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("log file");
        let mut command = Command::new("postgres");
        as_owner(&mut command)
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-p", &self.port.to_string()])
            .arg("-k")
            .arg(self.dir.path())
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "max_connections=100",
            ])
            .args(self.settings.iter().flat_map(|s| ["-c", s.as_str()]))
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log);
        let child = command.spawn().expect("postgres starts");
        self.child = Some(child);
        self.wait_ready();
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("postgres.log")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let ok = Command::new("psql")
                .args(self.psql_args("postgres"))
                .args(["-Atc", "SELECT 1"])
                .stderr(Stdio::null())
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
            if ok {
                return;
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("postgres exited ({status}); log:\n{}", self.log());
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "postgres on {} did not accept connections; log:\n{}",
            self.port,
            self.log()
        );
    }

    fn psql_args(&self, database: &str) -> Vec<String> {
        [
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-U",
            USER,
            "-d",
            database,
        ]
        .map(String::from)
        .to_vec()
    }

    /// One SQL command in the tests' database (plain TCP); its unaligned output, trimmed.
    pub fn psql(&self, sql: &str) -> String {
        self.psql_in(DATABASE, sql)
    }

    pub fn psql_in(&self, database: &str, sql: &str) -> String {
        let out = Command::new("psql")
            .args(self.psql_args(database))
            .args(["-Atc", sql])
            .env("PGSSLMODE", "disable")
            .output()
            .expect("psql runs");
        assert!(
            out.status.success(),
            "psql {sql:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A file of SQL, in one transaction (`--single-transaction`, as crates/store/README.md says to).
    pub fn psql_file(&self, database: &str, file: &Path) -> std::process::Output {
        Command::new("psql")
            .args(self.psql_args(database))
            .arg("--single-transaction")
            .arg("-f")
            .arg(file)
            .env("PGSSLMODE", "disable")
            .output()
            .expect("psql runs")
    }

    /// The service's URL for this server (plain TCP).
    pub fn url(&self) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/{DATABASE}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// SIGSTOP to the postmaster and every backend: connections stay open, nothing answers.
    pub fn stop(&self) {
        signal(self.pid(), "-STOP");
        for child in children(self.pid()) {
            let _ = quiet_signal(child, "-STOP");
        }
    }

    pub fn cont(&self) {
        for child in children(self.pid()) {
            let _ = quiet_signal(child, "-CONT");
        }
        signal(self.pid(), "-CONT");
    }

    /// SIGKILL (no shutdown: what was committed is in the WAL), then the same server again on the
    /// same port and directory (crash recovery replays the WAL).
    pub fn crash_and_restart(&mut self) {
        self.crash_and_restart_later();
        self.restart();
    }

    /// SIGKILL only; [`Postgres::restart`] brings it back.
    pub fn crash_and_restart_later(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = child.id();
            let _ = quiet_signal(pid, "-STOP");
            let backends = children(pid);
            for backend in &backends {
                let _ = quiet_signal(*backend, "-KILL");
            }
            let _ = child.kill();
            let _ = child.wait();
            // Wait until no backend is left holding the port or the shared memory (they are not
            // ours to reap: once the postmaster is gone, init does).
            let deadline = Instant::now() + Duration::from_secs(10);
            while backends.iter().any(|b| alive(*b)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    pub fn restart(&mut self) {
        assert!(
            self.child.is_none(),
            "restart after crash_and_restart_later"
        );
        self.spawn();
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.crash_and_restart_later();
    }
}

fn signal(pid: u32, sig: &str) {
    let status = quiet_signal(pid, sig).expect("kill runs");
    assert!(status.success(), "kill {sig} {pid}");
}

fn quiet_signal(pid: u32, sig: &str) -> std::io::Result<std::process::ExitStatus> {
    Command::new("kill")
        .args([sig, &pid.to_string()])
        .stderr(Stdio::null())
        .status()
}

/// The postmaster's children (its backends and auxiliary processes), by PID.
fn children(pid: u32) -> Vec<u32> {
    let out = Command::new("pgrep")
        .args(["-P", &pid.to_string()])
        .output()
        .expect("pgrep runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Whether `pid` still exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// The service on `--engine postgres --postgres url`, with `env` set, killed by PID on drop.
pub fn service(url: &str, extra: &[&str], env: &[(&str, &str)]) -> Service {
    let mut command = Command::new(service_binary());
    command
        .args([
            "--listen",
            "127.0.0.1:0",
            "--engine",
            "postgres",
            "--postgres",
            url,
        ])
        .args(extra)
        .envs(env.iter().copied());
    Service::launch(command, true)
}

/// Runs the service expecting it to refuse to start: its exit code and stderr.
pub fn refused(url: &str, extra: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(service_binary())
        .args([
            "--listen",
            "127.0.0.1:0",
            "--engine",
            "postgres",
            "--postgres",
            url,
            // What these tests refuse is about PostgreSQL, not the service's own listener.
            "--plaintext-unauthenticated",
        ])
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .expect("the service runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("listening"), "it started: {stdout}");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Certificates made with the `openssl` command: a CA, a server certificate it signed for
/// `IP:127.0.0.1` (and nothing else), and an unrelated CA.
pub struct Certs {
    pub ca: PathBuf,
    pub other_ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
}

/// Makes the certificates in `dir`; the server's key is handed to the user PostgreSQL runs as
/// (it refuses a key others can read).
pub fn make_certs(dir: &Path) -> Certs {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    for name in ["ca", "other-ca"] {
        let mut args = vec!["req", "-x509"];
        args.extend(ec);
        let (key, pem, subject) = (
            format!("{name}.key"),
            format!("{name}.pem"),
            format!("/CN=idemgate test {name}"),
        );
        args.extend([
            "-keyout", &key, "-out", &pem, "-days", "2", "-subj", &subject,
        ]);
        args.extend([
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        openssl(dir, &args);
    }
    let mut args = vec!["req"];
    args.extend(ec);
    args.extend([
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=idemgate test server",
    ]);
    openssl(dir, &args);
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n\
         keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .expect("write server.ext");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ],
    );
    let key = dir.join("server.key");
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod server.key");
    chown(&key);
    chown(&dir.join("server.crt"));
    Certs {
        ca: dir.join("ca.pem"),
        other_ca: dir.join("other-ca.pem"),
        server_cert: dir.join("server.crt"),
        server_key: key,
    }
}

/// A server with TLS on (`ssl=on`, the certificates of [`make_certs`]).
pub fn start_tls() -> (Postgres, Certs) {
    let postgres = Postgres::init();
    let certs = make_certs(postgres.dir());
    let settings = vec![
        "ssl=on".to_string(),
        format!("ssl_cert_file={}", certs.server_cert.display()),
        format!("ssl_key_file={}", certs.server_key.display()),
    ];
    (postgres.finish_start(settings), certs)
}
