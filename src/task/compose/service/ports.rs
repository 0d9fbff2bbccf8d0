//! `ports`: the short syntax (`"8080:80"`, ranges, a host address, `/udp`) and the long form, as
//! ECS port mappings. A host-to-container range is written out one mapping per port.

use super::super::node::{Node, Value};
use super::super::values;
use super::super::{join, Mapper};
use super::read::check_keys;
use super::TaskBuilder;
use serde_json::{json, Value as Json};

/// Host-to-container port ranges are written out one mapping per port, up to this many.
const MAX_EXPANDED_PORTS: u32 = 100;

impl TaskBuilder {
    pub(super) fn ports(&mut self, mapper: &mut Mapper, node: &Node, path: &str) -> Vec<Json> {
        let mut mappings = Vec::new();
        let Value::Sequence(items) = &node.value else {
            mapper.error(path, node.line, "must be a list");
            return mappings;
        };
        for (index, item) in items.iter().enumerate() {
            let item_path = format!("{path}[{index}]");
            let port = match &item.value {
                Value::Mapping(_) => long_port(mapper, item, &item_path),
                _ => match item.scalar_text().map(|text| values::parse_port(&text)) {
                    Some(Ok(port)) => Some(port),
                    Some(Err(message)) => {
                        mapper.error(&item_path, item.line, message);
                        None
                    }
                    None => {
                        mapper.error(&item_path, item.line, "must be a port or a mapping");
                        None
                    }
                },
            };
            let Some(port) = port else { continue };
            if let Some(ip) = &port.host_ip {
                if ip != "0.0.0.0" && ip != "::" {
                    mapper.warn(
                        &item_path,
                        item.line,
                        format!(
                            "host address {ip} dropped: ECS port mappings have none, so the port \
                             is published on every address (firewall it, or use network_mode: host \
                             and bind {ip} in the service)"
                        ),
                    );
                }
            }
            let (first, last) = port.container;
            match port.host {
                None if first == last => {
                    mappings.push(json!({"containerPort": first, "protocol": port.protocol}));
                }
                None => mappings.push(json!({
                    "containerPortRange": format!("{first}-{last}"),
                    "protocol": port.protocol
                })),
                Some((host_first, host_last)) => {
                    let count = u32::from(last - first) + 1;
                    if u32::from(host_last - host_first) + 1 != count {
                        mapper.error(
                            &item_path,
                            item.line,
                            "the host and container ranges must have the same length",
                        );
                        continue;
                    }
                    if count > MAX_EXPANDED_PORTS {
                        mapper.error(
                            &item_path,
                            item.line,
                            format!("at most {MAX_EXPANDED_PORTS} host ports per range"),
                        );
                        continue;
                    }
                    for offset in 0..=(last - first) {
                        let mut mapping = json!({
                            "containerPort": first + offset,
                            "protocol": port.protocol
                        });
                        if host_first != 0 {
                            mapping["hostPort"] = json!(host_first + offset);
                        }
                        mappings.push(mapping);
                    }
                }
            }
        }
        mappings
    }
}

fn long_port(mapper: &mut Mapper, item: &Node, path: &str) -> Option<values::ShortPort> {
    check_keys(
        mapper,
        item,
        path,
        &[
            "target",
            "published",
            "host_ip",
            "protocol",
            "mode",
            "name",
            "app_protocol",
        ],
    );
    let target = item.get("target").and_then(Node::scalar_text);
    let Some(container) = target.as_deref().and_then(values::parse_port_range) else {
        mapper.error(
            &join(path, "target"),
            item.line,
            "required: a container port",
        );
        return None;
    };
    let host = match item.get("published").and_then(Node::scalar_text) {
        None => None,
        Some(text) if text.is_empty() => None,
        Some(text) => match values::parse_port_range(&text) {
            Some(range) => Some(range),
            None => {
                mapper.error(
                    &join(path, "published"),
                    item.line,
                    format!("{text:?} is not a port"),
                );
                return None;
            }
        },
    };
    let protocol = item
        .get("protocol")
        .and_then(Node::scalar_text)
        .unwrap_or_else(|| "tcp".into())
        .to_ascii_lowercase();
    if protocol != "tcp" && protocol != "udp" {
        mapper.error(&join(path, "protocol"), item.line, "must be tcp or udp");
        return None;
    }
    Some(values::ShortPort {
        host_ip: item.get("host_ip").and_then(Node::scalar_text),
        host,
        container,
        protocol,
    })
}
