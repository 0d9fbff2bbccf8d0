//! What one bench run found, and its two renderings: the table printed at the end and
//! `docs/PERFORMANCE.md` (machine, versions, commands, figures, targets, date). The analysis
//! that explains the figures is hand-written in `bench/NOTES.md` and copied in below them, so
//! regenerating the figures never loses it.

use crate::footprint::FootprintFigures;
use crate::latency::{p50_p99, ReactionSamples, StartSamples};
use crate::stats::{format_mib, format_millis, format_ratio, median, millis};
use crate::workload::Shape;
use deckhand::docker::DockerClient;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

pub struct Settings {
    /// `BENCH_ONLY`: the groups to measure (`None`: all).
    pub only: Option<Vec<String>>,
    pub quick: bool,
    pub start_rounds: usize,
    pub reaction_runs: usize,
    pub idle_window: Duration,
    pub scale_tasks: usize,
    pub checkpoint_changes: usize,
    /// P7: one-container tasks submitted at once to an agent on real Docker.
    pub docker_scale_tasks: usize,
}

impl Settings {
    pub fn wants(&self, group: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|groups| groups.iter().any(|wanted| wanted == group))
    }
}

#[derive(Default)]
pub struct Figures {
    pub date: String,
    pub machine: Vec<(String, String)>,
    pub compose_version: Option<String>,
    pub start: Vec<(Shape, StartSamples)>,
    pub reaction: Option<ReactionSamples>,
    /// P2 again through the agent on slow storage.
    pub reaction_slow: Option<ReactionSamples>,
    /// P2 again through the agent whose state is on tmpfs (syncs cost nothing).
    pub reaction_tmpfs: Option<ReactionSamples>,
    /// What the slow-storage shim adds to each sync.
    pub sync_delay_ms: u64,
    /// The syncs phase's rows (`syncs.rs`).
    pub syncs: Option<Value>,
    pub footprint: Option<FootprintFigures>,
    /// The same agent with glibc's default malloc settings (`DECKHAND_MALLOC_TUNING=off`).
    pub footprint_tunables: Option<FootprintFigures>,
    /// P7: one-container tasks at once on Docker against the same calls made directly.
    pub docker_scale: Option<crate::docker_scale::DockerScale>,
    pub scale: Option<Value>,
    pub state: Option<Value>,
    pub elapsed: Duration,
}

fn command_output(program: &str, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".to_string())
}

fn proc_line(file: &str, key: &str) -> String {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix(key))
                .map(|rest| {
                    rest.trim_start_matches([' ', '\t', ':', '='])
                        .trim()
                        .trim_matches('"')
                        .to_string()
                })
        })
        .unwrap_or_else(|| "unknown".to_string())
}

/// The 1, 5 and 15 minute load averages: other work on the machine moves every figure.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

impl Figures {
    pub fn collect_machine(client: &DockerClient, compose_version: Option<String>) -> Figures {
        let docker = client
            .version()
            .map(|version| format!("{} (API {})", version.version, version.api_version))
            .unwrap_or_else(|error| format!("unknown ({error})"));
        let cores = std::thread::available_parallelism().map_or(0, usize::from);
        let machine = vec![
            (
                "CPU".to_string(),
                format!("{} × {}", cores, proc_line("/proc/cpuinfo", "model name")),
            ),
            ("memory".to_string(), proc_line("/proc/meminfo", "MemTotal")),
            (
                "OS".to_string(),
                proc_line("/etc/os-release", "PRETTY_NAME"),
            ),
            ("kernel".to_string(), command_output("uname", &["-r"])),
            ("Docker Engine".to_string(), docker),
            (
                "docker-compose".to_string(),
                compose_version
                    .clone()
                    .unwrap_or_else(|| "not installed: compose column empty".to_string()),
            ),
            ("rustc".to_string(), command_output("rustc", &["--version"])),
            ("load average at start".to_string(), load_average()),
        ];
        Figures {
            date: command_output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
            machine,
            compose_version,
            ..Figures::default()
        }
    }
}

fn met(condition: bool) -> &'static str {
    if condition {
        "met"
    } else {
        "**missed**"
    }
}

fn number(value: &Value, key: &str) -> f64 {
    value[key].as_f64().unwrap_or(f64::NAN)
}

fn bytes(value: &Value, key: &str) -> u64 {
    value[key].as_u64().unwrap_or(0)
}

const MIB: u64 = 1024 * 1024;

/// The smallest write a sync makes the device do: one 4 KiB block.
const DISK_BLOCK: u64 = 4096;

/// `a` when every value is `a`, `a–b` for a range, `-` for none.
fn format_range(values: &[u64]) -> String {
    match (values.iter().min(), values.iter().max()) {
        (Some(low), Some(high)) if low == high => low.to_string(),
        (Some(low), Some(high)) => format!("{low}–{high}"),
        _ => "-".to_string(),
    }
}

/// `1,234` (the bytes columns).
fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Byte ranges, thousands separated.
fn format_byte_range(values: &[u64]) -> String {
    match (values.iter().min(), values.iter().max()) {
        (Some(low), Some(high)) if low == high => format!("{} B", thousands(*low)),
        (Some(low), Some(high)) => format!("{}–{} B", thousands(*low), thousands(*high)),
        _ => "-".to_string(),
    }
}

/// Median and range of per-run counts: `2 (1–3)`, or `2` when all are equal.
fn format_counts(values: &[u64]) -> String {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    match (sorted.first(), sorted.last()) {
        (Some(low), Some(high)) if low == high => low.to_string(),
        (Some(low), Some(high)) => format!("{} ({low}–{high})", sorted[(sorted.len() - 1) / 2]),
        _ => "-".to_string(),
    }
}

/// One phase's figures over every life of one task shape.
#[derive(Default)]
struct PhaseCounts {
    syncs: Vec<u64>,
    file_syncs: Vec<u64>,
    directory_syncs: Vec<u64>,
    bytes_written: Vec<u64>,
    disk_minimum: Vec<u64>,
    logical_bytes: Vec<u64>,
}

impl PhaseCounts {
    fn push(&mut self, file_syncs: u64, directory_syncs: u64, bytes: u64, logical: u64) {
        let syncs = file_syncs + directory_syncs;
        self.syncs.push(syncs);
        self.file_syncs.push(file_syncs);
        self.directory_syncs.push(directory_syncs);
        self.bytes_written.push(bytes);
        self.disk_minimum.push(syncs * DISK_BLOCK);
        self.logical_bytes.push(logical);
    }
}

const LIFE_PHASES: [&str; 4] = ["submit", "start", "stop", "exit"];

/// The syncs phase's rows of one task shape, by phase (in `LIFE_PHASES` order) and for the
/// whole life (last), each over every life measured.
fn phase_counts(syncs: &Value, containers: u64) -> Vec<(&'static str, PhaseCounts)> {
    let rows: Vec<&Value> = syncs["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|row| row["containers"].as_u64() == Some(containers))
        .collect();
    let mut out: Vec<(&'static str, PhaseCounts)> = LIFE_PHASES
        .iter()
        .map(|phase| (*phase, PhaseCounts::default()))
        .collect();
    let mut whole = PhaseCounts::default();
    let lives: std::collections::BTreeSet<u64> =
        rows.iter().filter_map(|row| row["life"].as_u64()).collect();
    for life in lives {
        let mut totals = [0u64; 4];
        for row in rows.iter().filter(|row| row["life"].as_u64() == Some(life)) {
            let figures = [
                bytes(row, "file_syncs"),
                bytes(row, "directory_syncs"),
                bytes(row, "bytes_written"),
                bytes(row, "logical_bytes"),
            ];
            if let Some((_, counts)) = out
                .iter_mut()
                .find(|(phase, _)| row["phase"].as_str() == Some(phase))
            {
                counts.push(figures[0], figures[1], figures[2], figures[3]);
            }
            for (total, figure) in totals.iter_mut().zip(figures) {
                *total += figure;
            }
        }
        whole.push(totals[0], totals[1], totals[2], totals[3]);
    }
    out.push(("whole life", whole));
    out
}

/// Syncs of a 1-container task on its start path (submit + start) and exit path, per life.
fn one_container_paths(syncs: &Value) -> (Vec<u64>, Vec<u64>) {
    let phases = phase_counts(syncs, 1);
    let of = |name: &str| {
        phases
            .iter()
            .find(|(phase, _)| *phase == name)
            .map(|(_, counts)| counts.syncs.clone())
            .unwrap_or_default()
    };
    let start: Vec<u64> = of("submit")
        .iter()
        .zip(of("start"))
        .map(|(submit, start)| submit + start)
        .collect();
    (start, of("exit"))
}

/// The figures as Markdown tables (also what the bench prints).
pub fn table(figures: &Figures) -> String {
    let mut out = String::new();
    // Only the groups measured get a table (BENCH_ONLY).
    if !figures.start.is_empty() {
        out.push_str("### P1 start latency (submit → task RUNNING), medians\n\n");
        let delay = figures.sync_delay_ms;
        out.push_str(&format!("| task | deckhand | deckhand, state on tmpfs ² | deckhand, slow storage (each sync +{delay} ms) ³ | direct, concurrent | direct, sequential | docker-compose up -d | deckhand / limit | slow storage / limit | deckhand / compose | syncs to RUNNING on slow storage ³ | runs |\n"));
        out.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (shape, samples) in &figures.start {
            let deckhand = median(&samples.deckhand);
            let slow = median(&samples.deckhand_slow);
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                shape.label(),
                format_millis(deckhand),
                format_millis(median(&samples.deckhand_on_tmpfs)),
                format_millis(slow),
                format_millis(median(&samples.direct_concurrent)),
                format_millis(median(&samples.direct_sequential)),
                format_millis(median(&samples.compose)),
                format_ratio(deckhand, samples.limit()),
                format_ratio(slow, samples.limit()),
                format_ratio(deckhand, median(&samples.compose)),
                format_counts(&samples.slow_start_syncs),
                samples.deckhand.len(),
            ));
        }
        out.push_str(&format!("\nThe limit is the faster of the two direct orders; for a dependency chain it is the order ECS's `dependsOn` (START) allows, each link created and started after the one before it started (the `direct, sequential` column), and the `direct, concurrent` column shows the physical best for reference (every link created at once, started in order), which those semantics do not allow. ² The same agent with `ECS_DATADIR` on tmpfs, where fsync costs nothing: the difference from the first column is what writing every change durably costs on this disk. ³ The same agent with its state on this disk and an LD_PRELOAD shim (`benches/agent/slow_sync.c`) that sleeps {delay} ms before every fsync and fdatasync, as on an SD card or eMMC; the last column is the number of syncs the shim counted from the submit to the RUNNING event's arrival (median, and the range over the runs).\n\n"));
    }
    if let Some(reaction) = &figures.reaction {
        out.push_str("### P2 reaction time (Docker `die` → task STOPPED event)\n\n");
        out.push_str("| measured to | p50 | p99 | max | runs |\n|---|---|---|---|---|\n");
        let mut rows = vec![
            (
                "the event arriving at an API client (long poll)".to_string(),
                &reaction.to_arrival,
            ),
            (
                "the event's own time (agent clock, whole milliseconds)".to_string(),
                &reaction.to_recorded,
            ),
            (
                "(deckhand's part: the bench's own `die` arrival → the STOPPED event's arrival)"
                    .to_string(),
                &reaction.deckhand_part,
            ),
            (
                "(Docker's part: the `die` event arriving at the bench's own event subscription)"
                    .to_string(),
                &reaction.die_delivery,
            ),
        ];
        if let Some(tmpfs) = &figures.reaction_tmpfs {
            rows.push((
                "state on tmpfs (syncs cost nothing): the event arriving at an API client"
                    .to_string(),
                &tmpfs.to_arrival,
            ));
            rows.push((
                "(state on tmpfs: deckhand's part)".to_string(),
                &tmpfs.deckhand_part,
            ));
        }
        let delay = figures.sync_delay_ms;
        if let Some(slow) = &figures.reaction_slow {
            rows.push((
                format!("slow storage, each sync +{delay} ms: the event arriving at an API client"),
                &slow.to_arrival,
            ));
            rows.push((
                format!("(slow storage, each sync +{delay} ms: deckhand's part)"),
                &slow.deckhand_part,
            ));
        }
        for (label, samples) in rows {
            let (p50, p99) = p50_p99(samples);
            out.push_str(&format!(
                "| {label} | {} | {} | {} | {} |\n",
                format_millis(p50),
                format_millis(p99),
                format_millis(samples.iter().max().copied()),
                samples.len()
            ));
        }
        out.push('\n');
        if let Some(slow) = &figures.reaction_slow {
            let (own_p50, _) = p50_p99(&reaction.deckhand_part);
            let (slow_own_p50, _) = p50_p99(&slow.deckhand_part);
            let rise = match (slow_own_p50, own_p50) {
                (Some(slow), Some(disk)) => format!("{:.1} ms", millis(slow) - millis(disk)),
                _ => "-".to_string(),
            };
            out.push_str(&format!(
                "Syncs the shim counted on slow storage between the kill and the STOPPED event's arrival: {} (median, and the range over the runs); deckhand's part rose by {rise} at the median over the normal disk's, against {} ms added to each sync.\n\n",
                format_counts(&slow.exit_syncs),
                figures.sync_delay_ms,
            ));
        }
    }
    if let Some(footprint) = &figures.footprint {
        out.push_str("### P3 footprint of `deckhand run`, P5 idle CPU\n\n");
        out.push_str("| running tasks | RSS | PSS | threads | RSS: code and other files | RSS: anonymous | of which thread stacks |\n|---|---|---|---|---|---|---|\n");
        let mut rows = vec![
            ("0".to_string(), footprint.idle),
            ("10".to_string(), footprint.with_10),
            ("100".to_string(), footprint.with_100),
        ];
        if let Some(tuned) = &figures.footprint_tunables {
            rows.push(("0, glibc's malloc defaults ¹".to_string(), tuned.idle));
            rows.push(("100, glibc's malloc defaults ¹".to_string(), tuned.with_100));
        }
        for (tasks, memory) in rows {
            out.push_str(&format!(
                "| {tasks} | {} | {} | {} | {} | {} | {} ({} stacks, {:.0} KiB each) |\n",
                format_mib(memory.rss_bytes),
                format_mib(memory.pss_bytes),
                memory.threads,
                format_mib(memory.rss_file_bytes),
                format_mib(memory.rss_anon_bytes),
                format_mib(memory.stack_rss_bytes),
                memory.stacks,
                memory.stack_rss_bytes as f64 / 1024.0 / (memory.stacks.max(1) as f64),
            ));
        }
        if figures.footprint_tunables.is_some() {
            out.push_str(&format!(
                "\n¹ `DECKHAND_MALLOC_TUNING=off`: the agent runs with glibc's default malloc settings instead of its own (`GLIBC_TUNABLES={}`: no per-thread cache, one arena).\n",
                crate::ALLOCATOR_TUNABLES
            ));
        }
        out.push_str(&format!(
            "\nPeak RSS {}; stripped release binary {} ({} bytes); 90 tasks submitted at once reached RUNNING in {:.1} s; SIGTERM → exit with 100 stopped tasks {:.0} ms.\n\n",
            format_mib(footprint.peak_rss_bytes),
            format_mib(footprint.binary_bytes),
            footprint.binary_bytes,
            footprint.submit_100.as_secs_f64(),
            millis(footprint.shutdown),
        ));
        out.push_str(&format!(
            "P5: {:.2} CPU seconds used over {} s idle with 100 running tasks ({:.3} % of one core).\n\n",
            footprint.idle_cpu.as_secs_f64(),
            footprint.idle_window.as_secs(),
            100.0 * footprint.idle_cpu.as_secs_f64() / footprint.idle_window.as_secs_f64().max(1e-9),
        ));
    }
    if let Some(scale) = &figures.scale {
        let tasks = number(scale, "tasks");
        out.push_str("### P4 scale on the fake runtime\n\n");
        out.push_str("| tasks × containers | submit all | → all RUNNING | stop → all STOPPED | total | per task | threads at RUNNING | RSS at RUNNING | peak RSS |\n|---|---|---|---|---|---|---|---|---|\n");
        out.push_str(&format!(
            "| {} × {} | {:.2} s | {:.2} s | {:.2} s | {:.2} s | {:.2} ms | {} | {} | {} |\n\n",
            tasks,
            number(scale, "containers_per_task"),
            number(scale, "submit_seconds"),
            number(scale, "to_running_seconds"),
            number(scale, "stop_seconds"),
            number(scale, "total_seconds"),
            1000.0 * number(scale, "total_seconds") / tasks,
            scale["threads_running"],
            format_mib(bytes(scale, "rss_running_bytes")),
            format_mib(bytes(scale, "peak_rss_bytes")),
        ));
        out.push_str(&format!(
            "P6 restore: the engine started over {} saved tasks ({} × 3 containers running in the fake runtime; loading, reconciling each container, one thread per task) in {:.0} ms; {} of them RUNNING when it returned.\n\n",
            scale["restored_tasks"],
            scale["restored_tasks"],
            1000.0 * number(scale, "restore_seconds"),
            scale["restored_running"],
        ));
    }
    if let Some(state) = &figures.state {
        out.push_str("### P4 checkpoint cost per change\n\n");
        out.push_str("| tasks saved | median per change | p99 per change | the file system alone: the same bytes appended to one file + fdatasync, median | the former per-file layout on the file system alone: temp file, fsync, rename, fsync of the directory, median | record size | changes |\n|---|---|---|---|---|---|---|\n");
        for cost in state["checkpoint"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "| {} | {:.0} µs | {:.0} µs | {:.0} µs | {:.0} µs | {} B | {} |\n",
                cost["tasks"],
                number(cost, "median_micros"),
                number(cost, "p99_micros"),
                number(cost, "bare_append_median_micros"),
                number(cost, "bare_median_micros"),
                cost["bytes"],
                cost["changes"]
            ));
        }
        out.push_str("\n`save_task` appends the task's checkpoint record to the state log and fdatasyncs the log (the submit's durable save); the changes a running task makes are appended without a sync and made durable by the next event's sync, so this is the most one change costs.\n");
        out.push_str(&format!(
            "\nOpening the state store and loading {} saved tasks (the disk side of P6): {:.1} ms (median of 5).\n\n",
            state["restore_tasks_loaded"],
            number(state, "restore_open_median_millis"),
        ));
    }
    if let Some(syncs) = &figures.syncs {
        out.push_str(&syncs_table(syncs));
    }
    if let Some(scale) = &figures.docker_scale {
        out.push_str("### P7 scale on Docker\n\n");
        out.push_str("| one-container tasks | deckhand: first submit → all RUNNING | of which the submits | direct: the same creates + starts, same concurrency | deckhand / direct | calls at once | RSS at RUNNING | threads at RUNNING | stop → all STOPPED |\n|---|---|---|---|---|---|---|---|---|\n");
        out.push_str(&format!(
            "| {} | {:.2} s | {:.2} s | {:.2} s | {} | {} | {} | {} | {:.2} s |\n\n",
            scale.tasks,
            scale.deckhand.as_secs_f64(),
            scale.submits.as_secs_f64(),
            scale.direct.as_secs_f64(),
            format_ratio(Some(scale.deckhand), Some(scale.direct)),
            scale.concurrency,
            format_mib(scale.rss_bytes_at_running),
            scale.threads_at_running,
            scale.stop_all.as_secs_f64(),
        ));
        out.push_str("deckhand's Docker calls go through its worker pool (8 at once by default); the direct figure is the same creates and starts made by 8 callers, each taking the next container as it finishes one. The submits are one after another through the API, each durable before it answers.\n\n");
    }
    out.push_str(&targets(figures));
    out
}

/// Syncs and bytes per task life, phase by phase, with the two minimums.
fn syncs_table(syncs: &Value) -> String {
    let mut out =
        String::from("### Syncs and bytes per task life (durable engine, fake runtime)\n\n");
    out.push_str("| task | phase | syncs | of which files + directories | bytes written | the disk's own minimum (syncs × 4 KiB) | logical minimum (the records and events that must be durable) |\n|---|---|---|---|---|---|---|\n");
    for containers in [1u64, 5] {
        let label = if containers == 1 {
            "1 container".to_string()
        } else {
            format!("{containers} containers")
        };
        for (phase, counts) in phase_counts(syncs, containers) {
            out.push_str(&format!(
                "| {label} | {phase} | {} | {} + {} | {} | {} | {} |\n",
                format_range(&counts.syncs),
                format_range(&counts.file_syncs),
                format_range(&counts.directory_syncs),
                format_byte_range(&counts.bytes_written),
                format_byte_range(&counts.disk_minimum),
                format_byte_range(&counts.logical_bytes),
            ));
        }
    }
    out.push_str(&format!(
        "\n{} lives of each task, each in a fresh state directory; a range is the lowest and highest over them (a record written right after an event can land in the phase before or after it). Phases: **submit** until `submit` answered, **start** until the task's RUNNING event, **stop** until `stop` answered, **exit** until the STOPPED event. The disk's own minimum: a sync makes the device write at least one 4 KiB block, whatever the bytes. The logical minimum: one checkpoint record of the task as it stands at the end of the phase plus the line of every event emitted in it, in the state log's format (the agent record holding the sequence counter left out).\n\n",
        syncs["lives"]
    ));
    out
}

/// The issue's targets next to what was measured.
fn targets(figures: &Figures) -> String {
    let mut rows: Vec<(String, String, &'static str)> = Vec::new();
    for (shape, samples) in &figures.start {
        let deckhand = median(&samples.deckhand);
        if let (Some(deckhand), Some(limit)) = (deckhand, samples.limit()) {
            let ratio = deckhand.as_secs_f64() / limit.as_secs_f64();
            rows.push((
                format!("P1 {}: ≤ 1.05 × limit", shape.label()),
                format!("{ratio:.2}×"),
                met(ratio <= 1.05),
            ));
        }
        if let (Some(deckhand), Some(compose)) = (deckhand, median(&samples.compose)) {
            rows.push((
                format!("P1 {}: faster than compose", shape.label()),
                format_ratio(Some(deckhand), Some(compose)),
                met(deckhand < compose),
            ));
        }
    }
    for (shape, samples) in &figures.start {
        if let (Some(slow), Some(limit)) = (median(&samples.deckhand_slow), samples.limit()) {
            let ratio = slow.as_secs_f64() / limit.as_secs_f64();
            rows.push((
                format!(
                    "P1 {} on slow storage (each sync +{} ms): ≤ 1.05 × limit",
                    shape.label(),
                    figures.sync_delay_ms
                ),
                format!("{ratio:.2}×"),
                met(ratio <= 1.05),
            ));
        }
    }
    if let Some(reaction) = &figures.reaction {
        if let (_, Some(p99)) = p50_p99(&reaction.to_arrival) {
            rows.push((
                "P2 p99 ≤ 10 ms".to_string(),
                format_millis(Some(p99)),
                met(p99 <= Duration::from_millis(10)),
            ));
        }
        if let (_, Some(p99)) = p50_p99(&reaction.deckhand_part) {
            rows.push((
                "P2 deckhand's part ≤ 2 ms p99".to_string(),
                format_millis(Some(p99)),
                met(p99 <= Duration::from_millis(2)),
            ));
        }
    }
    if let Some(reaction) = &figures.reaction_tmpfs {
        if let (_, Some(p99)) = p50_p99(&reaction.deckhand_part) {
            rows.push((
                "P2 deckhand's part without the disk's sync (state on tmpfs) ≤ 2 ms p99"
                    .to_string(),
                format_millis(Some(p99)),
                met(p99 <= Duration::from_millis(2)),
            ));
        }
    }
    if let Some(reaction) = &figures.reaction_slow {
        if let (_, Some(p99)) = p50_p99(&reaction.deckhand_part) {
            rows.push((
                format!(
                    "P2 deckhand's part on slow storage (each sync +{} ms) ≤ 25 ms p99",
                    figures.sync_delay_ms
                ),
                format_millis(Some(p99)),
                met(p99 <= Duration::from_millis(25)),
            ));
        }
    }
    if let Some(syncs) = &figures.syncs {
        let (start, exit) = one_container_paths(syncs);
        if let Some(most) = start.iter().max() {
            rows.push((
                "Syncs on the start path of a 1-container task (submit → RUNNING) ≤ 2".to_string(),
                format_range(&start),
                met(*most <= 2),
            ));
        }
        if let Some(most) = exit.iter().max() {
            rows.push((
                "Syncs on the exit path of a 1-container task (exit → STOPPED) ≤ 1".to_string(),
                format_range(&exit),
                met(*most <= 1),
            ));
        }
    }
    if let Some(footprint) = &figures.footprint {
        rows.push((
            "P3 idle RSS ≤ 3 MiB".to_string(),
            format_mib(footprint.idle.rss_bytes),
            met(footprint.idle.rss_bytes <= 3 * MIB),
        ));
        rows.push((
            "P3 RSS with 100 tasks ≤ 8 MiB".to_string(),
            format_mib(footprint.with_100.rss_bytes),
            met(footprint.with_100.rss_bytes <= 8 * MIB),
        ));
        rows.push((
            "P3 binary ≤ 5 MiB".to_string(),
            format_mib(footprint.binary_bytes),
            met(footprint.binary_bytes <= 5 * MIB),
        ));
        let share =
            footprint.idle_cpu.as_secs_f64() / footprint.idle_window.as_secs_f64().max(1e-9);
        rows.push((
            "P5 idle CPU ≈ 0 (< 0.1 % of a core)".to_string(),
            format!(
                "{:.2} s / {} s",
                footprint.idle_cpu.as_secs_f64(),
                footprint.idle_window.as_secs()
            ),
            met(share < 0.001),
        ));
    }
    if let Some(state) = &figures.state {
        let costs: Vec<(f64, f64)> = state["checkpoint"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|cost| {
                (
                    number(cost, "median_micros"),
                    number(cost, "bare_append_median_micros"),
                )
            })
            .collect();
        if let (Some(first), Some(last)) = (costs.first(), costs.last()) {
            let growth = last.0 / first.0;
            rows.push((
                "P4 checkpoint flat from 10 to 1,000 tasks (≤ 1.5×)".to_string(),
                format!(
                    "{growth:.2}× (the file system alone: {:.2}×)",
                    last.1 / first.1
                ),
                met(growth <= 1.5),
            ));
        }
    }
    if let Some(scale) = &figures.scale {
        let rss = bytes(scale, "rss_running_bytes");
        let tasks = bytes(scale, "tasks");
        // The target is for 1,000 tasks; a quick run's smaller count is shown, not judged.
        rows.push((
            "P4 1,000 three-container tasks on the fake runtime ≤ 24 MiB (RSS at RUNNING)"
                .to_string(),
            if tasks == 1000 {
                format_mib(rss)
            } else {
                format!("{} with {tasks} tasks", format_mib(rss))
            },
            if tasks == 1000 {
                met(rss <= 24 * MIB)
            } else {
                "not judged"
            },
        ));
        let restore = 1000.0 * number(scale, "restore_seconds");
        rows.push((
            format!("P6 restore of {} tasks ≤ 1 s", scale["restored_tasks"]),
            format!("{restore:.0} ms"),
            met(restore <= 1000.0),
        ));
    }
    let mut out = String::from("### Targets\n\n| target | measured | |\n|---|---|---|\n");
    for (target, measured, verdict) in rows {
        out.push_str(&format!("| {target} | {measured} | {verdict} |\n"));
    }
    out
}

pub fn destination(settings: &Settings) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    if settings.only.is_some() {
        root.join("target").join("PERFORMANCE-partial.md")
    } else if settings.quick {
        root.join("target").join("PERFORMANCE-quick.md")
    } else {
        root.join("docs").join("PERFORMANCE.md")
    }
}

/// The whole `docs/PERFORMANCE.md`.
pub fn markdown(figures: &Figures, settings: &Settings) -> String {
    let mut out = String::from("# Performance\n\n");
    out.push_str("<!-- Written by `bench/run.sh` (cargo bench --bench agent); edit bench/NOTES.md instead. -->\n\n");
    out.push_str(&format!(
        "Measured {} on this machine in one run of `bench/run.sh`{} that took {:.0} s. Figures move with the machine's load: compare the columns of one run, not runs across machines.\n\n",
        figures.date,
        if settings.quick { " with BENCH_QUICK=1 (few samples: a smoke check, not figures to quote)" } else { "" },
        figures.elapsed.as_secs_f64()
    ));
    out.push_str("| machine | |\n|---|---|\n");
    for (key, value) in &figures.machine {
        out.push_str(&format!("| {key} | {value} |\n"));
    }
    out.push_str(&format!(
        "\nSamples: P1 {} rounds after one warm-up (each round runs every method once, in a rotating order); P2 {} crashes per agent; slow storage: each sync +{} ms; P5 an idle window of {} s; P4 {} tasks; {} checkpointed changes per size; {} lives per task shape for the syncs.\n\n",
        settings.start_rounds,
        settings.reaction_runs,
        figures.sync_delay_ms,
        settings.idle_window.as_secs(),
        settings.scale_tasks,
        settings.checkpoint_changes,
        crate::syncs::LIVES
    ));
    out.push_str("## Commands\n\n    bench/run.sh                  # installs docker-compose and busybox-static if missing, then:\n    cargo bench --bench agent     # the measurements; writes this file\n    BENCH_QUICK=1 bench/run.sh    # smoke check: few samples, writes target/PERFORMANCE-quick.md\n    BENCH_ONLY=p1,syncs cargo bench --bench agent   # some groups only (p1, p2, p3, p4, p7, syncs): target/PERFORMANCE-partial.md\n    DECKHAND_BENCH_SYNC_DELAY_MS=50 bench/run.sh    # the slow storage's delay per sync (default 20)\n\n");
    out.push_str("## Figures\n\n");
    out.push_str(&table(figures));
    let notes_path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("bench")
        .join("NOTES.md");
    if let Ok(notes) = std::fs::read_to_string(notes_path) {
        out.push('\n');
        out.push_str(&notes);
    }
    out
}
