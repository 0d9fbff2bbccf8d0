//! What the task engine shares with its managed tasks' threads: the reporter, the wait group,
//! the host-resource queue, the Docker-id index, the Docker worker pool, the checkpoint store, the published snapshots and
//! the command lock under which a task is forgotten. Below both the engine and the driver: it
//! imports only the messages and the services it holds, never a thread's code.

use crate::engine::docker_events::DockerIndex;
use crate::engine::host_resources::HostResourceQueue;
use crate::engine::messages::{OwnerCommand, TaskRoute};
use crate::engine::wait_group::SequentialWaitGroup;
use crate::engine::worker_pool::DockerPool;
use crate::engine::workers::WorkerContext;
use crate::report::EventLog;
use crate::state::{StateError, StateStore};
use crate::task::Task;
use crossbeam_channel::{Receiver, Sender};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// A running managed task, as the engine holds it.
pub(crate) struct TaskHandle {
    pub(crate) desired: Sender<OwnerCommand>,
    /// Sending (or dropping) ends the task's loop.
    pub(crate) shutdown: Sender<()>,
    /// Whether a stop number was registered for this task (only the first stop is).
    pub(crate) stop_registered: bool,
    pub(crate) thread: Option<JoinHandle<()>>,
    /// The task's Docker-event inboxes, for the re-list after a reconnect (a container found by
    /// name is handed to its task here, since no Docker id routes to it yet).
    pub(crate) route: TaskRoute,
}

#[derive(Default)]
pub(crate) struct Commands {
    pub(crate) last_sequence: u64,
    pub(crate) shutting_down: bool,
    pub(crate) tasks: HashMap<String, TaskHandle>,
}

/// What the engine shares with its managed tasks and their workers.
pub(crate) struct TaskShared {
    pub(crate) reporter: Arc<EventLog>,
    pub(crate) wait_group: Arc<SequentialWaitGroup>,
    /// Memory, CPU and host ports: who holds what, and who waits in which order (§9a).
    pub(crate) host_resources: HostResourceQueue,
    pub(crate) docker_index: Arc<DockerIndex>,
    pub(crate) worker_context: WorkerContext,
    /// Makes every task's Docker calls, a fixed number at a time.
    pub(crate) docker_pool: DockerPool,
    /// Where tasks are checkpointed; `None` for an engine that keeps nothing on disk (tests).
    pub(crate) store: Option<Arc<StateStore>>,
    /// The latest published state of every task; only each task's own thread writes its entry.
    pub(crate) snapshots: Mutex<BTreeMap<String, Task>>,
    /// Signalled whenever a snapshot is published or removed.
    pub(crate) snapshot_changed: Condvar,
    pub(crate) commands: Mutex<Commands>,
    /// The credentials of tasks' IAM roles: a task's are forgotten when it is cleaned up.
    pub(crate) role_credentials: crate::role_credentials::CredentialsStore,
}

impl TaskShared {
    pub(crate) fn commands(&self) -> MutexGuard<'_, Commands> {
        self.commands
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    pub(crate) fn snapshots(&self) -> MutexGuard<'_, BTreeMap<String, Task>> {
        self.snapshots
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    pub(crate) fn publish_snapshot(&self, task: &Task) {
        self.snapshots().insert(task.id.clone(), task.clone());
        self.snapshot_changed.notify_all();
    }

    /// Writes a task's checkpoint durably (nothing to do without a store): for a submitted
    /// task, which must be on disk before `submit` answers.
    pub(crate) fn checkpoint(&self, task: &Task) -> Result<(), StateError> {
        match &self.store {
            Some(store) => store.save_task(task),
            None => Ok(()),
        }
    }

    /// Writes a task's checkpoint to the state log without waiting for the disk: durable with
    /// the next [`TaskShared::sync`] or event (a managed task's change).
    pub(crate) fn record_checkpoint(&self, task: &Task) -> Result<(), StateError> {
        match &self.store {
            Some(store) => store.record_task(task),
            None => Ok(()),
        }
    }

    /// Makes every checkpoint written so far durable.
    pub(crate) fn sync(&self) -> Result<(), StateError> {
        match &self.store {
            Some(store) => store.sync(),
            None => Ok(()),
        }
    }

    /// Called by a task's own thread once it is cleaned up (or its loop failed). Under the
    /// command lock, so no stop can slip in between: any registered stop still in its inbox is
    /// finished here. A cleaned-up task's checkpoint is deleted; a failed loop's is kept so the
    /// next start restores the task.
    pub(crate) fn forget(
        &self,
        task_id: &str,
        tracked_docker_ids: &[String],
        desired: &Receiver<OwnerCommand>,
        cleaned_up: bool,
    ) {
        let mut commands = self.commands();
        commands.tasks.remove(task_id);
        if cleaned_up {
            if let Some(store) = &self.store {
                if let Err(error) = store.delete_task(task_id) {
                    // The next start restores it, finds its containers gone, and cleans up again.
                    log::warn!("task {task_id}: cannot delete its checkpoint: {error}");
                }
            }
        }
        while let Ok(command) = desired.try_recv() {
            let OwnerCommand::Desired(command) = command else {
                continue;
            };
            if command.registered {
                self.wait_group.done(command.sequence);
            }
        }
        // A cleaned-up task released at STOPPED already; a failed loop's resources are given
        // back as its stop number is, so later tasks do not wait for a task that is gone.
        self.host_resources.release(task_id);
        drop(commands);
        if cleaned_up {
            // Its containers are gone: the images they ran are free for image cleanup (§15).
            // Outside the command lock: image cleanup holds the record's lock across a removal.
            if let Some(images) = &self.worker_context.images {
                images.release_task(task_id, crate::clock::now_millis());
            }
        }
        let mut index = self
            .docker_index
            .write()
            .unwrap_or_else(|poison| poison.into_inner());
        for docker_id in tracked_docker_ids {
            index.remove(docker_id);
        }
        drop(index);
        self.snapshots().remove(task_id);
        self.snapshot_changed.notify_all();
        if cleaned_up {
            log::info!("task {task_id}: cleaned up and forgotten");
        }
    }
}
