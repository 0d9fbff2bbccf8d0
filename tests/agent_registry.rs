//! Registry credentials in the whole agent on real Docker (§13): a local `docker-registry` behind
//! htpasswd serves an image under a repository name unique to the test (so the image is not
//! present locally before the pull), the agent runs with `ECS_IMAGE_PULL_BEHAVIOR=always` and
//! `ECS_ENGINE_AUTH_TYPE`/`ECS_ENGINE_AUTH_DATA`:
//! - `docker` with the right user and password → the task pulls and runs;
//! - `dockercfg` with the base64 of `user:password` → the task pulls and runs;
//! - a wrong password → the task stops, its reason `CannotPullContainerError: …` carries the
//!   registry's refusal;
//!
//! and in every case the password appears nowhere in the agent's log, `inspect` or the events.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;

use agent_support::{Agent, AgentOptions};
use deckhand::docker::DockerClient;
use deckhand::encoding::base64_url;
use deckhand::runtime::{ContainerRuntime, RuntimeError};
use docker_support::{
    ensure_busybox_image, push_to_registry, remove_image_tag, unique_id, write_htpasswd,
    LocalRegistry, TempDir, TEST_IMAGE,
};

const USER: &str = "deckhand";

/// A registry behind htpasswd holding one image pushed under a repository name of this test
/// alone. Dropping it removes the local tag of that image (pulled by the agent), after the
/// agent that ran it is gone (declare it before the agent).
struct PrivateImage {
    /// `127.0.0.1:<port>/deckhand/<unique>:v1`.
    reference: String,
    registry: LocalRegistry,
    password: String,
    _storage: TempDir,
    _auth: TempDir,
}

impl PrivateImage {
    fn serve(docker: &DockerClient, test: &str) -> PrivateImage {
        ensure_busybox_image(docker);
        let storage = TempDir::new("deckhand-registry-storage");
        let repository = format!("deckhand/{test}-{}", unique_id());
        // Pushed through an open registry; the same storage is then served behind htpasswd.
        {
            let open_registry = LocalRegistry::start(&storage.path, None);
            push_to_registry(
                TEST_IMAGE,
                &open_registry.address,
                &format!("{repository}:v1"),
            );
        }
        // Unique, so that finding it anywhere can only mean deckhand leaked it.
        let password = format!("Pw-{}-s3cret", unique_id());
        let auth = TempDir::new("deckhand-registry-auth");
        let htpasswd = write_htpasswd(&auth.path, USER, &password);
        let registry = LocalRegistry::start(&storage.path, Some(&htpasswd));
        let reference = format!("{}/{repository}:v1", registry.address);
        PrivateImage {
            reference,
            registry,
            password,
            _storage: storage,
            _auth: auth,
        }
    }
}

impl Drop for PrivateImage {
    fn drop(&mut self) {
        remove_image_tag(&self.reference);
    }
}

/// The `docker` form of `ECS_ENGINE_AUTH_DATA` for `registry`.
fn docker_auth_data(registry: &str, password: &str) -> String {
    format!(
        r#"{{"{registry}":{{"username":"{USER}","password":"{password}","email":"ops@example.com"}}}}"#
    )
}

/// Standard base64 (what a `.dockercfg` holds): base64url with the two differing characters
/// swapped back.
fn base64_standard(text: &str) -> String {
    base64_url(text.as_bytes())
        .replace('-', "+")
        .replace('_', "/")
}

fn start_agent(docker: DockerClient, auth_type: &str, auth_data: String) -> Agent {
    Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env: vec![
                ("ECS_IMAGE_PULL_BEHAVIOR".into(), "always".into()),
                ("ECS_ENGINE_AUTH_TYPE".into(), auth_type.into()),
                ("ECS_ENGINE_AUTH_DATA".into(), auth_data),
            ],
        },
    )
}

fn definition(family: &str, image: &str) -> String {
    format!(
        r#"{{"family": "{family}",
            "containerDefinitions": [{{
              "name": "app", "image": "{image}", "essential": true,
              "command": ["sh", "-c", "exec sleep 600"], "stopTimeout": 1
            }}]}}"#
    )
}

fn assert_absent_locally(docker: &DockerClient, image: &str) {
    match docker.inspect_image(image) {
        Err(RuntimeError::NoSuchImage { .. }) => {}
        other => panic!("{image} must not be present before the pull: {other:?}"),
    }
}

/// The password is in none of: the agent's log, the task's `inspect`, the event log.
fn assert_password_nowhere(agent: &Agent, task: &str, password: &str) {
    let log = agent.log().join("\n");
    assert!(
        !log.contains(password),
        "the agent's log shows the password:\n{log}"
    );
    let inspect = agent.inspect(task).to_string();
    assert!(
        !inspect.contains(password),
        "inspect shows the password: {inspect}"
    );
    let events = agent.request("GET", "/v1/events?since=0", None);
    assert_eq!(events.status, 200, "{:?}", events.body);
    let events = events.body.to_string();
    assert!(
        !events.contains(password),
        "the events show the password: {events}"
    );
}

fn runs_with_credentials(test: &str, auth_type: &str, auth_data: impl Fn(&PrivateImage) -> String) {
    let Some(docker) = docker_support::docker_client_or_skip(test) else {
        return;
    };
    let image = PrivateImage::serve(&docker, test);
    assert_absent_locally(&docker, &image.reference);
    let agent = start_agent(docker, auth_type, auth_data(&image));
    let line = agent.wait_for_log("registry credentials for ");
    assert!(line.contains(&image.registry.address), "{line}");

    let task = agent.submit(&definition(test, &image.reference));
    let running = agent.wait_for_event(|event| {
        event.task == task && event.container.is_none() && event.status != "PENDING"
    });
    assert_eq!(
        running.status,
        "RUNNING",
        "the task must pull with the credentials and run: {running:?}\n{}",
        agent.inspect(&task)
    );
    let pulled = agent
        .docker
        .inspect_image(&image.reference)
        .expect("the agent pulled the image");
    assert!(pulled.repo_tags.contains(&image.reference), "{pulled:?}");
    assert_password_nowhere(&agent, &task, &image.password);
    drop(agent);
}

#[test]
fn docker_credentials_let_a_task_pull_from_a_private_registry() {
    runs_with_credentials("registry-docker", "docker", |image| {
        docker_auth_data(&image.registry.address, &image.password)
    });
}

#[test]
fn dockercfg_credentials_let_a_task_pull_from_a_private_registry() {
    runs_with_credentials("registry-dockercfg", "dockercfg", |image| {
        // The key as `docker login` wrote it into a .dockercfg: a scheme and an API path.
        format!(
            r#"{{"http://{}/v1/":{{"auth":"{}","email":"ops@example.com"}}}}"#,
            image.registry.address,
            base64_standard(&format!("{USER}:{}", image.password))
        )
    });
}

#[test]
fn a_wrong_password_stops_the_task_with_the_registrys_refusal_and_shows_no_password() {
    let test = "registry-wrong";
    let Some(docker) = docker_support::docker_client_or_skip(test) else {
        return;
    };
    let image = PrivateImage::serve(&docker, test);
    assert_absent_locally(&docker, &image.reference);
    let wrong_password = format!("Wrong-{}-pw", unique_id());
    let agent = start_agent(
        docker,
        "docker",
        docker_auth_data(&image.registry.address, &wrong_password),
    );

    let task = agent.submit(&definition(test, &image.reference));
    let stopped = agent.wait_for_task_status(&task, "STOPPED");
    let container = agent.wait_for_event(|event| {
        event.task == task && event.container.as_deref() == Some("app") && event.status == "STOPPED"
    });
    let reason = container.reason.clone().unwrap_or_default();
    // ECS's name for a failed pull, then the registry's own words.
    assert!(
        reason.starts_with("CannotPullContainerError: "),
        "a refused pull is named as ECS names it: {reason:?}"
    );
    assert!(
        [
            "unauthorized",
            "authentication required",
            "no basic auth credentials"
        ]
        .iter()
        .any(|words| reason.contains(words)),
        "the reason must carry the registry's refusal: {container:?} (task: {stopped:?})"
    );
    eprintln!("the reason of a refused pull: {reason}");
    assert!(!reason.contains(&wrong_password), "{reason}");
    assert_absent_locally(&agent.docker, &image.reference);
    assert_password_nowhere(&agent, &task, &wrong_password);
    assert_password_nowhere(&agent, &task, &image.password);
    drop(agent);
}
