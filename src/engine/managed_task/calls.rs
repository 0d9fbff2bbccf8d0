//! A managed task's Docker calls on the engine's worker pool: each call becomes a pool job whose
//! answer (or panic, as a failed call) is posted back to the task's thread as an input.

use crate::engine::messages::{DockerCall, Input};
use crate::engine::shared::TaskShared;
use crate::engine::worker_pool::Job;
use crate::engine::workers::{
    answer_without_calling, call_class, input_for_panicked_call, operation_name,
    run_task_docker_call,
};
use crate::task::Task;
use crossbeam_channel::Sender;

/// What the worker pool calls a task's Docker call in its logs: the task id's first 8
/// characters (cut on a character boundary: a user's task id may be any text) and the operation.
pub(super) fn worker_label(task_id: &str, operation: &str) -> String {
    format!(
        "task {}: {operation}",
        crate::text::truncate_chars(task_id, 8)
    )
}

/// Queues `call` on the engine's Docker worker pool; its answer comes back on `results`. A call
/// whose worker panics still answers, as a failed call (`input_for_panicked_call`), so the task's
/// error rules apply and the container never stays "in flight".
pub(super) fn spawn_worker(
    task: &Task,
    shared: &TaskShared,
    call: DockerCall,
    results: &Sender<Box<Input>>,
    task_stopping: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    #[cfg(test)]
    let family = task.family.clone();
    let label = worker_label(&task.id, operation_name(&call));
    let task_id = task.id.clone();
    let execution_id = task.credentials_ids.execution_role.clone();
    let context = shared.worker_context.clone();
    let results_for_work = results.clone();
    let results_for_panic = results.clone();
    let call_for_panic = call.clone();
    let task_stopping = std::sync::Arc::clone(task_stopping);
    let unwanted = std::sync::Arc::clone(&task_stopping);
    let skippable = answer_without_calling(&call, true).is_some();
    let job = Job {
        class: call_class(&call),
        label,
        work: Box::new(move || {
            #[cfg(test)]
            super::driver::test_hooks::panic_in_worker_if_asked(&family);
            // Read when a worker takes the call, not when it was queued.
            let stopping = task_stopping.load(std::sync::atomic::Ordering::Relaxed);
            let answer = match answer_without_calling(&call, stopping) {
                Some(answer) => Some(answer),
                None => run_task_docker_call(&context, &task_id, execution_id.as_deref(), call),
            };
            if let Some(input) = answer {
                // The task may be gone (shut down); then nobody needs the answer.
                let _ = results_for_work.send(Box::new(input));
            }
        }),
        on_panic: Box::new(move |message| {
            if let Some(input) = input_for_panicked_call(&call_for_panic, &message) {
                let _ = results_for_panic.send(Box::new(input));
            }
        }),
        unwanted: skippable.then_some(unwanted),
    };
    if let Err(job) = shared.docker_pool.submit(job) {
        // Only while the engine shuts down, after every task's loop ended: nobody waits.
        log::debug!("{}: not made, the engine is shutting down", job.label);
    }
}
