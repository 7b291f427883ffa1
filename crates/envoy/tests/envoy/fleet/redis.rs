//! `redis-server`s for the fleet: one on a free port, killed by PID on drop, or a Redis Cluster
//! of three.

use super::free_port;
use crate::harness::TempDir;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

pub(crate) fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid}");
}

/// A `redis-server` on a free port, killed by PID on drop.
pub(crate) struct Redis {
    pub(crate) child: Child,
    pub(crate) port: u16,
    args: Vec<String>,
    dir: TempDir,
}

impl Redis {
    /// A node of a Redis Cluster (its bus port, port + 10000, must be free too).
    fn start_cluster_node() -> Redis {
        let port = (0..200)
            .map(|_| free_port())
            .find(|p| *p < 55_000 && TcpListener::bind(("127.0.0.1", p + 10_000)).is_ok())
            .expect("a free port with a free bus port");
        let args = [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--appendonly",
            "no",
        ];
        Redis::start_with(port, &args)
    }

    pub(crate) fn start_with(port: u16, args: &[&str]) -> Redis {
        let dir = TempDir::new();
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let child = Redis::spawn(port, &args, &dir);
        let redis = Redis {
            child,
            port,
            args,
            dir,
        };
        redis.wait_pong();
        redis
    }

    pub(crate) fn spawn(port: u16, args: &[String], dir: &TempDir) -> Child {
        Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--protected-mode", "no"])
            .args(args)
            .arg("--dir")
            .arg(&dir.0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts (make setup-redis)")
    }

    /// SIGKILL (only what the AOF holds survives), then the same server on the same port and dir.
    pub(crate) fn crash_and_restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = Redis::spawn(self.port, &self.args, &self.dir);
        self.wait_pong();
    }

    fn wait_pong(&self) {
        let port = self.port;
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
                let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                let mut reply = [0u8; 16];
                if s.write_all(b"PING\r\n").is_ok()
                    && s.read(&mut reply)
                        .is_ok_and(|n| reply[..n].starts_with(b"+PONG"))
                {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer PING"
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Three Redis Cluster primaries with every slot assigned (`redis-cli --cluster create`).
pub(crate) fn redis_cluster() -> Vec<Redis> {
    let nodes: Vec<Redis> = (0..3).map(|_| Redis::start_cluster_node()).collect();
    let out = Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)))
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .expect("redis-cli runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !nodes.iter().all(|n| {
        Command::new("redis-cli")
            .args(["-p", &n.port.to_string(), "cluster", "info"])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("cluster_state:ok"))
    }) {
        assert!(Instant::now() < deadline, "cluster never reached state ok");
        thread::sleep(Duration::from_millis(100));
    }
    nodes
}
