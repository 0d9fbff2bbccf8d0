//! The event log: where every state-change event is recorded, numbered and kept for subscribers.
//!
//! A managed task records its events one at a time from its own thread, so the order inside a
//! task is the order it recorded them in (a container event before the task event it caused).
//! Each recorded event gets the next global, gap-free sequence number.
//!
//! "Reported" means recorded here. When the log is backed by the durable event log
//! (`ECS_DATADIR/events.log`, see `state::event_log`), [`EventLog::record`] returns only once
//! the event is on disk, so a task raises its `sent` status only for events that survive a
//! crash. Recording is a group commit: the first thread that finds no write in progress becomes
//! the writer, numbers every event queued so far, appends them with one fsync
//! (`append_batch`), and wakes the others; threads that queued meanwhile wait for the next
//! round. Numbers are handed out by the writer, after nothing can fail any more but the write
//! itself, and a failed write hands out none, so the log stays gap-free even on a full disk.
//!
//! Memory is bounded: only the newest `capacity` events are kept in memory (and filled from the
//! durable log at start-up, so `deckhand events --since N` still sees events recorded before a
//! restart); a subscriber that asks for older ones gets what is still held.

use crate::event::{Event, NewEvent};
use crate::state::{self, StateError};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Events kept in memory when the configuration does not say otherwise.
pub const DEFAULT_EVENT_CAPACITY: usize = 10_000;

#[derive(Debug)]
pub struct EventLog {
    state: Mutex<EventLogState>,
    /// Signalled whenever events are recorded (or a durable write failed).
    recorded: Condvar,
    capacity: usize,
    /// The durable log the events go to before they count as recorded; `None`: memory only.
    durable: Option<Arc<state::EventLogFile>>,
}

#[derive(Debug)]
struct EventLogState {
    /// Sequence number of the most recent event (0 = none yet).
    last_sequence: u64,
    /// The newest events, oldest first; sequence numbers are consecutive.
    events: VecDeque<Event>,
    /// Events waiting for the next durable write, with the ticket of the thread that queued each.
    pending: Vec<(u64, NewEvent)>,
    next_ticket: u64,
    /// A thread is writing a batch to the durable log (the lock is released meanwhile).
    writing: bool,
    /// What each finished ticket came to: its sequence number, or why the write failed.
    outcomes: HashMap<u64, Result<u64, String>>,
}

impl EventLog {
    /// A log kept in memory only (tests, and engines without a data directory).
    pub fn new(capacity: usize) -> EventLog {
        EventLog::with_durable(capacity, None, 0, VecDeque::new())
    }

    fn with_durable(
        capacity: usize,
        durable: Option<Arc<state::EventLogFile>>,
        last_sequence: u64,
        events: VecDeque<Event>,
    ) -> EventLog {
        EventLog {
            state: Mutex::new(EventLogState {
                last_sequence,
                events,
                pending: Vec::new(),
                next_ticket: 0,
                writing: false,
                outcomes: HashMap::new(),
            }),
            recorded: Condvar::new(),
            capacity: capacity.max(1),
            durable,
        }
    }

    /// A log backed by the durable event log: numbering continues after its last event, and the
    /// newest `capacity` events it holds are loaded for subscribers.
    pub fn durable(capacity: usize, log: Arc<state::EventLogFile>) -> Result<EventLog, StateError> {
        let capacity = capacity.max(1);
        let next = log.next_seq();
        let first_wanted = next.saturating_sub(capacity as u64).max(1);
        let held: VecDeque<Event> = log
            .read_since(first_wanted.saturating_sub(1), capacity)?
            .into();
        Ok(EventLog::with_durable(
            capacity,
            Some(log),
            next.saturating_sub(1),
            held,
        ))
    }

    fn state(&self) -> MutexGuard<'_, EventLogState> {
        // Every mutation completes under the lock before it is released; keep serving.
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn hold(&self, state: &mut EventLogState, event: Event) {
        if state.events.len() == self.capacity {
            state.events.pop_front();
        }
        state.last_sequence = event.seq;
        state.events.push_back(event);
    }

    fn numbered(seq: u64, new_event: NewEvent) -> Event {
        Event {
            seq,
            time: new_event.time,
            task: new_event.task,
            container: new_event.container,
            status: new_event.status,
            exit_code: new_event.exit_code,
            reason: new_event.reason,
        }
    }

    /// Records one event and returns its sequence number. With a durable log, returns once the
    /// event is on disk; an error (disk full, read-only) means the event was not recorded and
    /// took no number.
    pub fn record(&self, new_event: NewEvent) -> Result<u64, StateError> {
        let numbers = self.record_all(vec![new_event])?;
        Ok(numbers.first().copied().unwrap_or_default())
    }

    /// Records events in the order given, with consecutive numbers, all in one durable write
    /// (a container's STOPPED and the task's STOPPED it caused cost one sync, not two); returns
    /// their numbers. All or none: on error no event of them was recorded.
    pub fn record_all(&self, new_events: Vec<NewEvent>) -> Result<Vec<u64>, StateError> {
        let mut state = self.state();
        let Some(durable) = &self.durable else {
            let mut numbers = Vec::with_capacity(new_events.len());
            for new_event in new_events {
                let sequence = state.last_sequence + 1;
                self.hold(&mut state, EventLog::numbered(sequence, new_event));
                crate::metrics::global().event_recorded();
                numbers.push(sequence);
            }
            drop(state);
            self.recorded.notify_all();
            return Ok(numbers);
        };
        // Queued together under the lock, so the writer that takes them takes them all.
        let tickets: Vec<u64> = new_events
            .into_iter()
            .map(|new_event| {
                let ticket = state.next_ticket;
                state.next_ticket += 1;
                state.pending.push((ticket, new_event));
                ticket
            })
            .collect();
        loop {
            if tickets
                .iter()
                .all(|ticket| state.outcomes.contains_key(ticket))
            {
                let outcomes: Vec<Result<u64, String>> = tickets
                    .iter()
                    .filter_map(|ticket| state.outcomes.remove(ticket))
                    .collect();
                // The writer's error is shared by every event of its batch, so it travels as text.
                return outcomes
                    .into_iter()
                    .map(|outcome| {
                        outcome.map_err(|message| StateError::Io {
                            path: durable.path().to_path_buf(),
                            step: "append",
                            source: std::io::Error::other(message),
                        })
                    })
                    .collect();
            }
            if !state.writing {
                // This thread writes everything queued so far (its own events included).
                state.writing = true;
                let batch = std::mem::take(&mut state.pending);
                let first = durable.next_seq();
                let events: Vec<Event> = batch
                    .iter()
                    .enumerate()
                    .map(|(index, (_, new_event))| {
                        EventLog::numbered(first + index as u64, new_event.clone())
                    })
                    .collect();
                drop(state);
                let written = durable.append_batch(&events);
                state = self.state();
                state.writing = false;
                match written {
                    Ok(()) => {
                        for ((queued_ticket, _), event) in batch.iter().zip(events) {
                            state.outcomes.insert(*queued_ticket, Ok(event.seq));
                            self.hold(&mut state, event);
                            // Counted before any reader can see the event.
                            crate::metrics::global().event_recorded();
                        }
                    }
                    Err(error) => {
                        let message = error.to_string();
                        for (queued_ticket, _) in &batch {
                            state.outcomes.insert(*queued_ticket, Err(message.clone()));
                        }
                    }
                }
                self.recorded.notify_all();
                continue;
            }
            state = self
                .recorded
                .wait(state)
                .unwrap_or_else(|poison| poison.into_inner());
        }
    }

    /// The sequence number of the most recent event (0 when none was recorded).
    pub fn last_sequence(&self) -> u64 {
        self.state().last_sequence
    }

    /// Events with `seq > after` still held, waiting up to `wait` for at least one.
    pub fn events_since(&self, after: u64, wait: Duration) -> Vec<Event> {
        let deadline = Instant::now() + wait;
        let mut state = self.state();
        loop {
            if state.last_sequence > after {
                return state
                    .events
                    .iter()
                    .filter(|event| event.seq > after)
                    .cloned()
                    .collect();
            }
            let now = Instant::now();
            if now >= deadline {
                return Vec::new();
            }
            state = self
                .recorded
                .wait_timeout(state, deadline - now)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|poison| poison.into_inner().0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{FaultInjector, FsStep};
    use std::sync::Arc;

    fn new_event(task: &str, status: &str) -> NewEvent {
        NewEvent {
            time: 1,
            task: task.to_string(),
            container: None,
            status: status.to_string(),
            exit_code: None,
            reason: None,
        }
    }

    fn record(log: &EventLog, task: &str, status: &str) -> u64 {
        log.record(new_event(task, status))
            .expect("recording in memory or on a healthy disk succeeds")
    }

    fn scratch_dir(name: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!(
            "deckhand-report-{name}-{}-{}",
            std::process::id(),
            now_nanos()
        ));
        std::fs::create_dir_all(&path).expect("a scratch directory");
        path
    }

    fn now_nanos() -> u128 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_nanos())
            .unwrap_or(0)
    }

    #[test]
    fn sequence_numbers_are_gap_free_from_one() {
        let log = EventLog::new(100);
        assert_eq!(record(&log, "a", "RUNNING"), 1);
        assert_eq!(record(&log, "b", "RUNNING"), 2);
        assert_eq!(record(&log, "a", "STOPPED"), 3);
        let all = log.events_since(0, Duration::ZERO);
        let numbers: Vec<u64> = all.iter().map(|event| event.seq).collect();
        assert_eq!(numbers, vec![1, 2, 3]);
        let after_two = log.events_since(2, Duration::ZERO);
        assert_eq!(after_two.len(), 1);
        assert_eq!(after_two[0].task, "a");
        assert_eq!(after_two[0].status, "STOPPED");
    }

    #[test]
    fn memory_is_bounded_to_the_newest_events() {
        let log = EventLog::new(3);
        for _ in 0..10 {
            record(&log, "a", "RUNNING");
        }
        let held: Vec<u64> = log
            .events_since(0, Duration::ZERO)
            .iter()
            .map(|event| event.seq)
            .collect();
        assert_eq!(held, vec![8, 9, 10]);
        assert_eq!(log.last_sequence(), 10);
    }

    #[test]
    fn empty_read_returns_after_the_wait() {
        let log = EventLog::new(10);
        let started = Instant::now();
        assert!(log.events_since(0, Duration::from_millis(30)).is_empty());
        assert!(started.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn waiting_reader_wakes_on_a_new_event() {
        let log = Arc::new(EventLog::new(10));
        let reader_log = Arc::clone(&log);
        let reader =
            std::thread::spawn(move || reader_log.events_since(0, Duration::from_secs(30)));
        record(&log, "a", "RUNNING");
        let events = reader.join().expect("reader thread does not panic");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].seq, 1);
    }

    #[test]
    fn durable_events_survive_a_reopen_and_numbering_continues() {
        let dir = scratch_dir("reopen");
        {
            let (store, _) = state::StateStore::open(&dir).expect("open");
            let log = EventLog::durable(100, store.event_log()).expect("durable log");
            assert_eq!(record(&log, "a", "RUNNING"), 1);
            assert_eq!(record(&log, "a", "STOPPED"), 2);
        }
        let (store, _) = state::StateStore::open(&dir).expect("reopen");
        let log = EventLog::durable(100, store.event_log()).expect("durable log");
        let held: Vec<u64> = log
            .events_since(0, Duration::ZERO)
            .iter()
            .map(|event| event.seq)
            .collect();
        assert_eq!(held, vec![1, 2], "events recorded before the restart");
        assert_eq!(record(&log, "b", "RUNNING"), 3);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failed_durable_write_takes_no_number_and_is_reported() {
        let dir = scratch_dir("fail");
        let faults = Arc::new(FaultInjector::new());
        let (store, _) =
            state::StateStore::open_with_faults(&dir, Arc::clone(&faults), 1000).expect("open");
        let log = EventLog::durable(100, store.event_log()).expect("durable log");
        assert_eq!(record(&log, "a", "RUNNING"), 1);
        faults.fail_times(FsStep::SyncFile, "events.log", libc_enospc(), 1);
        let error = log
            .record(new_event("a", "STOPPED"))
            .expect_err("the write fails");
        assert!(error.to_string().contains("events.log"), "{error}");
        assert_eq!(record(&log, "a", "STOPPED"), 2, "no number was lost");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// ENOSPC on Linux.
    fn libc_enospc() -> i32 {
        28
    }

    #[test]
    fn concurrent_recorders_share_writes_and_get_distinct_numbers() {
        let dir = scratch_dir("group");
        let (store, _) = state::StateStore::open(&dir).expect("open");
        let log = Arc::new(EventLog::durable(1000, store.event_log()).expect("durable log"));
        let threads: Vec<_> = (0..8)
            .map(|thread| {
                let log = Arc::clone(&log);
                std::thread::spawn(move || {
                    (0..25)
                        .map(|_| record(&log, &format!("t{thread}"), "RUNNING"))
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        let mut numbers: Vec<u64> = threads
            .into_iter()
            .flat_map(|thread| thread.join().expect("recorder does not panic"))
            .collect();
        numbers.sort_unstable();
        assert_eq!(numbers, (1..=200).collect::<Vec<u64>>());
        assert_eq!(store.event_log().next_seq(), 201);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
