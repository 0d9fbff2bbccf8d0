//! The bench's containers, said three ways: a task definition for deckhand, the same containers
//! as direct Docker create requests (the limit), and an equivalent compose file (what users run
//! instead). Every container carries the label `deckhand-bench=<run id>`, so the bench finds and
//! removes everything it made, and nothing else.

use deckhand::docker::DockerClient;
use deckhand::runtime::{ContainerRuntime, CreateContainer};
use std::collections::BTreeMap;

/// The label on every container the bench makes; its value is the run id.
pub const BENCH_LABEL: &str = "deckhand-bench";
/// A container that runs until SIGTERM and exits at once on it.
pub const SERVE: &[&str] = &["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"];

/// The shape of one measured task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub containers: usize,
    /// Each container depends on the previous one having started (`dependsOn` START).
    pub chain: bool,
}

impl Shape {
    pub fn label(&self) -> String {
        match (self.containers, self.chain) {
            (1, _) => "1 container".to_string(),
            (count, false) => format!("{count} containers"),
            (count, true) => format!("{count} containers, dependency chain"),
        }
    }
}

fn json_string(value: &str) -> String {
    serde_json::Value::String(value.to_string()).to_string()
}

/// The ECS task definition deckhand runs.
pub fn task_definition_json(family: &str, image: &str, shape: Shape, run_id: &str) -> String {
    let containers: Vec<serde_json::Value> = (0..shape.containers)
        .map(|index| {
            let mut container = serde_json::json!({
                "name": format!("c{index}"),
                "image": image,
                "essential": true,
                "command": SERVE,
                "stopTimeout": 2,
                "dockerLabels": { BENCH_LABEL: run_id },
            });
            if shape.chain && index > 0 {
                container["dependsOn"] = serde_json::json!([
                    { "containerName": format!("c{}", index - 1), "condition": "START" }
                ]);
            }
            container
        })
        .collect();
    serde_json::json!({ "family": family, "containerDefinitions": containers }).to_string()
}

/// The equivalent compose file: same image, command and label, the default bridge network (as
/// deckhand's tasks use, so compose creates no network of its own), and the same order.
pub fn compose_file(image: &str, shape: Shape, run_id: &str) -> String {
    let mut text = String::from("version: \"2.4\"\nservices:\n");
    let command: Vec<String> = SERVE.iter().map(|part| json_string(part)).collect();
    for index in 0..shape.containers {
        text.push_str(&format!("  c{index}:\n"));
        text.push_str(&format!("    image: {}\n", json_string(image)));
        text.push_str(&format!("    command: [{}]\n", command.join(", ")));
        text.push_str("    network_mode: bridge\n");
        text.push_str("    stop_grace_period: 2s\n");
        text.push_str(&format!(
            "    labels:\n      {BENCH_LABEL}: {}\n",
            json_string(run_id)
        ));
        if shape.chain && index > 0 {
            text.push_str(&format!("    depends_on: [c{}]\n", index - 1));
        }
    }
    text
}

/// A direct create request for container `index` of a sample.
pub fn direct_create(image: &str, name: String, run_id: &str) -> CreateContainer {
    CreateContainer {
        name,
        image: image.to_string(),
        labels: BTreeMap::from([(BENCH_LABEL.to_string(), run_id.to_string())]),
        cmd: Some(SERVE.iter().map(|part| part.to_string()).collect()),
        ..CreateContainer::default()
    }
}

/// Force-removes every container carrying `label_filter` (`key` or `key=value`); returns how
/// many were removed.
pub fn remove_labelled(client: &DockerClient, label_filter: &str) -> Result<usize, String> {
    let containers = client
        .list_containers(&[label_filter.to_string()])
        .map_err(|error| format!("listing containers labelled {label_filter}: {error}"))?;
    let count = containers.len();
    let removals: Vec<_> = containers
        .into_iter()
        .map(|container| {
            let client = client.clone();
            std::thread::spawn(move || {
                client
                    .remove_container(&container.id, true)
                    .map_err(|error| format!("removing {}: {error}", container.name))
            })
        })
        .collect();
    for removal in removals {
        removal
            .join()
            .map_err(|_| "a removal thread panicked".to_string())??;
    }
    Ok(count)
}
