//! Docker volumes (`dockerVolumeConfiguration`) in the engine, against the scripted fake
//! runtime: each volume a container mounts is made ready before that container's create
//! (created, used, or refused by its scope), a volume that cannot be used is the container's
//! create error, cleanup removes the task-scoped volumes and keeps the shared ones, and a crash
//! between a volume's create and the container's create is harmless. Deterministic: every wait
//! is for the event, call or snapshot that proves the behaviour, with a deadline.

#[path = "support/definitions.rs"]
mod definitions;
#[path = "support/engine_events.rs"]
mod engine_events;
#[path = "support/fake_runtime.rs"]
mod fake_runtime;

use deckhand::engine::container_spec::{task_volume_name, LABEL_CLUSTER, LABEL_TASK_ARN};
use deckhand::engine::{EngineConfig, EngineHandle, TaskEngine};
use deckhand::report::Event;
use deckhand::runtime::{RuntimeError, VolumeInfo};
use deckhand::state::StateStore;
use deckhand::task::{
    ContainerDefinition, DockerVolumeConfiguration, MountPoint, TaskDefinition, TaskStatus, Volume,
    VolumeScope,
};
use definitions::{container, task};
use engine_events::fast_engine_config;
use fake_runtime::{FakeRuntime, Op};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

const APP_IMAGE: &str = "test/app:1";
const DEADLINE: Duration = Duration::from_secs(20);
const CLUSTER: &str = "volume-cluster";

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect()
}

fn docker_volume(name: &str, scope: VolumeScope, autoprovision: bool) -> Volume {
    Volume {
        docker_volume_configuration: Some(DockerVolumeConfiguration {
            scope,
            autoprovision,
            driver: "local".to_string(),
            driver_opts: map(&[("type", "tmpfs"), ("device", "tmpfs")]),
            labels: map(&[("app", "shop")]),
        }),
        ..Volume::new(name)
    }
}

fn mounting(mut definition: ContainerDefinition, volumes: &[&str]) -> ContainerDefinition {
    for volume in volumes {
        definition.mount_points.push(MountPoint {
            source_volume: volume.to_string(),
            container_path: format!("/{volume}"),
            read_only: false,
        });
    }
    definition
}

/// One container `app` mounting every volume of `volumes`.
fn task_with_volumes(family: &str, volumes: Vec<Volume>) -> TaskDefinition {
    let names: Vec<String> = volumes.iter().map(|volume| volume.name.clone()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut definition = task(family, vec![mounting(container("app", APP_IMAGE), &names)]);
    definition.volumes = volumes;
    definition
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

    fn arn(&self, task_id: &str) -> String {
        self.engine.task(task_id).expect("the task is held").arn
    }

    fn first_call(&self, op: Op, subject: &str) -> u64 {
        self.fake
            .calls()
            .iter()
            .find(|call| call.op == op && call.subject == subject)
            .unwrap_or_else(|| panic!("no {op:?} call on {subject}"))
            .order
    }

    /// The reason of `app`'s STOPPED event, after the whole task stopped without a create.
    fn create_error(&self, task_id: &str) -> String {
        let stopped = self.wait_event(task_id, Some("app"), "STOPPED");
        self.wait_event(task_id, None, "STOPPED");
        assert_eq!(self.fake.count(Op::Create, "app"), 0, "no container create");
        stopped.reason.unwrap_or_default()
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.engine.shutdown();
    }
}

#[test]
fn volumes_are_made_with_their_driver_options_and_labels_before_the_create() {
    let harness = Harness::new(fast_engine_config(CLUSTER));
    let id = harness.submit(task_with_volumes(
        "volumes-first",
        vec![
            docker_volume("scratch", VolumeScope::Task, false),
            docker_volume("db-data", VolumeScope::Shared, true),
            Volume::new("plain"),
        ],
    ));
    harness.wait_event(&id, None, "RUNNING");
    let scratch = task_volume_name(&id, "scratch");
    let plain = task_volume_name(&id, "plain");
    let create = harness.first_call(Op::Create, "app");
    for volume in [&scratch, &plain, &"db-data".to_string()] {
        assert!(
            harness.first_call(Op::CreateVolume, volume) < create,
            "{volume} is created before the container"
        );
    }
    let arn = harness.arn(&id);
    let task_labels = |extra: &[(&str, &str)]| {
        let mut labels = map(extra);
        labels.insert(LABEL_TASK_ARN.to_string(), arn.clone());
        labels.insert(LABEL_CLUSTER.to_string(), CLUSTER.to_string());
        labels
    };
    let tmpfs = map(&[("type", "tmpfs"), ("device", "tmpfs")]);
    assert_eq!(
        harness.fake.volume(&scratch),
        Some(VolumeInfo {
            name: scratch.clone(),
            driver: "local".into(),
            options: tmpfs.clone(),
            labels: task_labels(&[("app", "shop")]),
        })
    );
    assert_eq!(
        harness.fake.volume("db-data"),
        Some(VolumeInfo {
            name: "db-data".into(),
            driver: "local".into(),
            options: tmpfs,
            labels: map(&[("app", "shop")]),
        }),
        "a shared volume carries only the definition's labels"
    );
    assert_eq!(
        harness.fake.volume(&plain).map(|volume| volume.labels),
        Some(task_labels(&[]))
    );
    let spec = harness.fake.container("app").expect("created").spec;
    assert_eq!(
        spec.binds,
        vec![
            format!("{scratch}:/scratch"),
            "db-data:/db-data".to_string(),
            format!("{plain}:/plain"),
        ]
    );
}

#[test]
fn a_volume_that_cannot_be_used_is_the_containers_create_error() {
    let harness = Harness::new(fast_engine_config(CLUSTER));
    // (what, how the fake is set up, the definition's volume, words the reason holds)
    type Setup = Box<dyn Fn(&FakeRuntime, &str)>;
    let nothing: Setup = Box::new(|_, _| {});
    let cases: Vec<(&str, Setup, Volume, &str)> = vec![
        (
            "a missing shared volume without autoprovision",
            nothing,
            docker_volume("given-data", VolumeScope::Shared, false),
            "CannotCreateContainerError: initialize volume: volume detection failed, volume \
             'given-data' does not exist and autoprovision is set to false",
        ),
        (
            "a shared volume with other labels",
            Box::new(|fake, _| {
                fake.add_volume(VolumeInfo {
                    name: "labelled-data".into(),
                    driver: "local".into(),
                    options: map(&[("type", "tmpfs"), ("device", "tmpfs")]),
                    labels: map(&[("app", "other")]),
                })
            }),
            docker_volume("labelled-data", VolumeScope::Shared, true),
            "CannotCreateContainerError: initialize volume: volume 'labelled-data' does not \
             match existing volume labels: existing: {\"app\": \"other\"}, expected: {\"app\": \"shop\"}",
        ),
        (
            "a shared volume with other driver options",
            Box::new(|fake, _| {
                fake.add_volume(VolumeInfo {
                    name: "optioned-data".into(),
                    driver: "local".into(),
                    options: BTreeMap::new(),
                    labels: map(&[("app", "shop")]),
                })
            }),
            docker_volume("optioned-data", VolumeScope::Shared, true),
            "does not match existing volume options: existing: {}, expected: ",
        ),
        (
            "a volume create Docker refuses",
            Box::new(|fake, subject| {
                fake.fail_next(
                    Op::CreateVolume,
                    subject,
                    RuntimeError::Api {
                        status: 500,
                        message: "plugin \"nfs\" not found".into(),
                    },
                )
            }),
            docker_volume("refused-data", VolumeScope::Shared, true),
            "CannotCreateVolumeError: volume 'refused-data': Docker API error 500: plugin \
             \"nfs\" not found",
        ),
        (
            "a volume inspection Docker refuses",
            Box::new(|fake, subject| {
                fake.fail_next(
                    Op::InspectVolume,
                    subject,
                    RuntimeError::Api {
                        status: 500,
                        message: "boom".into(),
                    },
                )
            }),
            docker_volume("uninspected-data", VolumeScope::Shared, true),
            "CannotInspectVolumeError: volume 'uninspected-data': Docker API error 500: boom",
        ),
    ];
    for (what, setup, volume, expected) in cases {
        setup(&harness.fake, &volume.name);
        let id = harness.submit(task_with_volumes("volume-refused", vec![volume]));
        let reason = harness.create_error(&id);
        // The reason starts with the ECS name (and what follows it), or holds the words.
        let named = expected.split(':').next().unwrap_or_default();
        assert!(
            reason.contains(expected) && (!named.ends_with("Error") || reason.starts_with(named)),
            "{what}: expected {expected:?} in the reason {reason:?}"
        );
    }
}

#[test]
fn docker_away_during_a_volume_step_is_waited_out() {
    let harness = Harness::new(fast_engine_config(CLUSTER));
    harness.fake.fail_next(
        Op::InspectVolume,
        "away-data",
        RuntimeError::Unreachable {
            message: "connection refused".into(),
        },
    );
    let id = harness.submit(task_with_volumes(
        "volume-away",
        vec![docker_volume("away-data", VolumeScope::Shared, true)],
    ));
    harness.wait_event(&id, None, "RUNNING");
    assert_eq!(harness.fake.count(Op::InspectVolume, "away-data"), 2);
    assert_eq!(harness.fake.count(Op::CreateVolume, "away-data"), 1);
}

#[test]
fn cleanup_removes_the_task_scoped_volumes_and_keeps_the_shared_ones() {
    let harness = Harness::new(EngineConfig {
        cleanup_wait: Duration::from_millis(50),
        ..fast_engine_config(CLUSTER)
    });
    let definition = || {
        task_with_volumes(
            "volume-cleanup",
            vec![
                docker_volume("scratch", VolumeScope::Task, false),
                docker_volume("kept-data", VolumeScope::Shared, true),
            ],
        )
    };
    let first = harness.submit(definition());
    harness.wait_event(&first, None, "RUNNING");
    harness.engine.stop(&first).expect("stop accepted");
    assert!(harness
        .engine
        .wait_for_task(&first, DEADLINE, |task| task.is_none()));
    let scratch = task_volume_name(&first, "scratch");
    assert_eq!(harness.fake.volume(&scratch), None, "removed at cleanup");
    assert_eq!(harness.fake.count(Op::RemoveVolume, &scratch), 1);
    assert!(harness.fake.volume("kept-data").is_some(), "kept");
    assert_eq!(harness.fake.count(Op::RemoveVolume, "kept-data"), 0);

    // The next task uses the shared volume as it is, and makes a task-scoped one of its own.
    let second = harness.submit(definition());
    harness.wait_event(&second, None, "RUNNING");
    assert_eq!(harness.fake.count(Op::CreateVolume, "kept-data"), 1);
    assert!(harness
        .fake
        .volume(&task_volume_name(&second, "scratch"))
        .is_some());

    // A task-scoped volume that says it belongs to another task is left alone.
    let other = task_volume_name(&second, "scratch");
    let mut relabelled = harness.fake.volume(&other).expect("exists");
    relabelled
        .labels
        .insert(LABEL_TASK_ARN.to_string(), "arn:someone-else".to_string());
    harness.fake.add_volume(relabelled);
    harness.engine.stop(&second).expect("stop accepted");
    assert!(harness
        .engine
        .wait_for_task(&second, DEADLINE, |task| task.is_none()));
    assert!(harness.fake.volume(&other).is_some(), "not ours to remove");
    assert_eq!(harness.fake.count(Op::RemoveVolume, &other), 0);
}

struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new(name: &str) -> ScratchDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_nanos())
            .unwrap_or(0);
        let path =
            std::env::temp_dir().join(format!("dh-volumes-{name}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).expect("scratch dir");
        ScratchDir(path)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn start_durable(dir: &ScratchDir, fake: &Arc<FakeRuntime>) -> TaskEngine {
    let (store, loaded) = StateStore::open(&dir.0).expect("the state store opens");
    TaskEngine::start_durable(
        fake.clone(),
        fast_engine_config(CLUSTER),
        Arc::new(store),
        loaded.tasks,
    )
    .expect("the engine starts")
}

#[test]
fn a_restart_between_the_volume_create_and_the_container_create_is_harmless() {
    let dir = ScratchDir::new("restart");
    let fake = FakeRuntime::new();
    fake.add_image(APP_IMAGE);
    let engine = start_durable(&dir, &fake);
    // The create waits after its volume was made; the agent stops meanwhile.
    let gate = fake.hold_next(Op::Create, "app");
    let id = engine
        .submit(task_with_volumes(
            "volume-restart",
            vec![docker_volume("scratch", VolumeScope::Task, false)],
        ))
        .expect("accepted")
        .id;
    let scratch = task_volume_name(&id, "scratch");
    fake.wait_for_calls(Op::Create, "app", 1, DEADLINE)
        .unwrap_or_else(|message| panic!("{message}"));
    assert!(fake.volume(&scratch).is_some());
    engine.shutdown();

    let engine = start_durable(&dir, &fake);
    assert!(
        engine.wait_for_task(&id, DEADLINE, |task| task
            .is_some_and(|task| task.known_status == TaskStatus::Running)),
        "the restored task runs: {:?}",
        engine.task(&id)
    );
    assert_eq!(
        fake.count(Op::CreateVolume, &scratch),
        1,
        "the volume is used as the first attempt made it"
    );
    assert_eq!(fake.count(Op::InspectVolume, &scratch), 2);
    engine.shutdown();
    // The first process's create lands late, on a name the second one holds already.
    gate.release();
}
