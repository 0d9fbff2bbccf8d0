//! Task definitions for engine tests, built directly as model values so the engine tests do not
//! depend on the JSON parser.

#![allow(dead_code)]

use deckhand::task::{
    ContainerDefinition, Dependency, DependencyCondition, HealthCheck, NetworkMode, TaskDefinition,
};

/// An essential container running `image` with no command.
pub fn container(name: &str, image: &str) -> ContainerDefinition {
    ContainerDefinition::new(name, image)
}

pub fn non_essential(mut definition: ContainerDefinition) -> ContainerDefinition {
    definition.essential = false;
    definition
}

pub fn depends_on(
    mut definition: ContainerDefinition,
    on: &str,
    condition: DependencyCondition,
) -> ContainerDefinition {
    definition.depends_on.push(Dependency {
        container_name: on.to_string(),
        condition,
    });
    definition
}

pub fn with_command(mut definition: ContainerDefinition, command: &[&str]) -> ContainerDefinition {
    definition.command = Some(command.iter().map(|part| part.to_string()).collect());
    definition
}

pub fn with_health_check(mut definition: ContainerDefinition, shell: &str) -> ContainerDefinition {
    definition.health_check = Some(HealthCheck {
        command: vec!["CMD-SHELL".to_string(), shell.to_string()],
        interval_secs: 1,
        timeout_secs: 1,
        retries: 3,
        start_period_secs: 0,
    });
    definition
}

pub fn task(family: &str, containers: Vec<ContainerDefinition>) -> TaskDefinition {
    TaskDefinition {
        roles: Default::default(),
        family: family.to_string(),
        revision: 1,
        network_mode: NetworkMode::Bridge,
        cpu: None,
        memory_mib: None,
        volumes: Vec::new(),
        containers,
        pid_mode: None,
        ipc_mode: None,
    }
}

/// The scale workload's task: `db`, then `app` once `db` started, and a `sidecar`, all serving
/// until stopped (the P4 bench and the per-task memory measurement use the same one).
pub fn three_container_task(index: usize, image: &str) -> TaskDefinition {
    let serve = ["serve"];
    task(
        &format!("scale-{index}"),
        vec![
            with_command(container("db", image), &serve),
            depends_on(
                with_command(container("app", image), &serve),
                "db",
                DependencyCondition::Start,
            ),
            with_command(container("sidecar", image), &serve),
        ],
    )
}
