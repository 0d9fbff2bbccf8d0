//! Transition workers: each Docker call a managed task asks for runs here, on a thread of the
//! engine's Docker worker pool (`worker_pool.rs`), and comes back to the task as an [`Input`].
//!
//! A task's loop never blocks on Docker, so it keeps answering stops and events while a pull
//! takes minutes. What is decided here is only what needs Docker's answer: whether a pull is
//! needed under the pull behaviour, retrying a failed stop, adopting a container whose name is
//! already taken by an earlier create of the same task.
//!
//! A call can fail, never vanish: every runtime call made here is guarded, so a panic inside it
//! (deckhand choking on an answer it did not expect) is the call's error
//! ([`RuntimeError::Panicked`]) and the rules above apply to it as to any failure — a stop that
//! panics is retried with back-off and then settled by the ping. A panic anywhere else in a call
//! is caught by the pool and answered by [`input_for_panicked_call`], so the task always hears
//! back and its container never stays "in flight".
//!
//! The same guard counts and times every call for the metrics page
//! (`deckhand_docker_requests_total`, `deckhand_docker_request_duration_seconds`): all of a
//! task's Docker calls pass here, so this is the one place they are measured.
//!
//! Rooms: `pull.rs` the pull decisions (§13: whether to pull, whether a failed pull falls back
//! to the local image, the registry credential), `secrets.rs` the secret store's values a create
//! or a pull takes, `execution_role.rs` what AWS answers for them with the task's execution
//! role (SSM, Secrets Manager, the ECR login), `volumes.rs` the Docker volumes a create makes
//! ready and cleanup removes.

mod execution_role;
mod pull;
mod secrets;
mod volumes;

use crate::engine::environment_files::{add_environment_files, EnvironmentFileSource};
use crate::engine::firelens::{remove_directory, write_files};
use crate::engine::image_cleanup::ImageTracker;
use crate::engine::messages::{DockerCall, Input, TransitionOutput};
use crate::engine::transition::{docker_away, DockerCallKind};
use crate::engine::worker_pool::CallClass;
use crate::metrics::{DockerOperation, DockerOutcome};
use crate::registry::RegistryCredentials;
use crate::runtime::{
    ContainerInfo, ContainerRuntime, ContainerSummary, CreateContainer, CreateVolume, EventFilter,
    EventStream, ImageInfo, RegistryAuth, RuntimeError, VolumeInfo,
};
use crate::state::StateStore;
use crate::task::sandbox::SANDBOX_IMAGE;
use crate::task::{ContainerStatus, PullBehavior};
use crate::text::panic_message;
use execution_role::ecr_auth;
pub use execution_role::{names_secrets_manager, ExecutionRoleAws};
pub use pull::{falls_back_to_cached_image, registry_auth_for, should_pull};
use pull::{pull_behavior_name, pull_fallback_logged};
use secrets::{add_secrets, repository_credentials};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use volumes::{prepare_volumes, remove_owned_volume};
pub use volumes::{volume_step, VolumeStep};

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
    /// What each pull sends for its image's registry (§13).
    pub registry_credentials: Arc<RegistryCredentials>,
    /// `DECKHAND_SECRETS_FILE`: read at each create and pull that needs a secret, so a rotated
    /// value is used by the next one; `None`: no store (such a call fails).
    pub secrets_file: Option<std::path::PathBuf>,
    /// The images tasks use, for image cleanup (§15); `None` where nothing tracks them (the
    /// simulator).
    pub images: Option<Arc<ImageTracker>>,
    /// Where `environmentFiles` are read from; `None`: nowhere (such a create fails).
    pub environment_files: Option<Arc<dyn EnvironmentFileSource>>,
    /// SSM, Secrets Manager and ECR for the execution role; `None`: no AWS (the local secret
    /// store alone, no ECR login).
    pub execution_role: Option<Arc<dyn ExecutionRoleAws>>,
    /// Where a task's execution-role credentials are, by its credentials id.
    pub role_credentials: crate::role_credentials::CredentialsStore,
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
            let now = crate::clock::now_millis();
            // Not fatal: at worst the image is pulled once more after a restart.
            if let Err(error) = store.record_image_pulled(image, now) {
                log::warn!("cannot record that image {image} was pulled: {error}");
            }
        }
    }
}

/// `"a", "b"`, for naming references.
pub fn quoted_list(items: &[&str]) -> String {
    items
        .iter()
        .map(|item| format!("{item:?}"))
        .collect::<Vec<_>>()
        .join(", ")
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

/// The Docker operation a call makes, for thread-free log lines and panic reports.
pub fn operation_name(call: &DockerCall) -> &'static str {
    match call {
        DockerCall::Pull { .. } => "pull",
        DockerCall::Create { .. } => "create",
        DockerCall::Start { .. } => "start",
        DockerCall::Stop { .. } => "stop",
        DockerCall::Inspect { .. } => "inspect",
        DockerCall::Remove { .. } => "remove",
        DockerCall::Restart { .. } => "restart",
    }
}

/// Where a call waits in the worker pool's queue.
pub fn call_class(call: &DockerCall) -> CallClass {
    match call {
        DockerCall::Stop { .. } => CallClass::Stop,
        DockerCall::Inspect { .. } => CallClass::Inspect,
        DockerCall::Create { .. }
        | DockerCall::Start { .. }
        | DockerCall::Restart { .. }
        | DockerCall::Remove { .. } => CallClass::Change,
        DockerCall::Pull { .. } => CallClass::Pull,
    }
}

/// The answer for a call whose worker panicked outside a runtime call: the call failed with
/// [`RuntimeError::Panicked`], so the task's error rules apply (§6: a pull per the pull
/// behaviour, a create or start reset and stopped — a start in the background too, since it may
/// have happened —, a stop retried). A removal reports done (cleanup only logs failed removals);
/// a background stop has nobody to answer.
pub fn input_for_panicked_call(call: &DockerCall, message: &str) -> Option<Input> {
    let error = RuntimeError::Panicked {
        operation: operation_name(call).to_string(),
        message: message.to_string(),
    };
    let failed = |container: &String, target| {
        Some(Input::Transition {
            container: container.clone(),
            target,
            result: Err(error.clone()),
        })
    };
    match call {
        DockerCall::Pull { container, .. } => failed(container, ContainerStatus::Pulled),
        DockerCall::Create { container, .. } => failed(container, ContainerStatus::Created),
        DockerCall::Start { container, .. } => failed(container, ContainerStatus::Running),
        DockerCall::Stop {
            background: true, ..
        } => None,
        DockerCall::Stop { container, .. } => failed(container, ContainerStatus::Stopped),
        DockerCall::Inspect { container, .. } => Some(Input::Inspected {
            container: container.clone(),
            result: Err(error),
        }),
        DockerCall::Restart {
            container,
            exit_code,
            ..
        } => Some(Input::Restarted {
            container: container.clone(),
            exit_code: *exit_code,
            result: Err(error),
        }),
        DockerCall::Remove { .. } => Some(Input::Removed),
    }
}

/// The answer for a call that need not be made any more when a worker takes it, or `None` to
/// make it. A pull of a task that is stopping by then is skipped and answered as done, as when
/// the pull behaviour needs no pull: pulls wait last in the pool's queue, possibly behind
/// pulls that take hours, and the task's stop must not wait for them (it goes on to STOPPED
/// without a create).
pub fn answer_without_calling(call: &DockerCall, task_stopping: bool) -> Option<Input> {
    match call {
        DockerCall::Pull { container, .. } if task_stopping => transition(
            container.clone(),
            ContainerStatus::Pulled,
            Ok(TransitionOutput::default()),
        ),
        _ => None,
    }
}

/// How a Docker call ended, as the metrics count it: only a deadline passed and an unreachable
/// socket are told apart from other failures (a panic inside deckhand is an error).
pub fn docker_outcome<T>(result: &Result<T, RuntimeError>) -> DockerOutcome {
    match result {
        Ok(_) => DockerOutcome::Ok,
        Err(RuntimeError::Timeout { .. }) => DockerOutcome::Timeout,
        Err(RuntimeError::Unreachable { .. }) => DockerOutcome::Unreachable,
        Err(_) => DockerOutcome::Error,
    }
}

/// Runs `call`, turning a panic inside it into [`RuntimeError::Panicked`], and counts it with
/// its outcome and duration in the process's metrics.
fn guarded<T>(
    operation: DockerOperation,
    call: impl FnOnce() -> Result<T, RuntimeError>,
) -> Result<T, RuntimeError> {
    let started = Instant::now();
    let result =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).unwrap_or_else(|panic| {
            let message = panic_message(panic.as_ref());
            let operation = operation.description();
            log::error!("Docker {operation} call panicked: {message}");
            Err(RuntimeError::Panicked {
                operation: operation.to_string(),
                message,
            })
        });
    crate::metrics::global().observe_docker_request(
        operation,
        docker_outcome(&result),
        started.elapsed(),
    );
    result
}

/// The runtime as the workers use it: every call [`guarded`].
struct PanicGuard(Arc<dyn ContainerRuntime>);

impl ContainerRuntime for PanicGuard {
    fn pull_image(&self, image: &str, auth: Option<&RegistryAuth>) -> Result<(), RuntimeError> {
        guarded(DockerOperation::Pull, || self.0.pull_image(image, auth))
    }
    fn inspect_image(&self, image: &str) -> Result<ImageInfo, RuntimeError> {
        guarded(DockerOperation::ImageInspect, || {
            self.0.inspect_image(image)
        })
    }
    fn create_container(&self, spec: &CreateContainer) -> Result<String, RuntimeError> {
        guarded(DockerOperation::Create, || self.0.create_container(spec))
    }
    fn start_container(&self, id: &str) -> Result<(), RuntimeError> {
        guarded(DockerOperation::Start, || self.0.start_container(id))
    }
    fn stop_container(&self, id: &str, grace: Duration) -> Result<(), RuntimeError> {
        guarded(DockerOperation::Stop, || self.0.stop_container(id, grace))
    }
    fn inspect_container(&self, id_or_name: &str) -> Result<ContainerInfo, RuntimeError> {
        guarded(DockerOperation::Inspect, || {
            self.0.inspect_container(id_or_name)
        })
    }
    fn remove_container(&self, id: &str, volumes: bool) -> Result<(), RuntimeError> {
        guarded(DockerOperation::Remove, || {
            self.0.remove_container(id, volumes)
        })
    }
    fn list_containers(&self, labels: &[String]) -> Result<Vec<ContainerSummary>, RuntimeError> {
        guarded(DockerOperation::List, || self.0.list_containers(labels))
    }
    fn events(&self, filter: &EventFilter) -> Result<Box<dyn EventStream>, RuntimeError> {
        guarded(DockerOperation::Events, || self.0.events(filter))
    }
    fn ping(&self) -> Result<(), RuntimeError> {
        guarded(DockerOperation::Ping, || self.0.ping())
    }
    fn remove_volume(&self, name: &str) -> Result<(), RuntimeError> {
        guarded(DockerOperation::VolumeRemove, || self.0.remove_volume(name))
    }
    fn create_volume(&self, spec: &CreateVolume) -> Result<(), RuntimeError> {
        guarded(DockerOperation::VolumeCreate, || self.0.create_volume(spec))
    }
    fn inspect_volume(&self, name: &str) -> Result<Option<VolumeInfo>, RuntimeError> {
        guarded(DockerOperation::VolumeInspect, || {
            self.0.inspect_volume(name)
        })
    }
    fn import_image(
        &self,
        tarball: &[u8],
        repository: &str,
        tag: &str,
    ) -> Result<String, RuntimeError> {
        guarded(DockerOperation::ImageImport, || {
            self.0.import_image(tarball, repository, tag)
        })
    }
}

/// Runs one call of task `task_id` with image tracking (§15): a pull waits while image cleanup
/// removes an image, and a pull step that succeeded records that the task uses the image
/// (its id from an inspection; an image Docker does not have is not recorded: the create that
/// follows fails anyway).
pub fn run_task_docker_call(
    context: &WorkerContext,
    task_id: &str,
    execution_id: Option<&str>,
    call: DockerCall,
) -> Option<Input> {
    let (Some(images), DockerCall::Pull { image, .. }) = (&context.images, &call) else {
        return run_docker_call_for(context, call, execution_id);
    };
    let (images, image) = (Arc::clone(images), image.clone());
    images.before_pull();
    let answer = run_docker_call_for(context, call, execution_id);
    if let Some(Input::Transition { result: Ok(_), .. }) = &answer {
        match guarded(DockerOperation::ImageInspect, || {
            context.runtime.inspect_image(&image)
        }) {
            Ok(info) if !info.id.is_empty() => {
                images.record_use(task_id, &image, &info.id, crate::clock::now_millis())
            }
            Ok(_) => {}
            Err(error) => log::debug!("task {task_id}: image {image} not recorded: {error}"),
        }
    }
    answer
}

/// Runs one call of a task without an execution role and returns the input to post to the task.
pub fn run_docker_call(context: &WorkerContext, call: DockerCall) -> Option<Input> {
    run_docker_call_for(context, call, None)
}

/// Runs one call of a task whose execution-role credentials id is `execution_id` and returns
/// the input to post to the task (`None`: nothing to post).
pub fn run_docker_call_for(
    context: &WorkerContext,
    call: DockerCall,
    execution_id: Option<&str>,
) -> Option<Input> {
    let guard = PanicGuard(Arc::clone(&context.runtime));
    let runtime: &dyn ContainerRuntime = &guard;
    match call {
        DockerCall::Pull {
            container, image, ..
        } if image == SANDBOX_IMAGE => {
            // Never from a registry: made here, once per host (and again if removed).
            let result = crate::engine::sandbox_image::ensure_sandbox_image(runtime)
                .map(|()| TransitionOutput::default());
            transition(container, ContainerStatus::Pulled, result)
        }
        DockerCall::Pull {
            container,
            image,
            credentials_parameter,
        } => {
            // repositoryCredentials: read from the store (else Secrets Manager) now, over
            // ECS_ENGINE_AUTH_* for this pull; a reference that cannot be answered fails the
            // pull without calling Docker. An ECR image the configuration has no credentials
            // for gets ECR's login; a login that cannot be had is the pull's error.
            let auth = match &credentials_parameter {
                Some(reference) => {
                    match repository_credentials(context, reference, &image, execution_id) {
                        Ok(auth) => Ok(Some(auth)),
                        Err(error) => {
                            return transition(container, ContainerStatus::Pulled, Err(error));
                        }
                    }
                }
                None => match registry_auth_for(context, &image) {
                    Some(auth) => Ok(Some(auth)),
                    None => ecr_auth(context, execution_id, &image).transpose(),
                },
            };
            let pulled_before = context.pulled_before(&image);
            let pull = should_pull(context.pull_behavior, pulled_before, || {
                runtime.inspect_image(&image).is_ok()
            });
            let result = if pull {
                match auth.and_then(|auth| runtime.pull_image(&image, auth.as_ref())) {
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
        DockerCall::Create {
            container,
            mut spec,
            volumes,
            secrets,
            files,
            environment_files,
        } => {
            // ECS's order: the files under `environment`, secrets over both.
            let result = add_environment_files(
                context.environment_files.as_deref(),
                &mut spec,
                &environment_files,
            )
            .and_then(|()| add_secrets(context, &mut spec, &secrets, execution_id))
            .and_then(|()| files.map_or(Ok(()), |files| write_files(&files)))
            .and_then(|()| prepare_volumes(runtime, &volumes))
            .and_then(|()| create_or_adopt(runtime, &spec));
            // The values leave with the create body; nothing else keeps them.
            drop(spec);
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
            let result =
                stop_with_retries(runtime, context.stop_retry, &docker_id, grace).map(|()| {
                    TransitionOutput {
                        docker_id: None,
                        info: runtime.inspect_container(&docker_id).ok(),
                    }
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
        } => {
            let result = runtime.start_container(&docker_id);
            if result.is_ok() {
                crate::metrics::global().container_restarted();
            }
            Some(Input::Restarted {
                container,
                exit_code,
                result,
            })
        }
        DockerCall::Remove {
            docker_ids,
            volumes,
            directories,
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
                match remove_owned_volume(runtime, &volume) {
                    Ok(()) => {}
                    Err(error) if docker_away(DockerCallKind::Remove, &error) => away = Some(error),
                    Err(error) => log::warn!("cannot remove volume {}: {error}", volume.name),
                }
            }
            // The task's files go with its last container (a router's socket directory is
            // mounted until then); a deferred removal leaves them for the next attempt.
            if away.is_none() {
                for directory in directories {
                    if let Err(error) = remove_directory(&directory) {
                        log::warn!("cannot remove {}: {error}", directory.display());
                    }
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
/// Docker is pinged: if it answers, the stop is asked once more, and only a stop Docker answered
/// and still did not confirm (a wedged stop: a timeout, an error status) is treated as done, so
/// that it cannot pin the task; if Docker does not answer, the daemon is down and the stop fails
/// as "unreachable", which the task waits out (the container stays RUNNING until Docker confirms
/// the stop).
fn stop_with_retries(
    runtime: &dyn ContainerRuntime,
    retry: StopRetry,
    docker_id: &str,
    grace: Duration,
) -> Result<(), RuntimeError> {
    let mut backoff = retry.initial_backoff;
    let mut last_error = None;
    for attempt in 0..retry.attempts.max(1) {
        if attempt > 0 {
            std::thread::sleep(backoff);
            backoff = backoff.mul_f64(1.3).min(retry.maximum_backoff);
        }
        match runtime.stop_container(docker_id, grace) {
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
    match runtime.ping() {
        // Docker answers now, but the failures may have been Docker being away (restarting, its
        // socket cut) rather than a wedged stop: ask once more before deciding. A connection
        // failure again is Docker away, which the task waits out with the container RUNNING.
        Ok(()) => match runtime.stop_container(docker_id, grace) {
            Ok(()) => Ok(()),
            Err(error @ RuntimeError::NoSuchContainer { .. }) => Err(error),
            Err(error @ (RuntimeError::Unreachable { .. } | RuntimeError::Protocol { .. })) => {
                Err(RuntimeError::Unreachable {
                    message: format!(
                        "the stop failed again after Docker answered a ping ({error})"
                    ),
                })
            }
            Err(error) => {
                log::warn!(
                    "container {docker_id} did not confirm its stop ({error}); Docker answers, so treating it as stopped"
                );
                Ok(())
            }
        },
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
    use crate::engine::messages::VolumeRequirement;
    use crate::engine::transition::{classify_error, error_outcome, ErrorOutcome};
    use crate::task::VolumeScope;

    #[test]
    fn a_call_that_panicked_answers_as_a_failed_call_the_error_rules_handle() {
        let container = || "app".to_string();
        let docker_id = || "id-1".to_string();
        let panicked = |operation: &str| RuntimeError::Panicked {
            operation: operation.to_string(),
            message: "boom".to_string(),
        };
        let transition = |target, operation: &str| {
            Some(Input::Transition {
                container: container(),
                target,
                result: Err(panicked(operation)),
            })
        };
        let stop = |background| DockerCall::Stop {
            container: container(),
            docker_id: docker_id(),
            grace: Duration::from_secs(30),
            background,
        };
        // (call, the answer the task gets)
        let table = [
            (
                DockerCall::Pull {
                    container: container(),
                    image: "app:1".to_string(),
                    credentials_parameter: None,
                },
                transition(ContainerStatus::Pulled, "pull"),
            ),
            (
                DockerCall::Create {
                    container: container(),
                    spec: Box::default(),
                    volumes: Vec::new(),
                    secrets: Vec::new(),
                    files: None,
                    environment_files: Vec::new(),
                },
                transition(ContainerStatus::Created, "create"),
            ),
            (
                DockerCall::Start {
                    container: container(),
                    docker_id: docker_id(),
                },
                transition(ContainerStatus::Running, "start"),
            ),
            (stop(false), transition(ContainerStatus::Stopped, "stop")),
            (stop(true), None),
            (
                DockerCall::Inspect {
                    container: container(),
                    docker_id: docker_id(),
                },
                Some(Input::Inspected {
                    container: container(),
                    result: Err(panicked("inspect")),
                }),
            ),
            (
                DockerCall::Restart {
                    container: container(),
                    docker_id: docker_id(),
                    exit_code: Some(1),
                },
                Some(Input::Restarted {
                    container: container(),
                    exit_code: Some(1),
                    result: Err(panicked("restart")),
                }),
            ),
            (
                DockerCall::Remove {
                    docker_ids: vec![docker_id()],
                    volumes: Vec::new(),
                    directories: Vec::new(),
                },
                Some(Input::Removed),
            ),
        ];
        for (call, expected) in table {
            assert_eq!(input_for_panicked_call(&call, "boom"), expected, "{call:?}");
        }
        assert_eq!(
            panicked("start").to_string(),
            "Docker start call panicked: boom"
        );
    }

    fn labels(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    }

    #[test]
    fn a_volume_is_created_used_or_refused_by_its_scope_and_what_docker_has() {
        let requirement = |scope, autoprovision| VolumeRequirement {
            task_volume: "db".into(),
            volume: CreateVolume {
                name: "db".into(),
                driver: "local".into(),
                driver_opts: labels(&[("type", "tmpfs")]),
                labels: labels(&[("app", "shop")]),
            },
            scope,
            autoprovision,
        };
        let existing = |driver: &str, options: &[(&str, &str)], volume_labels: &[(&str, &str)]| {
            Some(VolumeInfo {
                name: "db".into(),
                driver: driver.into(),
                options: labels(options),
                labels: labels(volume_labels),
            })
        };
        let same = existing("local", &[("type", "tmpfs")], &[("app", "shop")]);
        let mismatch = |what: &str, existing: &str, expected: &str| {
            Err(format!(
                "initialize volume: volume 'db' does not match existing volume {what}: \
                 existing: {existing}, expected: {expected}"
            ))
        };
        let missing = Err(
            "initialize volume: volume detection failed, volume 'db' does not \
                           exist and autoprovision is set to false"
                .to_string(),
        );
        let (task, shared) = (VolumeScope::Task, VolumeScope::Shared);
        // (scope, autoprovision, what Docker has, step)
        let table = [
            (task, false, None, Ok(VolumeStep::Create)),
            (task, false, same.clone(), Ok(VolumeStep::UseExisting)),
            // This task's own volume from an earlier attempt of the create: whatever it holds.
            (
                task,
                false,
                existing("other", &[], &[]),
                Ok(VolumeStep::UseExisting),
            ),
            (shared, true, None, Ok(VolumeStep::Create)),
            (shared, false, None, missing),
            (shared, true, same.clone(), Ok(VolumeStep::UseExisting)),
            // Made outside deckhand and not autoprovisioned: used as it is (ECS checks only
            // that it exists).
            (
                shared,
                false,
                existing("other", &[], &[]),
                Ok(VolumeStep::UseExisting),
            ),
            (
                shared,
                true,
                existing("rexray", &[("type", "tmpfs")], &[("app", "shop")]),
                mismatch("driver", "\"rexray\"", "\"local\""),
            ),
            (
                shared,
                true,
                existing("local", &[("type", "tmpfs")], &[]),
                mismatch("labels", "{}", "{\"app\": \"shop\"}"),
            ),
            (
                shared,
                true,
                existing(
                    "local",
                    &[("type", "tmpfs"), ("o", "size=1m")],
                    &[("app", "shop")],
                ),
                mismatch(
                    "options",
                    "{\"o\": \"size=1m\", \"type\": \"tmpfs\"}",
                    "{\"type\": \"tmpfs\"}",
                ),
            ),
        ];
        for (scope, autoprovision, found, expected) in table {
            assert_eq!(
                volume_step(&requirement(scope, autoprovision), found.as_ref()),
                expected,
                "{scope:?} autoprovision={autoprovision} found={found:?}"
            );
        }
    }

    #[test]
    fn only_a_pull_of_a_stopping_task_is_answered_without_calling_docker() {
        let pull = DockerCall::Pull {
            container: "app".to_string(),
            image: "app:1".to_string(),
            credentials_parameter: None,
        };
        let stop = DockerCall::Stop {
            container: "app".to_string(),
            docker_id: "id-1".to_string(),
            grace: Duration::from_secs(30),
            background: false,
        };
        let start = DockerCall::Start {
            container: "app".to_string(),
            docker_id: "id-1".to_string(),
        };
        let pulled = Some(Input::Transition {
            container: "app".to_string(),
            target: ContainerStatus::Pulled,
            result: Ok(TransitionOutput::default()),
        });
        // (call, task stopping, answer)
        let table = [
            (&pull, true, pulled),
            (&pull, false, None),
            (&stop, true, None),
            (&start, true, None),
        ];
        for (call, stopping, expected) in table {
            assert_eq!(
                answer_without_calling(call, stopping),
                expected,
                "{call:?} stopping={stopping}"
            );
        }
    }

    #[test]
    fn a_panicked_start_is_reset_and_stopped_and_a_panicked_stop_is_tried_again() {
        let error = RuntimeError::Panicked {
            operation: "call".to_string(),
            message: "boom".to_string(),
        };
        // (target, outcome): a start may have happened, so it is stopped in the background too.
        let table = [
            (
                ContainerStatus::Running,
                ErrorOutcome {
                    reset_known: true,
                    container_desired_stopped: true,
                    stop_in_background: true,
                    ..ErrorOutcome::default()
                },
            ),
            (
                ContainerStatus::Stopped,
                ErrorOutcome {
                    reset_known: true,
                    ..ErrorOutcome::default()
                },
            ),
            (
                ContainerStatus::Created,
                ErrorOutcome {
                    reset_known: true,
                    container_desired_stopped: true,
                    ..ErrorOutcome::default()
                },
            ),
        ];
        for (target, expected) in table {
            let classified = classify_error(target, &error);
            assert_eq!(classified.message, "Docker call call panicked: boom");
            assert_eq!(
                error_outcome(target, &classified, PullBehavior::Default),
                expected,
                "{target:?}"
            );
        }
    }

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

    #[test]
    fn a_pull_sends_the_credential_of_its_images_registry_and_debug_hides_the_password() {
        let data = r#"{"127.0.0.1:5000": {"username": "deck", "password": "w0rker-Secret"},
                       "https://index.docker.io/v1/": {"username": "hub", "password": "w0rker-Secret"}}"#;
        let credentials =
            crate::registry::parse_auth_data(crate::registry::AuthDataFormat::Docker, data)
                .expect("valid data");
        let (pulls, _pulled) = crossbeam_channel::unbounded();
        let context = WorkerContext {
            runtime: Arc::new(crate::engine::test_support::UnitRuntime {
                pulls,
                inspect_answer: None,
            }),
            pull_behavior: PullBehavior::Always,
            pulled_images: Arc::default(),
            stop_retry: StopRetry::default(),
            store: None,
            registry_credentials: Arc::new(credentials),
            secrets_file: None,
            environment_files: None,
            images: None,
            execution_role: None,
            role_credentials: Default::default(),
        };
        let table = [
            (
                "127.0.0.1:5000/team/app:v1",
                Some(("deck", "127.0.0.1:5000")),
            ),
            ("busybox", Some(("hub", "https://index.docker.io/v1/"))),
            ("127.0.0.1:5001/team/app:v1", None),
            ("registry.example.com/app", None),
        ];
        for (image, expected) in table {
            let auth = registry_auth_for(&context, image);
            assert_eq!(
                auth.as_ref()
                    .map(|auth| (auth.username.as_str(), auth.server_address.as_str())),
                expected,
                "{image}"
            );
            if let Some(auth) = auth {
                assert_eq!(auth.password, "w0rker-Secret");
                let debug = format!("{auth:?}");
                assert!(
                    !debug.contains("w0rker-Secret") && debug.contains("<redacted>"),
                    "{debug}"
                );
            }
        }
        let engine_config = crate::engine::EngineConfig {
            registry_credentials: Arc::clone(&context.registry_credentials),
            ..crate::engine::EngineConfig::default()
        };
        let debug = format!("{engine_config:?}");
        assert!(
            !debug.contains("w0rker-Secret") && debug.contains("<redacted>"),
            "{debug}"
        );
    }
}
