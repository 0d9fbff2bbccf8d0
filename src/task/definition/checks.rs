//! Checks that look across the containers of one task: duplicate names, at least one essential
//! container, `dependsOn`, `links` and `volumesFrom` naming containers that exist, mount points
//! naming volumes, host-port clashes, and dependency cycles.

use super::json::{indexed, join, ContainerPaths, Parser};
use super::order::topological_order;
use crate::task::{ContainerDefinition, DependencyCondition, NetworkMode, PortMapping, Volume};
use std::collections::{BTreeSet, HashMap};

/// ECS allows at most this many `containerPortRange` mappings per container.
pub const MAX_PORT_RANGES: usize = 100;

fn describe_ports(mapping: &PortMapping) -> String {
    match mapping.container_port_range {
        Some(range) => format!("{}-{}", range.first, range.last),
        None => mapping.container_port.to_string(),
    }
}

impl Parser {
    /// Checks that look across containers: names, references, ports, cycles, essential.
    pub(super) fn cross_checks(
        &mut self,
        containers_path: &str,
        containers: &[ContainerDefinition],
        paths: &[ContainerPaths],
        volumes: &[Volume],
        network_mode: NetworkMode,
    ) {
        let mut first_with_name: HashMap<&str, usize> = HashMap::new();
        for (index, container) in containers.iter().enumerate() {
            if container.name.is_empty() {
                continue;
            }
            if let Some(&first) = first_with_name.get(container.name.as_str()) {
                self.error(
                    &paths[index].at("name"),
                    format!(
                        "duplicate container name {:?} (also {})",
                        container.name, paths[first].base
                    ),
                );
            } else {
                first_with_name.insert(&container.name, index);
            }
        }
        let by_name = |name: &str| containers.iter().find(|container| container.name == name);

        if !containers.is_empty() && !containers.iter().any(|container| container.essential) {
            self.error(containers_path, "at least one container must be essential");
        }

        let mut host_ports_seen: HashMap<(u16, &str), String> = HashMap::new();
        for (index, container) in containers.iter().enumerate() {
            let at = &paths[index];
            for (edge_index, edge) in container.depends_on.iter().enumerate() {
                let edge_path = indexed(&at.at("dependsOn"), edge_index);
                match by_name(&edge.container_name) {
                    None => self.error(
                        &join(&edge_path, "containerName"),
                        format!("no container named {:?}", edge.container_name),
                    ),
                    Some(target) => {
                        let checked = target.health_check.as_ref().is_some_and(|check| {
                            check.command.first().map(String::as_str) != Some("NONE")
                        });
                        if edge.condition == DependencyCondition::Healthy && !checked {
                            self.error(
                                &join(&edge_path, "condition"),
                                format!(
                                    "HEALTHY needs container {:?} to have a healthCheck",
                                    edge.container_name
                                ),
                            );
                        }
                    }
                }
            }
            for (link_index, link) in container.links.iter().enumerate() {
                let link_path = indexed(&at.at("links"), link_index);
                let parts: Vec<&str> = link.split(':').collect();
                if parts.len() > 2 {
                    self.error(
                        &link_path,
                        format!("{link:?} has more than one ':' (expected name[:alias])"),
                    );
                    continue;
                }
                if parts.iter().any(|part| part.is_empty()) {
                    self.error(
                        &link_path,
                        format!("{link:?} is not of the form name[:alias]"),
                    );
                    continue;
                }
                if by_name(parts[0]).is_none() {
                    self.error(&link_path, format!("no container named {:?}", parts[0]));
                }
                if let Some(alias) = parts.get(1) {
                    if !alias
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                    {
                        self.error(
                            &link_path,
                            format!("alias {alias:?} is not a valid host name"),
                        );
                    }
                }
            }
            if !container.links.is_empty() && network_mode != NetworkMode::Bridge {
                self.error(
                    &at.at("links"),
                    format!(
                        "links need networkMode bridge (this task uses {})",
                        network_mode.as_str()
                    ),
                );
            }
            if network_mode == NetworkMode::Awsvpc {
                let asked = [
                    ("hostname", container.hostname.is_some()),
                    ("dnsServers", !container.dns_servers.is_empty()),
                    ("dnsSearchDomains", !container.dns_search_domains.is_empty()),
                    ("extraHosts", !container.extra_hosts.is_empty()),
                ];
                for (key, _) in asked.iter().filter(|(_, asked)| *asked) {
                    self.error(
                        &at.at(key),
                        "not supported for tasks that use the awsvpc network mode: the task's \
                         containers share one network namespace",
                    );
                }
            }
            for (source_index, source) in container.volumes_from.iter().enumerate() {
                if by_name(&source.source_container).is_none() {
                    self.error(
                        &join(
                            &indexed(&at.at("volumesFrom"), source_index),
                            "sourceContainer",
                        ),
                        format!("no container named {:?}", source.source_container),
                    );
                }
            }
            for (mount_index, mount) in container.mount_points.iter().enumerate() {
                if !volumes
                    .iter()
                    .any(|volume| volume.name == mount.source_volume)
                {
                    self.error(
                        &join(&indexed(&at.at("mountPoints"), mount_index), "sourceVolume"),
                        format!("no volume named {:?} in volumes", mount.source_volume),
                    );
                }
            }
            self.port_range_checks(container, at, network_mode);
            for (port_index, mapping) in container.port_mappings.iter().enumerate() {
                let mapping_path = indexed(&at.at("portMappings"), port_index);
                let host_ports = match network_mode {
                    NetworkMode::None => {
                        self.error(
                            &mapping_path,
                            "port mappings need networkMode bridge, host or awsvpc (this task \
                             uses none)",
                        );
                        continue;
                    }
                    // Checked by port_range_checks; its host ports are Docker's to pick (bridge)
                    // or refused (host).
                    NetworkMode::Bridge | NetworkMode::Host
                        if mapping.container_port_range.is_some() =>
                    {
                        continue
                    }
                    // The task's network namespace is its own: each container port is published
                    // on the same host port.
                    NetworkMode::Host | NetworkMode::Awsvpc => {
                        if let Some(host_port) = mapping.host_port.filter(|port| *port != 0) {
                            if host_port != mapping.container_port
                                || mapping.container_port_range.is_some()
                            {
                                self.error(
                                    &join(&mapping_path, "hostPort"),
                                    format!(
                                        "with networkMode {}, hostPort ({host_port}) must equal \
                                         containerPort ({})",
                                        network_mode.as_str(),
                                        mapping.container_port
                                    ),
                                );
                            }
                        }
                        mapping.container_ports()
                    }
                    NetworkMode::Bridge => match mapping.host_port {
                        // Docker picks an ephemeral port: no clash possible.
                        None | Some(0) => continue,
                        Some(port) => port..=port,
                    },
                };
                for host_port in host_ports {
                    let key = (host_port, mapping.protocol.as_str());
                    if let Some(first) = host_ports_seen.get(&key) {
                        self.error(
                            &mapping_path,
                            format!(
                                "host port {host_port}/{} is already used by {first}",
                                mapping.protocol.as_str()
                            ),
                        );
                        break;
                    }
                    host_ports_seen.insert(key, mapping_path.clone());
                }
            }
        }

        self.check_cycles(containers, paths);
    }

    /// `containerPortRange` rules (ECS's): bridge networking only, at most
    /// [`MAX_PORT_RANGES`] ranges per container, and no container port in a range that another
    /// mapping of the container also publishes with the same protocol.
    fn port_range_checks(
        &mut self,
        container: &ContainerDefinition,
        at: &ContainerPaths,
        network_mode: NetworkMode,
    ) {
        let mappings = &container.port_mappings;
        let mut ranges = 0;
        for (index, mapping) in mappings.iter().enumerate() {
            if mapping.container_port_range.is_none() {
                continue;
            }
            let range_path = join(
                &indexed(&at.at("portMappings"), index),
                "containerPortRange",
            );
            ranges += 1;
            if ranges == MAX_PORT_RANGES + 1 {
                self.error(
                    &range_path,
                    format!("at most {MAX_PORT_RANGES} port ranges are allowed per container"),
                );
            }
            if network_mode == NetworkMode::Host {
                self.error(
                    &range_path,
                    "port ranges need networkMode bridge (this task uses host)",
                );
            }
            let this = mapping.container_ports();
            for (other_index, other) in mappings.iter().enumerate() {
                let overlapping = other.protocol == mapping.protocol
                    && other.container_ports().start() <= this.end()
                    && this.start() <= other.container_ports().end();
                // A pair of ranges is reported once, at the later one.
                let counted = other_index < index || other.container_port_range.is_none();
                if other_index != index && overlapping && counted {
                    self.error(
                        &range_path,
                        format!(
                            "overlaps {} ({}/{}): a container port may be in one port mapping only",
                            indexed(&at.at("portMappings"), other_index),
                            describe_ports(other),
                            other.protocol.as_str()
                        ),
                    );
                }
            }
        }
    }

    /// Reports each dependency cycle once, naming its containers in order.
    fn check_cycles(&mut self, containers: &[ContainerDefinition], paths: &[ContainerPaths]) {
        let (_order, leftovers) = topological_order(containers);
        if leftovers.is_empty() {
            return;
        }
        let leftover: BTreeSet<usize> = crate::sorting::set_of(leftovers.iter().copied());
        let index_of: HashMap<&str, usize> = containers
            .iter()
            .enumerate()
            .rev() // the first of duplicate names wins
            .map(|(index, container)| (container.name.as_str(), index))
            .collect();
        let next_in_cycle = |index: usize| -> Option<usize> {
            containers[index]
                .dependencies()
                .iter()
                .filter_map(|edge| index_of.get(edge.container_name.as_str()).copied())
                .find(|dep| leftover.contains(dep))
        };
        let mut reported: BTreeSet<usize> = BTreeSet::new();
        for &start in &leftovers {
            let mut walk = vec![start];
            let mut current = start;
            let cycle = loop {
                let Some(next) = next_in_cycle(current) else {
                    break None;
                };
                if let Some(position) = walk.iter().position(|&seen| seen == next) {
                    break Some(walk[position..].to_vec());
                }
                walk.push(next);
                current = next;
            };
            let Some(cycle) = cycle else { continue };
            if cycle.iter().any(|index| reported.contains(index)) {
                continue;
            }
            reported.extend(cycle.iter().copied());
            let mut names: Vec<&str> = cycle.iter().map(|&i| containers[i].name.as_str()).collect();
            names.push(&containers[cycle[0]].name);
            let at = cycle.iter().min().copied().unwrap_or(cycle[0]);
            self.error(
                &paths[at].base,
                format!(
                    "dependency cycle: {} (through dependsOn, links and volumesFrom)",
                    names
                        .iter()
                        .map(|name| format!("{name:?}"))
                        .collect::<Vec<_>>()
                        .join(" -> ")
                ),
            );
        }
    }
}
