//! deckhand's ECS telemetry session (TCS), the whole agent on real Docker against the fake ECS
//! of `tests/support/fake_ecs.rs` and the fake TCS of `tests/support/fake_tcs.rs` (every
//! upgrade and every message signature checked): an ECS task whose container has a health
//! check and holds some memory is published with the health `docker inspect` shows and the
//! memory and CPU its cgroup shows; the Docker runtime check is OK; TCS going away touches
//! neither ACS nor the task, and the session comes back by itself.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;
#[path = "support/fake_ecs.rs"]
mod fake_ecs;
#[path = "support/fake_tcs.rs"]
mod fake_tcs;

use agent_support::{Agent, AgentOptions};
use fake_ecs::{acs_container, acs_task, task_arn, Credentials, FakeEcs};
use fake_tcs::{FakeTcs, TcsMessage};
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};

fn deadline(seconds: u64) -> Instant {
    Instant::now() + Duration::from_secs(seconds)
}

fn ecs_env(fake: &FakeEcs, cluster: &str) -> Vec<(String, String)> {
    [
        fake.agent_env(cluster),
        vec![
            ("ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION".into(), "1s".into()),
            // As agent_ecs's RSS measurement runs it, so the two figures compare.
            ("DECKHAND_TASK_METADATA".into(), "false".into()),
        ],
    ]
    .concat()
}

fn docker_inspect(arn: &str) -> Value {
    let output = Command::new("docker")
        .args([
            "ps",
            "-q",
            "--no-trunc",
            "--filter",
            &format!("label=com.amazonaws.ecs.task-arn={arn}"),
        ])
        .output()
        .expect("docker ps");
    let id = String::from_utf8_lossy(&output.stdout).trim().to_string();
    assert!(!id.is_empty(), "no running container of {arn}");
    let output = Command::new("docker")
        .args(["inspect", &id])
        .output()
        .expect("docker inspect");
    let inspected: Value = serde_json::from_slice(&output.stdout).expect("inspect JSON");
    inspected[0].clone()
}

/// The container's cgroup directory, from its main process's `/proc/<pid>/cgroup`, and whether
/// it is cgroup v2.
fn cgroup_directory(pid: u64) -> (std::path::PathBuf, bool) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("its cgroup");
    for line in text.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next(), fields.next(), fields.next());
        match (controllers, path) {
            (Some(""), Some(path)) => {
                return (
                    std::path::Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/')),
                    true,
                )
            }
            (Some(controllers), Some(path)) if controllers.split(',').any(|c| c == "memory") => {
                return (
                    std::path::Path::new("/sys/fs/cgroup/memory")
                        .join(path.trim_start_matches('/')),
                    false,
                )
            }
            _ => {}
        }
    }
    panic!("no memory cgroup in {text}")
}

fn stat_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(' ')?;
        (name == key).then(|| value.trim().parse().ok()).flatten()
    })
}

/// The memory ECS gets for the container, in MiB, read from its cgroup as the ECS agent
/// computes it (usage less `inactive_file`, or `cache` on v1).
fn cgroup_memory_mib(pid: u64) -> f64 {
    let (directory, v2) = cgroup_directory(pid);
    let read = |name: &str| std::fs::read_to_string(directory.join(name)).unwrap_or_default();
    let (usage, key) = if v2 {
        (read("memory.current"), "inactive_file")
    } else {
        (read("memory.usage_in_bytes"), "cache")
    };
    let usage: u64 = usage.trim().parse().expect("a memory usage");
    let reclaimable = stat_value(&read("memory.stat"), key).filter(|value| *value < usage);
    ((usage - reclaimable.unwrap_or(0)) / (1024 * 1024)) as f64
}

/// The CPU seconds the container used so far, from its cgroup.
fn cgroup_cpu_seconds(pid: u64) -> f64 {
    let (directory, v2) = cgroup_directory(pid);
    if v2 {
        let text = std::fs::read_to_string(directory.join("cpu.stat")).unwrap_or_default();
        stat_value(&text, "usage_usec").expect("usage_usec") as f64 / 1e6
    } else {
        let path = directory
            .to_string_lossy()
            .replace("/sys/fs/cgroup/memory", "/sys/fs/cgroup/cpuacct");
        let text = std::fs::read_to_string(format!("{path}/cpuacct.usage")).unwrap_or_default();
        text.trim().parse::<f64>().expect("cpuacct.usage") / 1e9
    }
}

/// Every entry for `arn` in the `key` list of the `type_name` messages, oldest first.
fn entries<'a>(
    messages: &'a [TcsMessage],
    type_name: &str,
    arn: &str,
    key: &str,
) -> Vec<&'a Value> {
    messages
        .iter()
        .filter(|message| message.type_name == type_name)
        .filter_map(|message| message.message[key].as_array())
        .flatten()
        .filter(|task| task["taskArn"] == arn)
        .collect()
}

#[test]
fn a_tcs_session_publishes_health_and_usage_that_match_docker_and_the_cgroup() {
    let Some(docker) = docker_support::docker_client_or_skip("agent tcs") else {
        return;
    };
    let fake = FakeEcs::start();
    let tcs = FakeTcs::start(fake.region(), Credentials::test());
    fake.set_telemetry_endpoint(&tcs.endpoint());
    let cluster = format!("tcs-{}", &fake_ecs::random_hex32()[..12]);
    let agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env: ecs_env(&fake, &cluster),
        },
    );
    fake.wait_for_acs_session(1, deadline(60));
    assert!(tcs.wait_for_sessions(1, deadline(60)), "no TCS session");
    // One DiscoverPollEndpoint answer serves both websockets.
    let discovered = fake
        .calls()
        .iter()
        .filter(|(operation, _)| operation == "DiscoverPollEndpoint")
        .count();
    assert_eq!(discovered, 1, "{:?}", fake.calls());
    let query = &tcs.queries()[0];
    assert_eq!(
        query.get("cluster").map(String::as_str),
        Some(cluster.as_str())
    );
    assert!(
        query
            .get("containerInstance")
            .is_some_and(|arn| arn.contains(":container-instance/")),
        "{query:?}"
    );
    assert!(
        query.contains_key("agentVersion") && query.contains_key("agentHash"),
        "{query:?}"
    );

    // A figure, not a check (docs/PERFORMANCE.md): the agent's resident memory with both
    // sessions open and no task, once the first publication went out.
    tcs.wait_for(deadline(30), |messages| {
        messages
            .iter()
            .any(|message| message.type_name == "PublishInstanceStatusRequest")
            .then_some(())
    })
    .expect("a first publication");
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", agent.pid())).unwrap_or_default();
    for line in status
        .lines()
        .filter(|line| line.starts_with("VmRSS:") || line.starts_with("Threads:"))
    {
        println!("idle agent with the ACS and TCS sessions open: {line}");
    }

    // An ECS task: 20 MiB held in a shell variable (anonymous memory, which both cgroup versions
    // count; a tmpfs file would be page cache on v1), a little CPU every second, a health check every 5 s.
    let arn = task_arn(&cluster);
    let mut container = acs_container(
        "app",
        docker_support::TEST_IMAGE,
        &[
            "sh",
            "-c",
            "hold=$(head -c 20971520 /dev/zero | tr '\\000' x); while true; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; sleep 1; done",
        ],
        true,
        &[],
    );
    container["memory"] = json!(128);
    container["healthCheckType"] = json!("DOCKER");
    container["dockerConfig"] = json!({
        "config": json!({"Healthcheck": {"Test": ["CMD-SHELL", "echo checked-ok"], "Interval": 5_000_000_000u64, "Timeout": 3_000_000_000u64, "Retries": 2}}).to_string(),
    });
    fake.send_payload(
        Value::Array(vec![acs_task(
            &arn,
            "tcs-health",
            "RUNNING",
            vec![container],
        )]),
        1,
    );
    fake.wait_for_task_state(&arn, "RUNNING", deadline(90));

    // Health: HEALTHY once Docker says so, with the check's output, as `docker inspect` shows.
    let health = tcs
        .wait_for(deadline(90), |messages| {
            entries(messages, "PublishHealthRequest", &arn, "tasks")
                .into_iter()
                .find(|task| task["containers"][0]["healthStatus"] == "HEALTHY")
                .cloned()
        })
        .unwrap_or_else(|| panic!("no HEALTHY for {arn}: {:#?}", tcs.messages()));
    let inspected = docker_inspect(&arn);
    assert_eq!(inspected["State"]["Health"]["Status"], "healthy");
    let container = &health["containers"][0];
    assert_eq!(container["containerName"], "app");
    assert_eq!(health["taskDefinitionFamily"], "tcs-health");
    let last_output = inspected["State"]["Health"]["Log"]
        .as_array()
        .and_then(|log| log.last())
        .and_then(|probe| probe["Output"].as_str())
        .unwrap_or("")
        .to_string();
    assert_eq!(
        container["statusMessage"].as_str(),
        Some(last_output.as_str())
    );
    assert_eq!(last_output, "checked-ok\n");
    let since = container["statusSince"].as_f64().expect("statusSince");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64();
    assert!(
        since > now - 120.0 && since <= now + 1.0,
        "statusSince {since}, now {now}"
    );

    // Metrics: the container's memory and CPU from its cgroup.
    let pid = inspected["State"]["Pid"].as_u64().expect("a pid");
    let metric = tcs
        .wait_for(deadline(90), |messages| {
            // The first window wholly after the shell took its memory.
            entries(messages, "PublishMetricsRequest", &arn, "taskMetrics")
                .into_iter()
                .find(|task| {
                    task["containerMetrics"][0]["memoryStatsSet"]["min"]
                        .as_f64()
                        .is_some_and(|low| low >= 20.0)
                })
                .cloned()
        })
        .unwrap_or_else(|| panic!("no metrics for {arn}: {:#?}", tcs.messages()));
    let memory_now = cgroup_memory_mib(pid);
    let cpu_total = cgroup_cpu_seconds(pid);
    let container = &metric["containerMetrics"][0];
    assert_eq!(container["containerName"], "app");
    let memory = &container["memoryStatsSet"];
    let (low, high) = (
        memory["min"].as_f64().expect("min"),
        memory["max"].as_f64().expect("max"),
    );
    assert!(
        (low - memory_now).abs() <= 2.0 && (high - memory_now).abs() <= 2.0,
        "reported {memory}, the cgroup says {memory_now} MiB"
    );
    let cpu = &container["cpuStatsSet"];
    let samples = cpu["sampleCount"].as_f64().expect("sampleCount");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    // Each sample is 100 × CPU seconds / cores / 10 s: their sum is at most what the cgroup
    // counted since the container started.
    let reported_seconds = cpu["sum"].as_f64().expect("sum") * cores * 10.0 / 100.0;
    assert!(samples >= 1.0, "{cpu}");
    assert!(
        cpu["min"].as_f64().expect("min") >= 0.0 && cpu["max"].as_f64().expect("max") <= 100.0,
        "{cpu}"
    );
    assert!(
        reported_seconds <= cpu_total * 1.5 + 0.05,
        "reported {reported_seconds} CPU s, the cgroup counted {cpu_total} s"
    );

    // The runtime check: Docker answers.
    let status = tcs
        .wait_for(deadline(30), |messages| {
            messages
                .iter()
                .find(|message| message.type_name == "PublishInstanceStatusRequest")
                .cloned()
        })
        .expect("an instance status");
    assert_eq!(status.message["statuses"][0]["type"], "ContainerRuntime");
    assert_eq!(status.message["statuses"][0]["status"], "OK");

    // Every message carried a valid signature of its own.
    for message in tcs.messages() {
        assert!(message.signed, "{message:?}");
    }

    // TCS away: ACS and the task do not notice; the session comes back on its own.
    let sessions = tcs.queries().len();
    tcs.set_down(true);
    let heartbeat = fake.send_heartbeat();
    fake.wait_for_message(
        |message| {
            message.type_name == "HeartbeatAckRequest"
                && message.message["messageId"] == heartbeat.as_str()
        },
        deadline(30),
    );
    assert_eq!(docker_inspect(&arn)["State"]["Running"], true);
    let published = tcs.messages().len();
    tcs.set_down(false);
    assert!(
        tcs.wait_for_sessions(sessions + 1, deadline(90)),
        "the session did not come back"
    );
    tcs.wait_for(deadline(60), |messages| {
        (messages.len() > published
            && messages[published..]
                .iter()
                .any(|message| message.type_name == "PublishHealthRequest"))
        .then_some(())
    })
    .expect("health published again once TCS is back");
    drop(agent);
}
