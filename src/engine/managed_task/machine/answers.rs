//! The state machine's handling of Docker's answers and events: a transition's result (Docker
//! away waits and retries, anything else is the container's change), an inspection, a routed
//! event, a restart's answer.

use super::*;

impl ManagedTask {
    /// A transition worker's answer: Docker away waits and retries; anything else is the
    /// container's change (§6 for errors).
    pub(super) fn transition_answered(
        &mut self,
        container: String,
        target: ContainerStatus,
        result: Result<TransitionOutput, RuntimeError>,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) {
        let Some(index) = self.task.container_index(&container) else {
            return;
        };
        if let Err(error) = &result {
            if docker_away(DockerCallKind::for_target(target), error) {
                self.docker_away_for_transition(index, target, error, now, effects);
                return;
            }
        }
        self.docker_answered();
        let change = match result {
            Ok(output) => {
                if let Some(docker_id) = &output.docker_id {
                    self.task.containers[index].docker_id = Some(docker_id.clone());
                    self.dirty = true;
                    effects.push(Effect::TrackContainer {
                        docker_id: docker_id.clone(),
                    });
                }
                if target == ContainerStatus::Pulled {
                    self.task.pull_stopped_at = Some(now);
                }
                ContainerChange {
                    status: target,
                    from_transition: true,
                    exit_code: output.info.as_ref().and_then(|info| {
                        (target == ContainerStatus::Stopped).then_some(info.state.exit_code)
                    }),
                    observed_at: output
                        .info
                        .as_ref()
                        .and_then(|info| observed_time(target, info)),
                    info: output.info,
                    ..ContainerChange::default()
                }
            }
            Err(error) => {
                if target == ContainerStatus::Pulled {
                    self.task.pull_stopped_at = Some(now);
                }
                ContainerChange {
                    status: target,
                    error: Some(classify_error(target, &error)),
                    from_transition: true,
                    ..ContainerChange::default()
                }
            }
        };
        self.container_change(index, change, now, effects);
        if let Some(exit) = self.exit_during_start[index].take() {
            self.container_change(index, exit, now, effects);
        }
    }

    /// An inspection's answer: Docker's view of the container (§11), or a 404 (vanished).
    pub(super) fn inspected(
        &mut self,
        container: String,
        result: Result<ContainerInfo, RuntimeError>,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) {
        let Some(index) = self.task.container_index(&container) else {
            return;
        };
        if let Err(error) = &result {
            if !inspect_says_gone(error) {
                // Not a fact about the container (a 500, a malformed answer, Docker
                // away): its status stays as it was; inspect it again after a back-off.
                effects.push(Effect::Log {
                    level: log::Level::Debug,
                    message: format!(
                        "inspecting {container} failed: {error}; inspecting again later"
                    ),
                });
                self.reinspect[index] = true;
                self.arm_docker_retry(now, effects);
                return;
            }
        }
        self.docker_answered();
        self.reinspect[index] = false;
        match result {
            Ok(info) => {
                let status = status_from_inspect(&info);
                let change = ContainerChange {
                    status,
                    exit_code: (status == ContainerStatus::Stopped).then_some(info.state.exit_code),
                    observed_at: observed_time(status, &info),
                    info: Some(info),
                    ..ContainerChange::default()
                };
                self.container_change(index, change, now, effects);
            }
            Err(RuntimeError::NoSuchContainer { message }) => {
                let known = self.task.containers[index].known_status;
                // A container adopted by its name (its id is known, its create's answer
                // was lost) that is gone again was removed from outside, like one known
                // CREATED or RUNNING: it vanished, rather than being made once more
                // under a new id.
                let exists_for_the_task = known >= ContainerStatus::Created
                    || self.task.containers[index].docker_id.is_some();
                if exists_for_the_task && known < ContainerStatus::Stopped {
                    let change = ContainerChange {
                        status: ContainerStatus::Stopped,
                        error: Some(ContainerError {
                            kind: ContainerErrorKind::Vanished,
                            message: format!("Docker no longer has the container: {message}"),
                        }),
                        ..ContainerChange::default()
                    };
                    self.container_change(index, change, now, effects);
                }
            }
            // Handled above.
            Err(_) => {}
        }
    }

    /// A Docker event routed to this task by Docker id.
    pub(super) fn docker_event(
        &mut self,
        docker_id: String,
        observation: DockerObservation,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) {
        let Some(index) = self
            .task
            .containers
            .iter()
            .position(|container| container.docker_id.as_deref() == Some(&docker_id))
        else {
            return;
        };
        match observation {
            DockerObservation::Status {
                status,
                exit_code,
                at,
            } => {
                let change = ContainerChange {
                    status,
                    exit_code,
                    observed_at: at,
                    ..ContainerChange::default()
                };
                let known = self.task.containers[index].known_status;
                if status == ContainerStatus::Running
                    && known < ContainerStatus::Running
                    && self.task.containers[index].applied_status == Some(ContainerStatus::Running)
                {
                    // Our own start call is in flight: its answer brings RUNNING together
                    // with the inspection (ports, start time), so a reader who sees RUNNING
                    // also sees the container's port bindings, as ECS reports them.
                    return;
                }
                let exited = status == ContainerStatus::Stopped && known < ContainerStatus::Stopped;
                // Applied at once: the STOPPED event must not wait on Docker, which
                // answers an inspection of a just-died container only after it has
                // finished handling the exit. A memory kill was recorded by the `oom`
                // event that came first.
                self.container_change(index, change, now, effects);
                if exited {
                    // Then one inspection, in the background, for what the event does
                    // not say: the exit code of a `stop`, the finish time, and Docker's
                    // own error (recorded on the container if none came first).
                    effects.push(Effect::Docker(DockerCall::Inspect {
                        container: self.task.containers[index].name().to_string(),
                        docker_id,
                    }));
                }
            }
            DockerObservation::Health { health } => {
                self.set_health(index, health, None, now);
                // The event has no output: inspect for the check's last output, as the ECS
                // agent does on a health event (ECS shows it; Docker emits the event only when
                // the status changes, so this is one call per change).
                let container = &self.task.containers[index];
                if container.definition.health_check.is_some()
                    && container.known_status == ContainerStatus::Running
                {
                    effects.push(Effect::Docker(DockerCall::Inspect {
                        container: container.name().to_string(),
                        docker_id,
                    }));
                }
            }
            DockerObservation::OutOfMemory => self.record_out_of_memory(index),
            // Handled above: it names a container by its name, not its id.
            DockerObservation::FoundByName { .. } => {}
        }
    }

    /// A STOPPED the task posted to itself (§3 row 5, §4).
    pub(super) fn synthetic_stop(
        &mut self,
        container: String,
        error: Option<ContainerError>,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) {
        let Some(index) = self.task.container_index(&container) else {
            return;
        };
        let change = ContainerChange {
            status: ContainerStatus::Stopped,
            error,
            from_transition: true,
            ..ContainerChange::default()
        };
        self.container_change(index, change, now, effects);
    }

    /// A restart's answer (§12).
    pub(super) fn restarted(
        &mut self,
        container: String,
        exit_code: Option<i64>,
        result: Result<(), RuntimeError>,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) {
        let Some(index) = self.task.container_index(&container) else {
            return;
        };
        let restarted = &mut self.task.containers[index];
        if restarted.applied_status == Some(ContainerStatus::Running) {
            restarted.applied_status = None;
        }
        match result {
            Ok(()) => {
                self.restart_confirmed_at[index] = restarted.last_restart_at;
                effects.push(Effect::Log {
                    level: log::Level::Info,
                    message: format!(
                        "restarted container {container} (restart {})",
                        restarted.restart_count
                    ),
                });
                self.docker_answered();
            }
            // Docker is away (it restarts, and took the container down with it): the
            // restart is made when Docker is back, not given up.
            Err(error) if docker_away(DockerCallKind::Start, &error) => {
                effects.push(Effect::Log {
                    level: log::Level::Warn,
                    message: format!(
                        "cannot restart container {container} while Docker is away \
                     ({error}); restarting it when Docker is back"
                    ),
                });
                self.restart_pending[index] = Some(exit_code);
                self.arm_docker_retry(now, effects);
            }
            Err(error) => {
                effects.push(Effect::Log {
                    level: log::Level::Warn,
                    message: format!("restarting container {container} failed: {error}"),
                });
                // A restart that timed out (or lost its answer) may have started the
                // container after all: stop it, as §6 does for a start, as the
                // container's own transition, so that it becomes STOPPED with the
                // stop's answer rather than while Docker may still run it.
                let may_run = error_outcome(
                    ContainerStatus::Running,
                    &classify_error(ContainerStatus::Running, &error),
                    self.settings.rules.pull_behavior,
                )
                .stop_in_background;
                let container = &mut self.task.containers[index];
                match (may_run, container.docker_id.clone()) {
                    (true, Some(docker_id)) => {
                        container.applied_status = Some(ContainerStatus::Stopped);
                        self.dirty = true;
                        effects.push(Effect::Docker(DockerCall::Stop {
                            container: container.name().to_string(),
                            docker_id,
                            grace: stop_grace(container, self.settings.stop_timeout),
                            background: false,
                        }));
                    }
                    _ => {
                        let change = ContainerChange {
                            status: ContainerStatus::Stopped,
                            exit_code,
                            restart_failed: true,
                            ..ContainerChange::default()
                        };
                        self.container_change(index, change, now, effects);
                    }
                }
            }
        }
        // An exit held while the restart call was out (the restarted container exited
        // again) is handled now that its answer cleared `applied`, as after a start.
        if let Some(exit) = self.exit_during_start[index].take() {
            self.container_change(index, exit, now, effects);
        }
    }
}
