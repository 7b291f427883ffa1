//! `redis-server` processes for the tests: one on a free port, or three cluster primaries, each
//! killed by PID on drop.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

pub(crate) fn signal(pid: u32, sig: &str) {
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
