//! The fuzz entry points for what comes from AWS: the ECS API's answers, the shared credentials
//! file, ACS tasks and websocket frames, and environment files (from S3 or its mirror).

use std::io::BufReader;

use super::{FakeConnection, SplitReader};

/// The ECS API's answers as the ECS client reads them (head, body within its limits, JSON, the
/// error classes of an error status), in small reads; and any bytes as an error body, whose
/// error type never keeps its `prefix#`.
pub fn ecs_http(data: &[u8]) {
    let step = 1 + data.len() % 13;
    let _ = crate::control::ecs::client::read_answer(BufReader::new(SplitReader { data, step }));
    for status in [400, 403, 500] {
        if let crate::control::ecs::EcsError::Service { error_type, .. } =
            crate::control::ecs::error_from_answer(status, "Bad Request", None, data)
        {
            assert!(!error_type.contains('#'), "{error_type:?}");
            assert!(!error_type.is_empty());
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

/// The ACS websocket's frames as the client reads them (part already read with the upgrade's
/// answer, the rest in small reads): never a panic; no more text comes out than went in; the
/// client's answers (pongs, closes) are final masked frames; once a read ends or fails, the
/// next says the socket is closed.
pub fn acs_frames(data: &[u8]) {
    use crate::control::ecs::websocket::ClientSocket;
    let ahead = data.len().min(data.len() % 7);
    let (read_ahead, rest) = data.split_at(ahead);
    let connection = FakeConnection {
        input: SplitReader {
            data: rest,
            step: 1 + data.len() % 11,
        },
        output: Vec::new(),
    };
    let mut socket = ClientSocket::new(connection, read_ahead.to_vec());
    let mut text_bytes = 0;
    while let Ok(Some(text)) = socket.read_text() {
        text_bytes += text.len();
    }
    assert!(text_bytes <= data.len(), "{text_bytes} bytes of text");
    assert!(
        matches!(socket.read_text(), Ok(None)),
        "a read after the end"
    );
    let mut written = socket.stream_ref().output.as_slice();
    while let [first, second, rest @ ..] = written {
        assert_eq!(first & 0xF0, 0x80, "a final frame without reserved bits");
        assert_eq!(second & 0x80, 0x80, "a masked frame");
        let length = usize::from(second & 0x7F);
        assert!(length <= 125, "a control frame's length");
        written = rest.get(4 + length..).expect("the whole frame was written");
    }
}

/// An environment file (S3 or the mirror): never a panic; every variable kept has a name and a
/// value, no `=` in its name, no NUL, and is named once; merged under an `environment`, the
/// environment's own values stay.
pub fn environment_file(data: &[u8]) {
    use crate::task::environment_files::{merge_environment_files, parse_environment_file};
    match parse_environment_file(data) {
        Ok(variables) => {
            let mut names = std::collections::HashSet::new();
            for (name, value) in &variables {
                assert!(!name.is_empty() && !value.is_empty(), "{name:?}={value:?}");
                assert!(!name.contains('=') && !name.contains('\0') && !value.contains('\0'));
                assert!(names.insert(name.clone()), "{name:?} twice");
            }
            let mut environment = vec!["KEEP=mine".to_string()];
            merge_environment_files(&mut environment, &[variables.clone(), variables]);
            assert_eq!(environment.first().map(String::as_str), Some("KEEP=mine"));
            assert_eq!(
                environment.len(),
                1 + names.len() - usize::from(names.contains("KEEP"))
            );
        }
        Err(message) => assert!(!message.is_empty()),
    }
}
