//! Fuzz entry points for the Amazon ECS connection's parsers: the ECS API's answers, the shared
//! credentials file, ACS tasks, the ACS websocket's frames and a proxy's answer to `CONNECT`.

use super::{FakeConnection, SplitReader};

/// The ECS API's answers as the ECS client reads them once ureq has the status and body: JSON
/// or the error class of an error status; any bytes as an error body, whose error type never
/// keeps its `prefix#`; and the bytes as an error answer's `Date` header, with the clock
/// correction it gives.
pub fn ecs_http(data: &[u8]) {
    use crate::control::ecs::clock_skew::{date_millis, skew_correction};
    let status = [200, 400, 403, 429, 500][data.len() % 5];
    let type_header = data
        .first()
        .is_some_and(|byte| byte % 2 == 0)
        .then_some("a#B:c");
    let _ = crate::control::ecs::client::parse_answer(status, "Reason", type_header, data);
    for status in [400, 403, 500] {
        let error = crate::control::ecs::error_from_answer(status, "Bad Request", None, data);
        if let crate::control::ecs::EcsError::Service { error_type, .. } = &error {
            assert!(!error_type.contains('#'), "{error_type:?}");
            assert!(!error_type.is_empty());
        }
        let text = String::from_utf8_lossy(data);
        let server = date_millis(&text);
        for offset in [0, i64::MIN, i64::MAX] {
            if let Some(corrected) = skew_correction(&error, server, u64::MAX - 1, offset) {
                assert!(server.is_some(), "a correction without a Date: {corrected}");
            }
        }
    }
}

/// A shared AWS credentials file: the INI parser never panics, a parsed profile's name and
/// keys are trimmed (keys lowercase), and an error names a line without quoting it.
pub fn ecs_credentials(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match crate::control::ecs::credentials::parse_profiles(&text) {
        Ok(profiles) => {
            for (name, properties) in &profiles {
                assert!(!name.is_empty() && name.trim() == name, "{name:?}");
                for key in properties.keys() {
                    assert!(
                        !key.is_empty() && *key == key.trim().to_ascii_lowercase(),
                        "{key:?}"
                    );
                }
                let _ = crate::control::ecs::credentials::profile_credentials(&profiles, name);
            }
        }
        Err(message) => assert!(message.starts_with("line "), "{message}"),
    }
}

/// ECS control-plane input: the bytes as one ACS task (`task::acs::parse_acs_task`) and as a
/// websocket frame through the ACS session. Never a panic; a mapped task is a valid definition
/// (it passes the task-definition rules again from its own model), its containers named once;
/// every error has a path; the session answers any frame without panicking.
pub fn acs_task(data: &[u8]) {
    use crate::control::ecs::session::{AcsSession, SessionInput};
    use crate::task::acs::parse_acs_task;
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        match parse_acs_task(&value) {
            Ok(task) => {
                assert!(!task.arn.is_empty());
                let order = crate::task::start_order(&task.definition);
                assert_eq!(order.len(), task.definition.containers.len());
            }
            Err(error) => assert!(!error.path.is_empty() && !error.message.is_empty()),
        }
        let payload = serde_json::json!({"type": "PayloadMessage", "message": {
            "messageId": "m", "clusterArn": "c", "containerInstanceArn": "i", "tasks": [value]}});
        let mut session = AcsSession::new("c", "i", 1);
        let now = std::time::Instant::now();
        session.handle(SessionInput::Connected, now);
        session.handle(SessionInput::Text(payload.to_string()), now);
    }
    let mut session = AcsSession::new("c", "i", 2);
    let now = std::time::Instant::now();
    session.handle(SessionInput::Connected, now);
    session.handle(
        SessionInput::Text(String::from_utf8_lossy(data).into_owned()),
        now,
    );
}

/// The ACS websocket's frames as deckhand reads them (tungstenite's framing, deckhand's reading
/// of texts and closes), in small reads: never a panic; no more text comes out than went in; a
/// read ends in a text, a close or an error, and the socket ends.
pub fn acs_frames(data: &[u8]) {
    use crate::control::ecs::websocket::{Received, SignedSocket};
    let connection = FakeConnection {
        input: SplitReader {
            data,
            step: 1 + data.len() % 11,
        },
        output: Vec::new(),
    };
    let mut socket = SignedSocket::from_upgraded(connection, "fuzz");
    let mut text_bytes = 0;
    for _ in 0..=data.len() {
        match socket.read_text() {
            Ok(Received::Text(text)) => text_bytes += text.len(),
            Ok(Received::Closed { .. }) | Err(_) => break,
        }
    }
    assert!(text_bytes <= data.len(), "{text_bytes} bytes of text");
    // Whatever the client answered (pongs, closes) is masked client frames.
    if let [first, second, ..] = socket.stream().output.as_slice() {
        assert_eq!(first & 0x70, 0, "no reserved bits");
        assert_eq!(second & 0x80, 0x80, "a masked frame");
    }
}

/// A proxy's answer to `CONNECT` (deckhand's websockets tunnel through it) and the proxy
/// variables: the answer parser never panics and a complete head lies within the bytes; the
/// tunnel opener, fed the bytes in small reads, ends (open or refused) without reading past
/// them; `NO_PROXY` and proxy URLs parse without panicking and a refusal names the variable.
pub fn proxy_answers(data: &[u8]) {
    use crate::net::proxy::{
        connect_tunnel, parse_connect_answer, NoProxy, ProxySettings, ProxyUrl,
    };
    if let Ok(Some(answer)) = parse_connect_answer(data) {
        assert!(answer.head_len <= data.len());
        assert!(answer.status <= 999);
    }
    let proxy = ProxyUrl::parse("http://u:p@proxy:3128").expect("a valid proxy URL");
    let mut connection = FakeConnection {
        input: SplitReader {
            data,
            step: 1 + data.len() % 7,
        },
        output: Vec::new(),
    };
    let _ = connect_tunnel(&mut connection, &proxy, "ecs.example", 443);
    assert!(connection
        .output
        .starts_with(b"CONNECT ecs.example:443 HTTP/1.1\r\n"));
    let text = String::from_utf8_lossy(data);
    let no_proxy = NoProxy::parse(&text);
    for host in ["ecs.us-west-2.amazonaws.com", "10.1.2.3", "[fd00::1]", ""] {
        let _ = no_proxy.matches(host);
        let _ = no_proxy.matches(&text);
    }
    let lookup =
        |name: &str| (name == "HTTPS_PROXY" || name == "NO_PROXY").then(|| text.to_string());
    match ProxySettings::from_lookup(&lookup) {
        Ok(settings) => {
            let _ = settings.proxy_for(true, "ecs.example");
        }
        Err(message) => assert!(message.starts_with("HTTPS_PROXY: "), "{message}"),
    }
}

/// Task IAM role credentials from ACS: the bytes as an `IAMRoleCredentials` object
/// (`role_credentials::parse_acs_credentials`), as a payload task's `roleCredentials` and
/// `executionRoleCredentials` (through `parse_acs_task`), and as an `IAMRoleCredentialsMessage`
/// through the ACS session. Never a panic; a read id is fit for a URL path; neither an error nor
/// a `Debug` of what was read quotes the secret, token or key; the session acknowledges only
/// what it handed over to be set.
pub fn role_credentials(data: &[u8]) {
    use crate::control::ecs::session::{AcsSession, SessionEffect, SessionInput};
    use crate::role_credentials::{parse_acs_credentials, valid_credentials_id};
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let secrets: Vec<String> = ["accessKeyId", "secretAccessKey", "sessionToken"]
        .iter()
        .filter_map(|key| value.get(key).and_then(serde_json::Value::as_str))
        .filter(|secret| secret.len() >= 8)
        .map(str::to_string)
        .collect();
    let quoted = |text: &str| secrets.iter().any(|secret| text.contains(secret.as_str()));
    match parse_acs_credentials(&value) {
        Ok(read) => {
            assert!(valid_credentials_id(&read.credentials_id));
            let shown = format!("{read:?}");
            // The id, ARN and expiration are shown: a secret equal to one of them may be.
            let visible = [
                &read.credentials_id,
                &read.credentials.role_arn,
                &read.credentials.expiration,
            ];
            if !visible.iter().any(|text| quoted(text)) {
                assert!(!quoted(&shown), "{shown}");
            }
        }
        Err(message) => assert!(!quoted(&message), "{message}"),
    }
    let task = serde_json::json!({"arn": "arn:aws:ecs:r:1:task/c/t", "desiredStatus": "RUNNING",
        "containers": [{"name": "a", "image": "busybox", "essential": true}],
        "roleCredentials": value, "executionRoleCredentials": value});
    if let Err(error) = crate::task::acs::parse_acs_task(&task) {
        assert!(!quoted(&error.message), "{error}");
    }
    let mut session = AcsSession::new("c", "i", 3);
    let now = std::time::Instant::now();
    session.handle(SessionInput::Connected, now);
    for message in [
        value.clone(),
        serde_json::json!({"messageId": "m", "taskArn": "arn:t", "roleType": "TaskApplication",
                           "roleCredentials": value}),
    ] {
        let frame = serde_json::json!({"type": "IAMRoleCredentialsMessage", "message": message});
        for effect in session.handle(SessionInput::Text(frame.to_string()), now) {
            match effect {
                SessionEffect::SetCredentials { credentials, .. } => {
                    assert!(valid_credentials_id(&credentials.credentials_id));
                }
                SessionEffect::Send(text) => panic!("sent before the credentials were set: {text}"),
                _ => {}
            }
        }
    }
}
