//! The README's promise on real Docker: `examples/make-image.sh` builds the image the examples
//! run, and the agent, with the default pull behaviour and no registry, runs `examples/web.json`
//! and `examples/three-tier.json` as they are (only their host ports moved to free ones), logs the
//! failed pull once, serves the page, and stops the tasks at once.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;

use agent_support::{free_port, http_get_eventually, Agent, AgentOptions};
use deckhand::runtime::ContainerRuntime;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const EXAMPLE_IMAGE: &str = "deckhand/busybox:latest";

fn repository_file(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|error| panic!("{}: {error}", full.display()))
}

/// The example with its one fixed host port replaced by `port`.
fn with_host_port(example: &str, fixed: u16, port: u16) -> String {
    let needle = format!("\"hostPort\": {fixed}");
    assert_eq!(
        example.matches(&needle).count(),
        1,
        "{needle} in the example"
    );
    example.replace(&needle, &format!("\"hostPort\": {port}"))
}

#[test]
fn the_packaged_example_is_the_repository_example() {
    assert_eq!(
        repository_file("packaging/examples/web.json"),
        repository_file("examples/web.json")
    );
}

#[test]
fn make_image_then_the_examples_run_with_the_default_pull_behaviour() {
    let Some(docker) = docker_support::docker_client_or_skip("README examples") else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/make-image.sh");
    let output = Command::new(&script)
        .output()
        .expect("run examples/make-image.sh");
    assert!(
        output.status.success(),
        "make-image.sh failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        EXAMPLE_IMAGE
    );
    docker
        .inspect_image(EXAMPLE_IMAGE)
        .expect("the image exists");

    let agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            // The README's agent: it pulls first, fails (no registry) and uses the local copy.
            extra_env: vec![("ECS_IMAGE_PULL_BEHAVIOR".into(), "default".into())],
        },
    );
    let web_port = free_port();
    let web = agent.submit(&with_host_port(
        &repository_file("examples/web.json"),
        8080,
        web_port,
    ));
    agent.wait_for_task_status(&web, "RUNNING");
    assert!(
        http_get_eventually(web_port, "hello from deckhand").contains("hello from deckhand"),
        "the example page"
    );
    let app_port = free_port();
    let three = agent.submit(&with_host_port(
        &repository_file("examples/three-tier.json"),
        8081,
        app_port,
    ));
    agent.wait_for_task_status(&three, "RUNNING");
    assert!(http_get_eventually(app_port, "app").contains("app"));

    // Four containers of one image, each pulled and failed: one line says so.
    let fallbacks: Vec<String> = agent
        .log()
        .into_iter()
        .filter(|line| line.contains("using the local copy"))
        .collect();
    assert_eq!(fallbacks.len(), 1, "{fallbacks:#?}");
    assert!(fallbacks[0].contains(EXAMPLE_IMAGE), "{}", fallbacks[0]);
    for task in [&web, &three] {
        let inspected = agent.inspect(task);
        for container in inspected["Containers"].as_array().expect("containers") {
            assert!(
                container.get("Reason").is_none(),
                "a pull that fell back is no container error: {container}"
            );
        }
    }
    let ps = agent.cli(&["ps"]);
    let table = String::from_utf8_lossy(&ps.stdout);
    assert!(table.contains(&web) && table.contains(&three), "{table}");

    // The examples answer SIGTERM: a stop does not wait out their stop timeout (5 s).
    for task in [&web, &three] {
        let started = Instant::now();
        let output = agent.cli(&["stop", "--wait", task]);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "stopping {task} took {:?}",
            started.elapsed()
        );
    }
    let web_container = agent.inspect(&web)["Containers"][0].clone();
    assert_eq!(web_container["ExitCode"], 0, "{web_container}");
}
