//! What the telemetry session reports, decided from the engine's task snapshot (pure): which
//! containers are sampled, each ECS task's container metrics from the usage windows, the
//! health of the containers with a health check, and the Docker runtime check's status with
//! its times (the ECS agent's `dockerRuntimeHealthcheck`). Only tasks ECS placed here count:
//! local tasks (`tasks.d`, the local API) have no ARN ECS knows.

use super::messages::{
    ContainerHealth, ContainerMetric, InstanceCheckStatus, InstanceStatus, TaskHealth, TaskMetric,
    CONTAINER_RUNTIME_CHECK,
};
use super::window::{ContainerKey, UsageWindows};
use crate::control::ecs::reporter::ecs_arn;
use crate::task::{ContainerStatus, Millis, Task};

/// The containers to sample: the running containers (with a Docker id) of ECS's tasks, the
/// sandbox of an awsvpc task left out (ECS does not know it).
pub fn sampled_containers(tasks: &[Task]) -> Vec<ContainerKey> {
    let mut keys = Vec::new();
    for task in tasks {
        let Some(arn) = ecs_arn(task) else { continue };
        for container in &task.containers {
            if !container.kind.is_normal() || container.known_status != ContainerStatus::Running {
                continue;
            }
            if let Some(docker_id) = &container.docker_id {
                keys.push((
                    arn.to_string(),
                    container.name().to_string(),
                    docker_id.clone(),
                ));
            }
        }
    }
    keys
}

/// The task metrics to publish, taking each sampled container's window; a task none of whose
/// containers has a full window yet is left out.
pub fn task_metrics(tasks: &[Task], windows: &mut UsageWindows) -> Vec<TaskMetric> {
    let keys = sampled_containers(tasks);
    let mut metrics: Vec<TaskMetric> = Vec::new();
    for task in tasks {
        let Some(arn) = ecs_arn(task) else { continue };
        let containers: Vec<ContainerMetric> = keys
            .iter()
            .filter(|(task_arn, _, _)| task_arn == arn)
            .filter_map(|key| {
                let (cpu, memory) = windows.take(key)?;
                Some(ContainerMetric {
                    container_name: key.1.clone(),
                    cpu,
                    memory,
                })
            })
            .collect();
        if !containers.is_empty() {
            metrics.push(TaskMetric {
                task_arn: arn.to_string(),
                family: task.family.clone(),
                version: task.revision.to_string(),
                containers,
            });
        }
    }
    metrics
}

/// The health of every running container of ECS's tasks that has a health check; `since` is
/// when its status last changed (now when Docker has not said yet, as the ECS agent does).
pub fn task_healths(tasks: &[Task], now: Millis) -> Vec<TaskHealth> {
    tasks
        .iter()
        .filter_map(|task| {
            let arn = ecs_arn(task)?;
            let containers: Vec<ContainerHealth> = task
                .containers
                .iter()
                .filter(|container| {
                    container.known_status == ContainerStatus::Running
                        && has_health_check(&container.definition.health_check)
                })
                .map(|container| ContainerHealth {
                    container_name: container.name().to_string(),
                    status: container.health,
                    since: container.health_since.unwrap_or(now),
                    output: container.health_output.clone(),
                })
                .collect();
            (!containers.is_empty()).then(|| TaskHealth {
                task_arn: arn.to_string(),
                family: task.family.clone(),
                version: task.revision.to_string(),
                containers,
            })
        })
        .collect()
}

/// A health check Docker runs (`NONE` turns the image's off).
fn has_health_check(check: &Option<crate::task::HealthCheck>) -> bool {
    check
        .as_ref()
        .is_some_and(|check| check.command.first().map(String::as_str) != Some("NONE"))
}

/// The Docker runtime check: its status and when it last ran and last changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeCheck {
    status: InstanceCheckStatus,
    last_updated: Millis,
    last_status_change: Millis,
}

impl RuntimeCheck {
    /// Not run yet: `INITIALIZING` since `now`.
    pub fn new(now: Millis) -> RuntimeCheck {
        RuntimeCheck {
            status: InstanceCheckStatus::Initializing,
            last_updated: now,
            last_status_change: now,
        }
    }

    /// Records one run: Docker answered its ping (`OK`) or did not (`IMPAIRED`).
    pub fn record(&mut self, docker_answered: bool, now: Millis) {
        let status = if docker_answered {
            InstanceCheckStatus::Ok
        } else {
            InstanceCheckStatus::Impaired
        };
        if status != self.status {
            self.last_status_change = now;
        }
        self.status = status;
        self.last_updated = now;
    }

    pub fn status(&self) -> InstanceStatus {
        InstanceStatus {
            check_type: CONTAINER_RUNTIME_CHECK.to_string(),
            status: self.status,
            last_updated: self.last_updated,
            last_status_change: self.last_status_change,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::window::Reading;
    use super::*;
    use crate::task::{
        ContainerDefinition, ContainerKind, HealthCheck, HealthStatus, NetworkMode, TaskDefinition,
    };
    use std::time::{Duration, Instant};

    fn container(name: &str, check: Option<&str>) -> ContainerDefinition {
        let mut definition = ContainerDefinition::new(name, "busybox");
        definition.health_check = check.map(|command| HealthCheck {
            command: vec![command.into(), "true".into()],
            interval_secs: 30,
            timeout_secs: 5,
            retries: 3,
            start_period_secs: 0,
        });
        definition
    }

    /// A task with containers `(name, status, docker id, health check command)`.
    fn task(
        source: Option<&str>,
        containers: &[(&str, ContainerStatus, Option<&str>, Option<&str>)],
    ) -> Task {
        let definition = TaskDefinition {
            roles: Default::default(),
            family: "web".into(),
            revision: 4,
            network_mode: NetworkMode::Bridge,
            cpu: None,
            memory_mib: None,
            volumes: Vec::new(),
            containers: containers
                .iter()
                .map(|(name, _, _, check)| container(name, *check))
                .collect(),
            pid_mode: None,
            ipc_mode: None,
        };
        let mut task = Task::new(
            "0123456789abcdef0123456789abcdef".into(),
            "edge",
            definition,
            1,
            0,
        );
        task.source = source.map(str::to_string);
        for (container, (_, status, id, _)) in task.containers.iter_mut().zip(containers) {
            container.known_status = *status;
            container.docker_id = id.map(str::to_string);
        }
        task
    }

    const ARN: &str = "arn:aws:ecs:us-west-2:123456789012:task/edge/abc";

    #[test]
    fn only_running_containers_of_ecs_tasks_are_sampled() {
        use ContainerStatus::{Running, Stopped};
        let mut sandboxed = task(
            Some(&format!("ecs:{ARN}")),
            &[("app", Running, Some("aa"), None)],
        );
        sandboxed.containers[0].kind = ContainerKind::Sandbox;
        let table: Vec<(Task, Vec<&str>)> = vec![
            (
                task(
                    Some(&format!("ecs:{ARN}")),
                    &[
                        ("app", Running, Some("aa"), None),
                        ("db", Stopped, Some("bb"), None),
                        ("new", Running, None, None),
                    ],
                ),
                vec!["app"],
            ),
            (task(None, &[("app", Running, Some("aa"), None)]), vec![]),
            (
                task(
                    Some("tasks.d:web.json:1"),
                    &[("app", Running, Some("aa"), None)],
                ),
                vec![],
            ),
            (sandboxed, vec![]),
        ];
        for (task, expected) in table {
            let names: Vec<String> = sampled_containers(std::slice::from_ref(&task))
                .into_iter()
                .map(|key| key.1)
                .collect();
            assert_eq!(names, expected, "{:?}", task.source);
        }
    }

    #[test]
    fn task_metrics_take_the_windows_of_the_running_containers() {
        use ContainerStatus::Running;
        let tasks = vec![task(
            Some(&format!("ecs:{ARN}")),
            &[
                ("app", Running, Some("aa"), None),
                ("db", Running, Some("bb"), None),
            ],
        )];
        let mut windows = UsageWindows::new(1);
        let start = Instant::now();
        let keys = sampled_containers(&tasks);
        for (round, cpu) in [(0u64, 1.0), (10, 2.0)] {
            let readings = keys
                .iter()
                .map(|key| {
                    let reading = Reading {
                        cpu_seconds: Some(cpu),
                        memory_bytes: Some(1 << 20),
                    };
                    // The database has no memory reading: it has no full window.
                    let reading = if key.1 == "db" {
                        Reading {
                            memory_bytes: None,
                            ..reading
                        }
                    } else {
                        reading
                    };
                    (key.clone(), reading)
                })
                .collect();
            windows.record(readings, start + Duration::from_secs(round));
        }
        let metrics = task_metrics(&tasks, &mut windows);
        assert_eq!(metrics.len(), 1);
        assert_eq!(
            (
                metrics[0].task_arn.as_str(),
                metrics[0].family.as_str(),
                metrics[0].version.as_str()
            ),
            (ARN, "web", "4")
        );
        let names: Vec<&str> = metrics[0]
            .containers
            .iter()
            .map(|c| c.container_name.as_str())
            .collect();
        assert_eq!(names, ["app"]);
        assert_eq!(metrics[0].containers[0].cpu.sum, 10.0);
        assert!(
            task_metrics(&tasks, &mut windows).is_empty(),
            "windows are taken once"
        );
    }

    #[test]
    fn health_lists_running_containers_with_a_check() {
        use ContainerStatus::{Running, Stopped};
        let mut ecs = task(
            Some(&format!("ecs:{ARN}")),
            &[
                ("app", Running, Some("aa"), Some("CMD-SHELL")),
                ("plain", Running, Some("bb"), None),
                ("off", Running, Some("cc"), Some("NONE")),
                ("gone", Stopped, Some("dd"), Some("CMD")),
            ],
        );
        ecs.containers[0].health = HealthStatus::Healthy;
        ecs.containers[0].health_since = Some(1_000);
        ecs.containers[0].health_output = Some("fine".into());
        let local = task(None, &[("app", Running, Some("ee"), Some("CMD"))]);
        let healths = task_healths(&[ecs.clone(), local], 9_000);
        assert_eq!(healths.len(), 1);
        assert_eq!(
            healths[0].containers,
            [ContainerHealth {
                container_name: "app".into(),
                status: HealthStatus::Healthy,
                since: 1_000,
                output: Some("fine".into())
            }]
        );
        ecs.containers[0].health_since = None;
        assert_eq!(
            task_healths(&[ecs], 9_000)[0].containers[0].since,
            9_000,
            "not known yet: now"
        );
    }

    #[test]
    fn the_runtime_check_moves_its_change_time_only_on_a_change() {
        let mut check = RuntimeCheck::new(100);
        assert_eq!(check.status().status, InstanceCheckStatus::Initializing);
        // (time, Docker answered, status, last updated, last change)
        let table = [
            (200, true, InstanceCheckStatus::Ok, 200, 200),
            (300, true, InstanceCheckStatus::Ok, 300, 200),
            (400, false, InstanceCheckStatus::Impaired, 400, 400),
            (500, true, InstanceCheckStatus::Ok, 500, 500),
        ];
        for (now, answered, status, updated, changed) in table {
            check.record(answered, now);
            let got = check.status();
            assert_eq!(
                (got.status, got.last_updated, got.last_status_change),
                (status, updated, changed),
                "{now}"
            );
            assert_eq!(got.check_type, "ContainerRuntime");
        }
    }
}
