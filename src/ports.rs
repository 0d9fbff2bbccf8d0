//! A container's port binding, the one data type the task model and the Docker runtime share:
//! requested at create from a task definition's port mappings, reported by Docker's inspect, kept
//! in a task's checkpoint and shown by the API. A leaf module, so the model does not depend on the
//! runtime nor the runtime on the model.

/// A port binding: requested at create, or reported by inspect.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PortBinding {
    pub container_port: u16,
    /// `tcp` or `udp`.
    pub protocol: String,
    /// 0 at create = let Docker choose.
    pub host_port: u16,
    /// Empty = all addresses.
    pub host_ip: String,
}

/// The host address Docker reports for a binding on every IPv4 address.
pub const IPV4_ANY_ADDRESS: &str = "0.0.0.0";

/// The host address Docker reports for a binding on every IPv6 address.
pub const IPV6_ANY_ADDRESS: &str = "::";

/// Whether `binding` is the IPv6 twin of a binding in `all`: on `::`, with an IPv4 binding on
/// every address (`0.0.0.0`, or no address) for the same container port, protocol and host port.
/// Docker 20.10.6 and later report each published port twice when IPv6 is on, once per family.
pub fn is_ipv6_twin(binding: &PortBinding, all: &[PortBinding]) -> bool {
    binding.host_ip == IPV6_ANY_ADDRESS
        && all.iter().any(|other| {
            (other.host_ip == IPV4_ANY_ADDRESS || other.host_ip.is_empty())
                && other.container_port == binding.container_port
                && other.protocol == binding.protocol
                && other.host_port == binding.host_port
        })
}

/// The port bindings deckhand records and reports for a container from what Docker reported:
/// with `exclude_ipv6_twins` (`ECS_EXCLUDE_IPV6_PORTBINDING`, on by default as in the ECS agent)
/// without the IPv6 twins of IPv4 bindings, so every report lists a published port once; an
/// IPv6 binding with no IPv4 twin stays. Otherwise all of them, in Docker's order.
pub fn reported_port_bindings(
    docker: &[PortBinding],
    exclude_ipv6_twins: bool,
) -> Vec<PortBinding> {
    docker
        .iter()
        .filter(|binding| !(exclude_ipv6_twins && is_ipv6_twin(binding, docker)))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(container_port: u16, protocol: &str, host_port: u16, host_ip: &str) -> PortBinding {
        PortBinding {
            container_port,
            protocol: protocol.to_string(),
            host_port,
            host_ip: host_ip.to_string(),
        }
    }

    #[test]
    fn ipv6_twins_of_ipv4_bindings_are_left_out_only_when_asked() {
        let v4 = binding(80, "tcp", 8080, "0.0.0.0");
        let v6 = binding(80, "tcp", 8080, "::");
        // (case, Docker's bindings, reported with the exclusion, reported without)
        #[rustfmt::skip]
        let table: Vec<(&str, Vec<PortBinding>, Vec<PortBinding>)> = vec![
            ("nothing published", vec![], vec![]),
            ("IPv4 only", vec![v4.clone()], vec![v4.clone()]),
            ("a twin", vec![v4.clone(), v6.clone()], vec![v4.clone()]),
            ("the twin first", vec![v6.clone(), v4.clone()], vec![v4.clone()]),
            ("IPv6 only stays", vec![v6.clone()], vec![v6.clone()]),
            ("an IPv4 binding with no address", vec![binding(80, "tcp", 8080, ""), v6.clone()], vec![binding(80, "tcp", 8080, "")]),
            ("another host port", vec![v4.clone(), binding(80, "tcp", 8081, "::")], vec![v4.clone(), binding(80, "tcp", 8081, "::")]),
            ("another container port", vec![v4.clone(), binding(81, "tcp", 8080, "::")], vec![v4.clone(), binding(81, "tcp", 8080, "::")]),
            ("another protocol", vec![v4.clone(), binding(80, "udp", 8080, "::")], vec![v4.clone(), binding(80, "udp", 8080, "::")]),
            ("a specific IPv4 address", vec![binding(80, "tcp", 8080, "127.0.0.1"), v6.clone()], vec![binding(80, "tcp", 8080, "127.0.0.1"), v6.clone()]),
            ("a specific IPv6 address", vec![v4.clone(), binding(80, "tcp", 8080, "::1")], vec![v4.clone(), binding(80, "tcp", 8080, "::1")]),
            ("tcp and udp twins", vec![v4.clone(), v6.clone(), binding(53, "udp", 5353, "0.0.0.0"), binding(53, "udp", 5353, "::")], vec![v4.clone(), binding(53, "udp", 5353, "0.0.0.0")]),
        ];
        for (case, docker, excluded) in table {
            assert_eq!(reported_port_bindings(&docker, true), excluded, "{case}");
            assert_eq!(
                reported_port_bindings(&docker, false),
                docker,
                "{case}: all of them"
            );
        }
    }
}
