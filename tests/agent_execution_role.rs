//! The execution role in the whole agent on real Docker, against the fake ECS of
//! `tests/support/fake_ecs.rs` and the fake STS/SSM/Secrets Manager/ECR of
//! `tests/support/fake_aws.rs` (SigV4 checked, reached through `AWS_ENDPOINT_URL`):
//!
//! - a payload task with `executionRoleCredentials` gets SSM parameters (by name and by ARN) and
//!   Secrets Manager secrets (whole, and a JSON key of one) in its container's environment, each
//!   call signed with the execution role; a parameter SSM does not have and a secret Secrets
//!   Manager does not have stop their tasks with `ResourceInitializationError` in ECS's words;
//! - an image named in ECR (`<account>.dkr.ecr.<region>.amazonaws.com:<port>/…`, the host name
//!   mapped to 127.0.0.1 in `/etc/hosts` for the test, so Docker takes it as an insecure local
//!   registry) is pulled from a local `docker-registry` behind htpasswd with the login of
//!   `GetAuthorizationToken`, signed with the execution role; a second task with the same
//!   credentials is pulled with the kept login (ECR is not asked again); a refused
//!   `GetAuthorizationToken` stops its task with `CannotPullECRContainerError`;
//! - no value, key, token or password the fakes handed out is in the data directory, the agent's
//!   log, `deckhand inspect`, the API's task views or the events.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;
#[path = "support/fake_aws.rs"]
mod fake_aws;
#[path = "support/fake_ecs.rs"]
mod fake_ecs;

use agent_support::{contains, files_under, Agent, AgentOptions};
use docker_support::{
    ensure_busybox_image, push_to_registry, remove_image_tag, write_htpasswd, LocalRegistry,
    TempDir, TEST_IMAGE,
};
use fake_aws::{FakeAws, Fault, SecretVersion};
use fake_ecs::{acs_container, acs_task, random_hex32, task_arn, Credentials, FakeEcs};
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};

const REGION: &str = "us-west-2";
const ECR_HOST: &str = "123456789012.dkr.ecr.us-west-2.amazonaws.com";

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(90)
}

/// A fake ECS, a fake AWS, and an agent joined to the one and calling the other.
fn agents(test: &str) -> Option<(FakeEcs, FakeAws, Agent)> {
    let docker = docker_support::docker_client_or_skip(test)?;
    let fake = FakeEcs::start();
    let aws = FakeAws::start();
    let cluster = format!("ecs-{}", &random_hex32()[..12]);
    let extra_env: Vec<(String, String)> = [
        fake.agent_env(&cluster),
        vec![
            ("AWS_ENDPOINT_URL".into(), aws.endpoint()),
            ("ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION".into(), "1h".into()),
            // Every line the agent can write, so the leak check reads them all.
            ("ECS_LOGLEVEL".into(), "debug".into()),
        ],
    ]
    .concat();
    let mut agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env,
        },
    );
    agent.cluster = cluster;
    fake.wait_for_acs_session(1, deadline());
    Some((fake, aws, agent))
}

/// Fresh execution-role credentials under a new id, which the fake AWS accepts; their key,
/// secret and token are added to `handed_out`.
fn execution_credentials(aws: &FakeAws, handed_out: &mut Vec<String>) -> Value {
    let (key, secret, token) = (
        format!("ASIA{}", &random_hex32()[..16].to_uppercase()),
        format!("secret{}", random_hex32()),
        format!("token{}", random_hex32()),
    );
    aws.accept_credentials(Credentials {
        access_key: key.clone(),
        secret_key: secret.clone(),
        session_token: Some(token.clone()),
    });
    handed_out.extend([key.clone(), secret.clone(), token.clone()]);
    json!({"credentialsId": format!("exec-{}", random_hex32()), "accessKeyId": key,
           "secretAccessKey": secret, "sessionToken": token, "expiration": "2026-12-31T00:00:00Z",
           "roleArn": "arn:aws:iam::123456789012:role/exec", "credentialScope": "task"})
}

fn secret(name: &str, value_from: &str) -> Value {
    json!({"name": name, "valueFrom": value_from, "type": "ENVIRONMENT_VARIABLE"})
}

/// A payload task of one container running `image`, with the execution role and `secrets`.
fn task(cluster: &str, image: &str, credentials: &Value, secrets: Vec<Value>) -> (String, Value) {
    let arn = task_arn(cluster);
    let mut container = acs_container("app", image, &["sleep", "3600"], true, &[]);
    container["secrets"] = Value::Array(secrets);
    let mut task = acs_task(&arn, "exec-role", "RUNNING", vec![container]);
    task["executionRoleCredentials"] = credentials.clone();
    (arn, task)
}

fn container_of(arn: &str) -> String {
    let output = Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=com.amazonaws.ecs.task-arn={arn}"),
        ])
        .output()
        .expect("docker ps");
    let ids = String::from_utf8_lossy(&output.stdout).trim().to_string();
    assert!(
        !ids.is_empty() && !ids.contains('\n'),
        "one container: {ids:?}"
    );
    ids
}

fn environment_of(docker_id: &str) -> Vec<String> {
    let output = Command::new("docker")
        .args(["inspect", "--format", "{{json .Config.Env}}", docker_id])
        .output()
        .expect("docker inspect");
    serde_json::from_slice(&output.stdout).unwrap_or_default()
}

/// The STOPPED reason ECS was told for task `arn`.
fn stopped_reason(fake: &FakeEcs, arn: &str) -> String {
    fake.wait_for_task_state(arn, "STOPPED", deadline())
        .reason
        .unwrap_or_default()
}

/// None of `handed_out` is in the data directory, the agent's log, `deckhand inspect` of the
/// tasks, the API's task views or the events.
fn assert_nowhere(agent: &Agent, arns: &[&str], handed_out: &[String]) {
    let mut places: Vec<(String, Vec<u8>)> = Vec::new();
    files_under(&agent.directory.path.join("data"), &mut places);
    assert!(!places.is_empty(), "the data directory has files");
    places.push((
        "the agent's log".into(),
        agent.log().join("\n").into_bytes(),
    ));
    for target in ["/v1/tasks", "/v1/events?since=0"] {
        let response = agent.request("GET", target, None);
        places.push((target.to_string(), response.body.to_string().into_bytes()));
    }
    for arn in arns {
        let task_id = arn.rsplit('/').next().unwrap_or_default();
        let output = agent.cli(&["inspect", task_id]);
        places.push((format!("deckhand inspect {task_id}"), output.stdout));
    }
    for (place, bytes) in &places {
        for secret in handed_out {
            assert!(
                !contains(bytes, secret),
                "{place} holds a secret the fakes handed out"
            );
        }
    }
}

#[test]
fn ssm_and_secrets_manager_values_reach_the_containers_environment_and_nothing_else() {
    let Some((fake, aws, agent)) = agents("agent execution role secrets") else {
        return;
    };
    ensure_busybox_image(&agent.docker);
    let image = TEST_IMAGE.to_string();
    let mut handed_out = Vec::new();
    let credentials = execution_credentials(&aws, &mut handed_out);
    let access_key = credentials["accessKeyId"].as_str().unwrap_or_default();

    let values: Vec<String> = (0..4)
        .map(|n| format!("value{n}-{}", random_hex32()))
        .collect();
    handed_out.extend(values.iter().cloned());
    aws.put_parameter("/app/db-user", &values[0]);
    aws.put_parameter("plain", &values[1]);
    aws.put_secret(
        "app/db",
        vec![SecretVersion {
            version_id: "v1".into(),
            stages: vec!["AWSCURRENT".into()],
            value: Ok(json!({"password": values[2], "port": 5432}).to_string()),
        }],
    );
    aws.put_secret(
        "app/token",
        vec![SecretVersion {
            version_id: "v1".into(),
            stages: vec!["AWSCURRENT".into()],
            value: Ok(values[3].clone()),
        }],
    );
    let db_arn = FakeAws::secret_arn(REGION, "app/db");
    let secrets = vec![
        secret("DB_USER", "/app/db-user"),
        secret("PLAIN", &FakeAws::parameter_arn(REGION, "plain")),
        secret("DB_PASSWORD", &format!("{db_arn}:password::")),
        secret("DB_PORT", &format!("{db_arn}:port:AWSCURRENT:")),
        secret("TOKEN", &FakeAws::secret_arn(REGION, "app/token")),
    ];
    let (arn, payload) = task(&agent.cluster, &image, &credentials, secrets);
    fake.send_payload(json!([payload]), 1);
    fake.wait_for_task_state(&arn, "RUNNING", deadline());
    let environment = environment_of(&container_of(&arn));
    for expected in [
        format!("DB_USER={}", values[0]),
        format!("PLAIN={}", values[1]),
        format!("DB_PASSWORD={}", values[2]),
        "DB_PORT=5432".to_string(),
        format!("TOKEN={}", values[3]),
    ] {
        assert!(
            environment.contains(&expected),
            "{expected} in {environment:?}"
        );
    }
    // Every call signed with the execution role; the two parameters in one GetParameters.
    let calls = aws.calls();
    let parameters: Vec<_> = calls
        .iter()
        .filter(|call| call.operation == "GetParameters")
        .collect();
    assert_eq!(parameters.len(), 1, "{calls:?}");
    assert_eq!(parameters[0].request["WithDecryption"], true);
    assert_eq!(
        parameters[0].request["Names"].as_array().map(Vec::len),
        Some(2)
    );
    assert!(
        calls
            .iter()
            .all(|call| call.access_key == access_key && call.status == 200),
        "{calls:?}"
    );

    // What SSM or Secrets Manager lacks stops its task, in ECS's words.
    let (missing_parameter, payload) = task(
        &agent.cluster,
        &image,
        &credentials,
        vec![secret("GONE", "/app/not-there")],
    );
    fake.send_payload(json!([payload]), 2);
    let reason = stopped_reason(&fake, &missing_parameter);
    assert!(
        reason.starts_with("ResourceInitializationError")
            && reason.contains("fetching secret data from SSM Parameter Store in us-west-2")
            && reason.contains("invalid parameters: /app/not-there"),
        "{reason}"
    );
    let gone = FakeAws::secret_arn(REGION, "app/gone");
    let (missing_secret, payload) = task(
        &agent.cluster,
        &image,
        &credentials,
        vec![secret("GONE", &gone)],
    );
    fake.send_payload(json!([payload]), 3);
    let reason = stopped_reason(&fake, &missing_secret);
    assert!(
        reason.starts_with("ResourceInitializationError")
            && reason.contains(&format!(
                "trying to retrieve secret with value {gone} resulted in error"
            ))
            && reason.contains("ResourceNotFoundException"),
        "{reason}"
    );

    assert_nowhere(
        &agent,
        &[&arn, &missing_parameter, &missing_secret],
        &handed_out,
    );
}

/// Maps [`ECR_HOST`] to 127.0.0.1 in `/etc/hosts` while it lives (the line is removed again
/// when this added it), so Docker reaches the local registry under an ECR name and no packet
/// leaves the machine.
struct EcrHostMapping {
    added: bool,
}

const HOSTS_LINE: &str = "127.0.0.1 123456789012.dkr.ecr.us-west-2.amazonaws.com";

impl EcrHostMapping {
    fn install() -> EcrHostMapping {
        let hosts = std::fs::read_to_string("/etc/hosts").expect("read /etc/hosts");
        if hosts.lines().any(|line| line.trim() == HOSTS_LINE) {
            return EcrHostMapping { added: false };
        }
        let mut text = hosts;
        if !text.ends_with('\n') && !text.is_empty() {
            text.push('\n');
        }
        text.push_str(HOSTS_LINE);
        text.push('\n');
        // In place: /etc/hosts may be a bind mount that a rename would not replace.
        std::fs::write("/etc/hosts", text).expect("write /etc/hosts (the test runs as root)");
        EcrHostMapping { added: true }
    }
}

impl Drop for EcrHostMapping {
    fn drop(&mut self) {
        if !self.added {
            return;
        }
        if let Ok(hosts) = std::fs::read_to_string("/etc/hosts") {
            let kept: String = hosts
                .lines()
                .filter(|line| line.trim() != HOSTS_LINE)
                .map(|line| format!("{line}\n"))
                .collect();
            let _ = std::fs::write("/etc/hosts", kept);
        }
    }
}

/// Waits until Docker's daemon resolves [`ECR_HOST`] through the mapping: it may keep reading
/// an `/etc/hosts` it read a moment before the mapping was written (Go's resolver caches the
/// file for 5 s). A pull without a login is refused by the registry once the name resolves.
fn wait_until_docker_resolves_the_ecr_host(port: &str) {
    let probe = format!("{ECR_HOST}:{port}/team/resolve-probe:none");
    let until = deadline();
    loop {
        let output = Command::new("docker")
            .args(["pull", &probe])
            .output()
            .expect("run docker pull");
        let said = String::from_utf8_lossy(&output.stderr).into_owned();
        if !said.contains("no such host") {
            return;
        }
        assert!(
            Instant::now() < until,
            "Docker never resolved {ECR_HOST}: {said}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn an_ecr_image_is_pulled_with_the_execution_roles_login_kept_until_it_expires() {
    let Some((fake, aws, agent)) = agents("agent execution role ECR") else {
        return;
    };
    ensure_busybox_image(&agent.docker);
    let image = TEST_IMAGE.to_string();
    let _mapping = EcrHostMapping::install();
    // Pushed through an open registry; the same storage is then served behind htpasswd with
    // the user and password of the fake's first ECR token.
    let storage = TempDir::new("dh-ecr-storage");
    let repository = format!("team/app-{}:v1", &random_hex32()[..8]);
    {
        let open = LocalRegistry::start(&storage.path, None);
        push_to_registry(&image, &open.address, &repository);
    }
    let auth = TempDir::new("dh-ecr-auth");
    let password = FakeAws::ecr_password(1);
    let htpasswd = write_htpasswd(&auth.path, "AWS", &password);
    let registry = LocalRegistry::start(&storage.path, Some(&htpasswd));
    let port = registry.address.rsplit(':').next().unwrap_or_default();
    let ecr_image = format!("{ECR_HOST}:{port}/{repository}");
    wait_until_docker_resolves_the_ecr_host(port);

    let mut handed_out = vec![password.clone()];
    let credentials = execution_credentials(&aws, &mut handed_out);
    let access_key = credentials["accessKeyId"].as_str().unwrap_or_default();
    let (first, payload) = task(&agent.cluster, &ecr_image, &credentials, Vec::new());
    fake.send_payload(json!([payload]), 1);
    let running =
        std::panic::catch_unwind(|| fake.wait_for_task_state(&first, "RUNNING", deadline()));
    if running.is_err() {
        panic!("not running; log:\n{}", agent.log().join("\n"));
    }
    let tokens: Vec<_> = aws
        .calls()
        .into_iter()
        .filter(|call| call.operation == "GetAuthorizationToken")
        .collect();
    assert_eq!(tokens.len(), 1, "{tokens:?}");
    assert_eq!(tokens[0].access_key, access_key);
    assert_eq!(tokens[0].region, REGION);
    assert_eq!(tokens[0].request["registryIds"], json!(["123456789012"]));

    // The same role pulls again with the kept login.
    let (second, payload) = task(&agent.cluster, &ecr_image, &credentials, Vec::new());
    fake.send_payload(json!([payload]), 2);
    fake.wait_for_task_state(&second, "RUNNING", deadline());
    assert_eq!(aws.statuses("GetAuthorizationToken"), [200], "asked once");

    // Another role whose login ECR refuses: the task stops with ECS's name for it.
    let refused = execution_credentials(&aws, &mut handed_out);
    aws.fail_next(
        "GetAuthorizationToken",
        1,
        Fault::answer(
            400,
            "AccessDeniedException",
            "not authorized to perform ecr:GetAuthorizationToken",
        ),
    );
    let other_image = format!("{ECR_HOST}:{port}/team/absent-{}:v1", &random_hex32()[..8]);
    let (third, payload) = task(&agent.cluster, &other_image, &refused, Vec::new());
    fake.send_payload(json!([payload]), 3);
    let reason = stopped_reason(&fake, &third);
    assert!(
        reason.starts_with("CannotPullECRContainerError")
            && reason.contains("AccessDeniedException"),
        "{reason}"
    );

    let docker_inspected = Command::new("docker")
        .args(["inspect", &container_of(&first)])
        .output()
        .expect("docker inspect");
    assert!(
        !contains(&docker_inspected.stdout, &password),
        "docker inspect shows the password"
    );
    assert_nowhere(&agent, &[&first, &second, &third], &handed_out);
    drop(agent);
    remove_image_tag(&ecr_image);
}
