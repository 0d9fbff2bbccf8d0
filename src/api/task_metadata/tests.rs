//! Unit tests of the task metadata endpoint: the v4 and v3 shapes against the fields and types
//! AWS's examples show, the routes, and the handler's answers (token, 404, 405, 503, stats).

use super::*;
use crate::engine::EngineError;
use crate::ports::PortBinding;
use crate::report::Event;
use crate::task::{
    ContainerDefinition, ContainerNetwork, ContainerStatus, LogConfiguration, NetworkMode,
    TaskDefinition, TaskStatus,
};
use std::collections::BTreeMap;
use std::time::Duration;

const TASK_ID: &str = "0123456789abcdef0123456789abcdef";

fn sample_task() -> Task {
    let mut web = ContainerDefinition::new("web", "nginx:1.25");
    web.cpu = Some(256);
    web.memory_mib = Some(128);
    web.log_configuration = Some(LogConfiguration {
        log_driver: "json-file".into(),
        options: BTreeMap::from([("max-size".to_string(), "10m".to_string())]),
        secret_options: Vec::new(),
    });
    let sidecar = ContainerDefinition::new("sidecar", "busybox:latest");
    let definition = TaskDefinition {
        roles: Default::default(),
        family: "shop".into(),
        revision: 7,
        network_mode: NetworkMode::Bridge,
        cpu: Some(512),
        memory_mib: Some(1024),
        volumes: Vec::new(),
        containers: vec![web, sidecar],
        pid_mode: None,
        ipc_mode: None,
    };
    let mut task = Task::new(TASK_ID.into(), "edge", definition, 1, 1_700_000_000_000);
    task.known_status = TaskStatus::Running;
    task.desired_status = TaskStatus::Running;
    task.pull_started_at = Some(1_700_000_001_000);
    task.pull_stopped_at = Some(1_700_000_002_000);
    let web = &mut task.containers[0];
    web.docker_id = Some("d0c4e1".into());
    web.docker_name = Some("deckhand-shop-7-web-00aa".into());
    web.metadata_token = Some("token-web".into());
    web.image_id = Some("sha256:abc".into());
    web.known_status = ContainerStatus::Running;
    web.desired_status = ContainerStatus::Running;
    web.created_at = Some(1_700_000_003_000);
    web.started_at = Some(1_700_000_004_000);
    web.ports = vec![PortBinding {
        container_port: 80,
        protocol: "tcp".into(),
        host_port: 8080,
        host_ip: "0.0.0.0".into(),
    }];
    web.networks = vec![ContainerNetwork {
        name: "bridge".into(),
        ipv4_address: "172.17.0.5".into(),
    }];
    let sidecar = &mut task.containers[1];
    sidecar.docker_name = Some("deckhand-shop-7-sidecar-00bb".into());
    sidecar.metadata_token = Some("token-sidecar".into());
    task
}

#[test]
fn the_v4_container_has_the_fields_and_types_ecs_shows() {
    let task = sample_task();
    let container = metadata_container(&task, &task.containers[0], "edge", MetadataVersion::V4);
    let expected = json!({
        "DockerId": "d0c4e1",
        "Name": "web",
        "DockerName": "deckhand-shop-7-web-00aa",
        "Image": "nginx:1.25",
        "ImageID": "sha256:abc",
        "Ports": [{"ContainerPort": 80, "Protocol": "tcp", "HostPort": 8080, "HostIp": "0.0.0.0"}],
        "Labels": {
            "com.amazonaws.ecs.cluster": "edge",
            "com.amazonaws.ecs.container-name": "web",
            "com.amazonaws.ecs.task-arn": task.arn,
            "com.amazonaws.ecs.task-definition-family": "shop",
            "com.amazonaws.ecs.task-definition-version": "7",
        },
        "DesiredStatus": "RUNNING",
        "KnownStatus": "RUNNING",
        "Limits": {"CPU": 256.0, "Memory": 128},
        "CreatedAt": "2023-11-14T22:13:23.000Z",
        "StartedAt": "2023-11-14T22:13:24.000Z",
        "Type": "NORMAL",
        "Networks": [{"NetworkMode": "bridge", "IPv4Addresses": ["172.17.0.5"]}],
        "LogDriver": "json-file",
        "LogOptions": {"max-size": "10m"},
    });
    assert_eq!(container, expected);
    // CPU is a JSON number with a fraction part as ECS writes a float64, never a string.
    assert!(container["Limits"]["CPU"].is_f64());
}

#[test]
fn a_container_not_created_yet_shows_empty_ids_and_the_cpu_floor() {
    let task = sample_task();
    let container = metadata_container(&task, &task.containers[1], "edge", MetadataVersion::V4);
    assert_eq!(container["DockerId"], "");
    assert_eq!(container["ImageID"], "");
    assert_eq!(container["KnownStatus"], "NONE");
    assert_eq!(container["Limits"], json!({"CPU": 2.0, "Memory": 0}));
    for absent in [
        "Ports",
        "ExitCode",
        "CreatedAt",
        "LogDriver",
        "Health",
        "Volumes",
    ] {
        assert!(container.get(absent).is_none(), "{absent}");
    }
}

#[test]
fn v3_leaves_out_what_only_v4_shows() {
    let task = sample_task();
    let v3 = metadata_container(&task, &task.containers[0], "edge", MetadataVersion::V3);
    for absent in ["LogDriver", "LogOptions", "RestartCount"] {
        assert!(v3.get(absent).is_none(), "{absent}");
    }
    assert!(v3["Ports"][0].get("HostIp").is_none());
    let task_v3 = metadata_task(&task, "edge", MetadataVersion::V3);
    assert!(task_v3.get("LaunchType").is_none());
    assert!(task_v3.get("FaultInjectionEnabled").is_none());
}

#[test]
fn the_v4_task_has_the_fields_and_types_ecs_shows() {
    let task = sample_task();
    let object = metadata_task(&task, "edge", MetadataVersion::V4);
    assert_eq!(object["Cluster"], "edge");
    assert_eq!(object["TaskARN"], json!(task.arn));
    assert_eq!(object["Family"], "shop");
    assert_eq!(object["Revision"], "7", "a string, as ECS shows it");
    assert_eq!(object["DesiredStatus"], "RUNNING");
    assert_eq!(object["KnownStatus"], "RUNNING");
    assert_eq!(object["Limits"], json!({"CPU": 0.5, "Memory": 1024}));
    assert_eq!(object["PullStartedAt"], "2023-11-14T22:13:21.000Z");
    assert_eq!(object["PullStoppedAt"], "2023-11-14T22:13:22.000Z");
    assert!(object.get("ExecutionStoppedAt").is_none());
    assert_eq!(object["LaunchType"], "EXTERNAL");
    assert_eq!(object["FaultInjectionEnabled"], false);
    let containers = object["Containers"].as_array().expect("an array");
    assert_eq!(containers.len(), 2);
    assert_eq!(
        containers[0],
        metadata_container(&task, &task.containers[0], "edge", MetadataVersion::V4)
    );
    // The token is the container's secret: no view shows it.
    assert!(!object.to_string().contains("token-"));
}

#[test]
fn routes_are_known_by_version_token_and_suffix() {
    use MetadataVersion::{V3, V4};
    // (path segments, route)
    let table: Vec<(Vec<&str>, Option<MetadataRoute>)> = vec![
        (
            vec!["v4", "t"],
            Some(MetadataRoute::Container {
                version: V4,
                token: "t",
            }),
        ),
        (
            vec!["v3", "t"],
            Some(MetadataRoute::Container {
                version: V3,
                token: "t",
            }),
        ),
        (
            vec!["v4", "t", "task"],
            Some(MetadataRoute::Task {
                version: V4,
                token: "t",
            }),
        ),
        (
            vec!["v4", "t", "stats"],
            Some(MetadataRoute::ContainerStats { token: "t" }),
        ),
        (
            vec!["v3", "t", "task", "stats"],
            Some(MetadataRoute::TaskStats { token: "t" }),
        ),
        (vec![], None),
        (vec!["v4"], None),
        (vec!["v4", ""], None),
        (vec!["v2", "t"], None),
        (vec!["v4", "t", "tasks"], None),
        (vec!["v4", "t", "task", "stats", "more"], None),
    ];
    for (segments, expected) in table {
        assert_eq!(metadata_route(&segments), expected, "{segments:?}");
    }
}

/// An engine holding one task, whose stats are scripted per Docker id.
struct StubEngine {
    tasks: Vec<Task>,
    stats: BTreeMap<String, Value>,
}

impl EngineHandle for StubEngine {
    fn submit(&self, _definition: TaskDefinition) -> Result<Task, EngineError> {
        Err(EngineError::ShuttingDown)
    }
    fn submit_from_source(
        &self,
        _definition: TaskDefinition,
        _source: String,
    ) -> Result<Task, EngineError> {
        Err(EngineError::ShuttingDown)
    }
    fn stop(&self, _task_id: &str) -> Result<(), EngineError> {
        Err(EngineError::ShuttingDown)
    }
    fn tasks(&self) -> Vec<Task> {
        self.tasks.clone()
    }
    fn events_since(&self, _after: u64, _wait: Duration) -> Vec<Event> {
        Vec::new()
    }
    fn cluster(&self) -> String {
        "edge".into()
    }
    fn container_stats(&self, docker_id: &str) -> Result<Value, EngineError> {
        self.stats
            .get(docker_id)
            .cloned()
            .ok_or_else(|| EngineError::Unavailable {
                reason: "no such container".into(),
            })
    }
}

fn request(method: &str, path: &str) -> HttpRequest {
    HttpRequest {
        method: method.into(),
        path: path.into(),
        query: String::new(),
        headers: Vec::new(),
        body: Vec::new(),
    }
}

fn body(response: &HttpResponse) -> Value {
    serde_json::from_slice(&response.body).expect("a JSON body")
}

fn attached_api() -> TaskMetadataApi {
    let mut task = sample_task();
    task.containers[1].docker_id = Some("5eed".into());
    let api = TaskMetadataApi::new();
    api.attach(Arc::new(StubEngine {
        tasks: vec![task],
        stats: BTreeMap::from([("d0c4e1".to_string(), json!({"memory_stats": {"usage": 42}}))]),
    }));
    api
}

#[test]
fn the_handler_answers_by_token() {
    let api = attached_api();
    let own = api.handle(&request("GET", "/v4/token-web"));
    assert_eq!(own.status, 200);
    assert_eq!(body(&own)["Name"], "web");
    let sidecar = api.handle(&request("GET", "/v3/token-sidecar/"));
    assert_eq!(sidecar.status, 200);
    assert_eq!(body(&sidecar)["Name"], "sidecar");
    let task = api.handle(&request("GET", "/v4/token-sidecar/task"));
    assert_eq!(task.status, 200);
    assert_eq!(body(&task)["Family"], "shop");
    assert_eq!(body(&task)["Containers"].as_array().map(Vec::len), Some(2));

    let stats = api.handle(&request("GET", "/v4/token-web/stats"));
    assert_eq!(stats.status, 200);
    assert_eq!(body(&stats), json!({"memory_stats": {"usage": 42}}));
    let failed = api.handle(&request("GET", "/v4/token-sidecar/stats"));
    assert_eq!(failed.status, 500);
    let task_stats = api.handle(&request("GET", "/v4/token-sidecar/task/stats"));
    assert_eq!(task_stats.status, 200);
    assert_eq!(
        body(&task_stats),
        json!({"d0c4e1": {"memory_stats": {"usage": 42}}, "5eed": null})
    );
}

#[test]
fn wrong_tokens_paths_and_methods_are_refused() {
    let api = attached_api();
    // (method, path, status)
    let table = [
        ("GET", "/v4/token-nobody", 404),
        ("GET", "/v4/token-nobody/task", 404),
        ("GET", "/v4/token-nobody/task/stats", 404),
        ("GET", "/v4/TOKEN-WEB", 404),
        ("GET", "/v4/", 404),
        ("GET", "/v1/metadata", 404),
        ("GET", "/v4/token-web/credentials", 404),
        ("POST", "/v4/token-web", 405),
        ("PUT", "/v4/token-web/task", 405),
        ("DELETE", "/v4/token-nobody/stats", 405),
    ];
    for (method, path, status) in table {
        let response = api.handle(&request(method, path));
        assert_eq!(response.status, status, "{method} {path}");
        if status == 405 {
            assert_eq!(response.header("Allow"), Some("GET"));
        }
        let text = String::from_utf8_lossy(&response.body).to_string();
        assert!(!text.contains("token-nobody"), "the token is not echoed");
    }
}

#[test]
fn before_the_engine_is_attached_the_endpoint_asks_to_retry() {
    let api = TaskMetadataApi::new();
    assert_eq!(api.handle(&request("GET", "/v4/token-web")).status, 503);
    assert_eq!(api.handle(&request("GET", "/nothing")).status, 404);
}
