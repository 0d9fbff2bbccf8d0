//! A Docker that answers a pull and then garbles its progress stream (a line that is not JSON, a
//! stream cut off mid-pull): the task engine, on the real Docker client, sees a failed pull
//! (`CannotPullContainerError`), and the pull behaviour decides as for any failed pull —
//! `default` runs the task on the local copy, `always` stops it naming the error — within
//! seconds, never waiting for a Docker that is in fact there.
//!
//! The Docker in front of the engine is a proxy on a Unix socket of the test's own: every call
//! goes through to the real Docker Engine, except a pull, which the proxy answers itself with a
//! garbled stream.
//!
//! Needs Docker: without it these tests skip with a message, or fail when
//! `DECKHAND_REQUIRE_DOCKER=1`.

#[path = "support/definitions.rs"]
mod definitions;
#[path = "support/docker.rs"]
mod docker_support;
#[path = "support/engine_events.rs"]
mod engine_events;

use deckhand::docker::{DockerClient, DockerHost};
use deckhand::engine::{EngineConfig, EngineHandle, TaskEngine};
use deckhand::runtime::{ContainerRuntime, Timeouts};
use deckhand::task::PullBehavior;
use definitions::{container, task, with_command};
use docker_support::{docker_client_or_skip, ensure_busybox_image, unique_id, TEST_IMAGE};
use engine_events::wait_event;
use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// How long a garbled pull may take to decide a task: seconds, not a wait for Docker.
const WITHIN: Duration = Duration::from_secs(20);

/// What the proxy answers a pull with.
#[derive(Debug, Clone, Copy)]
enum Garble {
    /// A 200 stream whose second line is not JSON.
    InvalidLine,
    /// A 200 chunked stream that stops mid-chunk and closes.
    Truncated,
}

impl Garble {
    fn answer(self) -> Vec<u8> {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                    Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
        let first = "{\"status\":\"Pulling from deckhand-test/busybox\",\"id\":\"latest\"}\r\n";
        let mut text = format!("{head}{:x}\r\n{first}\r\n", first.len());
        match self {
            Garble::InvalidLine => {
                let garbage = "{\"status\":\"Downloading\",\"progressDetail\":{\x01\r\n";
                text.push_str(&format!("{:x}\r\n{garbage}\r\n0\r\n\r\n", garbage.len()));
            }
            Garble::Truncated => text.push_str("40\r\n{\"status\":\"Down"),
        }
        text.into_bytes()
    }
}

/// A Unix-socket proxy to the real Docker Engine that answers pulls itself.
struct GarblingProxy {
    socket_path: PathBuf,
    /// How many pulls it answered with a garbled stream.
    garbled_pulls: Arc<AtomicUsize>,
}

impl GarblingProxy {
    fn start(docker: DockerHost, garble: Garble) -> GarblingProxy {
        let socket_path = std::env::temp_dir().join(format!(
            "deckhand-garbling-docker-{}-{}.sock",
            std::process::id(),
            unique_id()
        ));
        let listener = UnixListener::bind(&socket_path).expect("binding the proxy socket");
        let garbled_pulls = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&garbled_pulls);
        thread::spawn(move || {
            for connection in listener.incoming() {
                let Ok(connection) = connection else {
                    return;
                };
                let docker = docker.clone();
                let counter = Arc::clone(&counter);
                thread::spawn(move || relay(connection, &docker, garble, &counter));
            }
        });
        GarblingProxy {
            socket_path,
            garbled_pulls,
        }
    }

    fn host(&self) -> DockerHost {
        DockerHost::unix(&self.socket_path)
    }
}

impl Drop for GarblingProxy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.socket_path);
    }
}

/// One connection (deckhand's client makes one per call): reads the request head, answers a
/// pull itself, and otherwise passes the bytes both ways to Docker until either side closes.
fn relay(mut client: UnixStream, docker: &DockerHost, garble: Garble, garbled_pulls: &AtomicUsize) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match client.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let request_line = String::from_utf8_lossy(&head)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    if request_line.starts_with("POST ") && request_line.contains("/images/create?fromImage=") {
        garbled_pulls.fetch_add(1, Ordering::SeqCst);
        let _ = client.write_all(&garble.answer());
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    let Ok(mut upstream) = docker.connect() else {
        return;
    };
    if upstream.write_all(&head).is_err() {
        return;
    }
    let (Ok(mut client_reader), Ok(mut upstream_writer)) =
        (client.try_clone(), upstream.try_clone())
    else {
        return;
    };
    thread::spawn(move || {
        let _ = std::io::copy(&mut client_reader, &mut upstream_writer);
        let _ = upstream_writer.shutdown(Shutdown::Write);
    });
    let _ = std::io::copy(&mut upstream, &mut client);
    let _ = client.shutdown(Shutdown::Both);
}

/// Runs one task through an engine whose Docker garbles pulls, under `pull_behavior`: `check`
/// gets the engine, the task's id and when it was submitted; then the proxy must have garbled
/// exactly the task's one pull.
fn garbled_pull_case(
    test_name: &str,
    garble: Garble,
    pull_behavior: PullBehavior,
    check: impl FnOnce(&TaskEngine, &str, Instant),
) {
    let Some(real) = docker_client_or_skip(test_name) else {
        return;
    };
    ensure_busybox_image(&real);
    let proxy = GarblingProxy::start(real.host().clone(), garble);
    let client = DockerClient::connect(proxy.host(), Timeouts::default())
        .expect("the client negotiates through the proxy");
    let cluster = format!("deckhand-test-{}", unique_id());
    let config = EngineConfig {
        cluster: cluster.clone(),
        pull_behavior,
        stop_timeout: Duration::from_secs(2),
        ..EngineConfig::default()
    };
    let engine = TaskEngine::start(Arc::new(client), config).expect("the engine starts");
    let definition = task(
        "garbled-pull",
        vec![with_command(
            container("app", TEST_IMAGE),
            &["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"],
        )],
    );
    let submitted = Instant::now();
    let task_id = engine.submit(definition).expect("task accepted").id;
    check(&engine, &task_id, submitted);
    let garbled_pulls = proxy.garbled_pulls.load(Ordering::SeqCst);
    assert_eq!(
        garbled_pulls, 1,
        "{test_name} {garble:?}: the one pull met the garbled stream"
    );
    engine.shutdown();
    let filter = format!("com.amazonaws.ecs.cluster={cluster}");
    if let Ok(containers) = real.list_containers(&[filter]) {
        for container in containers {
            let _ = real.remove_container(&container.id, true);
        }
    }
}

#[test]
fn a_garbled_pull_runs_the_task_on_the_local_copy_under_the_default_behaviour() {
    for garble in [Garble::InvalidLine, Garble::Truncated] {
        garbled_pull_case(
            "a_garbled_pull_runs_the_task_on_the_local_copy_under_the_default_behaviour",
            garble,
            PullBehavior::Default,
            |engine, task_id, submitted| {
                wait_event(engine, task_id, None, "RUNNING", WITHIN);
                assert!(
                    submitted.elapsed() < WITHIN,
                    "{garble:?}: {:?}",
                    submitted.elapsed()
                );
                let app = engine
                    .task(task_id)
                    .and_then(|task| task.container("app").cloned())
                    .expect("the task is held");
                // The failed pull fell back to the local copy (logged, no error kept).
                assert!(
                    app.docker_id.is_some(),
                    "{garble:?}: created from the local copy"
                );
                assert_eq!(app.applying_error, None, "{garble:?}");
            },
        );
    }
}

#[test]
fn a_garbled_pull_stops_the_task_with_cannot_pull_container_error_under_always() {
    for garble in [Garble::InvalidLine, Garble::Truncated] {
        garbled_pull_case(
            "a_garbled_pull_stops_the_task_with_cannot_pull_container_error_under_always",
            garble,
            PullBehavior::Always,
            |engine, task_id, submitted| {
                let stopped = wait_event(engine, task_id, None, "STOPPED", WITHIN);
                assert!(
                    submitted.elapsed() < WITHIN,
                    "{garble:?}: {:?}",
                    submitted.elapsed()
                );
                let reason = stopped.reason.unwrap_or_default();
                let expected = match garble {
                    Garble::InvalidLine => "invalid progress line",
                    Garble::Truncated => "progress stream was cut off",
                };
                assert!(reason.contains(expected), "{garble:?}: {reason}");
                assert!(
                    reason.starts_with("CannotPullContainerError:"),
                    "{garble:?}: {reason}"
                );
                let task = engine.task(task_id).expect("the task is held");
                let app = task.container("app").expect("app");
                assert!(
                    app.docker_id.is_none(),
                    "{garble:?}: no create after a failed pull"
                );
            },
        );
    }
}
