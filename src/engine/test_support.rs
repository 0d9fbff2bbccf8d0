//! Model values for the engine's unit tests (compiled for tests only).

use crate::task::ContainerDefinition;
use std::collections::BTreeMap;

/// An essential container running `image`, with nothing else set.
pub(crate) fn container_definition(name: &str, image: &str) -> ContainerDefinition {
    ContainerDefinition {
        name: name.to_string(),
        image: image.to_string(),
        essential: true,
        command: None,
        entry_point: None,
        environment: Vec::new(),
        depends_on: Vec::new(),
        links: Vec::new(),
        volumes_from: Vec::new(),
        mount_points: Vec::new(),
        port_mappings: Vec::new(),
        health_check: None,
        stop_timeout_secs: None,
        start_timeout_secs: None,
        memory_mib: None,
        memory_reservation_mib: None,
        cpu: None,
        privileged: false,
        user: None,
        working_directory: None,
        docker_labels: BTreeMap::new(),
        log_configuration: None,
        restart_policy: None,
    }
}
