//! The container's Linux settings: `init`, `ulimits`, `dns`, `dns_search`, `extra_hosts`,
//! `cap_add`, `cap_drop`, `devices`, `sysctls`, `security_opt` and `shm_size`, as ECS's
//! `linuxParameters`, `ulimits`, `dnsServers`, `dnsSearchDomains`, `extraHosts`,
//! `systemControls` and `dockerSecurityOptions`; and `pid` and `ipc`, which ECS sets for the
//! whole task (`pidMode`, `ipcMode`), so every service must agree.

use super::super::node::{Node, Value};
use super::super::values;
use super::super::{join, Mapper};
use super::read::{check_keys, key_values, string_list};
use super::TaskBuilder;
use crate::task::definition::{check_security_option, check_system_control};
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

/// `devices`, `sysctls`, `security_opt` and `shm_size`.
pub(super) fn kernel_settings(
    mapper: &mut Mapper,
    service: &Node,
    path: &str,
    container: &mut Map<String, Json>,
    linux: &mut Map<String, Json>,
) {
    if let Some(node) = service.get("devices") {
        let list = devices(mapper, node, &join(path, "devices"));
        if !list.is_empty() {
            linux.insert("devices".into(), Json::Array(list));
        }
    }
    if let Some(node) = service.get("sysctls") {
        let controls = sysctls(mapper, node, &join(path, "sysctls"));
        if !controls.is_empty() {
            container.insert("systemControls".into(), Json::Array(controls));
        }
    }
    if let Some(node) = service.get("security_opt") {
        let options = security_options(mapper, node, &join(path, "security_opt"));
        if !options.is_empty() {
            container.insert("dockerSecurityOptions".into(), json!(options));
        }
    }
    if let Some(node) = service.get("shm_size") {
        if let Some(mib) = shared_memory_mib(mapper, node, &join(path, "shm_size")) {
            linux.insert("sharedMemorySize".into(), json!(mib));
        }
    }
}

/// `devices`: `HOST[:CONTAINER[:PERMISSIONS]]` (permissions `r`, `w`, `m`) or the long form
/// `{source, target, permissions}` → `linuxParameters.devices`.
fn devices(mapper: &mut Mapper, node: &Node, path: &str) -> Vec<Json> {
    let mut list = Vec::new();
    let Value::Sequence(items) = &node.value else {
        mapper.error(path, node.line, "must be a list");
        return list;
    };
    for (index, item) in items.iter().enumerate() {
        let item_path = format!("{path}[{index}]");
        let (host, container, permissions) = match &item.value {
            Value::Mapping(_) => {
                check_keys(
                    mapper,
                    item,
                    &item_path,
                    &["source", "target", "permissions"],
                );
                let Some(host) = item.get("source").and_then(Node::scalar_text) else {
                    mapper.error(&join(&item_path, "source"), item.line, "required");
                    continue;
                };
                (
                    host,
                    item.get("target").and_then(Node::scalar_text),
                    item.get("permissions").and_then(Node::scalar_text),
                )
            }
            _ => {
                let Some(text) = item.scalar_text() else {
                    mapper.error(
                        &item_path,
                        item.line,
                        "must be HOST_PATH[:CONTAINER_PATH[:PERMISSIONS]] or a mapping",
                    );
                    continue;
                };
                let parts: Vec<&str> = text.split(':').collect();
                match parts.as_slice() {
                    [host] => (host.to_string(), None, None),
                    [host, container] => (host.to_string(), Some(container.to_string()), None),
                    [host, container, permissions] => (
                        host.to_string(),
                        Some(container.to_string()),
                        Some(permissions.to_string()),
                    ),
                    _ => {
                        mapper.error(
                            &item_path,
                            item.line,
                            format!("{text:?} is not HOST_PATH[:CONTAINER_PATH[:PERMISSIONS]]"),
                        );
                        continue;
                    }
                }
            }
        };
        if !host.starts_with('/') {
            mapper.error(
                &item_path,
                item.line,
                format!(
                    "{host:?} is not a device path: ECS devices are host paths such as \
                     /dev/ttyUSB0 (CDI device names are not supported)"
                ),
            );
            continue;
        }
        let container = container.filter(|text| !text.is_empty());
        if let Some(target) = &container {
            if !target.starts_with('/') {
                mapper.error(
                    &item_path,
                    item.line,
                    format!("the container path {target:?} must be absolute"),
                );
                continue;
            }
        }
        let mut device = json!({
            "hostPath": host,
            "containerPath": container.unwrap_or_else(|| host.clone()),
        });
        if let Some(text) = permissions {
            match device_permissions(&text) {
                Some(names) => device["permissions"] = json!(names),
                None => {
                    mapper.error(
                        &item_path,
                        item.line,
                        format!(
                            "{text:?} are not device permissions: r (read), w (write) and m \
                             (mknod), like rwm"
                        ),
                    );
                    continue;
                }
            }
        }
        list.push(device);
    }
    list
}

/// `rwm` → `["read", "write", "mknod"]`; `None` for anything else (empty, repeated, unknown).
fn device_permissions(text: &str) -> Option<Vec<&'static str>> {
    let mut names = Vec::new();
    for letter in text.chars() {
        let name = match letter {
            'r' => "read",
            'w' => "write",
            'm' => "mknod",
            _ => return None,
        };
        if names.contains(&name) {
            return None;
        }
        names.push(name);
    }
    (!names.is_empty()).then_some(names)
}

/// `sysctls` (a mapping or `NAME=VALUE` list) → `systemControls`, refused as the task
/// definition refuses a parameter Docker cannot set per container.
fn sysctls(mapper: &mut Mapper, node: &Node, path: &str) -> Vec<Json> {
    let mut controls = Vec::new();
    for (name, value) in key_values(mapper, node, path, true) {
        let name_path = join(path, &name);
        let Some(value) = value else {
            mapper.error(&name_path, node.line, "needs a value (NAME=VALUE)");
            continue;
        };
        if let Err(message) = check_system_control(&name) {
            mapper.error(&name_path, node.line, message);
            continue;
        }
        controls.push(json!({"namespace": name, "value": value}));
    }
    controls
}

/// `security_opt` → `dockerSecurityOptions`. Docker's `=` spellings (`apparmor=P`,
/// `label=V`, `no-new-privileges=true`) are written the way ECS spells them (`apparmor:P`);
/// `no-new-privileges:false` is Docker's default and sets nothing. Anything else is refused as
/// the task definition refuses it.
fn security_options(mapper: &mut Mapper, node: &Node, path: &str) -> Vec<String> {
    let mut options = Vec::new();
    for (index, option) in string_list(mapper, node, path).into_iter().enumerate() {
        let item_path = format!("{path}[{index}]");
        let written = match option.split_once([':', '=']) {
            None => option.clone(),
            Some(("no-new-privileges", "true")) => "no-new-privileges".to_string(),
            Some(("no-new-privileges", "false")) => {
                mapper.warn(
                    &item_path,
                    node.line,
                    "ignored: no-new-privileges:false is Docker's default",
                );
                continue;
            }
            Some((kind @ ("apparmor" | "label" | "credentialspec"), argument)) => {
                format!("{kind}:{argument}")
            }
            Some(_) => option.clone(),
        };
        match check_security_option(&written) {
            Ok(()) => {
                if !options.contains(&written) {
                    options.push(written);
                }
            }
            Err(message) => mapper.error(&item_path, node.line, message),
        }
    }
    options
}

/// `shm_size` (bytes, or `64m`, `1gb`) → `linuxParameters.sharedMemorySize` in MiB, rounded up
/// with a warning when it is not a whole number of MiB.
fn shared_memory_mib(mapper: &mut Mapper, node: &Node, path: &str) -> Option<u64> {
    let text = node.scalar_text().unwrap_or_default();
    let bytes = match values::parse_bytes(&text) {
        Ok(bytes) => bytes,
        Err(message) => {
            mapper.error(path, node.line, message);
            return None;
        }
    };
    const MIB: u64 = 1024 * 1024;
    if bytes == 0 {
        mapper.warn(
            path,
            node.line,
            "ignored: 0 leaves Docker's default (64 MiB)",
        );
        return None;
    }
    let mib = bytes.div_ceil(MIB);
    if bytes % MIB != 0 {
        mapper.warn(
            path,
            node.line,
            format!(
                "{text} is not a whole number of MiB; using {mib} MiB (ECS's sharedMemorySize \
                 is in MiB)"
            ),
        );
    }
    Some(mib)
}

/// A service's `pid: host` or `ipc: host`, kept until every service is mapped: ECS sets them
/// for the whole task.
pub(super) struct NamespaceRequest {
    service: String,
    path: String,
    line: u64,
    mode: String,
}

impl TaskBuilder {
    /// Reads a service's `pid` and `ipc`; [`TaskBuilder::settle_namespace_modes`] decides.
    pub(super) fn namespace_keys(
        &mut self,
        mapper: &mut Mapper,
        service: &Node,
        path: &str,
        name: &str,
    ) {
        for (key, allowed, ecs_key) in [
            ("pid", &["host"][..], "pidMode"),
            ("ipc", &["host", "none"][..], "ipcMode"),
        ] {
            let Some(node) = service.get(key) else {
                continue;
            };
            let key_path = join(path, key);
            let mode = node.scalar_text().unwrap_or_default();
            if !allowed.contains(&mode.as_str()) {
                mapper.error(
                    &key_path,
                    node.line,
                    format!(
                        "{mode:?} is not supported: {key} may be {} (ECS's {ecs_key}, for the whole \
                         task); sharing a service's or a container's namespace has no ECS field",
                        allowed.join(" or ")
                    ),
                );
                continue;
            }
            let request = NamespaceRequest {
                service: name.to_string(),
                path: key_path,
                line: node.line,
                mode,
            };
            if key == "pid" {
                self.pid_requests.push(request);
            } else {
                self.ipc_requests.push(request);
            }
        }
    }

    /// `pidMode` and `ipcMode` from the services' requests: ECS applies them to every container
    /// of the task, so a service that asks for none (or for another mode) is an error naming both
    /// services, rather than a service silently sharing the host's namespace.
    pub(super) fn settle_namespace_modes(&mut self, mapper: &mut Mapper, services: &[String]) {
        for key in ["pid", "ipc"] {
            let requests = if key == "pid" {
                std::mem::take(&mut self.pid_requests)
            } else {
                std::mem::take(&mut self.ipc_requests)
            };
            let Some(first) = requests.first() else {
                continue;
            };
            let mut agreed = true;
            if let Some(other) = requests.iter().find(|request| request.mode != first.mode) {
                mapper.error(
                    &other.path,
                    other.line,
                    format!(
                        "{key} is set for the whole task in ECS: {} has {key}: {} and {} has {key}: {}",
                        first.service, first.mode, other.service, other.mode
                    ),
                );
                agreed = false;
            }
            if let Some(missing) = services
                .iter()
                .find(|service| !requests.iter().any(|request| &request.service == *service))
            {
                mapper.error(
                    &first.path,
                    first.line,
                    format!(
                        "{key} is set for the whole task in ECS: {} has {key}: {} and {missing} has \
                         none (give every service {key}: {}, or none of them)",
                        first.service, first.mode, first.mode
                    ),
                );
                agreed = false;
            }
            if agreed {
                let mode = Some(first.mode.clone());
                if key == "pid" {
                    self.pid_mode = mode;
                } else {
                    self.ipc_mode = mode;
                }
            }
        }
    }
}
