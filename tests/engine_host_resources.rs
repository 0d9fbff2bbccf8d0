//! Host resources (docs/ENGINE.md §9a) on the scripted fake runtime: a task that does not fit
//! waits without a Docker call and starts once earlier tasks stopped, first come first served; a
//! stop while it waits ends it at once; a task that can never fit is refused at submit; the
//! queue and what admitted tasks hold survive a restart. Deterministic: no sleeps, every wait is
//! for the snapshot or call that proves it, and the order of calls is read from the fake.

#[path = "support/definitions.rs"]
mod definitions;
#[path = "support/engine_events.rs"]
mod engine_events;
#[path = "support/fake_runtime.rs"]
mod fake_runtime;

use deckhand::engine::host_resources::HostCapacity;
use deckhand::engine::{EngineConfig, EngineError, EngineHandle, TaskEngine};
use deckhand::state::StateStore;
use deckhand::task::{PortMapping, Protocol, Task, TaskDefinition, TaskStatus};
use definitions::{container, task};
use engine_events::fast_engine_config;
use fake_runtime::{FakeRuntime, Op};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(20);

/// A host offering tasks 1,024 MiB, two cores, and everything but TCP port 22 and UDP port 53.
fn small_host(cluster: &str) -> EngineConfig {
    EngineConfig {
        host_capacity: HostCapacity {
            memory_mib: 1024,
            cpu_units: 2048,
            reserved_tcp_ports: [22].into_iter().collect(),
            reserved_udp_ports: [53].into_iter().collect(),
            gpu_ids: Vec::new(),
        },
        ..fast_engine_config(cluster)
    }
}

/// One container named `name` (image `test/<name>:1`) that needs `memory_mib`.
fn sized(name: &str, memory_mib: u64) -> TaskDefinition {
    let mut app = container(name, &format!("test/{name}:1"));
    app.memory_mib = Some(memory_mib);
    task(name, vec![app])
}

fn with_host_port(mut definition: TaskDefinition, port: u16, protocol: Protocol) -> TaskDefinition {
    definition.containers[0].port_mappings.push(PortMapping {
        container_port: port,
        host_port: Some(port),
        protocol,
        container_port_range: None,
    });
    definition
}

fn fake_with_images(names: &[&str]) -> Arc<FakeRuntime> {
    let fake = FakeRuntime::new();
    for name in names {
        fake.add_image(&format!("test/{name}:1"));
    }
    fake
}

fn wait_known(engine: &TaskEngine, id: &str, status: TaskStatus) -> Task {
    assert!(
        engine.wait_for_task(id, DEADLINE, |task| task
            .is_some_and(|task| task.known_status == status)),
        "task {id} never reached {status:?}: {:#?}",
        engine.task(id)
    );
    engine.task(id).expect("the task is held")
}

fn waiting_for(engine: &TaskEngine, id: &str) -> Option<String> {
    engine.task(id).and_then(|task| task.waiting_for)
}

/// Position of the first call of `op` on `subject`.
fn first_call(fake: &FakeRuntime, op: Op, subject: &str) -> u64 {
    fake.calls()
        .iter()
        .find(|call| call.op == op && call.subject == subject)
        .unwrap_or_else(|| panic!("no {op:?} call on {subject}"))
        .order
}

#[test]
fn a_task_that_does_not_fit_waits_and_a_later_small_one_does_not_overtake_it() {
    let fake = fake_with_images(&["first", "big", "small"]);
    let engine = TaskEngine::start(fake.clone(), small_host("fifo")).expect("the engine starts");
    let first = engine.submit(sized("first", 600)).expect("accepted").id;
    wait_known(&engine, &first, TaskStatus::Running);
    let big = engine.submit(sized("big", 600)).expect("accepted").id;
    let small = engine.submit(sized("small", 100)).expect("accepted").id;

    // Waiting: known NONE, desired RUNNING, and inspect says why.
    let waiting = engine.task(&big).expect("held");
    assert_eq!(waiting.known_status, TaskStatus::None);
    assert_eq!(waiting.desired_status, TaskStatus::Running);
    assert_eq!(
        waiting.waiting_for.as_deref(),
        Some("memory: needs 600 MiB, 424 MiB free")
    );
    // The small one would fit, but the big one came first.
    assert_eq!(
        waiting_for(&engine, &small),
        Some(format!(
            "its turn: task {big} waits for host resources ahead of it"
        ))
    );
    assert_eq!(
        engine.host_resources().queued(),
        vec![big.clone(), small.clone()]
    );
    assert_eq!(waiting_for(&engine, &first), None);

    engine.stop(&first).expect("stop accepted");
    wait_known(&engine, &first, TaskStatus::Stopped);
    wait_known(&engine, &big, TaskStatus::Running);
    wait_known(&engine, &small, TaskStatus::Running);
    // Nothing of either waiting task reached Docker before the first one's stop: not even a
    // pull (or the image look-up that decides one).
    let stop_of_first = first_call(&fake, Op::Stop, "first");
    for waiting in ["big", "small"] {
        let image = format!("test/{waiting}:1");
        let earliest = fake
            .calls()
            .iter()
            .filter(|call| call.subject == waiting || call.subject == image)
            .map(|call| call.order)
            .min()
            .expect("the waiting task made calls once admitted");
        assert!(
            earliest > stop_of_first,
            "{waiting}: a call before the running task's stop"
        );
    }
    assert_eq!(waiting_for(&engine, &big), None);
    assert_eq!(engine.host_resources().used(), (700, 0));
    engine.shutdown();
}

#[test]
fn a_stop_while_waiting_stops_the_task_at_once_and_lets_the_next_one_in() {
    let fake = fake_with_images(&["holder", "stopped", "next"]);
    let engine =
        TaskEngine::start(fake.clone(), small_host("stop-waiting")).expect("the engine starts");
    let holder = engine.submit(sized("holder", 500)).expect("accepted").id;
    wait_known(&engine, &holder, TaskStatus::Running);
    let stopped = engine.submit(sized("stopped", 900)).expect("accepted").id;
    let next = engine.submit(sized("next", 400)).expect("accepted").id;
    assert!(waiting_for(&engine, &next).is_some_and(|reason| reason.starts_with("its turn")));

    engine.stop(&stopped).expect("stop accepted");
    let task = wait_known(&engine, &stopped, TaskStatus::Stopped);
    assert_eq!(task.waiting_for, None, "it left the queue");
    assert_eq!(
        task.stopped_reason.as_deref(),
        Some("Task stopped by request")
    );
    // The next one fits beside the holder now that nobody waits ahead of it.
    wait_known(&engine, &next, TaskStatus::Running);
    assert_eq!(fake.count(Op::Create, "stopped"), 0);
    assert_eq!(fake.count(Op::Pull, "test/stopped:1"), 0);
    assert_eq!(fake.count(Op::InspectImage, "test/stopped:1"), 0);
    assert_eq!(engine.host_resources().used(), (900, 0));
    engine.shutdown();
}

#[test]
fn a_host_port_is_held_until_its_task_stopped() {
    let fake = fake_with_images(&["web", "replacement"]);
    let engine = TaskEngine::start(fake.clone(), small_host("ports")).expect("the engine starts");
    let web = engine
        .submit(with_host_port(sized("web", 10), 8080, Protocol::Tcp))
        .expect("accepted")
        .id;
    wait_known(&engine, &web, TaskStatus::Running);
    let replacement = engine
        .submit(with_host_port(
            sized("replacement", 10),
            8080,
            Protocol::Tcp,
        ))
        .expect("accepted")
        .id;
    assert_eq!(
        waiting_for(&engine, &replacement),
        Some(format!("port 8080/tcp: held by task {web}"))
    );
    engine.stop(&web).expect("stop accepted");
    wait_known(&engine, &replacement, TaskStatus::Running);
    assert!(first_call(&fake, Op::Create, "replacement") > first_call(&fake, Op::Stop, "web"));
    engine.shutdown();
}

#[test]
fn a_task_that_can_never_fit_is_refused_at_submit_naming_the_resource() {
    let fake = fake_with_images(&["huge", "greedy", "ssh", "dns", "fine"]);
    let engine = TaskEngine::start(fake.clone(), small_host("never")).expect("the engine starts");
    let cases: Vec<(TaskDefinition, &str)> = vec![
        (
            sized("huge", 2048),
            "memory: needs 2048 MiB, the host offers 1024 MiB to tasks in all",
        ),
        (
            {
                let mut definition = sized("greedy", 10);
                definition.cpu = Some(4096);
                definition
            },
            "cpu: needs 4096 units, the host offers 2048 units to tasks in all",
        ),
        (
            with_host_port(sized("ssh", 10), 22, Protocol::Tcp),
            "port 22/tcp: reserved on this host (ECS_RESERVED_PORTS)",
        ),
        (
            with_host_port(sized("dns", 10), 53, Protocol::Udp),
            "port 53/udp: reserved on this host (ECS_RESERVED_PORTS_UDP)",
        ),
    ];
    for (definition, reason) in cases {
        let family = definition.family.clone();
        match engine.submit(definition) {
            Err(EngineError::Rejected { reason: given }) => assert_eq!(given, reason, "{family}"),
            other => panic!("{family}: expected a refusal, got {other:?}"),
        }
    }
    assert!(engine.tasks().is_empty(), "nothing was accepted");
    // UDP 22 and TCP 53 are not reserved; the whole host's memory is allowed.
    let fine = with_host_port(
        with_host_port(sized("fine", 1024), 22, Protocol::Udp),
        53,
        Protocol::Tcp,
    );
    let id = engine.submit(fine).expect("accepted").id;
    wait_known(&engine, &id, TaskStatus::Running);
    engine.shutdown();
}

struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new(name: &str) -> ScratchDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_nanos())
            .unwrap_or(0);
        let path = std::env::temp_dir().join(format!(
            "dh-resources-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path).expect("scratch dir");
        ScratchDir(path)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn start_durable(datadir: &Path, fake: &Arc<FakeRuntime>) -> TaskEngine {
    let (store, loaded) = StateStore::open(datadir).expect("the state store opens");
    TaskEngine::start_durable(
        fake.clone(),
        small_host("durable-resources"),
        Arc::new(store),
        loaded.tasks,
    )
    .expect("the engine starts")
}

#[test]
fn the_accounting_and_the_queue_survive_a_restart() {
    let dir = ScratchDir::new("restart");
    let fake = fake_with_images(&["one", "two", "three", "four"]);
    let engine = start_durable(&dir.0, &fake);
    let one = engine.submit(sized("one", 400)).expect("accepted").id;
    let two = engine.submit(sized("two", 400)).expect("accepted").id;
    wait_known(&engine, &one, TaskStatus::Running);
    wait_known(&engine, &two, TaskStatus::Running);
    let three = engine.submit(sized("three", 400)).expect("accepted").id;
    let four = engine.submit(sized("four", 100)).expect("accepted").id;
    assert_eq!(
        waiting_for(&engine, &three).as_deref(),
        Some("memory: needs 400 MiB, 224 MiB free")
    );
    engine.shutdown();

    let engine = start_durable(&dir.0, &fake);
    // The running tasks hold what they held; the waiting ones wait again, in their order.
    wait_known(&engine, &one, TaskStatus::Running);
    wait_known(&engine, &two, TaskStatus::Running);
    let ledger = engine.host_resources();
    assert_eq!(ledger.admitted().len(), 2, "{ledger:?}");
    assert_eq!(ledger.used(), (800, 0));
    assert_eq!(ledger.queued(), vec![three.clone(), four.clone()]);
    assert_eq!(
        waiting_for(&engine, &three).as_deref(),
        Some("memory: needs 400 MiB, 224 MiB free")
    );
    assert_eq!(
        engine.task(&three).expect("held").known_status,
        TaskStatus::None
    );

    engine.stop(&one).expect("stop accepted");
    wait_known(&engine, &one, TaskStatus::Stopped);
    wait_known(&engine, &three, TaskStatus::Running);
    wait_known(&engine, &four, TaskStatus::Running);
    let stop_of_one = fake
        .calls()
        .iter()
        .filter(|call| call.op == Op::Stop && call.subject == "one")
        .map(|call| call.order)
        .max()
        .expect("one was stopped");
    assert!(first_call(&fake, Op::Create, "three") > stop_of_one);
    assert!(first_call(&fake, Op::Create, "four") > stop_of_one);
    engine.shutdown();
}

/// A host like [`small_host`] with these GPUs, handed out in this order.
fn gpu_host(cluster: &str, gpus: &[&str]) -> EngineConfig {
    let mut config = small_host(cluster);
    config.host_capacity.gpu_ids = gpus.iter().map(|id| id.to_string()).collect();
    config
}

/// [`sized`] with `gpus` GPUs for its container.
fn with_gpus(name: &str, gpus: u32) -> TaskDefinition {
    let mut definition = sized(name, 10);
    definition.containers[0].gpus = gpus;
    definition
}

/// What the create of `ecs_name` asked Docker for: its `HostConfig.DeviceRequests` and its
/// `NVIDIA_VISIBLE_DEVICES` variables, from the body deckhand sends.
fn gpus_asked(fake: &FakeRuntime, ecs_name: &str) -> (serde_json::Value, Vec<String>) {
    let container = fake
        .container(ecs_name)
        .unwrap_or_else(|| panic!("{ecs_name} was created"));
    let body = deckhand::docker::create_body::create_body(&container.spec);
    let visible = container
        .spec
        .env
        .iter()
        .filter(|variable| variable.starts_with("NVIDIA_VISIBLE_DEVICES="))
        .cloned()
        .collect();
    (body["HostConfig"]["DeviceRequests"].clone(), visible)
}

#[test]
fn gpus_are_given_by_id_at_admission_reach_the_create_body_and_come_back_at_stopped() {
    let fake = fake_with_images(&["trainer", "sidecar", "second"]);
    let engine = TaskEngine::start(fake.clone(), gpu_host("gpus", &["GPU-a", "GPU-b", "GPU-c"]))
        .expect("the engine starts");
    let mut trainer = with_gpus("trainer", 2);
    let mut sidecar = container("sidecar", "test/sidecar:1");
    sidecar.memory_mib = Some(10);
    trainer.containers.push(sidecar);
    let first = engine.submit(trainer).expect("accepted").id;
    wait_known(&engine, &first, TaskStatus::Running);
    let (requests, visible) = gpus_asked(&fake, "trainer");
    assert_eq!(
        requests,
        serde_json::json!([{"Driver": "nvidia", "DeviceIDs": ["GPU-a", "GPU-b"],
            "Capabilities": [["gpu"]]}])
    );
    assert_eq!(visible, vec!["NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b"]);
    // A container of the task that asks for none gets none.
    assert_eq!(
        gpus_asked(&fake, "sidecar"),
        (serde_json::Value::Null, vec![])
    );
    let task = engine.task(&first).expect("held");
    assert_eq!(task.containers[0].gpu_ids, vec!["GPU-a", "GPU-b"]);
    assert!(task.containers[1].gpu_ids.is_empty());

    // Two more do not fit beside it: the task waits, saying so, with nothing pulled.
    let second = engine.submit(with_gpus("second", 2)).expect("accepted").id;
    assert_eq!(
        waiting_for(&engine, &second).as_deref(),
        Some("gpu: needs 2 GPUs, 1 free")
    );
    assert_eq!(fake.count(Op::Create, "second"), 0);

    engine.stop(&first).expect("stop accepted");
    wait_known(&engine, &first, TaskStatus::Stopped);
    wait_known(&engine, &second, TaskStatus::Running);
    assert!(first_call(&fake, Op::Create, "second") > first_call(&fake, Op::Stop, "trainer"));
    let (requests, visible) = gpus_asked(&fake, "second");
    assert_eq!(
        requests[0]["DeviceIDs"],
        serde_json::json!(["GPU-a", "GPU-b"])
    );
    assert_eq!(visible, vec!["NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b"]);
    let ledger = engine.host_resources();
    assert!(ledger.gpus_held_by(&first).is_empty());
    assert_eq!(ledger.gpus_held_by(&second), vec!["GPU-a", "GPU-b"]);
    assert_eq!(ledger.free_gpus(), 1);
    engine.shutdown();
}

#[test]
fn a_task_needing_more_gpus_than_the_host_has_is_refused_at_submit() {
    let fake = fake_with_images(&["one", "two"]);
    let none = TaskEngine::start(fake.clone(), small_host("no-gpus")).expect("the engine starts");
    match none.submit(with_gpus("one", 1)) {
        Err(EngineError::Rejected { reason }) => {
            assert_eq!(reason, "gpu: needs 1 GPU, the host has 0")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(none.tasks().is_empty(), "nothing was accepted");
    none.shutdown();

    let one = TaskEngine::start(fake.clone(), gpu_host("one-gpu", &["GPU-a"]))
        .expect("the engine starts");
    match one.submit(with_gpus("two", 2)) {
        Err(EngineError::Rejected { reason }) => {
            assert_eq!(reason, "gpu: needs 2 GPUs, the host has 1")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(fake.count(Op::Create, "two"), 0);
    let id = one.submit(with_gpus("one", 1)).expect("accepted").id;
    wait_known(&one, &id, TaskStatus::Running);
    one.shutdown();
}

fn start_durable_on(datadir: &Path, fake: &Arc<FakeRuntime>, config: EngineConfig) -> TaskEngine {
    let (store, loaded) = StateStore::open(datadir).expect("the state store opens");
    TaskEngine::start_durable(fake.clone(), config, Arc::new(store), loaded.tasks)
        .expect("the engine starts")
}

#[test]
fn after_a_restart_tasks_keep_their_gpus_and_no_gpu_is_given_twice() {
    let dir = ScratchDir::new("gpus");
    let fake = fake_with_images(&["one", "two", "three", "four"]);
    let engine = start_durable_on(
        &dir.0,
        &fake,
        gpu_host("durable-gpus", &["GPU-a", "GPU-b", "GPU-c"]),
    );
    let one = engine.submit(with_gpus("one", 1)).expect("accepted").id;
    wait_known(&engine, &one, TaskStatus::Running);
    let two = engine.submit(with_gpus("two", 1)).expect("accepted").id;
    wait_known(&engine, &two, TaskStatus::Running);
    engine.shutdown();

    // The host lists its GPUs in another order now (a driver update, DECKHAND_GPU_IDS
    // rewritten): the running tasks keep the GPUs their containers were created with.
    let engine = start_durable_on(
        &dir.0,
        &fake,
        gpu_host("durable-gpus", &["GPU-c", "GPU-b", "GPU-a"]),
    );
    wait_known(&engine, &one, TaskStatus::Running);
    wait_known(&engine, &two, TaskStatus::Running);
    let ledger = engine.host_resources();
    assert_eq!(ledger.gpus_held_by(&one), vec!["GPU-a"]);
    assert_eq!(ledger.gpus_held_by(&two), vec!["GPU-b"]);
    assert_eq!(ledger.free_gpus(), 1);
    assert_eq!(
        engine.task(&one).expect("held").containers[0].gpu_ids,
        vec!["GPU-a"]
    );
    // A new task gets the one nobody holds; the next one waits for it.
    let three = engine.submit(with_gpus("three", 1)).expect("accepted").id;
    wait_known(&engine, &three, TaskStatus::Running);
    assert_eq!(
        gpus_asked(&fake, "three").1,
        vec!["NVIDIA_VISIBLE_DEVICES=GPU-c"]
    );
    let four = engine.submit(with_gpus("four", 1)).expect("accepted").id;
    assert_eq!(
        waiting_for(&engine, &four).as_deref(),
        Some("gpu: needs 1 GPU, 0 free")
    );
    engine.stop(&one).expect("stop accepted");
    wait_known(&engine, &four, TaskStatus::Running);
    assert_eq!(
        gpus_asked(&fake, "four").1,
        vec!["NVIDIA_VISIBLE_DEVICES=GPU-a"]
    );
    // Each GPU has one holder and one running container.
    let ledger = engine.host_resources();
    assert_eq!(ledger.gpus_held_by(&two), vec!["GPU-b"]);
    assert_eq!(ledger.gpus_held_by(&three), vec!["GPU-c"]);
    assert_eq!(ledger.gpus_held_by(&four), vec!["GPU-a"]);
    engine.shutdown();
}
