//! Secrets from the local secret store in the engine, against the scripted fake runtime: a value
//! is read at create and reaches only Docker's create body (never the task the engine keeps,
//! its snapshot or its events), and a reference the store no longer holds by the time of the
//! create stops the task with ECS's `ResourceInitializationError`, naming the reference and no
//! value, without a create call. Deterministic: the pull is held while the store changes.

#[path = "support/definitions.rs"]
mod definitions;
#[path = "support/engine_events.rs"]
mod engine_events;
#[path = "support/fake_runtime.rs"]
mod fake_runtime;

use deckhand::engine::{EngineConfig, EngineHandle, TaskEngine};
use deckhand::task::{SecretReference, TaskStatus};
use definitions::{container, task};
use fake_runtime::{FakeRuntime, Op};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

const IMAGE: &str = "test/app:1";
const VALUE: &str = "s3cr3t-value-41f9";
const REFERENCE: &str = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:app/db-AbCdEf";
const DEADLINE: Duration = Duration::from_secs(20);

fn write_store(path: &Path, contents: &str) {
    std::fs::write(path, contents).expect("write the secrets file");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod 0600");
}

fn store_path(test: &str) -> PathBuf {
    let directory = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("engine_secrets")
        .join(format!("{test}-{}", std::process::id()));
    std::fs::create_dir_all(&directory).expect("scratch directory");
    directory.join("secrets.json")
}

fn engine_with_store(path: &Path) -> (std::sync::Arc<FakeRuntime>, TaskEngine) {
    let fake = FakeRuntime::new();
    fake.add_image(IMAGE);
    let config = EngineConfig {
        secrets_file: Some(path.to_path_buf()),
        ..engine_events::fast_engine_config("test-cluster")
    };
    let engine = TaskEngine::start(fake.clone(), config).expect("the engine starts");
    (fake, engine)
}

fn task_with_secret() -> deckhand::task::TaskDefinition {
    let mut app = container("app", IMAGE);
    app.environment = vec![("DB_PASSWORD".into(), "from-environment".into())];
    app.secrets = vec![SecretReference {
        name: "DB_PASSWORD".into(),
        value_from: REFERENCE.into(),
    }];
    task("secret-app", vec![app])
}

#[test]
fn a_secret_reaches_only_the_create_body_and_wins_over_the_environment() {
    let path = store_path("value");
    write_store(&path, &format!("{{\"{REFERENCE}\": \"{VALUE}\"}}"));
    let (fake, engine) = engine_with_store(&path);
    let id = engine.submit(task_with_secret()).expect("accepted").id;
    engine_events::wait_event(&engine, &id, None, "RUNNING", DEADLINE);

    let create = fake
        .calls_of(Op::Create)
        .into_iter()
        .find_map(|call| call.spec)
        .expect("a create with its spec");
    assert!(
        create.env.contains(&format!("DB_PASSWORD={VALUE}")),
        "{:?}",
        create.env
    );
    assert!(!create
        .env
        .iter()
        .any(|entry| entry.contains("from-environment")));

    let snapshot = engine.task(&id).expect("the task");
    let kept = serde_json::to_string(&snapshot).expect("serializable");
    assert!(kept.contains(REFERENCE), "the reference is kept");
    assert!(!kept.contains(VALUE), "the value is not: {kept}");
    let events = format!("{:?}", engine_events::events_of(&engine, &id));
    assert!(!events.contains(VALUE), "{events}");
    engine.shutdown();
}

#[test]
fn a_reference_gone_from_the_store_by_the_create_stops_the_task_with_resource_initialization_error()
{
    let path = store_path("gone");
    write_store(&path, &format!("{{\"{REFERENCE}\": \"{VALUE}\"}}"));
    let (fake, engine) = engine_with_store(&path);
    // Accepted while the store holds it; the pull waits while the value is rotated out.
    let gate = fake.hold_next(Op::Pull, IMAGE);
    let id = engine.submit(task_with_secret()).expect("accepted").id;
    fake.wait_for_calls(Op::Pull, IMAGE, 1, DEADLINE)
        .unwrap_or_else(|message| panic!("{message}"));
    write_store(&path, "{\"some-other-secret\": \"x\"}");
    gate.release();

    let stopped = engine_events::wait_event(&engine, &id, None, "STOPPED", DEADLINE);
    let reason = stopped.reason.clone().unwrap_or_default();
    assert!(
        reason.starts_with("ResourceInitializationError"),
        "{reason}"
    );
    assert!(reason.contains(REFERENCE), "{reason}");
    assert!(!reason.contains(VALUE), "{reason}");
    assert_eq!(
        fake.count(Op::Create, "app"),
        0,
        "no create without its secret"
    );
    let snapshot = engine.task(&id).expect("the task");
    assert_eq!(snapshot.known_status, TaskStatus::Stopped);
    engine.shutdown();
}
