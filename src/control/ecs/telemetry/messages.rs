//! The telemetry session's messages (TCS, shapes and names from the ECS agent's
//! `ecs-agent/tcs/model/api/api-2.json`), built and read by pure functions.
//!
//! deckhand sends `PublishMetricsRequest` (per task, each container's CPU and memory as a
//! `CWStatsSet`), `PublishHealthRequest` (the containers with a health check) and
//! `PublishInstanceStatusRequest` (the Docker runtime check), each in ACS's
//! `{"type": …, "message": …}` envelope. As the ECS agent does, a message goes out behind the
//! headers of a SigV4-signed `GET` of the session's URL whose body is the message
//! ([`signed_frame`]): `Authorization`, `Host`, `X-Amz-Date`, `X-Amz-Security-Token`, a blank
//! line, then the JSON. Times are seconds since the epoch with milliseconds, as a JSON number
//! (the AWS SDK's form). Requests carry at most 10 tasks each (the ECS agent's page size); the
//! last page of a message says `fin`. `StartTelemetrySessionRequest` is in the model, but the ECS
//! agent never sends it (the signed upgrade starts the session), and neither does deckhand.
//! `statusMessage` (the check's output) is in `ContainerHealth`'s model; deckhand fills it.
//!
//! TCS sends `HeartbeatMessage`, `AckPublishMetric`, `AckPublishHealth`,
//! `AckPublishInstanceStatus`, `StopTelemetrySessionMessage` and its error shapes
//! (`ServerException`, `BadRequestException`, `ResourceValidationException`,
//! `InvalidParameterException`); [`read_server_message`] reads them and never panics.

use crate::control::ecs::messages::{envelope, read_message};
use crate::task::{HealthStatus, Millis};
use serde_json::{json, Map, Value};

/// Tasks in one `PublishMetricsRequest` and one `PublishHealthRequest` (`tasksInMetricMessage`,
/// `tasksInHealthMessage`).
pub const TASKS_PER_MESSAGE: usize = 10;
/// The ECS agent keeps this much of the last health check's output (`maxHealthCheckOutputLength`,
/// in bytes).
pub const MAX_HEALTH_OUTPUT_BYTES: usize = 1024;
/// The instance status check deckhand runs (`InstanceHealthCheckTypeContainerRuntime`).
pub const CONTAINER_RUNTIME_CHECK: &str = "ContainerRuntime";

/// Who is publishing: the cluster and this container instance's ARN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub cluster: String,
    pub container_instance: String,
}

/// `CWStatsSet`: a window of samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StatsSet {
    pub min: f64,
    pub max: f64,
    pub sample_count: u64,
    pub sum: f64,
}

impl StatsSet {
    /// The set of these samples (NaN ones skipped); `None` when none is left.
    pub fn of(samples: impl IntoIterator<Item = f64>) -> Option<StatsSet> {
        let mut set: Option<StatsSet> = None;
        for sample in samples.into_iter().filter(|sample| !sample.is_nan()) {
            let next = match set {
                None => StatsSet {
                    min: sample,
                    max: sample,
                    sample_count: 1,
                    sum: sample,
                },
                Some(set) => StatsSet {
                    min: set.min.min(sample),
                    max: set.max.max(sample),
                    sample_count: set.sample_count + 1,
                    sum: set.sum + sample,
                },
            };
            set = Some(next);
        }
        set
    }

    fn to_json(self) -> Value {
        json!({"min": self.min, "max": self.max, "sampleCount": self.sample_count, "sum": self.sum})
    }
}

/// `ContainerMetric`: CPU in percent of the host's CPUs, memory in MiB.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerMetric {
    pub container_name: String,
    pub cpu: StatsSet,
    pub memory: StatsSet,
}

/// `TaskMetric`.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskMetric {
    pub task_arn: String,
    pub family: String,
    pub version: String,
    pub containers: Vec<ContainerMetric>,
}

/// `ContainerHealth`.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerHealth {
    pub container_name: String,
    pub status: HealthStatus,
    pub since: Millis,
    /// The last check's output (cut to [`MAX_HEALTH_OUTPUT_BYTES`] when built).
    pub output: Option<String>,
}

/// `TaskHealth`.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskHealth {
    pub task_arn: String,
    pub family: String,
    pub version: String,
    pub containers: Vec<ContainerHealth>,
}

/// `InstanceHealthcheckStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceCheckStatus {
    Initializing,
    Ok,
    Impaired,
    InsufficientData,
}

impl InstanceCheckStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceCheckStatus::Initializing => "INITIALIZING",
            InstanceCheckStatus::Ok => "OK",
            InstanceCheckStatus::Impaired => "IMPAIRED",
            InstanceCheckStatus::InsufficientData => "INSUFFICIENT_DATA",
        }
    }
}

/// `InstanceStatus`: one check's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceStatus {
    pub check_type: String,
    pub status: InstanceCheckStatus,
    pub last_updated: Millis,
    pub last_status_change: Millis,
}

/// A time as TCS reads it: seconds since the epoch with milliseconds, a JSON number.
pub fn timestamp(millis: Millis) -> Value {
    json!(millis as f64 / 1000.0)
}

/// ECS's name of a health status (`BackendStatus`).
pub fn health_status_name(status: HealthStatus) -> &'static str {
    match status {
        HealthStatus::Healthy => "HEALTHY",
        HealthStatus::Unhealthy => "UNHEALTHY",
        HealthStatus::Unknown => "UNKNOWN",
    }
}

/// The check's output as the ECS agent keeps it: its first 1024 bytes, here cut back to a
/// character boundary so the text stays UTF-8.
pub fn trimmed_health_output(output: &str) -> &str {
    if output.len() <= MAX_HEALTH_OUTPUT_BYTES {
        return output;
    }
    let mut end = MAX_HEALTH_OUTPUT_BYTES;
    while !output.is_char_boundary(end) {
        end -= 1;
    }
    output.get(..end).unwrap_or("")
}

/// The `PublishMetricsRequest`s of one publication, as envelopes: `tasks` in pages of 10, the
/// last with `fin`; with no task, one request that says the instance is `idle`.
pub fn publish_metrics_requests(
    identity: &Identity,
    message_id: &str,
    tasks: &[TaskMetric],
    now: Millis,
) -> Vec<String> {
    let metadata = |idle: bool, fin: bool| {
        json!({
            "cluster": identity.cluster,
            "containerInstance": identity.container_instance,
            "messageId": message_id,
            "idle": idle,
            "fin": fin,
        })
    };
    if tasks.is_empty() {
        return vec![envelope(
            "PublishMetricsRequest",
            json!({"metadata": metadata(true, true), "taskMetrics": [], "timestamp": timestamp(now)}),
        )];
    }
    let pages = tasks.chunks(TASKS_PER_MESSAGE).count();
    tasks
        .chunks(TASKS_PER_MESSAGE)
        .enumerate()
        .map(|(index, page)| {
            let task_metrics: Vec<Value> = page.iter().map(task_metric_json).collect();
            envelope(
                "PublishMetricsRequest",
                json!({
                    "metadata": metadata(false, index + 1 == pages),
                    "taskMetrics": task_metrics,
                    "timestamp": timestamp(now),
                }),
            )
        })
        .collect()
}

fn task_metric_json(task: &TaskMetric) -> Value {
    let containers: Vec<Value> = task
        .containers
        .iter()
        .map(|container| {
            json!({
                "containerName": container.container_name,
                "cpuStatsSet": container.cpu.to_json(),
                "memoryStatsSet": container.memory.to_json(),
            })
        })
        .collect();
    json!({
        "taskArn": task.task_arn,
        "taskDefinitionFamily": task.family,
        "taskDefinitionVersion": task.version,
        "containerMetrics": containers,
    })
}

/// The `PublishHealthRequest`s for `tasks`, in pages of 10, the last with `fin`; none when no
/// task has a container with a health check.
pub fn publish_health_requests(
    identity: &Identity,
    message_id: &str,
    tasks: &[TaskHealth],
    now: Millis,
) -> Vec<String> {
    let pages = tasks.chunks(TASKS_PER_MESSAGE).count();
    tasks
        .chunks(TASKS_PER_MESSAGE)
        .enumerate()
        .map(|(index, page)| {
            let task_healths: Vec<Value> = page.iter().map(task_health_json).collect();
            envelope(
                "PublishHealthRequest",
                json!({
                    "metadata": {
                        "cluster": identity.cluster,
                        "containerInstance": identity.container_instance,
                        "messageId": message_id,
                        "fin": index + 1 == pages,
                    },
                    "tasks": task_healths,
                    "timestamp": timestamp(now),
                }),
            )
        })
        .collect()
}

fn task_health_json(task: &TaskHealth) -> Value {
    let containers: Vec<Value> = task
        .containers
        .iter()
        .map(|container| {
            let mut health = Map::new();
            health.insert("containerName".into(), json!(container.container_name));
            health.insert(
                "healthStatus".into(),
                json!(health_status_name(container.status)),
            );
            health.insert("statusSince".into(), timestamp(container.since));
            if let Some(output) = container.output.as_deref().filter(|text| !text.is_empty()) {
                health.insert("statusMessage".into(), json!(trimmed_health_output(output)));
            }
            Value::Object(health)
        })
        .collect();
    json!({
        "taskArn": task.task_arn,
        "taskDefinitionFamily": task.family,
        "taskDefinitionVersion": task.version,
        "containers": containers,
    })
}

/// A `PublishInstanceStatusRequest`.
pub fn publish_instance_status_request(
    identity: &Identity,
    request_id: &str,
    statuses: &[InstanceStatus],
    now: Millis,
) -> String {
    let statuses: Vec<Value> = statuses
        .iter()
        .map(|status| {
            json!({
                "type": status.check_type,
                "status": status.status.as_str(),
                "lastUpdated": timestamp(status.last_updated),
                "lastStatusChange": timestamp(status.last_status_change),
            })
        })
        .collect();
    envelope(
        "PublishInstanceStatusRequest",
        json!({
            "metadata": {
                "cluster": identity.cluster,
                "containerInstance": identity.container_instance,
                "requestId": request_id,
            },
            "statuses": statuses,
            "timestamp": timestamp(now),
        }),
    )
}

/// A message as it goes on the wire: the signed request's headers (`name: value` lines, in
/// the order given), a blank line, the message.
pub fn signed_frame(headers: &[(&str, &str)], message: &str) -> String {
    let mut frame = String::with_capacity(message.len() + 512);
    for (name, value) in headers {
        frame.push_str(name);
        frame.push_str(": ");
        frame.push_str(value);
        frame.push_str("\r\n");
    }
    frame.push_str("\r\n");
    frame.push_str(message);
    frame
}

/// A message from TCS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerMessage {
    /// `HeartbeatMessage`; `healthy` as sent.
    Heartbeat { healthy: Option<bool> },
    /// `AckPublishMetric`, `AckPublishHealth` or `AckPublishInstanceStatus`: the type's name.
    Ack(String),
    /// `StopTelemetrySessionMessage`, with its message.
    StopSession(String),
    /// One of TCS's errors: its type and message.
    Error { kind: String, message: String },
    /// A type deckhand does not act on.
    Other(String),
}

/// TCS's error types (`api-2.json`'s exceptions).
const ERROR_TYPES: &[&str] = &[
    "ServerException",
    "BadRequestException",
    "ResourceValidationException",
    "InvalidParameterException",
];

/// Reads one text frame from TCS; the error says why it is not a TCS message.
pub fn read_server_message(text: &str) -> Result<ServerMessage, String> {
    let incoming = read_message(text)?;
    let body = &incoming.body;
    let message = || {
        body.get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    Ok(match incoming.kind.as_str() {
        "HeartbeatMessage" => ServerMessage::Heartbeat {
            healthy: body.get("healthy").and_then(Value::as_bool),
        },
        "AckPublishMetric" | "AckPublishHealth" | "AckPublishInstanceStatus" => {
            ServerMessage::Ack(incoming.kind)
        }
        "StopTelemetrySessionMessage" => ServerMessage::StopSession(message()),
        kind if ERROR_TYPES.contains(&kind) => ServerMessage::Error {
            kind: incoming.kind.clone(),
            message: message(),
        },
        _ => ServerMessage::Other(incoming.kind),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> Identity {
        Identity {
            cluster: "edge".into(),
            container_instance: "arn:aws:ecs:us-west-2:123456789012:container-instance/edge/abc"
                .into(),
        }
    }

    fn parsed(text: &str) -> Value {
        serde_json::from_str(text).expect("JSON")
    }

    /// The members of `api-2.json`'s structures that these messages use.
    fn shape_members(shape: &str) -> &'static [&'static str] {
        match shape {
            "PublishMetricsRequest" => &["metadata", "instanceMetrics", "taskMetrics", "timestamp"],
            "MetricsMetadata" => &["cluster", "containerInstance", "messageId", "idle", "fin"],
            "TaskMetric" => &[
                "taskArn",
                "clusterArn",
                "taskDefinitionFamily",
                "taskDefinitionVersion",
                "containerMetrics",
                "ephemeralStorageMetrics",
                "volumeMetrics",
                "serviceConnectMetricsWrapper",
            ],
            "ContainerMetric" => &[
                "containerArn",
                "containerName",
                "cpuStatsSet",
                "memoryStatsSet",
                "networkStatsSet",
                "storageStatsSet",
                "restartStatsSet",
                "generalMetricsPayload",
            ],
            "CWStatsSet" => &["min", "max", "sampleCount", "sum"],
            "PublishHealthRequest" => &["metadata", "tasks", "timestamp"],
            "HealthMetadata" => &["cluster", "containerInstance", "messageId", "fin"],
            "TaskHealth" => &[
                "taskArn",
                "clusterArn",
                "taskDefinitionFamily",
                "taskDefinitionVersion",
                "containers",
            ],
            "ContainerHealth" => &[
                "containerName",
                "healthStatus",
                "statusSince",
                "statusMessage",
            ],
            "PublishInstanceStatusRequest" => &["metadata", "statuses", "timestamp"],
            "InstanceStatusMetadata" => &["cluster", "containerInstance", "requestId"],
            "InstanceStatus" => &[
                "type",
                "status",
                "statusReason",
                "lastUpdated",
                "lastStatusChange",
            ],
            other => panic!("no shape {other}"),
        }
    }

    fn assert_shape(value: &Value, shape: &str) {
        let object = value
            .as_object()
            .unwrap_or_else(|| panic!("{shape}: {value}"));
        for key in object.keys() {
            assert!(
                shape_members(shape).contains(&key.as_str()),
                "{shape} has no member {key:?}: {value}"
            );
        }
    }

    fn container(name: &str, cpu: &[f64], memory: &[f64]) -> ContainerMetric {
        ContainerMetric {
            container_name: name.into(),
            cpu: StatsSet::of(cpu.iter().copied()).expect("cpu samples"),
            memory: StatsSet::of(memory.iter().copied()).expect("memory samples"),
        }
    }

    fn task(number: usize) -> TaskMetric {
        TaskMetric {
            task_arn: format!("arn:aws:ecs:us-west-2:123456789012:task/edge/{number:032x}"),
            family: "web".into(),
            version: "3".into(),
            containers: vec![container("app", &[1.5, 2.5], &[10.0, 12.0])],
        }
    }

    #[test]
    fn stats_sets_are_min_max_count_and_sum_without_nan() {
        let table: &[(&[f64], Option<StatsSet>)] = &[
            (&[], None),
            (&[f64::NAN], None),
            (
                &[2.0, f64::NAN, 1.0, 4.0],
                Some(StatsSet {
                    min: 1.0,
                    max: 4.0,
                    sample_count: 3,
                    sum: 7.0,
                }),
            ),
            (
                &[0.0],
                Some(StatsSet {
                    min: 0.0,
                    max: 0.0,
                    sample_count: 1,
                    sum: 0.0,
                }),
            ),
        ];
        for (samples, expected) in table {
            assert_eq!(
                StatsSet::of(samples.iter().copied()),
                *expected,
                "{samples:?}"
            );
        }
    }

    #[test]
    fn metrics_requests_follow_the_model_and_page_by_ten_tasks() {
        /// (idle, fin, tasks in the request) of each request.
        type Pages = &'static [(bool, bool, usize)];
        let table: &[(usize, Pages)] = &[
            // (tasks, [(idle, fin, tasks in the request)])
            (0, &[(true, true, 0)]),
            (1, &[(false, true, 1)]),
            (10, &[(false, true, 10)]),
            (11, &[(false, false, 10), (false, true, 1)]),
            (
                25,
                &[(false, false, 10), (false, false, 10), (false, true, 5)],
            ),
        ];
        for (count, expected) in table {
            let tasks: Vec<TaskMetric> = (0..*count).map(task).collect();
            let requests = publish_metrics_requests(&identity(), "m-1", &tasks, 1_733_349_000_123);
            let got: Vec<(bool, bool, usize)> = requests
                .iter()
                .map(|text| {
                    let frame = parsed(text);
                    assert_eq!(frame["type"], "PublishMetricsRequest");
                    let message = &frame["message"];
                    assert_shape(message, "PublishMetricsRequest");
                    assert_shape(&message["metadata"], "MetricsMetadata");
                    assert_eq!(message["metadata"]["cluster"], "edge");
                    assert_eq!(message["metadata"]["messageId"], "m-1");
                    assert_eq!(message["timestamp"], json!(1_733_349_000.123));
                    for task in message["taskMetrics"].as_array().expect("a list") {
                        assert_shape(task, "TaskMetric");
                        for container in task["containerMetrics"].as_array().expect("a list") {
                            assert_shape(container, "ContainerMetric");
                            assert_shape(&container["cpuStatsSet"], "CWStatsSet");
                            assert_shape(&container["memoryStatsSet"], "CWStatsSet");
                        }
                    }
                    (
                        message["metadata"]["idle"].as_bool().expect("idle"),
                        message["metadata"]["fin"].as_bool().expect("fin"),
                        message["taskMetrics"].as_array().map_or(0, Vec::len),
                    )
                })
                .collect();
            assert_eq!(got, *expected, "{count} tasks");
        }
        let one = parsed(&publish_metrics_requests(&identity(), "m", &[task(7)], 0)[0]);
        assert_eq!(
            one["message"]["taskMetrics"][0],
            json!({
                "taskArn": task(7).task_arn,
                "taskDefinitionFamily": "web",
                "taskDefinitionVersion": "3",
                "containerMetrics": [{
                    "containerName": "app",
                    "cpuStatsSet": {"min": 1.5, "max": 2.5, "sampleCount": 2, "sum": 4.0},
                    "memoryStatsSet": {"min": 10.0, "max": 12.0, "sampleCount": 2, "sum": 22.0},
                }],
            })
        );
    }

    fn health(name: &str, status: HealthStatus, output: Option<&str>) -> ContainerHealth {
        ContainerHealth {
            container_name: name.into(),
            status,
            since: 1_700_000_000_500,
            output: output.map(str::to_string),
        }
    }

    #[test]
    fn health_requests_carry_status_since_and_the_trimmed_output() {
        let long = "é".repeat(600); // 1200 bytes
        let tasks = vec![TaskHealth {
            task_arn: "arn:t".into(),
            family: "web".into(),
            version: "3".into(),
            containers: vec![
                health("app", HealthStatus::Healthy, Some("ok\n")),
                health("db", HealthStatus::Unhealthy, Some(&long)),
                health("side", HealthStatus::Unknown, None),
            ],
        }];
        let requests = publish_health_requests(&identity(), "h-1", &tasks, 5_000);
        assert_eq!(requests.len(), 1);
        let frame = parsed(&requests[0]);
        assert_eq!(frame["type"], "PublishHealthRequest");
        let message = &frame["message"];
        assert_shape(message, "PublishHealthRequest");
        assert_shape(&message["metadata"], "HealthMetadata");
        assert_eq!(message["metadata"]["fin"], true);
        assert_eq!(message["timestamp"], json!(5.0));
        let task = &message["tasks"][0];
        assert_shape(task, "TaskHealth");
        let containers = task["containers"].as_array().expect("a list");
        for container in containers {
            assert_shape(container, "ContainerHealth");
        }
        let table = [
            ("app", "HEALTHY", Some("ok\n".to_string())),
            ("db", "UNHEALTHY", Some("é".repeat(512))),
            ("side", "UNKNOWN", None),
        ];
        for ((name, status, message), got) in table.iter().zip(containers) {
            assert_eq!(got["containerName"], *name);
            assert_eq!(got["healthStatus"], *status);
            assert_eq!(got["statusSince"], json!(1_700_000_000.5));
            assert_eq!(got["statusMessage"].as_str(), message.as_deref(), "{name}");
        }
        assert!(publish_health_requests(&identity(), "h", &[], 0).is_empty());
        let many: Vec<TaskHealth> = (0..12).map(|_| tasks[0].clone()).collect();
        let fins: Vec<Value> = publish_health_requests(&identity(), "h", &many, 0)
            .iter()
            .map(|text| parsed(text)["message"]["metadata"]["fin"].clone())
            .collect();
        assert_eq!(fins, [json!(false), json!(true)]);
    }

    #[test]
    fn output_is_cut_at_1024_bytes_on_a_character_boundary() {
        let table: &[(&str, usize)] = &[("", 0), ("ok", 2)];
        for (text, length) in table {
            assert_eq!(trimmed_health_output(text).len(), *length);
        }
        assert_eq!(trimmed_health_output(&"a".repeat(2000)).len(), 1024);
        // 1023 ASCII bytes then a two-byte character: the character does not fit.
        let text = format!("{}é", "a".repeat(1023));
        assert_eq!(trimmed_health_output(&text).len(), 1023);
    }

    #[test]
    fn instance_status_follows_the_model() {
        let statuses = [InstanceStatus {
            check_type: CONTAINER_RUNTIME_CHECK.into(),
            status: InstanceCheckStatus::Impaired,
            last_updated: 2_000,
            last_status_change: 1_000,
        }];
        let frame = parsed(&publish_instance_status_request(
            &identity(),
            "r-1",
            &statuses,
            3_000,
        ));
        assert_eq!(frame["type"], "PublishInstanceStatusRequest");
        let message = &frame["message"];
        assert_shape(message, "PublishInstanceStatusRequest");
        assert_shape(&message["metadata"], "InstanceStatusMetadata");
        assert_shape(&message["statuses"][0], "InstanceStatus");
        assert_eq!(
            message["statuses"][0],
            json!({"type": "ContainerRuntime", "status": "IMPAIRED", "lastUpdated": 2.0, "lastStatusChange": 1.0})
        );
        assert_eq!(message["metadata"]["requestId"], "r-1");
        let names: Vec<&str> = [
            InstanceCheckStatus::Initializing,
            InstanceCheckStatus::Ok,
            InstanceCheckStatus::Impaired,
            InstanceCheckStatus::InsufficientData,
        ]
        .iter()
        .map(|status| status.as_str())
        .collect();
        assert_eq!(
            names,
            ["INITIALIZING", "OK", "IMPAIRED", "INSUFFICIENT_DATA"]
        );
    }

    #[test]
    fn a_frame_is_the_signed_headers_a_blank_line_and_the_message() {
        assert_eq!(
            signed_frame(&[("Authorization", "AWS4 x"), ("Host", "h")], "{}"),
            "Authorization: AWS4 x\r\nHost: h\r\n\r\n{}"
        );
    }

    #[test]
    fn server_messages_are_read_by_type() {
        let table: &[(&str, Result<ServerMessage, &str>)] = &[
            (
                r#"{"type":"HeartbeatMessage","message":{"healthy":true}}"#,
                Ok(ServerMessage::Heartbeat {
                    healthy: Some(true),
                }),
            ),
            (
                r#"{"type":"HeartbeatMessage"}"#,
                Ok(ServerMessage::Heartbeat { healthy: None }),
            ),
            (
                r#"{"type":"AckPublishMetric","message":{"message":"ok"}}"#,
                Ok(ServerMessage::Ack("AckPublishMetric".into())),
            ),
            (
                r#"{"type":"AckPublishHealth","message":{}}"#,
                Ok(ServerMessage::Ack("AckPublishHealth".into())),
            ),
            (
                r#"{"type":"AckPublishInstanceStatus","message":{}}"#,
                Ok(ServerMessage::Ack("AckPublishInstanceStatus".into())),
            ),
            (
                r#"{"type":"StopTelemetrySessionMessage","message":{"message":"bye"}}"#,
                Ok(ServerMessage::StopSession("bye".into())),
            ),
            (
                r#"{"type":"BadRequestException","message":{"message":"no"}}"#,
                Ok(ServerMessage::Error {
                    kind: "BadRequestException".into(),
                    message: "no".into(),
                }),
            ),
            (
                r#"{"type":"Surprise","message":{}}"#,
                Ok(ServerMessage::Other("Surprise".into())),
            ),
            ("not json", Err("not valid JSON")),
            (r#"{"message":{}}"#, Err("no \"type\"")),
            (
                r#"{"type":"HeartbeatMessage","message":[1]}"#,
                Err("is not an object"),
            ),
        ];
        for (text, expected) in table {
            match (read_server_message(text), expected) {
                (Ok(got), Ok(expected)) => assert_eq!(got, *expected, "{text}"),
                (Err(got), Err(expected)) => assert!(got.contains(expected), "{text}: {got}"),
                (got, _) => panic!("{text}: {got:?}"),
            }
        }
    }
}
