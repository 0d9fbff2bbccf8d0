//! The managed task's thread: the only place a task waits. One `select_biased!` over shutdown,
//! the desired-status inbox, transition results, Docker events, resync requests, the wait group,
//! the host-resource queue, the credentials store's word that a waiting pull's execution-role
//! credentials arrived, and the timers; each input goes to the state machine, and its effects are performed here. Each
//! Docker call runs on the engine's Docker worker pool, which posts its result back as an input
//! (a panicked call as a failed one).

use crate::clock::now_millis;
use crate::engine::managed_task::calls::spawn_worker;
use crate::engine::managed_task::machine::ManagedTask;
use crate::engine::messages::{
    Effect, Input, OwnerCommand, RoutedDockerEvent, TaskRoute, TimerKind,
};
use crate::engine::shared::TaskShared;
use crate::task::TaskStatus;
use crossbeam_channel::{Receiver, Sender};
use std::collections::VecDeque;
use std::time::Duration;

/// The receiving ends of a task's inboxes, owned by its thread.
pub struct TaskInboxes {
    pub shutdown: Receiver<()>,
    pub desired: Receiver<OwnerCommand>,
    pub docker_events: Receiver<RoutedDockerEvent>,
    pub resync: Receiver<()>,
    /// Kept by the loop so the Docker-event and resync inboxes never read as disconnected.
    pub route: TaskRoute,
}

/// What the loop holds besides the state machine: the I/O ends of its effects (armed timers,
/// the wait-group receiver, the Docker ids it registered for routing, the reply channel of the
/// desired change being handled), never a decision of the protocol.
#[derive(Default)]
struct LoopState {
    timers: std::collections::BTreeMap<TimerKind, std::time::Instant>,
    wait_group_ready: Option<Receiver<()>>,
    /// Fires once the host-resource queue admitted the task (§9a).
    resources_ready: Option<Receiver<Vec<String>>>,
    tracked_docker_ids: Vec<String>,
    /// Who waits for the desired change being handled to be durable (`AcknowledgeDesired`).
    durable_reply: Option<Sender<Result<(), String>>>,
    /// The registered stop number of the desired change being handled: taken off the inbox but
    /// not yet owned by the state machine, so a panic in between must still finish it.
    registered_stop_in_hand: Option<u64>,
    /// The task is desired STOPPED: shared with its calls still queued in the worker pool, so a
    /// pull that was waiting for a worker is skipped rather than made.
    stopping: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Fires once the task's execution-role credentials are set, while a pull waits for them.
    execution_credentials_set: Option<Receiver<()>>,
}

/// The only place a managed task waits. `None`: shut down.
fn next_event(
    inboxes: &TaskInboxes,
    results: &Receiver<Box<Input>>,
    state: &mut LoopState,
) -> Option<Input> {
    let never_ready = crossbeam_channel::never();
    let never_admitted = crossbeam_channel::never();
    let never_set = crossbeam_channel::never();
    let credentials_set = state
        .execution_credentials_set
        .as_ref()
        .unwrap_or(&never_set);
    let ready = state.wait_group_ready.as_ref().unwrap_or(&never_ready);
    let admitted = state.resources_ready.as_ref().unwrap_or(&never_admitted);
    let next_timer = state
        .timers
        .iter()
        .min_by_key(|(_, deadline)| **deadline)
        .map(|(kind, deadline)| (*kind, *deadline));
    let timer = match next_timer {
        Some((_, deadline)) => crossbeam_channel::at(deadline),
        None => crossbeam_channel::never(),
    };
    crossbeam_channel::select_biased! {
        recv(inboxes.shutdown) -> _ => None,
        recv(inboxes.desired) -> command => command.ok().map(|command| match command {
            OwnerCommand::Desired(command) => {
                state.durable_reply = command.durable;
                state.registered_stop_in_hand = command.registered.then_some(command.sequence);
                Input::Desired {
                    status: command.status,
                    sequence: command.sequence,
                    registered: command.registered,
                }
            }
            OwnerCommand::ControlPlaneReported(status) => Input::ControlPlaneReported { status },
        }),
        // Docker events before worker results: an event is usually older news than the
        // answer of a call made after it (a `start` event and then the stop's result).
        recv(inboxes.docker_events) -> event => event.ok().map(|event| {
            let (docker_id, observation) = *event;
            Input::DockerEvent { docker_id, observation }
        }),
        recv(results) -> input => input.ok().map(|input| *input),
        recv(inboxes.resync) -> _ => Some(Input::Resync),
        recv(ready) -> _ => {
            state.wait_group_ready = None;
            Some(Input::WaitGroupReady)
        },
        recv(admitted) -> gpu_ids => {
            state.resources_ready = None;
            Some(Input::ResourcesReady { gpu_ids: gpu_ids.unwrap_or_default() })
        },
        // The wait for pull credentials ends early: they are set (or their id is forgotten).
        recv(credentials_set) -> _ => {
            state.execution_credentials_set = None;
            state.timers.remove(&TimerKind::PullCredentials);
            Some(Input::TimerFired(TimerKind::PullCredentials))
        },
        recv(timer) -> _ => {
            let (kind, _) = next_timer.expect("the timer channel is `never` when no timer is armed");
            state.timers.remove(&kind);
            Some(Input::TimerFired(kind))
        },
    }
}

/// Performs effects in order; a delivery receipt is fed straight back so later events of the
/// same task are built on it. Returns true once the task is done.
fn perform(
    machine: &mut ManagedTask,
    effects: Vec<Effect>,
    state: &mut LoopState,
    shared: &TaskShared,
    route: &TaskRoute,
    results: &Sender<Box<Input>>,
) -> bool {
    if machine.task().desired_status == TaskStatus::Stopped
        && !state
            .stopping
            .swap(true, std::sync::atomic::Ordering::Relaxed)
    {
        // Its calls still queued (a pull behind slow pulls) are answered now, out of turn.
        shared.docker_pool.wake();
    }
    let mut queue: VecDeque<Effect> = effects.into();
    while let Some(effect) = queue.pop_front() {
        match effect {
            Effect::Docker(call) => dispatch(machine, shared, call, results, state),
            Effect::Emit { event, reported } => {
                // The events the machine emitted together (a container's STOPPED and the task's
                // it caused) are recorded together: one durable write for all of them.
                let mut batch = vec![(event, reported)];
                while let Some(Effect::Emit { .. }) = queue.front() {
                    if let Some(Effect::Emit { event, reported }) = queue.pop_front() {
                        batch.push((event, reported));
                    }
                }
                // The Docker calls that come right after the events (the next link of a
                // dependency chain, an inspection after an exit) are queued first: they need
                // the checkpoint written before them (it is), not the events' sync, so the sync
                // runs while Docker works instead of before.
                while let Some(Effect::Docker(_)) = queue.front() {
                    if let Some(Effect::Docker(call)) = queue.pop_front() {
                        dispatch(machine, shared, call, results, state);
                    }
                }
                for (event, _) in &batch {
                    log_event(event);
                }
                let (events, receipts): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
                let recorded = shared.reporter.record_all(events);
                for reported in receipts {
                    let receipt = match &recorded {
                        Ok(_) => Input::Reported(reported),
                        Err(error) => Input::ReportFailed {
                            reported,
                            error: error.to_string(),
                        },
                    };
                    queue.extend(machine.handle(receipt, now_millis()));
                }
            }
            Effect::Checkpoint => {
                // Written before it is visible: whoever sees the snapshot finds the record at
                // least as new (durable with the next sync: an acknowledgement's or an event's).
                let written = shared.record_checkpoint(machine.task());
                shared.publish_snapshot(machine.task());
                let receipt = match written {
                    Ok(()) => Input::CheckpointWritten,
                    Err(error) => Input::CheckpointFailed {
                        error: error.to_string(),
                    },
                };
                queue.extend(machine.handle(receipt, now_millis()));
            }
            Effect::AcknowledgeDesired { result } => {
                if let Some(reply) = state.durable_reply.take() {
                    // Durable before it is acknowledged: the change's record is written; one
                    // sync (shared with every task syncing meanwhile) puts it on the disk.
                    let result = result.and_then(|()| shared.sync().map_err(|e| e.to_string()));
                    let _ = reply.send(result);
                }
            }
            Effect::Log { level, message } => {
                log::log!(level, "task {}: {message}", machine.task().id);
            }
            Effect::ArmTimer { timer, at } => {
                if timer == TimerKind::PullCredentials && state.execution_credentials_set.is_none()
                {
                    if let Some(id) = &machine.task().credentials_ids.execution_role {
                        state.execution_credentials_set = Some(shared.role_credentials.watch(id));
                    }
                }
                let delay = Duration::from_millis(at.saturating_sub(now_millis()));
                state
                    .timers
                    .insert(timer, std::time::Instant::now() + delay);
            }
            Effect::WaitForStops { sequence } => {
                state.wait_group_ready = Some(shared.wait_group.ready(sequence));
            }
            Effect::StopWaitingForStops => state.wait_group_ready = None,
            Effect::WaitForResources => {
                let id = &machine.task().id;
                let ready = shared.host_resources.ready(id);
                if ready.is_empty() {
                    if let Some(reason) = shared.host_resources.waiting_reason(id) {
                        log::info!("task {id}: waits for host resources: {reason}");
                    }
                }
                state.resources_ready = Some(ready);
            }
            Effect::ReleaseResources => {
                state.resources_ready = None;
                shared.host_resources.release(&machine.task().id);
            }
            Effect::DropTaskRoleCredentials => shared.role_credentials.forget_role(
                &machine.task().arn,
                crate::role_credentials::RoleType::TaskApplication,
            ),
            Effect::WaitGroupDone { sequence } => shared.wait_group.done(sequence),
            Effect::TrackContainer { docker_id } => {
                shared
                    .docker_index
                    .write()
                    .unwrap_or_else(|poison| poison.into_inner())
                    .insert(docker_id.clone(), route.clone());
                state.tracked_docker_ids.push(docker_id);
            }
            Effect::Done => return true,
        }
    }
    false
}

/// Hands one Docker call of the task to the worker pool (its answer comes back as an input).
fn dispatch(
    machine: &ManagedTask,
    shared: &TaskShared,
    call: crate::engine::messages::DockerCall,
    results: &Sender<Box<Input>>,
    state: &LoopState,
) {
    log::debug!("task {}: {call:?}", machine.task().id);
    spawn_worker(machine.task(), shared, call, results, &state.stopping)
}

/// The agent's log line for an event a task records.
fn log_event(event: &crate::event::NewEvent) {
    log::info!(
        "task {}: {}{}{}{}",
        event.task,
        event
            .container
            .as_deref()
            .map(|name| format!("container {name} "))
            .unwrap_or_default(),
        event.status,
        event
            .exit_code
            .map(|code| format!(" (exit code {code})"))
            .unwrap_or_default(),
        event
            .reason
            .as_deref()
            .map(|reason| format!(": {reason}"))
            .unwrap_or_default()
    );
}

/// The managed task's thread: start, then wait for one input at a time, handle it, perform
/// the effects; on `Done`, forget the task. On shutdown it just returns (containers keep running).
///
/// A panic in the loop (a bug) must not wedge the engine: it is caught and logged, the stop
/// number the task held is finished (so later starts are not blocked forever), and the task is
/// forgotten in memory. Its checkpoint stays on disk, so the next start of the agent restores
/// it; its containers keep running meanwhile.
pub(crate) fn run_managed_task(
    mut machine: ManagedTask,
    inboxes: TaskInboxes,
    shared: std::sync::Arc<TaskShared>,
) {
    let task_id = machine.task().id.clone();
    let task_arn = machine.task().arn.clone();
    let mut state = LoopState::default();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_managed_task_loop(&mut machine, &inboxes, &shared, &mut state)
    }));
    match outcome {
        Ok(false) => {}
        Ok(true) => {
            // Its containers are gone, and so is any use of its roles' credentials: forgotten
            // before its snapshot, so whoever sees the task gone finds its ids gone too.
            shared.role_credentials.forget_task(&task_arn);
            shared.forget(&task_id, &state.tracked_docker_ids, &inboxes.desired, true);
        }
        Err(panic) => {
            let message = crate::text::panic_message(panic.as_ref());
            log::error!(
                "task {task_id}: its managed-task loop panicked ({message}); releasing its stop \
                 number and dropping it from memory; it is restored from its checkpoint at the \
                 next start of deckhand"
            );
            // The stop numbers this task holds: the one its state machine owns, and the one of a
            // change it was handed but had not taken over yet. Each is finished once, so later
            // starts do not wait for a task that is gone.
            let owned = machine.take_unfinished_stop();
            let in_hand = state.registered_stop_in_hand.take();
            if let Some(sequence) = owned {
                shared.wait_group.done(sequence);
            }
            if let Some(sequence) = in_hand.filter(|sequence| Some(*sequence) != owned) {
                shared.wait_group.done(sequence);
            }
            if let Some(reply) = state.durable_reply.take() {
                let _ = reply.send(Err(format!("task {task_id} failed internally: {message}")));
            }
            shared.forget(&task_id, &state.tracked_docker_ids, &inboxes.desired, false);
        }
    }
}

/// Whether the task's execution-role credentials are in the store, as far as its pulls care:
/// true when it has no execution role or the engine reaches no AWS for it (its ECR pulls then
/// use no role at all).
fn execution_credentials_present(machine: &ManagedTask, shared: &TaskShared) -> bool {
    match &machine.task().credentials_ids.execution_role {
        Some(id) if shared.worker_context.execution_role.is_some() => {
            shared.role_credentials.is_ready(id)
        }
        _ => true,
    }
}

/// The loop itself; true once the task is done (cleaned up), false on shutdown.
fn run_managed_task_loop(
    machine: &mut ManagedTask,
    inboxes: &TaskInboxes,
    shared: &TaskShared,
    state: &mut LoopState,
) -> bool {
    // Boxed: an unbounded channel allocates its slots 31 at a time and keeps one block per
    // live channel, so unboxed `Input`s would cost every idle task about 14 KiB.
    let (results_sender, results) = crossbeam_channel::unbounded::<Box<Input>>();
    machine.set_execution_credentials_present(execution_credentials_present(machine, shared));
    let mut effects = machine.start(now_millis());
    loop {
        if perform(
            machine,
            effects,
            state,
            shared,
            &inboxes.route,
            &results_sender,
        ) {
            return true;
        }
        let Some(input) = next_event(inboxes, &results, state) else {
            return false;
        };
        #[cfg(test)]
        test_hooks::panic_if_asked(machine.task(), &input);
        machine.set_execution_credentials_present(execution_credentials_present(machine, shared));
        effects = machine.handle(input, now_millis());
        // The state machine owns the stop number now (or finished it).
        state.registered_stop_in_hand = None;
    }
}

/// Test-only hooks into the thread loop (never compiled into the binary).
#[cfg(test)]
pub(crate) mod test_hooks {
    use super::Input;
    use crate::task::Task;
    use std::sync::Mutex;

    /// Families whose task loop panics when it is handed a desired change, as a bug in the
    /// state machine would. Unit tests run in parallel: each uses a family of its own.
    pub(crate) static PANIC_ON_DESIRED_FOR_FAMILIES: Mutex<Vec<String>> = Mutex::new(Vec::new());

    /// Families whose Docker calls panic in their worker before any runtime call, as a bug in
    /// the worker's own code would.
    pub(crate) static PANIC_IN_WORKER_FOR_FAMILIES: Mutex<Vec<String>> = Mutex::new(Vec::new());

    pub(crate) fn panic_in_worker_if_asked(family: &str) {
        let asked = PANIC_IN_WORKER_FOR_FAMILIES
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .iter()
            .any(|asked| asked == family);
        if asked {
            panic!("test hook: a worker of family {family} panics");
        }
    }

    pub(crate) fn panic_if_asked(task: &Task, input: &Input) {
        let asked = PANIC_ON_DESIRED_FOR_FAMILIES
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .contains(&task.family);
        if asked && matches!(input, Input::Desired { .. }) {
            panic!("test hook: task {} panics on a desired change", task.id);
        }
    }
}
