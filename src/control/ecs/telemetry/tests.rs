//! The telemetry loop over a scripted connection and made-up sources: what it sends on
//! connecting, how it reads TCS, and that it reconnects and stops.

use super::messages::Identity;
use super::session::TelemetrySession;
use super::window::Reading;
use super::*;
use crate::task::{
    ContainerDefinition, ContainerStatus, HealthCheck, HealthStatus, NetworkMode, TaskDefinition,
};
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

struct Scripted {
    reads: VecDeque<Result<Option<String>, ConnError>>,
    sent: Rc<RefCell<Vec<String>>>,
}

impl AcsConnection for Scripted {
    fn read_text(&mut self, _timeout: Duration) -> Result<Option<String>, ConnError> {
        self.reads.pop_front().unwrap_or(Err(ConnError::Closed))
    }
    fn send_text(&mut self, text: &str) -> Result<(), ConnError> {
        self.sent.borrow_mut().push(text.to_string());
        Ok(())
    }
    fn close(&mut self) {}
}

struct Sources {
    tasks: Vec<Task>,
    docker: bool,
}

impl TelemetrySources for Sources {
    fn identity(&self) -> Option<Identity> {
        Some(Identity {
            cluster: "edge".into(),
            container_instance: "arn:instance".into(),
        })
    }
    fn tasks(&self) -> Vec<Task> {
        self.tasks.clone()
    }
    fn usage(&self, _docker_id: &str) -> Reading {
        Reading {
            cpu_seconds: Some(1.0),
            memory_bytes: Some(8 << 20),
        }
    }
    fn docker_answers(&self) -> bool {
        self.docker
    }
    fn now_millis(&self) -> Millis {
        1_700_000_000_000
    }
}

fn ecs_task_with_health_check() -> Task {
    let mut container = ContainerDefinition::new("app", "busybox");
    container.health_check = Some(HealthCheck {
        command: vec!["CMD-SHELL".into(), "true".into()],
        interval_secs: 5,
        timeout_secs: 2,
        retries: 1,
        start_period_secs: 0,
    });
    let definition = TaskDefinition {
        roles: Default::default(),
        family: "web".into(),
        revision: 2,
        network_mode: NetworkMode::Bridge,
        cpu: None,
        memory_mib: None,
        volumes: Vec::new(),
        containers: vec![container],
        pid_mode: None,
        ipc_mode: None,
    };
    let mut task = Task::new(
        "0123456789abcdef0123456789abcdef".into(),
        "edge",
        definition,
        1,
        0,
    );
    task.source = Some("ecs:arn:aws:ecs:us-west-2:1:task/edge/abc".into());
    task.containers[0].known_status = ContainerStatus::Running;
    task.containers[0].docker_id = Some("abcdef".into());
    task.containers[0].health = HealthStatus::Unhealthy;
    task.containers[0].health_since = Some(1_600_000_000_000);
    task.containers[0].health_output = Some("exit 1".into());
    task
}

fn types(sent: &[String]) -> Vec<String> {
    sent.iter()
        .map(|text| {
            let value: Value = serde_json::from_str(text).expect("JSON");
            value["type"].as_str().unwrap_or("").to_string()
        })
        .collect()
}

#[test]
fn on_connecting_it_publishes_health_and_the_runtime_check_then_reconnects_and_stops() {
    let sources = Sources {
        tasks: vec![ecs_task_with_health_check()],
        docker: false,
    };
    let sent = Rc::new(RefCell::new(Vec::new()));
    let connects = Cell::new(0);
    let waits = Cell::new(0);
    let mut connect = || {
        connects.set(connects.get() + 1);
        if connects.get() > 1 {
            return Err("TCS down".to_string());
        }
        Ok(Scripted {
            reads: VecDeque::from([
                Ok(Some(
                    r#"{"type":"HeartbeatMessage","message":{"healthy":true}}"#.to_string(),
                )),
                Ok(Some("not json".to_string())),
                Ok(Some(
                    r#"{"type":"AckPublishHealth","message":{}}"#.to_string(),
                )),
                Err(ConnError::Closed),
            ]),
            sent: Rc::clone(&sent),
        })
    };
    let mut wait = |_pause: Duration| {
        waits.set(waits.get() + 1);
        false
    };
    let mut session = TelemetrySession::new(Instant::now(), 1);
    let mut telemetry = Telemetry::new(false, 2, 0, 1);
    run_telemetry(
        &mut session,
        &mut telemetry,
        &sources,
        &mut connect,
        &mut wait,
        &|| true,
    );

    let sent = sent.borrow();
    // One reading so far: no full metrics window, so no metrics message (not "idle" either).
    assert_eq!(
        types(&sent),
        ["PublishHealthRequest", "PublishInstanceStatusRequest"]
    );
    let health: Value = serde_json::from_str(&sent[0]).expect("JSON");
    let container = &health["message"]["tasks"][0]["containers"][0];
    assert_eq!(container["healthStatus"], "UNHEALTHY");
    assert_eq!(container["statusMessage"], "exit 1");
    assert_eq!(container["statusSince"], serde_json::json!(1_600_000_000.0));
    let status: Value = serde_json::from_str(&sent[1]).expect("JSON");
    assert_eq!(status["message"]["statuses"][0]["status"], "IMPAIRED");
    assert_eq!(connects.get(), 2, "a clean close reconnects at once");
    assert_eq!(waits.get(), 1);
}

#[test]
fn with_metrics_disabled_or_no_ecs_task_the_instance_is_idle() {
    for (disable, tasks) in [(true, vec![ecs_task_with_health_check()]), (false, vec![])] {
        let sources = Sources {
            tasks,
            docker: true,
        };
        let mut telemetry = Telemetry::new(disable, 1, 0, 3);
        telemetry.sample(&sources, Instant::now());
        telemetry.sample(&sources, Instant::now() + Duration::from_secs(10));
        let frames = telemetry.publication(&sources);
        let first: Value = serde_json::from_str(&frames[0]).expect("JSON");
        assert_eq!(first["type"], "PublishMetricsRequest");
        assert_eq!(
            first["message"]["metadata"]["idle"], true,
            "disabled: {disable}"
        );
        assert_eq!(first["message"]["taskMetrics"], serde_json::json!([]));
    }
}

#[test]
fn two_samples_make_a_metrics_message_with_fresh_ids() {
    let sources = Sources {
        tasks: vec![ecs_task_with_health_check()],
        docker: true,
    };
    let mut telemetry = Telemetry::new(false, 1, 0, 5);
    let start = Instant::now();
    telemetry.sample(&sources, start);
    telemetry.sample(&sources, start + Duration::from_secs(10));
    let frames = telemetry.publication(&sources);
    assert_eq!(
        types(&frames),
        [
            "PublishMetricsRequest",
            "PublishHealthRequest",
            "PublishInstanceStatusRequest"
        ]
    );
    let metrics: Value = serde_json::from_str(&frames[0]).expect("JSON");
    let container = &metrics["message"]["taskMetrics"][0]["containerMetrics"][0];
    assert_eq!(container["memoryStatsSet"]["sum"], 16.0);
    assert_eq!(container["cpuStatsSet"]["sum"], 0.0);
    let id = |frame: &str, path: &str| -> String {
        let value: Value = serde_json::from_str(frame).expect("JSON");
        value["message"]["metadata"][path]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    let ids = [
        id(&frames[0], "messageId"),
        id(&frames[1], "messageId"),
        id(&frames[2], "requestId"),
    ];
    for uuid in &ids {
        assert_eq!(uuid.len(), 36, "{uuid}");
        assert_eq!(uuid.get(14..15), Some("4"), "version 4: {uuid}");
    }
    assert!(ids[0] != ids[1] && ids[1] != ids[2]);
}

#[test]
fn the_query_is_the_ecs_agents() {
    assert_eq!(
        telemetry_query("edge", "arn:i", Some("24.0.7")),
        [
            ("agentHash", String::new()),
            ("agentVersion", crate::VERSION.to_string()),
            ("cluster", "edge".to_string()),
            ("containerInstance", "arn:i".to_string()),
            ("dockerVersion", "24.0.7".to_string()),
        ]
    );
    assert_eq!(telemetry_query("edge", "arn:i", None).len(), 4);
}
