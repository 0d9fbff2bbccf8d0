//! The state changes deckhand reports to ECS: SubmitTaskStateChange and
//! SubmitContainerStateChange bodies, and which of the two a set of pending changes goes in.
//! Pure: plain inputs (no engine type), JSON out in ECS's model; table-tested.
//!
//! As the ECS agent does, reasons are cut to ECS's 1024 bytes, runtime ids and image digests to
//! 255 (at a character boundary, so the text stays UTF-8), timestamps travel as epoch seconds
//! (the JSON protocol's form, milliseconds kept), only RUNNING and STOPPED container statuses
//! are reported, and `ECS_EXCLUDE_IPV6_PORTBINDING` drops the `::` bindings.
//!
//! Which request ([`plan_submission`]): a container's change waits for its task's next change
//! and goes in that SubmitTaskStateChange (the ECS agent batches them so). A task whose status
//! did not change but that has container changes waiting reports them at the next drain (every
//! 10–30 s, [`DRAIN_MIN_SECONDS`]) in a SubmitTaskStateChange with its current status. Once the
//! task's STOPPED was reported, a late container change goes alone in a
//! SubmitContainerStateChange (the ECS agent drops those; deckhand still tells ECS the exit code).

use serde_json::{json, Map, Value};

/// ECS's limit on a task's or container's reason, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;
/// ECS's limit on a runtime id, in bytes.
pub const MAX_RUNTIME_ID_BYTES: usize = 255;
/// ECS's limit on an image digest, in bytes.
pub const MAX_IMAGE_DIGEST_BYTES: usize = 255;
/// The shortest wait between drains of waiting container changes (the ECS agent's 10 s; the
/// longest is [`DRAIN_MAX_SECONDS`], with jitter between).
pub const DRAIN_MIN_SECONDS: u64 = 10;
/// The longest wait between drains.
pub const DRAIN_MAX_SECONDS: u64 = 30;

/// A task's status as ECS takes it: anything before RUNNING is PENDING.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TaskReportStatus {
    Pending,
    Running,
    Stopped,
}

impl TaskReportStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskReportStatus::Pending => "PENDING",
            TaskReportStatus::Running => "RUNNING",
            TaskReportStatus::Stopped => "STOPPED",
        }
    }
}

/// The container statuses ECS takes in a state change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ContainerReportStatus {
    Running,
    Stopped,
}

impl ContainerReportStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ContainerReportStatus::Running => "RUNNING",
            ContainerReportStatus::Stopped => "STOPPED",
        }
    }
}

/// A published port as ECS lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkBinding {
    pub bind_ip: String,
    pub container_port: u16,
    pub host_port: u16,
    /// `tcp` or `udp`.
    pub protocol: String,
}

/// One container's change.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerChange {
    pub container_name: String,
    /// The Docker container id, once there is one.
    pub runtime_id: Option<String>,
    pub image_digest: Option<String>,
    pub status: ContainerReportStatus,
    pub exit_code: Option<i32>,
    pub reason: Option<String>,
    pub network_bindings: Vec<NetworkBinding>,
}

/// One task's change, with the container changes it carries.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskChange {
    pub cluster: String,
    pub task_arn: String,
    pub status: TaskReportStatus,
    pub reason: Option<String>,
    /// Epoch seconds.
    pub pull_started_at: Option<f64>,
    pub pull_stopped_at: Option<f64>,
    pub execution_stopped_at: Option<f64>,
    pub containers: Vec<ContainerChange>,
}

/// `text` cut to at most `max_bytes`, at a character boundary.
pub fn truncate_bytes(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = 0;
    for (index, character) in text.char_indices() {
        let next = index + character.len_utf8();
        if next > max_bytes {
            break;
        }
        end = next;
    }
    text.get(..end).unwrap_or("")
}

/// Epoch seconds as the JSON protocol carries a timestamp: a number, milliseconds kept.
fn timestamp(seconds: f64) -> Value {
    let millis = (seconds * 1000.0).round();
    if millis.is_finite() && millis.fract() == 0.0 && (millis / 1000.0).fract() == 0.0 {
        json!((millis / 1000.0) as i64)
    } else {
        json!(millis / 1000.0)
    }
}

fn bindings_json(bindings: &[NetworkBinding], exclude_ipv6: bool) -> Value {
    Value::Array(
        bindings
            .iter()
            .filter(|binding| !(exclude_ipv6 && binding.bind_ip == "::"))
            .map(|binding| {
                json!({
                    "bindIP": binding.bind_ip,
                    "containerPort": binding.container_port,
                    "hostPort": binding.host_port,
                    "protocol": binding.protocol,
                })
            })
            .collect(),
    )
}

/// The fields a container change has in both requests.
fn container_fields(change: &ContainerChange, exclude_ipv6: bool) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("containerName".into(), json!(change.container_name));
    if let Some(id) = change.runtime_id.as_deref().filter(|id| !id.is_empty()) {
        fields.insert(
            "runtimeId".into(),
            json!(truncate_bytes(id, MAX_RUNTIME_ID_BYTES)),
        );
    }
    if let Some(digest) = change.image_digest.as_deref().filter(|d| !d.is_empty()) {
        let digest = truncate_bytes(digest, MAX_IMAGE_DIGEST_BYTES);
        fields.insert("imageDigest".into(), json!(digest));
    }
    if let Some(reason) = change.reason.as_deref().filter(|r| !r.is_empty()) {
        fields.insert(
            "reason".into(),
            json!(truncate_bytes(reason, MAX_REASON_BYTES)),
        );
    }
    fields.insert("status".into(), json!(change.status.as_str()));
    if let Some(code) = change.exit_code {
        fields.insert("exitCode".into(), json!(code));
    }
    fields.insert(
        "networkBindings".into(),
        bindings_json(&change.network_bindings, exclude_ipv6),
    );
    fields
}

/// The SubmitTaskStateChange body for `change`.
pub fn task_state_change_body(change: &TaskChange, exclude_ipv6: bool) -> Value {
    let mut body = Map::new();
    body.insert("cluster".into(), json!(change.cluster));
    body.insert("task".into(), json!(change.task_arn));
    body.insert("status".into(), json!(change.status.as_str()));
    let reason = change.reason.as_deref().unwrap_or("");
    body.insert(
        "reason".into(),
        json!(truncate_bytes(reason, MAX_REASON_BYTES)),
    );
    for (key, time) in [
        ("pullStartedAt", change.pull_started_at),
        ("pullStoppedAt", change.pull_stopped_at),
        ("executionStoppedAt", change.execution_stopped_at),
    ] {
        if let Some(seconds) = time {
            body.insert(key.into(), timestamp(seconds));
        }
    }
    if !change.containers.is_empty() {
        let containers = change
            .containers
            .iter()
            .map(|container| Value::Object(container_fields(container, exclude_ipv6)))
            .collect();
        body.insert("containers".into(), Value::Array(containers));
    }
    Value::Object(body)
}

/// The SubmitContainerStateChange body for one container of `task_arn`.
pub fn container_state_change_body(
    cluster: &str,
    task_arn: &str,
    change: &ContainerChange,
    exclude_ipv6: bool,
) -> Value {
    let mut body = Map::new();
    body.insert("cluster".into(), json!(cluster));
    body.insert("task".into(), json!(task_arn));
    body.extend(container_fields(change, exclude_ipv6));
    Value::Object(body)
}

/// What a task's reporter knows when it decides what to send.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingReport {
    /// The task as it is now (its `containers` are ignored: see `waiting`).
    pub task: TaskChange,
    /// The last task status ECS acknowledged, if any.
    pub sent_status: Option<TaskReportStatus>,
    /// Container changes not yet sent, oldest first.
    pub waiting: Vec<ContainerChange>,
    /// Whether this decision is a drain (the periodic send of waiting container changes) rather
    /// than a task status change.
    pub drain: bool,
}

/// One request to send.
#[derive(Debug, Clone, PartialEq)]
pub enum Submission {
    Task(TaskChange),
    Container {
        cluster: String,
        task_arn: String,
        change: ContainerChange,
    },
}

/// The requests for `pending` (the rule is in the module's doc): empty when there is nothing
/// new to say.
pub fn plan_submission(pending: &PendingReport) -> Vec<Submission> {
    let task = &pending.task;
    let status_is_new = pending.sent_status.is_none_or(|sent| sent < task.status)
        && task.status != TaskReportStatus::Pending;
    if status_is_new {
        let mut change = task.clone();
        change.containers = pending.waiting.clone();
        return vec![Submission::Task(change)];
    }
    if pending.waiting.is_empty() || !pending.drain {
        return Vec::new();
    }
    if pending.sent_status == Some(TaskReportStatus::Stopped) {
        return pending
            .waiting
            .iter()
            .map(|change| Submission::Container {
                cluster: task.cluster.clone(),
                task_arn: task.task_arn.clone(),
                change: change.clone(),
            })
            .collect();
    }
    let mut change = task.clone();
    change.containers = pending.waiting.clone();
    vec![Submission::Task(change)]
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARN: &str =
        "arn:aws:ecs:us-west-2:123456789012:task/edge/0123456789abcdef0123456789abcdef";

    fn web(status: ContainerReportStatus) -> ContainerChange {
        ContainerChange {
            container_name: "web".to_string(),
            runtime_id: Some("4f1c".to_string()),
            image_digest: None,
            status,
            exit_code: None,
            reason: None,
            network_bindings: vec![
                NetworkBinding {
                    bind_ip: "0.0.0.0".to_string(),
                    container_port: 80,
                    host_port: 8080,
                    protocol: "tcp".to_string(),
                },
                NetworkBinding {
                    bind_ip: "::".to_string(),
                    container_port: 80,
                    host_port: 8080,
                    protocol: "tcp".to_string(),
                },
            ],
        }
    }

    fn task(status: TaskReportStatus) -> TaskChange {
        TaskChange {
            cluster: "edge".to_string(),
            task_arn: ARN.to_string(),
            status,
            reason: None,
            pull_started_at: None,
            pull_stopped_at: None,
            execution_stopped_at: None,
            containers: vec![],
        }
    }

    #[test]
    fn task_bodies() {
        let running = TaskChange {
            pull_started_at: Some(1_700_000_000.25),
            pull_stopped_at: Some(1_700_000_003.0),
            containers: vec![web(ContainerReportStatus::Running)],
            ..task(TaskReportStatus::Running)
        };
        let stopped = TaskChange {
            reason: Some("Essential container in task exited".to_string()),
            execution_stopped_at: Some(1_700_000_100.123_4),
            containers: vec![ContainerChange {
                exit_code: Some(137),
                reason: Some("OutOfMemoryError: Container killed due to memory usage".to_string()),
                image_digest: Some("sha256:abcd".to_string()),
                network_bindings: vec![],
                ..web(ContainerReportStatus::Stopped)
            }],
            ..task(TaskReportStatus::Stopped)
        };
        let cases = [
            (
                running.clone(),
                false,
                json!({
                    "cluster": "edge", "task": ARN, "status": "RUNNING", "reason": "",
                    "pullStartedAt": 1_700_000_000.25, "pullStoppedAt": 1_700_000_003,
                    "containers": [{"containerName": "web", "runtimeId": "4f1c", "status": "RUNNING",
                        "networkBindings": [
                            {"bindIP": "0.0.0.0", "containerPort": 80, "hostPort": 8080, "protocol": "tcp"},
                            {"bindIP": "::", "containerPort": 80, "hostPort": 8080, "protocol": "tcp"}]}]
                }),
            ),
            (
                running,
                true,
                json!({
                    "cluster": "edge", "task": ARN, "status": "RUNNING", "reason": "",
                    "pullStartedAt": 1_700_000_000.25, "pullStoppedAt": 1_700_000_003,
                    "containers": [{"containerName": "web", "runtimeId": "4f1c", "status": "RUNNING",
                        "networkBindings": [
                            {"bindIP": "0.0.0.0", "containerPort": 80, "hostPort": 8080, "protocol": "tcp"}]}]
                }),
            ),
            (
                stopped,
                false,
                json!({
                    "cluster": "edge", "task": ARN, "status": "STOPPED",
                    "reason": "Essential container in task exited",
                    "executionStoppedAt": 1_700_000_100.123,
                    "containers": [{"containerName": "web", "runtimeId": "4f1c", "imageDigest": "sha256:abcd",
                        "reason": "OutOfMemoryError: Container killed due to memory usage",
                        "status": "STOPPED", "exitCode": 137, "networkBindings": []}]
                }),
            ),
            (
                task(TaskReportStatus::Pending),
                false,
                json!({
                    "cluster": "edge", "task": ARN, "status": "PENDING", "reason": ""
                }),
            ),
        ];
        for (change, exclude_ipv6, expected) in cases {
            assert_eq!(task_state_change_body(&change, exclude_ipv6), expected);
        }
    }

    #[test]
    fn container_body() {
        let change = ContainerChange {
            exit_code: Some(0),
            ..web(ContainerReportStatus::Stopped)
        };
        assert_eq!(
            container_state_change_body("edge", ARN, &change, true),
            json!({"cluster": "edge", "task": ARN, "containerName": "web", "runtimeId": "4f1c",
                   "status": "STOPPED", "exitCode": 0,
                   "networkBindings": [{"bindIP": "0.0.0.0", "containerPort": 80, "hostPort": 8080, "protocol": "tcp"}]})
        );
    }

    #[test]
    fn long_texts_are_cut_as_ecs_takes_them() {
        let cases = [
            ("short", 10, "short"),
            ("exactly10!", 10, "exactly10!"),
            ("eleven char", 10, "eleven cha"),
            ("ééééé", 5, "éé"),
            ("€", 2, ""),
        ];
        for (text, max, expected) in cases {
            assert_eq!(truncate_bytes(text, max), expected, "{text} to {max}");
        }
        let long = "x".repeat(2000) + "é";
        let change = TaskChange {
            reason: Some(long.clone()),
            containers: vec![ContainerChange {
                reason: Some(long.clone()),
                runtime_id: Some("a".repeat(300)),
                image_digest: Some("d".repeat(300)),
                ..web(ContainerReportStatus::Stopped)
            }],
            ..task(TaskReportStatus::Stopped)
        };
        let body = task_state_change_body(&change, false);
        let length = |pointer: &str| body.pointer(pointer).and_then(Value::as_str).map(str::len);
        assert_eq!(length("/reason"), Some(1024));
        assert_eq!(length("/containers/0/reason"), Some(1024));
        assert_eq!(length("/containers/0/runtimeId"), Some(255));
        assert_eq!(length("/containers/0/imageDigest"), Some(255));
    }

    #[test]
    fn which_request() {
        use ContainerReportStatus::{Running as CRunning, Stopped as CStopped};
        use TaskReportStatus::{Pending, Running, Stopped};
        let pending = |status, sent, waiting: Vec<ContainerChange>, drain| PendingReport {
            task: task(status),
            sent_status: sent,
            waiting,
            drain,
        };
        let task_with = |status, containers| {
            Submission::Task(TaskChange {
                containers,
                ..task(status)
            })
        };
        let alone = |change| Submission::Container {
            cluster: "edge".to_string(),
            task_arn: ARN.to_string(),
            change,
        };
        let cases: Vec<(&str, PendingReport, Vec<Submission>)> = vec![
            (
                "RUNNING reached: the task change carries the waiting containers",
                pending(Running, None, vec![web(CRunning)], false),
                vec![task_with(Running, vec![web(CRunning)])],
            ),
            (
                "STOPPED reached after RUNNING",
                pending(Stopped, Some(Running), vec![web(CStopped)], false),
                vec![task_with(Stopped, vec![web(CStopped)])],
            ),
            (
                "STOPPED with nothing waiting",
                pending(Stopped, Some(Running), vec![], false),
                vec![task_with(Stopped, vec![])],
            ),
            (
                "a container change while PENDING waits",
                pending(Pending, None, vec![web(CRunning)], false),
                vec![],
            ),
            (
                "the drain sends it with the PENDING status",
                pending(Pending, None, vec![web(CRunning)], true),
                vec![task_with(Pending, vec![web(CRunning)])],
            ),
            (
                "a non-essential container stops while RUNNING: waits",
                pending(Running, Some(Running), vec![web(CStopped)], false),
                vec![],
            ),
            (
                "… and goes at the drain with RUNNING",
                pending(Running, Some(Running), vec![web(CStopped)], true),
                vec![task_with(Running, vec![web(CStopped)])],
            ),
            (
                "a drain with nothing waiting sends nothing",
                pending(Running, Some(Running), vec![], true),
                vec![],
            ),
            (
                "already sent: nothing",
                pending(Stopped, Some(Stopped), vec![], false),
                vec![],
            ),
            (
                "after STOPPED was sent a container change goes alone",
                pending(Stopped, Some(Stopped), vec![web(CStopped)], true),
                vec![alone(web(CStopped))],
            ),
        ];
        for (label, report, expected) in cases {
            assert_eq!(plan_submission(&report), expected, "{label}");
        }
    }
}
