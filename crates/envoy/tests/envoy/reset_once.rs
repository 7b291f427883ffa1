//! [`ResetOnce`]: the upstream that reads one request, closes without answering and stops
//! listening, so a retry cannot connect.

use crate::upstream::read_request;
use std::io::BufReader;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

/// An upstream that takes one connection, stops listening at once (later connections are
/// refused), reads one request, counts it and closes the connection without answering: a first
/// attempt that reached the app and was reset, whose retries cannot connect.
pub struct ResetOnce {
    received: Arc<(Mutex<usize>, Condvar)>,
    thread: Option<thread::JoinHandle<()>>,
    port: u16,
}

impl ResetOnce {
    /// Listens on `port` (a port the test picked, which Envoy's cluster names).
    pub fn on(port: u16) -> ResetOnce {
        // Between two sequences the port is free, and another test's short-lived connection may
        // hold it as its local port for a moment: try again for a bounded time.
        let mut tries = 0;
        let listener = loop {
            match TcpListener::bind(("127.0.0.1", port)) {
                Ok(listener) => break listener,
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && tries < 50 => {
                    tries += 1;
                    thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("bind the one-shot upstream on {port}: {e}"),
            }
        };
        let received: Arc<(Mutex<usize>, Condvar)> = Arc::default();
        let seen = received.clone();
        let thread = thread::spawn(move || {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            drop(listener);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let Ok(reader) = stream.try_clone() else {
                return;
            };
            let mut reader = BufReader::new(reader);
            if read_request(&mut reader).is_some() {
                let (count, changed) = &*seen;
                *count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
                changed.notify_all();
            }
            let _ = stream.shutdown(Shutdown::Both);
        });
        ResetOnce {
            received,
            thread: Some(thread),
            port,
        }
    }

    /// Requests it read (0 or 1).
    pub fn hits(&self) -> usize {
        *self.received.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for ResetOnce {
    fn drop(&mut self) {
        // Unblocks an accept that never came (nothing is read from this connection).
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
