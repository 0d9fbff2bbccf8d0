//! A small HTTP `CONNECT` proxy on 127.0.0.1 for the tests of deckhand's proxy support: it
//! counts the tunnels it was asked for and records their targets, opens them only to loopback
//! (`localhost`, `127.0.0.0/8`: test traffic never leaves the machine), and pipes bytes both
//! ways until either side closes. `refuse_with` makes it answer every `CONNECT` with that
//! status instead (a 407 asks for credentials). Anything but `CONNECT` is answered 405.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

#[derive(Default)]
struct Seen {
    targets: Vec<String>,
    authorizations: Vec<Option<String>>,
}

pub struct TestProxy {
    port: u16,
    seen: Arc<Mutex<Seen>>,
}

impl TestProxy {
    /// Tunnels every `CONNECT` to a loopback target.
    pub fn start() -> TestProxy {
        TestProxy::start_with(None)
    }

    /// Answers every `CONNECT` with `status` (`"407 Proxy Authentication Required"`).
    pub fn refuse_with(status: &'static str) -> TestProxy {
        TestProxy::start_with(Some(status))
    }

    fn start_with(refusal: Option<&'static str>) -> TestProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("address").port();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let recorded = Arc::clone(&seen);
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let recorded = Arc::clone(&recorded);
                thread::spawn(move || serve(client, &recorded, refusal));
            }
        });
        TestProxy { port, seen }
    }

    /// `http://127.0.0.1:<port>`, for `HTTPS_PROXY`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// How many `CONNECT`s came.
    pub fn connects(&self) -> usize {
        self.seen.lock().expect("proxy record").targets.len()
    }

    /// The `host:port` of each `CONNECT`, in order.
    pub fn targets(&self) -> Vec<String> {
        self.seen.lock().expect("proxy record").targets.clone()
    }

    /// The `Proxy-Authorization` of each `CONNECT`.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.seen
            .lock()
            .expect("proxy record")
            .authorizations
            .clone()
    }
}

fn header_end(bytes: &[u8]) -> Option<usize> {
    bytes.windows(4).position(|window| window == b"\r\n\r\n")
}

fn is_loopback(host: &str, port: u16) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<IpAddr>()
        .map(|address| address.is_loopback())
        .unwrap_or(false)
        && port != 0
}

fn serve(mut client: TcpStream, seen: &Mutex<Seen>, refusal: Option<&'static str>) {
    let _ = client.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while header_end(&head).is_none() {
        match client.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
        if head.len() > 16 * 1024 {
            return;
        }
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let mut words = text.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    if method != "CONNECT" {
        let _ = client.write_all(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n");
        return;
    }
    let authorization = text.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("Proxy-Authorization")
            .then(|| value.trim().to_string())
    });
    {
        let mut seen = seen.lock().expect("proxy record");
        seen.targets.push(target.to_string());
        seen.authorizations.push(authorization);
    }
    if let Some(status) = refusal {
        let _ =
            client.write_all(format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").as_bytes());
        return;
    }
    let (host, port) = match target.rsplit_once(':') {
        Some((host, port)) => (host.to_string(), port.parse::<u16>().unwrap_or(0)),
        None => return,
    };
    if !is_loopback(&host, port) {
        let _ = client.write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n");
        return;
    }
    let upstream = (host.trim_start_matches('[').trim_end_matches(']'), port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.find(|address| address.ip().is_loopback()))
        .and_then(|address| TcpStream::connect_timeout(&address, Duration::from_secs(5)).ok());
    let Some(upstream) = upstream else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n");
        return;
    };
    if client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .is_err()
    {
        return;
    }
    let _ = client.set_read_timeout(None);
    let (Ok(mut client_reader), Ok(mut upstream_writer)) =
        (client.try_clone(), upstream.try_clone())
    else {
        return;
    };
    let forward = thread::spawn(move || {
        let _ = std::io::copy(&mut client_reader, &mut upstream_writer);
        let _ = upstream_writer.shutdown(Shutdown::Write);
    });
    let mut upstream_reader = upstream;
    let _ = std::io::copy(&mut upstream_reader, &mut client);
    let _ = client.shutdown(Shutdown::Write);
    let _ = forward.join();
}
