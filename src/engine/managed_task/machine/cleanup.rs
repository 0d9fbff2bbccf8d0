//! The state machine from known STOPPED to done (§2 steps 5–8: the cleanup deadline, the STOPPED
//! report, the removal), and its back-off while Docker is away.

use super::*;

impl ManagedTask {
    /// §2 step 5 onwards: finish the stop number, arm the cleanup clock.
    pub(super) fn enter_stopped(&mut self, now: Millis, effects: &mut Vec<Effect>) {
        if matches!(
            self.phase,
            Phase::AwaitingCleanup | Phase::Removing | Phase::Done
        ) {
            return;
        }
        if self.phase == Phase::WaitingForStops {
            effects.push(Effect::StopWaitingForStops);
        }
        self.phase = Phase::AwaitingCleanup;
        if let Some(sequence) = self.unfinished_stop.take() {
            effects.push(Effect::WaitGroupDone { sequence });
        }
        // Known STOPPED: what it held is free for the tasks waiting for it (§9a), as the ECS
        // agent releases at the task's STOPPED.
        effects.push(Effect::ReleaseResources);
        effects.push(Effect::DropTaskRoleCredentials);
        let stopped_at = self.task.known_status_time.unwrap_or(now);
        let wait = u64::try_from(self.settings.cleanup_wait.as_millis()).unwrap_or(u64::MAX);
        let at = stopped_at.saturating_add(wait);
        self.cleanup_at = Some(at);
        self.dirty = true;
        if at <= now {
            self.own_inbox
                .push_back(Input::TimerFired(TimerKind::Cleanup));
        } else {
            effects.push(Effect::ArmTimer {
                timer: TimerKind::Cleanup,
                at,
            });
        }
    }

    /// §2 steps 6–8: once the deadline passed and STOPPED was reported, remove the containers.
    pub(super) fn cleanup_if_due(&mut self, now: Millis, effects: &mut Vec<Effect>) {
        if self.phase != Phase::AwaitingCleanup {
            return;
        }
        let Some(at) = self.cleanup_at else {
            return;
        };
        if now < at {
            effects.push(Effect::ArmTimer {
                timer: TimerKind::Cleanup,
                at,
            });
            return;
        }
        // A task Amazon ECS owns also keeps its containers until ECS acknowledged its STOPPED
        // (the acknowledgement arrives as an input; the poll only re-arms the wait).
        let control_plane_waits =
            self.task.owned_by_control_plane() && self.task.reported_status < TaskStatus::Stopped;
        if self.task.sent_status < TaskStatus::Stopped || control_plane_waits {
            self.emit_unreported(now, effects);
            let poll =
                u64::try_from(self.settings.sent_poll_interval.as_millis()).unwrap_or(u64::MAX);
            effects.push(Effect::ArmTimer {
                timer: TimerKind::Cleanup,
                at: now.saturating_add(poll),
            });
            return;
        }
        self.phase = Phase::Removing;
        effects.push(Effect::Docker(DockerCall::Remove {
            // By id; by the fixed name where no id is known: a create whose answer was lost (a
            // time-out that happened, a crash) or that Docker made only after a restore looked
            // the name up may have left a container under it. Removing a name Docker does not
            // know is a harmless 404.
            docker_ids: self
                .task
                .containers
                .iter()
                .filter_map(|container| {
                    container
                        .docker_id
                        .clone()
                        .or_else(|| container.docker_name.clone())
                })
                .collect(),
            volumes: owned_volumes(&self.task),
            directories: task_directory(&self.task, &self.settings.firelens)
                .into_iter()
                .collect(),
        }));
    }

    /// A transition call failed because Docker was away (docs/ENGINE.md §6: Docker away, not an error of the task):
    /// nothing is in flight any more, the container keeps its status and no error is recorded,
    /// and the call is made again after a back-off.
    pub(super) fn docker_away_for_transition(
        &mut self,
        index: usize,
        target: ContainerStatus,
        error: &RuntimeError,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) {
        let container = &mut self.task.containers[index];
        if container.applied_status == Some(target) {
            container.applied_status = None;
        }
        let name = container.name().to_string();
        if self.docker_retry_attempt == 0 {
            effects.push(Effect::Log {
                level: log::Level::Warn,
                message: format!(
                    "Docker is away ({error}); container {name} waits for it to go to \
                 {target}"
                ),
            });
        } else {
            effects.push(Effect::Log {
                level: log::Level::Debug,
                message: format!("Docker is still away ({error}); container {name} waits"),
            });
        }
        self.arm_docker_retry(now, effects);
        // An exit held until the start call answered (§12) is applied now that it did: the
        // start Docker never received is made again, the exit is news about the container.
        if let Some(exit) = self.exit_during_start[index].take() {
            self.container_change(index, exit, now, effects);
        }
    }

    /// Arms the `DockerRetry` timer with the next back-off step, unless it is armed already (one
    /// step per round, however many calls failed in it).
    pub(super) fn arm_docker_retry(&mut self, now: Millis, effects: &mut Vec<Effect>) {
        if self.docker_retry_at.is_some() {
            return;
        }
        let delay = Self::millis(docker_retry_delay(self.docker_retry_attempt));
        self.docker_retry_attempt = self.docker_retry_attempt.saturating_add(1);
        let at = now.saturating_add(delay);
        self.docker_retry_at = Some(at);
        effects.push(Effect::ArmTimer {
            timer: TimerKind::DockerRetry,
            at,
        });
    }

    /// Docker answered a call: the next time it is away, the back-off starts again from 1 s.
    pub(super) fn docker_answered(&mut self) {
        self.docker_retry_attempt = 0;
    }

    /// Makes what waits for Docker due now (the armed timer firing later finds nothing to do
    /// but a pass).
    pub(super) fn retry_docker_now(&mut self) {
        self.docker_retry_at = None;
    }

    /// Inspects again the containers whose last inspect taught nothing.
    pub(super) fn reinspect_failed(&mut self, effects: &mut Vec<Effect>) {
        if matches!(self.phase, Phase::Removing | Phase::Done) {
            return;
        }
        let containers = self.task.containers.iter().zip(&self.restart_pending);
        for ((container, restart_pending), reinspect) in containers.zip(&mut self.reinspect) {
            // A container restarted next is not inspected: the inspection would only race it.
            if !std::mem::take(reinspect) || restart_pending.is_some() {
                continue;
            }
            if let Some(docker_id) = &container.docker_id {
                effects.push(Effect::Docker(DockerCall::Inspect {
                    container: container.name().to_string(),
                    docker_id: docker_id.clone(),
                }));
            }
        }
    }

    /// Makes again the restarts Docker was away for. A container desired STOPPED meanwhile is
    /// not restarted: the pass stops it (Docker answers that stop with its exit).
    pub(super) fn retry_pending_restarts(&mut self, effects: &mut Vec<Effect>) {
        for index in 0..self.task.containers.len() {
            let Some(exit_code) = self.restart_pending[index].take() else {
                continue;
            };
            let container = &mut self.task.containers[index];
            if container.desired_status.is_stopped() || container.applied_status.is_some() {
                continue;
            }
            let Some(docker_id) = container.docker_id.clone() else {
                continue;
            };
            container.applied_status = Some(ContainerStatus::Running);
            effects.push(Effect::Docker(DockerCall::Restart {
                container: container.name().to_string(),
                docker_id,
                exit_code,
            }));
        }
    }

    pub(super) fn inspect_all(&mut self, effects: &mut Vec<Effect>) {
        for (container, restart_pending) in self.task.containers.iter().zip(&self.restart_pending) {
            // Known to have exited, and restarted next: an inspection would only race it.
            if restart_pending.is_some() {
                continue;
            }
            if let Some(docker_id) = &container.docker_id {
                if container.known_status < ContainerStatus::Stopped {
                    effects.push(Effect::Docker(DockerCall::Inspect {
                        container: container.name().to_string(),
                        docker_id: docker_id.clone(),
                    }));
                }
            }
        }
    }
}
