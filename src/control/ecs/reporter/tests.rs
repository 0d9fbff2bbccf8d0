//! The reporter's pure choice of the next request, table by table.

use super::*;
use crate::ports::PortBinding;
use crate::task::{NetworkMode, TaskDefinition};
use serde_json::Value;

const ARN: &str = "arn:aws:ecs:us-west-2:123456789012:task/edge/0123456789abcdef0123456789abcdef";

fn task(id: &str, source: Option<&str>) -> Task {
    let definition = TaskDefinition {
        roles: Default::default(),
        family: "web".into(),
        revision: 3,
        network_mode: NetworkMode::Bridge,
        cpu: None,
        memory_mib: None,
        volumes: Vec::new(),
        containers: vec![
            crate::engine::test_support::container_definition("app", "web/app:1"),
            crate::engine::test_support::container_definition("side", "web/side:1"),
        ],
        pid_mode: None,
        ipc_mode: None,
    };
    let mut task = Task::new(id.to_string(), "edge", definition, 1, 0);
    task.source = source.map(str::to_string);
    task.containers[0].docker_id = Some("d0c".into());
    task.containers[0].ports = vec![PortBinding {
        container_port: 80,
        protocol: "tcp".into(),
        host_port: 8080,
        host_ip: String::new(),
    }];
    task.pull_started_at = Some(1_000);
    task.pull_stopped_at = Some(2_500);
    task
}

fn event(seq: u64, task: &str, container: Option<&str>, status: &str, time: Millis) -> Event {
    Event {
        seq,
        time,
        task: task.to_string(),
        container: container.map(str::to_string),
        status: status.to_string(),
        exit_code: (status == "STOPPED" && container.is_some()).then_some(0),
        reason: None,
    }
}

fn sent(next: NextReport) -> Report {
    match next {
        NextReport::Send(report) => report,
        other => panic!("a report expected, not {other:?}"),
    }
}

fn tasks() -> HashMap<String, Task> {
    let ecs = task("e", Some(&format!("ecs:{ARN}")));
    let local = task("l", None);
    [("e".to_string(), ecs), ("l".to_string(), local)].into()
}

#[test]
fn container_changes_ride_on_the_task_change_that_follows_them() {
    let events = [
        event(4, "e", Some("app"), "RUNNING", 10_000),
        event(5, "e", Some("side"), "RUNNING", 10_000),
        event(6, "e", None, "RUNNING", 10_000),
    ];
    let NextReport::Send(report) =
        next_report(&events, &tasks(), &BTreeMap::new(), "edge", false, 10_001)
    else {
        panic!("a report expected");
    };
    let through = report.through;
    assert_eq!(through, 6);
    assert_eq!(report.operation, "SubmitTaskStateChange");
    assert_eq!(
        report.acknowledges,
        Some(("e".to_string(), TaskStatus::Running))
    );
    let body = &report.body;
    assert_eq!(body["task"], ARN);
    assert_eq!(body["status"], "RUNNING");
    assert_eq!(body["cluster"], "edge");
    let containers = body["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 2);
    assert_eq!(containers[0]["containerName"], "app");
    assert_eq!(containers[0]["runtimeId"], "d0c");
    assert_eq!(containers[0]["networkBindings"][0]["hostPort"], 8080);
    assert_eq!(containers[0]["networkBindings"][0]["bindIP"], "0.0.0.0");
    assert_eq!(body["pullStartedAt"], 1.0);
}

#[test]
fn local_tasks_are_passed_over_and_never_reported() {
    let events = [
        event(1, "l", Some("app"), "RUNNING", 0),
        event(2, "l", None, "RUNNING", 0),
        event(3, "gone", None, "STOPPED", 0),
    ];
    assert_eq!(
        next_report(&events, &tasks(), &BTreeMap::new(), "edge", false, 0),
        NextReport::PassOver(3)
    );
    // Passed over up to the ECS task's first event, which is then reported.
    let events = [
        event(1, "l", None, "RUNNING", 0),
        event(2, "e", None, "STOPPED", 0),
    ];
    let report = sent(next_report(
        &events,
        &tasks(),
        &BTreeMap::new(),
        "edge",
        false,
        0,
    ));
    let through = report.through;
    assert_eq!(through, 2);
    assert_eq!(report.acknowledges, Some(("e".into(), TaskStatus::Stopped)));
}

#[test]
fn a_lone_container_change_waits_briefly_then_goes_alone() {
    let events = [event(7, "e", Some("side"), "STOPPED", 10_000)];
    // Young and last: wait for its task's change.
    assert_eq!(
        next_report(&events, &tasks(), &BTreeMap::new(), "edge", false, 10_500),
        NextReport::Wait
    );
    // Waited long enough: alone.
    let NextReport::Send(report) =
        next_report(&events, &tasks(), &BTreeMap::new(), "edge", false, 12_001)
    else {
        panic!("a report expected");
    };
    let through = report.through;
    assert_eq!(
        (report.operation, through),
        ("SubmitContainerStateChange", 7)
    );
    assert_eq!(report.body["containerName"], "side");
    assert_eq!(report.body["exitCode"], 0);
    assert_eq!(report.acknowledges, None);
    // Another task's event behind it: alone at once.
    let events = [
        event(7, "e", Some("side"), "STOPPED", 10_000),
        event(8, "l", None, "RUNNING", 10_000),
    ];
    let report = sent(next_report(
        &events,
        &tasks(),
        &BTreeMap::new(),
        "edge",
        false,
        10_001,
    ));
    assert_eq!(report.operation, "SubmitContainerStateChange");
}

#[test]
fn the_record_survives_a_reopen_and_a_damaged_one_is_an_error() {
    let dir = crate::state::scratch::ScratchDir::new("ecs-record");
    let file = RecordFile::open(dir.path.as_path()).unwrap();
    assert_eq!(file.get(), EcsRecord::default());
    file.update(|record| {
        record.container_instance_arn = Some("arn:ci".into());
        record.reported_through = 42;
        record.rejected.push(RejectedTask {
            arn: ARN.into(),
            reason: "bad".into(),
        });
    })
    .unwrap();
    let again = RecordFile::open(dir.path.as_path()).unwrap().get();
    assert_eq!(again.reported_through, 42);
    assert_eq!(again.container_instance_arn.as_deref(), Some("arn:ci"));
    assert_eq!(again.rejected.len(), 1);
    std::fs::write(
        dir.path.as_path().join("ecs.json"),
        b"{\"schema\":1,\"ecs\":[",
    )
    .unwrap();
    let error = RecordFile::open(dir.path.as_path()).unwrap_err();
    assert!(error.contains("ecs.json"), "{error}");
}

#[test]
fn a_task_status_ecs_acknowledged_is_not_reported_again() {
    // A restore whose checkpoint lagged emits RUNNING again: ECS already has it.
    let mut known = tasks();
    known.get_mut("e").unwrap().reported_status = TaskStatus::Running;
    let events = [
        event(9, "e", Some("app"), "RUNNING", 0),
        event(10, "e", None, "RUNNING", 0),
    ];
    assert_eq!(
        next_report(&events, &known, &BTreeMap::new(), "edge", false, 0),
        NextReport::PassOver(10)
    );
    let events = [event(11, "e", None, "STOPPED", 0)];
    let report = sent(next_report(
        &events,
        &known,
        &BTreeMap::new(),
        "edge",
        false,
        0,
    ));
    assert_eq!(report.acknowledges, Some(("e".into(), TaskStatus::Stopped)));
}

#[test]
fn what_the_record_says_ecs_acknowledged_is_not_sent_again() {
    // The engine's checkpoint lagged (reported_status NONE), but ecs.json has the answer.
    let mut acknowledged = BTreeMap::new();
    let mut known = Acknowledged::default();
    known.record(&Report {
        operation: "SubmitTaskStateChange",
        body: Value::Null,
        through: 6,
        acknowledges: Some(("e".into(), TaskStatus::Running)),
        task_id: "e".into(),
        containers: vec![("app".into(), "RUNNING".into())],
    });
    acknowledged.insert("e".to_string(), known);
    let events = [
        event(20, "e", Some("app"), "RUNNING", 0),
        event(21, "e", None, "RUNNING", 0),
    ];
    assert_eq!(
        next_report(&events, &tasks(), &acknowledged, "edge", false, 0),
        NextReport::PassOver(21)
    );
    // A task status ECS knows covers its containers' changes up to it.
    let events = [
        event(22, "e", Some("side"), "RUNNING", 0),
        event(23, "e", None, "RUNNING", 0),
    ];
    assert_eq!(
        next_report(&events, &tasks(), &acknowledged, "edge", false, 0),
        NextReport::PassOver(23)
    );
    // A container's STOPPED while the task runs on is news, alone once it waited.
    let events = [event(26, "e", Some("side"), "STOPPED", 0)];
    let NextReport::Send(report) =
        next_report(&events, &tasks(), &acknowledged, "edge", false, 5_000)
    else {
        panic!("a report expected");
    };
    assert_eq!(report.operation, "SubmitContainerStateChange");
    assert_eq!(
        report.containers,
        vec![("side".to_string(), "STOPPED".to_string())]
    );
    // STOPPED is news.
    let events = [
        event(24, "e", Some("app"), "STOPPED", 0),
        event(25, "e", None, "STOPPED", 0),
    ];
    let NextReport::Send(report) = next_report(&events, &tasks(), &acknowledged, "edge", false, 0)
    else {
        panic!("a report expected");
    };
    assert_eq!(report.operation, "SubmitTaskStateChange");
    assert_eq!(
        report.containers,
        vec![("app".to_string(), "STOPPED".to_string())]
    );
}

/// Only a refusal of the request itself is dropped; every condition of the moment is retried.
#[test]
fn failed_reports_are_retried_except_a_refusal_of_the_request_itself() {
    let service = |status: u16, error_type: &str| EcsError::Service {
        status,
        error_type: error_type.to_string(),
        message: "m".to_string(),
    };
    let cases: &[(EcsError, AfterFailure)] = &[
        (service(400, "ExpiredTokenException"), AfterFailure::Retry),
        (
            service(400, "InvalidSignatureException"),
            AfterFailure::Retry,
        ),
        (service(403, "SignatureDoesNotMatch"), AfterFailure::Retry),
        (
            service(400, "UnrecognizedClientException"),
            AfterFailure::Retry,
        ),
        (service(400, "AccessDeniedException"), AfterFailure::Retry),
        (
            service(403, "MissingAuthenticationTokenException"),
            AfterFailure::Retry,
        ),
        (
            service(400, "InactiveInstanceException"),
            AfterFailure::Retry,
        ),
        (service(400, "RequestExpired"), AfterFailure::Retry),
        (service(400, "ClientException"), AfterFailure::Drop),
        (
            service(400, "InvalidParameterException"),
            AfterFailure::Drop,
        ),
        (
            crate::control::ecs::error_from_answer(
                400,
                "x",
                None,
                br#"{"__type":"com.amazonaws.ecs#ClientException","message":"bad"}"#,
            ),
            AfterFailure::Drop,
        ),
        (
            crate::control::ecs::error_from_answer(
                400,
                "x",
                None,
                br#"{"__type":"ThrottlingException","message":"slow down"}"#,
            ),
            AfterFailure::Retry,
        ),
        (
            crate::control::ecs::error_from_answer(503, "x", None, b"{}"),
            AfterFailure::Retry,
        ),
        (EcsError::Unreachable("refused".into()), AfterFailure::Retry),
        (EcsError::Credentials("none".into()), AfterFailure::Retry),
        (EcsError::Protocol("not JSON".into()), AfterFailure::Retry),
        (EcsError::ReadTimeout, AfterFailure::Retry),
    ];
    for (error, expected) in cases {
        assert_eq!(after_failure(error), *expected, "{error:?}");
    }
}
