//! The redirect of 169.254.170.2:80 (README: credentials endpoint) in the whole agent on real
//! Docker and the host's real iptables: with `DECKHAND_CREDENTIALS_ENDPOINT=true` a bridge-mode
//! container, an awsvpc one (its sandbox is on the bridge), a host-network container and the test process itself (as the Docker daemon would)
//! reach the task metadata endpoint at `http://169.254.170.2/...`; a SIGTERM removes every rule;
//! a `kill -9` leaves the rules and the restart makes them exactly one set again.
//!
//! The redirect is one per host, so these tests take turns with every other test process through
//! a lock file (`RedirectTurn`), and every other test agent runs with it off (the harness's
//! default). Nothing is ever sent to 169.254.170.2 before `iptables -t nat -S` shows the rules
//! that keep it on this machine: no packet for that address may leave it. The turn removes the
//! rules when a test fails half-way.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;

use agent_support::{redirect_rules, Agent, AgentOptions, RedirectTurn};
use deckhand::host::credentials_redirect::{CREDENTIALS_ADDRESS, REDIRECT_CHAIN};
use deckhand::runtime::ContainerRuntime;
use docker_support::{TempDir, TEST_IMAGE};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

const FILE_DEADLINE: Duration = Duration::from_secs(60);

/// Everything a test needs before its agent starts, or `None` when Docker is absent (a skip,
/// or a failure with `DECKHAND_REQUIRE_DOCKER=1`). The redirect's turn is taken before anything
/// else.
fn prepare(test_name: &str) -> Option<(RedirectTurn, deckhand::docker::DockerClient)> {
    let docker = docker_support::docker_client_or_skip(test_name)?;
    Some((RedirectTurn::take(), docker))
}

fn redirect_agent(docker: deckhand::docker::DockerClient) -> Agent {
    Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env: vec![("DECKHAND_CREDENTIALS_ENDPOINT".into(), "true".into())],
        },
    )
}

/// The port the agent's task metadata endpoint listens on (the harness picks a free one).
fn metadata_port(agent: &Agent) -> u16 {
    let line = agent.wait_for_log("leads to the task metadata endpoint at ");
    line.split("endpoint at ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|address| address.rsplit(':').next())
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"))
}

/// Asserts that the rules are exactly one set leading to `port` on the bridge gateway, and
/// returns them. Called before anything is sent to 169.254.170.2.
fn assert_one_set(docker: &deckhand::docker::DockerClient, port: u16) -> Vec<String> {
    let bridge = docker
        .bridge_interface()
        .expect("inspect the bridge network")
        .expect("the bridge network names its device");
    let gateway = docker
        .bridge_gateway()
        .expect("inspect the bridge network")
        .expect("the bridge network has a gateway");
    let rules = redirect_rules();
    let expected = [
        format!("-N {REDIRECT_CHAIN}"),
        format!(
            "-A PREROUTING -d {CREDENTIALS_ADDRESS}/32 -i {bridge} -p tcp -m tcp --dport 80 -j {REDIRECT_CHAIN}"
        ),
        format!("-A OUTPUT -d {CREDENTIALS_ADDRESS}/32 -p tcp -m tcp --dport 80 -j {REDIRECT_CHAIN}"),
        format!("-A {REDIRECT_CHAIN} -p tcp -j DNAT --to-destination {gateway}:{port}"),
    ];
    let mut sorted = rules.clone();
    sorted.sort();
    let mut expected_sorted = expected.to_vec();
    expected_sorted.sort();
    assert_eq!(sorted, expected_sorted, "the nat table's redirect rules");
    rules
}

/// Waits until `path` exists (the container writes it whole, with `mv`) and reads it.
fn wait_for_file(path: &Path) -> String {
    let deadline = Instant::now() + FILE_DEADLINE;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{} was not written within {FILE_DEADLINE:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A task whose one container fetches its own task's metadata through 169.254.170.2 (the path of
/// `ECS_CONTAINER_METADATA_URI_V4`, another host) into `/out/<network>.json` until the answer
/// shows the task RUNNING (the agent may not have seen the start yet when the container's first
/// command runs; until then the endpoint does not know it), then waits. After 60 s of failures
/// the file holds wget's last error.
fn reader_definition(family: &str, network_mode: &str, out: &Path) -> String {
    let script = format!(
        "path=${{ECS_CONTAINER_METADATA_URI_V4#http://}}; path=/${{path#*/}}; \
         for i in $(seq 1 300); do \
           wget -q -O /out/{network_mode}.tmp \"http://{CREDENTIALS_ADDRESS}$path/task\" \
             2>/out/{network_mode}.err \
             && grep -q '\"KnownStatus\":\"RUNNING\"' /out/{network_mode}.tmp && break; \
           cp /out/{network_mode}.err /out/{network_mode}.tmp; sleep 0.2; \
         done; mv /out/{network_mode}.tmp /out/{network_mode}.json; exec sleep 600"
    );
    let script = serde_json::to_string(&script).expect("a JSON string");
    format!(
        r#"{{"family": "{family}", "networkMode": "{network_mode}",
            "volumes": [{{"name": "out", "host": {{"sourcePath": "{out}"}}}}],
            "containerDefinitions": [{{
              "name": "reader", "image": "{TEST_IMAGE}", "essential": true,
              "cpu": 128, "memory": 64,
              "command": ["sh", "-c", {script}],
              "mountPoints": [{{"sourceVolume": "out", "containerPath": "/out"}}],
              "stopTimeout": 1
            }}]}}"#,
        out = out.display()
    )
}

/// One HTTP/1.0 GET from the test process: (status, body).
fn http_get(address: &str, path: &str) -> (u16, String) {
    let mut stream =
        TcpStream::connect(address).unwrap_or_else(|error| panic!("{address}: {error}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("read timeout");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").expect("request written");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer read");
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_default();
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    (status, body)
}

#[test]
fn bridge_awsvpc_and_host_containers_and_the_host_reach_the_endpoint_at_169_254_170_2() {
    let Some((_turn, docker)) = prepare("credentials redirect") else {
        return;
    };
    let mut agent = redirect_agent(docker.clone());
    let port = metadata_port(&agent);
    // The rules are in place before anything goes to 169.254.170.2.
    assert_one_set(&docker, port);

    let out = TempDir::new("dh-redirect");
    let mut tasks = Vec::new();
    for network_mode in ["bridge", "awsvpc", "host"] {
        let family = format!("redirect-{network_mode}");
        let task = agent.submit(&reader_definition(&family, network_mode, &out.path));
        tasks.push((network_mode, task));
    }
    for (network_mode, task) in &tasks {
        let text = wait_for_file(&out.path.join(format!("{network_mode}.json")));
        let metadata: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|error| {
            panic!("the {network_mode} container's answer through {CREDENTIALS_ADDRESS}: {error}: {text:?}")
        });
        assert_eq!(
            metadata["Family"],
            format!("redirect-{network_mode}"),
            "{metadata}"
        );
        assert!(
            metadata["TaskARN"]
                .as_str()
                .is_some_and(|arn| arn.contains(task.as_str())),
            "{metadata}"
        );
    }

    // From the host itself (the Docker daemon's way to the awslogs credentials endpoint): an
    // unknown path on the endpoint answers there, not anywhere else.
    let (status, _) = http_get(&format!("{CREDENTIALS_ADDRESS}:80"), "/v4/no-such-token");
    assert_eq!(status, 404, "the endpoint's answer to an unknown token");

    // A clean stop removes every rule.
    agent.signal("TERM");
    let (status, _) = agent.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status}");
    assert_eq!(
        redirect_rules(),
        Vec::<String>::new(),
        "rules left after SIGTERM"
    );
}

#[test]
fn a_kill_and_a_restart_leave_exactly_one_set_of_rules() {
    let Some((_turn, docker)) = prepare("credentials redirect after a kill") else {
        return;
    };
    let mut agent = redirect_agent(docker.clone());
    let port = metadata_port(&agent);
    let installed = assert_one_set(&docker, port);

    agent.kill9();
    assert_eq!(
        redirect_rules(),
        installed,
        "a killed agent leaves its rules"
    );
    agent.restart();
    assert_eq!(metadata_port(&agent), port);
    assert_one_set(&docker, port);
    // Installing over its own rules a second time changes nothing either.
    agent.kill9();
    agent.restart();
    assert_eq!(assert_one_set(&docker, port), installed);

    agent.signal("TERM");
    let (status, _) = agent.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status}");
    assert_eq!(redirect_rules(), Vec::<String>::new());
}

#[test]
fn with_the_setting_off_no_rule_is_made() {
    let Some((_turn, docker)) = prepare("credentials redirect off") else {
        return;
    };
    // The harness's default: DECKHAND_CREDENTIALS_ENDPOINT=false.
    let agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env: Vec::new(),
        },
    );
    agent.wait_for_log("is not redirected (DECKHAND_CREDENTIALS_ENDPOINT=false)");
    assert_eq!(redirect_rules(), Vec::<String>::new());
}

#[test]
fn without_iptables_the_agent_warns_naming_what_failed_and_runs() {
    let Some(docker) =
        docker_support::docker_client_or_skip("credentials redirect without iptables")
    else {
        return;
    };
    // No lock: no rule can be made. A PATH without iptables in it.
    let empty = TempDir::new("dh-no-iptables");
    let agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env: vec![
                ("DECKHAND_CREDENTIALS_ENDPOINT".into(), "true".into()),
                ("PATH".into(), empty.path.to_string_lossy().into_owned()),
            ],
        },
    );
    let warning = agent.wait_for_log("cannot redirect 169.254.170.2:80");
    assert!(
        warning.contains("WARN")
            && warning.contains("the iptables program is not installed (not found in PATH)")
            && warning.contains("DECKHAND_CREDENTIALS_ENDPOINT=false"),
        "{warning}"
    );
    assert_eq!(agent.request("GET", "/v1/tasks", None).status, 200);
}
