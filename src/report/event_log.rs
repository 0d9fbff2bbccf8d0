//! The event log: where every state-change event is recorded, numbered and kept for subscribers.
//!
//! A managed task records its events one at a time from its own thread, so the order inside a
//! task is the order it recorded them in (a container event before the task event it caused).
//! Each recorded event gets the next global, gap-free sequence number. "Reported" means recorded
//! here; a durable log comes later. Memory is bounded: only the newest `capacity` events are kept,
//! and a subscriber that asks for older ones gets what is still held.

use crate::report::Event;
use crate::task::Millis;
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Events kept in memory when the configuration does not say otherwise.
pub const DEFAULT_EVENT_CAPACITY: usize = 10_000;

/// What a managed task hands over; the log fills in `seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    pub time: Millis,
    pub task: String,
    pub container: Option<String>,
    pub status: String,
    pub exit_code: Option<i64>,
    pub reason: Option<String>,
}

#[derive(Debug)]
pub struct EventLog {
    state: Mutex<EventLogState>,
    /// Signalled whenever an event is recorded.
    recorded: Condvar,
    capacity: usize,
}

#[derive(Debug)]
struct EventLogState {
    /// Sequence number of the most recent event (0 = none yet).
    last_sequence: u64,
    /// The newest events, oldest first; sequence numbers are consecutive.
    events: VecDeque<Event>,
}

impl EventLog {
    pub fn new(capacity: usize) -> EventLog {
        EventLog {
            state: Mutex::new(EventLogState {
                last_sequence: 0,
                events: VecDeque::new(),
            }),
            recorded: Condvar::new(),
            capacity: capacity.max(1),
        }
    }

    fn state(&self) -> MutexGuard<'_, EventLogState> {
        // Nothing in the state can be left half-written by a panic; keep serving.
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Records one event and returns its sequence number.
    pub fn record(&self, new_event: NewEvent) -> u64 {
        let mut state = self.state();
        state.last_sequence += 1;
        let sequence = state.last_sequence;
        if state.events.len() == self.capacity {
            state.events.pop_front();
        }
        state.events.push_back(Event {
            seq: sequence,
            time: new_event.time,
            task: new_event.task,
            container: new_event.container,
            status: new_event.status,
            exit_code: new_event.exit_code,
            reason: new_event.reason,
        });
        drop(state);
        self.recorded.notify_all();
        sequence
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

    #[test]
    fn sequence_numbers_are_gap_free_from_one() {
        let log = EventLog::new(100);
        assert_eq!(log.record(new_event("a", "RUNNING")), 1);
        assert_eq!(log.record(new_event("b", "RUNNING")), 2);
        assert_eq!(log.record(new_event("a", "STOPPED")), 3);
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
            log.record(new_event("a", "RUNNING"));
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
        log.record(new_event("a", "RUNNING"));
        let events = reader.join().expect("reader thread does not panic");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].seq, 1);
    }
}
