//! A small HTTP/1.1 client over std `TcpStream`: one request per connection (`connection: close`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::os::fd::FromRawFd;
use std::time::Duration;

/// A TCP connection to `127.0.0.1:port` from the local address `from` (bind, then connect: std
/// cannot choose the source address, so this goes through libc).
fn connect_from(from: Ipv4Addr, port: u16) -> TcpStream {
    let address = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let local = address(from, 0);
    let remote = address(Ipv4Addr::LOCALHOST, port);
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: plain socket calls on a descriptor this function owns; the addresses outlive them.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        // From here on the descriptor is owned (and closed on a failed assertion).
        let stream = TcpStream::from_raw_fd(fd);
        let bound = libc::bind(fd, (&raw const local).cast(), len);
        assert_eq!(bound, 0, "bind {from}: {}", std::io::Error::last_os_error());
        let connected = libc::connect(fd, (&raw const remote).cast(), len);
        assert_eq!(
            connected,
            0,
            "connect from {from}: {}",
            std::io::Error::last_os_error()
        );
        stream
    }
}

#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn has_header(&self, name: &str) -> bool {
        self.header(name).is_some()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text()))
    }

    pub fn replayed(&self) -> bool {
        self.header("idempotent-replayed") == Some("true")
    }

    /// The problem `code` of a problem+json answer.
    pub fn problem_code(&self) -> String {
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json"),
            "not a problem: {} {}",
            self.status,
            self.text()
        );
        self.json()["code"].as_str().unwrap_or_default().to_string()
    }
}

/// A request to send.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The local address to connect from (another loopback address is another peer to Envoy).
    pub from: Option<Ipv4Addr>,
}

impl Request {
    pub fn new(method: &str, path: &str) -> Request {
        Request {
            method: method.into(),
            path: path.into(),
            headers: Vec::new(),
            body: Vec::new(),
            from: None,
        }
    }

    /// Connects from this loopback address (e.g. `127.0.0.2`): another client to Envoy.
    pub fn from(mut self, address: Ipv4Addr) -> Request {
        self.from = Some(address);
        self
    }

    pub fn post(path: &str, key: &str) -> Request {
        Request::new("POST", path)
            .header("idempotency-key", key)
            .json("{\"sku\":\"A1\",\"qty\":1}")
    }

    pub fn header(mut self, name: &str, value: &str) -> Request {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn script(self, script: &str) -> Request {
        self.header("x-script", script)
    }

    pub fn json(mut self, body: &str) -> Request {
        self.headers.retain(|(n, _)| n != "content-type");
        self.headers
            .push(("content-type".into(), "application/json".into()));
        self.body = body.as_bytes().to_vec();
        self
    }

    fn bytes(&self) -> Vec<u8> {
        let mut head = format!(
            "{} {} HTTP/1.1\r\nhost: test\r\nconnection: close\r\n",
            self.method, self.path
        );
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if !self.body.is_empty() || self.method == "POST" || self.method == "PATCH" {
            head.push_str(&format!("content-length: {}\r\n", self.body.len()));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&self.body);
        bytes
    }

    /// Sends on a fresh connection and reads the whole answer.
    pub fn send(&self, port: u16) -> Response {
        let mut stream = self.open(port);
        self.write(&mut stream);
        read_response(stream).unwrap_or_else(|e| panic!("{} {}: {e}", self.method, self.path))
    }

    pub fn open(&self, port: u16) -> TcpStream {
        let stream = match self.from {
            None => TcpStream::connect(("127.0.0.1", port)).expect("connect to Envoy"),
            Some(from) => connect_from(from, port),
        };
        let _ = stream.set_nodelay(true);
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        stream
    }

    pub fn write(&self, stream: &mut TcpStream) {
        stream.write_all(&self.bytes()).expect("write request");
    }
}

/// Reads a whole HTTP/1.1 response (content-length, chunked, or until close).
pub fn read_response(stream: impl Read) -> Result<Response, String> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).map_err(|e| e.to_string())?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status line: {line:?}"))?;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).map_err(|e| e.to_string())?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let find = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v): &(String, String)| v.clone())
    };
    let mut body = Vec::new();
    if let Some(len) = find("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(len, 0);
        reader
            .read_exact(&mut body)
            .map_err(|e| format!("body cut short: {e}"))?;
    } else if find("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).map_err(|e| e.to_string())?;
            let size =
                usize::from_str_radix(size.trim(), 16).map_err(|e| format!("chunk size: {e}"))?;
            let mut chunk = vec![0; size + 2];
            reader
                .read_exact(&mut chunk)
                .map_err(|e| format!("chunk cut short: {e}"))?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        reader.read_to_end(&mut body).map_err(|e| e.to_string())?;
    }
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// Parses a whole answer already read (`None` if it is not a complete HTTP/1.1 response).
pub fn read_response_bytes(raw: &[u8]) -> Option<Response> {
    read_response(raw).ok()
}

/// Sends a raw GET to an admin endpoint.
pub fn get(port: u16, path: &str) -> Result<Response, String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nhost: admin\r\nconnection: close\r\n\r\n").as_bytes(),
        )
        .map_err(|e| e.to_string())?;
    read_response(stream)
}

/// A burst of duplicates, as a retry storm makes them: `threads × per_thread` connections, all
/// opened first, then written at once (a barrier), then read. Every answer, or why there was none;
/// failures are reported by the caller with the rest.
pub fn burst(
    port: u16,
    request: &Request,
    threads: usize,
    per_thread: usize,
) -> Vec<Result<Response, String>> {
    use std::sync::{Arc, Barrier};
    let barrier = Arc::new(Barrier::new(threads));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let request = request.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut streams: Vec<_> = (0..per_thread).map(|_| request.open(port)).collect();
                barrier.wait();
                for stream in &mut streams {
                    request.write(stream);
                }
                streams.into_iter().map(read_response).collect::<Vec<_>>()
            })
        })
        .collect();
    workers
        .into_iter()
        .flat_map(|w| w.join().expect("worker"))
        .collect()
}
