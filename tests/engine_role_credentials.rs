//! Task IAM role credentials in the engine, against the scripted fake runtime: a task accepted
//! with credentials ids makes them known to the store (pending: the endpoint's 503) before any
//! container is created; every container of a task with a task role is told
//! `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=/v2/credentials/<id>`, no container the execution
//! role's id; an awslogs container of a task with an execution role gets Docker's
//! `awslogs-credentials-endpoint` (even on a host with no AWS credentials of its own); the ids,
//! never the credentials, are in the task the engine keeps and its checkpoint, so a restored
//! task's ids are pending in a new process's store; and the ids are forgotten with the task.

#[path = "support/definitions.rs"]
mod definitions;
#[path = "support/engine_events.rs"]
mod engine_events;
#[path = "support/fake_runtime.rs"]
mod fake_runtime;

use deckhand::engine::{EngineConfig, EngineHandle, TaskEngine};
use deckhand::role_credentials::{CredentialsLookup, CredentialsStore, RoleCredentials, RoleType};
use deckhand::state::StateStore;
use deckhand::task::{LogConfiguration, RoleCredentialsIds, TaskStatus};
use definitions::{container, task};
use fake_runtime::FakeRuntime;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const IMAGE: &str = "test/app:1";
const DEADLINE: Duration = Duration::from_secs(20);
const ARN: &str = "arn:aws:ecs:eu-west-1:123456789012:task/edge/0123456789abcdef0123456789abcdef";
const SECRET: &str = "wJalrXUtnFEMI-engine-test-secret";
const TOKEN: &str = "FwoGZXIvYXdzEengine-test-token";

fn credentials() -> RoleCredentials {
    RoleCredentials {
        access_key_id: "ASIAENGINETESTKEY01".into(),
        secret_access_key: SECRET.into(),
        session_token: TOKEN.into(),
        expiration: "2026-12-07T06:00:00Z".into(),
        role_arn: "arn:aws:iam::123456789012:role/app".into(),
    }
}

#[test]
fn a_tasks_roles_reach_its_containers_as_endpoints_only_and_leave_with_it() {
    let fake = FakeRuntime::new();
    fake.add_image(IMAGE);
    let store = CredentialsStore::new();
    let config = EngineConfig {
        role_credentials: store.clone(),
        cleanup_wait: Duration::from_millis(10),
        ..engine_events::fast_engine_config("edge")
    };
    let engine = TaskEngine::start(fake.clone(), config).expect("the engine starts");

    let mut logs = container("logs", IMAGE);
    logs.log_configuration = Some(LogConfiguration {
        log_driver: "awslogs".into(),
        options: BTreeMap::from([
            ("awslogs-group".to_string(), "app".to_string()),
            ("awslogs-region".to_string(), "eu-west-1".to_string()),
        ]),
        secret_options: Vec::new(),
    });
    let definition = task("roles", vec![container("app", IMAGE), logs]);
    let ids = RoleCredentialsIds {
        task_role: Some("app-id".into()),
        execution_role: Some("exec-id".into()),
    };
    // The payload's credentials go in before the task (as the ECS session does); the execution
    // role's arrive later: its id is pending meanwhile.
    store
        .set(ARN, RoleType::TaskApplication, "app-id", credentials())
        .expect("set");
    let accepted = engine
        .submit_with_arn(definition, ARN.into(), "test".into(), ids.clone())
        .expect("accepted");
    assert_eq!(accepted.credentials_ids, ids);
    assert_eq!(store.lookup("exec-id"), CredentialsLookup::Pending);
    assert!(matches!(
        store.lookup("app-id"),
        CredentialsLookup::Ready { .. }
    ));
    engine_events::wait_event(&engine, &accepted.id, None, "RUNNING", DEADLINE);

    for name in ["app", "logs"] {
        let spec = fake.container(name).expect("created").spec;
        assert!(
            spec.env
                .contains(&"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=/v2/credentials/app-id".into()),
            "{name}: {:?}",
            spec.env
        );
        assert!(
            spec.env.iter().all(|entry| !entry.contains("exec-id")
                && !entry.contains(SECRET)
                && !entry.contains(TOKEN)),
            "{name}: {:?}",
            spec.env
        );
    }
    let log_config = fake
        .container("logs")
        .and_then(|container| container.spec.log_config)
        .expect("a log configuration");
    assert_eq!(log_config.driver, "awslogs", "shipped with the role");
    assert_eq!(
        log_config
            .options
            .get("awslogs-credentials-endpoint")
            .map(String::as_str),
        Some("/v2/credentials/exec-id")
    );

    let kept =
        serde_json::to_string(&engine.task(&accepted.id).expect("the task")).expect("serializable");
    assert!(
        kept.contains("exec-id") && kept.contains("app-id"),
        "{kept}"
    );
    assert!(!kept.contains(SECRET) && !kept.contains(TOKEN), "{kept}");

    engine.stop(&accepted.id).expect("stop accepted");
    engine_events::wait_event(&engine, &accepted.id, None, "STOPPED", DEADLINE);
    assert!(
        engine.wait_for_task(&accepted.id, DEADLINE, |task| task.is_none()),
        "the task is cleaned up"
    );
    assert_eq!(store.lookup("app-id"), CredentialsLookup::Unknown);
    assert_eq!(store.lookup("exec-id"), CredentialsLookup::Unknown);
    assert!(store.is_empty());
    engine.shutdown();
}

#[test]
fn a_restored_task_knows_its_ids_and_waits_for_its_credentials() {
    let datadir = std::env::temp_dir().join(format!(
        "dh-role-credentials-{}-{}",
        std::process::id(),
        deckhand::role_credentials::new_credentials_id().expect("urandom")
    ));
    std::fs::create_dir_all(&datadir).expect("scratch directory");
    let fake = FakeRuntime::new();
    fake.add_image(IMAGE);
    let start = |store: &CredentialsStore| {
        let (state, loaded) = StateStore::open(&datadir).expect("the state store opens");
        let config = EngineConfig {
            role_credentials: store.clone(),
            ..engine_events::fast_engine_config("edge")
        };
        TaskEngine::start_durable(fake.clone(), config, Arc::new(state), loaded.tasks)
            .expect("the engine starts")
    };
    let before = CredentialsStore::new();
    before
        .set(ARN, RoleType::TaskApplication, "app-id", credentials())
        .expect("set");
    let engine = start(&before);
    let ids = RoleCredentialsIds {
        task_role: Some("app-id".into()),
        execution_role: None,
    };
    let accepted = engine
        .submit_with_arn(
            task("roles", vec![container("app", IMAGE)]),
            ARN.into(),
            "test".into(),
            ids.clone(),
        )
        .expect("accepted");
    engine_events::wait_event(&engine, &accepted.id, None, "RUNNING", DEADLINE);
    engine.shutdown();
    let saved = std::fs::read_dir(&datadir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| std::fs::read(entry.path()).ok())
        .flatten()
        .collect::<Vec<u8>>();
    let saved = String::from_utf8_lossy(&saved);
    assert!(!saved.contains(SECRET) && !saved.contains(TOKEN));

    // A new process: an empty store, the task restored from its checkpoint.
    let after = CredentialsStore::new();
    let engine = start(&after);
    assert_eq!(after.lookup("app-id"), CredentialsLookup::Pending);
    let restored = engine.task(&accepted.id).expect("restored");
    assert_eq!(restored.credentials_ids, ids);
    assert_eq!(restored.known_status, TaskStatus::Running);
    engine.shutdown();
    let _ = std::fs::remove_dir_all(&datadir);
}
