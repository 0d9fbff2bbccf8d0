//! Compose files in `tasks.d`, in the whole agent on real Docker: a directory holding
//! `compose.yaml` and its `.env` becomes one task whose start order is the file's `depends_on`:
//! a one-shot migration finishes (exit 0) before the web service starts, and the web service
//! waits for the database's health check to pass. The `.env` fills in the host port, and a
//! relative bind mount serves the page.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;

use agent_support::{free_port, http_get_eventually, Agent, AgentOptions};
use deckhand::api::views::millis_from_rfc3339;
use deckhand::runtime::ContainerRuntime;

/// Docker's RFC 3339 time (nanoseconds) in milliseconds.
fn docker_time(text: &str) -> u64 {
    let (seconds, fraction) = text.split_once('.').unwrap_or((text, "0Z"));
    let fraction = fraction.trim_end_matches('Z');
    let millis = format!("{:0<3}", &fraction[..fraction.len().min(3)]);
    millis_from_rfc3339(&format!("{seconds}.{millis}Z")).expect("Docker time")
}

fn compose_file(image: &str) -> String {
    format!(
        r#"# A web app, its database and a migration, as Compose files usually have them.
services:
  web:
    image: {image}
    command: httpd -f -p 80 -h /www
    ports:
      - "${{WEB_PORT}}:80"
    volumes:
      - ./site:/www:ro
    stop_grace_period: 2s
    depends_on:
      migrate:
        condition: service_completed_successfully
      db:
        condition: service_healthy
  db:
    image: {image}
    # Healthy only once /tmp/ready exists, three seconds after it starts.
    command: ["sh", "-c", "sleep 3; touch /tmp/ready; exec sleep 3600"]
    stop_grace_period: 2s
    healthcheck:
      test: test -f /tmp/ready
      interval: 1s
      timeout: 1s
      retries: 10
  migrate:
    image: {image}
    command: sh -c 'sleep 1; exit 0'
"#
    )
}

#[test]
fn a_compose_directory_runs_in_dependency_order_behind_its_health_gate() {
    let Some(docker) = docker_support::docker_client_or_skip("agent compose") else {
        return;
    };
    let agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            ..AgentOptions::default()
        },
    );
    let port = free_port();
    let project = agent.tasks_dir.join("shop");
    std::fs::create_dir_all(project.join("site")).expect("site");
    std::fs::write(project.join("site/index.html"), "hello from compose\n").expect("page");
    std::fs::write(project.join(".env"), format!("WEB_PORT={port}\n")).expect(".env");
    // Written under another name and renamed, so a scan never sees half a file.
    let temporary = project.join("compose.yaml.incoming");
    std::fs::write(&temporary, compose_file(docker_support::TEST_IMAGE)).expect("compose");
    std::fs::rename(&temporary, project.join("compose.yaml")).expect("rename");
    agent.signal("HUP");

    let running =
        agent.wait_for_event(|event| event.container.is_none() && event.status == "RUNNING");
    let view = agent.inspect(&running.task);
    assert_eq!(view["Family"], "shop", "{view}");
    assert!(http_get_eventually(port, "hello from compose").contains("hello from compose"));

    let docker_id = |name: &str| -> String {
        let view = agent.inspect(&running.task);
        view["Containers"]
            .as_array()
            .expect("Containers")
            .iter()
            .find(|container| container["Name"] == name)
            .and_then(|container| container["DockerId"].as_str())
            .unwrap_or_else(|| panic!("no container {name} in {view}"))
            .to_string()
    };
    let web = agent
        .docker
        .inspect_container(&docker_id("web"))
        .expect("web");
    let db = agent
        .docker
        .inspect_container(&docker_id("db"))
        .expect("db");
    let migrate = agent
        .docker
        .inspect_container(&docker_id("migrate"))
        .expect("migrate");

    // service_completed_successfully: the migration exited 0 before the web service started.
    assert!(!migrate.state.running);
    assert_eq!(migrate.state.exit_code, 0);
    assert!(
        docker_time(&migrate.state.finished_at) <= docker_time(&web.state.started_at),
        "web started ({}) before the migration finished ({})",
        web.state.started_at,
        migrate.state.finished_at
    );
    // service_healthy: the database turns healthy three seconds after it starts; the web
    // service started after that, and the database is healthy now.
    let waited =
        docker_time(&web.state.started_at).saturating_sub(docker_time(&db.state.started_at));
    assert!(
        waited >= 3000,
        "web started {waited} ms after the database, before its health check could pass"
    );
    assert_eq!(
        db.state
            .health
            .as_ref()
            .map(|health| health.status.as_str()),
        Some("healthy")
    );
    // The migration is not essential: its exit did not stop the task.
    assert_eq!(agent.inspect(&running.task)["KnownStatus"], "RUNNING");

    // Removing the directory stops the task.
    std::fs::remove_dir_all(&project).expect("remove");
    agent.signal("HUP");
    agent.wait_for_task_status(&running.task, "STOPPED");
}

/// A service that records the first of SIGQUIT or SIGTERM it receives in `/out/signal`, after
/// saying it is ready in `/out/ready`.
fn signal_recorder_compose(image: &str, out: &std::path::Path) -> String {
    format!(
        r#"services:
  quitter:
    image: {image}
    stop_signal: SIGQUIT
    stop_grace_period: 10s
    volumes:
      - {out}:/out
    command:
      - sh
      - -c
      - "trap 'echo QUIT > /out/signal; exit 0' QUIT; trap 'echo TERM > /out/signal; exit 0' TERM; touch /out/ready; sleep 3600 & wait"
"#,
        out = out.display()
    )
}

/// Waits until `path` exists (the container wrote it), up to a minute.
fn wait_for_file(path: &std::path::Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !path.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_compose_stop_signal_is_what_the_container_receives_on_stop() {
    let Some(docker) = docker_support::docker_client_or_skip("compose stop signal") else {
        return;
    };
    let agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            ..AgentOptions::default()
        },
    );
    let image = docker_support::TEST_IMAGE;

    // Through tasks.d: removing the file stops the task.
    let tasks_d_out = agent.directory.path.join("signals-tasks-d");
    std::fs::create_dir_all(&tasks_d_out).expect("out directory");
    let compose = agent.tasks_dir.join("quitter.yaml");
    let temporary = agent.tasks_dir.join(".quitter.yaml.incoming");
    std::fs::write(&temporary, signal_recorder_compose(image, &tasks_d_out)).expect("compose");
    std::fs::rename(&temporary, &compose).expect("rename");
    agent.signal("HUP");
    let running =
        agent.wait_for_event(|event| event.container.is_none() && event.status == "RUNNING");
    wait_for_file(&tasks_d_out.join("ready"));
    std::fs::remove_file(&compose).expect("remove");
    agent.signal("HUP");
    agent.wait_for_task_status(&running.task, "STOPPED");
    assert_eq!(
        std::fs::read_to_string(tasks_d_out.join("signal")).expect("the signal was recorded"),
        "QUIT\n"
    );

    // Through `deckhand submit` and `deckhand stop`.
    let submit_out = agent.directory.path.join("signals-submit");
    std::fs::create_dir_all(&submit_out).expect("out directory");
    let file = agent.directory.path.join("quitter-submit.yaml");
    std::fs::write(&file, signal_recorder_compose(image, &submit_out)).expect("compose");
    let file = file.to_string_lossy().to_string();
    let submitted = agent.cli(&["submit", &file]);
    assert_eq!(
        submitted.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&submitted.stderr)
    );
    let task = String::from_utf8_lossy(&submitted.stdout)
        .trim()
        .to_string();
    agent.wait_for_task_status(&task, "RUNNING");
    wait_for_file(&submit_out.join("ready"));
    let stopped = agent.cli(&["stop", "--wait", &task]);
    assert_eq!(
        stopped.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&stopped.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(submit_out.join("signal")).expect("the signal was recorded"),
        "QUIT\n"
    );

    // `deckhand convert` writes valid ECS JSON, without the signal, and says so.
    let converted = agent.cli(&["convert", &file]);
    assert_eq!(converted.status.code(), Some(0));
    let json: serde_json::Value =
        serde_json::from_slice(&converted.stdout).expect("convert prints JSON");
    let container = &json["containerDefinitions"][0];
    assert_eq!(container["name"], "quitter", "{json}");
    assert!(
        container
            .as_object()
            .is_some_and(|map| map.keys().all(|key| !key.contains("ignal"))),
        "{json}"
    );
    let stderr = String::from_utf8_lossy(&converted.stderr);
    assert!(
        stderr.contains("stop signal SIGQUIT cannot be written in an ECS task definition"),
        "{stderr}"
    );
}
