//! A real Envoy per test: its own temp dir and YAML, listener and admin on port 0 (discovered through
//! `--admin-address-path` and the admin `/listeners`), `--concurrency 2`, the freshly built filter,
//! readiness by polling admin `/ready`, and a Drop that kills the process it started (by its PID,
//! through the `Child` handle) even when the test fails — printing the tail of Envoy's log then.
//!
//! Every test Envoy has the re-entry shape of issue 21 (as every shipped configuration): the
//! bootstrap extension `envoy.bootstrap.internal_listener`, the outer listener `main` whose route
//! configuration is the YAML anchor `&routes`, the internal listener [`REENTRY`] sharing it
//! (`*routes`) with the marker filter first, then the filters that follow idemgate in the outer
//! chain, then the router (never the wasm filter), and the cluster [`REENTRY`] whose one endpoint
//! is that listener. A filter configured with `"upstream": {"reentry": "idemgate_reentry"}` sends
//! its detached exchanges through it.

use crate::client::get;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

static DIRS: AtomicUsize = AtomicUsize::new(0);

/// The name of the re-entry listener and of the cluster whose one endpoint it is.
pub const REENTRY: &str = "idemgate_reentry";

/// The response header the re-entry listener's marker filter sets on every answer of the inner
/// pass: `%RESPONSE_CODE_DETAILS%;%UPSTREAM_REQUEST_ATTEMPT_COUNT%`.
pub const REENTRY_MARKER: &str = "x-idemgate-reentry";

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

/// What a test's Envoy looks like.
pub struct Setup {
    /// The filter's configuration (the core's JSON).
    pub filter: String,
    pub upstream_port: u16,
    /// The route timeout of the guarded routes.
    pub route_timeout: &'static str,
    /// The buffer filter's `max_request_bytes`.
    pub buffer_max: u64,
    /// Variables passed to Envoy's process and made visible to the VM.
    pub vm_env: Vec<(String, String)>,
    /// Envoy's `--concurrency` (worker threads, each with its own VM).
    pub concurrency: u32,
    /// Extra YAML lines of the plugin's `config` (e.g. `failure_policy: FAIL_RELOAD`).
    pub plugin_extra: String,
    /// Another build of the filter (default: [`filter_wasm`]).
    pub wasm: Option<PathBuf>,
    /// Serve the listener through file-based LDS (`lds.yaml`, rewritable with
    /// [`Envoy::reload_listener`]) on this fixed port, instead of a static listener on port 0.
    pub lds_port: Option<u16>,
    /// More clusters (YAML list items at column 0, e.g. the remote store's; see `fleet`).
    pub clusters: String,
    /// The virtual host's routes (YAML list items at column 0), replacing [`default_routes`].
    /// Shared by the outer and the re-entry listener.
    pub routes: Option<String>,
    /// `http_filters` items (column 0) after the buffer filter in the outer chain and before the
    /// router in the re-entry chain: the filters that follow idemgate.
    pub after_filters: String,
    /// Lines at the level of the (shared) route configuration, e.g.
    /// `request_headers_to_remove: [x-user-id]`.
    pub route_config_extra: String,
    /// Lines at the level of both HTTP connection managers (outer and re-entry), e.g. an
    /// `internal_address_config`.
    pub hcm_extra: String,
    /// The re-entry listener's marker filter (default: on; off = a misconfigured listener).
    pub reentry_marker: bool,
}

impl Setup {
    pub fn new(filter: &str, upstream_port: u16) -> Setup {
        Setup {
            filter: filter.into(),
            upstream_port,
            route_timeout: "15s",
            buffer_max: 4 * 1024 * 1024,
            vm_env: Vec::new(),
            concurrency: 2,
            plugin_extra: String::new(),
            wasm: None,
            lds_port: None,
            clusters: String::new(),
            routes: None,
            after_filters: String::new(),
            route_config_extra: String::new(),
            hcm_extra: String::new(),
            reentry_marker: true,
        }
    }
}

/// The routes of a test Envoy unless [`Setup::routes`] replaces them: `/unguarded` (the filter
/// disabled), `/direct` (a direct response), `/empty` (a cluster without endpoints) and `/` (the
/// app, with `route_timeout`).
pub fn default_routes(route_timeout: &str) -> String {
    format!(
        r#"- match: {{ prefix: "/unguarded" }}
  route: {{ cluster: app }}
  typed_per_filter_config:
    envoy.filters.http.wasm:
      "@type": type.googleapis.com/envoy.config.route.v3.FilterConfig
      disabled: true
- match: {{ prefix: "/direct" }}
  direct_response: {{ status: 200, body: {{ inline_string: "direct" }} }}
- match: {{ prefix: "/empty" }}
  route: {{ cluster: empty }}
- match: {{ prefix: "/" }}
  route: {{ cluster: app, timeout: {route_timeout} }}
"#
    )
}

fn indent(text: &str, spaces: usize) -> String {
    let pad = " ".repeat(spaces);
    text.lines().map(|l| format!("{pad}{l}\n")).collect()
}

/// The outer listener (a YAML mapping at column 0): the wasm filter, the buffer filter, the
/// filters after idemgate, the router; its route configuration is the anchor `&routes`.
pub fn listener_yaml(setup: &Setup, wasm: &Path, port: u16) -> String {
    let env_keys: Vec<String> = setup
        .vm_env
        .iter()
        .map(|(k, _)| format!("\"{k}\""))
        .collect();
    let filter = indent(&setup.filter, 16);
    let extra = indent(&setup.plugin_extra, 12);
    let routes = setup
        .routes
        .clone()
        .unwrap_or_else(|| default_routes(setup.route_timeout));
    format!(
        r#"name: main
address: {{ socket_address: {{ address: 127.0.0.1, port_value: {port} }} }}
filter_chains:
- filters:
  - name: envoy.filters.network.http_connection_manager
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: ingress
      # The listener settings of examples/envoy/envoy.yaml (issue 14).
      use_remote_address: true
      normalize_path: true
      merge_slashes: true
      path_with_escaped_slashes_action: UNESCAPE_AND_REDIRECT
{hcm_extra}      route_config: &routes
{route_config_extra}        virtual_hosts:
        - name: app
          domains: ["*"]
          routes:
{routes}      http_filters:
      - name: envoy.filters.http.wasm
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm
          config:
            name: idemgate
            root_id: idemgate
{extra}            vm_config:
              vm_id: idemgate
              runtime: envoy.wasm.runtime.v8
              code: {{ local: {{ filename: "{wasm}" }} }}
              environment_variables: {{ host_env_keys: [{env_keys}] }}
            configuration:
              "@type": type.googleapis.com/google.protobuf.StringValue
              value: |
{filter}
{after}"#,
        wasm = wasm.display(),
        env_keys = env_keys.join(", "),
        hcm_extra = indent(&setup.hcm_extra, 6),
        route_config_extra = indent(&setup.route_config_extra, 8),
        routes = indent(&routes, 10),
        after = after_idemgate(setup),
    )
}

/// The filters that follow idemgate (`http_filters` items at column 6): the buffer filter,
/// [`Setup::after_filters`], the router.
fn after_idemgate(setup: &Setup) -> String {
    format!(
        r#"      - name: envoy.filters.http.buffer
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer
          max_request_bytes: {buffer_max}
{after}      - name: envoy.filters.http.router
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
"#,
        buffer_max = setup.buffer_max,
        after = indent(&setup.after_filters, 6),
    )
}

/// The re-entry listener (a YAML mapping at column 0, after the outer listener, whose anchor
/// `&routes` it uses): the marker filter, the filters that follow idemgate, the router.
pub fn reentry_listener_yaml(setup: &Setup) -> String {
    let marker = if setup.reentry_marker {
        r#"      - name: envoy.filters.http.header_mutation
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation
          mutations:
            response_mutations:
            - append:
                header: { key: x-idemgate-reentry, value: "%RESPONSE_CODE_DETAILS%;%UPSTREAM_REQUEST_ATTEMPT_COUNT%" }
                append_action: OVERWRITE_IF_EXISTS_OR_ADD
"#
    } else {
        ""
    };
    format!(
        r#"name: {REENTRY}
internal_listener: {{}}
filter_chains:
- filters:
  - name: envoy.filters.network.http_connection_manager
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: {REENTRY}
{hcm_extra}      route_config: *routes
      http_filters:
{marker}{after}"#,
        hcm_extra = indent(&setup.hcm_extra, 6),
        after = after_idemgate(setup),
    )
}

/// The listeners (YAML list items at column 0): the outer one, then the re-entry one.
fn listeners(setup: &Setup, wasm: &Path, port: u16) -> String {
    let mut out = String::new();
    for listener in [
        listener_yaml(setup, wasm, port),
        reentry_listener_yaml(setup),
    ] {
        for (i, line) in listener.lines().enumerate() {
            out.push_str(if i == 0 { "- " } else { "  " });
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The LDS file serving both listeners on `port` (file-based dynamic listeners; one document,
/// so the re-entry listener still shares the outer one's route configuration).
pub fn lds_yaml(setup: &Setup, wasm: &Path, port: u16) -> String {
    let mut out = String::from("resources:\n");
    for line in listeners(setup, wasm, port).lines() {
        if let Some(first) = line.strip_prefix("- ") {
            out.push_str("- \"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\n  ");
            out.push_str(first);
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// The YAML of a test Envoy: a static listener on port 0 (or, with `lds_port`, file-based LDS
/// reading `lds_path`), the admin on port 0, and the clusters.
pub fn yaml(setup: &Setup, wasm: &Path) -> String {
    bootstrap(setup, wasm, None)
}

fn bootstrap(setup: &Setup, wasm: &Path, lds_path: Option<&Path>) -> String {
    let listeners = match lds_path {
        Some(_) => String::new(),
        None => format!("  listeners:\n{}", indent(&listeners(setup, wasm, 0), 2)),
    };
    let dynamic = match lds_path {
        Some(path) => format!(
            "node: {{ id: idemgate-test, cluster: idemgate-test }}\ndynamic_resources:\n  lds_config:\n    resource_api_version: V3\n    path_config_source: {{ path: \"{}\" }}\n",
            path.display()
        ),
        None => String::new(),
    };
    format!(
        r#"admin:
  address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}
bootstrap_extensions:
- name: envoy.bootstrap.internal_listener
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener
{dynamic}static_resources:
{listeners}  clusters:
  - name: app
    connect_timeout: 1s
    type: STATIC
    load_assignment:
      cluster_name: app
      endpoints:
      - lb_endpoints:
        - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {port} }} }} }}
  - name: empty
    connect_timeout: 1s
    type: STATIC
    load_assignment: {{ cluster_name: empty }}
  - name: {REENTRY}
    load_assignment:
      cluster_name: {REENTRY}
      endpoints:
      - lb_endpoints:
        - endpoint: {{ address: {{ envoy_internal_address: {{ server_listener_name: {REENTRY} }} }} }}
{clusters}"#,
        port = setup.upstream_port,
        clusters = indent(&setup.clusters, 2),
    )
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
        envoy.wait_ready(&admin_path);
        envoy
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

    /// Polls (admin address file → `/ready` → `/listeners`) until Envoy serves; fails fast if
    /// Envoy exits.
    fn wait_ready(&mut self, admin_path: &Path) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "envoy exited ({status}) before becoming ready:\n{}",
                    self.log_tail()
                );
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
                    return;
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
