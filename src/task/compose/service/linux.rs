//! The container's Linux settings: `init`, `ulimits`, `dns`, `dns_search`, `extra_hosts`,
//! `cap_add` and `cap_drop`, as ECS's `linuxParameters`, `ulimits`, `dnsServers`,
//! `dnsSearchDomains` and `extraHosts`.

use super::super::node::{Node, Value};
use super::super::{join, Mapper};
use super::read::{check_keys, key_values, string_list};
use serde_json::{json, Map, Value as Json};

/// `init` → `linuxParameters.initProcessEnabled`.
pub(super) fn init(mapper: &mut Mapper, service: &Node, path: &str, linux: &mut Map<String, Json>) {
    if let Some(node) = service.get("init") {
        match node.value {
            Value::Bool(flag) => {
                linux.insert("initProcessEnabled".into(), json!(flag));
            }
            _ => mapper.error(&join(path, "init"), node.line, "must be true or false"),
        }
    }
}

/// `ulimits`, `dns`, `dns_search`, `extra_hosts`, `cap_add` and `cap_drop`.
pub(super) fn settings(
    mapper: &mut Mapper,
    service: &Node,
    path: &str,
    container: &mut Map<String, Json>,
    linux: &mut Map<String, Json>,
) {
    if let Some(node) = service.get("ulimits") {
        let limits = ulimits(mapper, node, &join(path, "ulimits"));
        if !limits.is_empty() {
            container.insert("ulimits".into(), Json::Array(limits));
        }
    }

    for (key, ecs_key) in [("dns", "dnsServers"), ("dns_search", "dnsSearchDomains")] {
        if let Some(node) = service.get(key) {
            let list = string_list(mapper, node, &join(path, key));
            if !list.is_empty() {
                container.insert(ecs_key.into(), json!(list));
            }
        }
    }

    if let Some(node) = service.get("extra_hosts") {
        let hosts_path = join(path, "extra_hosts");
        let mut hosts = Vec::new();
        let pairs: Vec<(String, String)> = match &node.value {
            Value::Mapping(_) => key_values(mapper, node, &hosts_path, false)
                .into_iter()
                .map(|(k, v)| (k, v.unwrap_or_default()))
                .collect(),
            _ => string_list(mapper, node, &hosts_path)
                .into_iter()
                .filter_map(|entry| {
                    // `host=ip` (newer) or `host:ip` (older; the address may be IPv6).
                    entry
                        .split_once('=')
                        .or_else(|| entry.split_once(':'))
                        .map(|(host, ip)| (host.to_string(), ip.to_string()))
                })
                .collect(),
        };
        for (host, ip) in pairs {
            let ip = ip.trim_start_matches('[').trim_end_matches(']').to_string();
            hosts.push(json!({"hostname": host, "ipAddress": ip}));
        }
        if !hosts.is_empty() {
            container.insert("extraHosts".into(), Json::Array(hosts));
        }
    }

    let mut capabilities = Map::new();
    for (key, ecs_key) in [("cap_add", "add"), ("cap_drop", "drop")] {
        if let Some(node) = service.get(key) {
            let names: Vec<String> = string_list(mapper, node, &join(path, key))
                .into_iter()
                .map(|name| {
                    let upper = name.to_ascii_uppercase();
                    upper
                        .strip_prefix("CAP_")
                        .map(str::to_string)
                        .unwrap_or(upper)
                })
                .collect();
            if !names.is_empty() {
                capabilities.insert(ecs_key.into(), json!(names));
            }
        }
    }
    if !capabilities.is_empty() {
        linux.insert("capabilities".into(), Json::Object(capabilities));
    }
}

/// `ulimits: {nofile: {soft: 1024, hard: 2048}, nproc: 65535}`.
fn ulimits(mapper: &mut Mapper, node: &Node, path: &str) -> Vec<Json> {
    let mut limits = Vec::new();
    let Value::Mapping(entries) = &node.value else {
        mapper.error(path, node.line, "must be a mapping");
        return limits;
    };
    let number = |node: Option<&Node>| match node.map(|n| &n.value) {
        Some(Value::Integer(value)) => i64::try_from(*value).ok(),
        _ => None,
    };
    for (name, line, value) in entries {
        let (soft, hard) = match &value.value {
            Value::Integer(_) => (number(Some(value)), number(Some(value))),
            Value::Mapping(_) => {
                check_keys(mapper, value, &join(path, name), &["soft", "hard"]);
                (number(value.get("soft")), number(value.get("hard")))
            }
            _ => (None, None),
        };
        match (soft, hard) {
            (Some(soft), Some(hard)) => {
                limits.push(json!({"name": name, "softLimit": soft, "hardLimit": hard}))
            }
            _ => mapper.error(&join(path, name), *line, "must be a number or {soft, hard}"),
        }
    }
    limits
}
