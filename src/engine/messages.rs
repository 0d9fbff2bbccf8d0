//! The messages that cross the engine's threads: what a managed task is handed (`Input`), what
//! it asks for (`Effect`, `DockerCall`), what the Docker events thread observes
//! (`DockerObservation`) and the inboxes it routes them to (`TaskRoute`), and the desired-status
//! command the engine sends. Plain data: this module imports none of the engine's threads, so
//! every thread imports it and nothing points back.

use crate::report::NewEvent;
use crate::runtime::{ContainerInfo, CreateContainer, CreateVolume, RuntimeError};
use crate::task::firelens::FirelensPaths;
use crate::task::{ContainerError, ContainerStatus, HealthStatus, Millis, TaskStatus, VolumeScope};
use crossbeam_channel::{bounded, Receiver, Sender};
use std::path::PathBuf;
use std::time::Duration;

/// What one Docker event says about a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DockerObservation {
    /// create → CREATED, start → RUNNING, stop/die → STOPPED (with the die event's exit code).
    Status {
        status: ContainerStatus,
        exit_code: Option<i64>,
        /// When Docker saw it (nanoseconds since the epoch), if the event says.
        at: Option<i64>,
    },
    /// `health_status: …`: a health update only, never a status change.
    Health { health: HealthStatus },
    /// `oom`: the kernel killed a process of the container for exceeding its memory limit.
    /// Docker sends it before the container's `die`, so the task records the out-of-memory
    /// reason at once and its STOPPED event carries it without waiting for an inspection.
    OutOfMemory,
    /// Not an event: the re-list after a reconnect found this container (the routed Docker id)
    /// under the fixed name `docker_name` of one of the task's containers, which never recorded
    /// an id (its create's answer was lost). The task adopts it.
    FoundByName { docker_name: String },
}

/// The timers a task arms; each kind has at most one deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimerKind {
    SteadyCheck,
    DependencyPoll,
    Cleanup,
    /// Docker was away (unreachable, hung): make the calls that failed for it again.
    DockerRetry,
    /// A pull waits for the task's execution-role credentials (§4): check again. The task's
    /// thread also fires it as soon as those credentials are set.
    PullCredentials,
}

/// What a transition worker hands back on success.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TransitionOutput {
    /// Set by a create.
    pub docker_id: Option<String>,
    /// The inspection made after a start or a stop.
    pub info: Option<ContainerInfo>,
}

/// A status that the reporter recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reported {
    Container {
        name: String,
        status: ContainerStatus,
    },
    Task {
        status: TaskStatus,
    },
}

/// Everything that can happen to a task.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// The owner asks for a status. `registered`: the engine added `sequence` to the wait group
    /// for this task, so the task must finish it.
    Desired {
        status: TaskStatus,
        sequence: u64,
        registered: bool,
    },
    /// A transition worker's answer for the call aimed at `target`.
    Transition {
        container: String,
        target: ContainerStatus,
        result: Result<TransitionOutput, RuntimeError>,
    },
    /// An inspection (steady re-check, dependency poll, resync, refresh after `die`).
    Inspected {
        container: String,
        result: Result<ContainerInfo, RuntimeError>,
    },
    /// A Docker event routed to this task by Docker id.
    DockerEvent {
        docker_id: String,
        observation: DockerObservation,
    },
    /// A STOPPED the task posts to itself for a container that needs no Docker call (§3 row 5)
    /// or can never start (§4, with the error naming the dependency).
    SyntheticStop {
        container: String,
        error: Option<ContainerError>,
    },
    /// The answer of a restart (§12) made instead of applying a STOPPED with `exit_code`.
    Restarted {
        container: String,
        exit_code: Option<i64>,
        result: Result<(), RuntimeError>,
    },
    /// The control plane that owns the task acknowledged its report of `status` (§10, ECS):
    /// a task it owns is removed only after it acknowledged STOPPED.
    ControlPlaneReported {
        status: TaskStatus,
    },
    /// Docker events may have been missed: re-inspect.
    Resync,
    /// Every earlier stop finished (§9).
    WaitGroupReady,
    /// The host resources the task needs are its own now (§9a), with the ids of the GPUs it
    /// was given (empty when it asks for none).
    ResourcesReady {
        gpu_ids: Vec<String>,
    },
    TimerFired(TimerKind),
    /// The reporter recorded an event.
    Reported(Reported),
    /// The reporter could not record an event (the durable log failed, with `error`): it is
    /// emitted again at the next re-check (steady state, or cleanup's wait for the STOPPED
    /// report).
    ReportFailed {
        reported: Reported,
        error: String,
    },
    /// The checkpoint asked for by the last `Effect::Checkpoint` is on disk.
    CheckpointWritten,
    /// The checkpoint could not be written (the file on disk is older than the task): the
    /// task writes it again after its next input, and a desired change waiting to be durable
    /// is refused with `error`.
    CheckpointFailed {
        error: String,
    },
    /// Cleanup removed the containers.
    Removed,
    /// Cleanup could not remove everything because Docker was away: it is tried again.
    RemoveDeferred {
        error: RuntimeError,
    },
}

/// A Docker call the loop runs on a worker thread.
#[derive(Debug, Clone, PartialEq)]
pub enum DockerCall {
    Pull {
        container: String,
        image: String,
        /// `repositoryCredentials.credentialsParameter`: the secret-store reference of the
        /// credentials this pull sends, over the `ECS_ENGINE_AUTH_*` ones for its registry.
        credentials_parameter: Option<String>,
    },
    /// Makes each of `volumes` ready first (docs/ENGINE.md §2, Docker volumes), then creates
    /// the container; a volume that cannot be used is the create's error.
    Create {
        container: String,
        spec: Box<CreateContainer>,
        volumes: Vec<VolumeRequirement>,
        /// Read from the secret store and added to `spec` just before the create.
        secrets: Vec<SecretUse>,
        /// The FireLens router's files, written before its create.
        files: Option<Box<FirelensFiles>>,
        /// `environmentFiles` ARNs, read and merged into `spec` just before the create.
        environment_files: Vec<String>,
    },
    Start {
        container: String,
        docker_id: String,
    },
    /// `background`: the result is not a transition of this task (§6 start timeout, §7 re-stop).
    Stop {
        container: String,
        docker_id: String,
        grace: Duration,
        background: bool,
    },
    Inspect {
        container: String,
        docker_id: String,
    },
    /// §12: start an exited container again under its restart policy.
    Restart {
        container: String,
        docker_id: String,
        exit_code: Option<i64>,
    },
    /// Cleanup: force-remove the containers (by id, or by fixed name when a create's answer was
    /// lost) with their anonymous volumes, then the task volumes.
    Remove {
        docker_ids: Vec<String>,
        volumes: Vec<OwnedVolume>,
        /// The task's own directories (its FireLens files), removed once its containers are.
        directories: Vec<std::path::PathBuf>,
    },
}

/// A value the create worker reads from the local secret store and adds to the create request:
/// only the reference travels in the call (and in anything that logs or records it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretUse {
    pub target: SecretTarget,
    /// The environment variable or log option name.
    pub name: String,
    /// The store's key, as the task definition writes it.
    pub value_from: String,
}

/// Where a secret goes in the create request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretTarget {
    /// `secrets[]`: an environment variable (it replaces an `environment` entry of that name,
    /// as ECS merges secrets over the environment).
    Environment,
    /// `logConfiguration.secretOptions[]`: a log option.
    LogOption,
}

/// What the create worker writes before it creates the router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirelensFiles {
    pub paths: FirelensPaths,
    /// The generated configuration.
    pub config: String,
    /// A `config-file-type: s3` file to copy from the mirror.
    pub external: Option<ExternalSource>,
    /// The router's `user`: the socket directory is given to it, as ECS does.
    pub socket_owner: Option<String>,
}

/// An S3 configuration file and where the mirror holds it (`None`: no mirror configured).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalSource {
    pub arn: String,
    pub mirror_path: Option<PathBuf>,
}

/// A Docker volume a container mounts, as the create worker makes it ready: the volume to
/// create when it is missing, and the rules of its scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeRequirement {
    /// The task volume's name in the definition (a shared volume's Docker name too).
    pub task_volume: String,
    /// The Docker volume: its name, driver, driver options and labels.
    pub volume: CreateVolume,
    pub scope: VolumeScope,
    /// Shared only: create the volume when Docker has none of that name.
    pub autoprovision: bool,
}

/// A task-scoped Docker volume cleanup removes: only while it carries no other task's
/// `com.amazonaws.ecs.task-arn` label than `task_arn`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedVolume {
    pub name: String,
    pub task_arn: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Docker(DockerCall),
    /// Record an event; the loop answers with `Input::Reported`.
    Emit {
        event: NewEvent,
        reported: Reported,
    },
    /// The task changed: write the checkpoint and publish the snapshot; the loop answers with
    /// `Input::CheckpointWritten` or `Input::CheckpointFailed`.
    Checkpoint,
    /// Answer whoever waits for the last desired change to be durable: `Ok` once its checkpoint
    /// is written, or why it is not (a stop is acknowledged only after that).
    AcknowledgeDesired {
        result: Result<(), String>,
    },
    /// Something for the agent's log; the loop prefixes the task id.
    Log {
        level: log::Level,
        message: String,
    },
    ArmTimer {
        timer: TimerKind,
        at: Millis,
    },
    /// Start waiting for every stop numbered ≤ `sequence` (§9).
    WaitForStops {
        sequence: u64,
    },
    StopWaitingForStops,
    /// Start waiting to be admitted to the host's resources (§9a).
    WaitForResources,
    /// Give back the host resources the task holds, or leave the queue (§9a); stop waiting.
    ReleaseResources,
    /// The task is STOPPED: its task role's credentials are no longer served (§2 step 5, as the
    /// ECS agent removes them at its task's STOPPED). The execution role's stay until the task is
    /// removed: Docker's awslogs driver may still be shipping the last lines with them.
    DropTaskRoleCredentials,
    /// Finish a stop number this task was handed as registered.
    WaitGroupDone {
        sequence: u64,
    },
    /// Route Docker events for `docker_id` to this task.
    TrackContainer {
        docker_id: String,
    },
    /// The task is cleaned up: forget it.
    Done,
}

/// A Docker event routed to its task: the container's Docker id and what Docker saw. Boxed
/// because a task's inbox is a bounded channel that allocates all its slots up front: a slot
/// holding a pointer instead of the 56-byte pair saves every task about 3.5 KiB, while an event
/// in flight costs one small allocation.
pub type RoutedDockerEvent = Box<(String, DockerObservation)>;

/// The inboxes the engine and the events thread write to.
#[derive(Debug, Clone)]
pub struct TaskRoute {
    pub docker_events: Sender<RoutedDockerEvent>,
    pub resync: Sender<()>,
}

impl TaskRoute {
    /// A route and its receiving ends, for tests of the routing.
    pub fn new_for_test(capacity: usize) -> (TaskRoute, Receiver<RoutedDockerEvent>, Receiver<()>) {
        let (docker_events, docker_events_receiver) = bounded(capacity);
        let (resync, resync_receiver) = bounded(1);
        (
            TaskRoute {
                docker_events,
                resync,
            },
            docker_events_receiver,
            resync_receiver,
        )
    }
}

/// What a task's owner sends on its inbox: a desired status, or the control plane's
/// acknowledgement of a report.
#[derive(Debug, Clone)]
pub enum OwnerCommand {
    Desired(DesiredCommand),
    ControlPlaneReported(TaskStatus),
}

/// A desired-status command on a task's inbox (see [`Input::Desired`]).
#[derive(Debug, Clone)]
pub struct DesiredCommand {
    pub status: TaskStatus,
    pub sequence: u64,
    pub registered: bool,
    /// Answered once the change is durable (its checkpoint written), or with why it is not:
    /// a stop is acknowledged only after that.
    pub durable: Option<Sender<Result<(), String>>>,
}
