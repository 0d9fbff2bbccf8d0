//! `volumes` and `tmpfs`: named volumes (shared Docker volumes named as Compose names them),
//! bind mounts (host volumes, one per host path), anonymous volumes (a volume of the task's own)
//! and tmpfs mounts (`linuxParameters.tmpfs`, with a size ECS requires).

use super::super::node::{Node, Value};
use super::super::values;
use super::super::{join, Mapper};
use super::read::{check_keys, key_values, string_list};
use super::TaskBuilder;
use serde_json::{json, Map, Value as Json};

/// A `tmpfs` with no size gets this many MiB (ECS requires a size; Docker's default is half of
/// the host's memory, which no edge host wants from a typo).
const TMPFS_DEFAULT_SIZE_MIB: u64 = 64;

impl TaskBuilder {
    /// A service's `volumes`: named volumes become task volumes shared by name (Docker's
    /// `<project>_<name>`, as Compose names them), bind mounts become host volumes, a path alone
    /// an anonymous volume of the task, and `type: tmpfs` a tmpfs mount.
    pub(super) fn service_volumes(
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
                        let object = crate::sorting::json_object_of(
                            map.into_iter()
                                .map(|(k, v)| (k, json!(v.unwrap_or_default()))),
                        );
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
}

/// The `tmpfs` key (a path or a list), after any `type: tmpfs` volumes already in `linux`.
pub(super) fn tmpfs_key(
    mapper: &mut Mapper,
    service: &Node,
    path: &str,
    linux: &mut Map<String, Json>,
) {
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
}

fn is_bind_source(source: &str) -> bool {
    source.starts_with('/') || source.starts_with('.') || source.starts_with('~')
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
