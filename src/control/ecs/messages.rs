//! The ACS websocket's framing: every message is `{"type":"<Name>","message":{...}}` (names and
//! fields from the ECS agent's `ecs-agent/acs/model/api/api-2.json`). Reading one gives its type
//! and body; writing one builds the envelope. Pure.

use serde_json::{json, Map, Value};

/// The largest message deckhand reads (ECS's payloads stay far below).
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// One message from ACS: its type name and its body (an object).
#[derive(Debug, Clone, PartialEq)]
pub struct Incoming {
    pub kind: String,
    pub body: Map<String, Value>,
}

/// Reads one websocket text frame; the error says why it is not an ACS message.
pub fn read_message(text: &str) -> Result<Incoming, String> {
    if text.len() > MAX_MESSAGE_BYTES {
        return Err(format!("{} bytes: at most {MAX_MESSAGE_BYTES}", text.len()));
    }
    let value: Value =
        serde_json::from_str(text).map_err(|error| format!("not valid JSON: {error}"))?;
    let kind = value
        .get("type")
        .and_then(Value::as_str)
        .ok_or("no \"type\"")?
        .to_string();
    let body = match value.get("message") {
        Some(Value::Object(body)) => body.clone(),
        None | Some(Value::Null) => Map::new(),
        Some(_) => return Err(format!("{kind}: \"message\" is not an object")),
    };
    Ok(Incoming { kind, body })
}

/// A string field of a body; `""` when absent or not a string.
pub fn text(body: &Map<String, Value>, key: &str) -> String {
    body.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// `{"type": kind, "message": message}` as text.
pub fn envelope(kind: &str, message: Value) -> String {
    json!({ "type": kind, "message": message }).to_string()
}

/// `AckRequest`: a payload or task manifest handled.
pub fn ack_request(cluster: &str, container_instance: &str, message_id: &str) -> String {
    envelope(
        "AckRequest",
        json!({ "cluster": cluster, "containerInstance": container_instance, "messageId": message_id }),
    )
}

/// `IAMRoleCredentialsAckRequest`: credentials received (from a payload's task or an
/// `IAMRoleCredentialsMessage`, whose id `message_id` is), with their id and expiration.
pub fn iam_role_credentials_ack(
    message_id: &str,
    credentials_id: &str,
    expiration: &str,
) -> String {
    envelope(
        "IAMRoleCredentialsAckRequest",
        json!({ "messageId": message_id, "credentialsId": credentials_id, "expiration": expiration }),
    )
}

/// `HeartbeatAckRequest`.
pub fn heartbeat_ack(message_id: &str) -> String {
    envelope("HeartbeatAckRequest", json!({ "messageId": message_id }))
}

/// `NackRequest`: a message deckhand will not act on, and why.
pub fn nack_request(
    cluster: &str,
    container_instance: &str,
    message_id: &str,
    reason: &str,
) -> String {
    envelope(
        "NackRequest",
        json!({ "cluster": cluster, "containerInstance": container_instance, "messageId": message_id, "reason": reason }),
    )
}

/// The task ARNs a `TaskManifestMessage` lists with `desiredStatus` RUNNING: only those are to
/// keep running (the ECS agent's `CompareRunningTasksOnInstanceWithManifest`); an entry with
/// another desired status, or none, counts as not listed.
pub fn manifest_running_arns(body: &Map<String, Value>) -> Vec<String> {
    match body.get("tasks") {
        Some(Value::Array(items)) => items
            .iter()
            .filter(|task| task.get("desiredStatus").and_then(Value::as_str) == Some("RUNNING"))
            .filter_map(|task| task.get("taskArn").and_then(Value::as_str))
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

/// `TaskStopVerificationMessage`: the local tasks a manifest did not list as RUNNING, for ECS to
/// confirm, each a `TaskIdentifier` as the ECS agent sends it: `desiredStatus` STOPPED, the
/// task's ARN and the manifest's cluster (`taskClusterArn`, left out when it had none).
pub fn task_stop_verification(message_id: &str, cluster_arn: &str, task_arns: &[String]) -> String {
    let candidates: Vec<Value> = task_arns
        .iter()
        .map(|arn| {
            let mut candidate = json!({ "desiredStatus": "STOPPED", "taskArn": arn });
            if !cluster_arn.is_empty() {
                candidate["taskClusterArn"] = json!(cluster_arn);
            }
            candidate
        })
        .collect();
    envelope(
        "TaskStopVerificationMessage",
        json!({ "messageId": message_id, "stopCandidates": candidates }),
    )
}
