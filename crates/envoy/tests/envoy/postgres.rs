//! A real PostgreSQL for the fleet tests: `initdb` once per test run into a template
//! kept under cargo's target tmp dir, copied into a fresh temp dir per server, `postgres` on a free
//! port of 127.0.0.1 (TCP only, trust auth, user `idemgate`), killed by PID on drop — the postmaster
//! and the backends it forked — also when a test fails.
//!
//! As root, PostgreSQL refuses to run: the data dir belongs to the `postgres` user and the
//! processes are started with its uid and gid (what `runuser -u postgres` does, without a process
//! of its own in between, so the PID killed is the postmaster's). `make setup-postgres` installs
//! Debian's `postgresql`, whose binaries live in /usr/lib/postgresql/<version>/bin: they are
//! found there when not on PATH.

use crate::harness::TempDir;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

/// A PostgreSQL binary (`initdb`, `postgres`): on PATH, else Debian's versioned directory.
fn binary(name: &str) -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|dir| dir.join(name))
        .find(|p| p.is_file());
    let debian = || {
        let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("bin").join(name))
            .filter(|p| p.is_file())
            .collect();
        found.sort();
        found.pop()
    };
    on_path
        .or_else(debian)
        .unwrap_or_else(|| panic!("`{name}` is not installed — run `make setup-postgres`"))
}

/// The uid and gid to run PostgreSQL as: the `postgres` user when we are root, else our own.
fn identity() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let id = |flag: &str| -> u32 {
        let out = Command::new("id")
            .args([flag, "postgres"])
            .output()
            .expect("id runs");
        assert!(
            out.status.success(),
            "running as root needs a `postgres` user (make setup-postgres creates it)"
        );
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("a numeric id")
    };
    Some((id("-u"), id("-g")))
}

fn command(program: &Path) -> Command {
    let mut command = Command::new(program);
    if let Some((uid, gid)) = identity() {
        command.uid(uid).gid(gid);
    }
    command
}

fn give_away(path: &Path) {
    if let Some((uid, gid)) = identity() {
        std::os::unix::fs::chown(path, Some(uid), Some(gid)).expect("chown to postgres");
    }
}

/// The initialised data dir every server copies: made once per run (and kept in cargo's target
/// tmp dir, so the next run skips `initdb` too).
fn template() -> &'static Path {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        // Named by the server's version: another PostgreSQL could not read it.
        let version = Command::new(binary("postgres"))
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let version: String = version
            .split_whitespace()
            .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))
            .unwrap_or("unknown")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '.')
            .collect();
        let dest = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("idemgate-postgres-template-{version}"));
        if dest.join("PG_VERSION").is_file() {
            return dest;
        }
        let work = TempDir::new();
        give_away(&work.0);
        let data = work.0.join("data");
        let out = command(&binary("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", "idemgate", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .args(["--no-instructions", "--locale=C"])
            .current_dir(&work.0)
            .output()
            .expect("initdb runs");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Copied as root keeps the postgres owner; renamed into place whole, so a run stopped
        // half-way never leaves a broken template behind.
        let partial = dest.with_extension(format!("partial-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&partial);
        std::fs::create_dir_all(dest.parent().expect("parent")).expect("target tmp dir");
        copy_dir(&data, &partial);
        if std::fs::rename(&partial, &dest).is_err() {
            // Another test binary got there first.
            let _ = std::fs::remove_dir_all(&partial);
        }
        dest
    })
}

fn copy_dir(from: &Path, to: &Path) {
    let ok = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "cp -a {} {}", from.display(), to.display());
}

/// One PostgreSQL server, killed (with its backends) by PID on drop.
pub struct Postgres {
    child: Option<Child>,
    pub port: u16,
    dir: TempDir,
}

impl Postgres {
    pub fn start() -> Postgres {
        let dir = TempDir::new();
        give_away(&dir.0);
        copy_dir(template(), &dir.0.join("data"));
        let mut postgres = Postgres {
            child: None,
            port: super::free_port(),
            dir,
        };
        postgres.spawn();
        postgres
    }

    fn log(&self) -> PathBuf {
        self.dir.0.join("postgres.log")
    }

    fn spawn(&mut self) {
        let log = std::fs::File::create(self.log()).expect("log file");
        give_away(&self.log());
        // fsync off: the tests kill processes, never the machine — what a SIGKILLed server had
        // written is in the page cache and read back on restart.
        let child = command(&binary("postgres"))
            .arg("-D")
            .arg(self.dir.0.join("data"))
            .args(["-p", &self.port.to_string()])
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(["-c", "unix_socket_directories="])
            .args(["-c", "fsync=off", "-c", "full_page_writes=off"])
            .args(["-c", "max_connections=200", "-c", "shared_buffers=32MB"])
            .current_dir(&self.dir.0)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("postgres starts (make setup-postgres)");
        self.child = Some(child);
        self.wait_ready();
    }

    /// Until the server has said, since its last start, that it accepts connections.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let log = std::fs::read_to_string(self.log()).unwrap_or_default();
            if log.contains("ready to accept connections") {
                return;
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("postgres exited ({status}):\n{log}");
            }
            assert!(
                Instant::now() < deadline,
                "postgres not ready after 30 s:\n{log}"
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn url(&self) -> String {
        format!("postgres://idemgate@127.0.0.1:{}/postgres", self.port)
    }

    /// The postmaster and the processes it forked (backends, checkpointer, …), by PID.
    fn pids(&self) -> Vec<u32> {
        let Some(child) = self.child.as_ref() else {
            return Vec::new();
        };
        let parent = child.id();
        let mut pids = vec![parent];
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            // pid (comm) state ppid …: comm may hold spaces, so read after the last ')'.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            if ppid == Some(parent) {
                pids.push(pid);
            }
        }
        pids
    }

    fn signal_all(&self, sig: &str) {
        for pid in self.pids() {
            let _ = Command::new("kill")
                .args([sig, &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
    }

    /// Every PostgreSQL process frozen (SIGSTOP): connections stay open, nothing answers.
    pub fn stop(&self) {
        self.signal_all("-STOP");
    }

    pub fn cont(&self) {
        self.signal_all("-CONT");
    }

    /// SIGKILL to the postmaster and every backend (no shutdown, no checkpoint), then the same
    /// server on the same port and data dir: what it had committed comes back by WAL replay.
    pub fn crash_and_restart(&mut self) {
        self.kill();
        let _ = std::fs::remove_file(self.dir.0.join("data/postmaster.pid"));
        self.spawn();
    }

    fn kill(&mut self) {
        let pids = self.pids();
        for pid in &pids {
            let _ = Command::new("kill")
                .args(["-CONT", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // The backends are not our children: wait until they are gone (shared memory released,
        // the port free) before a restart or the dir's removal.
        let deadline = Instant::now() + Duration::from_secs(10);
        while pids.iter().skip(1).any(|pid| alive(*pid)) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Whether `pid` runs (a zombie waiting for whoever adopted it does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z")
    })
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.kill();
    }
}
