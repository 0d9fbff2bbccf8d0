//! The task engine driving the real Docker Engine through the real client: dependency order
//! and reverse-order shutdown (checked on Docker's own StartedAt/FinishedAt), an essential exit,
//! stop escalation after `stopTimeout`, and the ECS labels. Each test uses its own cluster name,
//! so its engine only sees its own containers, and removes them when it ends.
//!
//! Needs Docker: without it these tests skip with a message, or fail when
//! `DECKHAND_REQUIRE_DOCKER=1`.

#[path = "support/definitions.rs"]
mod definitions;
#[path = "support/docker.rs"]
mod docker_support;
#[path = "support/engine_events.rs"]
mod engine_events;

use deckhand::docker::DockerClient;
use deckhand::engine::managed_task::parse_docker_time_nanos;
use deckhand::engine::{EngineConfig, EngineHandle, TaskEngine};
use deckhand::runtime::{ContainerInfo, ContainerRuntime};
use deckhand::task::{
    ContainerDefinition, DependencyCondition, PullBehavior, Task, TaskDefinition,
};
use definitions::{container, depends_on, non_essential, task, with_command, with_health_check};
use docker_support::{
    docker_client_or_skip, ensure_busybox_image, free_port, unique_id, TEST_IMAGE,
};
use engine_events::wait_event;
use std::sync::Arc;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(60);

/// Runs until SIGTERM, then exits 0 at once (the shell's trap interrupts `wait`).
const SERVE: &[&str] = &["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"];

/// An engine on the real Docker Engine with a cluster of its own; on drop it shuts the engine
/// down and force-removes every container of that cluster.
struct DockerHarness {
    client: DockerClient,
    engine: TaskEngine,
    cluster: String,
}

impl DockerHarness {
    fn new(test_name: &str) -> Option<DockerHarness> {
        DockerHarness::configured(test_name, |_| {})
    }

    /// As [`DockerHarness::new`], with `configure` changing the engine's settings.
    fn configured(
        test_name: &str,
        configure: impl FnOnce(&mut EngineConfig),
    ) -> Option<DockerHarness> {
        let client = docker_client_or_skip(test_name)?;
        ensure_busybox_image(&client);
        let cluster = format!("deckhand-test-{}", unique_id());
        let mut config = EngineConfig {
            cluster: cluster.clone(),
            // The test image exists only locally: no registry to pull from.
            pull_behavior: PullBehavior::PreferCached,
            stop_timeout: Duration::from_secs(5),
            dependency_poll_interval: Duration::from_millis(250),
            ..EngineConfig::default()
        };
        configure(&mut config);
        let engine =
            TaskEngine::start(Arc::new(client.clone()), config).expect("the engine starts");
        Some(DockerHarness {
            client,
            engine,
            cluster,
        })
    }

    fn submit(&self, definition: TaskDefinition) -> String {
        self.engine.submit(definition).expect("task accepted").id
    }

    fn snapshot(&self, task_id: &str) -> Task {
        self.engine
            .task(task_id)
            .expect("the task is held until cleanup")
    }

    fn inspect(&self, task_id: &str, container_name: &str) -> ContainerInfo {
        let snapshot = self.snapshot(task_id);
        let docker_id = snapshot
            .container(container_name)
            .and_then(|c| c.docker_id.clone())
            .unwrap_or_else(|| panic!("{container_name} has no Docker id"));
        self.client
            .inspect_container(&docker_id)
            .unwrap_or_else(|error| panic!("inspecting {container_name}: {error}"))
    }
}

impl Drop for DockerHarness {
    fn drop(&mut self) {
        self.engine.shutdown();
        let filter = format!("com.amazonaws.ecs.cluster={}", self.cluster);
        if let Ok(containers) = self.client.list_containers(&[filter]) {
            for container in containers {
                let _ = self.client.remove_container(&container.id, true);
            }
        }
    }
}

fn serving(name: &str) -> ContainerDefinition {
    with_command(container(name, TEST_IMAGE), SERVE)
}

fn started_at(info: &ContainerInfo) -> i64 {
    parse_docker_time_nanos(&info.state.started_at)
        .unwrap_or_else(|| panic!("{} has no StartedAt", info.name))
}

fn finished_at(info: &ContainerInfo) -> i64 {
    parse_docker_time_nanos(&info.state.finished_at)
        .unwrap_or_else(|| panic!("{} has no FinishedAt", info.name))
}

#[test]
fn three_containers_start_in_dependency_order_and_stop_in_reverse() {
    let Some(harness) = DockerHarness::new("three_containers_start_in_dependency_order") else {
        return;
    };
    let init = non_essential(with_command(
        container("init", TEST_IMAGE),
        &["sh", "-c", "exit 0"],
    ));
    let database = with_health_check(serving("db"), "true");
    let mut app = depends_on(
        depends_on(serving("app"), "init", DependencyCondition::Success),
        "db",
        DependencyCondition::Healthy,
    );
    // The stop may come before the app's shell has set its trap (nothing signals that moment),
    // and a shell as PID 1 ignores SIGTERM: under Docker's init the shell is not PID 1, so a
    // SIGTERM ends it either way — 0 through the trap, 143 before it — and only SIGKILL (137)
    // means the grace ran out.
    app.linux_parameters.init_process_enabled = true;
    let id = harness.submit(task("ordered", vec![init, database, app]));
    wait_event(&harness.engine, &id, None, "RUNNING", DEADLINE);

    let init_info = harness.inspect(&id, "init");
    let db_info = harness.inspect(&id, "db");
    let app_info = harness.inspect(&id, "app");
    assert_eq!(init_info.state.exit_code, 0);
    assert!(
        started_at(&app_info) > finished_at(&init_info),
        "app started before init completed"
    );
    assert!(started_at(&app_info) > started_at(&db_info));
    assert_eq!(
        db_info.state.health.as_ref().map(|h| h.status.as_str()),
        Some("healthy")
    );

    harness.engine.stop(&id).expect("stop accepted");
    wait_event(&harness.engine, &id, None, "STOPPED", DEADLINE);
    let db_info = harness.inspect(&id, "db");
    let app_info = harness.inspect(&id, "app");
    assert!(
        finished_at(&app_info) < finished_at(&db_info),
        "db stopped before the app that depends on it"
    );
    assert!(
        [0, 143].contains(&app_info.state.exit_code),
        "the app exited on SIGTERM, not SIGKILL: {}",
        app_info.state.exit_code
    );
}

#[test]
fn an_essential_exit_stops_the_task_with_its_exit_code() {
    let Some(harness) = DockerHarness::new("an_essential_exit_stops_the_task") else {
        return;
    };
    let exits = with_command(
        container("job", TEST_IMAGE),
        &["sh", "-c", "sleep 1; exit 3"],
    );
    let id = harness.submit(task("essential-exit", vec![exits, serving("sidecar")]));
    let job = wait_event(&harness.engine, &id, Some("job"), "STOPPED", DEADLINE);
    assert_eq!(job.exit_code, Some(3));
    let stopped = wait_event(&harness.engine, &id, None, "STOPPED", DEADLINE);
    assert!(stopped.reason.is_some());
    let sidecar = wait_event(&harness.engine, &id, Some("sidecar"), "STOPPED", DEADLINE);
    assert_eq!(
        sidecar.exit_code,
        Some(0),
        "the sidecar was stopped by the engine"
    );
    assert!(!harness.inspect(&id, "sidecar").state.running);
}

#[test]
fn a_container_killed_for_memory_stops_with_the_out_of_memory_reason() {
    let Some(harness) = DockerHarness::new("a_container_killed_for_memory") else {
        return;
    };
    // 6 MiB is the smallest limit Docker takes; the shell's 64 MB string cannot fit in it. (A
    // single huge allocation, such as dd's buffer, is killed too soon for Docker to notice the
    // kernel's OOM notice every time; a string that grows is noticed.)
    let mut hungry = with_command(
        container("hungry", TEST_IMAGE),
        &[
            "sh",
            "-c",
            "x=$(head -c 64000000 /dev/zero | tr '\\0' a); sleep 1",
        ],
    );
    hungry.memory_mib = Some(6);
    let id = harness.submit(task("out-of-memory", vec![hungry]));
    let stopped = wait_event(&harness.engine, &id, Some("hungry"), "STOPPED", DEADLINE);
    assert_eq!(stopped.exit_code, Some(137), "{stopped:?}");
    assert_eq!(
        stopped.reason.as_deref(),
        Some("OutOfMemoryError: Container killed due to memory usage"),
        "{stopped:?}"
    );
    let task_stopped = wait_event(&harness.engine, &id, None, "STOPPED", DEADLINE);
    let task_reason = task_stopped.reason.unwrap_or_default();
    assert!(
        task_reason.contains("OutOfMemoryError"),
        "task reason: {task_reason:?}"
    );
    assert!(harness.inspect(&id, "hungry").state.oom_killed);
}

#[test]
fn a_container_ignoring_sigterm_is_killed_after_its_stop_timeout() {
    let Some(harness) = DockerHarness::new("a_container_ignoring_sigterm_is_killed") else {
        return;
    };
    let mut stubborn = with_command(
        container("stubborn", TEST_IMAGE),
        &["sh", "-c", "trap '' TERM; sleep 3600 & wait"],
    );
    stubborn.stop_timeout_secs = Some(2);
    let id = harness.submit(task("stubborn", vec![stubborn]));
    wait_event(&harness.engine, &id, None, "RUNNING", DEADLINE);
    let asked = Instant::now();
    harness.engine.stop(&id).expect("stop accepted");
    let stopped = wait_event(&harness.engine, &id, Some("stubborn"), "STOPPED", DEADLINE);
    let took = asked.elapsed();
    assert_eq!(stopped.exit_code, Some(137), "killed with SIGKILL");
    assert!(
        took >= Duration::from_secs(2),
        "stopped after {took:?}, before the 2 s stopTimeout"
    );
    assert!(
        took < Duration::from_secs(30),
        "the container's stopTimeout, not the default"
    );
}

#[test]
fn task_containers_carry_the_ecs_labels() {
    let Some(harness) = DockerHarness::new("task_containers_carry_the_ecs_labels") else {
        return;
    };
    let mut labelled = serving("web");
    labelled.docker_labels.insert(
        "com.amazonaws.ecs.cluster".to_string(),
        "spoofed".to_string(),
    );
    labelled
        .docker_labels
        .insert("team".to_string(), "edge".to_string());
    let mut definition = task("labelled", vec![labelled]);
    definition.revision = 7;
    let accepted = harness.engine.submit(definition).expect("accepted");
    wait_event(&harness.engine, &accepted.id, None, "RUNNING", DEADLINE);
    let info = harness.inspect(&accepted.id, "web");
    let labels = &info.labels;
    assert_eq!(labels["com.amazonaws.ecs.cluster"], harness.cluster);
    assert_eq!(labels["com.amazonaws.ecs.task-arn"], accepted.arn);
    assert_eq!(labels["com.amazonaws.ecs.container-name"], "web");
    assert_eq!(
        labels["com.amazonaws.ecs.task-definition-family"],
        "labelled"
    );
    assert_eq!(labels["com.amazonaws.ecs.task-definition-version"], "7");
    assert_eq!(labels["team"], "edge");
    assert!(
        info.name.starts_with("deckhand-labelled-7-web-"),
        "{}",
        info.name
    );
    let listed = harness
        .client
        .list_containers(&[format!("com.amazonaws.ecs.cluster={}", harness.cluster)])
        .expect("list");
    assert_eq!(listed.len(), 1);
    harness.engine.stop(&accepted.id).expect("stop accepted");
    wait_event(&harness.engine, &accepted.id, None, "STOPPED", DEADLINE);
}

#[test]
fn a_replacement_binding_the_same_host_port_starts_after_the_old_task_stopped() {
    let Some(harness) = DockerHarness::new("a_replacement_binding_the_same_host_port") else {
        return;
    };
    let port = free_port();
    let on_port = |name: &str| {
        let mut definition = serving(name);
        definition.port_mappings = vec![deckhand::task::PortMapping {
            container_port: 8080,
            host_port: Some(port),
            protocol: deckhand::task::Protocol::Tcp,
            container_port_range: None,
        }];
        definition
    };
    let old = harness.submit(task("old", vec![on_port("web")]));
    wait_event(&harness.engine, &old, None, "RUNNING", DEADLINE);
    // Stop the old task and submit its replacement at once: without the ordering the new
    // container would fail to bind the port the old one still holds.
    harness.engine.stop(&old).expect("stop accepted");
    let new = harness.submit(task("new", vec![on_port("web")]));
    wait_event(&harness.engine, &new, None, "RUNNING", DEADLINE);
    let old_info = harness.inspect(&old, "web");
    let new_info = harness.inspect(&new, "web");
    assert!(!old_info.state.running);
    assert!(new_info.state.running);
    assert!(
        started_at(&new_info) > finished_at(&old_info),
        "the replacement started before the old container finished"
    );
    assert!(
        new_info
            .ports
            .iter()
            .any(|binding| binding.host_port == port),
        "the replacement holds host port {port}: {:?}",
        new_info.ports
    );
    harness.engine.stop(&new).expect("stop accepted");
    wait_event(&harness.engine, &new, None, "STOPPED", DEADLINE);
}

#[test]
fn a_published_port_is_reported_once_unless_ipv6_bindings_are_asked_for() {
    // Docker 20.10.6 and later publish a port on every address twice when IPv6 is on (host IP
    // `0.0.0.0` and `::`); whether this host's Docker does is read from its own inspect, and
    // the engine's record and every view built on it must show the `::` twin only when
    // ECS_EXCLUDE_IPV6_PORTBINDING is false.
    for exclude in [true, false] {
        let Some(harness) =
            DockerHarness::configured("a_published_port_is_reported_once", |config| {
                config.exclude_ipv6_port_bindings = exclude;
            })
        else {
            return;
        };
        let mut definition = serving("web");
        // No host port: Docker picks one, the same for both families.
        definition.port_mappings = vec![deckhand::task::PortMapping {
            container_port: 8080,
            host_port: None,
            protocol: deckhand::task::Protocol::Tcp,
            container_port_range: None,
        }];
        let id = harness.submit(task("ports", vec![definition]));
        wait_event(&harness.engine, &id, None, "RUNNING", DEADLINE);
        let docker_ports = harness.inspect(&id, "web").ports;
        let docker_has_twins = docker_ports
            .iter()
            .any(|binding| deckhand::ports::is_ipv6_twin(binding, &docker_ports));
        eprintln!(
            "exclude={exclude}: Docker reports {docker_ports:?} (IPv6 twins: {docker_has_twins})"
        );
        let snapshot = harness.snapshot(&id);
        let recorded = &snapshot.containers[0].ports;
        assert_eq!(
            recorded,
            &deckhand::ports::reported_port_bindings(&docker_ports, exclude),
            "exclude={exclude}"
        );
        let shown_ipv6 = |view: &serde_json::Value| view.to_string().contains("\"::\"");
        let metadata = deckhand::api::views::task_metadata(&snapshot, &harness.cluster);
        let introspection = deckhand::api::views::introspection_task(&snapshot);
        if exclude {
            assert_eq!(
                recorded.len(),
                1,
                "one binding for one published port: {recorded:?}"
            );
            assert!(
                recorded.iter().all(|binding| binding.host_ip != "::"),
                "{recorded:?}"
            );
            assert!(
                !shown_ipv6(&metadata),
                "inspect shows no IPv6 twin: {metadata}"
            );
            assert!(
                !shown_ipv6(&introspection),
                "introspection shows no IPv6 twin: {introspection}"
            );
        } else if docker_has_twins {
            assert_eq!(recorded.len(), 2, "both families: {recorded:?}");
            assert!(shown_ipv6(&metadata), "inspect shows both: {metadata}");
        }
        harness.engine.stop(&id).expect("stop accepted");
        wait_event(&harness.engine, &id, None, "STOPPED", DEADLINE);
    }
}
