//! What ties services together: the network mode one service takes from another,
//! `depends_on`, `links` and `volumes_from`.

use super::*;

impl TaskBuilder {
    pub(super) fn network_mode(
        &mut self,
        mapper: &mut Mapper,
        node: &Node,
        path: &str,
        service: &str,
    ) {
        let mode = node.scalar_text().unwrap_or_default();
        let mode = match mode.as_str() {
            "bridge" | "host" | "none" => mode,
            "default" => "bridge".to_string(),
            _ => {
                mapper.error(
                    path,
                    node.line,
                    format!("{mode:?} is not supported: network_mode may be bridge, host or none"),
                );
                return;
            }
        };
        match &self.network_mode_from {
            Some(first) if self.network_mode != mode => mapper.error(
                path,
                node.line,
                format!(
                    "every service of a task shares one network mode ({first} has {})",
                    self.network_mode
                ),
            ),
            _ => {
                self.network_mode = mode;
                self.network_mode_from = Some(service.to_string());
            }
        }
    }
}

pub(super) fn only_default_network(node: &Node) -> bool {
    match &node.value {
        Value::Sequence(items) => items
            .iter()
            .all(|item| item.scalar_text().as_deref() == Some("default")),
        Value::Mapping(entries) => entries
            .iter()
            .all(|(name, _, value)| name == "default" && value.value == Value::Null),
        Value::Null => true,
        _ => false,
    }
}

pub(super) fn link(target: &str, alias: &str) -> String {
    if target == alias {
        target.to_string()
    } else {
        format!("{target}:{alias}")
    }
}

pub(super) fn dependencies(mapper: &mut Mapper, node: &Node, path: &str) -> Vec<Dependency> {
    let mut edges = Vec::new();
    match &node.value {
        Value::Sequence(_) => {
            for service in string_list(mapper, node, path) {
                edges.push(Dependency {
                    service,
                    condition: "START",
                });
            }
        }
        Value::Mapping(entries) => {
            for (service, line, options) in entries {
                let edge_path = join(path, service);
                check_keys(
                    mapper,
                    options,
                    &edge_path,
                    &["condition", "required", "restart"],
                );
                let condition = options.get("condition").and_then(Node::scalar_text);
                let condition = match condition.as_deref() {
                    None | Some("service_started") => "START",
                    Some("service_healthy") => "HEALTHY",
                    Some("service_completed_successfully") => "SUCCESS",
                    Some(other) => {
                        mapper.error(
                            &join(&edge_path, "condition"),
                            *line,
                            format!("unknown condition {other:?}: expected service_started, service_healthy or service_completed_successfully"),
                        );
                        continue;
                    }
                };
                if matches!(
                    options.get("required").map(|n| &n.value),
                    Some(Value::Bool(false))
                ) {
                    mapper.warn(
                        &join(&edge_path, "required"),
                        *line,
                        "ignored: deckhand always starts every service of the task",
                    );
                }
                if matches!(
                    options.get("restart").map(|n| &n.value),
                    Some(Value::Bool(true))
                ) {
                    mapper.warn(
                        &join(&edge_path, "restart"),
                        *line,
                        "ignored: deckhand does not restart a service when its dependency restarts",
                    );
                }
                edges.push(Dependency {
                    service: service.clone(),
                    condition,
                });
            }
        }
        _ => mapper.error(path, node.line, "must be a list or a mapping"),
    }
    edges
}

/// `volumes_from` → ECS's `volumesFrom`: `SERVICE`, `service:SERVICE`, either with `:ro` or `:rw`
/// (read-write when none). A container outside the project (`container:NAME`) is refused: a
/// task's containers share volumes only among themselves.
pub(super) fn volumes_from(
    mapper: &mut Mapper,
    node: &Node,
    path: &str,
    container_names: &BTreeMap<String, String>,
) -> Vec<Json> {
    let mut sources = Vec::new();
    for (index, entry) in string_list(mapper, node, path).into_iter().enumerate() {
        let at = format!("{path}[{index}]");
        if entry.starts_with("container:") {
            mapper.error(
                &at,
                node.line,
                format!(
                    "{entry:?}: volumes from a container outside the project are not supported: a \
                     task's containers share volumes only among themselves"
                ),
            );
            continue;
        }
        let entry_without_prefix = entry.strip_prefix("service:").unwrap_or(&entry);
        let (service_name, read_only) = match entry_without_prefix.split_once(':') {
            None => (entry_without_prefix, false),
            Some((name, "ro")) => (name, true),
            Some((name, "rw")) => (name, false),
            Some((_, mode)) => {
                mapper.error(
                    &at,
                    node.line,
                    format!("{entry:?}: unknown mode {mode:?} (expected ro or rw)"),
                );
                continue;
            }
        };
        match container_names.get(service_name) {
            Some(target) => sources.push(json!({"sourceContainer": target, "readOnly": read_only})),
            None => mapper.error(&at, node.line, format!("no service named {service_name:?}")),
        }
    }
    sources
}
