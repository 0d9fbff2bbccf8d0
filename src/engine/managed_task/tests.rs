//! Unit tests of the managed task's state machine, driven step by step, and of the driver's
//! pure helpers.

use super::calls::worker_label;
use super::*;
use crate::engine::messages::{
    DockerCall, DockerObservation, Effect, Input, Reported, TimerKind, TransitionOutput,
};
use crate::engine::transition::RuleConfig;
use crate::runtime::{ContainerInfo, RuntimeError};
use crate::task::{ContainerError, ContainerErrorKind, ContainerStatus, Millis, Task, TaskStatus};
use std::time::Duration;

fn one_container_task() -> Task {
    let definition = crate::task::TaskDefinition {
        roles: Default::default(),
        family: "unit".into(),
        revision: 1,
        network_mode: crate::task::NetworkMode::Bridge,
        cpu: None,
        memory_mib: None,
        volumes: Vec::new(),
        containers: vec![crate::engine::test_support::container_definition(
            "app",
            "unit/app:1",
        )],
        pid_mode: None,
        ipc_mode: None,
    };
    let mut task = Task::new("a".repeat(32), "unit", definition, 0, 0);
    crate::engine::container_spec::assign_docker_names(&mut task, || "0001".into());
    task
}

fn settings(cleanup_wait: Duration) -> ManagedTaskSettings {
    ManagedTaskSettings {
        cluster: "unit".into(),
        rules: RuleConfig::default(),
        stop_timeout: Duration::from_secs(30),
        steady_check_interval: Duration::from_secs(300),
        cleanup_wait,
        dependency_poll_interval: Duration::from_secs(5),
        sent_poll_interval: Duration::from_secs(30),
        task_metadata: None,
        exclude_ipv6_port_bindings: true,
        aws_logs: Default::default(),
        firelens: Default::default(),
    }
}

fn transition(target: ContainerStatus, docker_id: Option<&str>) -> Input {
    Input::Transition {
        container: "app".into(),
        target,
        result: Ok(TransitionOutput {
            docker_id: docker_id.map(str::to_string),
            info: None,
        }),
    }
}

fn removes(effects: &[Effect]) -> bool {
    effects
        .iter()
        .any(|effect| matches!(effect, Effect::Docker(DockerCall::Remove { .. })))
}

#[test]
fn the_checkpoint_comes_before_the_create_call_and_before_any_event() {
    let mut machine = ManagedTask::new(one_container_task(), settings(Duration::ZERO), None);
    let started = machine.start(1_000);
    assert!(started
        .iter()
        .any(|effect| matches!(effect, Effect::Docker(DockerCall::Pull { .. }))));
    let effects = machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
    let checkpoint = effects
        .iter()
        .position(|effect| *effect == Effect::Checkpoint)
        .expect("the pull's answer changes the task: checkpoint");
    let create = effects
        .iter()
        .position(|effect| matches!(effect, Effect::Docker(DockerCall::Create { .. })))
        .expect("then the create");
    assert!(checkpoint < create, "{effects:?}");
    let effects = machine.handle(transition(ContainerStatus::Created, Some("id-1")), 1_002);
    let effects = [
        effects,
        machine.handle(transition(ContainerStatus::Running, None), 1_003),
    ]
    .concat();
    let first_emit = effects
        .iter()
        .position(|effect| matches!(effect, Effect::Emit { .. }))
        .expect("RUNNING is emitted");
    let last_checkpoint_before = effects[..first_emit].contains(&Effect::Checkpoint);
    assert!(last_checkpoint_before, "{effects:?}");
}

#[test]
fn an_event_the_reporter_failed_to_record_is_emitted_again_while_cleanup_waits() {
    let mut task = one_container_task();
    task.desired_status = TaskStatus::Stopped;
    task.known_status = TaskStatus::Stopped;
    task.known_status_time = Some(10_000);
    let container = &mut task.containers[0];
    container.desired_status = ContainerStatus::Stopped;
    container.known_status = ContainerStatus::Stopped;
    container.sent_status = ContainerStatus::Stopped;
    container.docker_id = Some("id-1".into());
    let mut machine = ManagedTask::new(task, settings(Duration::from_secs(60)), None);
    let task_stopped_emits = |effects: &[Effect]| {
        effects
            .iter()
            .filter(|effect| {
                matches!(effect, Effect::Emit { reported: Reported::Task { status }, .. }
                    if *status == TaskStatus::Stopped)
            })
            .count()
    };
    let effects = machine.start(20_000);
    assert_eq!(task_stopped_emits(&effects), 1, "{effects:?}");
    // While the event is on its way, a re-check emits nothing twice.
    let effects = machine.handle(Input::TimerFired(TimerKind::Cleanup), 80_000);
    assert_eq!(task_stopped_emits(&effects), 0, "{effects:?}");
    assert!(!removes(&effects), "not reported yet: no removal");
    // The durable log refused it: the next re-check emits it again.
    machine.handle(
        Input::ReportFailed {
            reported: Reported::Task {
                status: TaskStatus::Stopped,
            },
            error: "the event log cannot write".to_string(),
        },
        80_001,
    );
    let effects = machine.handle(Input::TimerFired(TimerKind::Cleanup), 110_000);
    assert_eq!(task_stopped_emits(&effects), 1, "{effects:?}");
    let effects = machine.handle(
        Input::Reported(Reported::Task {
            status: TaskStatus::Stopped,
        }),
        110_001,
    );
    assert!(removes(&effects), "reported: removal starts");
}

#[test]
fn a_restored_stopped_task_is_cleaned_up_on_its_saved_clock() {
    // Saved STOPPED at t=10 s, reported; restored at t=100 s with a 60 s cleanup wait: the
    // deadline (70 s) has passed, so the removal starts at once instead of 60 s later.
    let mut task = one_container_task();
    task.desired_status = TaskStatus::Stopped;
    task.known_status = TaskStatus::Stopped;
    task.known_status_time = Some(10_000);
    task.sent_status = TaskStatus::Stopped;
    let container = &mut task.containers[0];
    container.desired_status = ContainerStatus::Stopped;
    container.known_status = ContainerStatus::Stopped;
    container.sent_status = ContainerStatus::Stopped;
    container.docker_id = Some("id-1".into());
    let mut machine = ManagedTask::new(task, settings(Duration::from_secs(60)), None);
    let effects = machine.start(100_000);
    assert!(removes(&effects), "{effects:?}");
    assert_eq!(machine.task().known_status_time, Some(10_000));
}

#[test]
fn cleanup_waits_for_the_deadline_and_for_stopped_to_be_reported() {
    let mut machine = ManagedTask::new(
        one_container_task(),
        settings(Duration::from_secs(60)),
        None,
    );
    let mut now = 1_000;
    machine.start(now);
    machine.handle(transition(ContainerStatus::Pulled, None), now);
    machine.handle(transition(ContainerStatus::Created, Some("id-1")), now);
    machine.handle(transition(ContainerStatus::Running, None), now);
    assert_eq!(machine.task().known_status, TaskStatus::Running);
    machine.handle(
        Input::Desired {
            status: TaskStatus::Stopped,
            sequence: 2,
            registered: true,
        },
        now,
    );
    now += 10;
    // The stop's answer: known STOPPED, the stop number is finished, events go out, and
    // the cleanup clock starts. The reporter's receipts are withheld.
    let effects = machine.handle(transition(ContainerStatus::Stopped, None), now);
    assert!(effects.contains(&Effect::WaitGroupDone { sequence: 2 }));
    assert!(effects.contains(&Effect::ArmTimer {
        timer: TimerKind::Cleanup,
        at: now + 60_000,
    }));
    let task_stopped_emitted = effects.iter().any(|effect| {
        matches!(
            effect,
            Effect::Emit {
                reported: Reported::Task {
                    status: TaskStatus::Stopped
                },
                ..
            }
        )
    });
    assert!(task_stopped_emitted);
    assert_eq!(machine.phase(), Phase::AwaitingCleanup);

    // Too early: the timer re-arms for the deadline.
    let early = machine.handle(Input::TimerFired(TimerKind::Cleanup), now + 30_000);
    assert!(!removes(&early));
    // Deadline passed, but STOPPED is not reported yet: poll again later, remove nothing.
    let unreported = machine.handle(Input::TimerFired(TimerKind::Cleanup), now + 60_000);
    assert!(!removes(&unreported));
    assert!(unreported.contains(&Effect::ArmTimer {
        timer: TimerKind::Cleanup,
        at: now + 60_000 + 30_000,
    }));
    // The receipt arrives: now the containers go, then the task is done.
    let reported = machine.handle(
        Input::Reported(Reported::Task {
            status: TaskStatus::Stopped,
        }),
        now + 61_000,
    );
    assert!(reported.contains(&Effect::Docker(DockerCall::Remove {
        docker_ids: vec!["id-1".to_string()],
        volumes: Vec::new(),
        directories: Vec::new(),
    })));
    assert_eq!(
        machine.handle(Input::Removed, now + 62_000),
        vec![Effect::Done]
    );
    assert_eq!(machine.phase(), Phase::Done);
    assert!(machine.handle(Input::Resync, now + 63_000).is_empty());
}

#[test]
fn a_stop_while_waiting_for_earlier_stops_ends_the_wait() {
    let mut task = one_container_task();
    task.start_sequence = 7;
    let mut machine = ManagedTask::new(task, settings(Duration::ZERO), None);
    let effects = machine.start(1_000);
    assert!(effects.contains(&Effect::WaitForStops { sequence: 7 }));
    assert!(!effects
        .iter()
        .any(|effect| matches!(effect, Effect::Docker(_))));
    let effects = machine.handle(
        Input::Desired {
            status: TaskStatus::Stopped,
            sequence: 8,
            registered: true,
        },
        1_001,
    );
    assert!(effects.contains(&Effect::StopWaitingForStops));
    assert!(effects.contains(&Effect::WaitGroupDone { sequence: 8 }));
    assert!(!effects
        .iter()
        .any(|effect| matches!(effect, Effect::Docker(DockerCall::Pull { .. }))));
    assert_eq!(machine.task().known_status, TaskStatus::Stopped);
}

#[test]
fn after_the_earlier_stops_the_task_waits_for_host_resources_before_any_docker_call() {
    let mut task = one_container_task();
    task.start_sequence = 7;
    let mut machine = ManagedTask::new(task, settings(Duration::ZERO), None);
    machine.start(1_000);
    let effects = machine.handle(Input::WaitGroupReady, 1_001);
    assert!(effects.contains(&Effect::WaitForResources), "{effects:?}");
    assert!(docker_calls(&effects).is_empty(), "{effects:?}");
    assert_eq!(machine.phase(), Phase::WaitingForResources);
    // Anything else meanwhile makes no call either.
    let effects = machine.handle(Input::Resync, 1_002);
    assert!(
        !effects
            .iter()
            .any(|effect| matches!(effect, Effect::Docker(DockerCall::Pull { .. }))),
        "{effects:?}"
    );
    let effects = machine.handle(
        Input::ResourcesReady {
            gpu_ids: Vec::new(),
        },
        1_003,
    );
    assert!(
        matches!(docker_calls(&effects)[..], [DockerCall::Pull { .. }]),
        "{effects:?}"
    );
    assert_eq!(machine.phase(), Phase::Progressing);
    // Once known STOPPED, it gives back what it held, once.
    machine.handle(transition(ContainerStatus::Pulled, None), 1_004);
    machine.handle(transition(ContainerStatus::Created, Some("id-1")), 1_005);
    machine.handle(transition(ContainerStatus::Running, None), 1_006);
    let effects = machine.handle(
        Input::Desired {
            status: TaskStatus::Stopped,
            sequence: 9,
            registered: true,
        },
        1_007,
    );
    assert!(
        !effects.contains(&Effect::ReleaseResources),
        "still running"
    );
    let effects = machine.handle(transition(ContainerStatus::Stopped, None), 1_008);
    assert_eq!(machine.task().known_status, TaskStatus::Stopped);
    assert_eq!(
        effects
            .iter()
            .filter(|effect| **effect == Effect::ReleaseResources)
            .count(),
        1,
        "{effects:?}"
    );
    // §2 step 5: the task role's credentials go at STOPPED, once.
    assert!(
        effects.contains(&Effect::DropTaskRoleCredentials),
        "{effects:?}"
    );
    let effects = machine.handle(transition(ContainerStatus::Stopped, None), 1_009);
    assert!(
        !effects.contains(&Effect::DropTaskRoleCredentials),
        "{effects:?}"
    );
}

#[test]
fn a_stop_while_waiting_for_host_resources_leaves_the_queue_and_stops_without_docker() {
    let mut task = one_container_task();
    task.start_sequence = 7;
    let mut machine = ManagedTask::new(task, settings(Duration::ZERO), None);
    machine.start(1_000);
    machine.handle(Input::WaitGroupReady, 1_001);
    let effects = machine.handle(
        Input::Desired {
            status: TaskStatus::Stopped,
            sequence: 8,
            registered: true,
        },
        1_002,
    );
    assert!(effects.contains(&Effect::ReleaseResources), "{effects:?}");
    assert!(docker_calls(&effects).is_empty(), "{effects:?}");
    assert_eq!(machine.task().known_status, TaskStatus::Stopped);
    // An admission that crossed the stop changes nothing.
    let effects = machine.handle(
        Input::ResourcesReady {
            gpu_ids: Vec::new(),
        },
        1_003,
    );
    assert!(docker_calls(&effects).is_empty(), "{effects:?}");
}

#[test]
fn worker_labels_cut_task_ids_between_characters() {
    let table = [
        ("0123456789abcdef", "task 01234567: pull"),
        ("abc", "task abc: pull"),
        // Byte 8 falls inside a character here: a byte cut would panic.
        ("abcdefg\u{FFFD}xyz", "task abcdefg\u{FFFD}: pull"),
        ("éééééééééé", "task éééééééé: pull"),
    ];
    for (task_id, expected) in table {
        assert_eq!(worker_label(task_id, "pull"), expected, "{task_id:?}");
    }
}

#[test]
fn docker_times_parse_to_epoch_millis() {
    let table = [
        ("1970-01-01T00:00:00Z", Some(0)),
        ("2024-02-29T12:34:56.789123456Z", Some(1_709_210_096_789)),
        ("2024-02-29T13:34:56.5+01:00", Some(1_709_210_096_500)),
        ("0001-01-01T00:00:00Z", None),
        ("", None),
        ("yesterday", None),
    ];
    for (text, expected) in table {
        assert_eq!(parse_docker_time(text), expected, "{text}");
    }
}

#[test]
fn inspect_state_maps_to_status() {
    let info = |status: &str, running: bool, dead: bool, error: &str| ContainerInfo {
        state: crate::runtime::ContainerState {
            status: status.to_string(),
            running,
            dead,
            error: error.to_string(),
            ..Default::default()
        },
        ..Default::default()
    };
    let table = [
        (info("running", true, false, ""), ContainerStatus::Running),
        (info("paused", true, false, ""), ContainerStatus::Running),
        (info("dead", false, true, ""), ContainerStatus::Stopped),
        (info("created", false, false, ""), ContainerStatus::Created),
        (
            info("created", false, false, "oci error"),
            ContainerStatus::Stopped,
        ),
        (info("exited", false, false, ""), ContainerStatus::Stopped),
    ];
    for (input, expected) in table {
        assert_eq!(status_from_inspect(&input), expected, "{:?}", input.state);
    }
}

#[test]
fn runtime_errors_are_classified_for_the_error_table() {
    let timeout = RuntimeError::Timeout {
        operation: "start".into(),
        after: Duration::from_secs(1),
    };
    let api = |message: &str| RuntimeError::Api {
        status: 500,
        message: message.into(),
    };
    let table = [
        (
            ContainerStatus::Running,
            timeout.clone(),
            ContainerErrorKind::Timeout,
        ),
        (
            ContainerStatus::Stopped,
            RuntimeError::NoSuchContainer {
                message: "x".into(),
            },
            ContainerErrorKind::NoSuchContainer,
        ),
        (
            ContainerStatus::Pulled,
            api("denied"),
            ContainerErrorKind::CannotPull,
        ),
        (
            ContainerStatus::Running,
            api("read: EOF"),
            ContainerErrorKind::StartEof,
        ),
        (
            ContainerStatus::Created,
            api("read: EOF"),
            ContainerErrorKind::CannotCreate,
        ),
        (
            ContainerStatus::Created,
            RuntimeError::Unreachable {
                message: "gone".into(),
            },
            ContainerErrorKind::CannotCreate,
        ),
        (
            ContainerStatus::Created,
            RuntimeError::NoSuchImage {
                message: "nothing-here:1".into(),
            },
            ContainerErrorKind::CannotCreate,
        ),
        (
            ContainerStatus::Running,
            api("port is already allocated"),
            ContainerErrorKind::CannotStart,
        ),
        (
            ContainerStatus::Running,
            RuntimeError::NoSuchContainer {
                message: "x".into(),
            },
            ContainerErrorKind::CannotStart,
        ),
        (
            ContainerStatus::Running,
            RuntimeError::Panicked {
                operation: "start".into(),
                message: "boom".into(),
            },
            ContainerErrorKind::StartEof,
        ),
        (
            ContainerStatus::Stopped,
            api("cannot kill"),
            ContainerErrorKind::CannotStop,
        ),
        (
            ContainerStatus::Stopped,
            RuntimeError::Panicked {
                operation: "stop".into(),
                message: "boom".into(),
            },
            ContainerErrorKind::CannotStop,
        ),
        (
            ContainerStatus::Pulled,
            timeout.clone(),
            ContainerErrorKind::Timeout,
        ),
        (
            ContainerStatus::Pulled,
            RuntimeError::CannotPull {
                message: "denied".into(),
            },
            ContainerErrorKind::CannotPull,
        ),
        (
            ContainerStatus::Running,
            RuntimeError::Protocol {
                message: "start container: connection closed mid-body".into(),
            },
            ContainerErrorKind::StartEof,
        ),
    ];
    for (target, error, kind) in table {
        assert_eq!(
            classify_error(target, &error).kind,
            kind,
            "{target} {error}"
        );
    }
}

/// A task whose one container runs (id `id-1`), and its state machine.
fn running_machine() -> ManagedTask {
    let mut machine = ManagedTask::new(one_container_task(), settings(Duration::ZERO), None);
    machine.start(1_000);
    machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
    machine.handle(transition(ContainerStatus::Created, Some("id-1")), 1_002);
    machine.handle(transition(ContainerStatus::Running, None), 1_003);
    assert_eq!(machine.task().known_status, TaskStatus::Running);
    machine
}

/// A running container under a restart policy (60 s between restarts) that exits at 90 s
/// and is restarted at 100 s.
fn restarted_machine() -> ManagedTask {
    let mut task = one_container_task();
    std::sync::Arc::make_mut(&mut task.containers[0].definition).restart_policy =
        Some(crate::task::RestartPolicy {
            enabled: true,
            ignored_exit_codes: Vec::new(),
            restart_attempt_period_secs: 60,
        });
    let mut machine = ManagedTask::new(task, settings(Duration::ZERO), None);
    machine.start(1_000);
    machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
    machine.handle(transition(ContainerStatus::Created, Some("id-1")), 1_002);
    machine.handle(transition(ContainerStatus::Running, None), 1_003);
    let effects = machine.handle(die_at(1, 90_000), 100_000);
    assert!(
        effects
            .iter()
            .any(|effect| matches!(effect, Effect::Docker(DockerCall::Restart { .. }))),
        "{effects:?}"
    );
    machine
}

fn die_at(exit_code: i64, at_millis: i64) -> Input {
    Input::DockerEvent {
        docker_id: "id-1".into(),
        observation: DockerObservation::Status {
            status: ContainerStatus::Stopped,
            exit_code: Some(exit_code),
            at: Some(at_millis * 1_000_000),
        },
    }
}

fn restarted_ok() -> Input {
    Input::Restarted {
        container: "app".into(),
        exit_code: Some(1),
        result: Ok(()),
    }
}

#[test]
fn an_exit_seen_before_the_restart_it_caused_does_not_stop_the_restarted_container() {
    // Found by the simulator: the inspection that follows the `die` event is made before
    // the restart lands and answers after it; the exit it shows is the one the restart
    // already answered.
    let mut machine = restarted_machine();
    machine.handle(restarted_ok(), 100_010);
    let mut stale = exited_info(1, false, "");
    stale.state.finished_at = "1970-01-01T00:01:30Z".into();
    for late in [
        Input::Inspected {
            container: "app".into(),
            result: Ok(stale),
        },
        die_at(1, 90_000),
    ] {
        let effects = machine.handle(late, 100_020);
        assert!(container_stops(&effects).is_empty(), "{effects:?}");
        assert_eq!(
            machine.task().containers[0].known_status,
            ContainerStatus::Running
        );
    }
    // A later exit is a new one.
    let effects = machine.handle(die_at(1, 100_030), 100_040);
    assert_eq!(container_stops(&effects).len(), 1, "{effects:?}");
}

#[test]
fn an_exit_during_a_restart_call_is_handled_once_the_restart_answers() {
    // Found by the simulator: the exit was held for the restart's answer and then forgotten
    // (the container stayed RUNNING in deckhand's view), until an unrelated later answer
    // for the container applied it.
    let mut machine = restarted_machine();
    let task = machine.task_mut();
    if let Some(policy) =
        &mut std::sync::Arc::make_mut(&mut task.containers[0].definition).restart_policy
    {
        policy.restart_attempt_period_secs = 0;
    }
    // The restarted container exits again before the restart call answers.
    let effects = machine.handle(die_at(1, 100_005), 100_006);
    assert!(container_stops(&effects).is_empty(), "{effects:?}");
    let effects = machine.handle(restarted_ok(), 100_010);
    assert!(
        effects
            .iter()
            .any(|effect| matches!(effect, Effect::Docker(DockerCall::Restart { .. }))),
        "the held exit restarts the container again: {effects:?}"
    );
    assert_eq!(machine.task().containers[0].restart_count, 2);
}

#[test]
fn a_restart_that_timed_out_is_stopped_before_the_container_counts_as_stopped() {
    // Found by the simulator: Docker restarted the container but the call timed out; the
    // container was marked STOPPED and kept running, unmanaged, until cleanup.
    let mut machine = restarted_machine();
    let effects = machine.handle(
        Input::Restarted {
            container: "app".into(),
            exit_code: Some(1),
            result: Err(RuntimeError::Timeout {
                operation: "start".into(),
                after: Duration::from_secs(1),
            }),
        },
        100_010,
    );
    assert!(
        effects.iter().any(|effect| matches!(
            effect,
            Effect::Docker(DockerCall::Stop {
                background: false,
                ..
            })
        )),
        "{effects:?}"
    );
    // STOPPED with the stop's answer, not before.
    assert!(container_stops(&effects).is_empty(), "{effects:?}");
    let effects = machine.handle(transition(ContainerStatus::Stopped, None), 100_020);
    assert_eq!(container_stops(&effects).len(), 1, "{effects:?}");
    // A refused restart (Docker answered) did not start anything: no stop.
    let mut machine = restarted_machine();
    let effects = machine.handle(
        Input::Restarted {
            container: "app".into(),
            exit_code: Some(1),
            result: Err(RuntimeError::Api {
                status: 500,
                message: "no".into(),
            }),
        },
        100_010,
    );
    assert!(
        !effects
            .iter()
            .any(|effect| matches!(effect, Effect::Docker(DockerCall::Stop { .. }))),
        "{effects:?}"
    );
}

#[test]
fn a_start_that_timed_out_is_stopped_before_the_container_counts_as_stopped() {
    // Found by the simulator: the start timed out (Docker had started the container), the
    // stop went out in the background, and §3 row 5 made the container STOPPED at once: the
    // task finished its stop number and a replacement started beside the running container.
    let mut machine = ManagedTask::new(one_container_task(), settings(Duration::ZERO), None);
    machine.start(1_000);
    machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
    machine.handle(transition(ContainerStatus::Created, Some("id-1")), 1_002);
    machine.handle(
        Input::Desired {
            status: TaskStatus::Stopped,
            sequence: 7,
            registered: true,
        },
        1_003,
    );
    let effects = machine.handle(
        Input::Transition {
            container: "app".into(),
            target: ContainerStatus::Running,
            result: Err(RuntimeError::Timeout {
                operation: "start".into(),
                after: Duration::from_secs(1),
            }),
        },
        1_004,
    );
    assert!(
        effects.iter().any(|effect| matches!(
            effect,
            Effect::Docker(DockerCall::Stop {
                background: false,
                ..
            })
        )),
        "{effects:?}"
    );
    assert!(
        !effects
            .iter()
            .any(|effect| matches!(effect, Effect::WaitGroupDone { .. })),
        "the stop number waits for the stop's answer: {effects:?}"
    );
    assert_eq!(machine.task().known_status, TaskStatus::Created);
    let effects = machine.handle(transition(ContainerStatus::Stopped, None), 1_005);
    assert!(
        effects
            .iter()
            .any(|effect| matches!(effect, Effect::WaitGroupDone { sequence: 7 })),
        "{effects:?}"
    );
    assert_eq!(machine.task().known_status, TaskStatus::Stopped);
}

#[test]
fn an_exit_seen_before_a_restart_that_did_not_happen_stops_the_container() {
    // Found by the simulator: the restart timed out without Docker making it, the stop that
    // answers a possible start failed, and the earlier exit, dropped as "answered by the
    // restart", left the exited container RUNNING for good.
    let mut machine = restarted_machine();
    machine.handle(
        Input::Restarted {
            container: "app".into(),
            exit_code: Some(1),
            result: Err(RuntimeError::Timeout {
                operation: "start".into(),
                after: Duration::from_secs(1),
            }),
        },
        100_010,
    );
    machine.handle(
        Input::Transition {
            container: "app".into(),
            target: ContainerStatus::Stopped,
            result: Err(RuntimeError::Unreachable {
                message: "restarting".into(),
            }),
        },
        100_020,
    );
    let mut exited = exited_info(1, false, "");
    exited.state.finished_at = "1970-01-01T00:01:30Z".into();
    let effects = machine.handle(
        Input::Inspected {
            container: "app".into(),
            result: Ok(exited),
        },
        100_030,
    );
    assert_eq!(container_stops(&effects).len(), 1, "{effects:?}");
}

#[test]
fn cleanup_removes_by_fixed_name_every_container_without_a_docker_id() {
    // Found by the simulator: a create the crashed process sent landed after restore had
    // looked its name up; the restored task (which had not sent that create itself) was
    // stopped and cleaned up without it, and the container was left in Docker.
    let mut task = one_container_task();
    task.desired_status = TaskStatus::Stopped;
    task.sent_status = TaskStatus::Stopped;
    let name = task.containers[0].docker_name.clone();
    let mut machine = ManagedTask::new(task, settings(Duration::ZERO), None);
    let mut effects = machine.start(1_000);
    for _ in 0..3 {
        if removes(&effects) {
            break;
        }
        effects = machine.handle(Input::TimerFired(TimerKind::Cleanup), 1_000);
    }
    let removed: Vec<String> = effects
        .iter()
        .find_map(|effect| match effect {
            Effect::Docker(DockerCall::Remove { docker_ids, .. }) => Some(docker_ids.clone()),
            _ => None,
        })
        .unwrap_or_default();
    assert_eq!(removed, name.into_iter().collect::<Vec<_>>(), "{effects:?}");
}

#[test]
fn within_the_millisecond_of_a_restart_the_answered_exit_is_old_and_a_later_one_is_new() {
    // A fast Docker: the exit, the restart decision, the restart and a new exit all in one
    // millisecond. Nanoseconds tell the exit the restart answered from a new one.
    let mut task = one_container_task();
    std::sync::Arc::make_mut(&mut task.containers[0].definition).restart_policy =
        Some(crate::task::RestartPolicy {
            enabled: true,
            ignored_exit_codes: Vec::new(),
            restart_attempt_period_secs: 0,
        });
    let mut machine = ManagedTask::new(task, settings(Duration::ZERO), None);
    machine.start(1_000);
    machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
    machine.handle(transition(ContainerStatus::Created, Some("id-1")), 1_002);
    machine.handle(transition(ContainerStatus::Running, None), 1_003);
    let exit = |extra_nanos: i64| Input::DockerEvent {
        docker_id: "id-1".into(),
        observation: DockerObservation::Status {
            status: ContainerStatus::Stopped,
            exit_code: Some(1),
            at: Some(200_000 * 1_000_000 + extra_nanos),
        },
    };
    let restarts = |effects: &[Effect]| {
        effects
            .iter()
            .filter(|effect| matches!(effect, Effect::Docker(DockerCall::Restart { .. })))
            .count()
    };
    assert_eq!(restarts(&machine.handle(exit(400), 200_000)), 1);
    machine.handle(restarted_ok(), 200_000);
    // The same exit again (its inspection, a few hundred nanoseconds earlier): old news.
    let effects = machine.handle(exit(100), 200_000);
    assert!(container_stops(&effects).is_empty(), "{effects:?}");
    assert_eq!(restarts(&effects), 0, "{effects:?}");
    // The restarted container exits within the same millisecond: a new exit, restarted.
    let effects = machine.handle(exit(900), 200_000);
    assert_eq!(restarts(&effects), 1, "{effects:?}");
    assert_eq!(machine.task().containers[0].restart_count, 2);
}

#[test]
fn a_start_event_during_our_start_call_waits_for_the_calls_answer() {
    let mut machine = ManagedTask::new(one_container_task(), settings(Duration::ZERO), None);
    machine.start(1_000);
    machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
    let effects = machine.handle(transition(ContainerStatus::Created, Some("id-1")), 1_002);
    assert!(
        effects
            .iter()
            .any(|effect| matches!(effect, Effect::Docker(DockerCall::Start { .. }))),
        "{effects:?}"
    );
    // Docker's `start` event arrives before the start call answers.
    let effects = machine.handle(
        Input::DockerEvent {
            docker_id: "id-1".into(),
            observation: DockerObservation::Status {
                status: ContainerStatus::Running,
                exit_code: None,
                at: None,
            },
        },
        1_003,
    );
    assert!(
        !effects
            .iter()
            .any(|effect| matches!(effect, Effect::Emit { .. })),
        "no RUNNING before the call's answer: {effects:?}"
    );
    assert_eq!(
        machine.task().containers[0].known_status,
        ContainerStatus::Created
    );
    // The answer (with its inspection) makes it RUNNING.
    let effects = machine.handle(transition(ContainerStatus::Running, None), 1_004);
    assert!(effects
        .iter()
        .any(|effect| matches!(effect, Effect::Emit { .. })));
    assert_eq!(
        machine.task().containers[0].known_status,
        ContainerStatus::Running
    );
}

fn die_event(exit_code: i64) -> Input {
    Input::DockerEvent {
        docker_id: "id-1".into(),
        observation: DockerObservation::Status {
            status: ContainerStatus::Stopped,
            exit_code: Some(exit_code),
            at: None,
        },
    }
}

fn exited_info(exit_code: i64, oom_killed: bool, error: &str) -> ContainerInfo {
    ContainerInfo {
        id: "id-1".into(),
        name: "app".into(),
        state: crate::runtime::ContainerState {
            status: "exited".into(),
            oom_killed,
            exit_code,
            error: error.into(),
            finished_at: "2026-01-01T00:00:00.5Z".into(),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The container STOPPED events among `effects`: (exit code, reason).
fn container_stops(effects: &[Effect]) -> Vec<(Option<i64>, Option<String>)> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::Emit { event, .. }
                if event.container.is_some() && event.status == "STOPPED" =>
            {
                Some((event.exit_code, event.reason.clone()))
            }
            _ => None,
        })
        .collect()
}

fn oom_event() -> Input {
    Input::DockerEvent {
        docker_id: "id-1".into(),
        observation: DockerObservation::OutOfMemory,
    }
}

fn inspections(effects: &[Effect]) -> usize {
    effects
        .iter()
        .filter(|effect| matches!(effect, Effect::Docker(DockerCall::Inspect { .. })))
        .count()
}

/// The task's reason when its one essential container `app` stopped with the container reason
/// `container_reason` (`Name: message`): the name first, then the container.
fn expected_task_reason(container_reason: Option<&str>) -> String {
    match container_reason.and_then(|reason| reason.split_once(": ")) {
        Some((name, message)) => format!("{name}: container \"app\": {message}"),
        None => "Essential container in task exited".to_string(),
    }
}

#[test]
fn an_exit_is_stopped_at_once_carrying_an_out_of_memory_kill_docker_announced_first() {
    let oom = Some("OutOfMemoryError: Container killed due to memory usage".to_string());
    // (case, an `oom` event before the `die`, an error the container carried already,
    // expected reason on the STOPPED event).
    let timeout = ContainerError {
        kind: ContainerErrorKind::Timeout,
        message: "stop timed out".into(),
    };
    #[rustfmt::skip]
    let table = [
        ("oom then die", true, None, oom.clone()),
        ("die alone", false, None, None),
        ("earlier error stays", true, Some(timeout.clone()), Some("DockerTimeoutError: stop timed out".to_string())),
    ];
    for (case, out_of_memory, earlier_error, reason) in table {
        let mut machine = running_machine();
        machine.task_mut().containers[0].applying_error = earlier_error.clone();
        if out_of_memory {
            let effects = machine.handle(oom_event(), 1_999);
            assert!(container_stops(&effects).is_empty(), "{case}: {effects:?}");
            assert_eq!(
                machine.task().containers[0].known_status,
                ContainerStatus::Running,
                "{case}: `oom` alone is no exit"
            );
        }
        let effects = machine.handle(die_event(137), 2_000);
        assert_eq!(
            container_stops(&effects),
            vec![(Some(137), reason.clone())],
            "{case}: STOPPED goes out with the die, before any inspection answers: {effects:?}"
        );
        assert_eq!(
            inspections(&effects),
            1,
            "{case}: one background inspection follows: {effects:?}"
        );
        let task = machine.task();
        assert_eq!(task.known_status, TaskStatus::Stopped, "{case}");
        assert_eq!(
            task.stopped_reason.as_deref(),
            Some(expected_task_reason(reason.as_deref()).as_str()),
            "{case}"
        );
        if let Some(earlier_error) = earlier_error {
            assert_eq!(
                task.containers[0].applying_error,
                Some(earlier_error),
                "{case}"
            );
        }
        // A second report of the same exit changes nothing and asks for no inspection.
        let effects = machine.handle(die_event(137), 2_001);
        assert!(container_stops(&effects).is_empty(), "{case}: {effects:?}");
        assert_eq!(inspections(&effects), 0, "{case}: {effects:?}");
    }
}

/// (case, the background inspection's answer, expected container error afterwards).
type LateInspectionCase = (
    &'static str,
    Result<ContainerInfo, RuntimeError>,
    Option<ContainerError>,
);

#[test]
fn a_late_inspection_records_why_the_container_stopped_on_the_container() {
    let oom = ContainerError {
        kind: ContainerErrorKind::OutOfMemory,
        message: crate::engine::transition::OUT_OF_MEMORY_MESSAGE.to_string(),
    };
    let docker_error = ContainerError {
        kind: ContainerErrorKind::DockerState,
        message: "exec: \"x\": not found".into(),
    };
    #[rustfmt::skip]
    let table: [LateInspectionCase; 5] = [
        ("killed for memory", Ok(exited_info(137, true, "")), Some(oom)),
        ("Docker's error", Ok(exited_info(137, false, "exec: \"x\": not found")), Some(docker_error)),
        ("plain exit", Ok(exited_info(137, false, "")), None),
        ("inspection failed", Err(RuntimeError::Timeout { operation: "inspect".into(), after: Duration::from_secs(30) }), None),
        ("container gone", Err(RuntimeError::NoSuchContainer { message: "gone".into() }), None),
    ];
    for (case, result, expected_error) in table {
        let mut machine = running_machine();
        let effects = machine.handle(die_event(137), 2_000);
        assert_eq!(container_stops(&effects), vec![(Some(137), None)], "{case}");
        let effects = machine.handle(
            Input::Inspected {
                container: "app".into(),
                result,
            },
            2_002,
        );
        assert!(
            container_stops(&effects).is_empty(),
            "{case}: the STOPPED event went out already: {effects:?}"
        );
        let container = &machine.task().containers[0];
        assert_eq!(container.known_status, ContainerStatus::Stopped, "{case}");
        assert_eq!(container.exit_code, Some(137), "{case}");
        assert_eq!(container.applying_error, expected_error, "{case}");
        if expected_error.is_some() {
            assert!(
                effects.contains(&Effect::Checkpoint),
                "{case}: the recorded reason is saved: {effects:?}"
            );
        }
    }
}

#[test]
fn a_late_inspection_showing_an_oom_kill_leaves_an_earlier_error_as_the_reason() {
    let mut machine = running_machine();
    let error = ContainerError {
        kind: ContainerErrorKind::Timeout,
        message: "stop timed out".into(),
    };
    machine.task_mut().containers[0].applying_error = Some(error.clone());
    let effects = machine.handle(die_event(137), 2_000);
    assert_eq!(
        container_stops(&effects),
        vec![(
            Some(137),
            Some("DockerTimeoutError: stop timed out".to_string())
        )]
    );
    machine.handle(
        Input::Inspected {
            container: "app".into(),
            result: Ok(exited_info(137, true, "")),
        },
        2_001,
    );
    assert_eq!(machine.task().containers[0].applying_error, Some(error));
}

#[test]
fn a_container_found_by_its_name_after_a_reconnect_is_adopted_once() {
    let mut machine = ManagedTask::new(one_container_task(), settings(Duration::ZERO), None);
    machine.start(1_000);
    let effects = machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
    assert!(effects
        .iter()
        .any(|effect| matches!(effect, Effect::Docker(DockerCall::Create { .. }))));
    let docker_name = machine.task().containers[0]
        .docker_name
        .clone()
        .expect("the fixed name is set before the create");
    let found = |docker_id: &str, docker_name: &str| Input::DockerEvent {
        docker_id: docker_id.into(),
        observation: DockerObservation::FoundByName {
            docker_name: docker_name.into(),
        },
    };
    // Another name is not this container.
    let effects = machine.handle(found("id-7", "deckhand-other-1"), 1_002);
    assert!(effects.is_empty(), "{effects:?}");
    assert_eq!(machine.task().containers[0].docker_id, None);

    let effects = machine.handle(found("id-7", &docker_name), 1_003);
    assert_eq!(
        machine.task().containers[0].docker_id.as_deref(),
        Some("id-7")
    );
    assert!(
        effects.contains(&Effect::TrackContainer {
            docker_id: "id-7".into()
        }),
        "{effects:?}"
    );
    assert!(
        effects.contains(&Effect::Docker(DockerCall::Inspect {
            container: "app".into(),
            docker_id: "id-7".into()
        })),
        "{effects:?}"
    );
    assert!(effects.contains(&Effect::Checkpoint), "the id is saved");
    // Found again (a second reconnect), or under another id: the recorded id stays.
    assert!(machine
        .handle(found("id-7", &docker_name), 1_004)
        .is_empty());
    assert!(machine
        .handle(found("id-8", &docker_name), 1_005)
        .is_empty());
    assert_eq!(
        machine.task().containers[0].docker_id.as_deref(),
        Some("id-7")
    );
    // The create's own answer, arriving late with the same id, changes nothing more.
    machine.handle(transition(ContainerStatus::Created, Some("id-7")), 1_006);
    assert_eq!(
        machine.task().containers[0].known_status,
        ContainerStatus::Created
    );
}

#[test]
fn a_container_adopted_by_its_name_is_never_created_again_under_a_new_id() {
    // Found by the simulator: a create timed out but happened; Docker's event stream came
    // back and the container was adopted by its name; a user removed it; the task's retried
    // create then made a second container under a new id.
    let mut machine = ManagedTask::new(one_container_task(), settings(Duration::ZERO), None);
    machine.start(1_000);
    machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
    let docker_name = machine.task().containers[0]
        .docker_name
        .clone()
        .expect("the fixed name is set before the create");
    // The create was sent and its answer lost: Docker was away.
    machine.handle(
        failed(
            ContainerStatus::Created,
            RuntimeError::Timeout {
                operation: "create".into(),
                after: Duration::from_secs(1),
            },
        ),
        1_002,
    );
    let effects = machine.handle(
        Input::DockerEvent {
            docker_id: "id-7".into(),
            observation: DockerObservation::FoundByName { docker_name },
        },
        1_003,
    );
    assert_eq!(
        machine.task().containers[0].known_status,
        ContainerStatus::Created,
        "Docker has it, so it was created: {effects:?}"
    );
    assert!(
        !effects
            .iter()
            .any(|effect| matches!(effect, Effect::Docker(DockerCall::Create { .. }))),
        "no second create: {effects:?}"
    );
    // Removed from outside: its inspection says so, and it vanished.
    machine.handle(
        Input::Inspected {
            container: "app".into(),
            result: Err(RuntimeError::NoSuchContainer {
                message: "id-7".into(),
            }),
        },
        1_004,
    );
    let container = &machine.task().containers[0];
    assert_eq!(container.known_status, ContainerStatus::Stopped);
    assert_eq!(container.docker_id.as_deref(), Some("id-7"));
}

fn failed(target: ContainerStatus, error: RuntimeError) -> Input {
    Input::Transition {
        container: "app".into(),
        target,
        result: Err(error),
    }
}

fn unreachable() -> RuntimeError {
    RuntimeError::Unreachable {
        message: "cannot connect to /var/run/docker.sock: connection refused".into(),
    }
}

fn docker_calls(effects: &[Effect]) -> Vec<&DockerCall> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::Docker(call) => Some(call),
            _ => None,
        })
        .collect()
}

fn retry_armed_at(effects: &[Effect]) -> Option<Millis> {
    effects.iter().find_map(|effect| match effect {
        Effect::ArmTimer {
            timer: TimerKind::DockerRetry,
            at,
        } => Some(*at),
        _ => None,
    })
}

fn emits_stopped(effects: &[Effect]) -> bool {
    effects
        .iter()
        .any(|effect| matches!(effect, Effect::Emit { event, .. } if event.status == "STOPPED"))
}

#[test]
fn a_pull_while_docker_is_away_waits_and_retries_with_back_off_until_the_task_runs() {
    let mut machine = ManagedTask::new(one_container_task(), settings(Duration::ZERO), None);
    let effects = machine.start(1_000);
    assert!(matches!(
        docker_calls(&effects)[..],
        [DockerCall::Pull { .. }]
    ));
    // Docker is away: no STOPPED, nothing recorded against the container, a retry in 1 s,
    // and no call until then.
    let mut now = 1_100;
    let effects = machine.handle(failed(ContainerStatus::Pulled, unreachable()), now);
    assert!(!emits_stopped(&effects), "{effects:?}");
    assert!(docker_calls(&effects).is_empty(), "{effects:?}");
    assert_eq!(retry_armed_at(&effects), Some(now + 1_000));
    let task = machine.task();
    assert_eq!(task.desired_status, TaskStatus::Running);
    assert_eq!(task.known_status, TaskStatus::None);
    assert_eq!(task.containers[0].known_status, ContainerStatus::None);
    assert_eq!(task.containers[0].applied_status, None, "nothing in flight");
    assert_eq!(task.containers[0].applying_error, None);
    assert_eq!(task.stopped_reason, None);
    // Something else happening meanwhile does not make the call early.
    let effects = machine.handle(Input::WaitGroupReady, now + 10);
    assert!(docker_calls(&effects).is_empty(), "{effects:?}");
    // Each round still away doubles the wait: 1, 2, 4, 8, 16, then 30 s.
    for expected_wait in [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000] {
        now += expected_wait;
        let effects = machine.handle(Input::TimerFired(TimerKind::DockerRetry), now);
        assert!(
            matches!(docker_calls(&effects)[..], [DockerCall::Pull { .. }]),
            "{effects:?}"
        );
        let effects = machine.handle(failed(ContainerStatus::Pulled, unreachable()), now);
        let next_wait = match expected_wait {
            16_000 | 30_000 => 30_000,
            wait => wait * 2,
        };
        assert_eq!(
            retry_armed_at(&effects),
            Some(now + next_wait),
            "after {expected_wait}"
        );
        assert!(!emits_stopped(&effects));
    }
    // Docker is back: the task goes on to RUNNING.
    now += 30_000;
    let effects = machine.handle(Input::TimerFired(TimerKind::DockerRetry), now);
    assert!(matches!(
        docker_calls(&effects)[..],
        [DockerCall::Pull { .. }]
    ));
    machine.handle(transition(ContainerStatus::Pulled, None), now + 1);
    machine.handle(transition(ContainerStatus::Created, Some("id-1")), now + 2);
    machine.handle(transition(ContainerStatus::Running, None), now + 3);
    assert_eq!(machine.task().known_status, TaskStatus::Running);
    assert_eq!(machine.task().stopped_reason, None);
}

#[test]
fn a_create_that_timed_out_or_lost_its_answer_is_made_again_not_counted_against_the_task() {
    for error in [
        RuntimeError::Timeout {
            operation: "create container".into(),
            after: Duration::from_secs(240),
        },
        RuntimeError::Protocol {
            message: "create container: connection closed mid-body".into(),
        },
        unreachable(),
    ] {
        let mut machine = ManagedTask::new(one_container_task(), settings(Duration::ZERO), None);
        machine.start(1_000);
        machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
        let effects = machine.handle(failed(ContainerStatus::Created, error.clone()), 1_002);
        assert_eq!(retry_armed_at(&effects), Some(2_002), "{error}");
        assert_eq!(
            machine.task().desired_status,
            TaskStatus::Running,
            "{error}"
        );
        let effects = machine.handle(Input::TimerFired(TimerKind::DockerRetry), 2_002);
        assert!(
            matches!(docker_calls(&effects)[..], [DockerCall::Create { .. }]),
            "{error}: {effects:?}"
        );
    }
}

#[test]
fn dockers_own_answers_still_count_against_the_task() {
    // A refused create (a missing image): §6 as before, the task stops, no retry.
    let mut machine = ManagedTask::new(one_container_task(), settings(Duration::ZERO), None);
    machine.start(1_000);
    machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
    let effects = machine.handle(
        failed(
            ContainerStatus::Created,
            RuntimeError::NoSuchImage {
                message: "unit/app:1".into(),
            },
        ),
        1_002,
    );
    assert_eq!(retry_armed_at(&effects), None);
    assert_eq!(machine.task().desired_status, TaskStatus::Stopped);
    assert_eq!(machine.task().known_status, TaskStatus::Stopped);
}

#[test]
fn a_stop_while_docker_is_away_completes_only_when_docker_confirms_it() {
    let mut machine = running_machine();
    let effects = machine.handle(
        Input::Desired {
            status: TaskStatus::Stopped,
            sequence: 5,
            registered: true,
        },
        2_000,
    );
    assert!(matches!(
        docker_calls(&effects)[..],
        [DockerCall::Stop { .. }]
    ));
    // The stop worker retried, then found Docker does not answer a ping.
    let effects = machine.handle(failed(ContainerStatus::Stopped, unreachable()), 12_000);
    assert!(!emits_stopped(&effects), "{effects:?}");
    assert!(!effects.contains(&Effect::WaitGroupDone { sequence: 5 }));
    assert_eq!(retry_armed_at(&effects), Some(13_000));
    let task = machine.task();
    assert_eq!(task.containers[0].known_status, ContainerStatus::Running);
    assert_eq!(task.known_status, TaskStatus::Running);
    assert_eq!(task.containers[0].applying_error, None);
    // A hung daemon (the stop timed out) is waited out the same way.
    let effects = machine.handle(Input::TimerFired(TimerKind::DockerRetry), 13_000);
    assert!(matches!(
        docker_calls(&effects)[..],
        [DockerCall::Stop { .. }]
    ));
    let effects = machine.handle(
        failed(
            ContainerStatus::Stopped,
            RuntimeError::Timeout {
                operation: "stop container".into(),
                after: Duration::from_secs(40),
            },
        ),
        60_000,
    );
    assert_eq!(retry_armed_at(&effects), Some(62_000));
    assert_eq!(machine.task().known_status, TaskStatus::Running);
    // Docker's event stream reconnects: the stop is made at once, and its answer ends it.
    let effects = machine.handle(Input::Resync, 61_000);
    assert!(
        docker_calls(&effects)
            .iter()
            .any(|call| matches!(call, DockerCall::Stop { .. })),
        "{effects:?}"
    );
    let effects = machine.handle(transition(ContainerStatus::Stopped, None), 61_500);
    assert!(emits_stopped(&effects));
    assert!(effects.contains(&Effect::WaitGroupDone { sequence: 5 }));
    assert_eq!(machine.task().known_status, TaskStatus::Stopped);
}

#[test]
fn an_inspect_that_fails_without_saying_gone_leaves_the_status_and_is_retried() {
    let failures = [
        RuntimeError::Api {
            status: 500,
            message: "Internal Server Error".into(),
        },
        RuntimeError::Protocol {
            message: "inspect answer: EOF while parsing an object".into(),
        },
        unreachable(),
        RuntimeError::Timeout {
            operation: "inspect container".into(),
            after: Duration::from_secs(30),
        },
    ];
    for error in failures {
        let mut machine = running_machine();
        let effects = machine.handle(Input::TimerFired(TimerKind::SteadyCheck), 400_000);
        assert!(matches!(
            docker_calls(&effects)[..],
            [DockerCall::Inspect { .. }]
        ));
        let effects = machine.handle(
            Input::Inspected {
                container: "app".into(),
                result: Err(error.clone()),
            },
            400_100,
        );
        assert!(!emits_stopped(&effects), "{error}: {effects:?}");
        assert_eq!(
            machine.task().containers[0].known_status,
            ContainerStatus::Running
        );
        assert_eq!(
            machine.task().desired_status,
            TaskStatus::Running,
            "{error}"
        );
        assert_eq!(machine.task().containers[0].applying_error, None, "{error}");
        assert_eq!(retry_armed_at(&effects), Some(401_100), "{error}");
        let effects = machine.handle(Input::TimerFired(TimerKind::DockerRetry), 401_100);
        assert!(
            matches!(docker_calls(&effects)[..], [DockerCall::Inspect { .. }]),
            "{error}: {effects:?}"
        );
    }
    // Only Docker's "no such container" says it is gone.
    let mut machine = running_machine();
    let effects = machine.handle(
        Input::Inspected {
            container: "app".into(),
            result: Err(RuntimeError::NoSuchContainer {
                message: "id-1".into(),
            }),
        },
        400_100,
    );
    assert!(emits_stopped(&effects));
    assert_eq!(
        machine.task().containers[0]
            .applying_error
            .as_ref()
            .map(|e| e.kind),
        Some(ContainerErrorKind::Vanished)
    );
}

#[test]
fn inspect_failures_change_no_status_and_arm_one_retry_per_round() {
    let mut machine = running_machine();
    let effects = machine.handle(
        Input::Inspected {
            container: "app".into(),
            result: Err(RuntimeError::Api {
                status: 500,
                message: "boom".into(),
            }),
        },
        2_000,
    );
    assert!(!emits_stopped(&effects));
    assert_eq!(machine.task().known_status, TaskStatus::Running);
    // A second failure in the same round does not arm a second timer.
    let effects = machine.handle(
        Input::Inspected {
            container: "app".into(),
            result: Err(unreachable()),
        },
        2_001,
    );
    assert_eq!(retry_armed_at(&effects), None);
}

#[test]
fn cleanup_removes_again_when_docker_was_away() {
    let mut machine = running_machine();
    machine.handle(
        Input::Desired {
            status: TaskStatus::Stopped,
            sequence: 0,
            registered: false,
        },
        2_000,
    );
    machine.handle(transition(ContainerStatus::Stopped, None), 2_001);
    machine.handle(
        Input::Reported(Reported::Container {
            name: "app".into(),
            status: ContainerStatus::Stopped,
        }),
        2_002,
    );
    let effects = machine.handle(
        Input::Reported(Reported::Task {
            status: TaskStatus::Stopped,
        }),
        2_003,
    );
    assert!(removes(&effects), "{effects:?}");
    let effects = machine.handle(
        Input::RemoveDeferred {
            error: unreachable(),
        },
        2_100,
    );
    assert_eq!(retry_armed_at(&effects), Some(3_100));
    assert!(!effects.contains(&Effect::Done));
    let effects = machine.handle(Input::TimerFired(TimerKind::DockerRetry), 3_100);
    assert!(removes(&effects), "the removal is made again: {effects:?}");
    assert_eq!(machine.handle(Input::Removed, 3_200), vec![Effect::Done]);
}

#[test]
fn a_restart_docker_was_away_for_is_made_when_docker_is_back() {
    let mut task = one_container_task();
    std::sync::Arc::make_mut(&mut task.containers[0].definition).restart_policy =
        Some(crate::task::RestartPolicy {
            enabled: true,
            ignored_exit_codes: Vec::new(),
            restart_attempt_period_secs: 60,
        });
    let mut machine = ManagedTask::new(task, settings(Duration::ZERO), None);
    machine.start(1_000);
    machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
    machine.handle(transition(ContainerStatus::Created, Some("id-1")), 1_002);
    machine.handle(transition(ContainerStatus::Running, None), 1_003);
    let effects = machine.handle(die_event(1), 100_000);
    assert!(docker_calls(&effects)
        .iter()
        .any(|call| matches!(call, DockerCall::Restart { .. })));
    let restarted = |result: Result<(), RuntimeError>| Input::Restarted {
        container: "app".into(),
        exit_code: Some(1),
        result,
    };
    // Docker went down with the container: the restart waits for it, nothing stops (nor
    // does the inspection after the exit, which fails too).
    machine.handle(
        Input::Inspected {
            container: "app".into(),
            result: Err(unreachable()),
        },
        100_050,
    );
    let effects = machine.handle(restarted(Err(unreachable())), 100_100);
    assert!(!emits_stopped(&effects), "{effects:?}");
    assert_eq!(
        retry_armed_at(&effects),
        None,
        "armed once for the round, by the inspection"
    );
    assert_eq!(machine.task().known_status, TaskStatus::Running);
    // Back-off expired: still away. Only the restart is made, no inspection beside it.
    let effects = machine.handle(Input::TimerFired(TimerKind::DockerRetry), 101_100);
    assert!(
        matches!(docker_calls(&effects)[..], [DockerCall::Restart { .. }]),
        "{effects:?}"
    );
    let effects = machine.handle(restarted(Err(unreachable())), 101_200);
    assert_eq!(retry_armed_at(&effects), Some(103_200));
    // Docker is back (its event stream reconnects): the restart is made at once, and the
    // container is not inspected meanwhile (that would race the restart).
    let effects = machine.handle(Input::Resync, 102_000);
    assert!(
        matches!(docker_calls(&effects)[..], [DockerCall::Restart { .. }]),
        "{effects:?}"
    );
    let effects = machine.handle(restarted(Ok(())), 102_100);
    assert!(!emits_stopped(&effects));
    assert_eq!(
        machine.task().containers[0].known_status,
        ContainerStatus::Running
    );
    assert_eq!(machine.task().containers[0].restart_count, 1);
    assert_eq!(machine.task().containers[0].applied_status, None);
}

/// A running machine whose every checkpoint was answered as written, as the driver answers them.
fn running_machine_on_disk() -> ManagedTask {
    let mut machine = ManagedTask::new(one_container_task(), settings(Duration::ZERO), None);
    let mut effects = machine.start(1_000);
    for input in [
        transition(ContainerStatus::Pulled, None),
        transition(ContainerStatus::Created, Some("id-1")),
        transition(ContainerStatus::Running, None),
    ] {
        for _ in 0..checkpoints(&effects) {
            machine.handle(Input::CheckpointWritten, 1_001);
        }
        effects = machine.handle(input, 1_002);
    }
    for _ in 0..checkpoints(&effects) {
        machine.handle(Input::CheckpointWritten, 1_003);
    }
    assert_eq!(machine.task().known_status, TaskStatus::Running);
    machine
}

fn desired_stop(sequence: u64) -> Input {
    Input::Desired {
        status: TaskStatus::Stopped,
        sequence,
        registered: false,
    }
}

fn acknowledgements(effects: &[Effect]) -> Vec<Result<(), String>> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::AcknowledgeDesired { result } => Some(result.clone()),
            _ => None,
        })
        .collect()
}

fn checkpoints(effects: &[Effect]) -> usize {
    effects
        .iter()
        .filter(|effect| **effect == Effect::Checkpoint)
        .count()
}

fn logged(effects: &[Effect], level: log::Level) -> Vec<String> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::Log {
                level: effect_level,
                message,
            } if *effect_level == level => Some(message.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_stop_is_acknowledged_once_its_checkpoint_is_written() {
    let mut machine = running_machine_on_disk();
    let effects = machine.handle(desired_stop(7), 5_000);
    assert_eq!(checkpoints(&effects), 1, "{effects:?}");
    assert!(
        acknowledgements(&effects).is_empty(),
        "not before the write"
    );
    let effects = machine.handle(Input::CheckpointWritten, 5_001);
    assert_eq!(acknowledgements(&effects), vec![Ok(())]);
    // A desired change that changes nothing is durable already.
    let effects = machine.handle(desired_stop(8), 5_002);
    assert_eq!(checkpoints(&effects), 0, "{effects:?}");
    assert_eq!(acknowledgements(&effects), vec![Ok(())]);
}

#[test]
fn a_failed_checkpoint_is_written_again_once_per_input_and_a_stop_waits_for_it() {
    let mut machine = running_machine_on_disk();
    let effects = machine.handle(desired_stop(7), 5_000);
    assert_eq!(checkpoints(&effects), 1, "{effects:?}");
    // The write fails: logged once, and tried again at once.
    let full = || Input::CheckpointFailed {
        error: "no space left on device".to_string(),
    };
    let effects = machine.handle(full(), 5_001);
    assert_eq!(logged(&effects, log::Level::Error).len(), 1, "{effects:?}");
    assert_eq!(checkpoints(&effects), 1, "one retry: {effects:?}");
    assert!(acknowledgements(&effects).is_empty());
    // The retry fails too: the stop is refused with why, and nothing is tried again now.
    let effects = machine.handle(full(), 5_002);
    assert_eq!(checkpoints(&effects), 0, "{effects:?}");
    assert!(
        logged(&effects, log::Level::Error).is_empty(),
        "logged once"
    );
    assert_eq!(
        acknowledgements(&effects),
        vec![Err("no space left on device".to_string())]
    );
    // The next input writes it again, even though it changes nothing; once written, the
    // stop sent again is acknowledged.
    let effects = machine.handle(desired_stop(8), 5_003);
    assert_eq!(checkpoints(&effects), 1, "{effects:?}");
    assert!(acknowledgements(&effects).is_empty());
    let effects = machine.handle(Input::CheckpointWritten, 5_004);
    assert_eq!(logged(&effects, log::Level::Info).len(), 1, "{effects:?}");
    assert_eq!(acknowledgements(&effects), vec![Ok(())]);
    let effects = machine.handle(Input::Resync, 5_005);
    assert_eq!(checkpoints(&effects), 0, "written: no retry: {effects:?}");
}

#[test]
fn a_reporter_failure_is_logged_once_until_recording_works_again() {
    let mut machine = running_machine();
    let failed = || Input::ReportFailed {
        reported: Reported::Container {
            name: "app".into(),
            status: ContainerStatus::Running,
        },
        error: "the event log cannot write".to_string(),
    };
    let effects = machine.handle(failed(), 5_000);
    assert_eq!(logged(&effects, log::Level::Error).len(), 1, "{effects:?}");
    let effects = machine.handle(failed(), 5_001);
    assert!(
        logged(&effects, log::Level::Error).is_empty(),
        "{effects:?}"
    );
    machine.handle(
        Input::Reported(Reported::Container {
            name: "app".into(),
            status: ContainerStatus::Running,
        }),
        5_002,
    );
    let effects = machine.handle(failed(), 5_003);
    assert_eq!(logged(&effects, log::Level::Error).len(), 1, "{effects:?}");
}

#[test]
fn a_started_containers_ports_are_recorded_without_ipv6_twins_unless_configured() {
    let binding = |host_ip: &str| crate::ports::PortBinding {
        container_port: 80,
        protocol: "tcp".into(),
        host_port: 8080,
        host_ip: host_ip.into(),
    };
    let started_info = ContainerInfo {
        id: "id-1".into(),
        name: "app".into(),
        state: crate::runtime::ContainerState {
            status: "running".into(),
            running: true,
            started_at: "2026-01-01T00:00:00.5Z".into(),
            ..Default::default()
        },
        ports: vec![binding("0.0.0.0"), binding("::")],
        ..Default::default()
    };
    // (ECS_EXCLUDE_IPV6_PORTBINDING, recorded host addresses)
    for (exclude, expected) in [(true, vec!["0.0.0.0"]), (false, vec!["0.0.0.0", "::"])] {
        let mut settings = settings(Duration::ZERO);
        settings.exclude_ipv6_port_bindings = exclude;
        let mut machine = ManagedTask::new(one_container_task(), settings, None);
        machine.start(1_000);
        machine.handle(transition(ContainerStatus::Pulled, None), 1_001);
        machine.handle(transition(ContainerStatus::Created, Some("id-1")), 1_002);
        machine.handle(
            Input::Transition {
                container: "app".into(),
                target: ContainerStatus::Running,
                result: Ok(TransitionOutput {
                    docker_id: None,
                    info: Some(started_info.clone()),
                }),
            },
            1_003,
        );
        let recorded: Vec<&str> = machine.task().containers[0]
            .ports
            .iter()
            .map(|port| port.host_ip.as_str())
            .collect();
        assert_eq!(recorded, expected, "exclude={exclude}");
    }
}

#[test]
fn an_awsvpc_sandbox_runs_first_stops_last_is_removed_last_and_is_never_reported() {
    const SANDBOX: &str = crate::task::sandbox::SANDBOX_CONTAINER_NAME;
    let mut task = one_container_task();
    task.network_mode = crate::task::NetworkMode::Awsvpc;
    crate::task::sandbox::add_sandbox(&mut task.containers);
    crate::engine::container_spec::assign_docker_names(&mut task, || "0002".into());
    let mut machine = ManagedTask::new(task, settings(Duration::ZERO), None);
    let answer =
        |container: &str, target: ContainerStatus, docker_id: Option<&str>| Input::Transition {
            container: container.into(),
            target,
            result: Ok(TransitionOutput {
                docker_id: docker_id.map(str::to_string),
                info: None,
            }),
        };
    let calls_for = |effects: &[Effect], name: &str| -> Vec<&'static str> {
        effects
            .iter()
            .filter_map(|effect| match effect {
                Effect::Docker(DockerCall::Pull { container, .. }) if container == name => {
                    Some("pull")
                }
                Effect::Docker(DockerCall::Create { container, .. }) if container == name => {
                    Some("create")
                }
                Effect::Docker(DockerCall::Start { container, .. }) if container == name => {
                    Some("start")
                }
                Effect::Docker(DockerCall::Stop { container, .. }) if container == name => {
                    Some("stop")
                }
                _ => None,
            })
            .collect()
    };
    let sandbox_emits = |effects: &[Effect]| {
        effects.iter().any(|effect| {
            matches!(effect, Effect::Emit { reported: Reported::Container { name, .. }, .. }
                if name == SANDBOX)
        })
    };
    let mut all = machine.start(1_000);
    assert_eq!(calls_for(&all, SANDBOX), ["pull"], "{all:?}");
    assert!(
        calls_for(&all, "app").is_empty(),
        "the app waits for the sandbox"
    );
    let steps = [
        answer(SANDBOX, ContainerStatus::Pulled, None),
        answer(SANDBOX, ContainerStatus::Created, Some("sandbox-id")),
    ];
    for step in steps {
        all.extend(machine.handle(step, 1_001));
    }
    assert!(
        calls_for(&all, "app").is_empty(),
        "not before the sandbox runs"
    );
    let effects = machine.handle(answer(SANDBOX, ContainerStatus::Running, None), 1_002);
    assert_eq!(calls_for(&effects, "app"), ["pull"], "{effects:?}");
    all.extend(effects);
    for step in [
        answer("app", ContainerStatus::Pulled, None),
        answer("app", ContainerStatus::Created, Some("app-id")),
        answer("app", ContainerStatus::Running, None),
    ] {
        all.extend(machine.handle(step, 1_003));
    }
    assert_eq!(machine.task().known_status, TaskStatus::Running);

    let effects = machine.handle(
        Input::Desired {
            status: TaskStatus::Stopped,
            sequence: 2,
            registered: true,
        },
        2_000,
    );
    assert_eq!(calls_for(&effects, "app"), ["stop"], "{effects:?}");
    assert!(
        calls_for(&effects, SANDBOX).is_empty(),
        "the sandbox stops last"
    );
    all.extend(effects);
    let effects = machine.handle(answer("app", ContainerStatus::Stopped, None), 2_001);
    assert_eq!(calls_for(&effects, SANDBOX), ["stop"], "{effects:?}");
    all.extend(effects);
    all.extend(machine.handle(answer(SANDBOX, ContainerStatus::Stopped, None), 2_002));
    assert_eq!(machine.task().known_status, TaskStatus::Stopped);
    assert!(!sandbox_emits(&all), "{all:?}");

    let effects = machine.handle(
        Input::Reported(Reported::Task {
            status: TaskStatus::Stopped,
        }),
        3_000,
    );
    assert!(
        effects.contains(&Effect::Docker(DockerCall::Remove {
            docker_ids: vec!["app-id".to_string(), "sandbox-id".to_string()],
            volumes: Vec::new(),
            directories: Vec::new(),
        })),
        "{effects:?}"
    );
}

#[test]
fn a_task_ecs_owns_is_removed_only_after_ecs_acknowledged_its_stopped() {
    // Saved STOPPED, recorded in the local event log, past its cleanup deadline: a local task
    // is removed at once; the same task placed by ECS waits for ECS's acknowledgement.
    let stopped_task = |source: Option<&str>| {
        let mut task = one_container_task();
        task.source = source.map(str::to_string);
        task.desired_status = TaskStatus::Stopped;
        task.known_status = TaskStatus::Stopped;
        task.known_status_time = Some(10_000);
        task.sent_status = TaskStatus::Stopped;
        let container = &mut task.containers[0];
        container.desired_status = ContainerStatus::Stopped;
        container.known_status = ContainerStatus::Stopped;
        container.sent_status = ContainerStatus::Stopped;
        container.docker_id = Some("id-1".into());
        task
    };
    let mut local = ManagedTask::new(stopped_task(None), settings(Duration::from_secs(60)), None);
    assert!(removes(&local.start(100_000)));

    let arn = "ecs:arn:aws:ecs:us-west-2:123456789012:task/edge/0123456789abcdef0123456789abcdef";
    let mut owned = ManagedTask::new(
        stopped_task(Some(arn)),
        settings(Duration::from_secs(60)),
        None,
    );
    let effects = owned.start(100_000);
    assert!(!removes(&effects), "{effects:?}");
    let effects = owned.handle(Input::TimerFired(TimerKind::Cleanup), 130_000);
    assert!(
        !removes(&effects),
        "the poll alone removes nothing: {effects:?}"
    );
    // ECS acknowledging RUNNING changes nothing; STOPPED starts the removal, and the
    // acknowledgement is saved with the task.
    let effects = owned.handle(
        Input::ControlPlaneReported {
            status: TaskStatus::Running,
        },
        131_000,
    );
    assert!(!removes(&effects));
    let effects = owned.handle(
        Input::ControlPlaneReported {
            status: TaskStatus::Stopped,
        },
        132_000,
    );
    assert!(removes(&effects), "{effects:?}");
    assert!(effects.contains(&Effect::Checkpoint), "{effects:?}");
    assert_eq!(owned.task().reported_status, TaskStatus::Stopped);

    // Restored with the acknowledgement on disk: removed at once.
    let mut acknowledged = stopped_task(Some(arn));
    acknowledged.reported_status = TaskStatus::Stopped;
    let mut restored = ManagedTask::new(acknowledged, settings(Duration::from_secs(60)), None);
    assert!(removes(&restored.start(100_000)));
}

#[test]
fn an_ecr_pull_waits_for_the_execution_credentials_minute_after_minute_then_pulls() {
    let ecr = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/app:1";
    let mut task = one_container_task();
    std::sync::Arc::make_mut(&mut task.containers[0].definition).image = ecr.into();
    task.credentials_ids.execution_role = Some("exec".into());
    let mut machine = ManagedTask::new(task, settings(Duration::from_secs(3600)), None);
    machine.set_execution_credentials_present(false);
    let pulls = |effects: &[Effect]| {
        effects
            .iter()
            .any(|effect| matches!(effect, Effect::Docker(DockerCall::Pull { .. })))
    };
    let wait_armed_at = |effects: &[Effect]| {
        effects.iter().find_map(|effect| match effect {
            Effect::ArmTimer {
                timer: TimerKind::PullCredentials,
                at,
            } => Some(*at),
            _ => None,
        })
    };
    let effects = machine.start(1_000);
    assert!(!pulls(&effects), "{effects:?}");
    assert_eq!(wait_armed_at(&effects), Some(61_000), "{effects:?}");
    // Another message while it waits: checked again, still waiting, the wait not armed twice.
    let effects = machine.handle(Input::Resync, 2_000);
    assert!(
        !pulls(&effects) && wait_armed_at(&effects).is_none(),
        "{effects:?}"
    );
    // The minute ends, again and again: the task waits on and does not fail.
    let mut now = 61_000;
    for _ in 0..3 {
        let effects = machine.handle(Input::TimerFired(TimerKind::PullCredentials), now);
        assert!(!pulls(&effects), "{effects:?}");
        assert_eq!(wait_armed_at(&effects), Some(now + 60_000), "{effects:?}");
        now += 60_000;
    }
    assert_eq!(machine.task().desired_status, TaskStatus::Running);
    assert_eq!(
        machine.task().containers[0].known_status,
        ContainerStatus::None
    );
    // The credentials are set: the wait ends and the pull is made.
    machine.set_execution_credentials_present(true);
    let effects = machine.handle(Input::TimerFired(TimerKind::PullCredentials), now);
    assert!(pulls(&effects), "{effects:?}");
}

#[test]
fn missing_execution_credentials_hold_back_no_pull_that_is_not_from_ecr_or_of_a_task_without_the_role(
) {
    // (image in ECR, task with an execution role)
    for (ecr, role) in [(false, true), (true, false)] {
        let mut task = one_container_task();
        if ecr {
            std::sync::Arc::make_mut(&mut task.containers[0].definition).image =
                "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/app:1".into();
        }
        if role {
            task.credentials_ids.execution_role = Some("exec".into());
        }
        let mut machine = ManagedTask::new(task, settings(Duration::ZERO), None);
        machine.set_execution_credentials_present(false);
        let effects = machine.start(1_000);
        assert!(
            effects
                .iter()
                .any(|effect| matches!(effect, Effect::Docker(DockerCall::Pull { .. }))),
            "ecr={ecr} role={role}: {effects:?}"
        );
    }
}
