//! The task engine against the scripted fake runtime: one test per behaviour of
//! docs/ENGINE.md §2–§10. Deterministic: no sleeps; every wait is for the event, call or
//! snapshot that proves the behaviour, with a deadline.

#[path = "support/definitions.rs"]
mod definitions;
#[path = "support/engine_events.rs"]
mod engine_events;
#[path = "support/fake_runtime.rs"]
mod fake_runtime;

use deckhand::engine::{EngineConfig, EngineError, EngineHandle, TaskEngine};
use deckhand::report::Event;
use deckhand::runtime::RuntimeError;
use deckhand::task::{
    ContainerStatus, DependencyCondition, PullBehavior, TaskDefinition, TaskStatus,
};
use definitions::{container, depends_on, non_essential, task, with_health_check};
use engine_events::fast_engine_config;
use fake_runtime::{FakeRuntime, FakeStatus, Op, Script};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

const APP_IMAGE: &str = "test/app:1";
const DB_IMAGE: &str = "test/db:1";
const DEADLINE: Duration = Duration::from_secs(20);

fn fast_config() -> EngineConfig {
    fast_engine_config("test-cluster")
}

struct Harness {
    fake: Arc<FakeRuntime>,
    engine: TaskEngine,
}

impl Harness {
    fn new() -> Harness {
        Harness::with_config(fast_config())
    }

    fn with_config(config: EngineConfig) -> Harness {
        let fake = FakeRuntime::new();
        fake.add_image(APP_IMAGE);
        fake.add_image(DB_IMAGE);
        let engine = TaskEngine::start(fake.clone(), config).expect("the engine starts");
        Harness { fake, engine }
    }

    fn submit(&self, definition: TaskDefinition) -> String {
        self.engine.submit(definition).expect("task accepted").id
    }

    fn events_of(&self, task_id: &str) -> Vec<Event> {
        engine_events::events_of(&self.engine, task_id)
    }

    fn wait_event(&self, task_id: &str, container: Option<&str>, status: &str) -> Event {
        engine_events::wait_event(&self.engine, task_id, container, status, DEADLINE)
    }

    fn wait_task(
        &self,
        task_id: &str,
        what: &str,
        condition: impl FnMut(Option<&deckhand::task::Task>) -> bool,
    ) {
        assert!(
            self.engine.wait_for_task(task_id, DEADLINE, condition),
            "task {task_id}: {what} did not happen within {DEADLINE:?}; snapshot: {:#?}",
            self.engine.task(task_id)
        );
    }

    fn wait_calls(&self, op: Op, subject: &str, count: usize) {
        self.fake
            .wait_for_calls(op, subject, count, DEADLINE)
            .unwrap_or_else(|message| panic!("{message}"));
    }

    /// Position of the first call of `op` on `subject`.
    fn call_order(&self, op: Op, subject: &str) -> u64 {
        self.fake
            .calls()
            .iter()
            .find(|call| call.op == op && call.subject == subject)
            .unwrap_or_else(|| panic!("no {op:?} call on {subject}"))
            .order
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.engine.shutdown();
    }
}

fn one_container_task(family: &str) -> TaskDefinition {
    task(family, vec![container("app", APP_IMAGE)])
}

fn statuses(events: &[Event]) -> Vec<(Option<String>, String)> {
    events
        .iter()
        .map(|event| (event.container.clone(), event.status.clone()))
        .collect()
}

fn entry(container: Option<&str>, status: &str) -> (Option<String>, String) {
    (container.map(str::to_string), status.to_string())
}

#[test]
fn happy_path_calls_and_events_in_order() {
    let harness = Harness::new();
    let definition = task(
        "web",
        vec![
            container("db", DB_IMAGE),
            depends_on(
                container("app", APP_IMAGE),
                "db",
                DependencyCondition::Start,
            ),
        ],
    );
    let accepted = harness.engine.submit(definition).expect("accepted");
    assert_eq!(accepted.id.len(), 32);
    assert!(accepted
        .arn
        .ends_with(&format!("task/test-cluster/{}", accepted.id)));
    let id = accepted.id;
    harness.wait_event(&id, None, "RUNNING");

    let calls: Vec<(Op, String)> = harness
        .fake
        .calls()
        .into_iter()
        .filter(|call| matches!(call.op, Op::Pull | Op::Create | Op::Start))
        .map(|call| (call.op, call.subject))
        .collect();
    assert_eq!(
        calls,
        vec![
            (Op::Pull, DB_IMAGE.to_string()),
            (Op::Create, "db".to_string()),
            (Op::Start, "db".to_string()),
            (Op::Pull, APP_IMAGE.to_string()),
            (Op::Create, "app".to_string()),
            (Op::Start, "app".to_string()),
        ]
    );
    let create = harness.fake.calls_of(Op::Create)[1]
        .spec
        .clone()
        .expect("spec");
    assert!(
        create.name.starts_with("deckhand-web-1-app-"),
        "{}",
        create.name
    );
    assert_eq!(create.labels["com.amazonaws.ecs.cluster"], "test-cluster");
    assert_eq!(create.labels["com.amazonaws.ecs.container-name"], "app");
    assert_eq!(
        create.labels["com.amazonaws.ecs.task-definition-family"],
        "web"
    );
    assert_eq!(
        create.labels["com.amazonaws.ecs.task-definition-version"],
        "1"
    );
    assert!(create.labels["com.amazonaws.ecs.task-arn"].ends_with(&id));

    harness.engine.stop(&id).expect("stop accepted");
    harness.wait_event(&id, None, "STOPPED");
    let stops: Vec<String> = harness
        .fake
        .calls_of(Op::Stop)
        .into_iter()
        .map(|call| call.subject)
        .collect();
    assert_eq!(
        stops,
        vec!["app".to_string(), "db".to_string()],
        "reverse order"
    );
    assert_eq!(
        statuses(&harness.events_of(&id)),
        vec![
            entry(Some("db"), "RUNNING"),
            entry(Some("app"), "RUNNING"),
            entry(None, "RUNNING"),
            entry(Some("app"), "STOPPED"),
            entry(Some("db"), "STOPPED"),
            entry(None, "STOPPED"),
        ]
    );
    let events = harness.events_of(&id);
    assert_eq!(events[3].exit_code, Some(143));
    assert_eq!(events[5].reason.as_deref(), Some("Task stopped by request"));
    // Gap-free global numbering.
    let all = harness.engine.events_since(0, Duration::ZERO);
    for (position, event) in all.iter().enumerate() {
        assert_eq!(event.seq, position as u64 + 1);
    }
    // The reporter's receipt reaches the task after the event is recorded.
    harness.wait_task(&id, "sent STOPPED", |task| {
        task.is_some_and(|t| t.sent_status == TaskStatus::Stopped)
    });
    let snapshot = harness.engine.task(&id).expect("still held until cleanup");
    assert_eq!(snapshot.known_status, TaskStatus::Stopped);
    assert!(snapshot.containers.iter().all(|c| c.docker_id.is_some()));
}

#[test]
fn pull_failure_under_each_pull_behaviour() {
    // (behaviour, image cached, expect pull call, task reaches)
    let table = [
        (PullBehavior::Default, true, true, "RUNNING"),
        (PullBehavior::Always, true, true, "STOPPED"),
        (PullBehavior::Once, true, true, "STOPPED"),
        (PullBehavior::PreferCached, true, false, "RUNNING"),
        (PullBehavior::PreferCached, false, true, "STOPPED"),
        (PullBehavior::Default, false, true, "STOPPED"),
    ];
    for (behavior, cached, pulls, outcome) in table {
        let harness = Harness::with_config(EngineConfig {
            pull_behavior: behavior,
            ..fast_config()
        });
        let image = "test/pull-fails:1";
        if cached {
            harness.fake.add_image(image);
        }
        harness.fake.fail_next(
            Op::Pull,
            image,
            RuntimeError::CannotPull {
                message: "registry unreachable".to_string(),
            },
        );
        let id = harness.submit(task("pull", vec![container("app", image)]));
        let event = harness.wait_event(&id, None, outcome);
        let label = format!("{behavior:?} cached={cached}");
        assert_eq!(
            harness.fake.count(Op::Pull, image),
            usize::from(pulls),
            "{label}"
        );
        if outcome == "STOPPED" {
            // Where the create followed the failed pull (and failed for want of the image),
            // the pull's error was the first and stays the reason.
            let app = harness.wait_event(&id, Some("app"), "STOPPED");
            assert_eq!(
                app.reason.as_deref(),
                Some("CannotPullContainerError: registry unreachable"),
                "{label}: the container's STOPPED names the error"
            );
            assert_eq!(
                event.reason.as_deref(),
                Some("CannotPullContainerError: container \"app\": registry unreachable"),
                "{label}: the task's STOPPED has the reason"
            );
            assert_eq!(harness.fake.count(Op::Start, "app"), 0, "{label}");
        }
        if matches!(behavior, PullBehavior::Always | PullBehavior::Once) {
            assert_eq!(
                harness.fake.count(Op::Create, "app"),
                0,
                "{label}: never created"
            );
        }
    }
}

#[test]
fn once_pulls_an_image_only_the_first_time() {
    let harness = Harness::with_config(EngineConfig {
        pull_behavior: PullBehavior::Once,
        ..fast_config()
    });
    let first = harness.submit(one_container_task("first"));
    harness.wait_event(&first, None, "RUNNING");
    let second = harness.submit(one_container_task("second"));
    harness.wait_event(&second, None, "RUNNING");
    assert_eq!(harness.fake.count(Op::Pull, APP_IMAGE), 1);
}

#[test]
fn a_failed_pull_followed_by_a_failed_create_reports_the_pull_error() {
    // A container keeps its first error: under `prefer-cached` and `default` a failed pull goes
    // on to the create, and when that fails too, the pull's error is still the reason.
    for behavior in [PullBehavior::PreferCached, PullBehavior::Default] {
        let harness = Harness::with_config(EngineConfig {
            pull_behavior: behavior,
            ..fast_config()
        });
        let image = "test/pull-then-create-fail:1";
        harness.fake.fail_next(
            Op::Pull,
            image,
            RuntimeError::CannotPull {
                message: "manifest unknown".to_string(),
            },
        );
        harness.fake.fail_next(
            Op::Create,
            "app",
            RuntimeError::Api {
                status: 500,
                message: "no space left on device".to_string(),
            },
        );
        let id = harness.submit(task("first-error", vec![container("app", image)]));
        let app = harness.wait_event(&id, Some("app"), "STOPPED");
        let task_stopped = harness.wait_event(&id, None, "STOPPED");
        assert_eq!(
            harness.fake.count(Op::Create, "app"),
            1,
            "{behavior:?}: created after the pull"
        );
        assert_eq!(
            app.reason.as_deref(),
            Some("CannotPullContainerError: manifest unknown"),
            "{behavior:?}"
        );
        assert_eq!(
            task_stopped.reason.as_deref(),
            Some("CannotPullContainerError: container \"app\": manifest unknown"),
            "{behavior:?}"
        );
    }
}

#[test]
fn a_refused_or_timed_out_start_is_reported_by_its_ecs_name() {
    // (case, the start's error, the container's reason)
    let table = [
        (
            "refused",
            RuntimeError::Api {
                status: 400,
                message: "port is already allocated".to_string(),
            },
            "CannotStartContainerError: Docker API error 400: port is already allocated",
        ),
        (
            "timed out",
            RuntimeError::Timeout {
                operation: "start container".to_string(),
                after: Duration::from_secs(240),
            },
            "DockerTimeoutError: start container timed out after 240s",
        ),
    ];
    for (case, error, reason) in table {
        let harness = Harness::new();
        harness.fake.fail_next(Op::Start, "app", error);
        let id = harness.submit(one_container_task("start-fails"));
        let app = harness.wait_event(&id, Some("app"), "STOPPED");
        assert_eq!(app.reason.as_deref(), Some(reason), "{case}");
        let task_stopped = harness.wait_event(&id, None, "STOPPED");
        let task_reason = task_stopped.reason.unwrap_or_default();
        assert!(
            task_reason.starts_with(reason.split(": ").next().unwrap_or_default())
                && task_reason.contains("container \"app\""),
            "{case}: {task_reason}"
        );
    }
}

#[test]
fn create_error_stops_the_task_without_a_start() {
    let harness = Harness::new();
    harness.fake.fail_next(
        Op::Create,
        "app",
        RuntimeError::Api {
            status: 500,
            message: "invalid mount config".to_string(),
        },
    );
    let id = harness.submit(one_container_task("create-fails"));
    let stopped = harness.wait_event(&id, Some("app"), "STOPPED");
    assert_eq!(
        stopped.reason.as_deref(),
        Some("CannotCreateContainerError: Docker API error 500: invalid mount config")
    );
    let task_stopped = harness.wait_event(&id, None, "STOPPED");
    assert_eq!(
        task_stopped.reason.as_deref(),
        Some(
            "CannotCreateContainerError: container \"app\": Docker API error 500: invalid mount config"
        )
    );
    assert_eq!(harness.fake.count(Op::Start, "app"), 0);
    assert_eq!(harness.fake.count(Op::Stop, "app"), 0, "nothing to stop");
    assert!(harness
        .events_of(&id)
        .iter()
        .all(|event| event.status != "RUNNING"));
}

#[test]
fn start_timeout_forces_a_stop() {
    let harness = Harness::new();
    harness.fake.script(
        Op::Start,
        "app",
        Script::EffectThenFail(RuntimeError::Timeout {
            operation: "start".to_string(),
            after: Duration::from_secs(180),
        }),
    );
    // No `start` event reaches the engine: all it knows is that the start timed out.
    harness.fake.set_drop_events(true);
    let id = harness.submit(one_container_task("start-times-out"));
    harness.wait_event(&id, None, "STOPPED");
    assert!(
        harness
            .events_of(&id)
            .iter()
            .all(|event| event.status != "RUNNING"),
        "a start that timed out is not reported as running"
    );
    // The start did happen in Docker; the engine must not strand the running container.
    harness.wait_calls(Op::Stop, "app", 1);
    harness
        .fake
        .wait_for(DEADLINE, |fake| {
            fake.container("app").map(|c| c.status) == Some(FakeStatus::Exited)
        })
        .expect("the container that did start is stopped");
}

#[test]
fn stop_timeout_is_retried() {
    let harness = Harness::new();
    let id = harness.submit(one_container_task("stop-times-out"));
    harness.wait_event(&id, None, "RUNNING");
    harness.fake.fail_next(
        Op::Stop,
        "app",
        RuntimeError::Timeout {
            operation: "stop".to_string(),
            after: Duration::from_secs(32),
        },
    );
    harness.engine.stop(&id).expect("stop accepted");
    let stopped = harness.wait_event(&id, Some("app"), "STOPPED");
    assert_eq!(stopped.exit_code, Some(143));
    harness.wait_event(&id, None, "STOPPED");
    assert_eq!(
        harness.fake.count(Op::Stop, "app"),
        2,
        "one timeout, one retry"
    );
    assert_eq!(
        harness.fake.container("app").map(|c| c.status),
        Some(FakeStatus::Exited)
    );
}

#[test]
fn stop_of_a_vanished_container_counts_as_stopped() {
    let harness = Harness::new();
    let id = harness.submit(one_container_task("vanished"));
    harness.wait_event(&id, None, "RUNNING");
    harness.fake.fail_next(
        Op::Stop,
        "app",
        RuntimeError::NoSuchContainer {
            message: "No such container".to_string(),
        },
    );
    harness.engine.stop(&id).expect("stop accepted");
    let stopped = harness.wait_event(&id, Some("app"), "STOPPED");
    assert_eq!(
        stopped.reason.as_deref(),
        Some("CannotStopContainerError: no such container: No such container")
    );
    harness.wait_event(&id, None, "STOPPED");
    assert_eq!(
        harness.fake.count(Op::Stop, "app"),
        1,
        "no retry for a missing container"
    );
}

#[test]
fn stopped_container_seen_running_is_restopped_exactly_once() {
    let harness = Harness::new();
    let id = harness.submit(task(
        "restop",
        vec![
            container("app", APP_IMAGE),
            non_essential(container("side", DB_IMAGE)),
        ],
    ));
    harness.wait_event(&id, None, "RUNNING");
    harness.fake.exit("side", 0);
    harness.wait_event(&id, Some("side"), "STOPPED");

    harness.fake.restart_behind_the_engines_back("side");
    harness.wait_calls(Op::Stop, "side", 1);
    // A second outside restart is left alone: the engine never fights it.
    harness.fake.restart_behind_the_engines_back("side");
    // The app's exit is routed after the restart event, so once the task saw it, it has
    // handled the restart too.
    harness.fake.exit("app", 0);
    harness.wait_event(&id, None, "STOPPED");
    assert_eq!(harness.fake.count(Op::Stop, "side"), 1);
    let side_events: Vec<String> = harness
        .events_of(&id)
        .into_iter()
        .filter(|event| event.container.as_deref() == Some("side"))
        .map(|event| event.status)
        .collect();
    assert_eq!(
        side_events,
        vec!["RUNNING", "STOPPED"],
        "no event for the outside restarts"
    );
}

#[test]
fn essential_exit_stops_the_task_and_non_essential_exit_does_not() {
    let harness = Harness::new();
    let id = harness.submit(task(
        "essential",
        vec![
            container("app", APP_IMAGE),
            non_essential(container("side", DB_IMAGE)),
        ],
    ));
    harness.wait_event(&id, None, "RUNNING");
    harness.fake.exit("side", 3);
    let side = harness.wait_event(&id, Some("side"), "STOPPED");
    assert_eq!(side.exit_code, Some(3));
    harness.fake.exit("app", 7);
    let task_stopped = harness.wait_event(&id, None, "STOPPED");
    assert_eq!(
        statuses(&harness.events_of(&id))[3..],
        [
            entry(Some("side"), "STOPPED"),
            entry(Some("app"), "STOPPED"),
            entry(None, "STOPPED"),
        ],
        "the task ran on after the non-essential exit"
    );
    let app = harness.wait_event(&id, Some("app"), "STOPPED");
    assert_eq!(app.exit_code, Some(7));
    assert!(task_stopped
        .reason
        .as_deref()
        .unwrap_or("")
        .contains("Essential container"));
    let snapshot = harness.engine.task(&id).expect("held until cleanup");
    assert!(snapshot.execution_stopped_at.is_some());
}

#[test]
fn success_dependency_exiting_non_zero_stops_dependents_with_143() {
    let harness = Harness::new();
    let id = harness.submit(task(
        "init-fails",
        vec![
            non_essential(container("init", DB_IMAGE)),
            depends_on(
                container("app", APP_IMAGE),
                "init",
                DependencyCondition::Success,
            ),
        ],
    ));
    harness.wait_event(&id, Some("init"), "RUNNING");
    harness.fake.exit("init", 1);
    let app = harness.wait_event(&id, Some("app"), "STOPPED");
    assert_eq!(app.exit_code, Some(143));
    assert_eq!(
        app.reason.as_deref(),
        Some(
            "CannotStartContainerError: dependency \"init\" exited with code 1, SUCCESS needs \
             exit code 0"
        ),
        "{app:?}"
    );
    harness.wait_event(&id, None, "STOPPED");
    assert_eq!(harness.fake.count(Op::Create, "app"), 0, "never created");
    assert_eq!(
        harness.fake.count(Op::Pull, APP_IMAGE),
        0,
        "pull is gated too"
    );
}

#[test]
fn healthy_dependency_gates_the_dependent() {
    let harness = Harness::new();
    let id = harness.submit(task(
        "healthy",
        vec![
            with_health_check(container("db", DB_IMAGE), "true"),
            depends_on(
                container("app", APP_IMAGE),
                "db",
                DependencyCondition::Healthy,
            ),
        ],
    ));
    harness.wait_event(&id, Some("db"), "RUNNING");
    harness.fake.set_health("db", "unhealthy");
    harness.wait_task(&id, "db reported unhealthy", |task| {
        task.and_then(|t| t.container("db")).map(|c| c.health)
            == Some(deckhand::task::HealthStatus::Unhealthy)
    });
    assert_eq!(
        harness.fake.count(Op::Create, "app"),
        0,
        "gated while db is not healthy"
    );
    harness.fake.set_health("db", "healthy");
    harness.wait_event(&id, None, "RUNNING");
    assert!(harness.call_order(Op::Create, "app") > harness.call_order(Op::Start, "db"));
}

#[test]
fn dependency_start_timeout_stops_the_dependent() {
    let harness = Harness::new();
    let mut database = with_health_check(container("db", DB_IMAGE), "false");
    database.start_timeout_secs = Some(1);
    let id = harness.submit(task(
        "start-timeout",
        vec![
            database,
            depends_on(
                container("app", APP_IMAGE),
                "db",
                DependencyCondition::Healthy,
            ),
        ],
    ));
    let db_running = harness.wait_event(&id, Some("db"), "RUNNING");
    let app = harness.wait_event(&id, Some("app"), "STOPPED");
    assert_eq!(app.exit_code, Some(143));
    let reason = app.reason.as_deref().unwrap_or("");
    assert!(
        reason.starts_with("CannotStartContainerError: dependency \"db\" did not reach")
            && reason.contains("startTimeout"),
        "{app:?}"
    );
    assert!(
        app.time >= db_running.time + 1000,
        "not before the start timeout elapsed"
    );
    harness.wait_event(&id, None, "STOPPED");
    assert_eq!(harness.fake.count(Op::Create, "app"), 0);
}

#[test]
fn shutdown_of_a_task_runs_in_reverse_dependency_order() {
    let harness = Harness::new();
    let id = harness.submit(task(
        "chain",
        vec![
            container("a", DB_IMAGE),
            depends_on(container("b", DB_IMAGE), "a", DependencyCondition::Start),
            depends_on(container("c", APP_IMAGE), "b", DependencyCondition::Start),
        ],
    ));
    harness.wait_event(&id, None, "RUNNING");
    harness.engine.stop(&id).expect("stop accepted");
    harness.wait_event(&id, None, "STOPPED");
    let a = harness.fake.container("a").expect("a");
    let b = harness.fake.container("b").expect("b");
    let c = harness.fake.container("c").expect("c");
    assert!(a.started_tick < b.started_tick && b.started_tick < c.started_tick);
    assert!(c.finished_tick < b.finished_tick && b.finished_tick < a.finished_tick);
    assert!(harness.call_order(Op::Stop, "b") > harness.call_order(Op::Stop, "c"));
    assert!(harness.call_order(Op::Stop, "a") > harness.call_order(Op::Stop, "b"));
}

#[test]
fn stop_while_a_pull_is_blocked() {
    let harness = Harness::new();
    let gate = harness.fake.hold_next(Op::Pull, APP_IMAGE);
    let id = harness.submit(one_container_task("pull-blocked"));
    harness.wait_calls(Op::Pull, APP_IMAGE, 1);
    harness
        .engine
        .stop(&id)
        .expect("stop accepted while the pull hangs");
    harness.wait_task(&id, "desired STOPPED while the pull hangs", |task| {
        task.is_some_and(|t| t.desired_status == TaskStatus::Stopped)
    });
    assert!(
        harness.events_of(&id).is_empty(),
        "nothing is reported while the pull is in flight"
    );
    gate.release();
    let stopped = harness.wait_event(&id, Some("app"), "STOPPED");
    assert_eq!(stopped.exit_code, None, "it never ran");
    harness.wait_event(&id, None, "STOPPED");
    assert_eq!(
        harness.fake.count(Op::Create, "app"),
        0,
        "never created after the stop"
    );
}

#[test]
fn stop_while_waiting_on_the_wait_group_ends_the_wait() {
    let harness = Harness::new();
    let first = harness.submit(task("first", vec![container("a", DB_IMAGE)]));
    harness.wait_event(&first, None, "RUNNING");
    let gate = harness.fake.hold_next(Op::Stop, "a");
    harness.engine.stop(&first).expect("stop accepted");
    harness.wait_calls(Op::Stop, "a", 1);

    let second = harness.submit(task("second", vec![container("b", APP_IMAGE)]));
    harness
        .engine
        .stop(&second)
        .expect("stop of a waiting task accepted");
    // The second task answers its stop although the first one's stop is still outstanding.
    harness.wait_event(&second, None, "STOPPED");
    assert_eq!(
        harness.fake.count(Op::Pull, APP_IMAGE),
        0,
        "it never started"
    );
    assert!(harness
        .events_of(&first)
        .iter()
        .all(|e| e.status != "STOPPED"));
    gate.release();
    harness.wait_event(&first, None, "STOPPED");
    harness
        .engine
        .wait_group()
        .ready(u64::MAX)
        .recv_timeout(DEADLINE)
        .expect("every stop number is finished");
}

#[test]
fn a_task_started_after_a_stop_is_created_after_the_stopped_containers_stop() {
    let harness = Harness::new();
    let old = harness.submit(task("old", vec![container("old", DB_IMAGE)]));
    harness.wait_event(&old, None, "RUNNING");
    let gate = harness.fake.hold_next(Op::Stop, "old");
    harness.engine.stop(&old).expect("stop accepted");
    let new = harness.submit(task("new", vec![container("new", APP_IMAGE)]));
    harness.wait_calls(Op::Stop, "old", 1);
    assert_eq!(
        harness.fake.count(Op::Create, "new"),
        0,
        "waits for the earlier stop"
    );
    gate.release();
    harness.wait_event(&new, None, "RUNNING");
    let old_container = harness.fake.container("old").expect("old");
    let new_container = harness.fake.container("new").expect("new");
    assert!(
        new_container.created_tick > old_container.finished_tick,
        "created at tick {} before the old container finished at tick {}",
        new_container.created_tick,
        old_container.finished_tick
    );
}

#[test]
fn cleanup_after_the_wait_duration_once_stopped_is_reported() {
    let cleanup_wait = Duration::from_millis(300);
    let harness = Harness::with_config(EngineConfig {
        cleanup_wait,
        ..fast_config()
    });
    let id = harness.submit(one_container_task("cleanup"));
    harness.wait_event(&id, None, "RUNNING");
    harness.engine.stop(&id).expect("stop accepted");
    let stopped = harness.wait_event(&id, None, "STOPPED");
    harness.wait_calls(Op::Remove, "app", 1);
    let removal = harness.fake.calls_of(Op::Remove)[0].clone();
    let removed_at = removal
        .at
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_millis() as u64;
    assert!(
        removed_at >= stopped.time + cleanup_wait.as_millis() as u64,
        "removed {} ms after STOPPED was reported",
        removed_at.saturating_sub(stopped.time)
    );
    harness.wait_task(&id, "the task is forgotten", |task| task.is_none());
    assert!(harness.engine.tasks().is_empty());
    assert_eq!(harness.engine.running_task_count(), 0);
    assert!(
        harness.fake.container("app").is_none(),
        "the container was removed"
    );
    assert_eq!(
        harness.engine.stop(&id),
        Err(EngineError::NotFound { task: id.clone() })
    );
}

#[test]
fn two_hundred_tasks_at_once_without_deadlock() {
    let harness = Harness::new();
    let ids: Vec<String> = (0..200)
        .map(|number| {
            harness.submit(task(
                &format!("many{number}"),
                vec![
                    container("app", APP_IMAGE),
                    non_essential(container("side", DB_IMAGE)),
                ],
            ))
        })
        .collect();
    for id in &ids {
        harness.wait_event(id, None, "RUNNING");
    }
    for id in &ids {
        harness.engine.stop(id).expect("stop accepted");
    }
    for id in &ids {
        harness.wait_event(id, None, "STOPPED");
    }
    assert_eq!(harness.fake.calls_of(Op::Start).len(), 400);
    assert_eq!(harness.fake.calls_of(Op::Stop).len(), 400);
    harness
        .engine
        .wait_group()
        .ready(u64::MAX)
        .recv_timeout(DEADLINE)
        .expect("every stop number is finished");
}

#[test]
fn a_missed_die_is_caught_by_the_steady_state_recheck() {
    let harness = Harness::with_config(EngineConfig {
        steady_check_interval: Duration::from_millis(50),
        ..fast_config()
    });
    let id = harness.submit(one_container_task("missed-die"));
    harness.wait_event(&id, None, "RUNNING");
    harness.fake.set_drop_events(true);
    harness.fake.exit("app", 5);
    let stopped = harness.wait_event(&id, Some("app"), "STOPPED");
    assert_eq!(stopped.exit_code, Some(5));
    harness.wait_event(&id, None, "STOPPED");
}

#[test]
fn a_broken_event_stream_is_reconnected_and_containers_reinspected() {
    let harness = Harness::new();
    let id = harness.submit(one_container_task("reconnect"));
    harness.wait_event(&id, None, "RUNNING");
    let inspections_before = harness.fake.count(Op::Inspect, "app");
    harness.fake.break_event_streams();
    harness.wait_calls(Op::Events, "", 2);
    harness.wait_calls(Op::Inspect, "app", inspections_before + 1);
    harness.fake.exit("app", 9);
    let stopped = harness.wait_event(&id, Some("app"), "STOPPED");
    assert_eq!(stopped.exit_code, Some(9));
}

#[test]
fn privileged_tasks_are_rejected_when_privileged_is_disabled() {
    let harness = Harness::with_config(EngineConfig {
        disable_privileged: true,
        ..fast_config()
    });
    let mut privileged = container("app", APP_IMAGE);
    privileged.privileged = true;
    let result = harness.engine.submit(task("privileged", vec![privileged]));
    match result {
        Err(EngineError::Rejected { reason }) => assert!(reason.contains("privileged"), "{reason}"),
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert!(harness.engine.tasks().is_empty());
    assert!(harness.fake.calls_of(Op::Pull).is_empty());
}

#[test]
fn shutdown_joins_every_thread_and_leaves_containers_running() {
    let harness = Harness::new();
    let id = harness.submit(one_container_task("shutdown"));
    harness.wait_event(&id, None, "RUNNING");
    harness.engine.shutdown();
    assert_eq!(harness.engine.running_task_count(), 0);
    assert_eq!(
        harness.fake.container("app").map(|c| c.status),
        Some(FakeStatus::Running)
    );
    assert!(harness.fake.calls_of(Op::Stop).is_empty());
    assert_eq!(
        harness
            .engine
            .submit(one_container_task("late"))
            .map(|t| t.id),
        Err(EngineError::ShuttingDown)
    );
    // The task threads are gone: none is named after the task any more.
    let task_threads = std::fs::read_dir("/proc/self/task")
        .expect("procfs")
        .filter_map(Result::ok)
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("comm")).ok())
        .filter(|name| name.trim() == format!("task-{}", &id[..10]))
        .count();
    assert_eq!(task_threads, 0);
}

#[test]
fn container_statuses_only_rise_in_snapshots() {
    let harness = Harness::new();
    let id = harness.submit(task(
        "rising",
        vec![container("db", DB_IMAGE), container("app", APP_IMAGE)],
    ));
    let mut last = [ContainerStatus::None; 2];
    let mut violations = Vec::new();
    harness.wait_task(&id, "RUNNING", |task| {
        if let Some(task) = task {
            for (index, container) in task.containers.iter().enumerate() {
                if container.known_status < last[index] {
                    violations.push((
                        container.name().to_string(),
                        last[index],
                        container.known_status,
                    ));
                }
                last[index] = container.known_status;
            }
        }
        task.is_some_and(|t| t.known_status == TaskStatus::Running)
    });
    assert!(violations.is_empty(), "{violations:?}");
}

#[test]
fn reordered_events_leave_the_task_right() {
    let harness = Harness::new();
    // Every event of the starts and of the exit is held back, then delivered newest first.
    harness.fake.buffer_events();
    let id = harness.submit(task(
        "reordered",
        vec![
            container("main", APP_IMAGE),
            non_essential(container("job", DB_IMAGE)),
        ],
    ));
    harness.wait_event(&id, None, "RUNNING");
    harness.fake.exit("job", 4);
    harness.fake.flush_events(true);
    let stopped = harness.wait_event(&id, Some("job"), "STOPPED");
    assert_eq!(stopped.exit_code, Some(4));
    // A barrier: after a stream break the engine reconnects and has the task re-inspect its
    // running containers, which it does only after the events already routed to it.
    let main_inspections = harness.fake.count(Op::Inspect, "main");
    harness.fake.break_event_streams();
    harness.wait_calls(Op::Inspect, "main", main_inspections + 1);
    // The late `start` of the job is older than its exit: not a restart, so no re-stop.
    assert_eq!(harness.fake.count(Op::Stop, "job"), 0);
    // The two containers start concurrently, so their RUNNING events come in either order.
    let mut reported = statuses(&harness.events_of(&id));
    reported[..2].sort();
    assert_eq!(
        reported,
        vec![
            entry(Some("job"), "RUNNING"),
            entry(Some("main"), "RUNNING"),
            entry(None, "RUNNING"),
            entry(Some("job"), "STOPPED"),
        ]
    );
    let snapshot = harness.engine.task(&id).expect("held");
    assert_eq!(
        snapshot.known_status,
        TaskStatus::Running,
        "the task runs on"
    );
    assert_eq!(
        snapshot.container("job").map(|c| c.known_status),
        Some(ContainerStatus::Stopped)
    );
}

fn restarting(name: &str, image: &str) -> deckhand::task::ContainerDefinition {
    let mut definition = container(name, image);
    definition.restart_policy = Some(deckhand::task::RestartPolicy {
        enabled: true,
        ignored_exit_codes: vec![0],
        restart_attempt_period_secs: 0,
    });
    definition
}

#[test]
fn a_restart_policy_restarts_an_exited_container_in_place() {
    let metrics = deckhand::metrics::global();
    let restarts_before = metrics.container_restarts_total();
    let harness = Harness::new();
    let id = harness.submit(task("restarts", vec![restarting("app", APP_IMAGE)]));
    harness.wait_event(&id, None, "RUNNING");
    harness.fake.exit("app", 1);
    harness.wait_calls(Op::Start, "app", 2);
    harness.wait_task(&id, "one restart counted", |task| {
        task.and_then(|t| t.container("app"))
            .is_some_and(|c| c.restart_count == 1)
    });
    // The second start call is recorded before the fake applies it: wait for the container.
    harness
        .fake
        .wait_for(DEADLINE, |fake| {
            fake.container("app").map(|c| c.start_count) == Some(2)
        })
        .unwrap_or_else(|message| panic!("the restart never started the container: {message}"));
    // The worker counts the restart once Docker's answer is back, which the task's own count
    // (raised when it asked) does not wait for; other tests of this binary may add theirs.
    let deadline = std::time::Instant::now() + DEADLINE;
    while metrics.container_restarts_total() <= restarts_before {
        assert!(
            std::time::Instant::now() < deadline,
            "deckhand_container_restarts_total never counted the restart"
        );
        std::thread::yield_now();
    }
    // An ignored exit code is a normal exit: the essential container stops the task.
    harness.fake.exit("app", 0);
    let stopped = harness.wait_event(&id, Some("app"), "STOPPED");
    assert_eq!(stopped.exit_code, Some(0));
    harness.wait_event(&id, None, "STOPPED");
    assert_eq!(harness.fake.count(Op::Start, "app"), 2);
    assert_eq!(
        statuses(&harness.events_of(&id)),
        vec![
            entry(Some("app"), "RUNNING"),
            entry(None, "RUNNING"),
            entry(Some("app"), "STOPPED"),
            entry(None, "STOPPED"),
        ],
        "the restart itself is not reported"
    );
}

#[test]
fn a_failed_restart_is_a_normal_exit() {
    let harness = Harness::new();
    let id = harness.submit(task("restart-fails", vec![restarting("app", APP_IMAGE)]));
    harness.wait_event(&id, None, "RUNNING");
    harness.fake.fail_next(
        Op::Start,
        "app",
        RuntimeError::Api {
            status: 500,
            message: "cannot restart".to_string(),
        },
    );
    harness.fake.exit("app", 2);
    let stopped = harness.wait_event(&id, Some("app"), "STOPPED");
    assert_eq!(stopped.exit_code, Some(2));
    harness.wait_event(&id, None, "STOPPED");
    assert_eq!(
        harness.fake.count(Op::Start, "app"),
        2,
        "one start, one failed restart"
    );
}

#[test]
fn a_create_that_timed_out_but_happened_is_made_again_and_adopts_the_container() {
    let harness = Harness::new();
    harness.fake.script(
        Op::Create,
        "app",
        Script::EffectThenFail(RuntimeError::Timeout {
            operation: "create".to_string(),
            after: Duration::from_secs(240),
        }),
    );
    let id = harness.submit(one_container_task("create-times-out"));
    harness.wait_event(&id, None, "RUNNING");
    assert_eq!(
        harness.fake.count(Op::Create, "app"),
        2,
        "the timed-out create is made again"
    );
    let containers = harness.fake.containers();
    assert_eq!(containers.len(), 1, "adopted, not duplicated");
    let task = harness.engine.task(&id).expect("held");
    assert_eq!(
        task.containers[0].docker_id.as_ref(),
        Some(&containers[0].id)
    );
    assert!(
        !statuses(&harness.events_of(&id)).contains(&entry(None, "STOPPED")),
        "a timed-out create is not the task's failure"
    );
}

#[test]
fn a_create_that_failed_but_happened_is_removed_at_cleanup() {
    let harness = Harness::with_config(EngineConfig {
        cleanup_wait: Duration::ZERO,
        ..fast_config()
    });
    harness.fake.script(
        Op::Create,
        "app",
        Script::EffectThenFail(RuntimeError::Api {
            status: 500,
            message: "the container was made, then the daemon failed".to_string(),
        }),
    );
    let id = harness.submit(one_container_task("create-fails-late"));
    harness.wait_event(&id, None, "STOPPED");
    assert_eq!(harness.fake.count(Op::Start, "app"), 0);
    harness.wait_task(&id, "cleaned up", |task| task.is_none());
    assert!(
        harness.fake.containers().is_empty(),
        "the container Docker made despite the error was removed by its fixed name"
    );
}

#[test]
fn a_task_submitted_while_docker_is_away_starts_once_docker_is_back() {
    let harness = Harness::new();
    harness.fake.set_docker_down(true);
    let id = harness.submit(one_container_task("docker-away-at-submit"));
    // Docker is away: the pull is tried, then tried again after a back-off; the task waits.
    harness.wait_calls(Op::Pull, APP_IMAGE, 2);
    let task = harness.engine.task(&id).expect("held");
    assert_eq!(task.desired_status, TaskStatus::Running, "{task:#?}");
    assert_eq!(task.known_status, TaskStatus::None);
    assert_eq!(task.stopped_reason, None);
    assert!(
        harness.events_of(&id).is_empty(),
        "{:?}",
        harness.events_of(&id)
    );
    // Docker is back: the next retry pulls, and the task runs.
    harness.fake.set_docker_down(false);
    harness.wait_event(&id, None, "RUNNING");
    assert_eq!(
        statuses(&harness.events_of(&id)),
        vec![entry(Some("app"), "RUNNING"), entry(None, "RUNNING")]
    );
    assert_eq!(harness.fake.count(Op::Create, "app"), 1);
}

#[test]
fn a_stop_asked_while_docker_is_away_completes_when_docker_is_back() {
    let harness = Harness::new();
    let id = harness.submit(one_container_task("stop-while-away"));
    harness.wait_event(&id, None, "RUNNING");
    harness.fake.set_docker_down(true);
    let pings = harness.fake.count(Op::Ping, "");
    harness.engine.stop(&id).expect("the stop is accepted");
    // The stop worker retried, pinged Docker and found it away; the task waits for Docker and
    // tries the stop again.
    harness.wait_calls(Op::Ping, "", pings + 2);
    let task = harness.engine.task(&id).expect("held");
    assert_eq!(task.desired_status, TaskStatus::Stopped);
    assert_eq!(task.known_status, TaskStatus::Running, "{task:#?}");
    assert_eq!(task.containers[0].known_status, ContainerStatus::Running);
    assert_eq!(
        harness.fake.container("app").map(|c| c.status),
        Some(FakeStatus::Running)
    );
    assert!(!statuses(&harness.events_of(&id)).contains(&entry(None, "STOPPED")));
    // Docker is back: the stop is made and confirmed.
    harness.fake.set_docker_down(false);
    let stopped = harness.wait_event(&id, None, "STOPPED");
    assert_eq!(stopped.reason.as_deref(), Some("Task stopped by request"));
    assert_eq!(
        harness.fake.container("app").map(|c| c.status),
        Some(FakeStatus::Exited)
    );
}

#[test]
fn cleanup_while_docker_is_away_removes_the_containers_once_it_is_back() {
    let harness = Harness::with_config(EngineConfig {
        cleanup_wait: Duration::ZERO,
        ..fast_config()
    });
    harness.fake.fail_next(
        Op::Remove,
        "app",
        RuntimeError::Unreachable {
            message: "connection refused".to_string(),
        },
    );
    let id = harness.submit(one_container_task("cleanup-while-away"));
    harness.wait_event(&id, None, "RUNNING");
    harness.engine.stop(&id).expect("the stop is accepted");
    harness.wait_task(&id, "cleaned up", |task| task.is_none());
    assert_eq!(harness.fake.count(Op::Remove, "app"), 2, "removed again");
    assert!(harness.fake.containers().is_empty());
}

/// §14: every container is created with its own task metadata URI (v4 and v3), which replaces
/// one its definition sets; the engine finds the task by the token and reads stats through the
/// runtime.
#[test]
fn containers_are_created_with_their_task_metadata_uri() {
    use deckhand::task::metadata_endpoint::MetadataEndpoint;
    let config = EngineConfig {
        task_metadata: Some(MetadataEndpoint {
            bridge_address: Some(std::net::Ipv4Addr::new(172, 17, 0, 1)),
            loopback: true,
            port: 51679,
        }),
        ..fast_config()
    };
    let harness = Harness::with_config(config);
    let mut app = container("app", APP_IMAGE);
    app.environment = vec![(
        "ECS_CONTAINER_METADATA_URI_V4".to_string(),
        "http://wrong".to_string(),
    )];
    let definition = task("meta", vec![container("db", DB_IMAGE), app]);
    let accepted = harness.engine.submit(definition).expect("accepted");
    let tokens: Vec<String> = accepted
        .containers
        .iter()
        .map(|container| container.metadata_token.clone().expect("a token"))
        .collect();
    assert_eq!(tokens[0].len(), 32);
    assert_ne!(tokens[0], tokens[1], "one token per container");
    harness.wait_event(&accepted.id, None, "RUNNING");

    for (name, token) in ["db", "app"].iter().zip(&tokens) {
        let spec = harness
            .fake
            .calls_of(Op::Create)
            .into_iter()
            .find(|call| call.subject == *name)
            .and_then(|call| call.spec)
            .expect("a create spec");
        let v4: Vec<&String> = spec
            .env
            .iter()
            .filter(|entry| entry.starts_with("ECS_CONTAINER_METADATA_URI_V4="))
            .collect();
        assert_eq!(
            v4,
            vec![&format!(
                "ECS_CONTAINER_METADATA_URI_V4=http://172.17.0.1:51679/v4/{token}"
            )],
            "{name}"
        );
        assert!(spec.env.contains(&format!(
            "ECS_CONTAINER_METADATA_URI=http://172.17.0.1:51679/v3/{token}"
        )));
    }

    let (found, name) = harness
        .engine
        .task_by_metadata_token(&tokens[1])
        .expect("the task by its token");
    assert_eq!(
        (found.id.as_str(), name.as_str()),
        (accepted.id.as_str(), "app")
    );
    assert!(harness.engine.task_by_metadata_token("nope").is_none());
    assert!(harness.engine.task_by_metadata_token("").is_none());
    let docker_id = found.containers[1].docker_id.clone().expect("created");
    let stats = harness
        .engine
        .container_stats(&docker_id)
        .expect("stats through the runtime");
    assert_eq!(stats["id"], serde_json::json!(docker_id));
}

/// With the endpoint off, containers get no variables (tokens are still fixed, so turning it on
/// later points containers created from then on at it).
#[test]
fn without_the_endpoint_containers_get_no_metadata_variables() {
    let harness = Harness::new();
    let id = harness.submit(one_container_task("plain"));
    harness.wait_event(&id, None, "RUNNING");
    let spec = harness.fake.calls_of(Op::Create)[0]
        .spec
        .clone()
        .expect("spec");
    assert!(
        !spec
            .env
            .iter()
            .any(|entry| entry.starts_with("ECS_CONTAINER_METADATA")),
        "{:?}",
        spec.env
    );
}
