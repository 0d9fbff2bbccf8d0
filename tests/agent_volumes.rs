//! Task volumes in the whole agent on real Docker: a task volume without a host path is a Docker
//! volume of that task alone, shared by its containers, and removed with the task at cleanup.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;

use agent_support::{Agent, AgentOptions};
use deckhand::engine::container_spec::task_volume_name;

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
