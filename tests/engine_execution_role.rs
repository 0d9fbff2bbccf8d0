//! The execution role in the engine, against the scripted fake runtime and the fake
//! SSM/Secrets Manager/ECR of `tests/support/fake_aws.rs` (SigV4 checked), through the agent's
//! `AwsExecutionRole`:
//!
//! - the local secret store wins where it holds a reference; SSM (one `GetParameters` for the
//!   rest) and Secrets Manager answer what it lacks, signed with the task's execution role;
//! - a task whose execution-role credentials have not arrived stops with ECS's words;
//! - a local task with no execution role is still refused at submit for a reference the store
//!   lacks;
//! - an ECR image's pull sends `GetAuthorizationToken`'s login: the host's credentials for a
//!   task without an execution role, the role's otherwise, each login kept per credentials; a
//!   refused login stops the task with `CannotPullECRContainerError`.
//! - an ECR pull of a task whose execution-role credentials are not there yet (a task restored
//!   before ECS sent them again) waits for them, without failing, and pulls with the role once
//!   they are set; a task with no ECR image is not held back by them.

#[path = "support/definitions.rs"]
mod definitions;
#[path = "support/engine_events.rs"]
mod engine_events;
#[path = "support/fake_aws.rs"]
mod fake_aws;
#[path = "support/fake_ecs.rs"]
mod fake_ecs;
#[path = "support/fake_runtime.rs"]
mod fake_runtime;

use deckhand::agent::execution_role::AwsExecutionRole;
use deckhand::control::aws::{AwsClient, RetryPolicy};
use deckhand::control::ecs::CredentialChain;
use deckhand::engine::{EngineConfig, EngineError, EngineHandle, TaskEngine};
use deckhand::role_credentials::{CredentialsStore, RoleCredentials, RoleType};
use deckhand::task::{
    LogConfiguration, RoleCredentialsIds, SecretReference, TaskDefinition, TaskStatus,
};
use definitions::{container, task};
use fake_aws::{FakeAws, Fault, SecretVersion};
use fake_ecs::{random_hex32, Credentials};
use fake_runtime::{FakeRuntime, Op};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const IMAGE: &str = "test/app:1";
const ECR_IMAGE: &str = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/app:1";
const DEADLINE: Duration = Duration::from_secs(20);

struct Setup {
    fake: Arc<FakeRuntime>,
    engine: TaskEngine,
    store: CredentialsStore,
}

fn scratch(test: &str) -> PathBuf {
    let directory = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("engine_execution_role")
        .join(format!("{test}-{}", std::process::id()));
    std::fs::create_dir_all(&directory).expect("scratch directory");
    directory.join("secrets.json")
}

/// An engine reaching `aws` for the execution role, with the local store `secrets` (JSON).
fn engine(aws: &FakeAws, test: &str, secrets: &str) -> Setup {
    let path = scratch(test);
    std::fs::write(&path, secrets).expect("write the store");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let endpoint = aws.endpoint();
    let lookup = move |key: &str| (key == "AWS_ENDPOINT_URL").then(|| endpoint.clone());
    let proxies = deckhand::net::proxy::ProxySettings::from_lookup(&|_| None).expect("no proxy");
    let client = AwsClient::new(&lookup, proxies).with_retry_policy(RetryPolicy {
        attempts: 2,
        first_wait: Duration::from_millis(10),
        max_wait: Duration::from_millis(10),
    });
    let host = Credentials::test();
    let values: BTreeMap<String, String> = [
        ("AWS_ACCESS_KEY_ID", host.access_key),
        ("AWS_SECRET_ACCESS_KEY", host.secret_key),
        ("AWS_SESSION_TOKEN", host.session_token.unwrap_or_default()),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_string(), value))
    .collect();
    let role = AwsExecutionRole::from_parts(
        client,
        Some("us-west-2".into()),
        Arc::new(CredentialChain::from_values(&values)),
    );
    let store = CredentialsStore::new();
    let fake = FakeRuntime::new();
    fake.add_image(IMAGE);
    let config = EngineConfig {
        secrets_file: Some(path),
        execution_role: Some(Arc::new(role)),
        role_credentials: store.clone(),
        ..engine_events::fast_engine_config("test-cluster")
    };
    let engine = TaskEngine::start(fake.clone(), config).expect("the engine starts");
    Setup {
        fake,
        engine,
        store,
    }
}

/// Execution-role credentials the fake AWS accepts: (their access key, them).
fn role_credentials(aws: &FakeAws) -> (String, RoleCredentials) {
    let key = format!("ASIA{}", &random_hex32()[..16].to_uppercase());
    let credentials = RoleCredentials {
        access_key_id: key.clone(),
        secret_access_key: format!("secret{}", random_hex32()),
        session_token: format!("token{}", random_hex32()),
        expiration: "2026-12-31T00:00:00Z".into(),
        role_arn: "arn:aws:iam::123456789012:role/exec".into(),
    };
    aws.accept_credentials(Credentials {
        access_key: key.clone(),
        secret_key: credentials.secret_access_key.clone(),
        session_token: Some(credentials.session_token.clone()),
    });
    (key, credentials)
}

/// Submits `definition` as a control plane's task with an execution role of id `id`, whose
/// credentials are `credentials` when given; its task id.
fn submit_with_role(
    setup: &Setup,
    definition: TaskDefinition,
    id: &str,
    credentials: Option<RoleCredentials>,
) -> String {
    let arn = format!(
        "arn:aws:ecs:us-west-2:123456789012:task/test-cluster/{}",
        random_hex32()
    );
    if let Some(credentials) = credentials {
        setup
            .store
            .set(&arn, RoleType::TaskExecution, id, credentials)
            .expect("set");
    }
    let ids = RoleCredentialsIds {
        task_role: None,
        execution_role: Some(id.to_string()),
    };
    setup
        .engine
        .submit_with_arn(definition, arn, "test".into(), ids)
        .expect("accepted")
        .id
}

fn with_secrets(family: &str, image: &str, secrets: &[(&str, &str)]) -> TaskDefinition {
    let mut app = container("app", image);
    app.secrets = secrets
        .iter()
        .map(|(name, value_from)| SecretReference {
            name: (*name).into(),
            value_from: (*value_from).into(),
        })
        .collect();
    task(family, vec![app])
}

fn created_environment(fake: &FakeRuntime) -> Vec<String> {
    fake.calls_of(Op::Create)
        .into_iter()
        .find_map(|call| call.spec)
        .expect("a create with its spec")
        .env
}

#[test]
fn the_local_store_wins_and_ssm_and_secrets_manager_answer_the_rest_with_the_execution_role() {
    let aws = FakeAws::start();
    aws.put_parameter("/app/a", "aws-a");
    aws.put_parameter("/app/b", "aws-b");
    aws.put_secret(
        "app/db",
        vec![SecretVersion {
            version_id: "v1".into(),
            stages: vec!["AWSCURRENT".into()],
            value: Ok(r#"{"password": "aws-password"}"#.into()),
        }],
    );
    let setup = engine(&aws, "wins", r#"{"/app/a": "local-a"}"#);
    let (key, credentials) = role_credentials(&aws);
    let secret = format!("{}:password::", FakeAws::secret_arn("us-west-2", "app/db"));
    let mut definition = with_secrets(
        "mixed",
        IMAGE,
        &[("A", "/app/a"), ("B", "/app/b"), ("P", &secret)],
    );
    // A log driver's secret option (an ECS payload's LOG_DRIVER secret) comes the same way.
    aws.put_parameter("/app/log-token", "aws-log-token");
    definition.containers[0].log_configuration = Some(LogConfiguration {
        log_driver: "splunk".into(),
        options: [("splunk-url".to_string(), "https://splunk:8088".to_string())].into(),
        secret_options: vec![SecretReference {
            name: "splunk-token".into(),
            value_from: "/app/log-token".into(),
        }],
    });
    let id = submit_with_role(&setup, definition, "exec-1", Some(credentials));
    engine_events::wait_event(&setup.engine, &id, None, "RUNNING", DEADLINE);

    let environment = created_environment(&setup.fake);
    for expected in ["A=local-a", "B=aws-b", "P=aws-password"] {
        assert!(
            environment.iter().any(|entry| entry == expected),
            "{expected}: {environment:?}"
        );
    }
    let log = setup
        .fake
        .calls_of(Op::Create)
        .into_iter()
        .find_map(|call| call.spec)
        .and_then(|spec| spec.log_config)
        .expect("a create with a log configuration");
    assert_eq!(
        log.options.get("splunk-token").map(String::as_str),
        Some("aws-log-token"),
        "{:?}",
        log.options.keys().collect::<Vec<_>>()
    );
    assert!(
        !environment
            .iter()
            .any(|entry| entry.contains("aws-log-token")),
        "a log option is not an environment variable"
    );
    let calls = aws.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0].operation, "GetParameters");
    let mut names: Vec<String> =
        serde_json::from_value(calls[0].request["Names"].clone()).expect("a list of names");
    names.sort();
    assert_eq!(names, ["/app/b", "/app/log-token"]);
    assert_eq!(calls[1].operation, "GetSecretValue");
    assert!(calls.iter().all(|call| call.access_key == key), "{calls:?}");
    setup.engine.shutdown();
}

#[test]
fn a_task_whose_execution_role_credentials_have_not_arrived_stops_in_ecs_words() {
    let aws = FakeAws::start();
    aws.put_parameter("/app/b", "aws-b");
    let setup = engine(&aws, "pending", "{}");
    let definition = with_secrets("pending", IMAGE, &[("B", "/app/b")]);
    let id = submit_with_role(&setup, definition, "exec-pending", None);
    let stopped = engine_events::wait_event(&setup.engine, &id, None, "STOPPED", DEADLINE);
    assert_eq!(
        stopped.reason.as_deref(),
        Some(
            "ResourceInitializationError: container \"app\": ssm secret resource: unable to \
             find execution role credentials"
        )
    );
    assert!(
        aws.calls().is_empty(),
        "AWS is not asked without credentials"
    );
    setup.engine.shutdown();
}

#[test]
fn a_local_task_without_an_execution_role_is_refused_for_a_reference_the_store_lacks() {
    let aws = FakeAws::start();
    let setup = engine(&aws, "local", "{}");
    let refused = setup
        .engine
        .submit(with_secrets("local", IMAGE, &[("B", "/app/b")]));
    match refused {
        Err(EngineError::Rejected { reason }) => {
            assert!(reason.contains("holds no value for \"/app/b\""), "{reason}")
        }
        other => panic!("not refused: {other:?}"),
    }
    setup.engine.shutdown();
}

#[test]
fn an_ecr_pull_sends_the_login_of_the_hosts_or_the_roles_credentials_kept_per_credentials() {
    let aws = FakeAws::start();
    let setup = engine(&aws, "ecr", "{}");
    let host_key = Credentials::test().access_key;
    // (submitted with an execution role?, the password the pull sends, GetAuthorizationToken calls so far)
    let (role_key, credentials) = role_credentials(&aws);
    let mut ids = Vec::new();
    for (family, role) in [
        ("host-1", false),
        ("host-2", false),
        ("role-1", true),
        ("role-2", true),
    ] {
        let definition = with_secrets(family, ECR_IMAGE, &[]);
        let id = if role {
            submit_with_role(&setup, definition, "exec-ecr", Some(credentials.clone()))
        } else {
            setup.engine.submit(definition).expect("accepted").id
        };
        engine_events::wait_event(&setup.engine, &id, None, "RUNNING", DEADLINE);
        ids.push(id);
    }
    let pulls = setup.fake.pull_auths();
    let sent: Vec<(String, String, String)> = pulls
        .iter()
        .map(|(image, auth)| {
            assert_eq!(image, ECR_IMAGE);
            let auth = auth.clone().expect("a login");
            (auth.username, auth.password, auth.server_address)
        })
        .collect();
    let login = |n: u64| {
        (
            "AWS".to_string(),
            FakeAws::ecr_password(n),
            "https://123456789012.dkr.ecr.us-west-2.amazonaws.com".to_string(),
        )
    };
    assert_eq!(sent, [login(1), login(1), login(2), login(2)]);
    let tokens: Vec<String> = aws
        .calls()
        .into_iter()
        .filter(|call| call.operation == "GetAuthorizationToken")
        .map(|call| call.access_key)
        .collect();
    assert_eq!(tokens, [host_key, role_key]);

    // A refused login: ECS's name, and no pull.
    aws.fail_next(
        "GetAuthorizationToken",
        1,
        Fault::answer(400, "AccessDeniedException", "not authorized"),
    );
    let (_, other) = role_credentials(&aws);
    let image = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/other:1";
    let id = submit_with_role(
        &setup,
        with_secrets("refused", image, &[]),
        "exec-other",
        Some(other),
    );
    let stopped = engine_events::wait_event(&setup.engine, &id, None, "STOPPED", DEADLINE);
    let reason = stopped.reason.unwrap_or_default();
    assert!(
        reason.starts_with("CannotPullECRContainerError: container \"app\": ecr auth for ")
            && reason.contains("AccessDeniedException"),
        "{reason}"
    );
    assert_eq!(setup.fake.count(Op::Pull, image), 0);
    setup.engine.shutdown();
}

#[test]
fn an_ecr_pull_waits_for_the_execution_roles_credentials_and_pulls_with_them_once_set() {
    let aws = FakeAws::start();
    let setup = engine(&aws, "credwait", "{}");
    let (role_key, credentials) = role_credentials(&aws);
    let arn = format!(
        "arn:aws:ecs:us-west-2:123456789012:task/test-cluster/{}",
        random_hex32()
    );
    // As after a restart: the task names its execution credentials id, the store expects it,
    // and ECS has not sent the credentials again. Its sidecar (not in ECR) goes ahead.
    let definition = task(
        "credwait",
        vec![
            container("app", ECR_IMAGE),
            definitions::non_essential(container("sidecar", IMAGE)),
        ],
    );
    let ids = RoleCredentialsIds {
        task_role: None,
        execution_role: Some("exec-late".to_string()),
    };
    let id = setup
        .engine
        .submit_with_arn(definition, arn.clone(), "test".into(), ids)
        .expect("accepted")
        .id;
    engine_events::wait_event(&setup.engine, &id, Some("sidecar"), "RUNNING", DEADLINE);
    assert_eq!(
        setup.fake.count(Op::Pull, ECR_IMAGE),
        0,
        "no pull without the role"
    );
    assert!(
        aws.calls().is_empty(),
        "no login with the host's credentials instead of the role's"
    );
    let waiting = setup
        .engine
        .tasks()
        .into_iter()
        .find(|task| task.id == id)
        .expect("the task is there");
    assert_eq!(waiting.known_status, TaskStatus::None, "{waiting:?}");
    assert_eq!(waiting.desired_status, TaskStatus::Running, "not failed");

    // The credentials arrive: the wait ends at once (not after its minute) and the pull logs in
    // with the role.
    setup
        .store
        .set(&arn, RoleType::TaskExecution, "exec-late", credentials)
        .expect("set");
    engine_events::wait_event(&setup.engine, &id, None, "RUNNING", DEADLINE);
    let tokens: Vec<String> = aws
        .calls()
        .into_iter()
        .filter(|call| call.operation == "GetAuthorizationToken")
        .map(|call| call.access_key)
        .collect();
    assert_eq!(tokens, [role_key]);
    assert_eq!(setup.fake.count(Op::Pull, ECR_IMAGE), 1);

    // No ECR image: the missing credentials hold nothing back.
    let id = submit_with_role(
        &setup,
        with_secrets("not-ecr", IMAGE, &[]),
        "exec-missing",
        None,
    );
    engine_events::wait_event(&setup.engine, &id, None, "RUNNING", DEADLINE);
    setup.engine.shutdown();
}
