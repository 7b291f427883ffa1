//! A scripted HTTP/1.1 test upstream, std only: a thread per connection, keep-alive, a count of the
//! requests it received per path and per `Idempotency-Key`. Each request says what to do through an
//! `x-script` header (Envoy forwards it), e.g. `status=503`, `delay=1500`, `body=40000`,
//! `reset` (read the request, close without answering), `cut` (headers and half the body, then
//! close), `stall=800` (headers and half the body, then wait before the rest — or before closing,
//! with `cut`), `header=set-cookie:a=b`, `raw=NAME` (a header line of raw bytes from [`RAW_HEADERS`],
//! e.g. one that smuggles CR or LF). The response body names the request's sequence number, so a
//! replay can be told from a fresh execution. It keeps the last [`SEEN_KEPT`] requests it received
//! (path and headers: [`Upstream::seen_on`], [`Upstream::seen_with_key`]), so a test can check what reached the app; a request
//! without `x-script` follows the upstream's own [`Rule`], if it has one (e.g. an authorization
//! service). See also [`crate::reset_once`].

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

#[derive(Default)]
struct Counts {
    by_key: HashMap<String, usize>,
    by_path: HashMap<String, usize>,
    total: usize,
    /// Requests whose handling (delay included) has finished.
    finished: usize,
    /// The last [`SEEN_KEPT`] requests.
    seen: VecDeque<Seen>,
}

/// How many received requests an upstream keeps for [`Upstream::seen_on`].
pub const SEEN_KEPT: usize = 2000;

/// A request as the upstream received it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Path and query.
    pub path: String,
    /// Names in lower case.
    pub headers: Vec<(String, String)>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The `Idempotency-Key` it carried.
    pub fn key(&self) -> Option<&str> {
        self.header("idempotency-key").map(|k| k.trim_matches('"'))
    }
}

/// The script of a request that has no `x-script` header, from its path and headers.
pub type Rule = fn(&Seen) -> String;

struct State {
    counts: Mutex<Counts>,
    changed: Condvar,
    sequence: AtomicUsize,
    stop: AtomicBool,
    rule: Option<Rule>,
}

pub struct Upstream {
    pub port: u16,
    state: Arc<State>,
}

impl Upstream {
    pub fn start() -> Upstream {
        Upstream::on(TcpListener::bind("127.0.0.1:0").expect("bind upstream"))
    }

    /// Serves on a listener the test bound (e.g. on a port first used while nothing listened).
    pub fn on(listener: TcpListener) -> Upstream {
        Upstream::serve(listener, None)
    }

    /// An upstream whose requests without `x-script` follow `rule`.
    pub fn with_rule(rule: Rule) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
        Upstream::serve(listener, Some(rule))
    }

    fn serve(listener: TcpListener, rule: Option<Rule>) -> Upstream {
        let port = listener.local_addr().expect("upstream address").port();
        let state = Arc::new(State {
            counts: Mutex::default(),
            changed: Condvar::new(),
            sequence: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            rule,
        });
        let accept_state = state.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                if accept_state.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let state = accept_state.clone();
                let _ = thread::Builder::new()
                    .stack_size(256 * 1024)
                    .spawn(move || serve(stream, &state));
            }
        });
        Upstream { port, state }
    }

    /// Requests received with this `Idempotency-Key` value.
    pub fn hits(&self, key: &str) -> usize {
        self.counts().by_key.get(key).copied().unwrap_or(0)
    }

    pub fn path_hits(&self, path: &str) -> usize {
        self.counts().by_path.get(path).copied().unwrap_or(0)
    }

    pub fn total(&self) -> usize {
        self.counts().total
    }

    /// The requests received with this `Idempotency-Key`, oldest first.
    pub fn seen_with_key(&self, key: &str) -> Vec<Seen> {
        let counts = self.counts();
        counts
            .seen
            .iter()
            .filter(|s| s.key() == Some(key))
            .cloned()
            .collect()
    }

    /// The requests received on this path (and query), oldest first.
    pub fn seen_on(&self, path: &str) -> Vec<Seen> {
        let counts = self.counts();
        counts
            .seen
            .iter()
            .filter(|s| s.path == path)
            .cloned()
            .collect()
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.state.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Blocks until `key` has been received `n` times (an event, not a sleep); panics after 10 s.
    pub fn wait_hits(&self, key: &str, n: usize) {
        self.wait(
            |c| c.by_key.get(key).copied().unwrap_or(0) >= n,
            &format!("{n} hit(s) of key {key}"),
        );
    }

    /// Blocks until `n` requests have been fully handled (their delay over, their answer sent).
    pub fn wait_finished(&self, n: usize) {
        self.wait(|c| c.finished >= n, &format!("{n} finished request(s)"));
    }

    fn wait(&self, done: impl Fn(&Counts) -> bool, what: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut counts = self.counts();
        while !done(&counts) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            assert!(!left.is_zero(), "upstream: timed out waiting for {what}");
            counts = self
                .state
                .changed
                .wait_timeout(counts, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Hostile header lines the upstream can be told to send (`raw=NAME`).
pub const RAW_HEADERS: &[(&str, &[u8])] = &[
    ("cr", b"etag: \"a\"\rset-cookie: injected=cr"),
    ("lf", b"etag: \"a\"\nset-cookie: injected=lf"),
    ("fold", b"etag: \"a\"\r\n set-cookie: injected=fold"),
    ("nul", b"etag: \"a\"\x00set-cookie: injected=nul"),
    (
        "split",
        b"location: /a\r\n\r\nHTTP/1.1 200 OK\r\nset-cookie: injected=split",
    ),
    // The re-entry mark of a reply Envoy made itself, sent by the app (`;` cannot be scripted).
    ("reentry-mark", b"x-idemgate-reentry: direct_response;0"),
];

/// A request as read off the connection.
pub struct Request {
    pub path: String,
    pub headers: Vec<(String, String)>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one HTTP/1.1 request (its body is read and dropped); `None` at the end of the connection.
pub fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let path = line.split_whitespace().nth(1)?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let request = Request { path, headers };
    if let Some(len) = request
        .header("content-length")
        .and_then(|v| v.parse::<usize>().ok())
    {
        let mut body = vec![0; len];
        reader.read_exact(&mut body).ok()?;
    } else if request
        .header("transfer-encoding")
        .is_some_and(|v| v.contains("chunked"))
    {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim(), 16).ok()?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
        }
    }
    Some(request)
}

fn serve(stream: TcpStream, state: &State) {
    let _ = stream.set_nodelay(true);
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let mut writer = write_half;
    let mut reader = BufReader::new(stream);
    while let Some(request) = read_request(&mut reader) {
        let sequence = state.sequence.fetch_add(1, Ordering::SeqCst) + 1;
        {
            let mut counts = state.counts.lock().unwrap_or_else(|e| e.into_inner());
            counts.total += 1;
            *counts.by_path.entry(request.path.clone()).or_default() += 1;
            if let Some(key) = request.header("idempotency-key") {
                *counts
                    .by_key
                    .entry(key.trim_matches('"').to_string())
                    .or_default() += 1;
            }
            if counts.seen.len() == SEEN_KEPT {
                counts.seen.pop_front();
            }
            counts.seen.push_back(Seen {
                path: request.path.clone(),
                headers: request.headers.clone(),
            });
            state.changed.notify_all();
        }
        let script = match (request.header("x-script"), state.rule) {
            (Some(script), _) => script.to_string(),
            (None, Some(rule)) => rule(&Seen {
                path: request.path.clone(),
                headers: request.headers.clone(),
            }),
            (None, None) => String::new(),
        };
        let keep_going = respond(&mut writer, &script, sequence);
        {
            let mut counts = state.counts.lock().unwrap_or_else(|e| e.into_inner());
            counts.finished += 1;
            state.changed.notify_all();
        }
        if !keep_going {
            let _ = writer.shutdown(Shutdown::Both);
            return;
        }
    }
}

/// Answers one request as its script says; false when the connection must close.
fn respond(writer: &mut TcpStream, script: &str, sequence: usize) -> bool {
    let mut status = 201;
    let mut body_len: Option<usize> = None;
    let mut extra: Vec<String> = Vec::new();
    let mut reset = false;
    let mut cut = false;
    let mut stall = 0u64;
    let mut raw: Vec<&[u8]> = Vec::new();
    for directive in script.split(';').map(str::trim).filter(|d| !d.is_empty()) {
        let (name, value) = directive.split_once('=').unwrap_or((directive, ""));
        match name {
            "status" => status = value.parse().unwrap_or(201),
            "delay" => thread::sleep(Duration::from_millis(value.parse().unwrap_or(0))),
            "body" => body_len = value.parse().ok(),
            "header" => extra.push(value.replacen(':', ": ", 1)),
            "reset" => reset = true,
            "cut" => cut = true,
            "stall" => stall = value.parse().unwrap_or(0),
            "raw" => raw.extend(
                RAW_HEADERS
                    .iter()
                    .filter(|(n, _)| *n == value)
                    .map(|(_, b)| *b),
            ),
            _ => {}
        }
    }
    if reset {
        return false;
    }
    let body = match body_len {
        Some(len) => {
            let mut body = format!("{{\"seq\":{sequence},\"pad\":\"");
            while body.len() + 2 < len {
                body.push('x');
            }
            body.push_str("\"}");
            body
        }
        None => format!("{{\"seq\":{sequence}}}"),
    };
    let mut head = format!(
        "HTTP/1.1 {status} Scripted\r\ncontent-type: application/json\r\ncontent-length: {}\r\nlocation: /orders/{sequence}\r\nx-upstream-only: yes\r\n",
        body.len()
    );
    for header in &extra {
        head.push_str(header);
        head.push_str("\r\n");
    }
    let mut bytes = head.into_bytes();
    for line in raw {
        bytes.extend_from_slice(line);
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(b"\r\n");
    if stall > 0 {
        bytes.extend_from_slice(&body.as_bytes()[..body.len() / 2]);
        if writer
            .write_all(&bytes)
            .and_then(|()| writer.flush())
            .is_err()
        {
            return false;
        }
        thread::sleep(Duration::from_millis(stall));
        if cut {
            return false;
        }
        return writer.write_all(&body.as_bytes()[body.len() / 2..]).is_ok()
            && writer.flush().is_ok();
    }
    if cut {
        bytes.extend_from_slice(&body.as_bytes()[..body.len() / 2]);
        let _ = writer.write_all(&bytes);
        let _ = writer.flush();
        return false;
    }
    bytes.extend_from_slice(body.as_bytes());
    writer.write_all(&bytes).is_ok() && writer.flush().is_ok()
}
