//! A real Envoy per test: its own temp dir and YAML, listener and admin on port 0 (discovered through
//! `--admin-address-path` and the admin `/listeners`), `--concurrency 2`, the freshly built filter,
//! readiness by polling admin `/ready`, and a Drop that kills the process it started (by its PID,
//! through the `Child` handle) even when the test fails — printing the tail of Envoy's log then.
//! What the Envoy looks like (its YAML) is [`crate::setup`]'s.

use crate::client::get;
use crate::setup::{bootstrap, lds_yaml};
pub use crate::setup::{yaml, Setup};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

static DIRS: AtomicUsize = AtomicUsize::new(0);

/// The built filter: `IDEMGATE_FILTER_WASM`, else the Makefile's output path.
pub fn filter_wasm() -> PathBuf {
    let path = std::env::var_os("IDEMGATE_FILTER_WASM")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../target/wasm32-wasip1/release/idemgate_envoy.wasm")
        });
    assert!(
        path.is_file(),
        "the filter is not built at {} — run `make build-filter` (or set IDEMGATE_FILTER_WASM)",
        path.display()
    );
    path
}

/// The `envoy` binary, or a failure that says how to get it.
pub fn envoy_binary() -> &'static str {
    let ok = Command::new("envoy")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "`envoy` is not installed or not on PATH — run `make setup-envoy`"
    );
    "envoy"
}

/// A fresh temp dir, removed on drop unless the test failed.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "idemgate-envoy-{}-{}-{nanos}",
            std::process::id(),
            DIRS.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept for inspection: {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// `envoy --mode validate`: whether the config was accepted, and everything Envoy printed.
pub fn validate(config_path: &Path, env: &[(String, String)]) -> (bool, String) {
    let out = Command::new(envoy_binary())
        .args([
            "--mode",
            "validate",
            "--disable-hot-restart",
            "-l",
            "info",
            "-c",
        ])
        .arg(config_path)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("run envoy --mode validate");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

pub struct Envoy {
    child: Child,
    pub port: u16,
    pub admin: u16,
    log: PathBuf,
    // Declared last: dropped after the process is gone.
    _dir: TempDir,
}

impl Envoy {
    pub fn start(setup: &Setup) -> Envoy {
        Envoy::try_start(setup).unwrap_or_else(|log| panic!("{log}"))
    }

    /// Starts Envoy, or gives what it said when it exits before becoming ready (a configuration it
    /// refuses).
    pub fn try_start(setup: &Setup) -> Result<Envoy, String> {
        let binary = envoy_binary();
        let wasm = setup.wasm.clone().unwrap_or_else(filter_wasm);
        let dir = TempDir::new();
        let config = dir.0.join("envoy.yaml");
        let lds = dir.0.join("lds.yaml");
        if let Some(port) = setup.lds_port {
            std::fs::write(&lds, lds_yaml(setup, &wasm, port)).expect("lds.yaml");
        }
        let lds_path = setup.lds_port.map(|_| lds.as_path());
        std::fs::write(&config, bootstrap(setup, &wasm, lds_path)).expect("write envoy.yaml");
        let admin_path = dir.0.join("admin-address");
        let log = dir.0.join("envoy.log");
        let log_file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(binary)
            .arg("-c")
            .arg(&config)
            .arg("--concurrency")
            .arg(setup.concurrency.to_string())
            .args(["--disable-hot-restart", "-l", "warn", "--drain-time-s", "5"])
            .args(["--component-log-level", "wasm:info"])
            .arg("--admin-address-path")
            .arg(&admin_path)
            .envs(setup.vm_env.iter().map(|(k, v)| (k, v)))
            .stdout(log_file.try_clone().expect("log file"))
            .stderr(log_file)
            .spawn()
            .expect("start envoy");
        let mut envoy = Envoy {
            child,
            port: 0,
            admin: 0,
            log,
            _dir: dir,
        };
        envoy.wait_ready(&admin_path)?;
        Ok(envoy)
    }

    /// Rewrites the LDS file (atomically: write, then rename over it, which Envoy watches) with
    /// this setup's listener.
    pub fn reload_listener(&self, setup: &Setup) {
        let port = setup.lds_port.expect("an LDS setup");
        let wasm = setup.wasm.clone().unwrap_or_else(filter_wasm);
        let next = self._dir.0.join("lds.next.yaml");
        std::fs::write(&next, lds_yaml(setup, &wasm, port)).expect("write");
        std::fs::rename(&next, self._dir.0.join("lds.yaml")).expect("rename lds.yaml");
    }

    /// Envoy's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Any stat at the admin `/stats` (counters and gauges), by its full name.
    pub fn stat(&self, name: &str) -> Option<u64> {
        let stats = get(self.admin, "/stats").ok()?.text();
        let prefix = format!("{name}: ");
        stats
            .lines()
            .find_map(|line| line.strip_prefix(&prefix)?.trim().parse().ok())
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Polls (admin address file → `/ready` → `/listeners`) until Envoy serves; returns its log
    /// at once if Envoy exits.
    fn wait_ready(&mut self, admin_path: &Path) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "envoy exited ({status}) before becoming ready:\n{}",
                    self.log_tail()
                ));
            }
            assert!(
                Instant::now() < deadline,
                "envoy not ready after 60 s:\n{}",
                self.log_tail()
            );
            if self.admin == 0 {
                if let Some(port) = std::fs::read_to_string(admin_path)
                    .ok()
                    .and_then(|a| a.trim().rsplit_once(':').and_then(|(_, p)| p.parse().ok()))
                {
                    self.admin = port;
                }
            }
            if self.admin != 0 && get(self.admin, "/ready").is_ok_and(|r| r.status == 200) {
                if let Some(port) = self.listener_port() {
                    self.port = port;
                    return Ok(());
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn listener_port(&self) -> Option<u16> {
        let listeners = get(self.admin, "/listeners?format=json").ok()?;
        let json: serde_json::Value = serde_json::from_slice(&listeners.body).ok()?;
        json["listener_statuses"]
            .as_array()?
            .iter()
            .find(|l| l["name"] == "main")?["local_address"]["socket_address"]["port_value"]
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p != 0)
    }

    /// The value of the filter's counter `idemgate.<name>` at the admin `/stats`.
    pub fn counter(&self, name: &str) -> u64 {
        let stats = get(self.admin, "/stats").expect("admin /stats").text();
        let suffix = format!("idemgate.{name}: ");
        stats
            .lines()
            .find_map(|line| {
                let at = line.find(&suffix)?;
                line[at + suffix.len()..].trim().parse().ok()
            })
            .unwrap_or_else(|| panic!("no counter idemgate.{name} at /stats"))
    }

    /// `refused` share refusals, all for the share of `reason` (`identity`, `address`, `route`,
    /// `bytes`): counted in `quota_exceeded` and in `quota_exceeded.<reason>` alone, and each
    /// logged once with the payer's hashed tag (" holds its <reason> share"), the log never naming
    /// `hidden` (what the payer is in clear: an address, a route's path).
    pub fn assert_share_refusals(&self, reason: &str, refused: usize, hidden: &str) {
        assert_eq!(self.counter("quota_exceeded"), refused as u64);
        for share in ["identity", "address", "route", "bytes"] {
            let expected = if share == reason { refused as u64 } else { 0 };
            let name = format!("quota_exceeded.{share}");
            assert_eq!(self.counter(&name), expected, "{name}");
        }
        let log = self.log_text();
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("429 scope_quota_exceeded: payer "))
            .collect();
        assert_eq!(lines.len(), refused, "one line per refusal");
        let holds = format!(" holds its {reason} share");
        assert!(
            lines
                .iter()
                .all(|l| l.contains(&holds) && !l.contains(hidden)),
            "{}",
            lines[0]
        );
    }

    /// Resident memory of the Envoy process, from /proc.
    pub fn rss_kib(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).expect("/proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .expect("VmRSS")
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- envoy log tail ---\n{}", self.log_tail());
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
