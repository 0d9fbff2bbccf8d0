use super::*;

fn credentials(key: &str) -> RoleCredentials {
    RoleCredentials {
        access_key_id: format!("AKIA{key}"),
        secret_access_key: format!("secret-{key}"),
        session_token: format!("token-{key}"),
        expiration: "2026-12-05T03:00:00Z".into(),
        role_arn: "arn:aws:iam::123456789012:role/app".into(),
    }
}

const TASK: &str = "arn:aws:ecs:eu-west-1:123456789012:task/c/0123";
const OTHER: &str = "arn:aws:ecs:eu-west-1:123456789012:task/c/4567";

fn is_ready(lookup: &CredentialsLookup, key: &str) -> bool {
    matches!(lookup, CredentialsLookup::Ready { credentials: c, .. } if c.access_key_id == format!("AKIA{key}"))
}

#[test]
fn an_id_is_unknown_then_pending_then_ready_then_forgotten() {
    let store = CredentialsStore::new();
    assert_eq!(store.lookup("id-1"), CredentialsLookup::Unknown);
    store.expect(TASK, RoleType::TaskApplication, "id-1");
    assert_eq!(store.lookup("id-1"), CredentialsLookup::Pending);
    store.set(TASK, RoleType::TaskApplication, "id-1", credentials("1")).expect("set");
    assert!(is_ready(&store.lookup("id-1"), "1"));
    // Expecting it again (a restore, a re-delivered payload) keeps what arrived.
    store.expect(TASK, RoleType::TaskApplication, "id-1");
    assert!(is_ready(&store.lookup("id-1"), "1"));
    // A refresh replaces them.
    store.set(TASK, RoleType::TaskApplication, "id-1", credentials("2")).expect("set");
    assert!(is_ready(&store.lookup("id-1"), "2"));
    store.forget_task(TASK);
    assert_eq!(store.lookup("id-1"), CredentialsLookup::Unknown);
    assert!(store.is_empty());
}

#[test]
fn set_refuses_what_the_ecs_agent_refuses() {
    let store = CredentialsStore::new();
    // (task ARN, id, expected)
    let table = [
        (TASK, "", Err(StoreError::EmptyCredentialsId)),
        ("", "id", Err(StoreError::EmptyTaskArn)),
        (TASK, "id", Ok(())),
    ];
    for (task, id, expected) in table {
        assert_eq!(store.set(task, RoleType::TaskExecution, id, credentials("x")), expected, "{task:?} {id:?}");
    }
    assert_eq!(StoreError::EmptyCredentialsId.to_string(), "CredentialsId is empty");
}

#[test]
fn a_task_finds_its_credentials_by_role_the_newest_id_first() {
    let store = CredentialsStore::new();
    store.expect(TASK, RoleType::TaskApplication, "app-1");
    store.expect(TASK, RoleType::TaskExecution, "exec-1");
    assert_eq!(store.task_credentials(TASK, RoleType::TaskApplication), None, "pending");
    store.set(TASK, RoleType::TaskExecution, "exec-1", credentials("e")).expect("set");
    store.set(OTHER, RoleType::TaskApplication, "other", credentials("o")).expect("set");
    let execution = store.task_credentials(TASK, RoleType::TaskExecution).expect("execution");
    assert_eq!(execution.credentials_id, "exec-1");
    assert_eq!(execution.credentials, credentials("e"));
    assert_eq!(store.task_credentials(TASK, RoleType::TaskApplication), None);
    // A refresh under a new id: the task's newest id answers, the old one is still served.
    store.set(TASK, RoleType::TaskExecution, "exec-2", credentials("f")).expect("set");
    assert_eq!(store.task_credentials(TASK, RoleType::TaskExecution).map(|c| c.credentials_id), Some("exec-2".into()));
    assert!(is_ready(&store.lookup("exec-1"), "e"));
    store.forget_role(TASK, RoleType::TaskExecution);
    assert_eq!(store.lookup("exec-2"), CredentialsLookup::Unknown);
    assert_eq!(store.lookup("app-1"), CredentialsLookup::Pending);
    assert!(is_ready(&store.lookup("other"), "o"), "another task's ids stay");
}

#[test]
fn an_id_another_task_names_changes_owner_and_loses_its_credentials() {
    let store = CredentialsStore::new();
    store.set(TASK, RoleType::TaskApplication, "shared", credentials("1")).expect("set");
    store.expect(OTHER, RoleType::TaskApplication, "shared");
    assert_eq!(store.lookup("shared"), CredentialsLookup::Pending);
    store.forget_task(TASK);
    assert_eq!(store.lookup("shared"), CredentialsLookup::Pending, "now the other task's");
}

#[test]
fn states_show_everything_but_the_credentials_and_failures_until_set_again() {
    let store = CredentialsStore::new();
    store.expect(TASK, RoleType::TaskExecution, "exec");
    store.record_failure(TASK, RoleType::TaskExecution, "exec", "AccessDenied: not authorized");
    store.set(TASK, RoleType::TaskApplication, "app", credentials("1")).expect("set");
    let states = store.states(TASK);
    assert_eq!(
        states,
        [
            CredentialsState {
                role: RoleType::TaskApplication,
                credentials_id: "app".into(),
                ready: true,
                role_arn: Some("arn:aws:iam::123456789012:role/app".into()),
                expiration: Some("2026-12-05T03:00:00Z".into()),
                failure: None,
            },
            CredentialsState {
                role: RoleType::TaskExecution,
                credentials_id: "exec".into(),
                ready: false,
                role_arn: None,
                expiration: None,
                failure: Some("AccessDenied: not authorized".into()),
            },
        ]
    );
    assert_eq!(store.lookup("exec"), CredentialsLookup::Pending, "a failure is still pending");
    store.set(TASK, RoleType::TaskExecution, "exec", credentials("2")).expect("set");
    assert_eq!(store.states(TASK)[1].failure, None);
    assert!(store.states(OTHER).is_empty());
}

#[test]
fn debug_output_never_shows_a_key_secret_or_token() {
    let store = CredentialsStore::new();
    store.set(TASK, RoleType::TaskApplication, "app", credentials("SECRETKEY")).expect("set");
    let lookup = store.lookup("app");
    let identified = store.task_credentials(TASK, RoleType::TaskApplication).expect("there");
    for shown in [format!("{lookup:?}"), format!("{identified:?}"), format!("{store:?}"), format!("{:#?}", credentials("SECRETKEY"))] {
        for secret in ["AKIASECRETKEY", "secret-SECRETKEY", "token-SECRETKEY"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }
    assert!(format!("{lookup:?}").contains("2026-12-05T03:00:00Z"));
}

#[test]
fn the_endpoint_json_has_the_ecs_agents_names() {
    assert_eq!(
        credentials("1").endpoint_json(),
        json!({
            "RoleArn": "arn:aws:iam::123456789012:role/app",
            "AccessKeyId": "AKIA1",
            "SecretAccessKey": "secret-1",
            "Token": "token-1",
            "Expiration": "2026-12-05T03:00:00Z",
        })
    );
    assert_eq!(relative_uri("abc"), "/v2/credentials/abc");
}

#[test]
fn acs_credentials_are_read_checked_and_never_quoted_in_an_error() {
    let full = json!({"credentialsId": "id-1", "accessKeyId": "AKIAX", "secretAccessKey": "sx",
                      "sessionToken": "tx", "expiration": "2026-12-05T03:00:00Z",
                      "roleArn": "arn:aws:iam::1:role/r", "credentialScope": "task"});
    let read = parse_acs_credentials(&full).expect("read");
    assert_eq!(read.credentials_id, "id-1");
    assert_eq!(read.credentials.access_key_id, "AKIAX");
    assert_eq!(read.credentials.secret_access_key, "sx");
    assert_eq!(read.credentials.session_token, "tx");
    assert_eq!(read.credentials.role_arn, "arn:aws:iam::1:role/r");
    let minimal = parse_acs_credentials(&json!({"credentialsId": "id-2"})).expect("read");
    assert_eq!(minimal.credentials.expiration, "");
    // (input, error)
    let table = [
        (json!("id"), "expected an object"),
        (json!({}), "credentialsId: required"),
        (json!({"credentialsId": null}), "credentialsId: required"),
        (json!({"credentialsId": 7}), "credentialsId: expected a string"),
        (json!({"credentialsId": "a/b"}), "credentialsId: not a credentials id"),
        (json!({"credentialsId": "a b"}), "credentialsId: not a credentials id"),
        (json!({"credentialsId": "a%2F"}), "credentialsId: not a credentials id"),
        (json!({"credentialsId": "x".repeat(257)}), "credentialsId: not a credentials id"),
        (json!({"credentialsId": "id", "secretAccessKey": ["SECRETVALUE"]}), "secretAccessKey: expected a string"),
        (json!({"credentialsId": "id", "sessionToken": "SECRETVALUE".repeat(2000)}), "sessionToken: too long"),
    ];
    for (input, expected) in table {
        let error = parse_acs_credentials(&input).expect_err("refused");
        assert!(error.starts_with(expected), "{input}: {error}");
        assert!(!error.contains("SECRETVALUE"), "{error}");
    }
}

#[test]
fn role_types_have_ecs_names() {
    for role in RoleType::ALL {
        assert_eq!(RoleType::from_ecs_name(role.as_str()), Some(role));
    }
    assert_eq!(RoleType::from_ecs_name("TaskApplication"), Some(RoleType::TaskApplication));
    assert_eq!(RoleType::from_ecs_name("taskapplication"), None);
}

#[test]
fn new_ids_are_32_hex_characters_and_differ() {
    let first = new_credentials_id().expect("id");
    let second = new_credentials_id().expect("id");
    assert_eq!(first.len(), 32);
    assert!(first.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    assert!(valid_credentials_id(&first));
    assert_ne!(first, second);
}

#[test]
fn the_store_is_shared_across_clones_and_threads() {
    let store = CredentialsStore::new();
    let writers: Vec<_> = (0..4)
        .map(|n| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..50 {
                    let id = format!("id-{n}-{i}");
                    store.expect(TASK, RoleType::TaskApplication, &id);
                    store.set(TASK, RoleType::TaskApplication, &id, credentials("t")).expect("set");
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("joined");
    }
    assert_eq!(store.len(), 200);
    store.forget_task(TASK);
    assert!(store.is_empty());
}

#[test]
fn update_known_sets_or_fails_only_an_id_a_task_still_names() {
    let store = CredentialsStore::new();
    assert!(!store.update_known("gone", Ok(credentials("k1"))));
    assert_eq!(store.lookup("gone"), CredentialsLookup::Unknown, "an unknown id is not made up");
    store.expect("arn:task", RoleType::TaskApplication, "id");
    assert!(store.update_known("id", Err("STS AssumeRole refused".into())));
    assert_eq!(store.lookup("id"), CredentialsLookup::Pending);
    assert_eq!(store.states("arn:task")[0].failure.as_deref(), Some("STS AssumeRole refused"));
    assert!(store.update_known("id", Ok(credentials("k1"))));
    assert!(is_ready(&store.lookup("id"), "k1"));
    assert_eq!(store.states("arn:task")[0].failure, None);
    assert!(store.update_known("id", Err("later".into())));
    assert!(is_ready(&store.lookup("id"), "k1"), "earlier credentials are still served");
    store.forget_task("arn:task");
    assert!(!store.update_known("id", Ok(credentials("k2"))));
    assert!(store.is_empty());
}

#[test]
fn a_watcher_hears_once_when_its_ids_credentials_are_set_and_lets_go_when_the_id_is_forgotten() {
    use crossbeam_channel::TryRecvError;
    let store = CredentialsStore::new();
    store.expect(TASK, RoleType::TaskExecution, "exec-1");
    store.expect(OTHER, RoleType::TaskExecution, "exec-2");
    let watch = store.watch("exec-1");
    let other = store.watch("exec-2");
    assert!(!store.is_ready("exec-1"));
    assert_eq!(watch.try_recv(), Err(TryRecvError::Empty));
    // Another id's credentials: not this watcher's business.
    store.set(OTHER, RoleType::TaskExecution, "exec-3", credentials("3")).expect("set");
    assert_eq!(watch.try_recv(), Err(TryRecvError::Empty));
    store.set(TASK, RoleType::TaskExecution, "exec-1", credentials("1")).expect("set");
    assert!(store.is_ready("exec-1"));
    assert_eq!(watch.try_recv(), Ok(()));
    assert_eq!(watch.try_recv(), Err(TryRecvError::Disconnected));
    // Already there: told at once.
    assert_eq!(store.watch("exec-1").try_recv(), Ok(()));
    // Forgotten before its credentials came: the watcher is let go.
    store.forget_task(OTHER);
    assert_eq!(other.try_recv(), Err(TryRecvError::Disconnected));
}
