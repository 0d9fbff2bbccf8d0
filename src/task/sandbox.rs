//! The sandbox of an `awsvpc` task: one small container deckhand adds to the task, that holds
//! the task's network namespace on Docker's bridge and publishes the task's ports, and that every
//! other container of the task joins (`container:<sandbox>`), so they reach each other on
//! `localhost` as on Fargate. It is ECS's pause container, under ECS's name.
//!
//! Pure: what the sandbox is in the model. Its image is made on the host by the engine
//! (`engine::sandbox_image`), never pulled.

use crate::task::{Container, ContainerDefinition, ContainerKind, Dependency, DependencyCondition};

/// The sandbox's container name, as ECS names its pause container.
pub const SANDBOX_CONTAINER_NAME: &str = "~internal~ecs~pause";

/// The image the sandbox runs: made by deckhand on the host from a program it carries. The tag
/// changes whenever that program does.
pub const SANDBOX_IMAGE_REPOSITORY: &str = "deckhand/sandbox";
pub const SANDBOX_IMAGE_TAG: &str = "1";
pub const SANDBOX_IMAGE: &str = "deckhand/sandbox:1";

/// The program inside the sandbox image: it waits for a signal and exits 0 on SIGTERM or SIGINT.
pub const SANDBOX_PROGRAM: &str = "/pause";

/// The sandbox's definition: essential (the task has no network without it), running the pause
/// program, nothing else asked.
pub fn sandbox_definition() -> ContainerDefinition {
    let mut definition = ContainerDefinition::new(SANDBOX_CONTAINER_NAME, SANDBOX_IMAGE);
    definition.entry_point = Some(vec![SANDBOX_PROGRAM.to_string()]);
    definition
}

/// Adds the sandbox to an `awsvpc` task's containers, last, and makes every other container
/// wait for it to run (and so stop before it, §4's shutdown order).
pub fn add_sandbox(containers: &mut Vec<Container>) {
    if containers.iter().any(Container::is_sandbox) {
        return;
    }
    for container in containers.iter_mut() {
        let depends = &mut std::sync::Arc::make_mut(&mut container.definition).depends_on;
        if !depends
            .iter()
            .any(|dependency| dependency.container_name == SANDBOX_CONTAINER_NAME)
        {
            depends.push(Dependency {
                container_name: SANDBOX_CONTAINER_NAME.to_string(),
                condition: DependencyCondition::Start,
            });
        }
    }
    let mut sandbox = Container::new(sandbox_definition());
    sandbox.kind = ContainerKind::Sandbox;
    containers.push(sandbox);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{NetworkMode, Task, TaskDefinition};

    fn definition(network_mode: NetworkMode) -> TaskDefinition {
        TaskDefinition {
            roles: Default::default(),
            family: "web".into(),
            revision: 1,
            network_mode,
            cpu: None,
            memory_mib: None,
            volumes: Vec::new(),
            containers: vec![
                ContainerDefinition::new("web", "busybox"),
                ContainerDefinition::new("sidecar", "busybox"),
            ],
            pid_mode: None,
            ipc_mode: None,
        }
    }

    #[test]
    fn an_awsvpc_task_gets_one_sandbox_that_every_container_waits_for() {
        let task = Task::new("t".into(), "default", definition(NetworkMode::Awsvpc), 1, 0);
        let names: Vec<&str> = task.containers.iter().map(Container::name).collect();
        assert_eq!(names, ["web", "sidecar", SANDBOX_CONTAINER_NAME]);
        let sandbox = task.sandbox().expect("a sandbox");
        assert!(sandbox.essential());
        assert_eq!(sandbox.definition.image, SANDBOX_IMAGE);
        for container in &task.containers[..2] {
            assert_eq!(
                container.definition.depends_on,
                vec![Dependency {
                    container_name: SANDBOX_CONTAINER_NAME.into(),
                    condition: DependencyCondition::Start,
                }]
            );
        }
        // Adding again (a restore) changes nothing.
        let mut containers = task.containers.clone();
        add_sandbox(&mut containers);
        assert_eq!(containers, task.containers);
    }

    #[test]
    fn other_network_modes_get_no_sandbox() {
        for mode in [NetworkMode::Bridge, NetworkMode::Host, NetworkMode::None] {
            let task = Task::new("t".into(), "default", definition(mode), 1, 0);
            assert!(task.sandbox().is_none(), "{mode:?}");
            assert_eq!(task.containers.len(), 2);
        }
    }

    #[test]
    fn a_sandbox_is_saved_with_its_kind_and_a_normal_container_without() {
        let task = Task::new("t".into(), "default", definition(NetworkMode::Awsvpc), 1, 0);
        let saved = serde_json::to_value(&task).expect("serializable");
        assert_eq!(saved["containers"][2]["kind"], "sandbox");
        assert!(saved["containers"][0].get("kind").is_none());
        let loaded: Task = serde_json::from_value(saved).expect("loads");
        assert_eq!(loaded, task);
    }
}
