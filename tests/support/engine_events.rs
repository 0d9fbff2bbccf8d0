//! Engine tests' helpers: a configuration with short timers for an engine on the fake runtime,
//! and waiting for the engine's state-change events by task, container and status, with a
//! deadline, on the engine's own long-poll (no sleeps).

#![allow(dead_code)]

use deckhand::engine::docker_events::Reconnect;
use deckhand::engine::workers::StopRetry;
use deckhand::engine::{EngineConfig, EngineHandle};
use deckhand::report::Event;
use std::time::{Duration, Instant};

/// An engine configuration for `cluster` whose timers are short enough for tests: fast stop
/// retries, dependency and cleanup polls and event-stream reconnects; no steady re-check or
/// cleanup within a test.
pub fn fast_engine_config(cluster: &str) -> EngineConfig {
    EngineConfig {
        cluster: cluster.to_string(),
        cleanup_wait: Duration::from_secs(3600),
        stop_timeout: Duration::from_secs(2),
        steady_check_interval: Duration::from_secs(3600),
        dependency_poll_interval: Duration::from_millis(20),
        sent_poll_interval: Duration::from_millis(20),
        stop_retry: StopRetry {
            attempts: 3,
            initial_backoff: Duration::from_millis(5),
            maximum_backoff: Duration::from_millis(20),
        },
        events_reconnect: Reconnect {
            initial: Duration::from_millis(10),
            maximum: Duration::from_millis(50),
        },
        ..EngineConfig::default()
    }
}

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
