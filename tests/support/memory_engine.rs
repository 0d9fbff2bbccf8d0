//! An in-memory `EngineHandle` for testing the API, CLI and `tasks.d` layers on their own: it
//! stores submitted tasks, records every command in order, and keeps an event log that tests
//! append to. It runs no containers; whole-agent tests use the real engine.
#![allow(dead_code)]

use deckhand::clock::now_millis;
use deckhand::engine::handle::{LogOptions, LogStream};
use deckhand::engine::{EngineError, EngineHandle};
use deckhand::report::Event;
use deckhand::task::{ContainerStatus, Task, TaskDefinition, TaskStatus};
use std::collections::HashMap;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One command the engine received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Submit { id: String, family: String },
    Stop { id: String },
}

#[derive(Default)]
struct State {
    tasks: Vec<Task>,
    events: Vec<Event>,
    calls: Vec<Call>,
    next_sequence: u64,
    refusal: Option<EngineError>,
    /// Readers blocked in `events_since` right now.
    waiting_readers: usize,
    /// Each container's log by Docker id: the bytes every opening starts with, and whether it
    /// stays open (followed) after them.
    logs: HashMap<String, (Vec<u8>, bool)>,
    /// The writing ends of the open followed logs, by Docker id.
    live_logs: Vec<(String, UnixStream)>,
    /// Every log opening, with its options.
    log_openings: Vec<(String, LogOptions)>,
}

pub struct MemoryEngine {
    cluster: String,
    state: Mutex<State>,
    changed: Condvar,
    /// Log streams closed by their reader.
    closed_logs: Arc<AtomicUsize>,
}

impl MemoryEngine {
    pub fn new(cluster: &str) -> MemoryEngine {
        MemoryEngine {
            cluster: cluster.to_string(),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            closed_logs: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Every submit and stop so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// Makes every following command fail with `error` (`None`: accept again).
    pub fn refuse_with(&self, error: Option<EngineError>) {
        self.lock().refusal = error;
    }

    /// Adds a task as if the engine had restored it (ids chosen by the test).
    pub fn insert_task(&self, task: Task) {
        self.lock().tasks.push(task);
        self.changed.notify_all();
    }

    /// Changes a held task in place.
    pub fn update_task(&self, id: &str, change: impl FnOnce(&mut Task)) {
        let mut state = self.lock();
        if let Some(task) = state.tasks.iter_mut().find(|task| task.id == id) {
            change(task);
        }
        drop(state);
        self.changed.notify_all();
    }

    /// Forgets a task, as cleanup does.
    pub fn remove_task(&self, id: &str) {
        self.lock().tasks.retain(|task| task.id != id);
        self.changed.notify_all();
    }

    /// The log of the container with `docker_id`: `bytes` (in Docker's framing, or raw for a
    /// TTY), then the end, or, when `stays_open`, silence until [`MemoryEngine::write_log`] or
    /// [`MemoryEngine::end_logs`] (only when followed; otherwise it ends after `bytes`).
    pub fn set_log(&self, docker_id: &str, bytes: &[u8], stays_open: bool) {
        self.lock()
            .logs
            .insert(docker_id.to_string(), (bytes.to_vec(), stays_open));
    }

    /// Writes `bytes` to every open followed log of `docker_id`.
    pub fn write_log(&self, docker_id: &str, bytes: &[u8]) {
        let mut state = self.lock();
        for (id, writer) in &mut state.live_logs {
            if id == docker_id {
                let _ = writer.write_all(bytes);
            }
        }
    }

    /// Ends every open followed log (as Docker does when the container stops).
    pub fn end_logs(&self) {
        self.lock().live_logs.clear();
    }

    /// Every log opening so far: the Docker id and the options.
    pub fn log_openings(&self) -> Vec<(String, LogOptions)> {
        self.lock().log_openings.clone()
    }

    /// How many log streams their reader closed.
    pub fn closed_logs(&self) -> usize {
        self.closed_logs.load(Ordering::SeqCst)
    }

    /// Appends an event with the next sequence number; returns it.
    pub fn push_event(
        &self,
        task: &str,
        container: Option<&str>,
        status: &str,
        exit_code: Option<i64>,
    ) -> u64 {
        let mut state = self.lock();
        let seq = state.events.len() as u64 + 1;
        state.events.push(Event {
            seq,
            time: now_millis(),
            task: task.to_string(),
            container: container.map(str::to_string),
            status: status.to_string(),
            exit_code,
            reason: None,
        });
        drop(state);
        self.changed.notify_all();
        seq
    }

    /// Marks a task and its containers STOPPED and records the task's STOPPED event.
    pub fn finish_stop(&self, id: &str) {
        self.update_task(id, |task| {
            task.known_status = TaskStatus::Stopped;
            for container in &mut task.containers {
                container.known_status = ContainerStatus::Stopped;
            }
        });
        self.push_event(id, None, "STOPPED", None);
    }

    /// Waits until at least `count` readers are blocked in `events_since` at once.
    pub fn wait_for_waiting_readers(&self, count: usize, timeout: Duration) -> bool {
        self.wait_until(timeout, |state| state.waiting_readers >= count)
    }

    /// Waits until `predicate` holds over the calls, or the deadline passes.
    pub fn wait_for_calls(&self, timeout: Duration, predicate: impl Fn(&[Call]) -> bool) -> bool {
        self.wait_until(timeout, |state| predicate(&state.calls))
    }

    /// Waits, woken by every change, until `holds` is true of the state or `timeout` passes.
    fn wait_until(&self, timeout: Duration, holds: impl Fn(&State) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.lock();
        loop {
            if holds(&state) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
    }
}

impl MemoryEngine {
    fn accept(
        &self,
        definition: TaskDefinition,
        source: Option<String>,
    ) -> Result<Task, EngineError> {
        let mut state = self.lock();
        if let Some(error) = state.refusal.clone() {
            return Err(error);
        }
        state.next_sequence += 1;
        let sequence = state.next_sequence;
        // Distinct from the first character on, like real random ids.
        let id = format!(
            "{:016x}{:016x}",
            sequence.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            0xd3c6_0000_0000_0000_u64 + sequence
        );
        let mut task = Task::new(
            id.clone(),
            &self.cluster,
            definition,
            sequence,
            now_millis(),
        );
        task.source = source;
        state.calls.push(Call::Submit {
            id,
            family: task.family.clone(),
        });
        state.tasks.push(task.clone());
        drop(state);
        self.changed.notify_all();
        Ok(task)
    }
}

impl EngineHandle for MemoryEngine {
    fn submit(&self, definition: TaskDefinition) -> Result<Task, EngineError> {
        self.accept(definition, None)
    }

    fn submit_from_source(
        &self,
        definition: TaskDefinition,
        source: String,
    ) -> Result<Task, EngineError> {
        self.accept(definition, Some(source))
    }

    fn stop(&self, task_id: &str) -> Result<(), EngineError> {
        let mut state = self.lock();
        if let Some(error) = state.refusal.clone() {
            return Err(error);
        }
        let Some(task) = state.tasks.iter_mut().find(|task| task.id == task_id) else {
            return Err(EngineError::NotFound {
                task: task_id.to_string(),
            });
        };
        if task.desired_status < TaskStatus::Stopped {
            task.desired_status = TaskStatus::Stopped;
        }
        state.next_sequence += 1;
        // As the engine: the first stop command's number is kept, so a stopped task tells a
        // stop by request from a stop by itself.
        let sequence = state.next_sequence;
        if let Some(task) = state.tasks.iter_mut().find(|task| task.id == task_id) {
            if task.stop_sequence == 0 {
                task.stop_sequence = sequence;
            }
        }
        state.calls.push(Call::Stop {
            id: task_id.to_string(),
        });
        drop(state);
        self.changed.notify_all();
        Ok(())
    }

    fn tasks(&self) -> Vec<Task> {
        self.lock().tasks.clone()
    }

    fn container_logs(
        &self,
        docker_id: &str,
        options: &LogOptions,
    ) -> Result<LogStream, EngineError> {
        let mut state = self.lock();
        state
            .log_openings
            .push((docker_id.to_string(), options.clone()));
        let Some((bytes, stays_open)) = state.logs.get(docker_id).cloned() else {
            return Err(EngineError::Unavailable {
                reason: format!("No such container: {docker_id}"),
            });
        };
        let (mut writer, reader) =
            UnixStream::pair().map_err(|error| EngineError::Unavailable {
                reason: error.to_string(),
            })?;
        let _ = writer.write_all(&bytes);
        if stays_open && options.follow {
            state.live_logs.push((docker_id.to_string(), writer));
        }
        let closer = reader
            .try_clone()
            .map_err(|error| EngineError::Unavailable {
                reason: error.to_string(),
            })?;
        let closed = self.closed_logs.clone();
        Ok(LogStream {
            reader: Box::new(reader),
            close: Box::new(move || {
                let _ = closer.shutdown(std::net::Shutdown::Both);
                closed.fetch_add(1, Ordering::SeqCst);
            }),
        })
    }

    fn events_since(&self, after: u64, wait: Duration) -> Vec<Event> {
        let deadline = Instant::now() + wait;
        let mut state = self.lock();
        let mut counted = false;
        loop {
            let found: Vec<Event> = state
                .events
                .iter()
                .filter(|event| event.seq > after)
                .cloned()
                .collect();
            let left = deadline.saturating_duration_since(Instant::now());
            if !found.is_empty() || left.is_zero() {
                if counted {
                    state.waiting_readers -= 1;
                    drop(state);
                    self.changed.notify_all();
                }
                return found;
            }
            if !counted {
                counted = true;
                state.waiting_readers += 1;
                self.changed.notify_all();
            }
            state = self
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
    }

    fn cluster(&self) -> String {
        self.cluster.clone()
    }
}
