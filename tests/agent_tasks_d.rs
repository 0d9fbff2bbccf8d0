//! `tasks.d` in the whole agent on real Docker: a new file starts its task, a changed file that
//! keeps the same host port replaces the task (the old container stops before the new one starts),
//! an invalid file leaves the running task alone, a removed file stops it, and a task that stops by
//! itself is started again from its file after the restart pause. Rescans are asked for with
//! SIGHUP, as an operator would.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;

use agent_support::{free_port, http_get_eventually, web_definition, Agent, AgentOptions};
use deckhand::api::views::millis_from_rfc3339;
use deckhand::runtime::ContainerRuntime;
use std::path::Path;

fn write_atomically(path: &Path, content: &str) {
    let temporary = path.with_file_name(".incoming.tmp");
    std::fs::write(&temporary, content).expect("write");
    std::fs::rename(&temporary, path).expect("rename");
}

/// Docker's RFC 3339 time (nanoseconds) in milliseconds.
fn docker_time(text: &str) -> u64 {
    let (seconds, fraction) = text.split_once('.').unwrap_or((text, "0Z"));
    let fraction = fraction.trim_end_matches('Z');
    let millis = format!("{:0<3}", &fraction[..fraction.len().min(3)]);
    millis_from_rfc3339(&format!("{seconds}.{millis}Z")).expect("Docker time")
}

#[test]
fn files_start_replace_and_stop_tasks_in_order() {
    let Some(docker) = docker_support::docker_client_or_skip("agent tasks.d") else {
        return;
    };
    let agent = Agent::start(docker, AgentOptions::default());
    let port = free_port();
    let file = agent.tasks_dir.join("web.json");

    // Add.
    write_atomically(&file, &web_definition("declared", port, "version-one"));
    agent.signal("HUP");
    let started =
        agent.wait_for_event(|event| event.container.is_none() && event.status == "RUNNING");
    let first_task = started.task.clone();
    assert!(http_get_eventually(port, "hello from version-one").contains("version-one"));
    let first_container = agent.inspect(&first_task)["Containers"][0]["DockerId"]
        .as_str()
        .expect("DockerId")
        .to_string();

    // An invalid edit: logged with the file name, the task keeps running.
    write_atomically(
        &file,
        "{ \"family\": \"declared\", \"containerDefinitions\": [ {} ] }",
    );
    agent.signal("HUP");
    let logged = agent.wait_for_log("web.json is not a valid task definition");
    assert!(logged.contains(&first_task), "{logged}");
    assert_eq!(agent.inspect(&first_task)["DesiredStatus"], "RUNNING");

    // Change, same host port: stop the old task, then start the new one.
    write_atomically(&file, &web_definition("declared", port, "version-two"));
    agent.signal("HUP");
    let replaced = agent.wait_for_event(|event| {
        event.container.is_none() && event.status == "RUNNING" && event.task != first_task
    });
    let second_task = replaced.task.clone();
    assert_eq!(agent.inspect(&first_task)["KnownStatus"], "STOPPED");
    assert!(http_get_eventually(port, "hello from version-two").contains("version-two"));
    let second_container = agent.inspect(&second_task)["Containers"][0]["DockerId"]
        .as_str()
        .expect("DockerId")
        .to_string();
    let old = agent
        .docker
        .inspect_container(&first_container)
        .expect("old container");
    let new = agent
        .docker
        .inspect_container(&second_container)
        .expect("new container");
    assert!(!old.state.running);
    assert!(
        docker_time(&old.state.finished_at) <= docker_time(&new.state.started_at),
        "the new container started ({}) before the old one finished ({})",
        new.state.started_at,
        old.state.finished_at
    );

    // Remove.
    std::fs::remove_file(&file).expect("remove");
    agent.signal("HUP");
    agent.wait_for_task_status(&second_task, "STOPPED");
    let info = agent
        .docker
        .inspect_container(&second_container)
        .expect("container");
    assert!(!info.state.running);
}

#[test]
fn the_directory_is_rescanned_without_a_signal() {
    let Some(docker) = docker_support::docker_client_or_skip("agent tasks.d periodic") else {
        return;
    };
    let agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            ..AgentOptions::default()
        },
    );
    write_atomically(
        &agent.tasks_dir.join("later.json"),
        &web_definition("later", free_port(), "later"),
    );
    // No SIGHUP: the periodic rescan (every 5 s) must find it.
    let event =
        agent.wait_for_event(|event| event.container.is_none() && event.status == "RUNNING");
    assert_eq!(agent.inspect(&event.task)["Family"], "later");
}

#[test]
fn a_task_that_exits_by_itself_is_started_again_after_the_pause() {
    let Some(docker) = docker_support::docker_client_or_skip("agent tasks.d restart") else {
        return;
    };
    let agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            ..AgentOptions::default()
        },
    );
    // Its only (essential) container exits with 3 after a moment: the task stops by itself.
    let definition = format!(
        r#"{{"family": "crashing", "containerDefinitions": [{{"name": "main",
            "image": "{}", "essential": true, "command": ["sh", "-c", "sleep 1; exit 3"]}}]}}"#,
        docker_support::TEST_IMAGE
    );
    write_atomically(&agent.tasks_dir.join("crashing.json"), &definition);
    agent.signal("HUP");
    let first = agent
        .wait_for_event(|event| event.container.is_none() && event.status == "RUNNING")
        .task;
    let exited = agent.wait_for_event(|event| {
        event.task == first
            && event.container.as_deref() == Some("main")
            && event.status == "STOPPED"
    });
    assert_eq!(exited.exit_code, Some(3));
    let stopped = agent.wait_for_task_status(&first, "STOPPED");
    let scheduled = agent.wait_for_log("crashing.json: task");
    assert!(scheduled.contains("stopped by itself"), "{scheduled}");
    assert!(
        scheduled.contains("in 10s"),
        "the first pause is 10 s: {scheduled}"
    );
    // The restart: a new task from the same file, no sooner than 10 s after the stop.
    let second = agent.wait_for_event(|event| {
        event.container.is_none() && event.status == "RUNNING" && event.task != first
    });
    assert!(
        second.time >= stopped.time + 10_000,
        "restarted {} ms after the stop",
        second.time.saturating_sub(stopped.time)
    );
    let restarted = agent.wait_for_log("crashing.json: restarted");
    assert!(
        restarted.contains(&second.task) && restarted.contains(&first),
        "{restarted}"
    );
    assert_eq!(agent.inspect(&second.task)["Family"], "crashing");
}

#[test]
fn a_crash_right_after_files_were_picked_up_starts_no_task_twice() {
    let Some(docker) = docker_support::docker_client_or_skip("agent tasks.d crash") else {
        return;
    };
    let mut agent = Agent::start(docker, AgentOptions::default());
    let files = ["alpha.json", "beta.json"];
    for file in files {
        let family = file.trim_end_matches(".json");
        write_atomically(
            &agent.tasks_dir.join(file),
            &web_definition(family, free_port(), family),
        );
    }
    agent.signal("HUP");
    let mut first_ids = Vec::new();
    for file in files {
        let line = agent.wait_for_log(&format!("tasks.d: {file}: started task"));
        let id = line.rsplit(' ').next().expect("task id").to_string();
        first_ids.push(id);
    }
    // Killed right after the submits: the watcher keeps no record of its own, so only the
    // source marks saved with the tasks can tell the restarted agent which files it started.
    agent.kill9();
    agent.restart();

    // A third file proves a scan ran after the restart (scans run one after another).
    write_atomically(
        &agent.tasks_dir.join("gamma.json"),
        &web_definition("gamma", free_port(), "gamma"),
    );
    agent.signal("HUP");
    agent.wait_for_log("tasks.d: gamma.json: started task");
    for (id, file) in first_ids.iter().zip(files) {
        agent.wait_for_task_status(id, "RUNNING");
        let source = agent.inspect(id)["Source"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            source.starts_with(&format!("tasks.d:{file}:")),
            "inspect shows where the task came from: {source:?}"
        );
    }
    let list = agent.request("GET", "/v1/tasks", None);
    assert_eq!(list.status, 200, "{:?}", list.body);
    let mut families: Vec<String> = list.body["Tasks"]
        .as_array()
        .expect("Tasks")
        .iter()
        .map(|task| task["Family"].as_str().unwrap_or_default().to_string())
        .collect();
    families.sort();
    assert_eq!(
        families,
        vec!["alpha", "beta", "gamma"],
        "one task per file: {:#?}",
        list.body
    );
    assert!(
        agent
            .log()
            .iter()
            .all(|line| !line.contains("alpha.json: started")
                && !line.contains("beta.json: started")),
        "the restarted agent started a picked-up file again:\n{}",
        agent.log().join("\n")
    );
    // One container per file, whatever Docker holds.
    let containers = agent.containers();
    assert_eq!(containers.len(), 3, "{containers:#?}");
}
