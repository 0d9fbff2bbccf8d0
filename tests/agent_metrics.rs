//! `GET /metrics` in the whole agent on real Docker: with a task running, a scrape shows its
//! task and container counts, the Docker calls that started it, its container's memory and CPU
//! read from the cgroup files, and the process metrics; `promtool check metrics` (Debian's
//! `prometheus` package, installed on first need) accepts a live scrape; and a real Prometheus
//! server on 127.0.0.1, scraping deckhand every second, answers a query for a deckhand series
//! through its HTTP API. Every agent and Prometheus listens on a free port of its own.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;

use agent_support::{free_port, Agent, AgentOptions};
use docker_support::{ensure_program, unique_id, TempDir, TEST_IMAGE};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One HTTP/1.0 GET: (status, body).
fn http_get(address: SocketAddr, target: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    write!(stream, "GET {target} HTTP/1.0\r\nHost: test\r\n\r\n")?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

fn scrape(agent: &Agent) -> String {
    let address = agent.introspection.expect("introspection on");
    let (status, page) =
        http_get(address, "/metrics").unwrap_or_else(|error| panic!("GET /metrics: {error}"));
    assert_eq!(status, 200, "{page}");
    page
}

/// The value of the series written exactly as `series` (name and labels), if the page has it.
fn series_value(page: &str, series: &str) -> Option<f64> {
    page.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.parse().ok()
    })
}

fn required(page: &str, series: &str) -> f64 {
    series_value(page, series).unwrap_or_else(|| panic!("no series {series} in:\n{page}"))
}

fn metrics_agent(test: &str) -> Option<Agent> {
    let docker = docker_support::docker_client_or_skip(test)?;
    Some(Agent::start(docker, AgentOptions::default()))
}

#[test]
fn a_scrape_shows_a_running_task_and_passes_promtool() {
    let Some(agent) = metrics_agent("agent metrics scrape") else {
        return;
    };
    let family = format!("metrics-{}", unique_id());
    let definition = format!(
        r#"{{"family": "{family}", "containerDefinitions": [{{
              "name": "sleeper", "image": "{TEST_IMAGE}", "memory": 64,
              "command": ["sh", "-c", "while true; do i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; sleep 1; done"],
              "stopTimeout": 1
            }}]}}"#
    );
    let task = agent.submit(&definition);
    agent.wait_for_task_status(&task, "RUNNING");

    let page = scrape(&agent);
    assert_eq!(
        required(
            &page,
            &format!("deckhand_build_info{{version=\"{}\"}}", deckhand::VERSION)
        ),
        1.0
    );
    assert_eq!(required(&page, "deckhand_tasks{status=\"RUNNING\"}"), 1.0);
    assert_eq!(required(&page, "deckhand_tasks{status=\"STOPPED\"}"), 0.0);
    assert_eq!(
        required(&page, "deckhand_containers{status=\"RUNNING\"}"),
        1.0
    );
    assert_eq!(
        required(&page, "deckhand_containers{status=\"PULLED\"}"),
        0.0
    );
    assert!(required(&page, "deckhand_events_total") >= 2.0);
    assert_eq!(required(&page, "deckhand_container_restarts_total"), 0.0);
    for operation in ["create", "start"] {
        let series =
            format!("deckhand_docker_requests_total{{operation=\"{operation}\",outcome=\"ok\"}}");
        assert!(required(&page, &series) >= 1.0, "{series}");
        let count =
            format!("deckhand_docker_request_duration_seconds_count{{operation=\"{operation}\"}}");
        assert!(required(&page, &count) >= 1.0, "{count}");
    }
    assert!(required(&page, "deckhand_checkpoint_duration_seconds_count") >= 1.0);
    assert_eq!(required(&page, "deckhand_images_removed_total"), 0.0);
    // Image cleanup samples Docker's file system at start; a share, whenever it is read.
    let disk = required(&page, "deckhand_image_disk_used_ratio");
    assert!((0.0..=1.0).contains(&disk), "{disk}");
    let labels = format!("{{task=\"{task}\",family=\"{family}\",container=\"sleeper\"}}");
    let memory = required(
        &page,
        &format!("deckhand_container_memory_usage_bytes{labels}"),
    );
    assert!(memory > 0.0, "memory {memory}");
    // The container spins between sleeps: its CPU time shows, and only rises.
    let cpu_series = format!("deckhand_container_cpu_usage_seconds_total{labels}");
    let cpu = required(&page, &cpu_series);
    assert!(cpu > 0.0, "cpu {cpu}");
    assert!(required(&page, "process_resident_memory_bytes") > 0.0);
    assert!(required(&page, "process_open_fds") > 0.0);
    assert!(required(&page, "process_cpu_seconds_total") >= 0.0);
    let started = required(&page, "process_start_time_seconds");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64();
    assert!(
        started > now - 600.0 && started < now + 5.0,
        "{started} {now}"
    );

    ensure_program("promtool", "prometheus");
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    promtool
        .stdin
        .take()
        .expect("stdin")
        .write_all(page.as_bytes())
        .expect("page to promtool");
    let checked = promtool.wait_with_output().expect("promtool output");
    assert!(
        checked.status.success() && checked.stdout.is_empty() && checked.stderr.is_empty(),
        "promtool check metrics: {}\n{}{}\npage:\n{page}",
        checked.status,
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    let later = scrape(&agent);
    assert!(required(&later, &cpu_series) >= cpu);
}

#[test]
fn with_image_cleanup_off_the_disk_is_still_sampled_and_docker_shows_up() {
    let Some(docker) = docker_support::docker_client_or_skip("agent metrics, cleanup off") else {
        return;
    };
    let agent = Agent::start(
        docker,
        AgentOptions {
            extra_env: vec![
                ("ECS_DISABLE_IMAGE_CLEANUP".into(), "true".into()),
                ("DECKHAND_IMAGE_CLEANUP_DISK_HIGH".into(), "90".into()),
                ("DECKHAND_IMAGE_CLEANUP_DISK_LOW".into(), "70".into()),
            ],
            ..AgentOptions::default()
        },
    );
    // The sampling thread reads the disk once at start, beside the agent's readiness: scrape
    // until its first sample shows (another process: nothing to wait on but the page).
    let deadline = Instant::now() + Duration::from_secs(30);
    let page = loop {
        let page = scrape(&agent);
        if series_value(&page, "deckhand_image_disk_used_ratio").is_some() {
            break page;
        }
        assert!(
            Instant::now() < deadline,
            "no disk sample within 30 s:\n{page}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let disk = required(&page, "deckhand_image_disk_used_ratio");
    assert!((0.0..=1.0).contains(&disk), "{disk}");
    assert_eq!(required(&page, "deckhand_image_disk_high_ratio"), 0.9);
    assert_eq!(required(&page, "deckhand_images_removed_total"), 0.0);
    // The events subscription answered: Docker is up. No ECS connection in local mode.
    assert_eq!(required(&page, "deckhand_docker_up"), 1.0);
    assert_eq!(
        series_value(&page, "deckhand_ecs_connected"),
        None,
        "{page}"
    );
    assert!(
        page.contains("# TYPE deckhand_ecs_connected gauge"),
        "the family is declared all the same:\n{page}"
    );
}

/// A Prometheus server of this test, killed (and its data removed) when dropped.
struct Prometheus {
    child: Child,
    address: SocketAddr,
    directory: TempDir,
}

impl Prometheus {
    /// Starts Prometheus on a free loopback port, scraping `target` every second.
    fn start(target: SocketAddr) -> Prometheus {
        ensure_program("prometheus", "prometheus");
        let directory = TempDir::new("dh-prometheus");
        let config = directory.path.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: deckhand\n    metrics_path: /metrics\n    \
                 static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .expect("prometheus.yml");
        let address = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let log = std::fs::File::create(directory.path.join("prometheus.log")).expect("log");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                directory.path.join("data").display()
            ))
            .arg(format!("--web.listen-address={address}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("run prometheus");
        Prometheus {
            child,
            address,
            directory,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.directory.path.join("prometheus.log")).unwrap_or_default()
    }

    /// The `data.result` of an instant query, or why there is none yet.
    fn query(&self, expression: &str) -> Result<Vec<serde_json::Value>, String> {
        let target = format!(
            "/api/v1/query?query={}",
            deckhand::api::http::percent_encode(expression)
        );
        let (status, body) = http_get(self.address, &target).map_err(|e| e.to_string())?;
        if status != 200 {
            return Err(format!("{status}: {body}"));
        }
        let answer: serde_json::Value =
            serde_json::from_str(&body).map_err(|error| format!("{error}: {body}"))?;
        answer["data"]["result"]
            .as_array()
            .cloned()
            .ok_or_else(|| format!("no data.result: {body}"))
    }

    /// Waits until `expression` has a result (Prometheus starting, then its first scrapes).
    fn query_until_found(&self, expression: &str, within: Duration) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + within;
        loop {
            let answer = self.query(expression);
            if let Ok(result) = &answer {
                if !result.is_empty() {
                    return result.clone();
                }
            }
            assert!(
                Instant::now() < deadline,
                "Prometheus never answered {expression} within {within:?} (last: {answer:?}); \
                 its log:\n{}",
                self.log()
            );
            // Nothing to wait on in another process: poll, at the scrape interval's pace.
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_real_prometheus_scrapes_deckhand_and_answers_a_query() {
    let Some(agent) = metrics_agent("agent metrics with Prometheus") else {
        return;
    };
    let prometheus = Prometheus::start(agent.introspection.expect("introspection on"));
    let result = prometheus.query_until_found("deckhand_build_info", Duration::from_secs(90));
    eprintln!("Prometheus answered deckhand_build_info: {result:?}");
    assert_eq!(result.len(), 1, "{result:?}");
    let series = &result[0];
    assert_eq!(series["metric"]["__name__"], "deckhand_build_info");
    assert_eq!(series["metric"]["job"], "deckhand");
    assert_eq!(series["metric"]["version"], deckhand::VERSION);
    assert_eq!(series["value"][1], "1");

    // Prometheus found the page healthy and read every status of the task gauge.
    let up = prometheus.query_until_found("up{job=\"deckhand\"}", Duration::from_secs(30));
    assert_eq!(up[0]["value"][1], "1", "{up:?}");
    let statuses = prometheus.query_until_found("deckhand_tasks", Duration::from_secs(30));
    assert_eq!(statuses.len(), 4, "{statuses:?}");
}
