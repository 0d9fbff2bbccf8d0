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
