//! The local API over its Unix socket, against an in-memory engine: every route, every error
//! status, the request limits, long polls, and the socket's own rules.

#[path = "support/api.rs"]
mod api_support;
#[path = "support/memory_engine.rs"]
mod memory_engine;

use api_support::{raw_exchange, TestApi, INVALID_DEFINITION, WEB_DEFINITION};
use deckhand::api::http::percent_encode;
use deckhand::api::ApiServers;
use deckhand::engine::EngineError;
use memory_engine::{Call, MemoryEngine};
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

fn submit_web(api: &TestApi) -> String {
    let response = api.request("POST", "/v1/tasks", Some(WEB_DEFINITION));
    assert_eq!(response.status, 201, "{:?}", response.body);
    response.body["id"].as_str().expect("id").to_string()
}

#[test]
fn metadata_names_the_cluster_and_version() {
    let api = TestApi::start(false);
    let response = api.request("GET", "/v1/metadata", None);
    assert_eq!(response.status, 200);
    assert_eq!(response.body["Cluster"], "test-cluster");
    assert_eq!(
        response.body["Version"],
        format!("deckhand v{}", deckhand::VERSION)
    );
    assert!(response.body["ContainerInstanceArn"].is_null());
}

#[test]
fn submit_list_inspect_and_stop() {
    let api = TestApi::start(false);
    let response = api.request("POST", "/v1/tasks", Some(WEB_DEFINITION));
    assert_eq!(response.status, 201, "{:?}", response.body);
    let id = response.body["id"].as_str().expect("id").to_string();
    let arn = response.body["TaskARN"].as_str().expect("arn").to_string();
    assert_eq!(id.len(), 32);
    assert_eq!(
        arn,
        format!("arn:aws:ecs:local:000000000000:task/test-cluster/{id}")
    );

    let list = api.request("GET", "/v1/tasks", None);
    assert_eq!(list.status, 200);
    assert_eq!(list.body["Tasks"].as_array().map(Vec::len), Some(1));
    assert_eq!(list.body["Tasks"][0]["TaskARN"], arn.as_str());

    for query in [id.clone(), id[..6].to_string(), percent_encode(&arn)] {
        let inspect = api.request("GET", &format!("/v1/tasks/{query}"), None);
        assert_eq!(inspect.status, 200, "{query}: {:?}", inspect.body);
        assert_eq!(inspect.body["TaskARN"], arn.as_str());
        assert_eq!(inspect.body["Family"], "web");
        assert_eq!(inspect.body["DesiredStatus"], "RUNNING");
        assert_eq!(inspect.body["KnownStatus"], "NONE");
        let container = &inspect.body["Containers"][0];
        assert_eq!(container["Name"], "web");
        assert_eq!(
            container["Labels"]["com.amazonaws.ecs.cluster"],
            "test-cluster"
        );
        assert_eq!(
            container["Labels"]["com.amazonaws.ecs.task-arn"],
            arn.as_str()
        );
    }

    let stop = api.request("POST", &format!("/v1/tasks/{}/stop", &id[..8]), Some(""));
    assert_eq!(stop.status, 202, "{:?}", stop.body);
    assert_eq!(stop.body["id"], id.as_str());
    assert_eq!(
        api.engine.calls().last(),
        Some(&Call::Stop { id: id.clone() }),
        "the stop reached the engine with the full id"
    );
    let inspect = api.request("GET", &format!("/v1/tasks/{id}"), None);
    assert_eq!(inspect.body["DesiredStatus"], "STOPPED");
}

#[test]
fn stats_list_every_task_with_its_containers_and_the_host() {
    let api = TestApi::start(false);
    let id = submit_web(&api);
    let before = deckhand::clock::now_millis();
    let stats = api.request("GET", "/v1/stats", None);
    assert_eq!(stats.status, 200, "{:?}", stats.body);
    let body = &stats.body;
    assert!(
        body["time"].as_u64().is_some_and(|time| time >= before),
        "{body}"
    );
    // This machine's /proc: the host and this process are read.
    assert!(
        body["host"]["cpus"].as_u64().is_some_and(|cpus| cpus >= 1),
        "{body}"
    );
    assert!(body["host"]["memoryTotalBytes"]
        .as_u64()
        .is_some_and(|bytes| bytes > 0));
    assert!(body["agent"]["residentBytes"]
        .as_u64()
        .is_some_and(|bytes| bytes > 0));
    let task = &body["tasks"][0];
    assert_eq!(task["id"], id.as_str());
    assert_eq!(task["family"], "web");
    assert_eq!(task["knownStatus"], "NONE");
    assert_eq!(task["networkMode"], "bridge");
    assert!(task["healthStatus"].is_null(), "no health check: {task}");
    let container = &task["containers"][0];
    assert_eq!(container["name"], "web");
    assert_eq!(container["restartCount"], 0);
    // Not running: nothing read for it.
    for key in [
        "cpuSeconds",
        "memoryUsedBytes",
        "networkRxBytes",
        "blockReadBytes",
    ] {
        assert!(container[key].is_null(), "{key}: {container}");
    }
}

#[test]
fn an_invalid_definition_lists_every_error_and_creates_nothing() {
    let api = TestApi::start(false);
    let response = api.request("POST", "/v1/tasks", Some(INVALID_DEFINITION));
    assert_eq!(response.status, 400);
    let errors = response.body["errors"].as_array().expect("errors list");
    assert!(errors.len() >= 2, "every error is listed: {errors:?}");
    let message = response.body["error"].as_str().expect("error");
    assert!(
        message.starts_with("invalid task definition: "),
        "{message}"
    );
    assert!(
        message.contains("\"db\"") || message.contains("db"),
        "{message}"
    );
    assert!(message.contains("image"), "{message}");
    assert!(api.engine.calls().is_empty(), "nothing reached the engine");
}

#[test]
fn malformed_json_and_empty_bodies_are_400() {
    let api = TestApi::start(false);
    for body in ["{\"family\": ", "not json", "[1,2]", "", "   "] {
        let response = api.request("POST", "/v1/tasks", Some(body));
        assert_eq!(response.status, 400, "{body:?}: {:?}", response.body);
        assert!(response.body["error"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
    }
    assert!(api.engine.calls().is_empty());
}

#[test]
fn a_two_mebibyte_body_is_refused_before_it_is_sent() {
    let api = TestApi::start(false);
    let mut stream = UnixStream::connect(&api.socket).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    stream
        .write_all(b"POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 2097152\r\n\r\n")
        .expect("head");
    // Not one byte of the body is sent: the answer must come anyway.
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
    assert!(answer.contains("1048576"), "{answer}");

    // The same through the CLI's client, which sends the whole body.
    let body = vec![b' '; 2 * 1024 * 1024];
    let response = api
        .client()
        .request("POST", "/v1/tasks", Some(&body), Duration::from_secs(10))
        .expect("an answer, not a broken pipe");
    assert_eq!(response.status, 413);
    assert!(api.engine.calls().is_empty());
    // And the agent keeps serving.
    assert_eq!(api.request("GET", "/v1/metadata", None).status, 200);
}

#[test]
fn wrong_methods_unknown_paths_and_unknown_tasks() {
    let api = TestApi::start(false);
    let id = submit_web(&api);
    let table = [
        ("DELETE", "/v1/tasks".to_string(), 405, Some("GET, POST")),
        ("PUT", format!("/v1/tasks/{id}"), 405, Some("GET")),
        ("GET", format!("/v1/tasks/{id}/stop"), 405, Some("POST")),
        ("POST", "/v1/events".to_string(), 405, Some("GET")),
        ("POST", "/v1/metadata".to_string(), 405, Some("GET")),
        ("POST", "/v1/stats".to_string(), 405, Some("GET")),
        ("GET", "/v2/tasks".to_string(), 404, None),
        ("GET", "/".to_string(), 404, None),
        ("POST", "/v1/tasks//stop".to_string(), 400, None),
        ("GET", "/v1/tasks/ffffffff".to_string(), 404, None),
        ("POST", "/v1/tasks/ffffffff/stop".to_string(), 404, None),
        ("GET", "/v1/events?since=x".to_string(), 400, None),
        ("GET", "/v1/events?wait=-1".to_string(), 400, None),
        ("GET", "/v1/events?bogus=1".to_string(), 400, None),
    ];
    for (method, target, status, allow) in table {
        let answer = raw_exchange(
            &api.socket,
            format!("{method} {target} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
                .as_bytes(),
        );
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status} ")),
            "{method} {target}: {answer}"
        );
        assert!(
            answer.contains("{\"error\":"),
            "{method} {target}: {answer}"
        );
        if let Some(allow) = allow {
            assert!(answer.contains(&format!("Allow: {allow}\r\n")), "{answer}");
        }
    }
    let response = api.request("GET", "/v1/tasks/ffffffff", None);
    assert_eq!(response.body["error"], "no task ffffffff");
    // Nothing above disturbed the task.
    assert_eq!(api.engine.calls().len(), 1);
    assert_eq!(
        api.request("GET", &format!("/v1/tasks/{id}"), None).status,
        200
    );
}

#[test]
fn an_ambiguous_prefix_lists_the_candidates() {
    let api = TestApi::start(false);
    let first = "abc10000000000000000000000000000".to_string();
    let second = "abc20000000000000000000000000000".to_string();
    for id in [&first, &second] {
        let definition = deckhand::task::parse_task_definition(WEB_DEFINITION.as_bytes())
            .expect("valid")
            .definition;
        api.engine.insert_task(deckhand::task::Task::new(
            id.clone(),
            "test-cluster",
            definition,
            1,
            0,
        ));
    }
    let common = "abc";
    let response = api.request("GET", &format!("/v1/tasks/{common}"), None);
    assert_eq!(response.status, 400);
    let message = response.body["error"].as_str().expect("error");
    assert!(message.contains("ambiguous"), "{message}");
    assert!(
        message.contains(&first) && message.contains(&second),
        "{message}"
    );
    assert_eq!(
        response.body["candidates"].as_array().map(Vec::len),
        Some(2)
    );
    let stop = api.request("POST", &format!("/v1/tasks/{common}/stop"), None);
    assert_eq!(stop.status, 400);
    assert!(!api
        .engine
        .calls()
        .iter()
        .any(|call| matches!(call, Call::Stop { .. })));
}

#[test]
fn engine_refusals_map_onto_statuses() {
    let api = TestApi::start(false);
    let id = submit_web(&api);
    let table = [
        (
            EngineError::Unavailable {
                reason: "disk full".into(),
            },
            503,
            "disk full",
        ),
        (EngineError::ShuttingDown, 503, "shutting down"),
        (
            EngineError::Rejected {
                reason: "privileged containers are disabled".into(),
            },
            400,
            "privileged",
        ),
    ];
    for (error, status, text) in table {
        api.engine.refuse_with(Some(error));
        for (method, target, body) in [
            ("POST", "/v1/tasks".to_string(), Some(WEB_DEFINITION)),
            ("POST", format!("/v1/tasks/{id}/stop"), None),
        ] {
            let response = api.request(method, &target, body);
            assert_eq!(response.status, status, "{method} {target}");
            assert!(
                response.error_message().contains(text),
                "{:?}",
                response.body
            );
        }
    }
    api.engine.refuse_with(None);
    assert_eq!(
        api.request("POST", "/v1/tasks", Some(WEB_DEFINITION))
            .status,
        201
    );
}

#[test]
fn events_are_returned_after_since_and_a_long_poll_wakes_on_a_new_event() {
    let api = TestApi::start(false);
    api.engine.push_event("t1", Some("web"), "RUNNING", None);
    api.engine.push_event("t1", None, "RUNNING", None);
    let all = api.request("GET", "/v1/events", None);
    assert_eq!(all.body["events"].as_array().map(Vec::len), Some(2));
    let after_one = api.request("GET", "/v1/events?since=1", None);
    assert_eq!(after_one.body["events"][0]["seq"], 2);
    assert_eq!(after_one.body["events"][0]["task"], "t1");
    assert!(after_one.body["events"][0].get("container").is_none());

    let engine = api.engine.clone();
    let started = Instant::now();
    let waiter = {
        let client = api.client();
        thread::spawn(move || {
            client
                .request(
                    "GET",
                    "/v1/events?since=2&wait=30",
                    None,
                    Duration::from_secs(40),
                )
                .expect("long poll")
        })
    };
    // Only once the poller is really waiting does the event arrive.
    assert!(engine.wait_for_waiting_readers(1, Duration::from_secs(10)));
    engine.push_event("t1", Some("web"), "STOPPED", Some(0));
    let response = waiter.join().expect("waiter");
    assert_eq!(response.body["events"][0]["seq"], 3);
    assert_eq!(response.body["events"][0]["exitCode"], 0);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "woke on the event, not the timeout"
    );
}

#[test]
fn long_polls_never_take_every_worker() {
    let api = TestApi::start(false);
    let limit = deckhand::api::local::MAX_WAITING_EVENT_READERS;
    let mut waiters = Vec::new();
    for _ in 0..limit {
        let client = api.client();
        waiters.push(thread::spawn(move || {
            client
                .request(
                    "GET",
                    "/v1/events?since=0&wait=60",
                    None,
                    Duration::from_secs(70),
                )
                .expect("long poll")
        }));
    }
    // Once every poller waits in the engine, one more long poll is refused with 503.
    assert!(
        api.engine
            .wait_for_waiting_readers(limit, Duration::from_secs(10)),
        "the pollers never all waited"
    );
    let refused = api.request("GET", "/v1/events?since=0&wait=1", None);
    assert_eq!(refused.status, 503, "{:?}", refused.body);
    assert!(
        refused.error_message().contains("too many"),
        "{:?}",
        refused.body
    );
    // Other requests are still served promptly while every poll slot is taken.
    let started = Instant::now();
    assert_eq!(api.request("GET", "/v1/metadata", None).status, 200);
    assert_eq!(api.request("GET", "/v1/tasks", None).status, 200);
    assert!(started.elapsed() < Duration::from_secs(2));
    api.engine.push_event("t", None, "RUNNING", None);
    for waiter in waiters {
        assert_eq!(waiter.join().expect("waiter").status, 200);
    }
}

#[test]
fn socket_mode_stale_socket_live_agent_and_cleanup() {
    let api = TestApi::start(false);
    let metadata = std::fs::metadata(&api.socket).expect("socket exists");
    assert!(metadata.file_type().is_socket());
    assert_eq!(metadata.permissions().mode() & 0o777, 0o660);

    // A second agent on the same socket is refused while the first answers.
    let engine = Arc::new(MemoryEngine::new("other"));
    let error = ApiServers::start(engine.clone(), &api.socket, None)
        .err()
        .expect("second agent refused");
    assert!(error.to_string().contains("already serving"), "{error}");
    assert_eq!(api.request("GET", "/v1/metadata", None).status, 200);

    // Shutting down removes the socket file, promptly even with a long poll waiting.
    let socket = api.socket.clone();
    let mut api = api;
    let poller = {
        let client = api.client();
        thread::spawn(move || {
            client.request("GET", "/v1/events?wait=60", None, Duration::from_secs(70))
        })
    };
    assert!(api
        .engine
        .wait_for_waiting_readers(1, Duration::from_secs(10)));
    let started = Instant::now();
    api.servers.shutdown();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "shutdown took {:?}",
        started.elapsed()
    );
    assert!(!socket.exists(), "socket removed on shutdown");
    let _ = poller.join();

    // A stale socket file (nobody listening) is replaced.
    let stale = UnixListener::bind(&socket).expect("bind stale");
    drop(stale);
    assert!(socket.exists());
    let mut servers = ApiServers::start(engine, &socket, None).expect("stale socket replaced");
    let client = deckhand::cli::client::ApiClient::new(&socket);
    let response = client
        .request("GET", "/v1/metadata", None, Duration::from_secs(5))
        .expect("served");
    assert_eq!(response.body["Cluster"], "other");
    servers.shutdown();

    // A regular file in the way is not removed.
    std::fs::write(&socket, b"not a socket").expect("write");
    let error = ApiServers::start(Arc::new(MemoryEngine::new("x")), &socket, None)
        .err()
        .expect("refused");
    assert!(error.to_string().contains("not a socket"), "{error}");
    assert!(socket.exists());
}

#[test]
fn garbage_and_half_requests_do_not_stop_the_server() {
    let api = TestApi::start(false);
    let answer = raw_exchange(&api.socket, b"\x00\x01\x02 garbage\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    // A client that connects and leaves without a byte.
    drop(UnixStream::connect(&api.socket).expect("connect"));
    // A client that leaves mid-body.
    {
        let mut stream = UnixStream::connect(&api.socket).expect("connect");
        stream
            .write_all(b"POST /v1/tasks HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"fam")
            .expect("partial");
    }
    let mut huge_head = b"GET /v1/metadata HTTP/1.1\r\nX-Big: ".to_vec();
    huge_head.extend(std::iter::repeat_n(b'a', 20_000));
    huge_head.extend_from_slice(b"\r\n\r\n");
    let answer = raw_exchange(&api.socket, &huge_head);
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    assert_eq!(api.request("GET", "/v1/metadata", None).status, 200);
    assert!(api.engine.calls().is_empty());
}

#[test]
fn shutdown_does_not_hang_when_the_socket_file_was_removed() {
    let mut api = TestApi::start(false);
    std::fs::remove_file(&api.socket).expect("remove the socket file");
    let started = Instant::now();
    api.servers.shutdown();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

const TWO_CONTAINERS: &str = r#"{
  "family": "pair",
  "containerDefinitions": [
    {"name": "web", "image": "busybox:latest", "essential": true},
    {"name": "console", "image": "busybox:latest", "essential": false, "pseudoTerminal": true}
  ]
}"#;

fn log_frame(stream: u8, payload: &[u8]) -> Vec<u8> {
    let mut bytes = vec![stream, 0, 0, 0];
    bytes.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// Submits the two-container task and gives its containers Docker ids (`web-id`,
/// `console-id`) and logs; returns the task id.
fn task_with_logs(api: &TestApi, stays_open: bool) -> String {
    let response = api.request("POST", "/v1/tasks", Some(TWO_CONTAINERS));
    assert_eq!(response.status, 201, "{:?}", response.body);
    let id = response.body["id"].as_str().expect("id").to_string();
    api.engine.update_task(&id, |task| {
        for container in &mut task.containers {
            container.docker_id = Some(format!("{}-id", container.name()));
        }
    });
    let mut web = log_frame(1, b"web out\n");
    web.extend(log_frame(2, b"web err\n"));
    api.engine.set_log("web-id", &web, stays_open);
    api.engine
        .set_log("console-id", b"console line\r\n", stays_open);
    id
}

/// `deckhand logs` through the CLI's own code: (result, stdout, stderr).
fn cli_logs(
    api: &TestApi,
    request: &deckhand::cli::commands::LogsRequest<'_>,
) -> (
    Result<(), deckhand::cli::commands::CliFailure>,
    String,
    String,
) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let result = deckhand::cli::commands::logs(&api.client(), request, &mut out, &mut err);
    (
        result,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

#[test]
fn logs_of_every_container_are_prefixed_and_split_by_stream() {
    let api = TestApi::start(false);
    let id = task_with_logs(&api, false);
    let request = deckhand::cli::commands::LogsRequest {
        task: &id[..8],
        tail: Some(10),
        since: Some("10m"),
        timestamps: true,
        ..Default::default()
    };
    let (result, stdout, stderr) = cli_logs(&api, &request);
    assert_eq!(result, Ok(()));
    let mut lines: Vec<&str> = stdout.lines().collect();
    lines.sort();
    assert_eq!(lines, vec!["console | console line", "web     | web out"]);
    assert_eq!(stderr, "web     | web err\n");
    let openings = api.engine.log_openings();
    assert_eq!(openings.len(), 2);
    for (_, options) in &openings {
        assert_eq!(options.tail, Some(10));
        assert!(options.timestamps && !options.follow);
        let since: f64 = options
            .since
            .as_deref()
            .expect("since")
            .parse()
            .expect("seconds");
        let now = deckhand::clock::now_millis() as f64 / 1000.0;
        assert!(
            (now - 600.0 - since).abs() < 60.0,
            "{since} is not 10 minutes ago"
        );
    }

    // One container by name: its lines as they are.
    let request = deckhand::cli::commands::LogsRequest {
        task: &id,
        container: Some("web"),
        ..Default::default()
    };
    let (result, stdout, stderr) = cli_logs(&api, &request);
    assert_eq!(result, Ok(()));
    assert_eq!(
        (stdout.as_str(), stderr.as_str()),
        ("web out\n", "web err\n")
    );
}

#[test]
fn logs_of_an_unknown_container_list_the_tasks_containers() {
    let api = TestApi::start(false);
    let id = task_with_logs(&api, false);
    let response = api.request("GET", &format!("/v1/tasks/{id}/logs?container=db"), None);
    assert_eq!(response.status, 404, "{:?}", response.body);
    assert_eq!(
        response.body["containers"],
        serde_json::json!(["web", "console"])
    );
    let request = deckhand::cli::commands::LogsRequest {
        task: &id,
        container: Some("db"),
        ..Default::default()
    };
    let (result, _, _) = cli_logs(&api, &request);
    let failure = result.expect_err("unknown container");
    assert_eq!(failure.exit_code(), 2);
    assert!(
        failure.messages()[0].contains("no container \"db\"; its containers: web, console"),
        "{failure:?}"
    );
    // Bad parameters and unknown tasks are refused before any log is opened.
    let bad = api.request("GET", &format!("/v1/tasks/{id}/logs?tail=many"), None);
    assert_eq!(bad.status, 400, "{:?}", bad.body);
    let unknown = api.request("GET", "/v1/tasks/ffffffff/logs", None);
    assert_eq!(unknown.status, 404, "{:?}", unknown.body);
    assert!(api.engine.log_openings().is_empty());
}

#[test]
fn a_followed_log_streams_new_lines_and_ends_with_the_containers() {
    let api = TestApi::start(false);
    let id = task_with_logs(&api, true);
    let client = api.client();
    let follower = thread::spawn(move || {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let request = deckhand::cli::commands::LogsRequest {
            task: &id,
            container: Some("web"),
            follow: true,
            ..Default::default()
        };
        let result = deckhand::cli::commands::logs(&client, &request, &mut out, &mut err);
        (result, out, err)
    });
    // Once the stream is open, a line written now reaches the follower.
    let deadline = Instant::now() + Duration::from_secs(10);
    while api.engine.log_openings().is_empty() {
        assert!(Instant::now() < deadline, "the log was never opened");
        thread::yield_now();
    }
    api.engine.write_log("web-id", &log_frame(1, b"later\n"));
    api.engine.end_logs();
    let (result, out, err) = follower.join().expect("follower");
    assert_eq!(result, Ok(()));
    assert_eq!(String::from_utf8_lossy(&out), "web out\nlater\n");
    assert_eq!(String::from_utf8_lossy(&err), "web err\n");
    assert!(api.engine.log_openings()[0].1.follow);
}

#[test]
fn a_follower_that_goes_away_closes_the_log_and_frees_its_worker() {
    let api = TestApi::start(false);
    let id = task_with_logs(&api, true);
    let limit = deckhand::api::local::MAX_WAITING_EVENT_READERS;
    // Every slot taken by followers that read the head and then stop reading.
    let mut followers = Vec::new();
    for _ in 0..limit {
        let mut stream = UnixStream::connect(&api.socket).expect("connect");
        stream
            .write_all(
                format!("GET /v1/tasks/{id}/logs?follow=1 HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
            )
            .expect("request");
        let mut first = [0u8; 12];
        stream.read_exact(&mut first).expect("the answer starts");
        assert_eq!(&first, b"HTTP/1.1 200");
        followers.push(stream);
    }
    // One more stream, and one more long poll, are refused; other requests are served.
    let refused = api.request("GET", &format!("/v1/tasks/{id}/logs"), None);
    assert_eq!(refused.status, 503, "{:?}", refused.body);
    let refused = api.request("GET", "/v1/events?since=0&wait=1", None);
    assert_eq!(refused.status, 503, "{:?}", refused.body);
    assert_eq!(api.request("GET", "/v1/tasks", None).status, 200);
    // The followers go away: their logs are closed and their slots come back.
    drop(followers);
    let deadline = Instant::now() + Duration::from_secs(10);
    while api.engine.closed_logs() < limit * 2 {
        assert!(
            Instant::now() < deadline,
            "only {} of {} logs closed",
            api.engine.closed_logs(),
            limit * 2
        );
        thread::sleep(Duration::from_millis(20));
    }
    api.engine.end_logs();
    let answer = raw_exchange(
        &api.socket,
        format!("GET /v1/tasks/{id}/logs?container=web HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("Transfer-Encoding: chunked"), "{answer}");
}

#[test]
fn shutdown_ends_open_log_streams_promptly() {
    let mut api = TestApi::start(false);
    let id = task_with_logs(&api, true);
    let mut follower = UnixStream::connect(&api.socket).expect("connect");
    follower
        .write_all(
            format!("GET /v1/tasks/{id}/logs?follow=1 HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
        )
        .expect("request");
    let mut first = [0u8; 12];
    follower.read_exact(&mut first).expect("the answer starts");
    assert_eq!(&first, b"HTTP/1.1 200");
    // Keep the stream busy while the server stops.
    let engine = api.engine.clone();
    let chatter = thread::spawn(move || {
        for _ in 0..200 {
            engine.write_log("web-id", &log_frame(1, b"chatty\n"));
            thread::sleep(Duration::from_millis(10));
        }
    });
    let started = Instant::now();
    api.servers.shutdown();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "shutdown waited {:?} for a log stream",
        started.elapsed()
    );
    assert!(api.engine.closed_logs() >= 2, "the logs were not closed");
    chatter.join().expect("chatter");
}
