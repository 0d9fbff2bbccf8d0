//! §4 "pull credentials": a container whose pull needs the task's execution role — an image in
//! ECR, of a task with an execution-role credentials id (what ECS calls pulling with the
//! execution role) — does not pull while those credentials are not in the store (after a
//! restart, until ECS sends them again). It is blocked, never terminal: the task waits for a
//! message (at most [`PULL_CREDENTIALS_WAIT`]) and checks again, as often as it takes.
//!
//! Pure: whether the credentials are there is an input (the task's thread reads the store).

use crate::registry::ecr::parse_ecr_image;
use crate::task::{ContainerStatus, Task};
use std::time::Duration;

/// How long a task whose only step left is a pull waiting for its execution-role credentials
/// waits for a message before it checks again (ECS: `waitForPullCredentialsTimeout`).
pub const PULL_CREDENTIALS_WAIT: Duration = Duration::from_secs(60);

/// The reason a pull waits, as the task's log line says it.
pub const PULL_CREDENTIALS_REASON: &str =
    "its ECR image is pulled with the task's execution role, whose credentials have not arrived";

/// Whether container `index`'s pull waits for the task's execution-role credentials:
/// known < PULLED, desired < STOPPED, its image in ECR, the task with an execution-role
/// credentials id and `execution_credentials_present` false.
///
/// Panics if `index` is out of range: the caller iterates over the task's own containers.
pub fn pull_waits_for_execution_credentials(
    task: &Task,
    index: usize,
    execution_credentials_present: bool,
) -> bool {
    let container = &task.containers[index];
    !execution_credentials_present
        && task.credentials_ids.execution_role.is_some()
        && container.known_status < ContainerStatus::Pulled
        && container.desired_status < ContainerStatus::Stopped
        && parse_ecr_image(&container.definition.image).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{ContainerDefinition, TaskDefinition};

    const ECR: &str = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/app:1";

    fn task(image: &str, execution_role: Option<&str>) -> Task {
        let definition = TaskDefinition {
            family: "pull".into(),
            revision: 1,
            network_mode: Default::default(),
            cpu: None,
            memory_mib: None,
            volumes: Vec::new(),
            containers: vec![ContainerDefinition::new("app", image)],
            pid_mode: None,
            ipc_mode: None,
            roles: Default::default(),
        };
        let mut task = Task::new(
            "0123456789abcdef0123456789abcdef".into(),
            "default",
            definition,
            1,
            0,
        );
        task.credentials_ids.execution_role = execution_role.map(str::to_string);
        task
    }

    #[test]
    fn an_ecr_pull_of_a_task_with_an_execution_role_waits_for_its_credentials() {
        use ContainerStatus::*;
        // (image, execution role id, credentials present, known, desired, waits)
        type Case<'a> = (
            &'a str,
            Option<&'a str>,
            bool,
            ContainerStatus,
            ContainerStatus,
            bool,
        );
        let table: &[Case] = &[
            (ECR, Some("exec"), false, None, Running, true),
            (ECR, Some("exec"), false, None, Created, true),
            (ECR, Some("exec"), true, None, Running, false),
            // Pulled already (a restored task): nothing left to pull.
            (ECR, Some("exec"), false, Pulled, Running, false),
            (ECR, Some("exec"), false, Created, Running, false),
            (ECR, Some("exec"), false, Running, Running, false),
            // On its way to STOPPED: it stops without waiting.
            (ECR, Some("exec"), false, None, Stopped, false),
            // No execution role: the host's credentials, at once.
            (ECR, Option::None, false, None, Running, false),
            // Not in ECR: the execution role plays no part.
            ("test/app:1", Some("exec"), false, None, Running, false),
            (
                "registry.example.com/app:1",
                Some("exec"),
                false,
                None,
                Running,
                false,
            ),
            (
                "123456789012.dkr.ecr.us-west-2.example.com/app:1",
                Some("exec"),
                false,
                None,
                Running,
                false,
            ),
        ];
        for (image, role, present, known, desired, waits) in table {
            let mut task = task(image, *role);
            task.containers[0].known_status = *known;
            task.containers[0].desired_status = *desired;
            assert_eq!(
                pull_waits_for_execution_credentials(&task, 0, *present),
                *waits,
                "{image} {role:?} present={present} {known:?}→{desired:?}"
            );
        }
    }
}
