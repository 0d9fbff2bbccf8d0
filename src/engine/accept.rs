//! Acceptance: how the engine takes a command. A submit is numbered, named, checked and saved
//! before it answers, queued for host resources (or refused when it can never fit, §9a), and
//! its task's thread started; a stop is numbered and registered in the
//! wait group under the command lock, then acknowledged once the task's own thread saved it
//! (docs/ENGINE.md §9, §11). `TaskEngine`'s side of [`EngineHandle`].

use crate::clock::now_millis;
use crate::engine::container_spec::{
    as_if_gpus_given, assign_docker_names, assign_metadata_tokens, create_request, new_task_id,
    random_hex,
};
use crate::engine::firelens::check_task;
use crate::engine::handle::{find_by_metadata_token, EngineError, EngineHandle};
use crate::engine::managed_task::{DesiredCommand, OwnerCommand};
use crate::engine::shared::{Commands, TaskHandle};
use crate::engine::task_engine::EngineConfig;
use crate::engine::task_engine::{new_inboxes, TaskEngine};
use crate::report::Event;
use crate::role_credentials::local::LocalRole;
use crate::role_credentials::{new_credentials_id, RoleType};
use crate::task::{
    NetworkMode, RoleCredentialsIds, Task, TaskDefinition, TaskRoleArns, TaskStatus,
    ECS_SOURCE_PREFIX,
};
use crossbeam_channel::bounded;
use std::time::Duration;

impl TaskEngine {
    /// Accepts a task (see [`EngineHandle::submit`]) with the control source's mark, which is
    /// part of the checkpoint that makes it durable.
    fn submit_with_source(
        &self,
        definition: TaskDefinition,
        source: Option<String>,
        arn: Option<String>,
        credentials_ids: RoleCredentialsIds,
    ) -> Result<Task, EngineError> {
        let mut commands = self.shared.commands();
        if commands.shutting_down {
            return Err(EngineError::ShuttingDown);
        }
        let id = match arn.as_deref().and_then(task_id_of_arn) {
            Some(id) if !commands.tasks.contains_key(id) => id.to_string(),
            _ => new_task_id().map_err(|error| unavailable("cannot make a task id", error))?,
        };
        // One name and token per container of the task, its sandbox included.
        let containers = definition.containers.len()
            + usize::from(definition.network_mode == NetworkMode::Awsvpc);
        let suffixes = (0..containers)
            .map(|_| random_hex(8))
            .collect::<std::io::Result<Vec<String>>>()
            .map_err(|error| unavailable("cannot make container names", error))?;
        let tokens = (0..containers)
            .map(|_| random_hex(16))
            .collect::<std::io::Result<Vec<String>>>()
            .map_err(|error| unavailable("cannot make task metadata tokens", error))?;
        let credentials_ids = match (&arn, &self.shared.config.local_roles) {
            (None, Some(_)) => local_credentials_ids(&definition.roles)
                .map_err(|error| unavailable("cannot make credentials ids", error))?,
            _ => credentials_ids,
        };
        let sequence = self.next_sequence(&commands)?;
        let mut task = Task::new(
            id.clone(),
            &self.shared.config.cluster,
            definition,
            sequence,
            now_millis(),
        );
        task.source = source;
        if let Some(arn) = arn {
            task.arn = arn;
        }
        task.credentials_ids = credentials_ids;
        let mut suffixes = suffixes.into_iter();
        assign_docker_names(&mut task, || suffixes.next().unwrap_or_default());
        let mut tokens = tokens.into_iter();
        assign_metadata_tokens(&mut task, || tokens.next().unwrap_or_default());
        self.reject_if_invalid(&task)?;
        // A task bigger than the host, or on a reserved port, would wait forever (§9a).
        if let Some(reason) = self.shared.host_resources.refusal(&task) {
            return Err(EngineError::Rejected { reason });
        }
        // Durable before it is acknowledged, with its containers' fixed names.
        self.shared
            .checkpoint(&task)
            .map_err(|error| unavailable("cannot save the task", error))?;

        // Its credentials ids are known (503 until the credentials arrive) before any of its
        // containers can ask.
        expect_credentials(&self.shared.config, &task);
        let (desired_sender, shutdown_sender, inboxes) = new_inboxes();
        let route = inboxes.route.clone();
        self.shared.publish_snapshot(&task);
        // Its place in the host-resource queue is its start number's, taken under the command
        // lock like the number itself, before its thread can ask whether it is admitted.
        self.shared.host_resources.enqueue(&task);
        let thread = self
            .spawn_task(task.clone(), None, false, inboxes)
            .map_err(|error| {
                self.shared.host_resources.release(&id);
                self.shared.snapshots().remove(&id);
                if let Some(store) = &self.shared.store {
                    let _ = store.delete_task(&id);
                }
                unavailable("cannot start the task's thread", error)
            })?;
        commands.last_sequence = sequence;
        commands.tasks.insert(
            id.clone(),
            TaskHandle {
                desired: desired_sender,
                shutdown: shutdown_sender,
                stop_registered: false,
                thread: Some(thread),
                route,
            },
        );
        log::info!(
            "task {id}: accepted {}:{} with sequence number {sequence}",
            task.family,
            task.revision
        );
        for warning in task.ignored_role_warnings() {
            log::warn!("task {id}: {warning}");
        }
        Ok(task)
    }

    /// The next command sequence number: durable before it is used when there is a store.
    fn next_sequence(&self, commands: &Commands) -> Result<u64, EngineError> {
        match &self.shared.store {
            Some(store) => store
                .next_sequence()
                .map_err(|error| unavailable("cannot save the sequence counter", error)),
            None => Ok(commands.last_sequence + 1),
        }
    }

    fn reject_if_invalid(&self, task: &Task) -> Result<(), EngineError> {
        if self.shared.config.disable_privileged {
            if let Some(container) = task.containers.iter().find(|c| c.definition.privileged) {
                return Err(EngineError::Rejected {
                    reason: format!(
                        "container {:?} is privileged, and privileged containers are disabled on this host (ECS_DISABLE_PRIVILEGED)",
                        container.name()
                    ),
                });
            }
        }
        // GPU ids are handed out at admission: the creates are checked as if they were.
        let given;
        let checked = if task.containers.iter().any(|c| c.definition.gpus > 0) {
            given = as_if_gpus_given(task);
            &given
        } else {
            task
        };
        for index in 0..task.containers.len() {
            create_request(checked, index, &self.shared.config.cluster)
                .map_err(|reason| EngineError::Rejected { reason })?;
        }
        check_task(
            task,
            &self.shared.config.cluster,
            &self.shared.config.firelens(),
        )
        .map_err(|reason| EngineError::Rejected { reason })?;
        self.reject_if_secrets_missing(task)
    }

    /// A task whose secrets (`secrets`, `secretOptions`, `repositoryCredentials`) the local
    /// secret store cannot answer would fail at its first create: refused now, naming every
    /// missing reference (or the store's problem). The store is read again at each create.
    /// A task with an execution role, on an engine that reaches AWS, is let through: SSM and
    /// Secrets Manager answer what the store lacks at the create (and name what they lack).
    fn reject_if_secrets_missing(&self, task: &Task) -> Result<(), EngineError> {
        let wanted: Vec<&str> = task
            .containers
            .iter()
            .flat_map(|container| container.definition.secret_references())
            .collect();
        let aws_answers = self.shared.config.execution_role.is_some()
            && task.credentials_ids.execution_role.is_some();
        if wanted.is_empty() || aws_answers {
            return Ok(());
        }
        let Some(path) = &self.shared.config.secrets_file else {
            return Err(EngineError::Rejected {
                reason: "secrets: the task needs secrets and no secret store is configured \
                         (DECKHAND_SECRETS_FILE)"
                    .to_string(),
            });
        };
        let store = crate::secrets::load(path).map_err(|error| EngineError::Rejected {
            reason: format!("secrets: {error}"),
        })?;
        let missing = store.missing(wanted);
        if missing.is_empty() {
            return Ok(());
        }
        Err(EngineError::Rejected {
            reason: format!(
                "secrets: the secret store {} holds no value for {}",
                path.display(),
                crate::engine::workers::quoted_list(&missing)
            ),
        })
    }
}

impl EngineHandle for TaskEngine {
    fn submit(&self, definition: TaskDefinition) -> Result<Task, EngineError> {
        self.submit_with_source(definition, None, None, RoleCredentialsIds::default())
    }

    fn submit_from_source(
        &self,
        definition: TaskDefinition,
        source: String,
    ) -> Result<Task, EngineError> {
        self.submit_with_source(
            definition,
            Some(source),
            None,
            RoleCredentialsIds::default(),
        )
    }

    fn submit_with_arn(
        &self,
        definition: TaskDefinition,
        arn: String,
        source: String,
        credentials_ids: RoleCredentialsIds,
    ) -> Result<Task, EngineError> {
        self.submit_with_source(definition, Some(source), Some(arn), credentials_ids)
    }

    fn stop(&self, task_id: &str) -> Result<(), EngineError> {
        let owned = self
            .shared
            .snapshots()
            .get(task_id)
            .is_some_and(Task::owned_by_control_plane);
        if owned {
            return Err(EngineError::Conflict {
                reason: format!(
                    "task {task_id} belongs to Amazon ECS: stop it in ECS (the console, or `aws ecs stop-task`), which tells this host"
                ),
            });
        }
        self.stop_from_control_plane(task_id)
    }

    fn stop_from_control_plane(&self, task_id: &str) -> Result<(), EngineError> {
        let mut commands = self.shared.commands();
        if commands.shutting_down {
            return Err(EngineError::ShuttingDown);
        }
        if !commands.tasks.contains_key(task_id) {
            return Err(EngineError::NotFound {
                task: task_id.to_string(),
            });
        }
        let sequence = self.next_sequence(&commands)?;
        let handle = commands
            .tasks
            .get_mut(task_id)
            .ok_or_else(|| EngineError::NotFound {
                task: task_id.to_string(),
            })?;
        let registered = !handle.stop_registered;
        if registered {
            // Registered here, on the accepting thread, before the next command is accepted.
            self.shared.wait_group.add(sequence, 1);
            handle.stop_registered = true;
        }
        let (durable_sender, durable) = bounded(1);
        let command = DesiredCommand {
            status: TaskStatus::Stopped,
            sequence,
            registered,
            durable: self.shared.store.is_some().then_some(durable_sender),
        };
        if handle.desired.send(OwnerCommand::Desired(command)).is_err() && registered {
            // The task's loop is gone (it cannot be: forget() removes the handle first).
            self.shared.wait_group.done(sequence);
        }
        commands.last_sequence = sequence;
        // Wait for the checkpoint without the command lock: the task's thread may need it
        // (to forget itself) before it gets to the stop.
        drop(commands);
        if self.shared.store.is_some() {
            match durable.recv_timeout(self.shared.config.durable_ack_timeout) {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    return Err(unavailable("the stop could not be saved", error));
                }
                // The task finished and was forgotten before it read the stop: it is stopped.
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {}
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    return Err(EngineError::Unavailable {
                        reason: format!(
                            "the stop of task {task_id} was not saved within {}s",
                            self.shared.config.durable_ack_timeout.as_secs()
                        ),
                    });
                }
            }
        }
        log::info!("task {task_id}: stop accepted with sequence number {sequence}");
        Ok(())
    }

    fn container_instance_arn(&self) -> Option<String> {
        self.shared
            .container_instance_arn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn set_container_instance_arn(&self, arn: String) {
        *self
            .shared
            .container_instance_arn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(arn);
    }

    fn control_plane_reported(&self, task_id: &str, status: TaskStatus) {
        let commands = self.shared.commands();
        if let Some(handle) = commands.tasks.get(task_id) {
            // The loop may have ended meanwhile; then there is nothing left to clean.
            let _ = handle
                .desired
                .send(OwnerCommand::ControlPlaneReported(status));
        }
    }

    fn tasks(&self) -> Vec<Task> {
        let mut tasks: Vec<Task> = self.shared.snapshots().values().cloned().collect();
        for task in &mut tasks {
            task.waiting_for = self.shared.host_resources.waiting_reason(&task.id);
        }
        tasks
    }

    fn events_since(&self, after: u64, wait: Duration) -> Vec<Event> {
        self.shared.reporter.events_since(after, wait)
    }

    fn cluster(&self) -> String {
        self.shared.config.cluster.clone()
    }

    fn task_by_metadata_token(&self, token: &str) -> Option<(Task, String)> {
        // Only the matching task is copied out of the snapshots.
        let snapshots = self.shared.snapshots();
        let task = snapshots.values().find(|task| {
            task.containers
                .iter()
                .any(|container| container.metadata_token.as_deref() == Some(token))
        })?;
        find_by_metadata_token([task.clone()], token)
    }

    fn container_stats(&self, docker_id: &str) -> Result<serde_json::Value, EngineError> {
        // A read of Docker outside the worker pool: it changes nothing, and queueing it behind
        // pulls would make a container's stats wait for other tasks' downloads.
        self.shared
            .worker_context
            .runtime
            .container_stats(docker_id)
            .map_err(|error| EngineError::Unavailable {
                reason: error.to_string(),
            })
    }

    fn container_logs(
        &self,
        docker_id: &str,
        options: &crate::runtime::LogOptions,
    ) -> Result<crate::runtime::LogStream, EngineError> {
        // Like stats: a read outside the worker pool. A followed log lasts as long as the
        // container runs; it must never hold one of the workers that start and stop tasks.
        self.shared
            .worker_context
            .runtime
            .container_logs(docker_id, options)
            .map_err(|error| EngineError::Unavailable {
                reason: error.to_string(),
            })
    }
}

fn unavailable(what: &str, error: impl std::fmt::Display) -> EngineError {
    EngineError::Unavailable {
        reason: format!("{what}: {error}"),
    }
}

/// The task id in a task ARN (`arn:aws:ecs:<region>:<account>:task/<cluster>/<id>`) when it has
/// the shape of deckhand's own ids (32 lowercase hex characters, as ECS's current ids); `None`
/// for the older UUID-shaped ids, which get an id of deckhand's.
pub fn task_id_of_arn(arn: &str) -> Option<&str> {
    let id = arn.rsplit('/').next()?;
    (id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    .then_some(id)
}

/// Marks each credentials id of `task` as expected in the store (pending until credentials are
/// set; credentials already set stay), and hands a local task's roles to whoever gives them
/// credentials: at acceptance and at restore (the same ids, checkpointed with the task).
pub(crate) fn expect_credentials(config: &EngineConfig, task: &Task) {
    let local = !task
        .source
        .as_deref()
        .is_some_and(|source| source.starts_with(ECS_SOURCE_PREFIX));
    for (role, id) in task.credentials_ids.each() {
        // A STOPPED task's task role is served no more (§2 step 5); its execution role stays
        // until the task is removed.
        if role == RoleType::TaskApplication && task.known_status == TaskStatus::Stopped {
            continue;
        }
        config.role_credentials.expect(&task.arn, role, id);
        let role_arn = match role {
            RoleType::TaskApplication => &task.role_arns.task_role,
            RoleType::TaskExecution => &task.role_arns.execution_role,
        };
        match (local, &config.local_roles, role_arn) {
            (true, Some(local_roles), Some(role_arn)) => local_roles.track(LocalRole {
                task_arn: task.arn.clone(),
                task_id: task.id.clone(),
                role,
                credentials_id: id.to_string(),
                role_arn: role_arn.clone(),
            }),
            // Restored after DECKHAND_TASK_ROLES was turned off: the id stays (its containers
            // know it) and answers 503; inspect and the log say why.
            (true, None, Some(role_arn)) => {
                log::warn!(
                    "task {}: no credentials for its {} {role_arn}: DECKHAND_TASK_ROLES is off \
                     (it was on when the task was accepted)",
                    task.id,
                    role.as_str()
                );
                config.role_credentials.record_failure(
                    &task.arn,
                    role,
                    id,
                    "DECKHAND_TASK_ROLES is off: no credentials are given for this role",
                );
            }
            _ => {}
        }
    }
}

/// A new random credentials id for each role a local task's definition names.
fn local_credentials_ids(roles: &TaskRoleArns) -> std::io::Result<RoleCredentialsIds> {
    let new_id = |arn: &Option<String>| arn.as_ref().map(|_| new_credentials_id()).transpose();
    Ok(RoleCredentialsIds {
        task_role: new_id(&roles.task_role)?,
        execution_role: new_id(&roles.execution_role)?,
    })
}

#[cfg(test)]
mod tests {
    use super::{expect_credentials, local_credentials_ids, task_id_of_arn};
    use crate::engine::task_engine::EngineConfig;
    use crate::role_credentials::local::{LocalRole, LocalRoles};
    use crate::role_credentials::{CredentialsLookup, RoleType};
    use crate::task::{
        ContainerDefinition, NetworkMode, Task, TaskDefinition, TaskRoleArns, ECS_SOURCE_PREFIX,
    };
    use std::sync::{Arc, Mutex};

    #[derive(Debug, Default)]
    struct Recorder(Mutex<Vec<LocalRole>>);

    impl LocalRoles for Recorder {
        fn track(&self, role: LocalRole) {
            self.0.lock().expect("not poisoned").push(role);
        }
    }

    fn task_with_roles() -> Task {
        let definition = TaskDefinition {
            roles: TaskRoleArns {
                task_role: Some("arn:aws:iam::1:role/app".into()),
                execution_role: Some("arn:aws:iam::1:role/exec".into()),
            },
            family: "web".into(),
            revision: 1,
            network_mode: NetworkMode::Bridge,
            cpu: None,
            memory_mib: None,
            volumes: Vec::new(),
            containers: vec![ContainerDefinition::new("app", "busybox")],
            pid_mode: None,
            ipc_mode: None,
        };
        let mut task = Task::new("0123".into(), "c", definition, 1, 0);
        task.credentials_ids = local_credentials_ids(&task.role_arns).expect("urandom");
        task
    }

    #[test]
    fn a_local_task_gets_one_random_id_per_role_it_names() {
        let task = task_with_roles();
        let app = task.credentials_ids.task_role.clone().expect("an id");
        let exec = task.credentials_ids.execution_role.clone().expect("an id");
        assert_eq!((app.len(), exec.len()), (32, 32));
        assert_ne!(app, exec);
        let none = local_credentials_ids(&TaskRoleArns::default()).expect("urandom");
        assert!(none.is_empty());
        let only_exec = local_credentials_ids(&TaskRoleArns {
            task_role: None,
            execution_role: Some("arn:aws:iam::1:role/exec".into()),
        })
        .expect("urandom");
        assert!(only_exec.task_role.is_none() && only_exec.execution_role.is_some());
    }

    #[test]
    fn expected_ids_of_a_local_task_are_handed_to_the_refresher_and_an_ecs_tasks_are_not() {
        let recorder = Arc::new(Recorder::default());
        let config = EngineConfig {
            local_roles: Some(recorder.clone()),
            ..EngineConfig::default()
        };
        let task = task_with_roles();
        expect_credentials(&config, &task);
        let app = task.credentials_ids.task_role.clone().unwrap_or_default();
        assert_eq!(
            config.role_credentials.lookup(&app),
            CredentialsLookup::Pending
        );
        let tracked = recorder.0.lock().expect("not poisoned").clone();
        assert_eq!(tracked.len(), 2, "{tracked:?}");
        assert_eq!(tracked[0].role, RoleType::TaskApplication);
        assert_eq!(tracked[0].credentials_id, app);
        assert_eq!(tracked[0].role_arn, "arn:aws:iam::1:role/app");
        assert_eq!(tracked[0].task_id, "0123");
        assert_eq!(tracked[1].role, RoleType::TaskExecution);
        // Restored: the same ids again.
        expect_credentials(&config, &task);
        let again = recorder.0.lock().expect("not poisoned").clone();
        assert_eq!(again[2].credentials_id, app);
        // ECS's task: its ids are expected, its credentials come from ECS.
        let mut from_ecs = task_with_roles();
        from_ecs.source = Some(format!("{ECS_SOURCE_PREFIX}{}", from_ecs.arn));
        expect_credentials(&config, &from_ecs);
        assert_eq!(recorder.0.lock().expect("not poisoned").len(), 4);
        // Off (restored after DECKHAND_TASK_ROLES was turned off): nothing tracked, the ids
        // kept pending with the reason.
        let off = EngineConfig::default();
        let restored = task_with_roles();
        expect_credentials(&off, &restored);
        assert_eq!(recorder.0.lock().expect("not poisoned").len(), 4);
        let restored_app = restored
            .credentials_ids
            .task_role
            .clone()
            .unwrap_or_default();
        assert_eq!(
            off.role_credentials.lookup(&restored_app),
            CredentialsLookup::Pending
        );
        let states = off.role_credentials.states(&restored.arn);
        assert_eq!(states.len(), 2);
        assert!(states.iter().all(|state| state
            .failure
            .as_deref()
            .is_some_and(|why| why.contains("DECKHAND_TASK_ROLES is off"))));
        // Restored STOPPED: its task role is served no more; its execution role until removal.
        let mut stopped = task_with_roles();
        stopped.arn = format!("{}-stopped", stopped.arn);
        stopped.known_status = crate::task::TaskStatus::Stopped;
        stopped.credentials_ids = local_credentials_ids(&stopped.role_arns).expect("urandom");
        expect_credentials(&config, &stopped);
        let tracked = recorder.0.lock().expect("not poisoned").clone();
        assert_eq!(tracked.len(), 5, "{tracked:?}");
        assert_eq!(tracked[4].role, RoleType::TaskExecution);
        let stopped_app = stopped.credentials_ids.task_role.unwrap_or_default();
        assert_eq!(
            config.role_credentials.lookup(&stopped_app),
            CredentialsLookup::Unknown
        );
    }

    #[test]
    fn task_ids_come_from_arns_that_carry_one_of_deckhands_shape() {
        let cases: &[(&str, Option<&str>)] = &[
            (
                "arn:aws:ecs:us-west-2:123456789012:task/edge/0123456789abcdef0123456789abcdef",
                Some("0123456789abcdef0123456789abcdef"),
            ),
            // The older ARNs: no cluster, a UUID.
            (
                "arn:aws:ecs:us-west-2:123456789012:task/8f7a3c52-1b2c-4d5e-9f00-0a1b2c3d4e5f",
                None,
            ),
            (
                "arn:aws:ecs:us-west-2:123456789012:task/edge/0123456789ABCDEF0123456789ABCDEF",
                None,
            ),
            ("", None),
            ("arn:aws:ecs:us-west-2:123456789012:task/edge/", None),
            (
                "arn:aws:ecs:us-west-2:123456789012:task/edge/é123456789abcdef0123456789abcde",
                None,
            ),
        ];
        for (arn, expected) in cases {
            assert_eq!(task_id_of_arn(arn), *expected, "{arn}");
        }
    }
}
