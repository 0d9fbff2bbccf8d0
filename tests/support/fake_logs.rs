//! An in-process fake of CloudWatch Logs on 127.0.0.1 (plain HTTP), enough for Docker's awslogs
//! driver pointed at it with `awslogs-endpoint`: `CreateLogStream`, `CreateLogGroup` and
//! `PutLogEvents` (JSON 1.1: `X-Amz-Target: Logs_20140328.<operation>`, errors as
//! `{"__type", "message"}`). Every request's SigV4 signature (service `logs`) is checked with the
//! independent implementation of `fake_ecs.rs`, so a test file that uses this one includes
//! `support/fake_ecs.rs` as `mod fake_ecs` too. The test says which credentials it accepts and
//! reads every call ([`FakeLogs::calls`]): its operation, the access key id it was signed with,
//! whether the signature held, and its JSON body.
#![allow(dead_code)]

use crate::fake_ecs::{read_request, verify_for_service, Credentials, HttpRequest};
use serde_json::{json, Value};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const TARGET_PREFIX: &str = "Logs_20140328.";

/// One request the fake answered.
#[derive(Debug, Clone)]
pub struct LogsCall {
    /// `CreateLogStream`, `PutLogEvents`, … (the target without its prefix), or `?`.
    pub operation: String,
    /// The access key id of the `Authorization` header's credential scope ("" without one).
    pub access_key: String,
    /// `Ok` when the signature held; else the error code the fake answered.
    pub verified: Result<(), String>,
    pub body: Value,
}

struct State {
    accepted: Vec<Credentials>,
    region: String,
    calls: Vec<LogsCall>,
    stopping: bool,
}

pub struct FakeLogs {
    state: Arc<Mutex<State>>,
    port: u16,
}

impl FakeLogs {
    /// Listens on a free loopback port; accepts signatures of `region` made with `accepted`.
    pub fn start(region: &str, accepted: Vec<Credentials>) -> FakeLogs {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake CloudWatch Logs");
        let port = listener.local_addr().expect("its address").port();
        let state = Arc::new(Mutex::new(State {
            accepted,
            region: region.to_string(),
            calls: Vec::new(),
            stopping: false,
        }));
        let accepting = Arc::clone(&state);
        thread::Builder::new()
            .name("fake-logs-accept".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { continue };
                    if accepting.lock().map_or(true, |state| state.stopping) {
                        return;
                    }
                    let connection = Arc::clone(&accepting);
                    let _ = thread::Builder::new()
                        .name("fake-logs-conn".into())
                        .spawn(move || serve(&connection, stream));
                }
            })
            .expect("spawn the fake CloudWatch Logs");
        FakeLogs { state, port }
    }

    /// `http://127.0.0.1:<port>`, for `awslogs-endpoint`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn calls(&self) -> Vec<LogsCall> {
        self.state.lock().expect("fake logs state").calls.clone()
    }

    /// Waits until a call matches `found`; panics with every call at `deadline`.
    pub fn wait_for_call(&self, found: impl Fn(&LogsCall) -> bool, deadline: Instant) -> LogsCall {
        loop {
            if let Some(call) = self.calls().into_iter().find(|call| found(call)) {
                return call;
            }
            assert!(
                Instant::now() < deadline,
                "no such call to the fake CloudWatch Logs; received: {:#?}",
                self.calls()
            );
            thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for FakeLogs {
    fn drop(&mut self) {
        if let Ok(mut state) = self.state.lock() {
            state.stopping = true;
        }
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(known, _)| known == name)
        .map(|(_, value)| value.as_str())
}

fn serve(state: &Mutex<State>, mut stream: TcpStream) {
    let mut buffer = Vec::new();
    while let Some(HttpRequest {
        method,
        path,
        raw_query: query,
        headers,
        body,
        ..
    }) = read_request(&mut stream, &mut buffer)
    {
        let operation = header(&headers, "x-amz-target")
            .and_then(|target| target.strip_prefix(TARGET_PREFIX))
            .unwrap_or("?")
            .to_string();
        let access_key = header(&headers, "authorization")
            .and_then(|value| value.split("Credential=").nth(1))
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_default()
            .to_string();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs() as i64);
        let (accepted, region) = {
            let state = state.lock().expect("fake logs state");
            (state.accepted.clone(), state.region.clone())
        };
        let verified = verify_for_service(
            "logs", now, &accepted, &region, &method, &path, &query, &headers, &body,
        )
        .map_err(|(code, _)| code.to_string());
        let (status, answer) = match (&verified, operation.as_str()) {
            (Err(code), _) => (
                400,
                json!({"__type": code, "message": "refused by the fake"}),
            ),
            (Ok(()), "PutLogEvents") => (200, json!({"nextSequenceToken": "1"})),
            (Ok(()), "CreateLogStream" | "CreateLogGroup") => (200, json!({})),
            (Ok(()), _) => (
                400,
                json!({"__type": "UnknownOperationException", "message": operation}),
            ),
        };
        state.lock().expect("fake logs state").calls.push(LogsCall {
            operation,
            access_key,
            verified,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        });
        let text = answer.to_string();
        let reason = if status == 200 { "OK" } else { "Bad Request" };
        let head = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: application/x-amz-json-1.1\r\nx-amzn-RequestId: fake\r\nContent-Length: {}\r\n\r\n",
            text.len()
        );
        if stream.write_all(head.as_bytes()).is_err() || stream.write_all(text.as_bytes()).is_err()
        {
            return;
        }
    }
}
