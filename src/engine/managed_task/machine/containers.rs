//! The state machine's container changes, whatever their origin (the statuses, exit codes,
//! health and metadata they carry, adoption by name, §12 restarts), the events they are due, and
//! the GPU ids each container is given when its task is admitted.

use super::*;

impl ManagedTask {
    /// The task's GPU ids go to its containers, each its count; written to the checkpoint
    /// (before any create) when that changes what a container holds.
    pub(super) fn hand_out_gpus(&mut self, gpu_ids: &[String]) {
        let wanted: Vec<(usize, &[String])> = self
            .task
            .containers
            .iter()
            .map(|container| {
                (
                    container.definition.gpus as usize,
                    container.gpu_ids.as_slice(),
                )
            })
            .collect();
        let handed = crate::engine::host_resources::gpus::hand_out(&wanted, gpu_ids);
        for (container, ids) in self.task.containers.iter_mut().zip(handed) {
            if container.gpu_ids != ids {
                container.gpu_ids = ids;
                self.dirty = true;
            }
        }
    }

    pub(super) fn set_health(
        &mut self,
        index: usize,
        health: HealthStatus,
        output: Option<String>,
        now: Millis,
    ) {
        let container = &mut self.task.containers[index];
        if container.definition.health_check.is_none() {
            return;
        }
        if container.health != health {
            container.health = health;
            container.health_since = Some(now);
            self.dirty = true;
        }
        if output.is_some() && container.health_output != output {
            container.health_output = output;
            self.dirty = true;
        }
    }

    pub(super) fn copy_metadata(&mut self, index: usize, change: &ContainerChange, now: Millis) {
        let exclude_ipv6_twins = self.settings.exclude_ipv6_port_bindings;
        let container = &mut self.task.containers[index];
        if let Some(exit_code) = change.exit_code {
            container.exit_code = Some(exit_code);
        }
        let mut health = None;
        if let Some(info) = &change.info {
            if !info.image_id.is_empty() {
                container.image_id = Some(info.image_id.clone());
            }
            let ports: Vec<PortBinding> = reported_port_bindings(&info.ports, exclude_ipv6_twins);
            if !ports.is_empty() {
                container.ports = ports;
            }
            // A stopped container's inspect has lost its addresses: keep the last ones seen.
            if info.networks.iter().any(|(_, address)| !address.is_empty()) {
                container.networks = network_addresses(&info.networks);
            }
            if let Some(created) = parse_docker_time(&info.created) {
                container.created_at = Some(created);
            }
            if let Some(started) = parse_docker_time(&info.state.started_at) {
                container.started_at = Some(started);
            }
            if !info.state.running {
                if let Some(finished) = parse_docker_time(&info.state.finished_at) {
                    container.finished_at = Some(finished);
                }
            }
            health = health_from_info(info);
        }
        if let (ContainerStatus::Stopped, Some(observed)) = (change.status, change.observed_at) {
            let finished = &mut self.finished_nanos[index];
            *finished = Some(finished.map_or(observed, |known| known.max(observed)));
        }
        let container = &mut self.task.containers[index];
        // A failed call carries no fact about the container: it did not start or finish.
        if change.error.is_none() {
            let at = change
                .observed_at
                .and_then(|nanos| u64::try_from(nanos / 1_000_000).ok())
                .unwrap_or(now);
            if change.status == ContainerStatus::Running && container.started_at.is_none() {
                container.started_at = Some(at);
            }
            if change.status == ContainerStatus::Stopped && container.finished_at.is_none() {
                container.finished_at = Some(at);
            }
        }
        if let Some((status, output)) = health {
            self.set_health(index, status, output, now);
        }
        self.dirty = true;
    }

    /// The re-list after a reconnect found `docker_id` under the fixed name of one of this task's
    /// containers that never recorded an id (its create's answer was lost): record the id, route
    /// its events here, and inspect it for its status. A container that has an id already (the
    /// create's answer came after the list) keeps it.
    pub(super) fn adopt_by_name(
        &mut self,
        docker_id: String,
        docker_name: &str,
        effects: &mut Vec<Effect>,
    ) {
        if self
            .task
            .containers
            .iter()
            .any(|container| container.docker_id.as_deref() == Some(docker_id.as_str()))
        {
            return;
        }
        let Some(container) = self.task.containers.iter_mut().find(|container| {
            container.docker_id.is_none() && container.docker_name.as_deref() == Some(docker_name)
        }) else {
            return;
        };
        effects.push(Effect::Log {
            level: log::Level::Info,
            message: format!(
                "adopted container {} ({docker_id}), found by its name {docker_name} after \
             Docker's event stream came back",
                container.name()
            ),
        });
        container.docker_id = Some(docker_id.clone());
        self.dirty = true;
        effects.push(Effect::TrackContainer {
            docker_id: docker_id.clone(),
        });
        // Docker has it, so it was created: the pass that follows goes on from CREATED
        // (`adopted_is_created`), and the inspection says more.
        effects.push(Effect::Docker(DockerCall::Inspect {
            container: container.name().to_string(),
            docker_id,
        }));
    }

    /// A container whose Docker id the task holds while it still counts as not created (adopted
    /// by its name after a create's answer was lost) was created: the task goes on from CREATED
    /// — its inspection says more — and never creates it again under a new id; if it is removed
    /// from outside meanwhile, its start finds it gone. Waits for a call still out for it (the
    /// lost create's retry), so there are never two at once.
    pub(super) fn adopted_is_created(
        &mut self,
        index: usize,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) {
        let container = &self.task.containers[index];
        if container.known_status < ContainerStatus::Created
            && container.docker_id.is_some()
            && container.applied_status.is_none()
        {
            let change = ContainerChange {
                status: ContainerStatus::Created,
                ..ContainerChange::default()
            };
            self.container_change(index, change, now, effects);
        }
    }

    /// Docker's `oom` event: the container was killed (or is about to exit) for exceeding its
    /// memory limit. Recorded at once so the STOPPED event that follows carries the reason; an
    /// error the container already carries was the first cause and stays.
    pub(super) fn record_out_of_memory(&mut self, index: usize) {
        let container = &mut self.task.containers[index];
        if let Some(reason) =
            exit_error_from_inspection(container.applying_error.as_ref(), true, "")
        {
            container.applying_error = Some(reason);
            self.dirty = true;
        }
    }

    /// A STOPPED change whose inspection shows why the container stopped (killed for memory,
    /// Docker's own error) gives the container that reason, unless an earlier error already did.
    pub(super) fn record_exit_reason(&mut self, index: usize, change: &ContainerChange) {
        let (ContainerStatus::Stopped, None, Some(info)) =
            (change.status, &change.error, &change.info)
        else {
            return;
        };
        let container = &mut self.task.containers[index];
        if let Some(reason) = exit_error_from_inspection(
            container.applying_error.as_ref(),
            info.state.oom_killed,
            &info.state.error,
        ) {
            container.applying_error = Some(reason);
            self.dirty = true;
        }
    }

    /// §2 "Container change".
    pub(super) fn container_change(
        &mut self,
        index: usize,
        change: ContainerChange,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) {
        let stop_default = self.settings.stop_timeout;
        let container = &mut self.task.containers[index];
        // `applied` marks the call in flight and is cleared by that call's own answer only: an
        // event may raise known to the target first (Docker's `start` before the start call
        // returns), and clearing then would let a second call (a stop) run beside the first.
        if change.from_transition && container.applied_status == Some(change.status) {
            container.applied_status = None;
        }
        // §7: a container known STOPPED reported running again: one stop, no status change.
        // A report Docker made before the container finished is old news (a `start` event
        // overtaken by the stop's own result), not a restart.
        if change.status == ContainerStatus::Running
            && container.known_status == ContainerStatus::Stopped
        {
            let stale = matches!(
                (change.observed_at, self.finished_nanos[index]),
                (Some(observed), Some(finished)) if observed <= finished
            );
            if !stale && restop_on_running_report(container) {
                container.restopped = true;
                self.dirty = true;
                if let Some(docker_id) = container.docker_id.clone() {
                    effects.push(Effect::Docker(DockerCall::Stop {
                        container: container.name().to_string(),
                        docker_id,
                        grace: stop_grace(container, stop_default),
                        background: true,
                    }));
                }
            }
            return;
        }
        // An exit Docker saw before this container's last restart was decided (a late `die`
        // event, an inspection made before the restart landed), or the very exit that restart
        // answered, is old news once Docker confirmed the restart: applying it would mark the
        // restarted, running container STOPPED. While the restart call is out, such a report
        // waits for the answer; a restart that failed leaves that exit standing.
        if change.status == ContainerStatus::Stopped
            && change.error.is_none()
            && !change.from_transition
            && !change.restart_failed
        {
            let trigger = self.restart_trigger_nanos[index];
            let before = |restarted: Option<Millis>| match (change.observed_at, restarted) {
                (Some(observed), Some(restarted)) => {
                    observed / 1_000_000 < i64::try_from(restarted).unwrap_or(i64::MAX)
                        || trigger.is_some_and(|exit| observed <= exit)
                }
                _ => false,
            };
            if before(self.restart_confirmed_at[index]) {
                return;
            }
            if container.applied_status == Some(ContainerStatus::Running)
                && container.known_status == ContainerStatus::Running
                && before(container.last_restart_at)
            {
                self.exit_during_start[index] = Some(change);
                return;
            }
        }
        if change.status <= container.known_status {
            // A repeat of the current status still refreshes metadata (health, exit code, times).
            if change.status == container.known_status && change.error.is_none() {
                self.copy_metadata(index, &change, now);
                self.record_exit_reason(index, &change);
            }
            return;
        }
        // §12 while the start call is still unanswered (Docker's `start` event made the
        // container RUNNING, then it exited before the call returned): hold the exit until that
        // answer clears `applied`, so the restart is decided then and never runs beside the
        // start call.
        if change.status == ContainerStatus::Stopped
            && change.error.is_none()
            && !change.from_transition
            && !change.restart_failed
            && container.applied_status == Some(ContainerStatus::Running)
            && container.known_status == ContainerStatus::Running
            && should_restart(container, change.exit_code, now)
        {
            self.exit_during_start[index] = Some(change);
            return;
        }
        // §12: an exit under a restart policy starts the container again instead; on success
        // the change is dropped (known stays RUNNING, no event).
        if change.status == ContainerStatus::Stopped
            && change.error.is_none()
            && !change.from_transition
            && !change.restart_failed
            && container.applied_status.is_none()
            && should_restart(container, change.exit_code, now)
        {
            if let Some(docker_id) = container.docker_id.clone() {
                container.restart_count += 1;
                container.last_restart_at = Some(now);
                self.restart_trigger_nanos[index] = change.observed_at;
                container.applied_status = Some(ContainerStatus::Running);
                if change.exit_code.is_some() {
                    container.exit_code = change.exit_code;
                }
                self.dirty = true;
                effects.push(Effect::Docker(DockerCall::Restart {
                    container: container.name().to_string(),
                    docker_id,
                    exit_code: change.exit_code,
                }));
                return;
            }
        }
        let previous_known = container.known_status;
        container.known_status = change.status;
        container.known_status_time = Some(now);
        self.copy_metadata(index, &change, now);
        self.record_exit_reason(index, &change);

        if let Some(error) = &change.error {
            let outcome = error_outcome(change.status, error, self.settings.rules.pull_behavior);
            let container = &mut self.task.containers[index];
            if container.applying_error.is_none() {
                container.applying_error = Some(error.clone());
            }
            if outcome.reset_known {
                container.known_status = previous_known;
            }
            if outcome.container_desired_stopped {
                container.desired_status = ContainerStatus::Stopped;
            }
            if outcome.stop_in_background {
                if let Some(docker_id) = container.docker_id.clone() {
                    // The start may have happened: stop it as this container's own transition,
                    // so it reaches STOPPED with the stop's answer. Left untracked, §3 row 5 made
                    // it STOPPED at once, and the task could finish its stop number (letting a
                    // replacement start) while Docker still ran the container.
                    container.applied_status = Some(ContainerStatus::Stopped);
                    effects.push(Effect::Docker(DockerCall::Stop {
                        container: container.name().to_string(),
                        docker_id,
                        grace: stop_grace(container, stop_default),
                        background: false,
                    }));
                }
            }
            if outcome.stop_task {
                if self.task.stopped_reason.is_none() {
                    let name = self.task.containers[index].name().to_string();
                    self.task.stopped_reason = Some(error.task_reason(&name));
                }
                self.raise_desired(TaskStatus::Stopped);
            }
            if !outcome.emit_events {
                self.apply_essential_rule();
                return;
            }
        }

        let container = &self.task.containers[index];
        if container.known_status == ContainerStatus::Stopped && container.essential() {
            if self.task.execution_stopped_at.is_none() {
                self.task.execution_stopped_at = Some(now);
            }
            if self.task.stopped_reason.is_none() {
                let reason = match &container.applying_error {
                    Some(error) => error.task_reason(container.name()),
                    None => ESSENTIAL_CONTAINER_EXITED.to_string(),
                };
                self.task.stopped_reason = Some(reason);
            }
        }
        self.emit_container_event_if_due(index, now, effects);
        if let Some(known) = derive_task_known_status(&self.task) {
            self.task.known_status = known;
            self.task.known_status_time = Some(now);
            self.emit_task_event_if_due(now, effects);
            if known == TaskStatus::Stopped {
                self.enter_stopped(now, effects);
            }
        }
        self.apply_essential_rule();
    }

    pub(super) fn emit_container_event_if_due(
        &mut self,
        index: usize,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) {
        let container = &self.task.containers[index];
        let known = container.known_status;
        // The sandbox is deckhand's, not the owner's: ECS reports no state of its pause
        // container either.
        if container.is_sandbox()
            || !matches!(known, ContainerStatus::Running | ContainerStatus::Stopped)
            || self.emitted_container[index] >= known
            || container.sent_status >= known
        {
            return;
        }
        self.emitted_container[index] = known;
        effects.push(Effect::Emit {
            event: NewEvent {
                time: now,
                task: self.task.id.clone(),
                container: Some(container.name().to_string()),
                status: known.as_str().to_string(),
                exit_code: if known == ContainerStatus::Stopped {
                    container.exit_code
                } else {
                    None
                },
                reason: container
                    .applying_error
                    .as_ref()
                    .map(ContainerError::reason),
            },
            reported: Reported::Container {
                name: container.name().to_string(),
                status: known,
            },
        });
    }

    /// Emits again what the reporter failed to record (a no-op for events still on their way).
    pub(super) fn emit_unreported(&mut self, now: Millis, effects: &mut Vec<Effect>) {
        for index in 0..self.task.containers.len() {
            self.emit_container_event_if_due(index, now, effects);
        }
        self.emit_task_event_if_due(now, effects);
    }

    pub(super) fn emit_task_event_if_due(&mut self, now: Millis, effects: &mut Vec<Effect>) {
        let known = self.task.known_status;
        if !matches!(known, TaskStatus::Running | TaskStatus::Stopped)
            || self.emitted_task >= known
            || self.task.sent_status >= known
        {
            return;
        }
        self.emitted_task = known;
        effects.push(Effect::Emit {
            event: NewEvent {
                time: now,
                task: self.task.id.clone(),
                container: None,
                status: known.as_str().to_string(),
                exit_code: None,
                reason: if known == TaskStatus::Stopped {
                    self.task.stopped_reason.clone()
                } else {
                    None
                },
            },
            reported: Reported::Task { status: known },
        });
    }
}
