//! `extends` within one file: a service (`extends: base` or `extends: {service: base}`) starts
//! from another service of the same file and overrides or adds to it, with the Compose
//! specification's merge rules. Chains are followed; a cycle, an unknown service or
//! `extends: {file: …}` (another file, which deckhand does not read) is an error with its YAML
//! path and line. This runs on the interpolated tree, before the services are mapped, so the
//! mapping sees each service as if it were written out in full (every value keeps the line it
//! came from). A service whose `extends` fails is not mapped further (its error says why), as a
//! service of an unselected profile is not.
//!
//! The merge, key by key (the extending service is "main", the extended one "base"):
//!
//! - not inherited: `depends_on`, `links`, `volumes_from` (dependencies stay visible where they
//!   are used) — only main's own;
//! - replaced whole: `command`, `entrypoint`, `healthcheck.test`, every scalar, and sequences not
//!   named below (`profiles`);
//! - merged by name, main winning: `environment`, `labels`, `sysctls`, `annotations` (list or
//!   mapping forms alike), `extra_hosts` (by host name), and every mapping (`healthcheck`,
//!   `ulimits`, `deploy`, `logging` — whose options are dropped when main names another driver);
//! - merged by target, main winning: `volumes` and `tmpfs` (container path), `devices` (container
//!   path), `ports` (host address, published port, target, protocol);
//! - appended, duplicates dropped: `cap_add`, `cap_drop`, `expose`, `security_opt`,
//!   `external_links`, `dns_opt`, `group_add`, `device_cgroup_rules`;
//! - appended: `dns`, `dns_search`, `env_file`.

use super::node::{Node, Value};
use super::values;
use super::{join, Mapper};
use std::collections::{BTreeMap, BTreeSet};

/// A service key's entries read as a mapping (name, line, value), `None` when not that shape.
type Entries = Option<Vec<(String, u64, Node)>>;

/// Keys the extending service never takes from the extended one.
const NOT_INHERITED: &[&str] = &["depends_on", "links", "volumes_from"];
/// Keys whose lists or mappings merge by name.
const BY_NAME: &[&str] = &["environment", "labels", "sysctls", "annotations"];
/// Sequences appended with duplicates dropped.
const APPEND_UNIQUE: &[&str] = &[
    "cap_add",
    "cap_drop",
    "expose",
    "security_opt",
    "external_links",
    "dns_opt",
    "group_add",
    "device_cgroup_rules",
];
/// Sequences appended as they are (a scalar is a list of one).
const APPEND: &[&str] = &["dns", "dns_search", "env_file"];
/// YAML nodes that merging may create in all, so that many services extending one large
/// service cannot blow a small file up in memory.
const MAX_MERGED_NODES: usize = 200_000;

/// Resolves every service's `extends` in place. Returns the services whose `extends` failed
/// (their errors are reported): they are not mapped further.
pub(super) fn resolve(
    mapper: &mut Mapper,
    services: &mut [(String, u64, Node)],
) -> BTreeSet<String> {
    let originals: Vec<(String, u64, Node)> = services.to_vec();
    let index: BTreeMap<&str, usize> = crate::sorting::map_of(
        originals
            .iter()
            .enumerate()
            .map(|(at, (name, _, _))| (name.as_str(), at))
            .rev(),
    );
    let mut resolver = Resolver {
        originals: &originals,
        index: &index,
        resolved: BTreeMap::new(),
        failed: BTreeSet::new(),
        merged_nodes: 0,
    };
    for (name, _, node) in services.iter_mut() {
        if let Some(done) = resolver.resolve(mapper, name) {
            *node = done;
        }
    }
    resolver.failed
}

struct Resolver<'a> {
    originals: &'a [(String, u64, Node)],
    /// A service's place in `originals` (the first, should a name repeat).
    index: &'a BTreeMap<&'a str, usize>,
    resolved: BTreeMap<String, Node>,
    failed: BTreeSet<String>,
    merged_nodes: usize,
}

impl Resolver<'_> {
    /// The service `name` with its `extends` applied; `None` when that failed. The chain of
    /// services is followed without recursion (a long chain cannot exhaust the stack), then
    /// merged from its end.
    fn resolve(&mut self, mapper: &mut Mapper, name: &str) -> Option<Node> {
        if let Some(done) = self.resolved.get(name) {
            return Some(done.clone());
        }
        if self.failed.contains(name) {
            return None;
        }
        // `chain[i]` extends `chain[i + 1]`; the last one extends nothing, or a resolved service.
        let mut chain: Vec<String> = vec![name.to_string()];
        loop {
            let current = chain.last().cloned().unwrap_or_default();
            let Some((_, _, service)) = self.original(&current) else {
                break;
            };
            let Value::Mapping(entries) = &service.value else {
                break;
            };
            let Some((_, extends_line, extends)) =
                entries.iter().find(|(key, _, _)| key == "extends")
            else {
                break;
            };
            let extends_path = join(&join("services", &current), "extends");
            let problem = match base_service(mapper, extends, &extends_path, *extends_line) {
                None => Some(None),
                Some(base) if self.resolved.contains_key(&base) => break,
                Some(base) if self.failed.contains(&base) => Some(None),
                Some(base) if self.original(&base).is_none() => {
                    Some(Some(format!("no service named {base:?} to extend")))
                }
                Some(base) => match chain.iter().position(|seen| *seen == base) {
                    Some(start) => {
                        let mut cycle: Vec<&str> =
                            chain[start..].iter().map(String::as_str).collect();
                        cycle.push(&base);
                        Some(Some(format!("extends cycle: {}", cycle.join(" → "))))
                    }
                    None => {
                        chain.push(base);
                        None
                    }
                },
            };
            if let Some(message) = problem {
                if let Some(message) = message {
                    mapper.error(&extends_path, *extends_line, message);
                }
                // Every service of the chain fails with it (its error is reported once).
                self.failed.extend(chain);
                return None;
            }
        }
        let (originals, index) = (self.originals, self.index);
        for member in chain.iter().rev() {
            let (_, line, service) = originals.get(*index.get(member.as_str())?)?;
            let base = service
                .get("extends")
                .and_then(|extends| match &extends.value {
                    Value::String(base) => Some(base.clone()),
                    _ => extends.get("service").and_then(Node::scalar_text),
                })
                .and_then(|base| self.resolved.get(&base));
            let Some(base) = base else {
                self.resolved.insert(member.clone(), service.clone());
                continue;
            };
            let merged = merge_service(base, service, *line);
            // Only what merging creates counts: a large file without extends is not refused.
            self.merged_nodes = self.merged_nodes.saturating_add(count_nodes(&merged));
            if self.merged_nodes > MAX_MERGED_NODES {
                mapper.error(
                    &join(&join("services", member), "extends"),
                    *line,
                    format!(
                        "extends makes the file too large (more than {MAX_MERGED_NODES} values)"
                    ),
                );
                self.failed.extend(chain.iter().cloned());
                return None;
            }
            self.resolved.insert(member.clone(), merged);
        }
        self.resolved.get(name).cloned()
    }

    fn original(&self, name: &str) -> Option<&(String, u64, Node)> {
        self.originals.get(*self.index.get(name)?)
    }
}

/// `extends: NAME` or `extends: {service: NAME}`; `file:` is refused.
fn base_service(mapper: &mut Mapper, extends: &Node, path: &str, line: u64) -> Option<String> {
    match &extends.value {
        Value::String(name) if !name.is_empty() => Some(name.clone()),
        Value::Mapping(entries) => {
            let mut service = None;
            let mut ok = true;
            for (key, key_line, value) in entries {
                match key.as_str() {
                    "service" => service = value.scalar_text().filter(|name| !name.is_empty()),
                    "file" => {
                        let file = value.scalar_text().unwrap_or_default();
                        mapper.error(
                            &join(path, "file"),
                            *key_line,
                            format!(
                                "extends from another file ({file:?}) is not supported: deckhand \
                                 reads one Compose file; copy the service into this file and \
                                 extend it by name"
                            ),
                        );
                        ok = false;
                    }
                    _ => {
                        mapper.error(
                            &join(path, key),
                            *key_line,
                            "unknown or unsupported key (known here: service, file)",
                        );
                        ok = false;
                    }
                }
            }
            if service.is_none() && ok {
                mapper.error(
                    &join(path, "service"),
                    line,
                    "required: the service to extend",
                );
            }
            service.filter(|_| ok)
        }
        _ => {
            mapper.error(path, line, "must be a service name or {service: NAME}");
            None
        }
    }
}

/// `main` (the extending service) over `base`, without `extends`.
fn merge_service(base: &Node, main: &Node, main_line: u64) -> Node {
    let (Value::Mapping(base_entries), Value::Mapping(main_entries)) = (&base.value, &main.value)
    else {
        return main.clone();
    };
    let mut entries: Vec<(String, u64, Node)> = base_entries
        .iter()
        .filter(|(key, _, _)| !NOT_INHERITED.contains(&key.as_str()) && key != "extends")
        .cloned()
        .collect();
    for (key, line, value) in main_entries {
        if key == "extends" {
            continue;
        }
        match entries.iter_mut().find(|(existing, _, _)| existing == key) {
            Some(entry) => {
                entry.2 = merge_key(key, &entry.2, value);
                entry.1 = *line;
            }
            None => entries.push((key.clone(), *line, value.clone())),
        }
    }
    Node {
        line: main_line.max(main.line),
        value: Value::Mapping(entries),
    }
}

/// One service key present in both services.
fn merge_key(key: &str, base: &Node, main: &Node) -> Node {
    match key {
        "command" | "entrypoint" => main.clone(),
        "volumes" => merge_by(base, main, mount_target),
        "tmpfs" => merge_by(base, main, tmpfs_target),
        "devices" => merge_by(base, main, device_target),
        "ports" => merge_by(base, main, port_key),
        "extra_hosts" => merge_named(base, main, host_entries),
        "logging" => {
            let driver = |node: &Node| node.get("driver").and_then(Node::scalar_text);
            match (driver(base), driver(main)) {
                (Some(first), Some(second)) if first != second => main.clone(),
                _ => merge_mappings(base, main),
            }
        }
        _ if BY_NAME.contains(&key) => merge_named(base, main, named_entries),
        _ if APPEND_UNIQUE.contains(&key) => append(base, main, true),
        _ if APPEND.contains(&key) => append(base, main, false),
        _ => merge_mappings(base, main),
    }
}

/// Two mappings merged key by key, recursively (main wins each scalar; sequences below the
/// service's own keys are appended, as the specification's sequence rule says, except a
/// health check's `test`, which is replaced). Anything else: main.
fn merge_mappings(base: &Node, main: &Node) -> Node {
    let (Value::Mapping(base_entries), Value::Mapping(main_entries)) = (&base.value, &main.value)
    else {
        return main.clone();
    };
    let mut entries = base_entries.clone();
    for (key, line, value) in main_entries {
        match entries.iter_mut().find(|(existing, _, _)| existing == key) {
            Some(entry) => {
                entry.2 = match (&entry.2.value, &value.value) {
                    (Value::Mapping(_), Value::Mapping(_)) => merge_mappings(&entry.2, value),
                    (Value::Sequence(_), Value::Sequence(_)) if key != "test" => {
                        append(&entry.2, value, true)
                    }
                    _ => value.clone(),
                };
                entry.1 = *line;
            }
            None => entries.push((key.clone(), *line, value.clone())),
        }
    }
    Node {
        line: main.line,
        value: Value::Mapping(entries),
    }
}

/// A scalar as a list of one, a sequence as it is, anything else as nothing.
fn items(node: &Node) -> Vec<Node> {
    match &node.value {
        Value::Sequence(items) => items.clone(),
        Value::Null => Vec::new(),
        _ => vec![node.clone()],
    }
}

fn append(base: &Node, main: &Node, unique: bool) -> Node {
    if !is_list_like(base) || !is_list_like(main) {
        return main.clone();
    }
    let mut list = items(base);
    for item in items(main) {
        if unique && list.iter().any(|existing| same_scalar(existing, &item)) {
            continue;
        }
        list.push(item);
    }
    Node {
        line: main.line,
        value: Value::Sequence(list),
    }
}

fn is_list_like(node: &Node) -> bool {
    !matches!(node.value, Value::Mapping(_))
}

fn same_scalar(first: &Node, second: &Node) -> bool {
    match (first.scalar_text(), second.scalar_text()) {
        (Some(first), Some(second)) => first == second,
        _ => first.value == second.value,
    }
}

/// Sequences merged by a unique key: main's item replaces base's item with the same key, in
/// base's place; items without a key, and main's new ones, are appended.
fn merge_by(base: &Node, main: &Node, key_of: fn(&Node) -> Option<String>) -> Node {
    if !is_list_like(base) || !is_list_like(main) {
        return main.clone();
    }
    let mut list = items(base);
    // Each key's place in `list`, computed once (a long list stays linear).
    let mut places: BTreeMap<String, usize> = BTreeMap::new();
    for (at, item) in list.iter().enumerate() {
        if let Some(key) = key_of(item) {
            places.entry(key).or_insert(at);
        }
    }
    for item in items(main) {
        match key_of(&item) {
            Some(key) => match places.get(&key) {
                Some(&at) => {
                    if let Some(slot) = list.get_mut(at) {
                        *slot = item;
                    }
                }
                None => {
                    places.insert(key, list.len());
                    list.push(item);
                }
            },
            None => list.push(item),
        }
    }
    Node {
        line: main.line,
        value: Value::Sequence(list),
    }
}

/// A volume's container path: `SOURCE:TARGET[:MODE]`, `TARGET`, or the long form's `target`.
fn mount_target(item: &Node) -> Option<String> {
    if let Value::Mapping(_) = item.value {
        return item.get("target").and_then(Node::scalar_text);
    }
    let text = item.scalar_text()?;
    let mut parts = text.split(':');
    let first = parts.next()?;
    Some(parts.next().unwrap_or(first).to_string())
}

/// A tmpfs's container path: `TARGET[:OPTIONS]`.
fn tmpfs_target(item: &Node) -> Option<String> {
    let text = item.scalar_text()?;
    text.split(':').next().map(str::to_string)
}

/// A device's container path: `HOST[:CONTAINER[:PERMISSIONS]]` or the long form.
fn device_target(item: &Node) -> Option<String> {
    if let Value::Mapping(_) = item.value {
        return item
            .get("target")
            .or_else(|| item.get("source"))
            .and_then(Node::scalar_text);
    }
    let text = item.scalar_text()?;
    let mut parts = text.split(':');
    let host = parts.next()?;
    Some(parts.next().unwrap_or(host).to_string())
}

/// A port's unique key: host address, published port, target, protocol.
fn port_key(item: &Node) -> Option<String> {
    if let Value::Mapping(_) = item.value {
        let field = |key: &str| {
            item.get(key)
                .and_then(Node::scalar_text)
                .unwrap_or_default()
        };
        let protocol = item
            .get("protocol")
            .and_then(Node::scalar_text)
            .unwrap_or_else(|| "tcp".to_string());
        return Some(format!(
            "{}|{}|{}|{}",
            field("host_ip"),
            field("published"),
            field("target"),
            protocol.to_ascii_lowercase()
        ));
    }
    let port = values::parse_port(&item.scalar_text()?).ok()?;
    let range = |(first, last): (u16, u16)| {
        if first == last {
            first.to_string()
        } else {
            format!("{first}-{last}")
        }
    };
    Some(format!(
        "{}|{}|{}|{}",
        port.host_ip.unwrap_or_default(),
        port.host.map(range).unwrap_or_default(),
        range(port.container),
        port.protocol
    ))
}

/// Lists or mappings merged by name into a mapping: main's value wins, base's order first.
fn merge_named(base: &Node, main: &Node, entries_of: fn(&Node) -> Entries) -> Node {
    let (Some(mut entries), Some(main_entries)) = (entries_of(base), entries_of(main)) else {
        return main.clone();
    };
    for (name, line, value) in main_entries {
        match entries
            .iter_mut()
            .find(|(existing, _, _)| *existing == name)
        {
            Some(entry) => {
                entry.1 = line;
                entry.2 = value;
            }
            None => entries.push((name, line, value)),
        }
    }
    Node {
        line: main.line,
        value: Value::Mapping(entries),
    }
}

/// `[NAME=VALUE, NAME]` or a mapping, as mapping entries (`NAME` alone is a null value).
fn named_entries(node: &Node) -> Entries {
    list_entries(node, |text| {
        Some(match text.split_once('=') {
            Some((name, value)) => (name.to_string(), Value::String(value.to_string())),
            None => (text.to_string(), Value::Null),
        })
    })
}

/// `[HOST:IP, HOST=IP]` or a mapping, as mapping entries by host name.
fn host_entries(node: &Node) -> Entries {
    list_entries(node, |text| {
        let (host, address) = text.split_once('=').or_else(|| text.split_once(':'))?;
        Some((host.to_string(), Value::String(address.to_string())))
    })
}

/// A mapping as it is, or a list whose items `split` makes into a key and a value (`None`: an
/// item it cannot read, and the whole value is not mergeable by key).
fn list_entries(node: &Node, split: impl Fn(&str) -> Option<(String, Value)>) -> Entries {
    match &node.value {
        Value::Mapping(entries) => Some(entries.clone()),
        Value::Null => Some(Vec::new()),
        Value::Sequence(items) => items
            .iter()
            .map(|item| {
                let (key, value) = split(&item.scalar_text()?)?;
                Some((
                    key,
                    item.line,
                    Node {
                        line: item.line,
                        value,
                    },
                ))
            })
            .collect(),
        _ => None,
    }
}

fn count_nodes(node: &Node) -> usize {
    match &node.value {
        Value::Sequence(items) => 1 + items.iter().map(count_nodes).sum::<usize>(),
        Value::Mapping(entries) => {
            1 + entries
                .iter()
                .map(|(_, _, value)| count_nodes(value))
                .sum::<usize>()
        }
        _ => 1,
    }
}
