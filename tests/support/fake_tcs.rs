//! An in-process fake of ECS's telemetry service (TCS) on 127.0.0.1, for the tests of
//! deckhand's telemetry session: the websocket at `/ws` (tungstenite's server side), its
//! upgrade's SigV4 signature checked, and every message the agent sends read as TCS reads it —
//! the signed request's headers, a blank line, the `{"type", "message"}` JSON — with that
//! message's own signature (over the session's URL and the JSON as the body) checked too. Each
//! good message is acknowledged as TCS does (`AckPublishMetric`, `AckPublishHealth`,
//! `AckPublishInstanceStatus`); the test reads what arrived, waiting on a Condvar with a
//! deadline, and can take TCS down. Needs `support/fake_ecs.rs` as `fake_ecs` for the signature
//! check.
#![allow(dead_code)]

use super::fake_ecs::{parse_query, verify, Credentials};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};
use tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tungstenite::Message;

/// One message the agent sent.
#[derive(Debug, Clone, PartialEq)]
pub struct TcsMessage {
    pub type_name: String,
    pub message: Value,
    /// Its own signature checked out.
    pub signed: bool,
    /// Why not, when not.
    pub signature_error: Option<String>,
}

struct State {
    credentials: Vec<Credentials>,
    down: bool,
    stopping: bool,
    messages: Vec<TcsMessage>,
    queries: Vec<BTreeMap<String, String>>,
    sessions: Vec<TcpStream>,
    refused_upgrades: u64,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    region: String,
    port: u16,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn update(&self, change: impl FnOnce(&mut State)) {
        change(&mut self.lock());
        self.changed.notify_all();
    }
}

/// The fake TCS. Dropping it stops accepting and ends its sessions.
pub struct FakeTcs {
    shared: Arc<Shared>,
}

impl FakeTcs {
    pub fn start(region: &str, credentials: Credentials) -> FakeTcs {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake TCS");
        let port = listener.local_addr().expect("its address").port();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                credentials: vec![credentials],
                down: false,
                stopping: false,
                messages: Vec::new(),
                queries: Vec::new(),
                sessions: Vec::new(),
                refused_upgrades: 0,
            }),
            changed: Condvar::new(),
            region: region.to_string(),
            port,
        });
        let accepting = Arc::clone(&shared);
        thread::Builder::new()
            .name("fake-tcs-accept".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { continue };
                    let (stopping, down) = {
                        let state = accepting.lock();
                        (state.stopping, state.down)
                    };
                    if stopping {
                        return;
                    }
                    if down {
                        let _ = stream.shutdown(Shutdown::Both);
                        continue;
                    }
                    let session = Arc::clone(&accepting);
                    let _ = thread::Builder::new()
                        .name("fake-tcs-conn".into())
                        .spawn(move || serve(&session, stream));
                }
            })
            .expect("spawn the fake TCS");
        FakeTcs { shared }
    }

    /// What DiscoverPollEndpoint answers as `telemetryEndpoint`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/", self.shared.port)
    }

    /// TCS out of reach: open sessions are cut, new connections closed at once.
    pub fn set_down(&self, down: bool) {
        self.shared.update(|state| {
            state.down = down;
            if down {
                for session in state.sessions.drain(..) {
                    let _ = session.shutdown(Shutdown::Both);
                }
            }
        });
    }

    pub fn messages(&self) -> Vec<TcsMessage> {
        self.shared.lock().messages.clone()
    }

    /// The query of every session opened, in order.
    pub fn queries(&self) -> Vec<BTreeMap<String, String>> {
        self.shared.lock().queries.clone()
    }

    pub fn refused_upgrades(&self) -> u64 {
        self.shared.lock().refused_upgrades
    }

    /// Waits until `check` finds something in the messages (or the deadline passes).
    pub fn wait_for<T>(
        &self,
        deadline: Instant,
        mut check: impl FnMut(&[TcsMessage]) -> Option<T>,
    ) -> Option<T> {
        let mut state = self.shared.lock();
        loop {
            if let Some(answer) = check(&state.messages) {
                return Some(answer);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, deadline - now)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
        }
    }

    /// Waits until `count` sessions were opened.
    pub fn wait_for_sessions(&self, count: usize, deadline: Instant) -> bool {
        let mut state = self.shared.lock();
        loop {
            if state.queries.len() >= count {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, deadline - now)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
        }
    }
}

impl Drop for FakeTcs {
    fn drop(&mut self) {
        self.shared.update(|state| {
            state.stopping = true;
            for session in state.sessions.drain(..) {
                let _ = session.shutdown(Shutdown::Both);
            }
        });
        let _ = TcpStream::connect(("127.0.0.1", self.shared.port));
    }
}

/// Splits a message as the agent frames it: header lines, a blank line, the JSON.
fn split_frame(text: &str) -> Option<(Vec<(String, String)>, &str)> {
    let (head, body) = text.split_once("\r\n\r\n")?;
    let headers = head
        .split("\r\n")
        .map(|line| {
            let (name, value) = line.split_once(':')?;
            Some((name.trim().to_ascii_lowercase(), value.trim().to_string()))
        })
        .collect::<Option<Vec<_>>>()?;
    Some((headers, body))
}

fn serve(shared: &Arc<Shared>, stream: TcpStream) {
    let Ok(control) = stream.try_clone() else {
        return;
    };
    let credentials = shared.lock().credentials.clone();
    let region = shared.region.clone();
    let target = std::cell::RefCell::new((String::new(), String::new()));
    // tungstenite's callback returns its own (large) ErrorResponse.
    #[allow(clippy::result_large_err)]
    let check = |request: &Request, response: Response| -> Result<Response, ErrorResponse> {
        let path = request.uri().path().to_string();
        let raw_query = request.uri().query().unwrap_or("").to_string();
        let headers: Vec<(String, String)> = request
            .headers()
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_ascii_lowercase(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect();
        let refuse = |status: u16, body: Value| {
            let mut answer = ErrorResponse::new(Some(body.to_string()));
            *answer.status_mut() = tungstenite::http::StatusCode::from_u16(status)
                .unwrap_or(tungstenite::http::StatusCode::BAD_REQUEST);
            answer
        };
        verify(
            host_now(),
            &credentials,
            &region,
            "GET",
            &path,
            &raw_query,
            &headers,
            b"",
        )
        .map_err(|(type_name, message)| {
            refuse(403, json!({"__type": type_name, "message": message}))
        })?;
        let query = parse_query(&raw_query);
        if path != "/ws"
            || !["cluster", "containerInstance"]
                .iter()
                .all(|k| query.contains_key(*k))
        {
            return Err(refuse(
                400,
                json!({"__type": "BadRequestException", "message": "expected /ws?cluster=…&containerInstance=…"}),
            ));
        }
        *target.borrow_mut() = (path, raw_query);
        Ok(response)
    };
    let mut socket = match tungstenite::accept_hdr(stream, check) {
        Ok(socket) => socket,
        Err(_) => {
            shared.update(|state| state.refused_upgrades += 1);
            return;
        }
    };
    let (path, raw_query) = target.into_inner();
    let Ok(kept) = control.try_clone() else {
        return;
    };
    shared.update(|state| {
        state.queries.push(parse_query(&raw_query));
        state.sessions.push(kept);
    });
    let _ = control.set_read_timeout(Some(Duration::from_millis(50)));
    loop {
        match socket.read() {
            Ok(Message::Text(text)) => {
                let text = text.as_str();
                let Some((headers, body)) = split_frame(text) else {
                    shared.update(|state| {
                        state.messages.push(TcsMessage {
                            type_name: String::new(),
                            message: Value::Null,
                            signed: false,
                            signature_error: Some(format!("no signed headers: {text:.80}")),
                        })
                    });
                    continue;
                };
                let checked = verify(
                    host_now(),
                    &credentials,
                    &region,
                    "GET",
                    &path,
                    &raw_query,
                    &headers,
                    body.as_bytes(),
                );
                let value: Value = serde_json::from_str(body).unwrap_or(Value::Null);
                let type_name = value["type"].as_str().unwrap_or("").to_string();
                let message = TcsMessage {
                    type_name: type_name.clone(),
                    message: value["message"].clone(),
                    signed: checked.is_ok(),
                    signature_error: checked.err().map(|(kind, text)| format!("{kind}: {text}")),
                };
                let signed = message.signed;
                shared.update(|state| state.messages.push(message));
                let ack = match type_name.as_str() {
                    "PublishMetricsRequest" => "AckPublishMetric",
                    "PublishHealthRequest" => "AckPublishHealth",
                    "PublishInstanceStatusRequest" => "AckPublishInstanceStatus",
                    _ => continue,
                };
                let answer = if signed {
                    json!({"type": ack, "message": {"message": "ok"}})
                } else {
                    json!({"type": "BadRequestException", "message": {"message": "bad signature"}})
                };
                if socket.send(Message::text(answer.to_string())).is_err() {
                    break;
                }
            }
            Ok(_) => {}
            Err(tungstenite::Error::Io(error))
                if matches!(
                    error.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                let _ = socket.flush();
                if shared.lock().stopping {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    let _ = control.shutdown(Shutdown::Both);
}

/// The host's clock in seconds since the epoch: the fake TCS's clock.
fn host_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs() as i64)
        .unwrap_or(0)
}
