//! Tests of the `/metrics` page: every family from the first scrape, status counts, bumped
//! counters and histograms, container series from made-up cgroup files with escaped labels.

use super::exposition::read_sample_line;
use super::*;
use crate::task::{Container, ContainerDefinition, NetworkMode, TaskDefinition};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

const ID_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const ID_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

fn task(id: &str, family: &str, containers: &[(&str, ContainerStatus, Option<&str>)]) -> Task {
    let definition = TaskDefinition {
        roles: Default::default(),
        family: family.to_string(),
        revision: 1,
        network_mode: NetworkMode::Bridge,
        cpu: None,
        memory_mib: None,
        volumes: Vec::new(),
        containers: containers
            .iter()
            .map(|(name, _, _)| ContainerDefinition::new(*name, "busybox"))
            .collect(),
        pid_mode: None,
        ipc_mode: None,
    };
    let mut task = Task::new(id.to_string(), "default", definition, 1, 0);
    for (container, (_, status, docker_id)) in task.containers.iter_mut().zip(containers) {
        container.known_status = *status;
        container.docker_id = docker_id.map(str::to_string);
    }
    task.known_status = task
        .containers
        .iter()
        .map(|container: &Container| container.known_status.task_status())
        .min()
        .unwrap_or_default();
    task
}

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let path = std::env::temp_dir().join(format!(
            "deckhand-metrics-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Scratch(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A page's samples: (name, labels) → the value as written.
type Samples = BTreeMap<(String, Vec<(String, String)>), String>;

/// The page's samples by (name, labels) → value, checking on the way that every sample's family
/// was declared before it with one HELP and one TYPE line.
fn samples(page: &str) -> Samples {
    let mut helped = BTreeSet::new();
    let mut typed: BTreeMap<String, String> = BTreeMap::new();
    let mut found = BTreeMap::new();
    for line in page.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap().to_string();
            assert!(helped.insert(name.clone()), "two HELP lines for {name}");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(helped.contains(name), "TYPE before HELP for {name}");
            assert!(
                typed.insert(name.to_string(), kind.to_string()).is_none(),
                "two TYPE lines for {name}"
            );
            continue;
        }
        let (name, labels, value) =
            read_sample_line(line).unwrap_or_else(|| panic!("malformed line {line:?}"));
        let family = match typed.get(&name) {
            Some(_) => name.clone(),
            None => ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .filter(|base| typed.get(*base).is_some_and(|kind| kind == "histogram"))
                .unwrap_or_else(|| panic!("sample {name} of no declared family"))
                .to_string(),
        };
        if typed[&family] == "counter" {
            assert!(family.ends_with("_total"), "counter {family}");
        }
        assert!(
            found.insert((name, labels), value).is_none(),
            "a series twice: {line}"
        );
    }
    found
}

fn value(samples: &Samples, name: &str, labels: &[(&str, &str)]) -> Option<String> {
    let key = (
        name.to_string(),
        labels
            .iter()
            .map(|(label, value)| (label.to_string(), value.to_string()))
            .collect(),
    );
    samples.get(&key).cloned()
}

fn empty_sources(scratch: &Scratch) -> Sources {
    Sources {
        process: process::ProcessFiles::new(scratch.0.join("no-proc"), scratch.0.join("no-stat")),
        cgroups: cgroup::CgroupRoot::new(scratch.0.join("no-cgroup")),
    }
}

#[test]
fn the_first_scrape_has_every_family_with_counters_at_zero() {
    let scratch = Scratch::new("first");
    let page = scrape(&Metrics::new(), &[], &empty_sources(&scratch));
    let families: Vec<&str> = page
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .collect();
    assert_eq!(
        families,
        [
            "deckhand_build_info gauge",
            "deckhand_tasks gauge",
            "deckhand_containers gauge",
            "deckhand_tasks_stopped_unrequested gauge",
            "deckhand_container_policy_restarts gauge",
            "deckhand_events_total counter",
            "deckhand_container_restarts_total counter",
            "deckhand_docker_requests_total counter",
            "deckhand_docker_request_duration_seconds histogram",
            "deckhand_checkpoint_duration_seconds histogram",
            "deckhand_images_removed_total counter",
            "deckhand_image_disk_used_ratio gauge",
            "deckhand_image_disk_high_ratio gauge",
            "deckhand_docker_up gauge",
            "deckhand_ecs_connected gauge",
            "deckhand_container_memory_usage_bytes gauge",
            "deckhand_container_cpu_usage_seconds_total counter",
            "process_resident_memory_bytes gauge",
            "process_cpu_seconds_total counter",
            "process_open_fds gauge",
            "process_start_time_seconds gauge",
        ]
    );
    let samples = samples(&page);
    assert_eq!(
        value(
            &samples,
            "deckhand_build_info",
            &[("version", crate::VERSION)]
        )
        .as_deref(),
        Some("1")
    );
    for status in ["NONE", "CREATED", "RUNNING", "STOPPED"] {
        assert_eq!(
            value(&samples, "deckhand_tasks", &[("status", status)]).as_deref(),
            Some("0"),
            "{status}"
        );
    }
    for status in ["NONE", "PULLED", "CREATED", "RUNNING", "STOPPED"] {
        assert_eq!(
            value(&samples, "deckhand_containers", &[("status", status)]).as_deref(),
            Some("0"),
            "{status}"
        );
    }
    for name in [
        "deckhand_events_total",
        "deckhand_container_restarts_total",
        "deckhand_images_removed_total",
        "deckhand_checkpoint_duration_seconds_count",
    ] {
        assert_eq!(value(&samples, name, &[]).as_deref(), Some("0"), "{name}");
    }
    // A gauge nobody measured yet has no sample (a 0 would read as a measurement).
    for name in [
        "deckhand_image_disk_used_ratio",
        "deckhand_image_disk_high_ratio",
        "deckhand_docker_up",
        "deckhand_ecs_connected",
    ] {
        assert_eq!(value(&samples, name, &[]), None, "{name}");
    }
    for operation in DockerOperation::ALL {
        for outcome in DockerOutcome::ALL {
            assert_eq!(
                value(
                    &samples,
                    "deckhand_docker_requests_total",
                    &[
                        ("operation", operation.label()),
                        ("outcome", outcome.label())
                    ]
                )
                .as_deref(),
                Some("0")
            );
        }
        assert_eq!(
            value(
                &samples,
                "deckhand_docker_request_duration_seconds_bucket",
                &[("operation", operation.label()), ("le", "+Inf")]
            )
            .as_deref(),
            Some("0")
        );
    }
}

#[test]
fn statuses_are_counted_from_the_snapshot() {
    let scratch = Scratch::new("statuses");
    let tasks = [
        task(
            "t1",
            "web",
            &[
                ("a", ContainerStatus::Running, Some(ID_A)),
                ("b", ContainerStatus::Running, Some(ID_B)),
            ],
        ),
        task(
            "t2",
            "web",
            &[
                ("a", ContainerStatus::Pulled, None),
                ("b", ContainerStatus::None, None),
            ],
        ),
        task("t3", "batch", &[("only", ContainerStatus::Stopped, None)]),
    ];
    let samples = samples(&scrape(&Metrics::new(), &tasks, &empty_sources(&scratch)));
    let expected_tasks = [
        ("NONE", "1"),
        ("CREATED", "0"),
        ("RUNNING", "1"),
        ("STOPPED", "1"),
    ];
    for (status, count) in expected_tasks {
        assert_eq!(
            value(&samples, "deckhand_tasks", &[("status", status)]).as_deref(),
            Some(count),
            "{status}"
        );
    }
    let expected_containers = [
        ("NONE", "1"),
        ("PULLED", "1"),
        ("CREATED", "0"),
        ("RUNNING", "2"),
        ("STOPPED", "1"),
    ];
    for (status, count) in expected_containers {
        assert_eq!(
            value(&samples, "deckhand_containers", &[("status", status)]).as_deref(),
            Some(count),
            "{status}"
        );
    }
}

#[test]
fn bumped_counters_and_histograms_show_on_the_page() {
    let scratch = Scratch::new("bumped");
    let metrics = Metrics::new();
    metrics.event_recorded();
    metrics.event_recorded();
    metrics.container_restarted();
    metrics.images_removed(3);
    metrics.set_image_disk_used_ratio(0.875);
    let ms = Duration::from_millis;
    metrics.observe_docker_request(DockerOperation::Pull, DockerOutcome::Ok, ms(1500));
    metrics.observe_docker_request(DockerOperation::Pull, DockerOutcome::Timeout, ms(400_000));
    metrics.observe_docker_request(DockerOperation::Stop, DockerOutcome::Unreachable, ms(3));
    metrics.observe_checkpoint(ms(2));
    metrics.observe_checkpoint(Duration::from_micros(700));
    let samples = samples(&scrape(&metrics, &[], &empty_sources(&scratch)));
    let check = |name: &str, labels: &[(&str, &str)], expected: &str| {
        assert_eq!(
            value(&samples, name, labels).as_deref(),
            Some(expected),
            "{name} {labels:?}"
        );
    };
    check("deckhand_events_total", &[], "2");
    check("deckhand_container_restarts_total", &[], "1");
    check("deckhand_images_removed_total", &[], "3");
    check("deckhand_image_disk_used_ratio", &[], "0.875");
    let pull = |outcome| [("operation", "pull"), ("outcome", outcome)];
    check("deckhand_docker_requests_total", &pull("ok"), "1");
    check("deckhand_docker_requests_total", &pull("timeout"), "1");
    check("deckhand_docker_requests_total", &pull("error"), "0");
    check(
        "deckhand_docker_requests_total",
        &[("operation", "stop"), ("outcome", "unreachable")],
        "1",
    );
    let pull_bucket = |le| [("operation", "pull"), ("le", le)];
    let name = "deckhand_docker_request_duration_seconds_bucket";
    check(name, &pull_bucket("1"), "0");
    check(name, &pull_bucket("2.5"), "1");
    check(name, &pull_bucket("300"), "1");
    check(name, &pull_bucket("+Inf"), "2");
    check(
        "deckhand_docker_request_duration_seconds_sum",
        &[("operation", "pull")],
        "401.5",
    );
    check(
        "deckhand_docker_request_duration_seconds_count",
        &[("operation", "pull")],
        "2",
    );
    check(name, &[("operation", "stop"), ("le", "0.005")], "1");
    let name = "deckhand_checkpoint_duration_seconds_bucket";
    check(name, &[("le", "0.0005")], "0");
    check(name, &[("le", "0.001")], "1");
    check(name, &[("le", "0.0025")], "2");
    check(name, &[("le", "+Inf")], "2");
    check("deckhand_checkpoint_duration_seconds_count", &[], "2");
    check("deckhand_checkpoint_duration_seconds_sum", &[], "0.0027");

    // A ratio stays within 0–1, and a NaN is no sample: the last one stays.
    for (set, shown) in [(1.5, 1.0), (-0.1, 0.0), (0.25, 0.25), (f64::NAN, 0.25)] {
        metrics.set_image_disk_used_ratio(set);
        assert_eq!(metrics.image_disk_used_ratio(), Some(shown), "{set}");
    }
}

#[test]
fn measured_gauges_appear_with_their_first_measurement() {
    let scratch = Scratch::new("gauges");
    let metrics = Metrics::new();
    let page = |metrics: &Metrics| samples(&scrape(metrics, &[], &empty_sources(&scratch)));
    let shown = |samples: &Samples, name: &str| value(samples, name, &[]);

    // (what happens, then the series shown: docker_up, ecs_connected, disk used, disk high)
    type Step = (&'static str, fn(&Metrics), [Option<&'static str>; 4]);
    let steps: [Step; 7] = [
        ("nothing measured", |_| {}, [None, None, None, None]),
        (
            "a Docker call timed out: says nothing about Docker",
            |m| {
                m.observe_docker_request(
                    DockerOperation::Inspect,
                    DockerOutcome::Timeout,
                    Duration::ZERO,
                )
            },
            [None, None, None, None],
        ),
        (
            "Docker refused a call: it answered",
            |m| {
                m.observe_docker_request(
                    DockerOperation::Create,
                    DockerOutcome::Error,
                    Duration::ZERO,
                )
            },
            [Some("1"), None, None, None],
        ),
        (
            "Docker's socket unreachable",
            |m| m.docker_answered(DockerOutcome::Unreachable),
            [Some("0"), None, None, None],
        ),
        (
            "the ECS connection failed",
            |m| m.set_ecs_connected(false),
            [Some("0"), Some("0"), None, None],
        ),
        (
            "the disk sampled, and the ECS connection opened",
            |m| {
                m.set_ecs_connected(true);
                m.set_image_disk_used_ratio(0.5);
                m.set_image_disk_high_ratio(0.85);
            },
            [Some("0"), Some("1"), Some("0.5"), Some("0.85")],
        ),
        (
            "Docker answered again",
            |m| m.docker_answered(DockerOutcome::Ok),
            [Some("1"), Some("1"), Some("0.5"), Some("0.85")],
        ),
    ];
    for (step, act, expected) in steps {
        act(&metrics);
        let samples = page(&metrics);
        let names = [
            "deckhand_docker_up",
            "deckhand_ecs_connected",
            "deckhand_image_disk_used_ratio",
            "deckhand_image_disk_high_ratio",
        ];
        for (name, expected) in names.iter().zip(expected) {
            assert_eq!(shown(&samples, name).as_deref(), expected, "{step}: {name}");
        }
    }
}

#[test]
fn unrequested_stops_by_family_and_restart_counts_by_container() {
    let scratch = Scratch::new("stops");
    use ContainerStatus::{Running, Stopped};
    let mut crashed = task("t-crashed", "web", &[("app", Stopped, Some(ID_A))]);
    crashed.containers[0].restart_count = 4;
    let mut asked = task("t-asked", "web", &[("app", Stopped, None)]);
    asked.stop_sequence = 7;
    let crashed_too = task("t-crashed-2", "web", &[("app", Stopped, None)]);
    let mut running = task("t-running", "db", &[("db", Running, Some(ID_B))]);
    running.containers[0].restart_count = 1;
    let tasks = [crashed, asked, crashed_too, running];
    let samples = samples(&scrape(&Metrics::new(), &tasks, &empty_sources(&scratch)));
    let stopped = |family| {
        value(
            &samples,
            "deckhand_tasks_stopped_unrequested",
            &[("family", family)],
        )
    };
    assert_eq!(
        stopped("web").as_deref(),
        Some("2"),
        "the asked-for stop is not counted"
    );
    assert_eq!(stopped("db"), None, "no series for a family with none");
    let restarts = |task, family, container| {
        value(
            &samples,
            "deckhand_container_policy_restarts",
            &[("task", task), ("family", family), ("container", container)],
        )
    };
    assert_eq!(restarts("t-crashed", "web", "app").as_deref(), Some("4"));
    assert_eq!(restarts("t-asked", "web", "app").as_deref(), Some("0"));
    assert_eq!(restarts("t-running", "db", "db").as_deref(), Some("1"));
}

#[test]
fn running_containers_get_memory_and_cpu_series_with_escaped_labels() {
    let scratch = Scratch::new("containers");
    let root = scratch.0.join("cgroup");
    for (id, memory, cpu_usec) in [(ID_A, "1000", "2000000"), (ID_B, "3000", "500000")] {
        let directory = root.join("system.slice").join(format!("docker-{id}.scope"));
        std::fs::create_dir_all(&directory).unwrap();
        std::fs::write(directory.join("memory.current"), format!("{memory}\n")).unwrap();
        std::fs::write(
            directory.join("cpu.stat"),
            format!("usage_usec {cpu_usec}\nuser_usec 0\n"),
        )
        .unwrap();
    }
    let family = "we\"ird\\family\n";
    let tasks = [
        task(
            "t1",
            family,
            &[
                ("a", ContainerStatus::Running, Some(ID_A)),
                // Stopped: its cgroup is not read even though it is there.
                ("b", ContainerStatus::Stopped, Some(ID_B)),
                ("c", ContainerStatus::Running, None),
            ],
        ),
        // A running container whose files are not there: no series.
        task(
            "t2",
            "web",
            &[("d", ContainerStatus::Running, Some("cccccccccccc"))],
        ),
    ];
    let sources = Sources {
        process: process::ProcessFiles::new(scratch.0.join("none"), scratch.0.join("none")),
        cgroups: cgroup::CgroupRoot::new(&root),
    };
    let page = scrape(&Metrics::new(), &tasks, &sources);
    assert!(
        page.contains(
            "deckhand_container_memory_usage_bytes{task=\"t1\",family=\"we\\\"ird\\\\family\\n\",container=\"a\"} 1000\n"
        ),
        "{page}"
    );
    let samples = samples(&page);
    let labels = [("task", "t1"), ("family", family), ("container", "a")];
    assert_eq!(
        value(
            &samples,
            "deckhand_container_cpu_usage_seconds_total",
            &labels
        )
        .as_deref(),
        Some("2")
    );
    let container_series = samples
        .keys()
        .filter(|(name, _)| {
            name.starts_with("deckhand_container_") && name != "deckhand_containers"
        })
        .filter(|(name, _)| {
            name != "deckhand_container_restarts_total"
                && name != "deckhand_container_policy_restarts"
        })
        .count();
    assert_eq!(container_series, 2, "{page}");
}

#[test]
fn the_global_metrics_are_one_instance() {
    let before = global().images_removed_total();
    global().images_removed(1);
    assert!(global().images_removed_total() > before);
}
