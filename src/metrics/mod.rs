//! The agent's Prometheus metrics: counters and histograms that the engine, its Docker workers,
//! the state store and the event log bump as things happen ([`Metrics`], one per process:
//! [`global`]), and the page `GET /metrics` answers ([`scrape`]), written in the text exposition
//! format by [`exposition`].
//!
//! A scrape must be cheap and must never call Docker: it reads these atomics, counts statuses
//! in the engine's task snapshot, and reads a few small files — `/proc/self/…` for the
//! `process_*` metrics ([`process`]) and each running container's cgroup files for its memory
//! and CPU ([`cgroup`]). A file that cannot be read leaves its series out; nothing on the page
//! depends on Docker answering.
//!
//! Bumping is one relaxed atomic add (two or three for a histogram), from any thread, with no
//! lock. The counters start at 0 with the process, as Prometheus expects of a counter (it
//! handles the reset a restart makes). A gauge that deckhand measures ([`Gauge`]: the image
//! disk's usage, whether Docker answers, whether the ECS connection is up) is absent from the
//! page until its first measurement: a 0 there would be a reading nobody took, and an alert
//! would take it for one.

pub mod cgroup;
pub mod exposition;
pub mod process;
pub mod usage;

use crate::task::{ContainerStatus, Task, TaskStatus};
use exposition::{Exposition, HistogramSnapshot, MetricType};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A Docker call deckhand makes, as the `operation` label of the Docker request metrics names it.
/// Every call a task's Docker workers make is one of these (see `engine/workers.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DockerOperation {
    Pull,
    ImageInspect,
    Create,
    Start,
    Stop,
    Inspect,
    Remove,
    List,
    Events,
    Ping,
    VolumeInspect,
    VolumeCreate,
    VolumeRemove,
    ImageImport,
}

impl DockerOperation {
    pub const ALL: [DockerOperation; 14] = [
        DockerOperation::Pull,
        DockerOperation::ImageInspect,
        DockerOperation::Create,
        DockerOperation::Start,
        DockerOperation::Stop,
        DockerOperation::Inspect,
        DockerOperation::Remove,
        DockerOperation::List,
        DockerOperation::Events,
        DockerOperation::Ping,
        DockerOperation::VolumeInspect,
        DockerOperation::VolumeCreate,
        DockerOperation::VolumeRemove,
        DockerOperation::ImageImport,
    ];

    /// The `operation` label value.
    pub fn label(self) -> &'static str {
        match self {
            DockerOperation::Pull => "pull",
            DockerOperation::ImageInspect => "image_inspect",
            DockerOperation::Create => "create",
            DockerOperation::Start => "start",
            DockerOperation::Stop => "stop",
            DockerOperation::Inspect => "inspect",
            DockerOperation::Remove => "remove",
            DockerOperation::List => "list",
            DockerOperation::Events => "events",
            DockerOperation::Ping => "ping",
            DockerOperation::VolumeInspect => "volume_inspect",
            DockerOperation::VolumeCreate => "volume_create",
            DockerOperation::VolumeRemove => "volume_remove",
            DockerOperation::ImageImport => "image_import",
        }
    }

    /// How log lines and error messages name the call (`image inspect`).
    pub fn description(self) -> &'static str {
        match self {
            DockerOperation::ImageInspect => "image inspect",
            DockerOperation::VolumeInspect => "volume inspect",
            DockerOperation::VolumeCreate => "volume create",
            DockerOperation::VolumeRemove => "volume remove",
            DockerOperation::ImageImport => "image import",
            other => other.label(),
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// How a Docker call ended, as the `outcome` label names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DockerOutcome {
    /// Docker answered with success.
    Ok,
    /// Docker answered with a refusal or something deckhand could not use (or the call
    /// panicked inside deckhand).
    Error,
    /// The call did not finish within its deadline.
    Timeout,
    /// Docker's socket could not be reached.
    Unreachable,
}

impl DockerOutcome {
    pub const ALL: [DockerOutcome; 4] = [
        DockerOutcome::Ok,
        DockerOutcome::Error,
        DockerOutcome::Timeout,
        DockerOutcome::Unreachable,
    ];

    pub fn label(self) -> &'static str {
        match self {
            DockerOutcome::Ok => "ok",
            DockerOutcome::Error => "error",
            DockerOutcome::Timeout => "timeout",
            DockerOutcome::Unreachable => "unreachable",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Upper bounds (seconds) of the Docker request duration buckets: from a quick inspect to a
/// pull that takes minutes.
pub const DOCKER_REQUEST_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// Upper bounds (seconds) of the checkpoint duration buckets: a write with two fsyncs takes
/// about a millisecond on an SSD, tens on an SD card.
pub const CHECKPOINT_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// The most bounds a [`Histogram`] holds.
const MAX_BUCKETS: usize = 16;

/// A histogram of durations over fixed bucket bounds, lock-free: one atomic per bucket (not
/// cumulative; the page adds them up), one for what falls above the last bound, and the sum in
/// nanoseconds. The count is the sum of the buckets, so a page never shows a `+Inf` bucket that
/// disagrees with `_count`, whatever is observed while it is read.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: [AtomicU64; MAX_BUCKETS],
    overflow: AtomicU64,
    sum_nanos: AtomicU64,
}

impl Histogram {
    /// `bounds` ascending, at most 16 of them (the rest are ignored).
    pub const fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: [const { AtomicU64::new(0) }; MAX_BUCKETS],
            overflow: AtomicU64::new(0),
            sum_nanos: AtomicU64::new(0),
        }
    }

    fn bounds(&self) -> &'static [f64] {
        let used = self.bounds.len().min(MAX_BUCKETS);
        &self.bounds[..used]
    }

    pub fn observe(&self, duration: Duration) {
        let seconds = duration.as_secs_f64();
        match self.bounds().iter().position(|bound| seconds <= *bound) {
            Some(index) => self.counts[index].fetch_add(1, Ordering::Relaxed),
            None => self.overflow.fetch_add(1, Ordering::Relaxed),
        };
        let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> HistogramSnapshot<'static> {
        let bounds = self.bounds();
        HistogramSnapshot {
            bounds,
            counts: self.counts[..bounds.len()]
                .iter()
                .map(|count| count.load(Ordering::Relaxed))
                .collect(),
            overflow: self.overflow.load(Ordering::Relaxed),
            sum: self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        let snapshot = self.snapshot();
        snapshot.counts.iter().sum::<u64>() + snapshot.overflow
    }
}

const OPERATIONS: usize = DockerOperation::ALL.len();
const OUTCOMES: usize = DockerOutcome::ALL.len();

/// A gauge deckhand measures: `f64` bits, or nothing until the first measurement.
#[derive(Debug)]
pub struct Gauge(AtomicU64);

impl Gauge {
    /// The bits of no measurement yet: a NaN no `set` stores (a NaN is not stored at all).
    const UNSET: u64 = u64::MAX;

    pub const fn new() -> Gauge {
        Gauge(AtomicU64::new(Gauge::UNSET))
    }

    /// Records a measurement; a NaN is none (the gauge keeps what it had).
    pub fn set(&self, value: f64) {
        if !value.is_nan() {
            self.0.store(value.to_bits(), Ordering::Relaxed);
        }
    }

    /// The last measurement, `None` before the first.
    pub fn get(&self) -> Option<f64> {
        let bits = self.0.load(Ordering::Relaxed);
        (bits != Gauge::UNSET).then(|| f64::from_bits(bits))
    }

    /// The family's HELP and TYPE, and its sample once measured.
    fn write(&self, page: &mut Exposition, name: &str, help: &str) {
        page.family(name, help, MetricType::Gauge);
        if let Some(value) = self.get() {
            page.sample(name, &[], value);
        }
    }
}

impl Default for Gauge {
    fn default() -> Gauge {
        Gauge::new()
    }
}

/// Everything deckhand counts. One per process ([`global`]); tests make their own to check
/// the page.
#[derive(Debug)]
pub struct Metrics {
    events: AtomicU64,
    container_restarts: AtomicU64,
    images_removed: AtomicU64,
    image_disk_used_ratio: Gauge,
    image_disk_high_ratio: Gauge,
    docker_up: Gauge,
    ecs_connected: Gauge,
    docker_requests: [[AtomicU64; OUTCOMES]; OPERATIONS],
    docker_request_durations: [Histogram; OPERATIONS],
    checkpoint_durations: Histogram,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    pub const fn new() -> Metrics {
        Metrics {
            events: AtomicU64::new(0),
            container_restarts: AtomicU64::new(0),
            images_removed: AtomicU64::new(0),
            image_disk_used_ratio: Gauge::new(),
            image_disk_high_ratio: Gauge::new(),
            docker_up: Gauge::new(),
            ecs_connected: Gauge::new(),
            docker_requests: [const { [const { AtomicU64::new(0) }; OUTCOMES] }; OPERATIONS],
            docker_request_durations: [const { Histogram::new(&DOCKER_REQUEST_BUCKETS) };
                OPERATIONS],
            checkpoint_durations: Histogram::new(&CHECKPOINT_BUCKETS),
        }
    }

    /// A state-change event was recorded in the event log.
    pub fn event_recorded(&self) {
        self.events.fetch_add(1, Ordering::Relaxed);
    }

    /// A restart policy restarted a container (Docker confirmed the start).
    pub fn container_restarted(&self) {
        self.container_restarts.fetch_add(1, Ordering::Relaxed);
    }

    /// Image cleanup removed `count` images.
    pub fn images_removed(&self, count: u64) {
        self.images_removed.fetch_add(count, Ordering::Relaxed);
    }

    /// The share (0–1) of the file system holding Docker's images that is used, as last
    /// sampled. Clamped into 0–1; a NaN is no sample.
    pub fn set_image_disk_used_ratio(&self, ratio: f64) {
        self.image_disk_used_ratio.set(ratio.clamp(0.0, 1.0));
    }

    /// The image disk's high mark (`DECKHAND_IMAGE_CLEANUP_DISK_HIGH`) as a share, set when
    /// the disk is sampled, so an alert compares the two series.
    pub fn set_image_disk_high_ratio(&self, ratio: f64) {
        self.image_disk_high_ratio.set(ratio.clamp(0.0, 1.0));
    }

    /// How a call to Docker ended: an answer (of any kind) says Docker is up, an unreachable
    /// socket says it is down, and a deadline that passed says nothing about it.
    pub fn docker_answered(&self, outcome: DockerOutcome) {
        match outcome {
            DockerOutcome::Ok | DockerOutcome::Error => self.docker_up.set(1.0),
            DockerOutcome::Unreachable => self.docker_up.set(0.0),
            DockerOutcome::Timeout => {}
        }
    }

    /// The ACS websocket to ECS opened (`true`) or ended or could not be opened (`false`).
    pub fn set_ecs_connected(&self, connected: bool) {
        self.ecs_connected.set(if connected { 1.0 } else { 0.0 });
    }

    /// One Docker call made, how it ended and how long it took.
    pub fn observe_docker_request(
        &self,
        operation: DockerOperation,
        outcome: DockerOutcome,
        took: Duration,
    ) {
        self.docker_requests[operation.index()][outcome.index()].fetch_add(1, Ordering::Relaxed);
        self.docker_request_durations[operation.index()].observe(took);
        self.docker_answered(outcome);
    }

    /// One task checkpoint written (or tried), and how long it took.
    pub fn observe_checkpoint(&self, took: Duration) {
        self.checkpoint_durations.observe(took);
    }

    pub fn events_total(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    pub fn container_restarts_total(&self) -> u64 {
        self.container_restarts.load(Ordering::Relaxed)
    }

    pub fn images_removed_total(&self) -> u64 {
        self.images_removed.load(Ordering::Relaxed)
    }

    /// `None` until the disk was first sampled.
    pub fn image_disk_used_ratio(&self) -> Option<f64> {
        self.image_disk_used_ratio.get()
    }

    /// 1 when Docker last answered, 0 when it last could not be reached; `None` before any call.
    pub fn docker_up(&self) -> Option<f64> {
        self.docker_up.get()
    }

    /// `None` until the agent first tried to connect to ECS (never, in local mode).
    pub fn ecs_connected(&self) -> Option<f64> {
        self.ecs_connected.get()
    }

    pub fn docker_requests_total(&self, operation: DockerOperation, outcome: DockerOutcome) -> u64 {
        self.docker_requests[operation.index()][outcome.index()].load(Ordering::Relaxed)
    }

    pub fn checkpoints_observed(&self) -> u64 {
        self.checkpoint_durations.count()
    }

    /// This process's counters and histograms onto `page`.
    pub fn write_counters(&self, page: &mut Exposition) {
        page.family(
            "deckhand_events_total",
            "State-change events recorded in the event log since the agent started.",
            MetricType::Counter,
        );
        page.sample_integer("deckhand_events_total", &[], self.events_total());

        page.family(
            "deckhand_container_restarts_total",
            "Containers restarted by their restart policy since the agent started.",
            MetricType::Counter,
        );
        page.sample_integer(
            "deckhand_container_restarts_total",
            &[],
            self.container_restarts_total(),
        );

        page.family(
            "deckhand_docker_requests_total",
            "Docker Engine API calls made by the task workers, by operation and outcome.",
            MetricType::Counter,
        );
        for operation in DockerOperation::ALL {
            for outcome in DockerOutcome::ALL {
                page.sample_integer(
                    "deckhand_docker_requests_total",
                    &[
                        ("operation", operation.label()),
                        ("outcome", outcome.label()),
                    ],
                    self.docker_requests_total(operation, outcome),
                );
            }
        }

        page.family(
            "deckhand_docker_request_duration_seconds",
            "Time Docker Engine API calls of the task workers took, by operation.",
            MetricType::Histogram,
        );
        for operation in DockerOperation::ALL {
            page.histogram(
                "deckhand_docker_request_duration_seconds",
                &[("operation", operation.label())],
                &self.docker_request_durations[operation.index()].snapshot(),
            );
        }

        page.family(
            "deckhand_checkpoint_duration_seconds",
            "Time a task checkpoint took to write durably (encode, write, fsync, rename, fsync \
             the directory).",
            MetricType::Histogram,
        );
        page.histogram(
            "deckhand_checkpoint_duration_seconds",
            &[],
            &self.checkpoint_durations.snapshot(),
        );

        page.family(
            "deckhand_images_removed_total",
            "Images removed by image cleanup since the agent started.",
            MetricType::Counter,
        );
        page.sample_integer(
            "deckhand_images_removed_total",
            &[],
            self.images_removed_total(),
        );

        self.image_disk_used_ratio.write(
            page,
            "deckhand_image_disk_used_ratio",
            "Used share (0-1) of the file system holding Docker's root directory, as last \
             sampled (every 10 s; absent until the first sample).",
        );
        self.image_disk_high_ratio.write(
            page,
            "deckhand_image_disk_high_ratio",
            "The image disk's high mark (DECKHAND_IMAGE_CLEANUP_DISK_HIGH) as a share (0-1): \
             at or above it image cleanup removes images at once (absent until the disk is \
             sampled).",
        );
        self.docker_up.write(
            page,
            "deckhand_docker_up",
            "1 when the Docker Engine last answered the agent, 0 when its socket last could \
             not be reached (absent until the first call).",
        );
        self.ecs_connected.write(
            page,
            "deckhand_ecs_connected",
            "1 while the agent's connection to ECS (the ACS websocket) is open, 0 while it is \
             not (absent when the agent does not join ECS).",
        );
    }
}

static GLOBAL: Metrics = Metrics::new();

/// The process's metrics, which every part of the agent bumps.
pub fn global() -> &'static Metrics {
    &GLOBAL
}

/// Where a scrape reads the files behind its process and container metrics.
#[derive(Debug)]
pub struct Sources {
    pub process: process::ProcessFiles,
    pub cgroups: cgroup::CgroupRoot,
}

impl Default for Sources {
    /// This process's `/proc/self` and the host's `/sys/fs/cgroup`.
    fn default() -> Sources {
        Sources {
            process: process::ProcessFiles::default(),
            cgroups: cgroup::CgroupRoot::default(),
        }
    }
}

/// The `GET /metrics` page: build information, task and container counts by status from
/// `tasks` (the engine's snapshot), the counters of `metrics`, each running container's memory
/// and CPU from its cgroup, and the `process_*` metrics.
pub fn scrape(metrics: &Metrics, tasks: &[Task], sources: &Sources) -> String {
    let mut page = Exposition::with_capacity(24 * 1024 + tasks.len() * 512);

    page.family(
        "deckhand_build_info",
        "Always 1; the version label is the agent's version.",
        MetricType::Gauge,
    );
    page.sample("deckhand_build_info", &[("version", crate::VERSION)], 1.0);

    write_status_counts(&mut page, tasks);
    write_stops_and_restarts(&mut page, tasks);
    metrics.write_counters(&mut page);
    write_container_usage(&mut page, tasks, &sources.cgroups);
    process::write_process_metrics(&mut page, &sources.process.sample());
    page.into_string()
}

/// `deckhand_tasks{status}` and `deckhand_containers{status}`: every status present, 0 or not.
fn write_status_counts(page: &mut Exposition, tasks: &[Task]) {
    let mut task_counts = [0u64; TaskStatus::ALL.len()];
    let mut container_counts = [0u64; ContainerStatus::ALL.len()];
    for task in tasks {
        if let Some(index) = TaskStatus::ALL.iter().position(|s| *s == task.known_status) {
            task_counts[index] += 1;
        }
        for container in &task.containers {
            if let Some(index) = ContainerStatus::ALL
                .iter()
                .position(|s| *s == container.known_status)
            {
                container_counts[index] += 1;
            }
        }
    }
    page.family(
        "deckhand_tasks",
        "Tasks the agent holds (not yet cleaned up), by known status.",
        MetricType::Gauge,
    );
    for (status, count) in TaskStatus::ALL.iter().zip(task_counts) {
        page.sample_integer("deckhand_tasks", &[("status", status.as_str())], count);
    }
    page.family(
        "deckhand_containers",
        "Containers of the tasks the agent holds, by known status.",
        MetricType::Gauge,
    );
    for (status, count) in ContainerStatus::ALL.iter().zip(container_counts) {
        page.sample_integer("deckhand_containers", &[("status", status.as_str())], count);
    }
}

/// Whether a task stopped without being asked: it is STOPPED and no stop command was
/// registered for it (an essential container exited, or it could not start). A stop that
/// comes afterwards (a `deckhand stop`, the file leaving `tasks.d`, ECS) makes it asked for.
pub fn stopped_unrequested(task: &Task) -> bool {
    task.known_status == TaskStatus::Stopped && task.stop_sequence == 0
}

/// `deckhand_tasks_stopped_unrequested{family}`: held tasks that stopped without being asked,
/// per family (only families that have one); `deckhand_container_policy_restarts`: each held
/// container's restarts by its restart policy (ECS's `RestartCount`).
fn write_stops_and_restarts(page: &mut Exposition, tasks: &[Task]) {
    let mut stopped: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    for task in tasks.iter().filter(|task| stopped_unrequested(task)) {
        *stopped.entry(task.family.as_str()).or_default() += 1;
    }
    page.family(
        "deckhand_tasks_stopped_unrequested",
        "Tasks the agent holds that stopped without a stop being asked (an essential container \
         exited, or the task could not start), by family.",
        MetricType::Gauge,
    );
    for (family, count) in stopped {
        page.sample_integer(
            "deckhand_tasks_stopped_unrequested",
            &[("family", family)],
            count,
        );
    }
    page.family(
        "deckhand_container_policy_restarts",
        "Times the restart policy restarted a container of a task the agent holds (ECS's \
         RestartCount).",
        MetricType::Gauge,
    );
    for task in tasks {
        for container in &task.containers {
            page.sample_integer(
                "deckhand_container_policy_restarts",
                &container_labels(task, container.name()),
                u64::from(container.restart_count),
            );
        }
    }
}

/// Memory and CPU of each RUNNING container with a Docker id, from its cgroup files; a
/// container whose files cannot be read has no series.
fn write_container_usage(page: &mut Exposition, tasks: &[Task], cgroups: &cgroup::CgroupRoot) {
    let mut memory: Vec<(&Task, &str, u64)> = Vec::new();
    let mut cpu: Vec<(&Task, &str, f64)> = Vec::new();
    let layouts = cgroups.present_layouts();
    for task in tasks {
        for container in &task.containers {
            if !container.known_status.is_running() {
                continue;
            }
            let Some(docker_id) = container.docker_id.as_deref() else {
                continue;
            };
            let usage = cgroups.container_usage_in(&layouts, docker_id);
            if let Some(bytes) = usage.memory_bytes {
                memory.push((task, container.name(), bytes));
            }
            if let Some(seconds) = usage.cpu_seconds {
                cpu.push((task, container.name(), seconds));
            }
        }
    }
    page.family(
        "deckhand_container_memory_usage_bytes",
        "Memory a running container uses, from its cgroup (memory.current, or \
         memory.usage_in_bytes on cgroup v1).",
        MetricType::Gauge,
    );
    for (task, container, bytes) in memory {
        page.sample_integer(
            "deckhand_container_memory_usage_bytes",
            &container_labels(task, container),
            bytes,
        );
    }
    page.family(
        "deckhand_container_cpu_usage_seconds_total",
        "CPU time a running container has used, from its cgroup (cpu.stat usage_usec, or \
         cpuacct.usage on cgroup v1).",
        MetricType::Counter,
    );
    for (task, container, seconds) in cpu {
        page.sample(
            "deckhand_container_cpu_usage_seconds_total",
            &container_labels(task, container),
            seconds,
        );
    }
}

fn container_labels<'a>(task: &'a Task, container: &'a str) -> [(&'static str, &'a str); 3] {
    [
        ("task", task.id.as_str()),
        ("family", task.family.as_str()),
        ("container", container),
    ]
}

#[cfg(test)]
mod tests;
