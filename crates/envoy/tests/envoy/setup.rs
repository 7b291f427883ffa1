//! What a test Envoy looks like: [`Setup`], and the YAML it becomes.
//!
//! Every test Envoy has the re-entry shape (as every shipped configuration): the
//! bootstrap extension `envoy.bootstrap.internal_listener`, the outer listener `main` whose route
//! configuration is the YAML anchor `&routes`, the internal listener [`REENTRY`] sharing it
//! (`*routes`) with the marker filter first, then the filters that follow idemgate in the outer
//! chain, then the router (never the wasm filter), and the cluster [`REENTRY`] whose one endpoint
//! is that listener. A filter configured with `"upstream": {"reentry": "idemgate_reentry"}` sends
//! its detached exchanges through it.

use std::path::{Path, PathBuf};

/// The name of the re-entry listener and of the cluster whose one endpoint it is.
pub const REENTRY: &str = "idemgate_reentry";

/// The response header the re-entry listener's marker filter sets on every answer of the inner
/// pass: `%RESPONSE_CODE_DETAILS%;%UPSTREAM_REQUEST_ATTEMPT_COUNT%`.
pub const REENTRY_MARKER: &str = "x-idemgate-reentry";

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
    /// Another build of the filter (default: [`crate::harness::filter_wasm`]).
    pub wasm: Option<PathBuf>,
    /// Serve the listener through file-based LDS (`lds.yaml`, rewritable with
    /// [`crate::harness::Envoy::reload_listener`]) on this fixed port, instead of a static listener on port 0.
    pub lds_port: Option<u16>,
    /// More clusters (YAML list items at column 0, e.g. the remote store's; see `fleet`).
    pub clusters: String,
    /// The virtual host's routes (YAML list items at column 0), replacing [`default_routes`].
    /// Shared by the outer and the re-entry listener.
    pub routes: Option<String>,
    /// `http_filters` items (column 0) before idemgate in the outer chain (e.g. `jwt_authn`).
    pub before_filters: String,
    /// `http_filters` items (column 0) after the buffer filter in the outer chain and before the
    /// router in the re-entry chain: the filters that follow idemgate.
    pub after_filters: String,
    /// Lines at the level of the (shared) route configuration, e.g.
    /// `request_headers_to_remove: [x-user-id]`.
    pub route_config_extra: String,
    /// Lines at the level of both HTTP connection managers (outer and re-entry), e.g. an
    /// `internal_address_config`.
    pub hcm_extra: String,
    /// Lines of the main connection manager only (e.g. its `xff_num_trusted_hops`).
    pub main_hcm_extra: String,
    /// The re-entry listener's marker filter (default: on; off = a misconfigured listener).
    pub reentry_marker: bool,
    /// The marker's `append_action` (default: the shipped `OVERWRITE_IF_EXISTS_OR_ADD`).
    pub reentry_marker_action: &'static str,
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
            before_filters: String::new(),
            after_filters: String::new(),
            route_config_extra: String::new(),
            hcm_extra: String::new(),
            main_hcm_extra: String::new(),
            reentry_marker: true,
            reentry_marker_action: "OVERWRITE_IF_EXISTS_OR_ADD",
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
      # The listener settings of examples/envoy/envoy.yaml.
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
{before}      - name: envoy.filters.http.wasm
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
        hcm_extra = indent(&format!("{}\n{}", setup.hcm_extra, setup.main_hcm_extra), 6),
        route_config_extra = indent(&setup.route_config_extra, 8),
        routes = indent(&routes, 10),
        before = indent(&setup.before_filters, 6),
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
        format!(
            r#"      - name: envoy.filters.http.header_mutation
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation
          mutations:
            response_mutations:
            - append:
                header: {{ key: x-idemgate-reentry, value: "%RESPONSE_CODE_DETAILS%;%UPSTREAM_REQUEST_ATTEMPT_COUNT%" }}
                append_action: {}
"#,
            setup.reentry_marker_action
        )
    } else {
        String::new()
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

pub fn bootstrap(setup: &Setup, wasm: &Path, lds_path: Option<&Path>) -> String {
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
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{ http2_protocol_options: {{}} }}
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
