//! FireLens in the whole agent on real Docker. The router is a stand-in (`support/fluent_sink.rs`,
//! run in the busybox test image) that records what Docker's `fluentd` driver sends on the
//! task's socket; the test decodes it as the Fluent forward protocol and finds the lines the
//! application printed, tagged `<container name>-firelens-<task id>` as ECS tags them. Routing
//! goes on while the agent is killed with SIGKILL and while it restarts; the router's exit stops
//! the task as any essential container's exit does, and cleanup removes the task's FireLens
//! files. A second task checks the files are mounted where Fluent Bit's image reads them, the
//! `config-file-type: s3` file coming from `DECKHAND_ENVIRONMENT_FILES_DIR`, and that an object
//! the mirror lacks stops the task with `ResourceInitializationError` naming its ARN.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;
#[path = "support/fluent_forward.rs"]
mod fluent_forward;

use agent_support::{Agent, AgentOptions, DEADLINE};
use docker_support::{TempDir, TEST_IMAGE};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The highest `line-N` the router received from `app`, tagged as ECS tags it.
fn highest_line(out: &Path, task_id: &str) -> Option<u64> {
    let tag = format!("app-firelens-{task_id}");
    fluent_forward::messages_in(out)
        .into_iter()
        .filter(|message| message.tag == tag)
        .filter_map(|message| {
            message
                .record
                .get("log")
                .and_then(|line| line.strip_prefix("line-"))
                .and_then(|number| number.trim().parse::<u64>().ok())
        })
        .max()
}

/// Waits until the router received a line numbered above `above`; returns the highest.
fn wait_for_lines_above(out: &Path, task_id: &str, above: u64, what: &str) -> u64 {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(highest) = highest_line(out, task_id).filter(|highest| *highest > above) {
            return highest;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the router received no line after line-{above}; it has {:?}",
            fluent_forward::messages_in(out)
                .into_iter()
                .take(5)
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn router_task(family: &str, sink: &Path, out: &Path) -> String {
    format!(
        r#"{{"family": "{family}",
            "volumes": [{{"name": "sink", "host": {{"sourcePath": "{sink}"}}}},
                        {{"name": "out", "host": {{"sourcePath": "{out}"}}}}],
            "containerDefinitions": [
              {{"name": "app", "image": "{TEST_IMAGE}", "essential": true, "stopTimeout": 1,
                "command": ["sh", "-c", "i=0; while true; do i=$((i+1)); echo line-$i; sleep 0.2; done"],
                "logConfiguration": {{"logDriver": "awsfirelens",
                  "options": {{"Name": "forward", "Host": "collector", "exclude-pattern": "^debug"}}}}}},
              {{"name": "log_router", "image": "{TEST_IMAGE}", "essential": true, "stopTimeout": 1,
                "firelensConfiguration": {{"type": "fluentbit", "options": {{"enable-ecs-log-metadata": "true"}}}},
                "entryPoint": ["/sink/fluent-sink", "/var/run/fluent.sock", "/out"],
                "mountPoints": [{{"sourceVolume": "sink", "containerPath": "/sink", "readOnly": true}},
                                {{"sourceVolume": "out", "containerPath": "/out"}}]}}
            ]}}"#,
        sink = sink.display(),
        out = out.display(),
    )
}

fn firelens_directory(agent: &Agent, task_id: &str) -> PathBuf {
    agent
        .directory
        .path
        .join("data")
        .join("firelens")
        .join(task_id)
}

#[test]
fn the_router_receives_the_application_lines_through_agent_restarts_and_is_cleaned_up() {
    let Some(docker) = docker_support::docker_client_or_skip("agent FireLens routing") else {
        return;
    };
    let scratch = TempDir::new("dh-firelens");
    let sink = scratch.path.join("sink");
    let out = scratch.path.join("out");
    std::fs::create_dir_all(&sink).expect("sink directory");
    std::fs::create_dir_all(&out).expect("out directory");
    fluent_forward::build_sink(&sink);
    let mut agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env: vec![("ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION".into(), "1s".into())],
        },
    );
    // The application is listed first: the router still starts before it (ECS's implicit
    // dependency), so its first line is not lost.
    let id = agent.submit(&router_task("firelens-routing", &sink, &out));
    agent.wait_for_task_status(&id, "RUNNING");
    let first = wait_for_lines_above(&out, &id, 0, "after the start");
    let lowest = fluent_forward::messages_in(&out)
        .iter()
        .filter_map(|message| message.record.get("log").cloned())
        .next();
    assert_eq!(
        lowest.as_deref(),
        Some("line-1"),
        "the first line reached the router"
    );
    let message = fluent_forward::messages_in(&out)
        .into_iter()
        .next()
        .expect("a message");
    assert_eq!(message.tag, format!("app-firelens-{id}"));
    assert_eq!(
        message.record.get("source").map(String::as_str),
        Some("stdout")
    );

    // The generated configuration is where the router's image reads it, with the app's output.
    let directory = firelens_directory(&agent, &id);
    let config = std::fs::read_to_string(directory.join("config/fluent.conf")).expect("config");
    assert!(config.contains("\n[INPUT]\n    Name forward\n    Mem_Buf_Limit 25MB\n    unix_path /var/run/fluent.sock\n"), "{config}");
    assert!(
        config.contains(
            "\n[FILTER]\n    Name   grep\n    Match app-firelens*\n    Exclude log ^debug\n"
        ),
        "{config}"
    );
    assert!(
        config.contains(&format!("    Record ecs_cluster {}\n", agent.cluster)),
        "{config}"
    );
    assert!(
        config.contains(
            "\n[OUTPUT]\n    Name forward\n    Match app-firelens*\n    Host collector\n"
        ),
        "{config}"
    );
    assert!(directory.join("socket/fluent.sock").exists());

    // kill -9: the containers run on and the lines keep coming without the agent; a restart
    // adopts the task and leaves the router's files alone.
    agent.kill9();
    let before = highest_line(&out, &id).unwrap_or(first);
    let during = wait_for_lines_above(&out, &id, before, "while the agent is down");
    agent.restart();
    let after_kill = wait_for_lines_above(&out, &id, during, "after the restart from kill -9");
    assert_eq!(
        std::fs::read_to_string(directory.join("config/fluent.conf")).expect("config"),
        config
    );
    // A clean stop and start of the agent: the same.
    agent.signal("TERM");
    agent.wait_exit(Duration::from_secs(10));
    agent.restart();
    wait_for_lines_above(&out, &id, after_kill, "after a clean restart");

    // The router exits: an essential container's exit, which stops the task; cleanup then
    // removes the task's FireLens files with its containers.
    let inspected = agent.inspect(&id);
    let router_id = inspected["Containers"]
        .as_array()
        .and_then(|containers| {
            containers
                .iter()
                .find(|container| container["Name"] == "log_router")
        })
        .and_then(|container| container["DockerId"].as_str())
        .unwrap_or_else(|| panic!("the router's Docker id in {inspected}"))
        .to_string();
    agent
        .docker
        .kill_container(&router_id, "KILL")
        .expect("kill the router");
    let stopped = agent.wait_for_task_status(&id, "STOPPED");
    assert!(
        stopped
            .reason
            .as_deref()
            .is_some_and(|reason| reason.contains("Essential container in task exited")),
        "{stopped:?}"
    );
    agent.wait_for_log(&format!("task {id}: cleaned up and forgotten"));
    assert!(
        !directory.exists(),
        "{} survived the cleanup",
        directory.display()
    );
    assert!(agent.containers().is_empty(), "{:?}", agent.containers());
}

fn mounts_task(family: &str, out: &Path, arn: &str) -> String {
    format!(
        r#"{{"family": "{family}",
            "volumes": [{{"name": "out", "host": {{"sourcePath": "{out}"}}}}],
            "containerDefinitions": [
              {{"name": "log_router", "image": "{TEST_IMAGE}", "essential": true, "stopTimeout": 1,
                "firelensConfiguration": {{"type": "fluentbit",
                  "options": {{"config-file-type": "s3", "config-file-value": "{arn}"}}}},
                "command": ["sh", "-c", "cat /fluent-bit/etc/fluent-bit.conf > /out/main.conf && cat /fluent-bit/etc/external.conf > /out/external.conf && touch /out/done && exec sleep 3600"],
                "mountPoints": [{{"sourceVolume": "out", "containerPath": "/out"}}]}},
              {{"name": "app", "image": "{TEST_IMAGE}", "essential": true, "stopTimeout": 1,
                "command": ["sleep", "3600"],
                "logConfiguration": {{"logDriver": "awsfirelens", "options": {{"Name": "stdout"}}}}}}
            ]}}"#,
        out = out.display(),
    )
}

#[test]
fn the_files_are_mounted_where_fluent_bit_reads_them_and_s3_files_come_from_the_mirror() {
    let Some(docker) = docker_support::docker_client_or_skip("agent FireLens mounts") else {
        return;
    };
    let scratch = TempDir::new("dh-firelens-mounts");
    let out = scratch.path.join("out");
    let mirror = scratch.path.join("mirror");
    std::fs::create_dir_all(&out).expect("out directory");
    std::fs::create_dir_all(mirror.join("configs/fluent-bit")).expect("mirror");
    std::fs::write(
        mirror.join("configs/fluent-bit/extra.conf"),
        "[OUTPUT]\n    Name stdout\n    Match *\n",
    )
    .expect("the mirrored object");
    let agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env: vec![
                ("ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION".into(), "1s".into()),
                (
                    "DECKHAND_ENVIRONMENT_FILES_DIR".into(),
                    mirror.to_string_lossy().into_owned(),
                ),
            ],
        },
    );
    let id = agent.submit(&mounts_task(
        "firelens-mounts",
        &out,
        "arn:aws:s3:::configs/fluent-bit/extra.conf",
    ));
    agent.wait_for_task_status(&id, "RUNNING");
    let deadline = Instant::now() + DEADLINE;
    while !out.join("done").exists() {
        assert!(Instant::now() < deadline, "the router never read its files");
        std::thread::sleep(Duration::from_millis(100));
    }
    let main = std::fs::read_to_string(out.join("main.conf")).expect("main.conf");
    assert!(
        main.contains("\n@INCLUDE /fluent-bit/etc/external.conf\n"),
        "{main}"
    );
    assert!(main.contains("    Match app-firelens*\n"), "{main}");
    assert_eq!(
        std::fs::read_to_string(out.join("external.conf")).expect("external.conf"),
        "[OUTPUT]\n    Name stdout\n    Match *\n"
    );
    let stop = agent.cli(&["stop", "--wait", &id]);
    assert_eq!(stop.status.code(), Some(0), "{stop:?}");

    // An object the mirror does not hold: the router is never created, and the task stops
    // with ECS's name for it, naming the ARN.
    let missing = "arn:aws:s3:::configs/fluent-bit/missing.conf";
    let id = agent.submit(&mounts_task("firelens-missing", &out, missing));
    let stopped = agent.wait_for_task_status(&id, "STOPPED");
    let router = agent.wait_for_event(|event| {
        event.task == id
            && event.container.as_deref() == Some("log_router")
            && event.status == "STOPPED"
    });
    let reason = router.reason.unwrap_or_default();
    assert!(
        reason.starts_with("ResourceInitializationError: ") && reason.contains(missing),
        "{reason} (task: {stopped:?})"
    );
    let inspected = agent.inspect(&id);
    let router_docker_id = inspected["Containers"]
        .as_array()
        .and_then(|containers| {
            containers
                .iter()
                .find(|container| container["Name"] == "log_router")
        })
        .map(|container| container["DockerId"].clone());
    assert!(
        router_docker_id.is_none_or(|id| id.is_null() || id == ""),
        "the router was created: {inspected}"
    );
}
