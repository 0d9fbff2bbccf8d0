//! The state machine's progress pass (§2 step 4): the next transition of every container, the
//! timers it arms, and the Docker calls that begin a transition.

use super::*;
use crate::engine::container_spec::add_credentials_environment;
use crate::engine::firelens::prepare_create;
use crate::engine::log_driver::{docker_log_config, environment_secrets};
use crate::engine::transition::{
    pull_waits_for_execution_credentials, PULL_CREDENTIALS_REASON, PULL_CREDENTIALS_WAIT,
};

impl ManagedTask {
    pub(super) fn millis(duration: Duration) -> Millis {
        u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
    }

    /// The steady re-check period with a small per-task spread (±30 s on long periods), so
    /// many tasks do not inspect all at once.
    pub(super) fn steady_check_delay(&self) -> Millis {
        let base = Self::millis(self.settings.steady_check_interval);
        if base < 120_000 {
            return base;
        }
        let spread: u64 = self.task.id.bytes().map(u64::from).sum::<u64>() % 60_001;
        base - 30_000 + spread
    }

    /// §2 "Progress pass".
    pub(super) fn progress(&mut self, now: Millis, effects: &mut Vec<Effect>) {
        if self.task.known_status == TaskStatus::Stopped {
            return;
        }
        if is_steady(&self.task) {
            if !self.steady_timer_armed {
                self.steady_timer_armed = true;
                effects.push(Effect::ArmTimer {
                    timer: TimerKind::SteadyCheck,
                    at: now.saturating_add(self.steady_check_delay()),
                });
            }
            return;
        }
        for index in 0..self.task.containers.len() {
            self.adopted_is_created(index, now, effects);
        }
        let mut acted = false;
        let mut in_flight = false;
        let mut blocked = false;
        let mut pull_waits = false;
        for index in 0..self.task.containers.len() {
            if self.task.containers[index].applied_status.is_some() {
                in_flight = true;
                continue;
            }
            match next_state(&self.task, index, &self.settings.rules, now) {
                NextState::None => {}
                NextState::Blocked { .. } => blocked = true,
                NextState::StartInFlight => in_flight = true,
                NextState::Terminal { reason } => {
                    let container = &mut self.task.containers[index];
                    container.desired_status = ContainerStatus::Stopped;
                    container.exit_code = Some(CANNOT_START_EXIT_CODE);
                    self.dirty = true;
                    self.post_synthetic_stop(index, Some(dependency_terminal_error(&reason)));
                    acted = true;
                }
                NextState::SyntheticStopped => {
                    self.post_synthetic_stop(index, None);
                    acted = true;
                }
                // §4 pull credentials: blocked until the execution role's credentials are there.
                NextState::Transition {
                    action: DockerAction::Pull,
                    ..
                } if pull_waits_for_execution_credentials(
                    &self.task,
                    index,
                    self.execution_credentials_present,
                ) =>
                {
                    pull_waits = true
                }
                // Docker was away: the call waits for the retry timer, and the task for the call.
                NextState::Transition { .. } if self.docker_retry_at.is_some() => in_flight = true,
                NextState::Transition { target, action } => {
                    self.begin_transition(index, target, action, now, effects);
                    acted = true;
                }
            }
        }
        if acted || in_flight {
            return;
        }
        if blocked {
            if !self.dependency_poll_armed {
                self.dependency_poll_armed = true;
                effects.push(Effect::ArmTimer {
                    timer: TimerKind::DependencyPoll,
                    at: now.saturating_add(Self::millis(self.settings.dependency_poll_interval)),
                });
            }
            return;
        }
        if pull_waits {
            self.wait_for_pull_credentials(now, effects);
            return;
        }
        match unable_to_progress(&self.task) {
            ProgressVerdict::GiveUpStopped => {
                effects.push(Effect::Log {
                    level: log::Level::Warn,
                    message: "cannot reach STOPPED by any further step; marking it STOPPED"
                        .to_string(),
                });
                self.task.known_status = TaskStatus::Stopped;
                self.task.known_status_time = Some(now);
                if self.task.stopped_reason.is_none() {
                    self.task.stopped_reason = Some(
                        "TaskStateError: the task could not reach STOPPED; giving up".to_string(),
                    );
                }
                self.dirty = true;
                self.emit_task_event_if_due(now, effects);
                self.enter_stopped(now, effects);
            }
            ProgressVerdict::StopTask => {
                if self.task.stopped_reason.is_none() {
                    self.task.stopped_reason =
                        Some("An essential container cannot make progress".to_string());
                }
                self.own_inbox.push_back(Input::Desired {
                    status: TaskStatus::Stopped,
                    sequence: 0,
                    registered: false,
                });
            }
            ProgressVerdict::Nothing => {}
        }
    }

    /// §2: nothing else can progress and a pull waits for the execution role's credentials:
    /// wait for a message, at most [`PULL_CREDENTIALS_WAIT`], then check again — as often as
    /// it takes; the task does not fail for it.
    fn wait_for_pull_credentials(&mut self, now: Millis, effects: &mut Vec<Effect>) {
        if self.pull_credentials_armed {
            return;
        }
        self.pull_credentials_armed = true;
        effects.push(Effect::Log {
            level: log::Level::Info,
            message: format!(
                "waits to pull: {PULL_CREDENTIALS_REASON}; checking again within {} s",
                PULL_CREDENTIALS_WAIT.as_secs()
            ),
        });
        effects.push(Effect::ArmTimer {
            timer: TimerKind::PullCredentials,
            at: now.saturating_add(Self::millis(PULL_CREDENTIALS_WAIT)),
        });
    }

    /// Records which log driver container `index` runs with, saying once per task (in the log,
    /// with the task id) that an awslogs container runs with the fallback driver instead.
    fn record_log_fallback(
        &mut self,
        index: usize,
        fallback: Option<crate::task::LogFallback>,
        effects: &mut Vec<Effect>,
    ) {
        if let Some(fallback) = &fallback {
            let already_said = self
                .task
                .containers
                .iter()
                .any(|container| container.log_fallback.is_some());
            if !already_said {
                effects.push(Effect::Log {
                    level: log::Level::Warn,
                    message: format!(
                        "container {}: awslogs does not ship logs from this host ({}); its \
                         logs go to the {} driver, readable with deckhand logs (said once per \
                         task; inspect shows LogDriverFallback for each such container)",
                        self.task.containers[index].name(),
                        fallback.reason,
                        fallback.log_driver
                    ),
                });
            }
        }
        self.task.containers[index].log_fallback = fallback;
    }

    /// A no-call STOPPED goes through the task's own inbox so it takes the normal change path.
    pub(super) fn post_synthetic_stop(&mut self, index: usize, error: Option<ContainerError>) {
        let name = self.task.containers[index].name().to_string();
        // Marks the container as having a change pending so the same pass does not post twice.
        self.task.containers[index].applied_status = Some(ContainerStatus::Stopped);
        self.own_inbox.push_back(Input::SyntheticStop {
            container: name,
            error,
        });
    }

    pub(super) fn begin_transition(
        &mut self,
        index: usize,
        target: ContainerStatus,
        action: DockerAction,
        now: Millis,
        effects: &mut Vec<Effect>,
    ) {
        let container = &self.task.containers[index];
        let name = container.name().to_string();
        let call = match action {
            DockerAction::Pull => {
                if self.task.pull_started_at.is_none() {
                    self.task.pull_started_at = Some(now);
                }
                Ok(DockerCall::Pull {
                    container: name.clone(),
                    image: container.definition.image.clone(),
                    credentials_parameter: container.definition.repository_credentials.clone(),
                })
            }
            DockerAction::Create => create_request(&self.task, index, &self.settings.cluster)
                .and_then(|mut spec| {
                    add_metadata_environment(
                        &mut spec,
                        &self.task,
                        index,
                        self.settings.task_metadata.as_ref(),
                    );
                    add_credentials_environment(&mut spec, &self.task, index);
                    let volumes = volume_requirements(&self.task, index, &self.settings.cluster)?;
                    // §13 awslogs: the ECS-only options translated, or the fallback driver.
                    let (log_config, fallback, log_secrets) = docker_log_config(
                        &self.task,
                        &container.definition,
                        &self.settings.aws_logs,
                    );
                    spec.log_config = log_config;
                    let mut secrets = environment_secrets(&container.definition);
                    secrets.extend(log_secrets);
                    let files = prepare_create(
                        &self.task,
                        index,
                        &self.settings.cluster,
                        &self.settings.firelens,
                        &mut spec,
                        &mut secrets,
                    )?;
                    Ok((
                        DockerCall::Create {
                            container: name.clone(),
                            spec: Box::new(spec),
                            volumes,
                            secrets,
                            files: files.map(Box::new),
                            environment_files: container.definition.environment_files.clone(),
                        },
                        fallback,
                    ))
                })
                .map(|(call, fallback)| {
                    self.record_log_fallback(index, fallback, effects);
                    call
                }),
            DockerAction::Start => match &container.docker_id {
                Some(docker_id) => Ok(DockerCall::Start {
                    container: name.clone(),
                    docker_id: docker_id.clone(),
                }),
                None => Err(format!("container {name} has no Docker id to start")),
            },
            DockerAction::Stop => match &container.docker_id {
                Some(docker_id) => Ok(DockerCall::Stop {
                    container: name.clone(),
                    docker_id: docker_id.clone(),
                    grace: stop_grace(container, self.settings.stop_timeout),
                    background: false,
                }),
                None => {
                    // Never created in Docker: nothing to stop.
                    self.post_synthetic_stop(index, None);
                    return;
                }
            },
        };
        self.task.containers[index].applied_status = Some(target);
        self.dirty = true;
        match call {
            Ok(call) => effects.push(Effect::Docker(call)),
            Err(message) => self.own_inbox.push_back(Input::Transition {
                container: name,
                target,
                result: Err(RuntimeError::Api { status: 0, message }),
            }),
        }
    }
}
