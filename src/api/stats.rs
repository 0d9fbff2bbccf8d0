//! `GET /v1/stats` on the local API: what `deckhand top` shows, as one JSON object — the host's
//! CPU and memory, the agent's own, and per task and container its statuses, health, restarts
//! and resource use. Read from the engine's snapshot and from the kernel's files
//! ([`crate::metrics::usage`]), never from Docker, so it answers at once and while Docker is
//! away. Counters are totals (CPU seconds, bytes since the container started) stamped with the
//! time they were read; a client turns two of them into rates. A value that could not be read
//! is `null`.
//!
//! ```json
//! {"time": 1764633600000,
//!  "host": {"cpus", "cpuBusySeconds", "cpuTotalSeconds", "memoryTotalBytes", "memoryAvailableBytes"},
//!  "agent": {"residentBytes", "cpuSeconds"},
//!  "tasks": [{"id", "arn", "family", "revision", "knownStatus", "desiredStatus", "networkMode",
//!             "healthStatus", "createdAt", "containers": [{"name", "dockerId", "knownStatus", "healthStatus",
//!             "restartCount", "startedAt", "cpuSeconds", "memoryUsedBytes", "memoryLimitBytes",
//!             "networkRxBytes", "networkTxBytes", "blockReadBytes", "blockWriteBytes"}]}]}
//! ```
//!
//! Times are milliseconds since the epoch, as in `/v1/events`. `healthStatus` is ECS's
//! (`HEALTHY`, `UNHEALTHY`, `UNKNOWN`), `null` for a container without a health check.

use super::views::{health_name, task_health_status};
use crate::metrics::process::ProcessFiles;
use crate::metrics::usage::{ContainerReading, UsageSources};
use crate::task::{Millis, NetworkMode, Task};
use serde_json::{json, Value};

/// Where the stats are read, kept across requests (the cgroup layout that worked is remembered).
#[derive(Debug, Default)]
pub struct StatsSources {
    pub usage: UsageSources,
    pub process: ProcessFiles,
}

/// The `GET /v1/stats` object for `tasks` (the engine's snapshot), read now.
pub fn stats_view(tasks: &[Task], sources: &StatsSources, now: Millis) -> Value {
    let layouts = sources.usage.cgroups.present_layouts();
    let mut tasks: Vec<&Task> = tasks.iter().collect();
    crate::sorting::sort_by(&mut tasks, |a, b| {
        a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id))
    });
    let task_views: Vec<Value> = tasks
        .iter()
        .map(|task| {
            let own_network = task.network_mode != NetworkMode::Host;
            let containers: Vec<Value> = task
                .containers
                .iter()
                .filter(|container| !container.is_sandbox())
                .map(|container| {
                    let reading = match container.docker_id.as_deref() {
                        Some(docker_id) if container.known_status.is_running() => sources
                            .usage
                            .read_container(&layouts, docker_id, own_network),
                        _ => ContainerReading::default(),
                    };
                    json!({
                        "name": container.name(),
                        "dockerId": container.docker_id,
                        "knownStatus": container.known_status.as_str(),
                        "healthStatus": container
                            .definition
                            .health_check
                            .as_ref()
                            .map(|_| health_name(container.health)),
                        "restartCount": container.restart_count,
                        "startedAt": container.started_at,
                        "cpuSeconds": reading.cpu_seconds,
                        "memoryUsedBytes": reading.memory_used_bytes,
                        "memoryLimitBytes": reading.memory_limit_bytes,
                        "networkRxBytes": reading.network_rx_bytes,
                        "networkTxBytes": reading.network_tx_bytes,
                        "blockReadBytes": reading.block_read_bytes,
                        "blockWriteBytes": reading.block_write_bytes,
                    })
                })
                .collect();
            json!({
                "id": task.id,
                "arn": task.arn,
                "family": task.family,
                "revision": task.revision,
                "knownStatus": task.known_status.as_str(),
                "desiredStatus": task.desired_status.as_str(),
                "networkMode": task.network_mode.as_str(),
                "healthStatus": task_health_status(task),
                "createdAt": task.created_at,
                "containers": containers,
            })
        })
        .collect();
    let host = sources.usage.read_host();
    let agent = sources.process.sample();
    json!({
        "time": now,
        "host": {
            "cpus": host.cpus,
            "cpuBusySeconds": host.cpu_busy_seconds,
            "cpuTotalSeconds": host.cpu_total_seconds,
            "memoryTotalBytes": host.memory_total_bytes,
            "memoryAvailableBytes": host.memory_available_bytes,
        },
        "agent": {
            "residentBytes": agent.resident_bytes,
            "cpuSeconds": agent.cpu_seconds,
        },
        "tasks": task_views,
    })
}
