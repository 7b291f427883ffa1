//! The remote store: what it keeps its records in (Redis, PostgreSQL, both) and the store service
//! in front of it, with mutual TLS.

use super::free_port;
use super::pki::{self, Pki};
use super::postgres::Postgres;
use super::redis::{signal, Redis};
use crate::harness::TempDir;
use std::io::BufRead;
use std::io::BufReader;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// The remote store as the filter's configuration names it, with the variable holding the secret
/// that seals its answers.
pub(crate) const STORE: &str = r#""store": { "kind": "remote", "cluster": "idemgate_store", "timeout": "2s", "record_secret_env": "IDEMGATE_RECORD_SECRET" }"#;

/// The fleet's record secret: every Envoy of a fleet gets the same one in its VM's environment.
pub(crate) const RECORD_SECRET: &str = "fleet-tests-record-secret-0123456789abcdef";

/// The store service binary: `IDEMGATE_STORE_BIN`, else the Makefile's output path.
pub(crate) fn store_binary() -> PathBuf {
    let path = std::env::var_os("IDEMGATE_STORE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/release/idemgate-store")
        });
    assert!(
        path.is_file(),
        "the store service is not built at {} — run `make build-store`",
        path.display()
    );
    path
}

/// The engine the store service runs (`--engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Engine {
    Redis,
    Postgres,
    RedisPostgres,
}

/// What the service keeps its records in: a `redis-server`, a PostgreSQL, or both.
pub(crate) struct Backend {
    engine: Engine,
    pub(crate) redis: Option<Redis>,
    postgres: Option<Postgres>,
}

impl Backend {
    /// Redis (if the engine has it) without persistence.
    pub(crate) fn start(engine: Engine) -> Backend {
        Backend::start_with(engine, &["--appendonly", "no"])
    }

    /// `redis_args` for the engine's Redis (none for `postgres`).
    pub(crate) fn start_with(engine: Engine, redis_args: &[&str]) -> Backend {
        let redis =
            (engine != Engine::Postgres).then(|| Redis::start_with(free_port(), redis_args));
        let postgres = (engine != Engine::Redis).then(Postgres::start);
        Backend {
            engine,
            redis,
            postgres,
        }
    }

    /// The service's flags for this engine.
    pub(crate) fn args(&self) -> Vec<String> {
        let mut args = Vec::new();
        let engine = match self.engine {
            Engine::Redis => "redis",
            Engine::Postgres => "postgres",
            Engine::RedisPostgres => "redis+postgres",
        };
        args.extend(["--engine".to_owned(), engine.to_owned()]);
        if let Some(redis) = &self.redis {
            args.extend(["--redis".to_owned(), redis.url()]);
        }
        if let Some(postgres) = &self.postgres {
            args.extend(["--postgres".to_owned(), postgres.url()]);
        }
        args
    }

    /// The part that decides frozen (SIGSTOP): Redis on `redis`, PostgreSQL on the postgres
    /// engines (with `redis+postgres`, a claim is final only once PostgreSQL has it).
    pub(crate) fn freeze(&self) {
        match (&self.postgres, &self.redis) {
            (Some(postgres), _) => postgres.stop(),
            (None, Some(redis)) => signal(redis.child.id(), "-STOP"),
            (None, None) => unreachable!("an engine has a backend"),
        }
    }

    pub(crate) fn thaw(&self) {
        match (&self.postgres, &self.redis) {
            (Some(postgres), _) => postgres.cont(),
            (None, Some(redis)) => signal(redis.child.id(), "-CONT"),
            (None, None) => unreachable!("an engine has a backend"),
        }
    }

    /// Every process of the backend SIGKILLed, then started again on the same port and dir.
    pub(crate) fn crash_and_restart(&mut self) {
        if let Some(redis) = &mut self.redis {
            redis.crash_and_restart();
        }
        if let Some(postgres) = &mut self.postgres {
            postgres.crash_and_restart();
        }
    }
}

/// The store service on a fixed port (so Envoy's cluster still finds it after a restart), with
/// mutual TLS: its certificate, and the client certificate the Envoys present.
pub(crate) struct Store {
    pub(crate) child: Option<Child>,
    pub(crate) port: u16,
    /// The engine's flags (`--engine`, `--redis`, `--postgres`, `--cluster`).
    args: Vec<String>,
    /// The service's `--op-timeout`.
    op_timeout: &'static str,
    pub(crate) pki: Pki,
    _certs: TempDir,
}

impl Store {
    pub(crate) fn start(backend: &Backend) -> Store {
        Store::start_with(backend.args(), "300ms")
    }

    /// A service that waits on a stopped backend for up to 1.5 s (below the filter's store
    /// timeout of 2 s), so an operation made while it is stopped lands once it resumes,
    /// however slowly a loaded machine schedules the test.
    pub(crate) fn start_patient(backend: &Backend) -> Store {
        Store::start_with(backend.args(), "1500ms")
    }

    /// Redis Cluster: `urls` are its seed nodes.
    pub(crate) fn start_on_cluster(urls: String) -> Store {
        let args = ["--redis".to_owned(), urls, "--cluster".to_owned()];
        Store::start_with(args.to_vec(), "300ms")
    }

    pub(crate) fn start_with(args: Vec<String>, op_timeout: &'static str) -> Store {
        let certs = TempDir::new();
        let mut store = Store {
            child: None,
            port: free_port(),
            args,
            op_timeout,
            pki: pki::make(&certs.0),
            _certs: certs,
        };
        // A start can fail for the machine's sake, not the fleet's: the port picked is taken
        // before the service binds it (another test's connection got it as its local port), or
        // the first connection to a backend that has just started takes longer than the
        // connect timeout on a loaded machine. Another port and another try; every failure's
        // log is shown, and a third failure fails the test.
        let mut failures = Vec::new();
        for _ in 0..3 {
            match store.try_spawn() {
                Ok(()) => return store,
                Err(why) => {
                    eprintln!("the store service did not start, trying again: {why}");
                    failures.push(why);
                    store.port = free_port();
                }
            }
        }
        panic!("store did not start:\n{}", failures.join("\n"));
    }

    /// The service's log (its stderr, every start appended), kept with the test's files.
    fn log(&self) -> std::path::PathBuf {
        self._certs.0.join("store.log")
    }

    /// Starts the service again on its port (after [`Store::kill`]).
    pub(crate) fn spawn(&mut self) {
        if let Err(why) = self.try_spawn() {
            panic!("store did not start again: {why}");
        }
    }

    fn try_spawn(&mut self) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log())
            .expect("the store's log file");
        let mut child = Command::new(store_binary())
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .args(&self.args)
            .args(["--op-timeout", self.op_timeout])
            .args(self.pki.service_args())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("the store service starts");
        let mut line = String::new();
        let _ = BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line);
        if !line.contains("https://") {
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(self.log()).unwrap_or_default();
            return Err(format!("{line:?}, its log:\n{log}"));
        }
        self.child = Some(child);
        Ok(())
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The Envoy cluster of the service: HTTP/2 inside mutual TLS, as the store README says, at
    /// most 100 streams per connection (the service accepts 200: a burst over that on one
    /// connection would see streams refused, i.e. 503s, before Envoy learns the limit).
    pub(crate) fn cluster(&self) -> String {
        format!(
            r#"- name: idemgate_store
  connect_timeout: 1s
  type: STATIC
  typed_extension_protocol_options:
    envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
      "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
      explicit_http_config: {{ http2_protocol_options: {{ max_concurrent_streams: 100 }} }}
{}  load_assignment:
    cluster_name: idemgate_store
    endpoints:
    - lb_endpoints:
      - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {} }} }} }}
"#,
            pki::envoy_transport_socket(&self.pki),
            self.port
        )
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.kill();
    }
}
