//! Task volumes in the whole agent on real Docker: a task volume without a host path is a Docker
//! volume of that task alone, shared by its containers, and removed with the task at cleanup;
//! `dockerVolumeConfiguration` volumes — a task-scoped one with driver options exists while the
//! task runs and is removed at cleanup, a `shared` autoprovisioned one carries data from a task
//! to the task that replaces it, and a shared one that exists with other labels or is missing
//! without autoprovision stops the task with a reason that says so. Every volume a test makes
//! has a unique name and is removed by the test.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;

use agent_support::{Agent, AgentOptions};
use deckhand::docker::DockerClient;
use deckhand::engine::container_spec::{task_volume_name, LABEL_TASK_ARN};
use deckhand::runtime::{ContainerRuntime, CreateVolume};
use std::collections::BTreeMap;

fn agent_with_quick_cleanup(docker: DockerClient) -> Agent {
    Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env: vec![("ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION".into(), "1s".into())],
        },
    )
}

/// Removes a shared volume a test made (or made the agent make) when the test ends, whatever
/// its outcome.
struct SharedVolume {
    name: String,
    docker: DockerClient,
}

impl SharedVolume {
    fn new(docker: &DockerClient, role: &str) -> SharedVolume {
        SharedVolume {
            name: format!("dh-test-{role}-{}", docker_support::unique_id()),
            docker: docker.clone(),
        }
    }
}

impl Drop for SharedVolume {
    fn drop(&mut self) {
        if let Err(error) = self.docker.remove_volume(&self.name) {
            eprintln!("cannot remove test volume {}: {error}", self.name);
        }
    }
}

fn one_container_task(family: &str, volume: &str, configuration: &str, command: &str) -> String {
    format!(
        r#"{{"family": "{family}",
            "volumes": [{{"name": "{volume}", "dockerVolumeConfiguration": {configuration}}}],
            "containerDefinitions": [
              {{"name": "app", "image": "{image}", "essential": true, "stopTimeout": 1,
                "command": ["sh", "-c", {command}],
                "mountPoints": [{{"sourceVolume": "{volume}", "containerPath": "/data"}}]}}
            ]}}"#,
        image = docker_support::TEST_IMAGE,
        command = serde_json::Value::String(command.to_string()),
    )
}

#[test]
fn a_task_volume_is_shared_by_its_containers_and_removed_at_cleanup() {
    let Some(docker) = docker_support::docker_client_or_skip("agent task volumes") else {
        return;
    };
    let agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env: vec![("ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION".into(), "1s".into())],
        },
    );
    // The writer fills the volume and exits 0; the reader starts after it (SUCCESS) and must
    // find the file, then exits with 0 too and so stops the task (it is essential).
    let definition = format!(
        r#"{{"family": "volumes",
            "volumes": [{{"name": "shared"}}],
            "containerDefinitions": [
              {{"name": "writer", "image": "{image}", "essential": false,
                "command": ["sh", "-c", "echo written > /data/file"],
                "mountPoints": [{{"sourceVolume": "shared", "containerPath": "/data"}}]}},
              {{"name": "reader", "image": "{image}", "essential": true,
                "command": ["sh", "-c", "test \"$(cat /data/file)\" = written"],
                "dependsOn": [{{"containerName": "writer", "condition": "SUCCESS"}}],
                "mountPoints": [{{"sourceVolume": "shared", "containerPath": "/data", "readOnly": true}}]}}
            ]}}"#,
        image = docker_support::TEST_IMAGE
    );
    let id = agent.submit(&definition);
    let reader = agent.wait_for_event(|event| {
        event.task == id
            && event.container.as_deref() == Some("reader")
            && event.status == "STOPPED"
    });
    assert_eq!(
        reader.exit_code,
        Some(0),
        "the reader found the writer's file: {reader:?}"
    );
    let volume = task_volume_name(&id, "shared");
    let names = || -> Vec<String> {
        agent
            .docker
            .list_volumes(&[])
            .expect("list volumes")
            .into_iter()
            .map(|summary| summary.name)
            .collect()
    };
    assert!(
        names().contains(&volume),
        "{volume} exists while the task is held"
    );
    agent.wait_for_task_status(&id, "STOPPED");
    // Cleanup (1 s after STOPPED) removes the containers and then the volume.
    agent.wait_for_log(&format!("task {id}: cleaned up and forgotten"));
    assert!(!names().contains(&volume), "{volume} survived the cleanup");
    assert!(agent.containers().is_empty(), "{:?}", agent.containers());
}

#[test]
fn a_shared_autoprovisioned_volume_carries_data_to_the_task_that_replaces_it() {
    let Some(docker) = docker_support::docker_client_or_skip("agent shared volume") else {
        return;
    };
    let volume = SharedVolume::new(&docker, "shared");
    let agent = agent_with_quick_cleanup(docker);
    let configuration = r#"{"scope": "shared", "autoprovision": true, "labels": {"app": "shop"}}"#;
    let first = agent.submit(&one_container_task(
        "shared-writer",
        &volume.name,
        configuration,
        "echo written > /data/file && exec sleep 3600",
    ));
    agent.wait_for_task_status(&first, "RUNNING");
    // The replacement: stop the first, submit the second; it starts once the first stopped.
    let output = agent.cli(&["stop", &first]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let second = agent.submit(&one_container_task(
        "shared-reader",
        &volume.name,
        configuration,
        "test \"$(cat /data/file)\" = written",
    ));
    let reader = agent.wait_for_event(|event| {
        event.task == second
            && event.container.as_deref() == Some("app")
            && event.status == "STOPPED"
    });
    assert_eq!(
        reader.exit_code,
        Some(0),
        "the second task read what the first wrote: {reader:?}"
    );
    for task in [&first, &second] {
        agent.wait_for_log(&format!("task {task}: cleaned up and forgotten"));
    }
    let kept = agent
        .docker
        .inspect_volume(&volume.name)
        .expect("inspect volume")
        .expect("a shared volume outlives its tasks");
    assert_eq!(kept.driver, "local");
    assert_eq!(
        kept.labels,
        BTreeMap::from([("app".to_string(), "shop".to_string())]),
        "deckhand adds no label to a shared volume"
    );
}

#[test]
fn a_task_scoped_volume_with_driver_options_exists_while_the_task_runs_and_not_after() {
    let Some(docker) = docker_support::docker_client_or_skip("agent task-scoped volume") else {
        return;
    };
    let agent = agent_with_quick_cleanup(docker);
    let configuration = r#"{"scope": "task", "driver": "local",
        "driverOpts": {"type": "tmpfs", "device": "tmpfs", "o": "size=4m"},
        "labels": {"app": "shop"}}"#;
    // The container proves the volume is the tmpfs asked for, then keeps running.
    let id = agent.submit(&one_container_task(
        "scoped",
        "scratch",
        configuration,
        "grep -q ' /data tmpfs ' /proc/mounts && touch /data/ok && exec sleep 3600",
    ));
    agent.wait_for_task_status(&id, "RUNNING");
    let name = task_volume_name(&id, "scratch");
    let volume = agent
        .docker
        .inspect_volume(&name)
        .expect("inspect volume")
        .unwrap_or_else(|| panic!("{name} exists while the task runs"));
    assert_eq!(volume.driver, "local");
    assert_eq!(
        volume.options,
        BTreeMap::from([
            ("device".to_string(), "tmpfs".to_string()),
            ("o".to_string(), "size=4m".to_string()),
            ("type".to_string(), "tmpfs".to_string()),
        ])
    );
    assert_eq!(volume.labels.get("app").map(String::as_str), Some("shop"));
    assert_eq!(
        volume.labels.get(LABEL_TASK_ARN),
        Some(&format!(
            "arn:aws:ecs:local:000000000000:task/{}/{id}",
            agent.cluster
        ))
    );
    let output = agent.cli(&["stop", &id]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let app = agent.wait_for_event(|event| {
        event.task == id && event.container.as_deref() == Some("app") && event.status == "STOPPED"
    });
    assert!(
        app.reason.is_none(),
        "the mount check passed and the stop was asked for: {app:?}"
    );
    agent.wait_for_log(&format!("task {id}: cleaned up and forgotten"));
    assert_eq!(
        agent.docker.inspect_volume(&name).expect("inspect volume"),
        None,
        "{name} survived the cleanup"
    );
}

#[test]
fn a_shared_volume_that_is_not_what_the_task_describes_stops_it_with_a_clear_reason() {
    let Some(docker) = docker_support::docker_client_or_skip("agent mismatched volume") else {
        return;
    };
    let existing = SharedVolume::new(&docker, "mismatch");
    let missing = SharedVolume::new(&docker, "missing");
    docker
        .create_volume(&CreateVolume {
            name: existing.name.clone(),
            driver: "local".into(),
            driver_opts: BTreeMap::from([
                ("type".to_string(), "tmpfs".to_string()),
                ("device".to_string(), "tmpfs".to_string()),
            ]),
            labels: BTreeMap::from([("app".to_string(), "other".to_string())]),
        })
        .expect("create the pre-existing volume");
    let agent = agent_with_quick_cleanup(docker);
    // (volume, configuration, words the reason holds)
    let cases = [
        (
            &existing.name,
            r#"{"scope": "shared", "autoprovision": true, "labels": {"app": "shop"},
                "driverOpts": {"type": "tmpfs", "device": "tmpfs"}}"#,
            format!(
                "initialize volume: volume '{}' does not match existing volume labels: \
                 existing: {{\"app\": \"other\"}}, expected: {{\"app\": \"shop\"}}",
                existing.name
            ),
        ),
        (
            &existing.name,
            r#"{"scope": "shared", "autoprovision": true, "labels": {"app": "other"}}"#,
            format!(
                "initialize volume: volume '{}' does not match existing volume options",
                existing.name
            ),
        ),
        (
            &missing.name,
            r#"{"scope": "shared", "autoprovision": false}"#,
            format!(
                "initialize volume: volume detection failed, volume '{}' does not exist and \
                 autoprovision is set to false",
                missing.name
            ),
        ),
    ];
    for (volume, configuration, expected) in cases {
        let id = agent.submit(&one_container_task(
            "mismatch",
            volume,
            configuration,
            "exec sleep 3600",
        ));
        let app = agent.wait_for_event(|event| {
            event.task == id
                && event.container.as_deref() == Some("app")
                && event.status == "STOPPED"
        });
        let reason = app.reason.clone().unwrap_or_default();
        assert!(
            reason.contains(&expected),
            "expected {expected:?} in {reason:?}"
        );
        agent.wait_for_task_status(&id, "STOPPED");
    }
    assert!(
        agent.containers().is_empty(),
        "no container was created: {:?}",
        agent.containers()
    );
    let kept = agent
        .docker
        .inspect_volume(&existing.name)
        .expect("inspect")
        .expect("the pre-existing volume is left as it was");
    assert_eq!(kept.labels.get("app").map(String::as_str), Some("other"));
    assert_eq!(
        agent.docker.inspect_volume(&missing.name).expect("inspect"),
        None,
        "a volume without autoprovision is never made"
    );
}
