//! The ECS introspection endpoint over TCP, against an in-memory engine: metadata, the task list,
//! the `taskarn` and `dockerid` filters with their error statuses, and read-only-ness.

#[path = "support/api.rs"]
mod api_support;
#[path = "support/memory_engine.rs"]
mod memory_engine;

use api_support::{tcp_get, tcp_request, TestApi, WEB_DEFINITION};
use deckhand::api::http::percent_encode;
use deckhand::task::{ContainerStatus, TaskStatus};

const DOCKER_ID_A: &str = "abcdef0123456789aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const DOCKER_ID_B: &str = "abcdef0123456789bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const DOCKER_ID_C: &str = "0123456789ccccccccccccccccccccccccccccccccccccccccccccccccccccc";

/// Three tasks: two whose container ids share a 12-character prefix, one running.
fn api_with_tasks() -> (TestApi, Vec<String>) {
    let api = TestApi::start(true);
    let mut arns = Vec::new();
    for docker_id in [DOCKER_ID_A, DOCKER_ID_B, DOCKER_ID_C] {
        let response = api.request("POST", "/v1/tasks", Some(WEB_DEFINITION));
        assert_eq!(response.status, 201);
        let id = response.body["id"].as_str().expect("id").to_string();
        arns.push(response.body["TaskARN"].as_str().expect("arn").to_string());
        api.engine.update_task(&id, |task| {
            let container = &mut task.containers[0];
            container.docker_id = Some(docker_id.to_string());
            container.docker_name = Some(format!("deckhand-web-0-web-{}", &docker_id[..4]));
            container.known_status = ContainerStatus::Running;
        });
    }
    let running_id = arns[2].rsplit('/').next().expect("id").to_string();
    api.engine
        .update_task(&running_id, |task| task.known_status = TaskStatus::Running);
    (api, arns)
}

#[test]
fn metadata_in_the_ecs_shape() {
    let (api, _) = api_with_tasks();
    let (status, body) = tcp_get(api.introspection_address(), "/v1/metadata");
    assert_eq!(status, 200);
    assert_eq!(body["Cluster"], "test-cluster");
    assert!(body["ContainerInstanceArn"].is_null());
    assert_eq!(body["Version"], format!("deckhand v{}", deckhand::VERSION));
}

#[test]
fn task_list_in_the_ecs_shape() {
    let (api, arns) = api_with_tasks();
    let (status, body) = tcp_get(api.introspection_address(), "/v1/tasks");
    assert_eq!(status, 200);
    let tasks = body["Tasks"].as_array().expect("Tasks");
    assert_eq!(tasks.len(), 3);
    let pending = tasks
        .iter()
        .find(|task| task["Arn"] == arns[0].as_str())
        .expect("task A");
    assert_eq!(pending["KnownStatus"], "PENDING");
    assert_eq!(pending["DesiredStatus"], "RUNNING");
    assert_eq!(pending["Family"], "web");
    assert_eq!(pending["Version"], "0");
    let container = &pending["Containers"][0];
    assert_eq!(container["DockerId"], DOCKER_ID_A);
    assert_eq!(container["Name"], "web");
    assert_eq!(container["Image"], "busybox:latest");
    assert_eq!(container["Networks"][0]["NetworkMode"], "bridge");
    let running = tasks
        .iter()
        .find(|task| task["Arn"] == arns[2].as_str())
        .expect("task C");
    assert_eq!(running["KnownStatus"], "RUNNING");
}

#[test]
fn filters_find_one_task_or_say_why_not() {
    let (api, arns) = api_with_tasks();
    let address = api.introspection_address();
    let table: Vec<(String, u16, Option<&str>)> = vec![
        (
            format!("/v1/tasks?taskarn={}", percent_encode(&arns[1])),
            200,
            Some(&arns[1]),
        ),
        (
            format!("/v1/tasks?dockerid={DOCKER_ID_A}"),
            200,
            Some(&arns[0]),
        ),
        (
            format!("/v1/tasks?dockerid={}", &DOCKER_ID_C[..12]),
            200,
            Some(&arns[2]),
        ),
        (
            format!("/v1/tasks?dockerid={}", &DOCKER_ID_C[..5]),
            200,
            Some(&arns[2]),
        ),
        // A short id shared by two containers is ambiguous.
        (
            format!("/v1/tasks?dockerid={}", &DOCKER_ID_A[..12]),
            400,
            None,
        ),
        // Longer than a short id: must match in full.
        (
            format!("/v1/tasks?dockerid={}", &DOCKER_ID_C[..13]),
            404,
            None,
        ),
        ("/v1/tasks?dockerid=ffffffffffff".to_string(), 404, None),
        (
            "/v1/tasks?taskarn=arn:aws:ecs:local:000000000000:task/test-cluster/none".to_string(),
            404,
            None,
        ),
        (
            format!(
                "/v1/tasks?taskarn={}&dockerid={DOCKER_ID_A}",
                percent_encode(&arns[0])
            ),
            400,
            None,
        ),
        ("/v1/nothing".to_string(), 404, None),
    ];
    for (target, expected_status, expected_arn) in table {
        let (status, body) = tcp_get(address, &target);
        assert_eq!(status, expected_status, "{target}: {body}");
        match expected_arn {
            Some(arn) => {
                assert_eq!(body["Arn"], arn, "{target}");
                assert!(body.get("Tasks").is_none(), "one task object, not a list");
            }
            None => assert!(
                body["error"].as_str().is_some_and(|m| !m.is_empty()),
                "{target}"
            ),
        }
    }
}

#[test]
fn introspection_is_read_only() {
    let (api, arns) = api_with_tasks();
    let address = api.introspection_address();
    for (method, target) in [
        ("POST", "/v1/tasks"),
        ("DELETE", "/v1/tasks"),
        ("PUT", "/v1/metadata"),
    ] {
        let (status, body) = tcp_request(address, method, target);
        assert_eq!(status, 405, "{method} {target}");
        assert!(body["error"]
            .as_str()
            .is_some_and(|m| m.contains("read-only")));
    }
    let stop_target = format!("/v1/tasks/{}/stop", percent_encode(&arns[0]));
    let (status, _) = tcp_request(address, "POST", &stop_target);
    assert_eq!(status, 404, "the local API's routes do not exist here");
    assert_eq!(
        api.engine.calls().len(),
        3,
        "only the three submits reached the engine"
    );
}

#[test]
fn metrics_are_served_in_the_prometheus_text_format() {
    let (api, _) = api_with_tasks();
    let address = api.introspection_address();
    let mut stream = std::net::TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .expect("timeout");
    deckhand::api::http::write_request(&mut stream, "GET", "/metrics", None).expect("write");
    let response = deckhand::api::http::read_response(&mut stream, 4 << 20).expect("response");
    assert_eq!(response.status, 200);
    assert_eq!(
        response.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let page = String::from_utf8(response.body).expect("UTF-8");
    for line in [
        format!("deckhand_build_info{{version=\"{}\"}} 1", deckhand::VERSION),
        "deckhand_tasks{status=\"NONE\"} 2".to_string(),
        "deckhand_tasks{status=\"RUNNING\"} 1".to_string(),
        "deckhand_containers{status=\"RUNNING\"} 3".to_string(),
        "deckhand_containers{status=\"PULLED\"} 0".to_string(),
    ] {
        assert!(page.lines().any(|l| l == line), "no {line:?} in:\n{page}");
    }
    for line in page.lines().filter(|line| !line.starts_with('#')) {
        assert!(
            deckhand::metrics::exposition::read_sample_line(line).is_some(),
            "malformed {line:?}"
        );
    }
    let (status, body) = tcp_request(address, "POST", "/metrics");
    assert_eq!(status, 405);
    assert!(body["error"]
        .as_str()
        .is_some_and(|m| m.contains("read-only")));
    assert_eq!(api.engine.calls().len(), 3, "a scrape sends no command");
}
