//! The Docker worker pool under the engine, against the scripted fake runtime: a Docker call that
//! panics comes back to its task as a failed call (so the task can still be stopped), the events
//! thread survives a panic, a stop is never stuck behind pulls, workers start with the calls and
//! end when idle, and shutdown ends the workers.
//! No sleeps: every wait is for the call, event or snapshot that proves the behaviour.

#[path = "support/definitions.rs"]
mod definitions;
#[path = "support/engine_events.rs"]
mod engine_events;
#[path = "support/fake_runtime.rs"]
mod fake_runtime;

use deckhand::engine::{EngineConfig, EngineHandle, TaskEngine};
use deckhand::report::Event;
use deckhand::task::{PullBehavior, TaskDefinition, TaskStatus};
use definitions::{container, task};
use engine_events::fast_engine_config;
use fake_runtime::{FakeRuntime, FakeStatus, Op};
use std::sync::Arc;
use std::time::Duration;

const APP_IMAGE: &str = "test/app:1";
const DEADLINE: Duration = Duration::from_secs(20);

fn fast_config(docker_concurrency: usize) -> EngineConfig {
    EngineConfig {
        docker_concurrency,
        ..fast_engine_config("workers-cluster")
    }
}

struct Harness {
    fake: Arc<FakeRuntime>,
    engine: TaskEngine,
}

impl Harness {
    fn new(config: EngineConfig) -> Harness {
        let fake = FakeRuntime::new();
        fake.add_image(APP_IMAGE);
        let engine = TaskEngine::start(fake.clone(), config).expect("the engine starts");
        Harness { fake, engine }
    }

    fn submit(&self, definition: TaskDefinition) -> String {
        self.engine.submit(definition).expect("task accepted").id
    }

    fn wait_event(&self, task_id: &str, container: Option<&str>, status: &str) -> Event {
        engine_events::wait_event(&self.engine, task_id, container, status, DEADLINE)
    }

    fn wait_calls(&self, op: Op, subject: &str, count: usize) {
        self.fake
            .wait_for_calls(op, subject, count, DEADLINE)
            .unwrap_or_else(|message| panic!("{message}"));
    }

    fn stop_and_wait(&self, task_id: &str) -> Event {
        self.engine.stop(task_id).expect("the stop is accepted");
        self.wait_event(task_id, None, "STOPPED")
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.engine.shutdown();
    }
}

fn one_container_task(family: &str, container_name: &str, image: &str) -> TaskDefinition {
    task(family, vec![container(container_name, image)])
}

#[test]
fn a_pull_that_panics_fails_the_pull_and_the_task_still_stops() {
    let harness = Harness::new(EngineConfig {
        pull_behavior: PullBehavior::Always,
        ..fast_config(4)
    });
    harness.fake.panic_next(
        Op::Pull,
        APP_IMAGE,
        1,
        "byte index 200 is not a char boundary",
    );
    let id = harness.submit(one_container_task("pull-panics", "app", APP_IMAGE));
    // Under `always`, a failed pull stops the task: the panic is that failure.
    let stopped = harness.wait_event(&id, None, "STOPPED");
    let reason = stopped.reason.unwrap_or_default();
    assert!(
        reason.contains("Docker pull call panicked: byte index 200"),
        "the reason names the panic: {reason}"
    );
    assert_eq!(harness.fake.count(Op::Create, "app"), 0);
}

#[test]
fn a_start_that_panics_resets_the_container_and_stops_the_task() {
    let harness = Harness::new(fast_config(4));
    harness
        .fake
        .panic_next(Op::Start, "app", 1, "odd answer to start");
    let id = harness.submit(one_container_task("start-panics", "app", APP_IMAGE));
    harness.wait_event(&id, None, "STOPPED");
    // The start may have happened (its answer was never had): it is stopped in the background.
    harness.wait_calls(Op::Stop, "app", 1);
    let task = harness
        .engine
        .task(&id)
        .expect("the task is kept until cleanup");
    assert_eq!(task.known_status, TaskStatus::Stopped);
    let error = task.containers[0]
        .applying_error
        .clone()
        .expect("the failed start is recorded");
    assert!(
        error
            .message
            .contains("Docker start call panicked: odd answer to start"),
        "{error:?}"
    );
}

#[test]
fn a_stop_that_keeps_panicking_does_not_pin_the_task() {
    let harness = Harness::new(fast_config(4));
    let id = harness.submit(one_container_task("stop-panics", "app", APP_IMAGE));
    harness.wait_event(&id, None, "RUNNING");
    // Every attempt of the worker's retries panics; Docker answers the ping, so the stop is
    // settled as for any stop that never confirmed (§6): the task reaches STOPPED.
    harness
        .fake
        .panic_next(Op::Stop, "app", 3, "odd answer to stop");
    harness.stop_and_wait(&id);
    harness.wait_calls(Op::Stop, "app", 3);
    harness.wait_calls(Op::Ping, "", 1);
}

#[test]
fn an_inspection_that_panics_leaves_the_task_answering_and_stoppable() {
    let harness = Harness::new(fast_config(4));
    let id = harness.submit(one_container_task("inspect-panics", "app", APP_IMAGE));
    harness.wait_event(&id, None, "RUNNING");
    let inspections = harness.fake.count(Op::Inspect, "app");
    // A broken event stream makes every task re-inspect its containers; that one panics.
    harness
        .fake
        .panic_next(Op::Inspect, "app", 1, "odd answer to inspect");
    harness.fake.break_event_streams();
    harness.wait_calls(Op::Inspect, "app", inspections + 1);
    harness.stop_and_wait(&id);
    assert_eq!(
        harness.fake.container("app").map(|c| c.status),
        Some(FakeStatus::Exited)
    );
}

#[test]
fn the_events_thread_survives_a_panic_and_keeps_routing_events() {
    let harness = Harness::new(fast_config(4));
    let id = harness.submit(one_container_task("events-panic", "app", APP_IMAGE));
    harness.wait_event(&id, None, "RUNNING");
    let subscriptions = harness.fake.count(Op::Events, "");
    let inspections = harness.fake.count(Op::Inspect, "app");
    // The next subscription panics inside the events thread; it restarts and subscribes again.
    harness
        .fake
        .panic_next(Op::Events, "", 1, "odd event stream");
    harness.fake.break_event_streams();
    harness.wait_calls(Op::Events, "", subscriptions + 2);
    // Once subscribed again the thread has every task re-inspect: after that inspection the
    // new subscription is in place, and an exit reaches the task through its `die` event.
    harness.wait_calls(Op::Inspect, "app", inspections + 1);
    harness.fake.exit("app", 3);
    let stopped = harness.wait_event(&id, Some("app"), "STOPPED");
    assert_eq!(stopped.exit_code, Some(3));
}

#[test]
fn a_stop_completes_while_pulls_hold_every_worker_they_may_take() {
    let workers = 3;
    let harness = Harness::new(fast_config(workers));
    let running = harness.submit(one_container_task("running", "app", APP_IMAGE));
    harness.wait_event(&running, None, "RUNNING");
    // More pulls than workers, each held by the fake until the end of the test.
    let mut gates = Vec::new();
    let mut pulling = Vec::new();
    for number in 0..workers + 1 {
        let image = format!("test/slow-{number}:1");
        gates.push(harness.fake.hold_next(Op::Pull, &image));
        pulling.push(harness.submit(one_container_task(
            &format!("slow-{number}"),
            &format!("slow-{number}"),
            &image,
        )));
    }
    let slow_pulls = |fake: &FakeRuntime| {
        fake.calls_of(Op::Pull)
            .iter()
            .filter(|call| call.subject.starts_with("test/slow-"))
            .count()
    };
    harness
        .fake
        .wait_for(DEADLINE, |fake| slow_pulls(fake) >= workers - 1)
        .unwrap_or_else(|message| panic!("{message}"));
    harness.stop_and_wait(&running);
    assert_eq!(
        slow_pulls(&harness.fake),
        workers - 1,
        "pulls took only all workers but one"
    );
    let stats = harness.engine.docker_pool_stats();
    assert!(stats.peak_busy <= workers, "{stats:?}");
    // Which tasks' pulls hold the workers depends on which task threads queued theirs first.
    let pulled: Vec<String> = harness
        .fake
        .calls_of(Op::Pull)
        .iter()
        .map(|call| call.subject.clone())
        .filter(|image| image.starts_with("test/slow-"))
        .collect();
    let holds_a_worker = |number: usize| pulled.contains(&format!("test/slow-{number}:1"));
    // The tasks whose pulls wait in the queue stop without waiting for a worker: their pulls
    // are skipped, and they are never created.
    let queued: Vec<usize> = (0..pulling.len())
        .filter(|number| !holds_a_worker(*number))
        .collect();
    assert_eq!(queued.len(), pulling.len() - (workers - 1), "{pulled:?}");
    for number in &queued {
        harness.stop_and_wait(&pulling[*number]);
        assert_eq!(harness.fake.count(Op::Create, &format!("slow-{number}")), 0);
    }
    assert_eq!(
        slow_pulls(&harness.fake),
        workers - 1,
        "queued pulls were skipped"
    );
    for gate in &gates {
        gate.release();
    }
    for number in (0..pulling.len()).filter(|number| holds_a_worker(*number)) {
        harness.stop_and_wait(&pulling[number]);
    }
}

#[test]
fn shutdown_ends_every_docker_worker() {
    let harness = Harness::new(fast_config(5));
    let id = harness.submit(one_container_task("pool-shutdown", "app", APP_IMAGE));
    harness.wait_event(&id, None, "RUNNING");
    // Workers start with the calls: as many as ran at once, at most the pool's size.
    let workers = harness.engine.docker_pool_stats().workers;
    assert!((1..=5).contains(&workers), "{workers} workers");
    harness.engine.shutdown();
    assert_eq!(harness.engine.docker_pool_stats().workers, 0);
}

#[test]
fn docker_workers_start_with_the_calls_and_end_when_idle() {
    let harness = Harness::new(EngineConfig {
        docker_worker_idle_timeout: Duration::from_millis(50),
        ..fast_config(5)
    });
    let before = harness.engine.wait_for_docker_workers(0, DEADLINE);
    assert_eq!(before.workers, 0, "{before:?}");
    let id = harness.submit(one_container_task("pool-idle", "app", APP_IMAGE));
    harness.wait_event(&id, None, "RUNNING");
    let running = harness.engine.docker_pool_stats();
    assert!(
        running.started > before.started && running.peak_busy <= 5,
        "{running:?}"
    );
    // Nothing to call while the task runs: every worker ends after its idle timeout.
    let idle = harness.engine.wait_for_docker_workers(0, DEADLINE);
    assert_eq!(idle.workers, 0, "{idle:?}");
    // The stop's calls start a worker again.
    harness.stop_and_wait(&id);
    let stopped = harness.engine.docker_pool_stats();
    assert!(stopped.started > idle.started, "{stopped:?}");
}
