//! One Compose service → one ECS container definition, and what the services share: the task's
//! network mode, its volumes, and the links that let services find each other by name.
//!
//! This file walks a service's keys (the tables of mapped, ignored and refused keys), maps the
//! general ones (image, command, labels, logging) and hands each key family to its own file:
//! `environment.rs`, `links.rs` (network mode, dependencies, links, `volumes_from`),
//! `ports.rs`, `volumes.rs` (volumes, bind
//! mounts, tmpfs), `health.rs` (health checks, restart policy, stopping), `resources.rs` (memory,
//! CPU, `deploy`), `linux.rs` (the container's Linux settings). `read.rs` holds the typed reads of
//! YAML values they share.

mod environment;
mod health;
mod links;
mod linux;
mod ports;
mod read;
mod resources;
mod volumes;

use super::node::{Node, Value};
use super::values;
use super::{join, Mapper};
use links::{dependencies, link, only_default_network, volumes_from};
use read::{check_keys, command_words, key_values, string_list};
use serde_json::{json, Map, Value as Json};
use std::collections::{BTreeMap, BTreeSet};

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
    ("networks", "user-defined networks are not supported: a task's services share Docker's bridge"),
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
    "volumes_from",
    "profiles",
    "scale",
    "stdin_open",
    "tty",
    "devices",
    "sysctls",
    "security_opt",
    "shm_size",
    "pid",
    "ipc",
    "x-deckhand-essential",
    // Resolved before the mapping (extends.rs).
    "extends",
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
    pid_requests: Vec<linux::NamespaceRequest>,
    ipc_requests: Vec<linux::NamespaceRequest>,
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
            pid_requests: Vec::new(),
            ipc_requests: Vec::new(),
        }
    }

    /// Maps every service but those in `skip` (their `extends` failed, and said so).
    pub fn map_services(
        &mut self,
        mapper: &mut Mapper,
        services: &[(String, u64, Node)],
        skip: &BTreeSet<String>,
    ) {
        let selected_profiles: BTreeSet<String> = crate::sorting::set_of(
            mapper
                .variable("COMPOSE_PROFILES")
                .unwrap_or("")
                .split(',')
                .map(|profile| profile.trim().to_string())
                .filter(|profile| !profile.is_empty()),
        );
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
        let mut mapped = Vec::new();
        for (name, line, service) in services {
            if skip.contains(name) {
                continue;
            }
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
            mapped.push(name.clone());
        }
        self.settle_namespace_modes(mapper, &mapped);
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
        if let Some(sources) = service.get("volumes_from") {
            let sources = volumes_from(
                mapper,
                sources,
                &join(path, "volumes_from"),
                container_names,
            );
            if !sources.is_empty() {
                container.insert("volumesFrom".into(), Json::Array(sources));
            }
        }
        // Links are how services find each other by name on Docker's default bridge; other
        // network modes share the host's (or no) network, where names do not apply.
        crate::sorting::sort(&mut links);
        links.dedup();
        if !links.is_empty()
            && self.network_mode == "bridge"
            && service.get("network_mode").is_none()
        {
            container.insert("links".into(), json!(links));
        }

        if let Some(check) = service.get("healthcheck") {
            if let Some(health) = health::health_check(mapper, check, &join(path, "healthcheck")) {
                container.insert("healthCheck".into(), health);
            }
        }

        if let Some(restart) = service.get("restart") {
            if let Some(policy) = health::restart_policy(mapper, restart, &join(path, "restart")) {
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
        linux::init(mapper, service, path, &mut linux);

        if let Some(labels) = service.get("labels") {
            let map = key_values(mapper, labels, &join(path, "labels"), true);
            if !map.is_empty() {
                let object = crate::sorting::json_object_of(
                    map.into_iter()
                        .map(|(k, v)| (k, json!(v.unwrap_or_default()))),
                );
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
                let object = crate::sorting::json_object_of(
                    map.into_iter()
                        .map(|(k, v)| (k, json!(v.unwrap_or_default()))),
                );
                if !object.is_empty() {
                    config.insert("options".into(), Json::Object(object));
                }
            }
            container.insert("logConfiguration".into(), Json::Object(config));
        }

        health::stopping(mapper, service, path, &mut container);
        volumes::tmpfs_key(mapper, service, path, &mut linux);
        linux::settings(mapper, service, path, &mut container, &mut linux);
        linux::kernel_settings(mapper, service, path, &mut container, &mut linux);
        self.namespace_keys(mapper, service, path, name);
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
}

/// ECS container names allow letters, digits, `-` and `_`; Compose's also allow `.`.
fn container_name(service: &str) -> String {
    service
        .chars()
        .map(|c| if c == '.' { '-' } else { c })
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect()
}
