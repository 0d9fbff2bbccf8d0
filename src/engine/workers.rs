//! Transition workers: each Docker call a managed task asks for runs here, on a short-lived
//! thread of its own, and comes back to the task as an [`Input`].
//!
//! A task's loop never blocks on Docker, so it keeps answering stops and events while a pull
//! takes minutes. What is decided here is only what needs Docker's answer: whether a pull is
//! needed under the pull behaviour, retrying a failed stop, adopting a container whose name is
//! already taken by an earlier create of the same task.

use crate::engine::managed_task::{DockerCall, Input, TransitionOutput};
use crate::engine::transition::{docker_away, DockerCallKind};
use crate::runtime::{ContainerRuntime, RuntimeError};
use crate::state::StateStore;
use crate::task::{ContainerStatus, PullBehavior};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How a failed stop is retried before the task hears of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StopRetry {
    pub attempts: u32,
    pub initial_backoff: Duration,
    pub maximum_backoff: Duration,
}

impl Default for StopRetry {
    fn default() -> StopRetry {
        StopRetry {
            attempts: 5,
            initial_backoff: Duration::from_secs(1),
            maximum_backoff: Duration::from_secs(5),
        }
    }
}

/// What the workers share with the engine.
#[derive(Clone)]
pub struct WorkerContext {
    pub runtime: Arc<dyn ContainerRuntime>,
    pub pull_behavior: PullBehavior,
    /// Images this agent pulled successfully (for `once`) during this run.
    pub pulled_images: Arc<Mutex<HashSet<String>>>,
    pub stop_retry: StopRetry,
    /// The durable record of pulled images (kept across restarts), when the engine has a store.
    pub store: Option<Arc<StateStore>>,
}

impl WorkerContext {
    fn pulled_before(&self, image: &str) -> bool {
        self.store
            .as_ref()
            .is_some_and(|store| store.image_pulled(image))
            || self
                .pulled_images
                .lock()
                .unwrap_or_else(|poison| poison.into_inner())
                .contains(image)
    }

    fn record_pulled(&self, image: &str) {
        self.pulled_images
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .insert(image.to_string());
        if let Some(store) = &self.store {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX))
                .unwrap_or(0);
            // Not fatal: at worst the image is pulled once more after a restart.
            if let Err(error) = store.record_image_pulled(image, now) {
                log::warn!("cannot record that image {image} was pulled: {error}");
            }
        }
    }
}

/// §13: whether to pull under `behavior`. `present_locally` is only asked for `prefer-cached`.
pub fn should_pull(
    behavior: PullBehavior,
    pulled_by_this_agent: bool,
    present_locally: impl FnOnce() -> bool,
) -> bool {
    match behavior {
        PullBehavior::Default | PullBehavior::Always => true,
        PullBehavior::Once => !pulled_by_this_agent,
        PullBehavior::PreferCached => !present_locally(),
    }
}

/// §13: whether a failed pull continues with the image Docker already has. Only `default` and
/// `prefer-cached` continue, and only when the image is there: otherwise the pull error stands
/// (and the create that follows fails with it). `present_locally` is asked only when it matters.
pub fn falls_back_to_cached_image(
    behavior: PullBehavior,
    present_locally: impl FnOnce() -> bool,
) -> bool {
    match behavior {
        PullBehavior::Default | PullBehavior::PreferCached => present_locally(),
        PullBehavior::Always | PullBehavior::Once => false,
    }
}

fn pull_behavior_name(behavior: PullBehavior) -> &'static str {
    match behavior {
        PullBehavior::Default => "default",
        PullBehavior::Always => "always",
        PullBehavior::Once => "once",
        PullBehavior::PreferCached => "prefer-cached",
    }
}

/// Images whose failed pull was already logged, process-wide: a host with no registry runs
/// many containers of one local image, and one line says all there is to say. `failed: true`
/// records the image and returns whether it was already there; `false` (a pull succeeded)
/// forgets it, so a later failure is logged again.
fn pull_fallback_logged(image: &str, failed: bool) -> bool {
    static LOGGED: std::sync::OnceLock<Mutex<HashSet<String>>> = std::sync::OnceLock::new();
    let mut logged = LOGGED
        .get_or_init(|| Mutex::new(HashSet::new()))
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    if failed {
        !logged.insert(image.to_string())
    } else {
        logged.remove(image);
        false
    }
}

fn transition(
    container: String,
    target: ContainerStatus,
    result: Result<TransitionOutput, RuntimeError>,
) -> Option<Input> {
    Some(Input::Transition {
        container,
        target,
        result,
    })
}

/// Runs one call and returns the input to post to the task (`None`: nothing to post).
pub fn run_docker_call(context: &WorkerContext, call: DockerCall) -> Option<Input> {
    let runtime = &context.runtime;
    match call {
        DockerCall::Pull { container, image } => {
            let pulled_before = context.pulled_before(&image);
            let pull = should_pull(context.pull_behavior, pulled_before, || {
                runtime.inspect_image(&image).is_ok()
            });
            let result = if pull {
                match runtime.pull_image(&image, None) {
                    Ok(()) => {
                        context.record_pulled(&image);
                        pull_fallback_logged(&image, false);
                        Ok(TransitionOutput::default())
                    }
                    Err(error)
                        if falls_back_to_cached_image(context.pull_behavior, || {
                            runtime.inspect_image(&image).is_ok()
                        }) =>
                    {
                        // Not an error of the container: it runs the image the owner had. Said
                        // once per image until a pull of it succeeds, not once per container.
                        if !pull_fallback_logged(&image, true) {
                            log::info!(
                                "cannot pull image {image} ({error}); using the local copy \
                                 (pull behavior {}); this is not logged again for {image} \
                                 until a pull of it succeeds",
                                pull_behavior_name(context.pull_behavior)
                            );
                        }
                        Ok(TransitionOutput::default())
                    }
                    Err(error) => Err(error),
                }
            } else {
                Ok(TransitionOutput::default())
            };
            transition(container, ContainerStatus::Pulled, result)
        }
        DockerCall::Create { container, spec } => {
            let result = create_or_adopt(runtime.as_ref(), &spec);
            transition(
                container,
                ContainerStatus::Created,
                result.map(|docker_id| TransitionOutput {
                    docker_id: Some(docker_id),
                    info: None,
                }),
            )
        }
        DockerCall::Start {
            container,
            docker_id,
        } => {
            let result = runtime
                .start_container(&docker_id)
                .map(|()| TransitionOutput {
                    docker_id: None,
                    // Ports and start time; the start itself succeeded even if this fails.
                    info: runtime.inspect_container(&docker_id).ok(),
                });
            transition(container, ContainerStatus::Running, result)
        }
        DockerCall::Stop {
            container,
            docker_id,
            grace,
            background,
        } => {
            let result = stop_with_retries(context, &docker_id, grace).map(|()| TransitionOutput {
                docker_id: None,
                info: runtime.inspect_container(&docker_id).ok(),
            });
            if background {
                if let Err(error) = result {
                    log::warn!("background stop of container {container} failed: {error}");
                }
                return None;
            }
            transition(container, ContainerStatus::Stopped, result)
        }
        DockerCall::Inspect {
            container,
            docker_id,
        } => Some(Input::Inspected {
            container,
            result: runtime.inspect_container(&docker_id),
        }),
        DockerCall::Restart {
            container,
            docker_id,
            exit_code,
        } => Some(Input::Restarted {
            container,
            exit_code,
            result: runtime.start_container(&docker_id),
        }),
        DockerCall::Remove {
            docker_ids,
            volumes,
        } => {
            // Docker being away is not a refusal: the task tries the whole removal again later
            // (what is gone already answers "no such container").
            let mut away = None;
            for docker_id in docker_ids {
                match runtime.remove_container(&docker_id, true) {
                    Ok(()) | Err(RuntimeError::NoSuchContainer { .. }) => {}
                    Err(error) if docker_away(DockerCallKind::Remove, &error) => away = Some(error),
                    Err(error) => log::warn!("cannot remove container {docker_id}: {error}"),
                }
            }
            for volume in volumes {
                match runtime.remove_volume(&volume) {
                    Ok(()) => {}
                    Err(error) if docker_away(DockerCallKind::Remove, &error) => away = Some(error),
                    Err(error) => log::warn!("cannot remove volume {volume}: {error}"),
                }
            }
            Some(match away {
                Some(error) => Input::RemoveDeferred { error },
                None => Input::Removed,
            })
        }
    }
}

/// How long a create whose name is taken keeps looking for the container holding it.
const ADOPT_DEADLINE: Duration = Duration::from_secs(10);
const ADOPT_POLL: Duration = Duration::from_millis(50);

/// Creates the container, or adopts the one that already holds its fixed name.
///
/// The name is fixed before create and saved, so a conflict means an earlier create of this very
/// container got through (its answer was lost, or the agent was killed before it came). Docker
/// reserves a name before the container can be inspected, so right after a crash the name can
/// be taken while no container answers to it yet: look again for a while, and create again if
/// the reservation went away (the earlier create failed after all).
fn create_or_adopt(
    runtime: &dyn ContainerRuntime,
    spec: &crate::runtime::CreateContainer,
) -> Result<String, RuntimeError> {
    let deadline = std::time::Instant::now() + ADOPT_DEADLINE;
    loop {
        let message = match runtime.create_container(spec) {
            Ok(docker_id) => return Ok(docker_id),
            Err(RuntimeError::Conflict { message }) => message,
            Err(error) => return Err(error),
        };
        match runtime.inspect_container(&spec.name) {
            Ok(info) => {
                log::info!(
                    "container {} already exists (an earlier create got through): adopting {}",
                    spec.name,
                    info.id
                );
                return Ok(info.id);
            }
            Err(RuntimeError::NoSuchContainer { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(ADOPT_POLL);
            }
            // Docker went away between the two calls: not a refusal of the create.
            Err(error) if docker_away(DockerCallKind::Inspect, &error) => return Err(error),
            Err(_) => return Err(RuntimeError::Conflict { message }),
        }
    }
}

/// Stops a container, retrying with back-off unless it does not exist. After the retries,
/// Docker is pinged: if it answers, the container is treated as stopped so that a wedged stop
/// cannot pin the task; if not, the daemon is down and the stop fails as "unreachable", which
/// the task waits out (the container stays RUNNING until Docker confirms the stop).
fn stop_with_retries(
    context: &WorkerContext,
    docker_id: &str,
    grace: Duration,
) -> Result<(), RuntimeError> {
    let retry = context.stop_retry;
    let mut backoff = retry.initial_backoff;
    let mut last_error = None;
    for attempt in 0..retry.attempts.max(1) {
        if attempt > 0 {
            std::thread::sleep(backoff);
            backoff = backoff.mul_f64(1.3).min(retry.maximum_backoff);
        }
        match context.runtime.stop_container(docker_id, grace) {
            Ok(()) => return Ok(()),
            Err(error @ RuntimeError::NoSuchContainer { .. }) => return Err(error),
            Err(error) => {
                log::info!(
                    "stop of container {docker_id} failed (attempt {}): {error}",
                    attempt + 1
                );
                last_error = Some(error);
            }
        }
    }
    match context.runtime.ping() {
        Ok(()) => {
            log::warn!("container {docker_id} did not confirm its stop; Docker answers, so treating it as stopped");
            Ok(())
        }
        Err(ping_error) => Err(RuntimeError::Unreachable {
            message: match last_error {
                Some(error) => format!(
                    "the stop failed ({error}) and Docker does not answer a ping ({ping_error})"
                ),
                None => format!("Docker does not answer a ping ({ping_error})"),
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_pull_continues_only_with_a_local_image_under_default_and_prefer_cached() {
        // (behaviour, present locally, continue?)
        let table = [
            (PullBehavior::Default, true, true),
            (PullBehavior::Default, false, false),
            (PullBehavior::PreferCached, true, true),
            (PullBehavior::PreferCached, false, false),
            (PullBehavior::Always, true, false),
            (PullBehavior::Once, true, false),
        ];
        for (behavior, present, expected) in table {
            assert_eq!(
                falls_back_to_cached_image(behavior, || present),
                expected,
                "{behavior:?} present={present}"
            );
        }
    }

    #[test]
    fn a_pull_fallback_is_logged_once_per_image_until_a_pull_succeeds() {
        let image = "deckhand-unit/fallback-logged:1";
        assert!(!pull_fallback_logged(image, true), "first failure logs");
        assert!(pull_fallback_logged(image, true), "second one does not");
        assert!(
            !pull_fallback_logged("deckhand-unit/other:1", true),
            "per image"
        );
        pull_fallback_logged(image, false);
        assert!(
            !pull_fallback_logged(image, true),
            "logged again after a success"
        );
    }

    #[test]
    fn pull_decision_per_behaviour() {
        // (behaviour, pulled by this agent, present locally, pull?)
        let table = [
            (PullBehavior::Default, false, false, true),
            (PullBehavior::Default, true, true, true),
            (PullBehavior::Always, true, true, true),
            (PullBehavior::Once, false, true, true),
            (PullBehavior::Once, true, false, false),
            (PullBehavior::PreferCached, false, true, false),
            (PullBehavior::PreferCached, true, false, true),
        ];
        for (behavior, pulled, present, expected) in table {
            assert_eq!(
                should_pull(behavior, pulled, || present),
                expected,
                "{behavior:?} pulled={pulled} present={present}"
            );
        }
    }
}
