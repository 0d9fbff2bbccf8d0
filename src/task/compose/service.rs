//! One Compose service → one ECS container definition, and what the services share: the task's
//! network mode, its volumes, and the links that let services find each other by name.

use super::node::{Node, Value};
use super::values;
use super::{join, Mapper};
use crate::task::definition::{
    CONTAINER_MEMORY_MIN_MIB, HEALTH_INTERVAL_RANGE, HEALTH_RETRIES_RANGE,
    HEALTH_START_PERIOD_RANGE, HEALTH_TIMEOUT_RANGE, RESTART_ATTEMPT_PERIOD_RANGE,
};
use serde_json::{json, Map, Value as Json};
use std::collections::{BTreeMap, BTreeSet};

/// ECS's largest `stopTimeout`, in seconds.
const STOP_TIMEOUT_MAX_SECONDS: u64 = 120;
/// Compose's health-check defaults (Docker's): 30 s interval, 30 s timeout, 3 retries. ECS's
/// own timeout default (5 s) is shorter, so they are written out.
const COMPOSE_HEALTH_INTERVAL_SECONDS: u64 = 30;
const COMPOSE_HEALTH_TIMEOUT_SECONDS: u64 = 30;
const COMPOSE_HEALTH_RETRIES: u64 = 3;
/// A `tmpfs` with no size gets this many MiB (ECS requires a size; Docker's default is half of
/// the host's memory, which no edge host wants from a typo).
const TMPFS_DEFAULT_SIZE_MIB: u64 = 64;
/// Host-to-container port ranges are written out one mapping per port, up to this many.
const MAX_EXPANDED_PORTS: u32 = 100;

/// Service keys that change nothing on this host: ignored with a warning.
const IGNORED_SERVICE_KEYS: &[(&str, &str)] = &[
    ("container_name", "deckhand names containers after the task"),
    (
        "expose",
        "services on the task's bridge reach every port of each other",
    ),
    (
        "pull_policy",
        "deckhand pulls as its ECS_IMAGE_PULL_BEHAVIOR says",
    ),
    ("platform", "the host's platform is used"),
    ("domainname", "not set by ECS task definitions"),
];

/// Service keys deckhand cannot honour, with why.
const REFUSED_SERVICE_KEYS: &[(&str, &str)] = &[
    ("build", "build the image first (docker build -t NAME .) and give image: NAME; deckhand runs images"),
    ("secrets", "ECS secrets come from AWS services deckhand does not use; mount the file with a bind volume instead"),
    ("configs", "ECS configs come from AWS services deckhand does not use; mount the file with a bind volume instead"),
    ("extends", "extends is not supported: write the service out in full"),
    ("networks", "user-defined networks are not supported: a task's services share Docker's bridge"),
    ("volumes_from", "not supported by the Compose mapping yet"),
    ("devices", "not supported by the Compose mapping yet"),
    ("sysctls", "not supported by the Compose mapping yet"),
    ("security_opt", "not supported by the Compose mapping yet"),
    ("shm_size", "not supported by the Compose mapping yet"),
    ("pid", "not supported by the Compose mapping yet"),
    ("ipc", "not supported by the Compose mapping yet"),
    ("mac_address", "ECS task definitions cannot set a MAC address"),
    ("cgroup_parent", "ECS task definitions cannot set a cgroup parent"),
    ("userns_mode", "ECS task definitions cannot set a user namespace"),
    ("runtime", "ECS task definitions cannot choose a container runtime"),
    ("gpus", "GPUs are not supported by deckhand"),
];

/// The service keys this file maps.
const MAPPED_SERVICE_KEYS: &[&str] = &[
    "image",
    "command",
    "entrypoint",
    "environment",
    "env_file",
    "ports",
    "volumes",
    "depends_on",
    "healthcheck",
    "restart",
    "mem_limit",
    "mem_reservation",
    "cpus",
    "cpu_shares",
    "deploy",
    "working_dir",
    "user",
    "labels",
    "logging",
    "stop_grace_period",
    "stop_signal",
    "privileged",
    "read_only",
    "init",
    "tmpfs",
    "ulimits",
    "hostname",
    "dns",
    "dns_search",
    "extra_hosts",
    "cap_add",
    "cap_drop",
    "network_mode",
    "links",
    "profiles",
    "scale",
    "stdin_open",
    "tty",
    "x-deckhand-essential",
];

/// The task being built from the services.
pub(super) struct TaskBuilder {
    project: String,
    top_volumes: Option<Node>,
    pub network_mode: String,
    network_mode_from: Option<String>,
    pub volumes: Vec<Json>,
    volume_names: BTreeSet<String>,
    /// Host path → task volume name, so two services binding one path share one volume.
    bind_volumes: BTreeMap<String, String>,
    pub containers: Vec<Json>,
    pub pid_mode: Option<String>,
    pub ipc_mode: Option<String>,
}

/// A `depends_on` edge.
struct Dependency {
    service: String,
    condition: &'static str,
}

impl TaskBuilder {
    pub fn new(project: &str, top_volumes: Option<Node>) -> Self {
        TaskBuilder {
            project: project.to_string(),
            top_volumes,
            network_mode: "bridge".to_string(),
            network_mode_from: None,
            volumes: Vec::new(),
            volume_names: BTreeSet::new(),
            bind_volumes: BTreeMap::new(),
            containers: Vec::new(),
            pid_mode: None,
            ipc_mode: None,
        }
    }

    pub fn map_services(&mut self, mapper: &mut Mapper, services: &[(String, u64, Node)]) {
        let selected_profiles: BTreeSet<String> = mapper
            .variable("COMPOSE_PROFILES")
            .unwrap_or("")
            .split(',')
            .map(|profile| profile.trim().to_string())
            .filter(|profile| !profile.is_empty())
            .collect();
        // Names first: dependencies point at services, and a service that others wait on to
        // complete is not essential (ECS refuses SUCCESS/COMPLETE on an essential container).
        let mut container_names = BTreeMap::new();
        let mut one_shot = BTreeSet::new();
        for (name, line, service) in services {
            let path = join("services", name);
            let container_name = container_name(name);
            if container_name.is_empty() {
                mapper.error(&path, *line, "a service name needs a letter, digit, - or _");
            }
            container_names.insert(name.clone(), container_name);
            if let Some(depends) = service.get("depends_on") {
                for dependency in dependencies(mapper, depends, &join(&path, "depends_on")) {
                    if dependency.condition == "SUCCESS" {
                        one_shot.insert(dependency.service);
                    }
                }
            }
        }
        for (name, line, service) in services {
            let path = join("services", name);
            if let Some(profiles) = service.get("profiles") {
                let listed = string_list(mapper, profiles, &join(&path, "profiles"));
                if !listed.is_empty()
                    && !listed
                        .iter()
                        .any(|profile| selected_profiles.contains(profile))
                {
                    mapper.error(
                        &join(&path, "profiles"),
                        profiles.line,
                        format!(
                            "the service is in profiles {} and none is selected (set \
                             COMPOSE_PROFILES to run it, or remove the service)",
                            listed.join(", ")
                        ),
                    );
                    continue;
                }
            }
            let Value::Mapping(_) = &service.value else {
                mapper.error(&path, *line, "a service must be a mapping");
                continue;
            };
            let essential_default = !one_shot.contains(name);
            let container = self.map_service(
                mapper,
                (name, *line),
                service,
                &path,
                &container_names,
                essential_default,
            );
            self.containers.push(container);
        }
    }

    fn map_service(
        &mut self,
        mapper: &mut Mapper,
        (name, service_line): (&str, u64),
        service: &Node,
        path: &str,
        container_names: &BTreeMap<String, String>,
        essential_default: bool,
    ) -> Json {
        let mut container = Map::new();
        let own_name = container_names.get(name).cloned().unwrap_or_default();
        container.insert("name".into(), json!(own_name));
        let Value::Mapping(entries) = &service.value else {
            return Json::Object(container);
        };
        for (key, line, _) in entries {
            let key_path = join(path, key);
            if key.starts_with("x-") || MAPPED_SERVICE_KEYS.contains(&key.as_str()) {
                continue;
            }
            if let Some((_, why)) = IGNORED_SERVICE_KEYS.iter().find(|(k, _)| k == key) {
                mapper.warn(&key_path, *line, format!("ignored: {why}"));
            } else if let Some((_, why)) = REFUSED_SERVICE_KEYS.iter().find(|(k, _)| k == key) {
                let value = service.get(key).cloned().unwrap_or(Node {
                    line: 0,
                    value: Value::Null,
                });
                // `networks: [default]` asks for nothing more than deckhand gives.
                if key == "networks" && only_default_network(&value) {
                    continue;
                }
                mapper.refuse_if_set(&key_path, *line, &value, why);
            } else {
                mapper.error(&key_path, *line, "unknown or unsupported service key");
            }
        }
        let line_of = |key: &str| {
            entries
                .iter()
                .find(|(k, _, _)| k == key)
                .map_or(service.line, |(_, line, _)| *line)
        };

        match service.get("image").and_then(Node::scalar_text) {
            Some(image) => {
                container.insert("image".into(), json!(image));
            }
            None => mapper.error(
                &join(path, "image"),
                service_line,
                "required: deckhand runs images (build them first)",
            ),
        }

        let essential = match service.get("x-deckhand-essential") {
            Some(Node {
                value: Value::Bool(flag),
                ..
            }) => *flag,
            Some(other) => {
                mapper.error(
                    &join(path, "x-deckhand-essential"),
                    other.line,
                    "must be true or false",
                );
                essential_default
            }
            None => essential_default,
        };
        container.insert("essential".into(), json!(essential));

        for (key, ecs_key) in [("command", "command"), ("entrypoint", "entryPoint")] {
            if let Some(node) = service.get(key) {
                if let Some(words) = command_words(mapper, node, &join(path, key)) {
                    container.insert(ecs_key.into(), json!(words));
                }
            }
        }

        let environment = self.environment(mapper, service, path);
        if !environment.is_empty() {
            let list: Vec<Json> = environment
                .into_iter()
                .map(|(name, value)| json!({"name": name, "value": value}))
                .collect();
            container.insert("environment".into(), Json::Array(list));
        }

        if let Some(mode) = service.get("network_mode") {
            self.network_mode(mapper, mode, &join(path, "network_mode"), name);
        }

        if let Some(ports) = service.get("ports") {
            let mappings = self.ports(mapper, ports, &join(path, "ports"));
            if !mappings.is_empty() {
                container.insert("portMappings".into(), Json::Array(mappings));
            }
        }

        let mut linux = Map::new();
        if let Some(volumes) = service.get("volumes") {
            let mut tmpfs = Vec::new();
            let mounts = self.service_volumes(mapper, volumes, &join(path, "volumes"), &mut tmpfs);
            if !mounts.is_empty() {
                container.insert("mountPoints".into(), Json::Array(mounts));
            }
            if !tmpfs.is_empty() {
                linux.insert("tmpfs".into(), Json::Array(tmpfs));
            }
        }

        let mut links: Vec<String> = Vec::new();
        if let Some(depends) = service.get("depends_on") {
            let mut edges = Vec::new();
            for dependency in dependencies(mapper, depends, &join(path, "depends_on")) {
                match container_names.get(&dependency.service) {
                    Some(target) => {
                        edges.push(
                            json!({"containerName": target, "condition": dependency.condition}),
                        );
                        // Docker cannot link to a stopped container, and a service waited on
                        // to complete has stopped by then: no link to it.
                        if dependency.condition != "SUCCESS" {
                            links.push(link(target, &dependency.service));
                        }
                    }
                    None => mapper.error(
                        &join(path, "depends_on"),
                        depends.line,
                        format!("no service named {:?}", dependency.service),
                    ),
                }
            }
            if !edges.is_empty() {
                container.insert("dependsOn".into(), Json::Array(edges));
            }
        }
        if let Some(explicit) = service.get("links") {
            for (index, entry) in string_list(mapper, explicit, &join(path, "links"))
                .into_iter()
                .enumerate()
            {
                let (service_name, alias) = entry.split_once(':').unwrap_or((&entry, &entry));
                match container_names.get(service_name) {
                    Some(target) => links.push(link(target, alias)),
                    None => mapper.error(
                        &format!("{}[{index}]", join(path, "links")),
                        explicit.line,
                        format!("no service named {service_name:?}"),
                    ),
                }
            }
        }
        // Links are how services find each other by name on Docker's default bridge; other
        // network modes share the host's (or no) network, where names do not apply.
        links.sort();
        links.dedup();
        if !links.is_empty()
            && self.network_mode == "bridge"
            && service.get("network_mode").is_none()
        {
            container.insert("links".into(), json!(links));
        }

        if let Some(check) = service.get("healthcheck") {
            if let Some(health) = health_check(mapper, check, &join(path, "healthcheck")) {
                container.insert("healthCheck".into(), health);
            }
        }

        if let Some(restart) = service.get("restart") {
            if let Some(policy) = restart_policy(mapper, restart, &join(path, "restart")) {
                container.insert("restartPolicy".into(), policy);
            }
        }

        self.resources(mapper, service, path, &mut container);

        for (key, ecs_key) in [
            ("working_dir", "workingDirectory"),
            ("user", "user"),
            ("hostname", "hostname"),
        ] {
            if let Some(node) = service.get(key) {
                match node.scalar_text() {
                    Some(text) => {
                        container.insert(ecs_key.into(), json!(text));
                    }
                    None => mapper.error(&join(path, key), node.line, "must be a string"),
                }
            }
        }
        if let Some(node) = service.get("hostname") {
            if self.network_mode == "host" {
                mapper.error(
                    &join(path, "hostname"),
                    node.line,
                    "cannot be set with network_mode: host",
                );
            }
        }
        for (key, ecs_key) in [
            ("privileged", "privileged"),
            ("read_only", "readonlyRootFilesystem"),
            ("stdin_open", "interactive"),
            ("tty", "pseudoTerminal"),
        ] {
            if let Some(node) = service.get(key) {
                match node.value {
                    Value::Bool(flag) => {
                        container.insert(ecs_key.into(), json!(flag));
                    }
                    _ => mapper.error(&join(path, key), node.line, "must be true or false"),
                }
            }
        }
        if let Some(node) = service.get("init") {
            match node.value {
                Value::Bool(flag) => {
                    linux.insert("initProcessEnabled".into(), json!(flag));
                }
                _ => mapper.error(&join(path, "init"), node.line, "must be true or false"),
            }
        }

        if let Some(labels) = service.get("labels") {
            let map = key_values(mapper, labels, &join(path, "labels"), true);
            if !map.is_empty() {
                let object: Map<String, Json> = map
                    .into_iter()
                    .map(|(k, v)| (k, json!(v.unwrap_or_default())))
                    .collect();
                container.insert("dockerLabels".into(), Json::Object(object));
            }
        }

        if let Some(logging) = service.get("logging") {
            let logging_path = join(path, "logging");
            check_keys(mapper, logging, &logging_path, &["driver", "options"]);
            let mut config = Map::new();
            if let Some(driver) = logging.get("driver").and_then(Node::scalar_text) {
                config.insert("logDriver".into(), json!(driver));
            } else {
                config.insert("logDriver".into(), json!("json-file"));
            }
            if let Some(options) = logging.get("options") {
                let map = key_values(mapper, options, &join(&logging_path, "options"), false);
                let object: Map<String, Json> = map
                    .into_iter()
                    .map(|(k, v)| (k, json!(v.unwrap_or_default())))
                    .collect();
                if !object.is_empty() {
                    config.insert("options".into(), Json::Object(object));
                }
            }
            container.insert("logConfiguration".into(), Json::Object(config));
        }

        if let Some(node) = service.get("stop_grace_period") {
            let grace_path = join(path, "stop_grace_period");
            if let Some(ms) = duration_ms(mapper, node, &grace_path) {
                let mut seconds = ms.div_ceil(1000);
                if seconds > STOP_TIMEOUT_MAX_SECONDS {
                    mapper.warn(&grace_path, node.line, format!("{seconds} s is more than ECS's {STOP_TIMEOUT_MAX_SECONDS} s stopTimeout; using {STOP_TIMEOUT_MAX_SECONDS} s"));
                    seconds = STOP_TIMEOUT_MAX_SECONDS;
                }
                container.insert("stopTimeout".into(), json!(seconds));
            }
        }
        if let Some(node) = service.get("stop_signal") {
            let signal = node.scalar_text().unwrap_or_default().to_ascii_uppercase();
            if !matches!(signal.as_str(), "SIGTERM" | "TERM" | "15") {
                mapper.error(
                    &join(path, "stop_signal"),
                    node.line,
                    "ECS task definitions have no stop signal: deckhand stops with the image's \
                     STOPSIGNAL (set it in the image instead)",
                );
            }
        }

        if let Some(node) = service.get("tmpfs") {
            let tmpfs_path = join(path, "tmpfs");
            let mut list: Vec<Json> = linux
                .get("tmpfs")
                .and_then(Json::as_array)
                .cloned()
                .unwrap_or_default();
            for (index, entry) in string_list(mapper, node, &tmpfs_path)
                .into_iter()
                .enumerate()
            {
                if let Some(mount) =
                    tmpfs_mount(mapper, &entry, &format!("{tmpfs_path}[{index}]"), node.line)
                {
                    list.push(mount);
                }
            }
            if !list.is_empty() {
                linux.insert("tmpfs".into(), Json::Array(list));
            }
        }

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
        if !linux.is_empty() {
            container.insert("linuxParameters".into(), Json::Object(linux));
        }

        if let Some(node) = service.get("scale") {
            if !matches!(node.value, Value::Integer(0 | 1)) {
                mapper.error(
                    &join(path, "scale"),
                    line_of("scale"),
                    "a task runs each service once: scale must be 1",
                );
            }
        }
        Json::Object(container)
    }

    /// `environment` (list or map) over `env_file` (later files win), as Compose orders them.
    fn environment(
        &mut self,
        mapper: &mut Mapper,
        service: &Node,
        path: &str,
    ) -> BTreeMap<String, String> {
        let mut environment = BTreeMap::new();
        if let Some(files) = service.get("env_file") {
            let files_path = join(path, "env_file");
            let list: Vec<(String, bool)> = match &files.value {
                Value::String(file) => vec![(file.clone(), true)],
                Value::Sequence(items) => items
                    .iter()
                    .filter_map(|item| match &item.value {
                        Value::String(file) => Some((file.clone(), true)),
                        Value::Mapping(_) => {
                            let file = item.get("path").and_then(Node::scalar_text)?;
                            let required = !matches!(
                                item.get("required").map(|n| &n.value),
                                Some(Value::Bool(false))
                            );
                            Some((file, required))
                        }
                        _ => None,
                    })
                    .collect(),
                _ => {
                    mapper.error(&files_path, files.line, "must be a path or a list of paths");
                    Vec::new()
                }
            };
            for (file, required) in list {
                let text = if required {
                    mapper.read_env_file(&file, &files_path, files.line)
                } else {
                    let full = mapper
                        .context
                        .directory
                        .as_ref()
                        .map_or_else(|| file.clone().into(), |directory| directory.join(&file));
                    (mapper.context.read_file)(&full).ok()
                };
                let Some(text) = text else { continue };
                match values::parse_env_file(&text) {
                    Ok(entries) => {
                        for (key, value) in entries {
                            let value = value.or_else(|| mapper.variable(&key).map(str::to_string));
                            if let Some(value) = value {
                                environment.insert(key, value);
                            }
                        }
                    }
                    Err(error) => mapper.error(&files_path, files.line, format!("{file}: {error}")),
                }
            }
        }
        if let Some(node) = service.get("environment") {
            for (key, value) in key_values(mapper, node, &join(path, "environment"), true) {
                // `- NAME` with no value takes NAME from the environment, or leaves it unset.
                let value = value.or_else(|| mapper.variable(&key).map(str::to_string));
                match value {
                    Some(value) => {
                        environment.insert(key, value);
                    }
                    None => {
                        environment.remove(&key);
                    }
                }
            }
        }
        environment
    }

    fn network_mode(&mut self, mapper: &mut Mapper, node: &Node, path: &str, service: &str) {
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

    fn ports(&mut self, mapper: &mut Mapper, node: &Node, path: &str) -> Vec<Json> {
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

    /// A service's `volumes`: named volumes become task volumes shared by name (Docker's
    /// `<project>_<name>`, as Compose names them), bind mounts become host volumes, a path alone
    /// an anonymous volume of the task, and `type: tmpfs` a tmpfs mount.
    fn service_volumes(
        &mut self,
        mapper: &mut Mapper,
        node: &Node,
        path: &str,
        tmpfs: &mut Vec<Json>,
    ) -> Vec<Json> {
        let mut mounts = Vec::new();
        let Value::Sequence(items) = &node.value else {
            mapper.error(path, node.line, "must be a list");
            return mounts;
        };
        for (index, item) in items.iter().enumerate() {
            let item_path = format!("{path}[{index}]");
            let (kind, source, target, read_only) = match &item.value {
                Value::Mapping(_) => {
                    check_keys(
                        mapper,
                        item,
                        &item_path,
                        &[
                            "type",
                            "source",
                            "target",
                            "read_only",
                            "bind",
                            "volume",
                            "tmpfs",
                            "consistency",
                        ],
                    );
                    if let Some(bind) = item.get("bind") {
                        check_keys(
                            mapper,
                            bind,
                            &join(&item_path, "bind"),
                            &["create_host_path", "selinux"],
                        );
                    }
                    if let Some(volume) = item.get("volume") {
                        check_keys(mapper, volume, &join(&item_path, "volume"), &["nocopy"]);
                    }
                    if let Some(tmpfs) = item.get("tmpfs") {
                        check_keys(mapper, tmpfs, &join(&item_path, "tmpfs"), &["size"]);
                    }
                    let kind = item
                        .get("type")
                        .and_then(Node::scalar_text)
                        .unwrap_or_else(|| "volume".into());
                    let source = item
                        .get("source")
                        .and_then(Node::scalar_text)
                        .filter(|s| !s.is_empty());
                    let Some(target) = item.get("target").and_then(Node::scalar_text) else {
                        mapper.error(&join(&item_path, "target"), item.line, "required");
                        continue;
                    };
                    let read_only = matches!(
                        item.get("read_only").map(|n| &n.value),
                        Some(Value::Bool(true))
                    );
                    if kind == "tmpfs" {
                        let size = item
                            .get("tmpfs")
                            .and_then(|t| t.get("size"))
                            .and_then(Node::scalar_text);
                        let spec = match size {
                            Some(size) => format!("{target}:size={size}"),
                            None => target.clone(),
                        };
                        if let Some(mount) = tmpfs_mount(mapper, &spec, &item_path, item.line) {
                            tmpfs.push(mount);
                        }
                        continue;
                    }
                    if kind != "volume" && kind != "bind" {
                        mapper.error(
                            &join(&item_path, "type"),
                            item.line,
                            format!("{kind:?} is not supported: volume, bind or tmpfs"),
                        );
                        continue;
                    }
                    (kind, source, target, read_only)
                }
                _ => {
                    let Some(text) = item.scalar_text() else {
                        mapper.error(
                            &item_path,
                            item.line,
                            "must be SOURCE:TARGET[:MODE] or a mapping",
                        );
                        continue;
                    };
                    let parts: Vec<&str> = text.split(':').collect();
                    let (source, target, mode) = match parts.as_slice() {
                        [target] => (None, target.to_string(), ""),
                        [source, target] => (Some(source.to_string()), target.to_string(), ""),
                        [source, target, mode] => {
                            (Some(source.to_string()), target.to_string(), *mode)
                        }
                        _ => {
                            mapper.error(&item_path, item.line, "must be SOURCE:TARGET[:MODE]");
                            continue;
                        }
                    };
                    let mut read_only = false;
                    for option in mode.split(',').filter(|option| !option.is_empty()) {
                        match option {
                            "ro" => read_only = true,
                            "rw" => {}
                            "z" | "Z" | "nocopy" | "cached" | "delegated" | "consistent" => mapper
                                .warn(
                                    &item_path,
                                    item.line,
                                    format!(
                                    "ignored: mode {option} (ECS mount points have no such option)"
                                ),
                                ),
                            other => mapper.error(
                                &item_path,
                                item.line,
                                format!("unknown volume mode {other:?}"),
                            ),
                        }
                    }
                    let kind = match &source {
                        Some(source) if is_bind_source(source) => "bind".to_string(),
                        _ => "volume".to_string(),
                    };
                    (kind, source, target, read_only)
                }
            };
            let volume = match (kind.as_str(), source) {
                ("bind", Some(source)) => self.bind_volume(mapper, &source, &item_path, item.line),
                ("bind", None) => {
                    mapper.error(&item_path, item.line, "a bind mount needs a source");
                    None
                }
                (_, Some(source)) => self.named_volume(mapper, &source, &item_path, item.line),
                (_, None) => Some(self.anonymous_volume()),
            };
            if let Some(volume) = volume {
                mounts.push(
                    json!({"sourceVolume": volume, "containerPath": target, "readOnly": read_only}),
                );
            }
        }
        mounts
    }

    fn add_volume(&mut self, name: &str, volume: Json) {
        if self.volume_names.insert(name.to_string()) {
            self.volumes.push(volume);
        }
    }

    fn bind_volume(
        &mut self,
        mapper: &mut Mapper,
        source: &str,
        path: &str,
        line: u64,
    ) -> Option<String> {
        let absolute = if let Some(rest) = source.strip_prefix('~') {
            match mapper.variable("HOME") {
                Some(home) => format!("{}{rest}", home.trim_end_matches('/')),
                None => {
                    mapper.error(path, line, "~ needs HOME to be set");
                    return None;
                }
            }
        } else if source.starts_with('/') {
            source.to_string()
        } else {
            match mapper.directory() {
                Some(directory) => {
                    let relative = source.trim_start_matches("./");
                    let relative = if relative == "." { "" } else { relative };
                    format!("{}/{relative}", directory.trim_end_matches('/'))
                        .trim_end_matches('/')
                        .to_string()
                }
                None => {
                    mapper.error(path, line, "a relative bind mount needs the Compose file's directory (give an absolute path)");
                    return None;
                }
            }
        };
        if let Some(name) = self.bind_volumes.get(&absolute) {
            return Some(name.clone());
        }
        let name = format!("bind-{}", self.bind_volumes.len() + 1);
        self.bind_volumes.insert(absolute.clone(), name.clone());
        self.add_volume(
            &name,
            json!({"name": name, "host": {"sourcePath": absolute}}),
        );
        Some(name)
    }

    fn anonymous_volume(&mut self) -> String {
        let mut number = 1;
        while self.volume_names.contains(&format!("anonymous-{number}")) {
            number += 1;
        }
        let name = format!("anonymous-{number}");
        // No host and no Docker volume configuration: a volume of the task's own.
        self.add_volume(&name, json!({"name": name}));
        name
    }

    fn named_volume(
        &mut self,
        mapper: &mut Mapper,
        source: &str,
        path: &str,
        line: u64,
    ) -> Option<String> {
        let declared = match &self.top_volumes {
            Some(Node {
                value: Value::Mapping(entries),
                ..
            }) => entries
                .iter()
                .find(|(name, _, _)| name == source)
                .map(|(_, line, node)| (*line, node.clone())),
            _ => None,
        };
        let Some((declared_line, declaration)) = declared else {
            mapper.error(
                path,
                line,
                format!("volume {source:?} is not declared under the top-level volumes:"),
            );
            return None;
        };
        let declaration_path = join("volumes", source);
        let external = matches!(
            declaration.get("external").map(|n| &n.value),
            Some(Value::Bool(true))
        );
        let docker_name = match declaration.get("name").and_then(Node::scalar_text) {
            Some(name) => name,
            None if external => source.to_string(),
            None => format!("{}_{source}", self.project),
        };
        let task_name: String = docker_name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        if task_name != docker_name {
            mapper.error(&declaration_path, declared_line, format!("volume name {docker_name:?} may hold only letters, digits, - and _ in a task definition"));
            return None;
        }
        if self.volume_names.contains(&task_name) {
            return Some(task_name);
        }
        let mut configuration = Map::new();
        configuration.insert("scope".into(), json!("shared"));
        configuration.insert("autoprovision".into(), json!(!external));
        if let Value::Mapping(entries) = &declaration.value {
            for (key, key_line, value) in entries {
                let key_path = join(&declaration_path, key);
                match key.as_str() {
                    "external" | "name" => {}
                    "driver" => {
                        if let Some(driver) = value.scalar_text() {
                            configuration.insert("driver".into(), json!(driver));
                        }
                    }
                    "driver_opts" | "labels" => {
                        let map = key_values(mapper, value, &key_path, key == "labels");
                        let object: Map<String, Json> = map
                            .into_iter()
                            .map(|(k, v)| (k, json!(v.unwrap_or_default())))
                            .collect();
                        let ecs_key = if key == "labels" {
                            "labels"
                        } else {
                            "driverOpts"
                        };
                        configuration.insert(ecs_key.into(), Json::Object(object));
                    }
                    other if other.starts_with("x-") => {}
                    _ => mapper.error(&key_path, *key_line, "unknown or unsupported volume key"),
                }
            }
        }
        self.add_volume(
            &task_name,
            json!({"name": task_name, "dockerVolumeConfiguration": configuration}),
        );
        Some(task_name)
    }

    fn resources(
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

/// Refuses the keys of a mapping that are not in `known` (`x-` keys aside): a key deckhand does
/// not read would otherwise be dropped without a word.
fn check_keys(mapper: &mut Mapper, node: &Node, path: &str, known: &[&str]) {
    if let Value::Mapping(entries) = &node.value {
        for (key, line, _) in entries {
            if !key.starts_with("x-") && !known.contains(&key.as_str()) {
                mapper.error(
                    &join(path, key),
                    *line,
                    format!(
                        "unknown or unsupported key (known here: {})",
                        known.join(", ")
                    ),
                );
            }
        }
    }
}

fn only_default_network(node: &Node) -> bool {
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

/// ECS container names allow letters, digits, `-` and `_`; Compose's also allow `.`.
fn container_name(service: &str) -> String {
    service
        .chars()
        .map(|c| if c == '.' { '-' } else { c })
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect()
}

fn link(target: &str, alias: &str) -> String {
    if target == alias {
        target.to_string()
    } else {
        format!("{target}:{alias}")
    }
}

fn is_bind_source(source: &str) -> bool {
    source.starts_with('/') || source.starts_with('.') || source.starts_with('~')
}

fn dependencies(mapper: &mut Mapper, node: &Node, path: &str) -> Vec<Dependency> {
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

/// A string or list of strings (scalars are taken as text).
fn string_list(mapper: &mut Mapper, node: &Node, path: &str) -> Vec<String> {
    match &node.value {
        Value::Null => Vec::new(),
        Value::Sequence(items) => items
            .iter()
            .enumerate()
            .filter_map(|(index, item)| match item.scalar_text() {
                Some(text) => Some(text),
                None => {
                    mapper.error(&format!("{path}[{index}]"), item.line, "must be a string");
                    None
                }
            })
            .collect(),
        _ => match node.scalar_text() {
            Some(text) => vec![text],
            None => {
                mapper.error(path, node.line, "must be a string or a list of strings");
                Vec::new()
            }
        },
    }
}

/// A `KEY=VALUE` list or a mapping. `None` values: `- KEY` or `KEY:` with nothing after it.
fn key_values(
    mapper: &mut Mapper,
    node: &Node,
    path: &str,
    split_list: bool,
) -> Vec<(String, Option<String>)> {
    let mut pairs = Vec::new();
    match &node.value {
        Value::Null => {}
        Value::Mapping(entries) => {
            for (key, line, value) in entries {
                match &value.value {
                    Value::Null => pairs.push((key.clone(), None)),
                    _ => match value.scalar_text() {
                        Some(text) => pairs.push((key.clone(), Some(text))),
                        None => mapper.error(
                            &join(path, key),
                            *line,
                            "must be a string, number or boolean",
                        ),
                    },
                }
            }
        }
        Value::Sequence(_) if split_list => {
            for entry in string_list(mapper, node, path) {
                match entry.split_once('=') {
                    Some((key, value)) => pairs.push((key.to_string(), Some(value.to_string()))),
                    None => pairs.push((entry, None)),
                }
            }
        }
        _ => mapper.error(path, node.line, "must be a mapping"),
    }
    pairs
}

fn command_words(mapper: &mut Mapper, node: &Node, path: &str) -> Option<Vec<String>> {
    match &node.value {
        Value::Null => None,
        Value::Sequence(_) => Some(string_list(mapper, node, path)),
        _ => {
            let text = node.scalar_text()?;
            match values::shell_words(&text) {
                Ok(words) => Some(words),
                Err(message) => {
                    mapper.error(path, node.line, message);
                    None
                }
            }
        }
    }
}

fn duration_ms(mapper: &mut Mapper, node: &Node, path: &str) -> Option<u64> {
    // A bare number is refused (its unit would be a guess), except 0.
    let text = node.scalar_text().unwrap_or_default();
    match values::parse_duration_ms(&text) {
        Ok(ms) => Some(ms),
        Err(message) => {
            mapper.error(path, node.line, message);
            None
        }
    }
}

fn mebibytes(mapper: &mut Mapper, node: &Node, path: &str) -> Option<u64> {
    let text = node.scalar_text().unwrap_or_default();
    match values::parse_bytes(&text) {
        Ok(bytes) => Some(bytes.div_ceil(1024 * 1024)),
        Err(message) => {
            mapper.error(path, node.line, message);
            None
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

/// `healthcheck`: `test` as a list (`CMD`, `CMD-SHELL`, `NONE`) or a string (`CMD-SHELL`);
/// durations raised to ECS's minimums (or lowered to its maximums) with a warning.
fn health_check(mapper: &mut Mapper, node: &Node, path: &str) -> Option<Json> {
    if matches!(
        node.get("disable").map(|n| &n.value),
        Some(Value::Bool(true))
    ) {
        return Some(json!({"command": ["NONE"]}));
    }
    if let Value::Mapping(entries) = &node.value {
        for (key, line, _) in entries {
            if ![
                "test",
                "interval",
                "timeout",
                "retries",
                "start_period",
                "start_interval",
                "disable",
            ]
            .contains(&key.as_str())
            {
                mapper.error(&join(path, key), *line, "unknown healthcheck key");
            }
            if key == "start_interval" {
                mapper.warn(
                    &join(path, key),
                    *line,
                    "ignored: ECS health checks have no start interval",
                );
            }
        }
    }
    let command: Vec<String> = match node.get("test") {
        None => {
            // Only timings: they apply to the image's own HEALTHCHECK, which ECS cannot adjust.
            mapper.error(&join(path, "test"), node.line, "required: ECS health checks need the command (the image's HEALTHCHECK cannot be re-timed)");
            return None;
        }
        Some(test) => match &test.value {
            Value::Sequence(_) => string_list(mapper, test, &join(path, "test")),
            _ => match test.scalar_text() {
                Some(text) => vec!["CMD-SHELL".to_string(), text],
                None => {
                    mapper.error(&join(path, "test"), test.line, "must be a string or a list");
                    return None;
                }
            },
        },
    };
    match command.first().map(String::as_str) {
        Some("NONE") => return Some(json!({"command": ["NONE"]})),
        Some("CMD" | "CMD-SHELL") if command.len() > 1 => {}
        _ => {
            mapper.error(
                &join(path, "test"),
                node.line,
                "must start with CMD, CMD-SHELL or NONE and give a command",
            );
            return None;
        }
    }
    let mut seconds = |key: &str, default: u64, (low, high): (u64, u64)| -> u64 {
        let Some(value) = node.get(key) else {
            return default;
        };
        let key_path = join(path, key);
        let Some(ms) = duration_ms(mapper, value, &key_path) else {
            return default;
        };
        let wanted = ms.div_ceil(1000);
        let clamped = wanted.clamp(low, high);
        if clamped != wanted {
            mapper.warn(
                &key_path,
                value.line,
                format!("{wanted} s is outside ECS's {low}–{high} s; using {clamped} s"),
            );
        }
        clamped
    };
    let interval = seconds(
        "interval",
        COMPOSE_HEALTH_INTERVAL_SECONDS,
        HEALTH_INTERVAL_RANGE,
    );
    let timeout = seconds(
        "timeout",
        COMPOSE_HEALTH_TIMEOUT_SECONDS.min(HEALTH_TIMEOUT_RANGE.1),
        HEALTH_TIMEOUT_RANGE,
    );
    let start_period = seconds("start_period", 0, HEALTH_START_PERIOD_RANGE);
    let retries = match node.get("retries") {
        None => COMPOSE_HEALTH_RETRIES,
        Some(value) => match value.value {
            Value::Integer(number) if number >= 0 => {
                let wanted = u64::try_from(number).unwrap_or(u64::MAX);
                let (low, high) = HEALTH_RETRIES_RANGE;
                let clamped = wanted.clamp(low, high);
                if clamped != wanted {
                    mapper.warn(
                        &join(path, "retries"),
                        value.line,
                        format!("{wanted} is outside ECS's {low}–{high}; using {clamped}"),
                    );
                }
                clamped
            }
            _ => {
                mapper.error(&join(path, "retries"), value.line, "must be a whole number");
                COMPOSE_HEALTH_RETRIES
            }
        },
    };
    // ECS also wants the timeout below the interval.
    let timeout = if timeout >= interval {
        let lowered = interval.saturating_sub(1).max(HEALTH_TIMEOUT_RANGE.0);
        if node.get("timeout").is_some() {
            mapper.warn(
                &join(path, "timeout"),
                node.line,
                format!("{timeout} s is not below the interval ({interval} s); using {lowered} s"),
            );
        }
        lowered
    } else {
        timeout
    };
    Some(json!({
        "command": command,
        "interval": interval,
        "timeout": timeout,
        "retries": retries,
        "startPeriod": start_period,
    }))
}

/// `restart` → ECS's container restart policy. `no` is no policy; `always` and
/// `unless-stopped` restart on any exit; `on-failure` ignores exit code 0. ECS has no retry
/// count, so `on-failure:N` restarts without a limit (a warning says so).
fn restart_policy(mapper: &mut Mapper, node: &Node, path: &str) -> Option<Json> {
    let text = node.scalar_text().unwrap_or_default();
    let (name, count) = match text.split_once(':') {
        Some((name, count)) => (name, Some(count)),
        None => (text.as_str(), None),
    };
    let period = RESTART_ATTEMPT_PERIOD_RANGE.0;
    match (name, count) {
        ("no", None) => None,
        ("always" | "unless-stopped", None) => {
            Some(json!({"enabled": true, "restartAttemptPeriod": period}))
        }
        ("on-failure", count) => {
            if let Some(count) = count {
                mapper.warn(path, node.line, format!("the retry count {count} is ignored: ECS restart policies have none (a container that keeps failing within {period} s of starting is not restarted)"));
            }
            Some(json!({"enabled": true, "ignoredExitCodes": [0], "restartAttemptPeriod": period}))
        }
        _ => {
            mapper.error(
                path,
                node.line,
                format!("{text:?}: expected no, always, on-failure[:N] or unless-stopped"),
            );
            None
        }
    }
}

/// `/run` or `/run:size=64m,mode=1777` → an ECS tmpfs mount (size in MiB, required by ECS).
fn tmpfs_mount(mapper: &mut Mapper, spec: &str, path: &str, line: u64) -> Option<Json> {
    let (target, options) = spec.split_once(':').unwrap_or((spec, ""));
    let mut size_mib = None;
    let mut mount_options = Vec::new();
    for option in options.split(',').filter(|option| !option.is_empty()) {
        if let Some(size) = option.strip_prefix("size=") {
            match values::parse_bytes(size) {
                Ok(bytes) => size_mib = Some(bytes.div_ceil(1024 * 1024).max(1)),
                Err(message) => {
                    mapper.error(path, line, message);
                    return None;
                }
            }
        } else {
            mount_options.push(option.to_string());
        }
    }
    let size = size_mib.unwrap_or_else(|| {
        mapper.warn(
            path,
            line,
            format!(
                "tmpfs {target} has no size; using {TMPFS_DEFAULT_SIZE_MIB} MiB (ECS needs one)"
            ),
        );
        TMPFS_DEFAULT_SIZE_MIB
    });
    let mut mount = json!({"containerPath": target, "size": size});
    if !mount_options.is_empty() {
        mount["mountOptions"] = json!(mount_options);
    }
    Some(mount)
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
