//! Image cleanup in the whole agent on real Docker (docs/ENGINE.md §15): with short settings from
//! the environment, an image a task used is removed once that task is cleaned up, while an
//! image a `tasks.d` file names — even a file that is not a valid task yet — is kept after its
//! task is cleaned up too. The images are built for this test (`FROM` the busybox test image
//! with a label of the test's own, so each has an id of its own) and removed at its end; this
//! agent's cleanup sees untracked images as never removable (untracked cleanup stays off), so
//! it touches only images its own tasks used.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;

use agent_support::{Agent, AgentOptions};
use deckhand::runtime::{ContainerRuntime, RuntimeError};
use docker_support::{remove_image_tag, unique_id, TEST_IMAGE};
use std::io::Write;
use std::process::{Command, Stdio};

/// Builds `name` from the test image with a label that makes its id its own.
fn build_image(name: &str) {
    let mut child = Command::new("docker")
        .args(["build", "-q", "-t", name, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot run docker build: {error}"));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(format!("FROM {TEST_IMAGE}\nLABEL deckhand-test-image={name}\n").as_bytes())
        .expect("write the Dockerfile");
    let output = child.wait_with_output().expect("docker build");
    assert!(
        output.status.success(),
        "docker build of {name} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The agent's `/metrics` page, over its introspection listener.
fn metrics_page(agent: &Agent) -> String {
    use std::io::{Read, Write};
    let address = agent.introspection.expect("introspection on");
    let mut stream = std::net::TcpStream::connect(address).expect("connect to introspection");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .expect("read timeout");
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .expect("send GET /metrics");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read /metrics");
    answer
}

fn serving_definition(family: &str, image: &str) -> String {
    format!(
        r#"{{"family": "{family}", "containerDefinitions": [{{"name": "app", "image": "{image}",
            "memory": 32, "stopTimeout": 2,
            "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]}}]}}"#
    )
}

/// Removes the test's images when it ends, whatever happened.
struct Images(Vec<String>);

impl Drop for Images {
    fn drop(&mut self) {
        for image in &self.0 {
            remove_image_tag(image);
        }
    }
}

#[test]
fn a_used_image_is_removed_after_its_task_and_a_declared_one_is_kept() {
    let Some(docker) = docker_support::docker_client_or_skip("agent image cleanup") else {
        return;
    };
    docker_support::ensure_busybox_image(&docker);
    let unique = unique_id();
    let used = format!("dh-imgclean-{unique}-used:v1");
    let declared = format!("dh-imgclean-{unique}-declared:v1");
    let _images = Images(vec![used.clone(), declared.clone()]);
    build_image(&used);
    build_image(&declared);

    let agent = Agent::start(
        docker.clone(),
        AgentOptions {
            extra_env: vec![
                // Cleanup is off under prefer-cached (as in ECS); the pull of a name no
                // registry has fails at once and the local image is used.
                ("ECS_IMAGE_PULL_BEHAVIOR".into(), "default".into()),
                ("ECS_IMAGE_CLEANUP_INTERVAL".into(), "300ms".into()),
                ("ECS_IMAGE_MINIMUM_CLEANUP_AGE".into(), "1ms".into()),
                ("ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION".into(), "1s".into()),
            ],
            ..AgentOptions::default()
        },
    );
    agent.wait_for_log("ECS_IMAGE_CLEANUP_INTERVAL: 300ms is below the ECS agent's minimum 10m");
    agent.wait_for_log("image cleanup every 0.3s");
    // Not a valid task (no container name): it starts nothing, and still protects its image.
    std::fs::write(
        agent.tasks_dir.join("declared.json"),
        format!(r#"{{"family": "declared", "containerDefinitions": [{{"image": "{declared}"}}]}}"#),
    )
    .expect("write the tasks.d file");

    let declared_task = agent.submit(&serving_definition("imgclean-declared", &declared));
    let used_task = agent.submit(&serving_definition("imgclean-used", &used));
    agent.wait_for_task_status(&declared_task, "RUNNING");
    agent.wait_for_task_status(&used_task, "RUNNING");
    // The declared image's task is cleaned up first, so the cycle that removes the used image
    // has the declared one before it as well, free and old enough.
    for task in [&declared_task, &used_task] {
        let output = agent.cli(&["stop", "--wait", task]);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        agent.wait_for_log(&format!("task {task}: cleaned up and forgotten"));
    }
    let line = agent.wait_for_log(&format!("image cleanup: removed image {used}"));
    assert!(line.contains("bytes"), "{line}");
    assert!(line.contains("none holds it"), "{line}");
    // The removal is counted on the metrics page, with the disk share last sampled.
    let page = metrics_page(&agent);
    let removed = page
        .lines()
        .find_map(|line| line.strip_prefix("deckhand_images_removed_total "))
        .and_then(|value| value.parse::<f64>().ok());
    assert!(removed.is_some_and(|removed| removed >= 1.0), "{page}");
    let disk = page
        .lines()
        .find_map(|line| line.strip_prefix("deckhand_image_disk_used_ratio "))
        .and_then(|value| value.parse::<f64>().ok());
    assert!(disk.is_some_and(|disk| disk > 0.0 && disk <= 1.0), "{page}");
    assert!(matches!(
        docker.inspect_image(&used),
        Err(RuntimeError::NoSuchImage { .. })
    ));
    assert!(
        docker.inspect_image(&declared).is_ok(),
        "a tasks.d image was removed"
    );
    assert!(
        !agent
            .log()
            .iter()
            .any(|line| line.contains(&format!("removed image {declared}"))),
        "{:#?}",
        agent.log()
    );
    assert!(docker.inspect_image(TEST_IMAGE).is_ok());
}
