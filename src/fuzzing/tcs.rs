//! Fuzz entry point for the ECS telemetry session (TCS): its messages from TCS and the frames
//! it builds from names and health output that come from outside.

/// The telemetry session's messages from TCS, as the session reads them: never a panic; a
/// message read is acted on by the session (heartbeat and ack keep the connection, the rest is
/// logged) without ending the connection; the text also goes through the metrics and health
/// builders as names and health output, whose frames stay JSON and keep at most 1024 bytes of
/// output.
pub fn tcs_messages(data: &[u8]) {
    use crate::control::ecs::telemetry::messages::{
        publish_health_requests, read_server_message, ContainerHealth, Identity, TaskHealth,
        MAX_HEALTH_OUTPUT_BYTES,
    };
    use crate::control::ecs::telemetry::session::{TelemetryInput, TelemetrySession};
    let text = String::from_utf8_lossy(data);
    let now = std::time::Instant::now();
    let mut session = TelemetrySession::new(now, 1);
    session.handle(TelemetryInput::Tick, now);
    session.handle(TelemetryInput::Connected, now);
    if let Ok(message) = read_server_message(&text) {
        session.handle(TelemetryInput::Message(message), now);
        assert!(
            session.is_connected(),
            "a message never ends the connection"
        );
    }
    let identity = Identity {
        cluster: text.to_string(),
        container_instance: "arn:i".into(),
    };
    let health = TaskHealth {
        task_arn: text.to_string(),
        family: "f".into(),
        version: "1".into(),
        containers: vec![ContainerHealth {
            container_name: text.to_string(),
            status: crate::task::HealthStatus::Unhealthy,
            since: u64::from(data.first().copied().unwrap_or(0)) << 40,
            output: Some(text.to_string()),
        }],
    };
    for frame in publish_health_requests(&identity, &text, &[health], 0) {
        let value: serde_json::Value =
            serde_json::from_str(&frame).expect("a health frame is JSON");
        let output = value["message"]["tasks"][0]["containers"][0]["statusMessage"]
            .as_str()
            .unwrap_or("");
        assert!(
            output.len() <= MAX_HEALTH_OUTPUT_BYTES,
            "{} bytes",
            output.len()
        );
        assert!(
            text.starts_with(output),
            "the output is the text's beginning"
        );
    }
}
