//! Memory and CPU: `mem_limit`, `mem_reservation`, `cpus`, `cpu_shares` and `deploy` (its
//! `resources`; `replicas` must be 1; swarm settings ignored with a warning), as ECS's `memory`,
//! `memoryReservation` (MiB, rounded up) and `cpu` (1024 units per CPU).

use super::super::node::{Node, Value};
use super::super::{join, Mapper};
use super::read::{check_keys, mebibytes};
use super::TaskBuilder;
use crate::task::definition::CONTAINER_MEMORY_MIN_MIB;
use serde_json::{json, Map, Value as Json};

impl TaskBuilder {
    pub(super) fn resources(
        &mut self,
        mapper: &mut Mapper,
        service: &Node,
        path: &str,
        container: &mut Map<String, Json>,
    ) {
        let mut memory = None;
        let mut reservation = None;
        let mut cpu = None;
        if let Some(node) = service.get("mem_limit") {
            memory = mebibytes(mapper, node, &join(path, "mem_limit"));
        }
        if let Some(node) = service.get("mem_reservation") {
            reservation = mebibytes(mapper, node, &join(path, "mem_reservation"));
        }
        if let Some(node) = service.get("cpus") {
            cpu = cpu_units(mapper, node, &join(path, "cpus"));
        }
        if let Some(node) = service.get("cpu_shares") {
            match node.value {
                Value::Integer(shares) if (0..=262_144).contains(&shares) => {
                    cpu = Some(shares as u64)
                }
                _ => mapper.error(
                    &join(path, "cpu_shares"),
                    node.line,
                    "must be an integer from 0 to 262144",
                ),
            }
        }
        if let Some(deploy) = service.get("deploy") {
            let deploy_path = join(path, "deploy");
            if let Value::Mapping(entries) = &deploy.value {
                for (key, line, value) in entries {
                    let key_path = join(&deploy_path, key);
                    match key.as_str() {
                        "replicas" => {
                            if !matches!(value.value, Value::Integer(0 | 1)) {
                                mapper.error(
                                    &key_path,
                                    *line,
                                    "a task runs each service once: replicas must be 1",
                                );
                            }
                        }
                        "resources" => {
                            check_keys(mapper, value, &key_path, &["limits", "reservations"]);
                            if let Some(limits) = value.get("limits") {
                                check_keys(
                                    mapper,
                                    limits,
                                    &join(&key_path, "limits"),
                                    &["cpus", "memory"],
                                );
                            }
                            if let Some(reservations) = value.get("reservations") {
                                check_keys(
                                    mapper,
                                    reservations,
                                    &join(&key_path, "reservations"),
                                    &["memory", "devices"],
                                );
                            }
                            let limits = value.get("limits");
                            if let Some(node) = limits.and_then(|l| l.get("memory")) {
                                memory = mebibytes(mapper, node, &join(&key_path, "limits.memory"));
                            }
                            if let Some(node) = limits.and_then(|l| l.get("cpus")) {
                                cpu = cpu_units(mapper, node, &join(&key_path, "limits.cpus"));
                            }
                            if let Some(node) =
                                value.get("reservations").and_then(|r| r.get("memory"))
                            {
                                reservation = mebibytes(
                                    mapper,
                                    node,
                                    &join(&key_path, "reservations.memory"),
                                );
                            }
                            if let Some(devices) =
                                value.get("reservations").and_then(|r| r.get("devices"))
                            {
                                mapper.refuse_if_set(
                                    &join(&key_path, "reservations.devices"),
                                    devices.line,
                                    devices,
                                    "device reservations (GPUs) are not supported",
                                );
                            }
                        }
                        "restart_policy" | "labels" | "update_config" | "rollback_config"
                        | "placement" | "mode" | "endpoint_mode" => {
                            mapper.warn(&key_path, *line, "ignored: a swarm setting");
                        }
                        _ => mapper.error(&key_path, *line, "unknown deploy key"),
                    }
                }
            }
        }
        if let Some(mib) = memory {
            let mib = if mib < CONTAINER_MEMORY_MIN_MIB {
                mapper.warn(&join(path, "mem_limit"), service.line, format!("{mib} MiB is below Docker's {CONTAINER_MEMORY_MIN_MIB} MiB minimum; using {CONTAINER_MEMORY_MIN_MIB} MiB"));
                CONTAINER_MEMORY_MIN_MIB
            } else {
                mib
            };
            container.insert("memory".into(), json!(mib));
        }
        if let Some(mib) = reservation {
            container.insert("memoryReservation".into(), json!(mib.max(1)));
        }
        if let Some(units) = cpu {
            container.insert("cpu".into(), json!(units));
        }
    }
}

/// `cpus: 0.5` → 512 ECS CPU units (1024 per CPU).
fn cpu_units(mapper: &mut Mapper, node: &Node, path: &str) -> Option<u64> {
    let cpus: Option<f64> = match &node.value {
        Value::Integer(number) => Some(*number as f64),
        Value::Float(number) => Some(*number),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    };
    match cpus {
        Some(cpus) if cpus.is_finite() && (0.0..=1024.0).contains(&cpus) => {
            Some((cpus * 1024.0).round() as u64)
        }
        _ => {
            mapper.error(path, node.line, "must be a number of CPUs, like 0.5");
            None
        }
    }
}
