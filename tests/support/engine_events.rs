//! Waiting for the engine's state-change events in tests: by task, container and status, with
//! a deadline, on the engine's own long-poll (no sleeps).

#![allow(dead_code)]

use deckhand::engine::EngineHandle;
use deckhand::report::Event;
use std::time::{Duration, Instant};

/// Every event of `task_id` still held.
pub fn events_of(engine: &dyn EngineHandle, task_id: &str) -> Vec<Event> {
    engine
        .events_since(0, Duration::ZERO)
        .into_iter()
        .filter(|event| event.task == task_id)
        .collect()
}

/// The first event of `task_id` for `container` (`None` = the task itself) with `status`,
/// waiting up to `within`; panics with the task's events when none comes.
pub fn wait_event(
    engine: &dyn EngineHandle,
    task_id: &str,
    container: Option<&str>,
    status: &str,
    within: Duration,
) -> Event {
    let deadline = Instant::now() + within;
    let mut after = 0;
    loop {
        for event in engine.events_since(after, Duration::ZERO) {
            after = event.seq;
            if event.task == task_id
                && event.container.as_deref() == container
                && event.status == status
            {
                return event;
            }
        }
        let now = Instant::now();
        assert!(
            now < deadline,
            "no {status} event for {task_id}/{container:?} within {within:?}; events: {:#?}",
            events_of(engine, task_id)
        );
        engine.events_since(after, deadline - now);
    }
}
