//! Tests of the fake ECS itself (tests/support/fake_ecs.rs), signing with its own signer: a
//! signed API request is answered in ECS's shapes, a tampered, unsigned or wrongly keyed one is
//! refused as AWS refuses it, a rotated key is taken, and an ACS websocket client connects,
//! receives a payload and has its ack recorded; scripted failures, a deregistered ARN and a
//! clock ahead of the host's behave as the tests that use them expect.

#[path = "support/fake_ecs.rs"]
mod fake_ecs;

use fake_ecs::{Credentials, FakeEcs, JSON_CONTENT_TYPE, TARGET_PREFIX};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant, SystemTime};
use tungstenite::client::IntoClientRequest;
use tungstenite::Message;

const DEADLINE: Duration = Duration::from_secs(10);

/// One request on its own connection: (status, body).
fn raw_call(fake: &FakeEcs, headers: &[(String, String)], body: &[u8]) -> (u16, Value) {
    let (status, _, body) = raw_dated_call(fake, headers, body);
    (status, body)
}

/// One request on its own connection: (status, the answer's `Date`, body).
fn raw_dated_call(
    fake: &FakeEcs,
    headers: &[(String, String)],
    body: &[u8],
) -> (u16, String, Value) {
    let mut stream = TcpStream::connect(("127.0.0.1", fake.port())).expect("connect");
    let mut request = String::from("POST / HTTP/1.1\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!(
        "content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    ));
    stream.write_all(request.as_bytes()).expect("write");
    stream.write_all(body).expect("write body");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("read");
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let date = head
        .lines()
        .find_map(|line| line.strip_prefix("Date: "))
        .unwrap_or("")
        .to_string();
    (
        status,
        date,
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

fn signed_headers(
    fake: &FakeEcs,
    credentials: &Credentials,
    operation: &str,
    body: &[u8],
) -> Vec<(String, String)> {
    signed_headers_at(fake, credentials, operation, body, SystemTime::now())
}

fn signed_headers_at(
    fake: &FakeEcs,
    credentials: &Credentials,
    operation: &str,
    body: &[u8],
    time: SystemTime,
) -> Vec<(String, String)> {
    let base = vec![
        ("content-type".to_string(), JSON_CONTENT_TYPE.to_string()),
        (
            "x-amz-target".to_string(),
            format!("{TARGET_PREFIX}{operation}"),
        ),
    ];
    fake_ecs::sign_request(
        credentials,
        fake.region(),
        "POST",
        &format!("127.0.0.1:{}", fake.port()),
        "/",
        "",
        &base,
        body,
        time,
    )
}

fn call(fake: &FakeEcs, operation: &str, body: Value) -> (u16, Value) {
    let body = body.to_string();
    let headers = signed_headers(fake, &Credentials::test(), operation, body.as_bytes());
    raw_call(fake, &headers, body.as_bytes())
}

fn register(fake: &FakeEcs) -> String {
    let (status, answer) = call(
        fake,
        "RegisterContainerInstance",
        json!({"cluster": "edge", "totalResources": []}),
    );
    assert_eq!(status, 200, "{answer}");
    answer["containerInstance"]["containerInstanceArn"]
        .as_str()
        .expect("an ARN")
        .to_string()
}

#[test]
fn signed_calls_are_answered_in_ecs_shapes() {
    let fake = FakeEcs::start();
    let arn = register(&fake);
    let prefix = "arn:aws:ecs:us-west-2:123456789012:container-instance/edge/";
    let id = arn.strip_prefix(prefix).unwrap_or_else(|| panic!("{arn}"));
    assert!(
        id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit()),
        "{arn}"
    );
    let (_, again) = call(
        &fake,
        "RegisterContainerInstance",
        json!({"cluster": "edge", "containerInstanceArn": arn}),
    );
    assert_eq!(
        again["containerInstance"]["containerInstanceArn"],
        json!(arn)
    );
    assert_eq!(fake.registrations().len(), 2);

    let (status, endpoint) = call(
        &fake,
        "DiscoverPollEndpoint",
        json!({"containerInstance": arn, "cluster": "edge"}),
    );
    assert_eq!(status, 200);
    assert_eq!(
        endpoint["endpoint"],
        json!(format!("http://127.0.0.1:{}/", fake.port()))
    );
    assert!(endpoint["telemetryEndpoint"].is_string());

    let task = fake_ecs::task_arn("edge");
    let (status, ack) = call(
        &fake,
        "SubmitTaskStateChange",
        json!({"cluster": "edge", "task": task, "status": "RUNNING", "reason": "", "containers": [{"containerName": "web", "status": "RUNNING"}]}),
    );
    assert_eq!((status, ack), (200, json!({"acknowledgment": "true"})));
    let change = fake.wait_for_task_state(&task, "RUNNING", Instant::now() + DEADLINE);
    assert_eq!(
        change.containers,
        vec![json!({"containerName": "web", "status": "RUNNING"})]
    );

    let (status, error) = call(&fake, "ListClusters", json!({}));
    assert_eq!(status, 400);
    assert_eq!(error["__type"], json!("UnknownOperationException"));
}

#[test]
fn bad_signatures_are_refused() {
    let fake = FakeEcs::start();
    let body = json!({"cluster": "edge"}).to_string();
    let good = signed_headers(
        &fake,
        &Credentials::test(),
        "RegisterContainerInstance",
        body.as_bytes(),
    );

    let tampered = json!({"cluster": "other"}).to_string();
    let (status, error) = raw_call(&fake, &good, tampered.as_bytes());
    assert_eq!(
        (status, error["__type"].as_str()),
        (403, Some("InvalidSignatureException"))
    );

    let unsigned: Vec<(String, String)> = good
        .iter()
        .filter(|(n, _)| n != "authorization")
        .cloned()
        .collect();
    let (status, error) = raw_call(&fake, &unsigned, body.as_bytes());
    assert_eq!(
        (status, error["__type"].as_str()),
        (403, Some("MissingAuthenticationTokenException"))
    );

    let stranger = Credentials {
        access_key: "AKIDSTRANGER".into(),
        ..Credentials::test()
    };
    let headers = signed_headers(
        &fake,
        &stranger,
        "RegisterContainerInstance",
        body.as_bytes(),
    );
    let (status, error) = raw_call(&fake, &headers, body.as_bytes());
    assert_eq!(
        (status, error["__type"].as_str()),
        (403, Some("UnrecognizedClientException"))
    );

    let wrong_secret = Credentials {
        secret_key: "not-the-secret".into(),
        ..Credentials::test()
    };
    let headers = signed_headers(
        &fake,
        &wrong_secret,
        "RegisterContainerInstance",
        body.as_bytes(),
    );
    let (status, error) = raw_call(&fake, &headers, body.as_bytes());
    assert_eq!(
        (status, error["__type"].as_str()),
        (403, Some("InvalidSignatureException"))
    );

    let old = SystemTime::now() - Duration::from_secs(3600);
    let base = vec![("content-type".to_string(), JSON_CONTENT_TYPE.to_string())];
    let headers = fake_ecs::sign_request(
        &Credentials::test(),
        fake.region(),
        "POST",
        "127.0.0.1",
        "/",
        "",
        &base,
        body.as_bytes(),
        old,
    );
    assert_eq!(raw_call(&fake, &headers, body.as_bytes()).0, 403);

    assert_eq!(fake.registrations().len(), 0);
    assert_eq!(fake.counters().signature_failures, 5);

    // A rotated key: the new one is taken, the old one no longer.
    let rotated = Credentials {
        access_key: "AKIDROTATED".into(),
        secret_key: "new-secret".into(),
        session_token: Some("token-2".into()),
    };
    fake.set_credentials(rotated.clone());
    let headers = signed_headers(
        &fake,
        &rotated,
        "RegisterContainerInstance",
        body.as_bytes(),
    );
    assert_eq!(raw_call(&fake, &headers, body.as_bytes()).0, 200);
    assert_eq!(raw_call(&fake, &good, body.as_bytes()).0, 403);
}

#[test]
fn inactive_and_down() {
    let fake = FakeEcs::start();
    fake.set_inactive(true);
    let (status, error) = call(
        &fake,
        "RegisterContainerInstance",
        json!({"cluster": "edge"}),
    );
    assert_eq!(
        (status, error["__type"].as_str()),
        (400, Some("InactiveInstanceException"))
    );
    fake.set_inactive(false);
    fake.set_down(true);
    let mut stream = TcpStream::connect(("127.0.0.1", fake.port())).expect("the port stays bound");
    let mut buffer = [0u8; 16];
    let _ = stream.write_all(b"POST / HTTP/1.1\r\n\r\n");
    assert_eq!(stream.read(&mut buffer).unwrap_or(0), 0, "closed at once");
    fake.set_down(false);
    register(&fake);
    assert!(fake.counters().refused >= 1);
}

fn acs_client(fake: &FakeEcs, instance: &str) -> tungstenite::WebSocket<TcpStream> {
    let query = format!(
        "clusterArn=edge&containerInstanceArn={}&agentHash=abc&agentVersion=0.1.0&seqNum=1&protocolVersion=2&dockerVersion=DockerVersion%3A%2026.1.5&sendCredentials=true",
        instance.replace(':', "%3A").replace('/', "%2F")
    );
    let host = format!("127.0.0.1:{}", fake.port());
    let headers = fake_ecs::sign_request(
        &Credentials::test(),
        fake.region(),
        "GET",
        &host,
        "/ws",
        &query,
        &[],
        b"",
        SystemTime::now(),
    );
    let mut request = format!("ws://{host}/ws?{query}")
        .into_client_request()
        .expect("request");
    for (name, value) in headers.iter().filter(|(name, _)| name != "host") {
        request.headers_mut().insert(
            tungstenite::http::HeaderName::from_bytes(name.as_bytes()).expect("name"),
            value.parse().expect("value"),
        );
    }
    let stream = TcpStream::connect(&host).expect("connect");
    stream.set_read_timeout(Some(DEADLINE)).expect("timeout");
    let (socket, _) = tungstenite::client(request, stream).expect("upgrade accepted");
    socket
}

#[test]
fn acs_session_payload_and_ack() {
    let fake = FakeEcs::start();
    let instance = register(&fake);
    let mut socket = acs_client(&fake, &instance);
    let query = fake.wait_for_acs_session(1, Instant::now() + DEADLINE);
    assert_eq!(query.get("containerInstanceArn"), Some(&instance));
    assert_eq!(
        query.get("dockerVersion").map(String::as_str),
        Some("DockerVersion: 26.1.5")
    );

    let arn = fake_ecs::task_arn("edge");
    let container = fake_ecs::acs_container(
        "web",
        "deckhand/busybox:latest",
        &["httpd", "-f"],
        true,
        &[(80, 8080, "tcp")],
    );
    let id = fake.send_payload(
        json!([fake_ecs::acs_task(&arn, "web", "RUNNING", vec![container])]),
        1,
    );
    let received: Value = match socket.read().expect("a message") {
        Message::Text(text) => serde_json::from_str(text.as_str()).expect("JSON"),
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(received["type"], json!("PayloadMessage"));
    assert_eq!(received["message"]["messageId"], json!(id));
    assert_eq!(received["message"]["seqNum"], json!(1));
    assert_eq!(received["message"]["tasks"][0]["arn"], json!(arn));
    assert_eq!(received["message"]["containerInstanceArn"], json!(instance));

    let ack = json!({"type": "AckRequest", "message": {"cluster": "edge", "containerInstance": instance, "messageId": id}});
    socket
        .send(Message::text(ack.to_string()))
        .expect("send the ack");
    let got = fake.wait_for_message(|m| m.type_name == "AckRequest", Instant::now() + DEADLINE);
    assert_eq!(got.message["messageId"], json!(id));

    fake.send_heartbeat();
    let heartbeat = socket
        .read()
        .expect("a heartbeat")
        .into_text()
        .expect("text");
    assert!(
        heartbeat.as_str().contains("HeartbeatMessage"),
        "{heartbeat}"
    );

    fake.send_close();
    let close = socket
        .read()
        .expect("the CloseMessage")
        .into_text()
        .expect("text");
    assert!(close.as_str().contains("CloseMessage"), "{close}");
    assert!(matches!(socket.read(), Ok(Message::Close(_)) | Err(_)));
}

#[test]
fn acs_upgrade_with_a_bad_signature_is_refused() {
    let fake = FakeEcs::start();
    let instance = register(&fake);
    let host = format!("127.0.0.1:{}", fake.port());
    let request = format!("ws://{host}/ws?clusterArn=edge&containerInstanceArn={instance}&seqNum=1&protocolVersion=2&sendCredentials=true")
        .into_client_request()
        .expect("request");
    let stream = TcpStream::connect(&host).expect("connect");
    match tungstenite::client(request, stream) {
        Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(response))) => {
            assert_eq!(response.status().as_u16(), 403);
            let body = String::from_utf8_lossy(response.body().as_deref().unwrap_or_default())
                .into_owned();
            assert!(
                body.contains("MissingAuthenticationTokenException"),
                "{body}"
            );
        }
        other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
    }
    assert!(!fake.acs_connected());
    // The session drop: a connected client sees its connection end.
    let mut socket = acs_client(&fake, &instance);
    fake.wait_for_acs_session(1, Instant::now() + DEADLINE);
    fake.drop_connection();
    assert!(socket.read().is_err() || !fake.acs_connected());
}

#[test]
fn kept_alive_connections_and_container_changes() {
    let fake = FakeEcs::start();
    let mut stream = TcpStream::connect(("127.0.0.1", fake.port())).expect("connect");
    let task = fake_ecs::task_arn("edge");
    for (operation, body) in [
        (
            "SubmitContainerStateChange",
            json!({"cluster": "edge", "task": task, "containerName": "web", "status": "STOPPED", "exitCode": 1}),
        ),
        (
            "SubmitTaskStateChange",
            json!({"cluster": "edge", "task": task, "status": "STOPPED", "reason": "Essential container in task exited"}),
        ),
    ] {
        let body = body.to_string();
        let headers = signed_headers(&fake, &Credentials::test(), operation, body.as_bytes());
        let mut request = String::from("POST / HTTP/1.1\r\n");
        for (name, value) in &headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
        stream.write_all(request.as_bytes()).expect("write");
        let text = read_one_response(&mut stream);
        assert!(text.starts_with("HTTP/1.1 200"), "{operation}: {text}");
    }
    let stopped = fake.wait_for_task_state(&task, "STOPPED", Instant::now() + DEADLINE);
    assert_eq!(
        stopped.reason.as_deref(),
        Some("Essential container in task exited")
    );
    let changes = fake.state_changes();
    assert_eq!(changes[0].operation, "SubmitContainerStateChange");
    assert_eq!(changes[0].containers[0]["exitCode"], json!(1));
    assert_eq!(fake.counters().connections, 1);
}

/// One response from a kept-alive connection: its head and `Content-Length` bytes of body.
fn read_one_response(stream: &mut TcpStream) -> String {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length: usize = head
                .lines()
                .find_map(|line| {
                    line.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().to_string())
                })
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            if body.len() >= length {
                return text;
            }
        }
        let read = stream
            .read(&mut chunk)
            .expect("an answer on the same connection");
        assert!(read > 0, "the connection closed: {text}");
        bytes.extend_from_slice(&chunk[..read]);
    }
}

#[test]
fn scripted_failures_a_deregistered_arn_and_a_clock_ahead() {
    let fake = FakeEcs::start();
    // Failures: the next two calls of one operation, then its real answer; others untouched.
    fake.fail_next(
        "DiscoverPollEndpoint",
        2,
        400,
        "ExpiredTokenException",
        "expired",
    );
    for _ in 0..2 {
        let (status, answer) = call(&fake, "DiscoverPollEndpoint", json!({"cluster": "edge"}));
        assert_eq!(
            (status, answer["__type"].as_str()),
            (400, Some("ExpiredTokenException"))
        );
    }
    let arn = register(&fake);
    let (status, answer) = call(&fake, "DiscoverPollEndpoint", json!({"cluster": "edge"}));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        fake.wait_for_answers("DiscoverPollEndpoint", 3, Instant::now() + DEADLINE),
        [400, 400, 200]
    );

    // A deregistered ARN is refused at registration; a fresh registration is not.
    fake.deregister(&arn);
    let (status, answer) = call(
        &fake,
        "RegisterContainerInstance",
        json!({"cluster": "edge", "containerInstanceArn": arn, "totalResources": []}),
    );
    assert_eq!(
        (status, answer["__type"].as_str()),
        (400, Some("InactiveInstanceException"))
    );
    assert_ne!(register(&fake), arn);

    // A clock an hour ahead: the host's time is refused as expired, the answer's Date says the
    // fake's time, and a request signed at that time is taken.
    fake.set_clock_ahead(3600);
    let body = json!({"cluster": "edge"}).to_string();
    let headers = signed_headers(
        &fake,
        &Credentials::test(),
        "DiscoverPollEndpoint",
        body.as_bytes(),
    );
    let (status, date, answer) = raw_dated_call(&fake, &headers, body.as_bytes());
    assert_eq!(status, 403, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("Signature expired"),
        "{answer}"
    );
    let server = httpdate::parse_http_date(&date).expect("an HTTP date");
    let ahead = server
        .duration_since(SystemTime::now())
        .expect("ahead of the host")
        .as_secs();
    assert!((3590..=3600).contains(&ahead), "{date}: {ahead} s");
    let headers = signed_headers_at(
        &fake,
        &Credentials::test(),
        "DiscoverPollEndpoint",
        body.as_bytes(),
        server,
    );
    let (status, _, answer) = raw_dated_call(&fake, &headers, body.as_bytes());
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        fake_ecs::http_date(784_111_777),
        "Sun, 06 Nov 1994 08:49:37 GMT"
    );
}
