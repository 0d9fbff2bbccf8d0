//! The Docker client against a fake daemon on a temporary Unix socket, for what a real daemon
//! cannot be made to do on demand: a pull that fails mid-stream, a stream that stops without a
//! final status, malformed JSON, a stalled stream that must hit its timeout, a connection closed
//! mid-body, an oversized head, old or new API versions. It also checks what the client sends
//! (version prefix, tag, `X-Registry-Auth`, stop's `t`, event filters, volume create bodies).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use deckhand::docker::{DockerClient, DockerHost};
use deckhand::runtime::{
    ContainerRuntime, EventFilter, LogOptions, RegistryAuth, RuntimeError, Timeouts,
};

/// One request as the fake daemon received it.
#[derive(Debug, Clone)]
struct Recorded {
    method: String,
    /// Path and query, percent-decoded.
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Recorded {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(header, _)| header.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// What the fake daemon does with a request.
enum Reply {
    /// Send these bytes, then close.
    Send(Vec<u8>),
    /// Send these bytes, then keep the connection open and silent until the fake is dropped.
    SendThenStall(Vec<u8>),
}

type Handler = dyn Fn(&Recorded) -> Reply + Send + Sync;

/// A daemon thread serving a temp socket; each connection gets its own thread.
struct FakeDocker {
    socket_path: PathBuf,
    requests: Arc<Mutex<Vec<Recorded>>>,
    /// Dropping the sender releases every stalled connection.
    release: Option<mpsc::Sender<()>>,
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' && index + 2 < bytes.len() + 1 {
            if let Ok(byte) = u8::from_str_radix(&text[index + 1..index + 3], 16) {
                decoded.push(byte);
                index += 3;
                continue;
            }
        }
        decoded.push(bytes[index]);
        index += 1;
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

fn read_request(stream: &mut UnixStream) -> Option<Recorded> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut head = Vec::new();
    loop {
        let mut line = Vec::new();
        if reader.read_until(b'\n', &mut line).ok()? == 0 {
            return None;
        }
        head.extend_from_slice(&line);
        if line == b"\r\n" {
            break;
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut request = httparse::Request::new(&mut headers);
    request.parse(&head).ok()?;
    let headers: Vec<(String, String)> = request
        .headers
        .iter()
        .map(|header| {
            (
                header.name.to_string(),
                String::from_utf8_lossy(header.value).into_owned(),
            )
        })
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Recorded {
        method: request.method?.to_string(),
        target: percent_decode(request.path?),
        headers,
        body,
    })
}

impl FakeDocker {
    fn start(handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> FakeDocker {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let socket_path = std::env::temp_dir().join(format!(
            "deckhand-fake-docker-{}-{}.sock",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        ));
        let _ = std::fs::remove_file(&socket_path);
        let listener = UnixListener::bind(&socket_path).expect("binding the fake socket");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (release, release_receiver) = mpsc::channel::<()>();
        let release_receiver = Arc::new(Mutex::new(release_receiver));
        let handler: Arc<Handler> = Arc::new(handler);
        let recorded = Arc::clone(&requests);
        let stall = Arc::clone(&release_receiver);
        thread::spawn(move || {
            for connection in listener.incoming() {
                let Ok(mut connection) = connection else {
                    return;
                };
                let handler = Arc::clone(&handler);
                let recorded = Arc::clone(&recorded);
                let stall = Arc::clone(&stall);
                thread::spawn(move || {
                    let Some(request) = read_request(&mut connection) else {
                        return;
                    };
                    recorded.lock().expect("lock").push(request.clone());
                    match handler(&request) {
                        Reply::Send(bytes) => {
                            let _ = connection.write_all(&bytes);
                        }
                        Reply::SendThenStall(bytes) => {
                            let _ = connection.write_all(&bytes);
                            // Blocks until the test drops the fake (the sender goes away).
                            let _ = stall.lock().map(|receiver| receiver.recv());
                        }
                    }
                });
            }
        });
        FakeDocker {
            socket_path,
            requests,
            release: Some(release),
        }
    }

    fn host(&self) -> DockerHost {
        DockerHost::unix(&self.socket_path)
    }

    fn client(&self, timeouts: Timeouts) -> DockerClient {
        DockerClient::connect(self.host(), timeouts).expect("connecting to the fake daemon")
    }

    fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().expect("lock").clone()
    }

    /// The last request whose target contains `needle`.
    fn request_to(&self, needle: &str) -> Recorded {
        self.requests()
            .into_iter()
            .rev()
            .find(|request| request.target.contains(needle))
            .unwrap_or_else(|| panic!("no request to {needle}: {:?}", self.requests()))
    }
}

impl Drop for FakeDocker {
    fn drop(&mut self) {
        self.release.take();
        let _ = std::fs::remove_file(&self.socket_path);
    }
}

fn response(status: &str, headers: &[&str], body: &str) -> Vec<u8> {
    let mut text = format!("HTTP/1.1 {status}\r\n");
    for header in headers {
        text.push_str(header);
        text.push_str("\r\n");
    }
    text.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    text.into_bytes()
}

fn json(status: &str, body: &str) -> Reply {
    Reply::Send(response(
        status,
        &["Content-Type: application/json", "Api-Version: 1.41"],
        body,
    ))
}

/// A chunked stream, one chunk per line, ended properly when `finished`.
fn chunked(lines: &[&str], finished: bool) -> Vec<u8> {
    let mut text = String::from(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
    );
    for line in lines {
        let line = format!("{line}\r\n");
        text.push_str(&format!("{:x}\r\n{line}\r\n", line.len()));
    }
    if finished {
        text.push_str("0\r\n\r\n");
    }
    text.into_bytes()
}

/// `/_ping` answered with `api_version` (no header when `None`); everything else by `rest`.
fn with_ping(
    api_version: Option<&'static str>,
    rest: impl Fn(&Recorded) -> Reply + Send + Sync + 'static,
) -> impl Fn(&Recorded) -> Reply + Send + Sync + 'static {
    move |request: &Recorded| {
        if request.target.ends_with("/_ping") {
            let header = api_version.map(|version| format!("Api-Version: {version}"));
            let headers: Vec<&str> = header.iter().map(String::as_str).collect();
            Reply::Send(response("200 OK", &headers, "OK"))
        } else {
            rest(request)
        }
    }
}

fn short_timeouts() -> Timeouts {
    Timeouts {
        pull_total: Duration::from_secs(20),
        pull_no_progress: Duration::from_millis(300),
        inspect: Duration::from_millis(300),
        ..Timeouts::default()
    }
}

#[test]
fn negotiates_the_lower_of_the_daemons_and_deckhands_highest_version() {
    let fake = FakeDocker::start(with_ping(Some("1.50"), |_| json("200 OK", "{}")));
    let client = fake.client(Timeouts::default());
    assert_eq!(client.api_version().to_string(), "1.47");
    client.ping().expect("ping");
    let ping = fake.request_to("_ping");
    assert_eq!(
        ping.target, "/v1.47/_ping",
        "every path carries the version"
    );
}

#[test]
fn falls_back_to_the_version_endpoint_without_an_api_version_header() {
    let fake = FakeDocker::start(with_ping(None, |request| {
        if request.target == "/version" {
            json(
                "200 OK",
                r#"{"Version":"24.0.7","ApiVersion":"1.43","MinAPIVersion":"1.12"}"#,
            )
        } else {
            json("200 OK", r#"{"Version":"24.0.7","ApiVersion":"1.43"}"#)
        }
    }));
    let client = fake.client(Timeouts::default());
    assert_eq!(client.api_version().to_string(), "1.43");
    let version = client.version().expect("version");
    assert_eq!(version.version, "24.0.7");
    assert_eq!(fake.request_to("version").target, "/v1.43/version");
}

#[test]
fn refuses_a_daemon_older_than_api_1_41() {
    let fake = FakeDocker::start(with_ping(Some("1.40"), |_| json("200 OK", "{}")));
    match DockerClient::connect(fake.host(), Timeouts::default()) {
        Err(error) => {
            let message = error.to_string();
            assert!(
                message.contains("1.40") && message.contains("at least 1.41"),
                "{message}"
            )
        }
        Ok(client) => panic!("connected at {}", client.api_version()),
    }
}

fn decode_base64_url(text: &str) -> Vec<u8> {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bits: u32 = 0;
    let mut count = 0;
    let mut decoded = Vec::new();
    for byte in text.bytes().filter(|byte| *byte != b'=') {
        let value = alphabet
            .iter()
            .position(|candidate| *candidate == byte)
            .unwrap_or_else(|| panic!("{:?} is not base64url", byte as char))
            as u32;
        bits = (bits << 6) | value;
        count += 6;
        if count >= 8 {
            count -= 8;
            decoded.push((bits >> count) as u8);
        }
    }
    decoded
}

const PULL_OK: &[&str] = &[
    r#"{"status":"Pulling from team/app","id":"latest"}"#,
    r#"{"status":"Digest: sha256:00"}"#,
    r#"{"status":"Status: Downloaded newer image for registry.test/team/app:latest"}"#,
];

#[test]
fn a_pull_sends_a_tag_and_registry_auth() {
    let fake = FakeDocker::start(with_ping(Some("1.41"), |_| {
        Reply::Send(chunked(PULL_OK, true))
    }));
    let client = fake.client(Timeouts::default());
    let auth = RegistryAuth {
        username: "robot".into(),
        password: "pa ss/+=".into(),
        server_address: "registry.test".into(),
    };
    client
        .pull_image("registry.test/team/app", Some(&auth))
        .expect("pull");
    let request = fake.request_to("images/create");
    assert_eq!(request.method, "POST");
    assert_eq!(
        request.target,
        "/v1.41/images/create?fromImage=registry.test/team/app&tag=latest"
    );
    let header = request.header("X-Registry-Auth").expect("auth header");
    let decoded: serde_json::Value =
        serde_json::from_slice(&decode_base64_url(header)).expect("JSON credentials");
    assert_eq!(decoded["username"], "robot");
    assert_eq!(decoded["password"], "pa ss/+=");
    assert_eq!(decoded["serveraddress"], "registry.test");

    client
        .pull_image("app:v2", None)
        .expect("pull without auth");
    let request = fake.request_to("fromImage=app");
    assert_eq!(request.target, "/v1.41/images/create?fromImage=app&tag=v2");
    assert!(request.header("X-Registry-Auth").is_none());
}

#[test]
fn a_pull_fails_on_an_error_line_in_a_200_stream() {
    let fake = FakeDocker::start(with_ping(Some("1.41"), |_| {
        Reply::Send(chunked(
            &[
                r#"{"status":"Pulling from team/app","id":"v1"}"#,
                r#"{"errorDetail":{"message":"unexpected EOF while downloading layer"},"error":"unexpected EOF while downloading layer"}"#,
            ],
            true,
        ))
    }));
    match fake
        .client(Timeouts::default())
        .pull_image("team/app:v1", None)
    {
        Err(RuntimeError::CannotPull { message }) => {
            assert_eq!(message, "unexpected EOF while downloading layer")
        }
        other => panic!("expected CannotPull, got {other:?}"),
    }
}

#[test]
fn a_pull_stream_without_a_final_status_is_a_failed_pull() {
    // Ended properly, and cut off (the daemon died): both are failures.
    for finished in [true, false] {
        let fake = FakeDocker::start(with_ping(Some("1.41"), move |_| {
            Reply::Send(chunked(
                &[r#"{"status":"Pulling from team/app","id":"v1"}"#],
                finished,
            ))
        }));
        match fake
            .client(Timeouts::default())
            .pull_image("team/app:v1", None)
        {
            Err(RuntimeError::CannotPull { message }) if finished => {
                assert!(message.contains("without a final status"), "{message}")
            }
            Err(RuntimeError::CannotPull { message }) if !finished => {
                assert!(message.contains("cut off"), "{message}")
            }
            other => panic!("finished={finished}: {other:?}"),
        }
    }
}

#[test]
fn a_refused_pull_keeps_dockers_message() {
    let fake = FakeDocker::start(with_ping(Some("1.41"), |_| {
        json(
            "404 Not Found",
            r#"{"message":"manifest for team/app:nope not found: manifest unknown"}"#,
        )
    }));
    match fake
        .client(Timeouts::default())
        .pull_image("team/app:nope", None)
    {
        Err(RuntimeError::CannotPull { message }) => assert_eq!(
            message,
            "manifest for team/app:nope not found: manifest unknown"
        ),
        other => panic!("expected CannotPull, got {other:?}"),
    }
}

#[test]
fn a_garbled_pull_stream_is_a_failed_pull_and_a_garbled_inspect_a_protocol_error() {
    let fake = FakeDocker::start(with_ping(Some("1.41"), |request| {
        if request.target.contains("images/create") {
            Reply::Send(chunked(&[r#"{"status":"Pulling"#, "}"], true))
        } else {
            json("200 OK", r#"{"Id": "abc", "State": {"Running": tru"#)
        }
    }));
    let client = fake.client(Timeouts::default());
    // Docker answered the pull: a stream it garbles is a failed pull (ECS's
    // CannotPullContainerError, the pull behaviour decides), never "Docker is away".
    match client.pull_image("team/app:v1", None) {
        Err(RuntimeError::CannotPull { message }) => {
            assert!(
                message.contains("invalid progress line for team/app:v1"),
                "{message}"
            )
        }
        other => panic!("pull: expected CannotPull, got {other:?}"),
    }
    match client.inspect_container("abc") {
        Err(RuntimeError::Protocol { message }) => {
            assert!(message.contains("container inspect answer"), "{message}")
        }
        other => panic!("inspect: expected Protocol, got {other:?}"),
    }
}

#[test]
fn a_stalled_pull_hits_its_no_progress_timeout() {
    let fake = FakeDocker::start(with_ping(Some("1.41"), |_| {
        let bytes = chunked(&[r#"{"status":"Pulling from team/app","id":"v1"}"#], false);
        // The head and one line, then silence.
        Reply::SendThenStall(bytes)
    }));
    let client = fake.client(short_timeouts());
    let started = Instant::now();
    match client.pull_image("team/app:v1", None) {
        Err(RuntimeError::Timeout { operation, after }) => {
            assert_eq!(operation, "pull image team/app:v1 (no progress)");
            assert_eq!(after, Duration::from_millis(300));
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_stalled_answer_hits_the_calls_timeout() {
    let fake = FakeDocker::start(with_ping(Some("1.41"), |request| {
        if request.target.contains("/containers/abc/json") {
            // The head promises a body that never comes.
            Reply::SendThenStall(b"HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n{".to_vec())
        } else {
            Reply::SendThenStall(Vec::new())
        }
    }));
    let client = fake.client(short_timeouts());
    for (name, result) in [
        ("inspect", client.inspect_container("abc").map(|_| ())),
        ("version", client.version().map(|_| ())),
    ] {
        match result {
            Err(RuntimeError::Timeout { after, .. }) => {
                assert_eq!(after, Duration::from_millis(300), "{name}")
            }
            other => panic!("{name}: expected Timeout, got {other:?}"),
        }
    }
}

#[test]
fn a_connection_closed_mid_body_is_a_protocol_error() {
    let fake = FakeDocker::start(with_ping(Some("1.41"), |_| {
        Reply::Send(b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"Id\":\"abc\",".to_vec())
    }));
    let client = fake.client(Timeouts::default());
    let started = Instant::now();
    match client.inspect_container("abc") {
        Err(RuntimeError::Protocol { message }) => {
            assert!(message.contains("inspect container abc"), "{message}");
            assert!(message.contains("bytes of the body missing"), "{message}");
        }
        other => panic!("expected Protocol, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn an_oversized_head_from_the_daemon_is_a_protocol_error() {
    let fake = FakeDocker::start(with_ping(Some("1.41"), |_| {
        let filler = format!("X-Filler: {}\r\n", "y".repeat(1000)).repeat(100);
        Reply::Send(
            format!("HTTP/1.1 200 OK\r\n{filler}Content-Length: 2\r\n\r\n{{}}").into_bytes(),
        )
    }));
    match fake.client(Timeouts::default()).inspect_container("abc") {
        Err(RuntimeError::Protocol { message }) => {
            assert!(message.contains("larger than"), "{message}")
        }
        other => panic!("expected Protocol, got {other:?}"),
    }
}

#[test]
fn statuses_become_typed_errors_with_dockers_message() {
    let fake = FakeDocker::start(with_ping(Some("1.41"), |request| {
        let target = request.target.as_str();
        if target.contains("/containers/gone/") {
            json("404 Not Found", r#"{"message":"No such container: gone"}"#)
        } else if target.contains("/containers/create") {
            json(
                "409 Conflict",
                r#"{"message":"Conflict. The container name \"/web\" is already in use"}"#,
            )
        } else if target.contains("/containers/running/start")
            || target.contains("/containers/running/stop")
        {
            Reply::Send(response("304 Not Modified", &[], ""))
        } else if target.contains("/containers/broken/start") {
            json(
                "500 Internal Server Error",
                r#"{"message":"OCI runtime create failed"}"#,
            )
        } else {
            json("400 Bad Request", "not json at all")
        }
    }));
    let client = fake.client(Timeouts::default());
    assert_eq!(
        client.inspect_container("gone"),
        Err(RuntimeError::NoSuchContainer {
            message: "No such container: gone".into()
        })
    );
    match client.create_container(&deckhand::runtime::CreateContainer {
        name: "web".into(),
        image: "app".into(),
        ..Default::default()
    }) {
        Err(RuntimeError::Conflict { message }) => assert!(message.contains("already in use")),
        other => panic!("expected Conflict, got {other:?}"),
    }
    let create = fake.request_to("containers/create");
    assert_eq!(create.target, "/v1.41/containers/create?name=web");
    assert_eq!(create.header("Content-Type"), Some("application/json"));
    let body: serde_json::Value = serde_json::from_slice(&create.body).expect("JSON body");
    assert_eq!(body["Image"], "app");
    assert_eq!(body["HostConfig"]["RestartPolicy"]["Name"], "no");
    client
        .start_container("running")
        .expect("304 on start is success");
    client
        .stop_container("running", Duration::from_millis(1500))
        .expect("304 on stop is success");
    assert_eq!(
        fake.request_to("running/stop").target,
        "/v1.41/containers/running/stop?t=2",
        "t rounds the grace period up to whole seconds"
    );
    assert_eq!(
        client.start_container("broken"),
        Err(RuntimeError::Api {
            status: 500,
            message: "OCI runtime create failed".into()
        })
    );
    assert_eq!(
        client.remove_container("other", true),
        Err(RuntimeError::Api {
            status: 400,
            message: "not json at all".into()
        })
    );
    assert_eq!(
        fake.request_to("containers/other").target,
        "/v1.41/containers/other?force=true&v=true"
    );
    assert_eq!(fake.request_to("containers/other").method, "DELETE");
}

#[test]
fn events_are_filtered_parsed_and_end_when_docker_ends_the_stream() {
    let fake = FakeDocker::start(with_ping(Some("1.41"), |_| {
        Reply::Send(chunked(
            &[
                r#"{"Type":"network","Action":"connect","Actor":{"ID":"net"},"timeNano":1}"#,
                r#"{"status":"start","id":"c1","Type":"container","Action":"start","Actor":{"ID":"c1","Attributes":{"name":"web"}},"time":2,"timeNano":2000000000}"#,
                r#"{"Type":"container","Action":"health_status: healthy","Actor":{"ID":"c1","Attributes":{}},"timeNano":3}"#,
            ],
            true,
        ))
    }));
    let client = fake.client(Timeouts::default());
    let mut stream = client
        .events(&EventFilter {
            labels: vec!["com.amazonaws.ecs.cluster=edge".into()],
            actions: vec!["start".into(), "health_status".into()],
            since: Some(1700000000),
        })
        .expect("subscribe");
    let first = stream.next_event().expect("read").expect("an event");
    assert_eq!((first.id.as_str(), first.action.as_str()), ("c1", "start"));
    assert_eq!(
        first.attributes.get("name").map(String::as_str),
        Some("web")
    );
    let second = stream.next_event().expect("read").expect("an event");
    assert_eq!(second.action, "health_status: healthy");
    assert_eq!(stream.next_event(), Ok(None), "Docker ended the stream");
    let request = fake.request_to("/events");
    let query = request.target.split_once('?').expect("a query").1;
    let filters_text = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("filters="))
        .expect("filters");
    let filters: serde_json::Value = serde_json::from_str(filters_text).expect("filters JSON");
    assert_eq!(
        filters,
        serde_json::json!({
            "type": ["container"],
            "label": ["com.amazonaws.ecs.cluster=edge"],
            "event": ["start", "health_status"],
        })
    );
    assert!(query.contains("since=1700000000"), "{query}");
}

#[test]
fn a_silent_event_stream_does_not_time_out_and_can_be_cancelled() {
    let fake = FakeDocker::start(with_ping(Some("1.41"), |_| {
        Reply::SendThenStall(chunked(&[], false))
    }));
    // The head deadline is short; the stream itself must not inherit it.
    let client = fake.client(short_timeouts());
    let mut stream = client.events(&EventFilter::default()).expect("subscribe");
    let canceller = stream.canceller();
    let (sender, receiver) = mpsc::channel();
    let reader = thread::spawn(move || {
        let result = stream.next_event();
        let _ = sender.send(());
        result
    });
    assert!(
        receiver.recv_timeout(Duration::from_secs(1)).is_err(),
        "the stream returned although Docker sent nothing"
    );
    canceller.cancel();
    receiver
        .recv_timeout(Duration::from_secs(5))
        .expect("cancel must wake the blocked read");
    assert_eq!(reader.join().expect("reader"), Ok(None));
}

/// A chunked 200 carrying `payload` (a log, framed or raw) in chunks of `step` bytes.
fn chunked_bytes(payload: &[u8], step: usize, finished: bool) -> Vec<u8> {
    let mut bytes = b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.docker.multiplexed-stream\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for piece in payload.chunks(step) {
        bytes.extend(format!("{:x}\r\n", piece.len()).into_bytes());
        bytes.extend_from_slice(piece);
        bytes.extend_from_slice(b"\r\n");
    }
    if finished {
        bytes.extend_from_slice(b"0\r\n\r\n");
    }
    bytes
}

fn log_frame(stream: u8, payload: &[u8]) -> Vec<u8> {
    let mut bytes = vec![stream, 0, 0, 0];
    bytes.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

#[test]
fn logs_ask_for_both_streams_and_pass_dockers_bytes_through() {
    let mut payload = log_frame(1, b"out\n");
    payload.extend(log_frame(2, b"err\n"));
    let body = payload.clone();
    let fake = FakeDocker::start(with_ping(Some("1.41"), move |request| {
        if request.target.contains("/containers/missing/") {
            json(
                "404 Not Found",
                r#"{"message":"No such container: missing"}"#,
            )
        } else {
            Reply::Send(chunked_bytes(&body, 3, true))
        }
    }));
    let client = fake.client(Timeouts::default());
    let options = LogOptions {
        follow: false,
        tail: Some(1),
        since: Some("1700000000.250".into()),
        timestamps: true,
    };
    let mut log = client.container_logs("c1", &options).expect("open");
    let mut bytes = Vec::new();
    log.reader.read_to_end(&mut bytes).expect("the whole log");
    assert_eq!(bytes, payload);
    assert_eq!(
        fake.request_to("/containers/c1/logs").target,
        "/v1.41/containers/c1/logs?stdout=1&stderr=1&follow=0&tail=1&since=1700000000.250&timestamps=1"
    );
    let everything = client
        .container_logs("c1", &LogOptions::default())
        .expect("open");
    drop(everything);
    assert!(fake.requests().iter().any(|request| request
        .target
        .ends_with("logs?stdout=1&stderr=1&follow=0&tail=all")));
    let error = client.container_logs("missing", &options).expect_err("404");
    assert!(
        matches!(&error, RuntimeError::NoSuchContainer { message } if message.contains("No such container")),
        "{error:?}"
    );
}

#[test]
fn a_followed_log_waits_past_the_head_deadline_and_closing_wakes_it() {
    let fake = FakeDocker::start(with_ping(Some("1.41"), |_| {
        Reply::SendThenStall(chunked_bytes(&log_frame(1, b"first\n"), 100, false))
    }));
    // The head deadline is short; the stream itself must not inherit it.
    let client = fake.client(short_timeouts());
    let options = LogOptions {
        follow: true,
        ..LogOptions::default()
    };
    let mut log = client.container_logs("c1", &options).expect("open");
    let mut first = [0u8; 14];
    log.reader.read_exact(&mut first).expect("the first frame");
    assert_eq!(first.as_slice(), log_frame(1, b"first\n").as_slice());
    let close = log.close;
    let mut reader = log.reader;
    let (sender, receiver) = mpsc::channel();
    let blocked = thread::spawn(move || {
        let mut rest = Vec::new();
        let result = reader.read_to_end(&mut rest);
        let _ = sender.send(());
        result.map(|_| rest)
    });
    assert!(
        receiver.recv_timeout(Duration::from_secs(1)).is_err(),
        "the log ended although Docker sent nothing"
    );
    close();
    receiver
        .recv_timeout(Duration::from_secs(5))
        .expect("closing must wake the blocked read");
    let _ = blocked.join().expect("reader thread");
}

#[test]
fn unreachable_sockets_say_which_socket_and_what_to_check() {
    // A socket file nobody listens on: connection refused.
    let path = std::env::temp_dir().join(format!("deckhand-refused-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    drop(UnixListener::bind(&path).expect("bind"));
    match DockerClient::connect(DockerHost::unix(&path), Timeouts::default()) {
        Err(RuntimeError::Unreachable { message }) => {
            assert!(message.contains(&path.display().to_string()), "{message}");
            assert!(message.contains("connection refused"), "{message}");
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    let _ = std::fs::remove_file(&path);
    match DockerClient::connect(
        DockerHost::unix("/nonexistent/deckhand/docker.sock"),
        Timeouts::default(),
    ) {
        Err(RuntimeError::Unreachable { message }) => {
            assert!(message.contains("no Docker socket at /nonexistent/deckhand/docker.sock"))
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

#[test]
fn volume_create_and_inspect_send_what_docker_takes_and_read_404_as_absent() {
    let fake = FakeDocker::start(with_ping(Some("1.41"), |request| {
        match (request.method.as_str(), request.target.as_str()) {
            ("POST", target) if target.ends_with("/volumes/create") => json(
                "201 Created",
                r#"{"Name":"db data","Driver":"local","Options":{"type":"tmpfs"}}"#,
            ),
            ("GET", target) if target.ends_with("/volumes/db data") => json(
                "200 OK",
                r#"{"Name":"db data","Driver":"local","Options":{"type":"tmpfs"},"Labels":null}"#,
            ),
            ("GET", target) if target.ends_with("/volumes/gone") => {
                json("404 Not Found", r#"{"message":"get gone: no such volume"}"#)
            }
            _ => json(
                "500 Internal Server Error",
                r#"{"message":"volume store is locked"}"#,
            ),
        }
    }));
    let client = fake.client(Timeouts::default());
    let spec = deckhand::runtime::CreateVolume {
        name: "db data".into(),
        driver: "local".into(),
        driver_opts: [("type".to_string(), "tmpfs".to_string())].into(),
        labels: [("app".to_string(), "shop".to_string())].into(),
    };
    assert_eq!(client.create_volume(&spec), Ok(()));
    let create = fake.request_to("/volumes/create");
    assert!(create.target.starts_with("/v1.41/"), "{}", create.target);
    let body: serde_json::Value = serde_json::from_slice(&create.body).expect("a JSON body");
    assert_eq!(
        body,
        serde_json::json!({
            "Name": "db data",
            "Driver": "local",
            "DriverOpts": {"type": "tmpfs"},
            "Labels": {"app": "shop"}
        })
    );

    let found = client
        .inspect_volume("db data")
        .expect("inspect")
        .expect("the volume exists");
    assert_eq!(found.options.get("type").map(String::as_str), Some("tmpfs"));
    assert!(found.labels.is_empty());
    assert_eq!(
        fake.request_to("/volumes/db").target,
        "/v1.41/volumes/db data",
        "the name is percent-encoded on the wire"
    );
    assert_eq!(client.inspect_volume("gone"), Ok(None), "404 is absent");
    match client.inspect_volume("locked") {
        Err(RuntimeError::Api {
            status: 500,
            message,
        }) => {
            assert_eq!(message, "volume store is locked")
        }
        other => panic!("expected Docker's 500, got {other:?}"),
    }
}
