//! `deckhand top`: what runs on this host and what it costs, from two readings of the agent's
//! `GET /v1/stats` (src/api/stats.rs). This file is the pure part: it turns two readings into
//! rows with rates ([`TopView::new`]), lays them out for a terminal of any size
//! ([`render`]) and writes them for machines ([`TopView::to_json`]). The terminal itself (raw
//! mode, the live loop) is in `super::terminal`.
//!
//! CPU % is of one core, as `docker stats` counts it (a container busy on two cores is 200 %);
//! the host's CPU % in the header is of all its cores, as `top` counts it. Memory used is the
//! usage less the inactive page cache, also as `docker stats` shows it. Network and block I/O
//! are totals since the container started.

use super::commands::age;
use serde::Deserialize;
use serde_json::{json, Value};

/// One `GET /v1/stats` answer. Missing or `null` values read as absent: a client of a newer or
/// older agent shows what it can.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StatsReading {
    pub time: u64,
    pub host: HostStats,
    pub agent: AgentStats,
    pub tasks: Vec<TaskStats>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HostStats {
    pub cpus: Option<u64>,
    pub cpu_busy_seconds: Option<f64>,
    pub cpu_total_seconds: Option<f64>,
    pub memory_total_bytes: Option<u64>,
    pub memory_available_bytes: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentStats {
    pub resident_bytes: Option<u64>,
    pub cpu_seconds: Option<f64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskStats {
    pub id: String,
    pub family: String,
    pub revision: u64,
    pub known_status: String,
    pub network_mode: Option<String>,
    pub health_status: Option<String>,
    pub containers: Vec<ContainerStats>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ContainerStats {
    pub name: String,
    pub docker_id: Option<String>,
    pub known_status: String,
    pub health_status: Option<String>,
    pub restart_count: u64,
    pub started_at: Option<u64>,
    pub cpu_seconds: Option<f64>,
    pub memory_used_bytes: Option<u64>,
    pub memory_limit_bytes: Option<u64>,
    pub network_rx_bytes: Option<u64>,
    pub network_tx_bytes: Option<u64>,
    pub block_read_bytes: Option<u64>,
    pub block_write_bytes: Option<u64>,
}

/// One line of the table: a task, or (indented) one of its containers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Row {
    /// `family:revision` of a task, the name of a container.
    pub name: String,
    /// The task's id (also on its containers' rows).
    pub task_id: String,
    pub is_container: bool,
    pub status: String,
    pub health: Option<String>,
    pub restarts: u64,
    pub cpu_percent: Option<f64>,
    pub memory_used_bytes: Option<u64>,
    pub memory_limit_bytes: Option<u64>,
    pub network_rx_bytes: Option<u64>,
    pub network_tx_bytes: Option<u64>,
    pub block_read_bytes: Option<u64>,
    pub block_write_bytes: Option<u64>,
    /// Milliseconds since the (earliest) container started, while it runs.
    pub uptime_millis: Option<u64>,
}

/// The header's figures.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Totals {
    pub time: u64,
    pub host_cpus: Option<u64>,
    /// Of all the host's cores (100 % = every core busy).
    pub host_cpu_percent: Option<f64>,
    pub host_memory_used_bytes: Option<u64>,
    pub host_memory_total_bytes: Option<u64>,
    pub agent_resident_bytes: Option<u64>,
    pub agent_cpu_percent: Option<f64>,
    pub tasks_running: usize,
    pub tasks_shown: usize,
    pub containers_running: usize,
    /// Of one core, summed over the tasks.
    pub tasks_cpu_percent: f64,
    pub tasks_memory_used_bytes: u64,
}

/// What one frame shows: tasks (not STOPPED) sorted by CPU, each followed by its containers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TopView {
    pub totals: Totals,
    pub rows: Vec<Row>,
}

/// CPU seconds per second between two readings, in percent; `None` without both.
fn rate_percent(before: Option<f64>, after: Option<f64>, seconds: f64) -> Option<f64> {
    let (before, after) = (before?, after?);
    if seconds <= 0.0 {
        return None;
    }
    Some(((after - before) / seconds * 100.0).max(0.0))
}

fn sum_present<T: std::iter::Sum<T> + Copy>(values: impl Iterator<Item = Option<T>>) -> Option<T> {
    let present: Vec<T> = values.flatten().collect();
    (!present.is_empty()).then(|| present.into_iter().sum())
}

impl TopView {
    /// The view of `current`, with rates since `previous` (none without it).
    pub fn new(previous: Option<&StatsReading>, current: &StatsReading) -> TopView {
        let seconds = previous
            .map(|previous| current.time.saturating_sub(previous.time) as f64 / 1000.0)
            .unwrap_or(0.0);
        let earlier_container = |task: &TaskStats, container: &ContainerStats| {
            previous?
                .tasks
                .iter()
                .find(|earlier| earlier.id == task.id)?
                .containers
                .iter()
                .find(|earlier| {
                    earlier.name == container.name && earlier.docker_id == container.docker_id
                })
                .cloned()
        };
        let mut groups: Vec<(Row, Vec<Row>)> = Vec::new();
        let mut totals = Totals {
            time: current.time,
            host_cpus: current.host.cpus,
            host_memory_total_bytes: current.host.memory_total_bytes,
            host_memory_used_bytes: match (
                current.host.memory_total_bytes,
                current.host.memory_available_bytes,
            ) {
                (Some(total), Some(available)) => Some(total.saturating_sub(available)),
                _ => None,
            },
            agent_resident_bytes: current.agent.resident_bytes,
            ..Totals::default()
        };
        if let Some(previous) = previous {
            let busy = current
                .host
                .cpu_busy_seconds
                .zip(previous.host.cpu_busy_seconds)
                .map(|(after, before)| after - before);
            let total = current
                .host
                .cpu_total_seconds
                .zip(previous.host.cpu_total_seconds)
                .map(|(after, before)| after - before);
            totals.host_cpu_percent = match (busy, total) {
                (Some(busy), Some(total)) if total > 0.0 => {
                    Some((busy / total * 100.0).clamp(0.0, 100.0))
                }
                _ => None,
            };
            totals.agent_cpu_percent = rate_percent(
                previous.agent.cpu_seconds,
                current.agent.cpu_seconds,
                seconds,
            );
        }
        for task in &current.tasks {
            if task.known_status == "STOPPED" {
                continue;
            }
            totals.tasks_shown += 1;
            if task.known_status == "RUNNING" {
                totals.tasks_running += 1;
            }
            let mut containers: Vec<Row> = task
                .containers
                .iter()
                .map(|container| {
                    let running = container.known_status == "RUNNING";
                    let cpu_percent = earlier_container(task, container)
                        .and_then(|earlier| {
                            rate_percent(earlier.cpu_seconds, container.cpu_seconds, seconds)
                        })
                        .filter(|_| running);
                    Row {
                        name: container.name.clone(),
                        task_id: task.id.clone(),
                        is_container: true,
                        status: container.known_status.clone(),
                        health: container.health_status.clone(),
                        restarts: container.restart_count,
                        cpu_percent,
                        memory_used_bytes: container.memory_used_bytes,
                        memory_limit_bytes: container.memory_limit_bytes,
                        network_rx_bytes: container.network_rx_bytes,
                        network_tx_bytes: container.network_tx_bytes,
                        block_read_bytes: container.block_read_bytes,
                        block_write_bytes: container.block_write_bytes,
                        uptime_millis: container
                            .started_at
                            .filter(|_| running)
                            .map(|started| current.time.saturating_sub(started)),
                    }
                })
                .collect();
            totals.containers_running += containers
                .iter()
                .filter(|row| row.status == "RUNNING")
                .count();
            sort_by_cpu(&mut containers);
            // An awsvpc task's containers share one network namespace: each shows all of it.
            let shared_network = task.network_mode.as_deref() == Some("awsvpc");
            let network = |pick: fn(&Row) -> Option<u64>| {
                if shared_network {
                    containers.iter().find_map(pick)
                } else {
                    sum_present(containers.iter().map(pick))
                }
            };
            let task_row = Row {
                name: format!("{}:{}", task.family, task.revision),
                task_id: task.id.clone(),
                is_container: false,
                status: task.known_status.clone(),
                health: task.health_status.clone(),
                restarts: containers.iter().map(|row| row.restarts).sum(),
                cpu_percent: sum_present(containers.iter().map(|row| row.cpu_percent)),
                memory_used_bytes: sum_present(containers.iter().map(|row| row.memory_used_bytes)),
                memory_limit_bytes: sum_present(
                    containers.iter().map(|row| row.memory_limit_bytes),
                ),
                network_rx_bytes: network(|row| row.network_rx_bytes),
                network_tx_bytes: network(|row| row.network_tx_bytes),
                block_read_bytes: sum_present(containers.iter().map(|row| row.block_read_bytes)),
                block_write_bytes: sum_present(containers.iter().map(|row| row.block_write_bytes)),
                uptime_millis: containers.iter().filter_map(|row| row.uptime_millis).max(),
            };
            totals.tasks_cpu_percent += task_row.cpu_percent.unwrap_or(0.0);
            totals.tasks_memory_used_bytes += task_row.memory_used_bytes.unwrap_or(0);
            groups.push((task_row, containers));
        }
        crate::sorting::sort_by(&mut groups, |(a, _), (b, _)| {
            cpu_key(b)
                .total_cmp(&cpu_key(a))
                .then_with(|| a.name.cmp(&b.name))
                .then_with(|| a.task_id.cmp(&b.task_id))
        });
        let rows = groups
            .into_iter()
            .flat_map(|(task, containers)| std::iter::once(task).chain(containers))
            .collect();
        TopView { totals, rows }
    }

    /// The `deckhand top --json` object: the header's figures and the tasks, each with its
    /// containers, rates computed.
    pub fn to_json(&self) -> Value {
        let row_json = |row: &Row| {
            json!({
                "name": row.name,
                "status": row.status,
                "healthStatus": row.health,
                "restartCount": row.restarts,
                "cpuPercent": row.cpu_percent.map(round_tenth),
                "memoryUsedBytes": row.memory_used_bytes,
                "memoryLimitBytes": row.memory_limit_bytes,
                "networkRxBytes": row.network_rx_bytes,
                "networkTxBytes": row.network_tx_bytes,
                "blockReadBytes": row.block_read_bytes,
                "blockWriteBytes": row.block_write_bytes,
                "uptimeSeconds": row.uptime_millis.map(|millis| millis / 1000),
            })
        };
        let mut tasks: Vec<Value> = Vec::new();
        for row in &self.rows {
            if row.is_container {
                if let Some(Value::Array(containers)) = tasks
                    .last_mut()
                    .and_then(|task: &mut Value| task.get_mut("containers"))
                {
                    containers.push(row_json(row));
                }
            } else {
                let mut task = row_json(row);
                task["id"] = json!(row.task_id);
                task["containers"] = json!([]);
                tasks.push(task);
            }
        }
        let totals = &self.totals;
        json!({
            "time": crate::task::time::rfc3339_from_millis(totals.time),
            "host": {
                "cpus": totals.host_cpus,
                "cpuPercent": totals.host_cpu_percent.map(round_tenth),
                "memoryUsedBytes": totals.host_memory_used_bytes,
                "memoryTotalBytes": totals.host_memory_total_bytes,
            },
            "agent": {
                "residentBytes": totals.agent_resident_bytes,
                "cpuPercent": totals.agent_cpu_percent.map(round_tenth),
            },
            "tasks": tasks,
        })
    }
}

fn round_tenth(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

fn cpu_key(row: &Row) -> f64 {
    row.cpu_percent.unwrap_or(-1.0)
}

fn sort_by_cpu(rows: &mut [Row]) {
    crate::sorting::sort_by(rows, |a, b| {
        cpu_key(b)
            .total_cmp(&cpu_key(a))
            .then_with(|| a.name.cmp(&b.name))
    });
}

/// Bytes in at most four characters (`512B`, `9.9K`, `123M`, `1.2G`), powers of 1024.
pub fn compact_bytes(bytes: u64) -> String {
    const UNITS: [&str; 7] = ["B", "K", "M", "G", "T", "P", "E"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 999.5 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes}B")
    } else if value < 9.95 {
        format!("{value:.1}{}", UNITS[unit])
    } else {
        format!("{value:.0}{}", UNITS[unit])
    }
}

fn pair(first: Option<u64>, second: Option<u64>) -> String {
    match (first, second) {
        (None, None) => "-".into(),
        (first, second) => format!(
            "{}/{}",
            first.map(compact_bytes).unwrap_or_else(|| "-".into()),
            second.map(compact_bytes).unwrap_or_else(|| "-".into())
        ),
    }
}

/// How a frame is written: with colours and attributes, or plain text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Plain,
    Colour,
}

/// Whether colours may be used: a terminal, `NO_COLOR` unset or empty, and not `TERM=dumb`.
pub fn colour_allowed(is_terminal: bool, no_color: Option<&str>, term: Option<&str>) -> bool {
    is_terminal && no_color.is_none_or(str::is_empty) && term != Some("dumb")
}

/// The columns after the name: heading, width, right-aligned.
const COLUMNS: [(&str, usize, bool); 8] = [
    ("STATUS", 7, false),
    ("HEALTH", 9, false),
    ("RST", 3, true),
    ("CPU%", 6, true),
    ("MEM/LIMIT", 9, true),
    ("NET RX/TX", 9, true),
    ("BLOCK R/W", 9, true),
    ("UP", 6, true),
];
const NARROWEST_NAME: usize = 8;

/// Text a user or Docker chose, fit for one terminal line: control characters (an escape
/// sequence in a container name would drive the terminal) become `?`.
fn printable(text: &str) -> String {
    text.chars()
        .map(|character| {
            if character.is_control() {
                '?'
            } else {
                character
            }
        })
        .collect()
}

/// `text` cut to `width` characters (an ellipsis marks the cut), padded to it.
fn fit(text: &str, width: usize, right: bool) -> String {
    let count = text.chars().count();
    let cut: String = if count > width {
        let mut kept: String = text.chars().take(width.saturating_sub(1)).collect();
        kept.push('…');
        kept
    } else {
        text.to_string()
    };
    if right {
        format!("{cut:>width$}")
    } else {
        format!("{cut:<width$}")
    }
}

fn cells(row: &Row) -> [String; 8] {
    [
        row.status.clone(),
        row.health.clone().unwrap_or_else(|| "-".into()),
        row.restarts.to_string(),
        row.cpu_percent
            .map(|percent| format!("{percent:.1}"))
            .unwrap_or_else(|| "-".into()),
        pair(row.memory_used_bytes, row.memory_limit_bytes),
        pair(row.network_rx_bytes, row.network_tx_bytes),
        pair(row.block_read_bytes, row.block_write_bytes),
        row.uptime_millis
            .map(|millis| age(0, millis))
            .unwrap_or_else(|| "-".into()),
    ]
}

fn size_or_dash(bytes: Option<u64>) -> String {
    bytes.map(compact_bytes).unwrap_or_else(|| "-".into())
}

fn percent_or_dash(percent: Option<f64>) -> String {
    percent
        .map(|percent| format!("{percent:.1}%"))
        .unwrap_or_else(|| "-".into())
}

/// The lines of one frame. `width`: the terminal's columns (`None`: not a terminal, nothing
/// is cut); `height`: its rows (`None`: every row). `live`: the view is interactive (the
/// header says how to quit). `problem`: why the latest reading failed, shown in the header.
pub fn render(
    view: &TopView,
    width: Option<usize>,
    height: Option<usize>,
    style: Style,
    live: bool,
    problem: Option<&str>,
) -> Vec<String> {
    let totals = &view.totals;
    let clock = crate::task::time::rfc3339_from_millis(totals.time);
    let clock = clock.get(11..19).unwrap_or("");
    let mut header = vec![
        format!(
            "deckhand top  {clock} UTC{}",
            if live { "  (q quits)" } else { "" }
        ),
        format!(
            "host: {} CPUs {}  mem {}/{}  agent: RSS {} CPU {}",
            totals
                .host_cpus
                .map(|cpus| cpus.to_string())
                .unwrap_or_else(|| "?".into()),
            percent_or_dash(totals.host_cpu_percent),
            size_or_dash(totals.host_memory_used_bytes),
            size_or_dash(totals.host_memory_total_bytes),
            size_or_dash(totals.agent_resident_bytes),
            percent_or_dash(totals.agent_cpu_percent),
        ),
        format!(
            "tasks: {} running of {}  containers: {} running  CPU {:.1}%  mem {}",
            totals.tasks_running,
            totals.tasks_shown,
            totals.containers_running,
            totals.tasks_cpu_percent,
            compact_bytes(totals.tasks_memory_used_bytes),
        ),
    ];
    if let Some(problem) = problem {
        header.push(format!("! {}", printable(problem)));
    }
    header.push(String::new());

    let fixed: usize = COLUMNS.iter().map(|(_, width, _)| width + 1).sum();
    let longest_name = view
        .rows
        .iter()
        .map(|row| printable(&row.name).chars().count() + if row.is_container { 2 } else { 0 })
        .max()
        .unwrap_or(0)
        .max(4);
    let name_width = match width {
        Some(width) => longest_name
            .min(width.saturating_sub(fixed))
            .max(NARROWEST_NAME),
        None => longest_name,
    };
    let mut heading = fit("NAME", name_width, false);
    for (title, column_width, right) in COLUMNS {
        heading.push(' ');
        heading.push_str(&fit(title, column_width, right));
    }

    let mut lines: Vec<String> = header
        .into_iter()
        .map(|line| cut_line(&line, width))
        .collect();
    lines.push(paint(&cut_line(&heading, width), "7", style, width));
    let room = height.map(|height| height.saturating_sub(lines.len()));
    let shown = match room {
        Some(room) if view.rows.len() > room => room.saturating_sub(1),
        _ => view.rows.len(),
    };
    for row in &view.rows[..shown] {
        let indent = if row.is_container { "  " } else { "" };
        let mut line = fit(
            &format!("{indent}{}", printable(&row.name)),
            name_width,
            false,
        );
        let mut attributes = if row.is_container { "" } else { "1" };
        if row.status == "STOPPED" {
            attributes = "2";
        }
        let mut painted = String::new();
        for ((_, column_width, right), cell) in COLUMNS.iter().zip(cells(row)) {
            let text = fit(&printable(&cell), *column_width, *right);
            painted.push(' ');
            line.push(' ');
            line.push_str(&text);
            let colour = match cell.as_str() {
                "UNHEALTHY" => Some("31"),
                "HEALTHY" => Some("32"),
                _ => None,
            };
            match colour {
                Some(colour) if style == Style::Colour => {
                    painted.push_str(&format!("\x1b[{colour}m{text}\x1b[0m"));
                    if !attributes.is_empty() {
                        painted.push_str(&format!("\x1b[{attributes}m"));
                    }
                }
                _ => painted.push_str(&text),
            }
        }
        let fits = width.is_none_or(|width| line.chars().count() <= width);
        if style == Style::Colour && fits {
            let name_part = fit(
                &format!("{indent}{}", printable(&row.name)),
                name_width,
                false,
            );
            let body = format!("{name_part}{painted}");
            lines.push(if attributes.is_empty() {
                body
            } else {
                format!("\x1b[{attributes}m{body}\x1b[0m")
            });
        } else {
            lines.push(cut_line(&line, width));
        }
    }
    if shown < view.rows.len() {
        lines.push(cut_line(
            &format!("… {} more rows", view.rows.len() - shown),
            width,
        ));
    }
    lines
}

fn cut_line(line: &str, width: Option<usize>) -> String {
    match width {
        Some(width) if line.chars().count() > width => line.chars().take(width).collect(),
        _ => line.trim_end().to_string(),
    }
}

/// `line` with the SGR `attributes`, padded to the full width (a heading bar).
fn paint(line: &str, attributes: &str, style: Style, width: Option<usize>) -> String {
    match style {
        Style::Plain => line.trim_end().to_string(),
        Style::Colour => {
            let padded = match width {
                Some(width) => format!("{line:<width$}"),
                None => line.to_string(),
            };
            format!("\x1b[{attributes}m{padded}\x1b[0m")
        }
    }
}

#[cfg(test)]
mod tests;
