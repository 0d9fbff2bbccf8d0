//! Where a container finds the task metadata endpoint (docs/ENGINE.md §14): the two environment
//! variables ECS sets, `ECS_CONTAINER_METADATA_URI_V4` and `ECS_CONTAINER_METADATA_URI` (v3), and
//! the paths under which the endpoint answers. Pure data of the task model, like the labels: the
//! engine puts the variables on a create request, the API serves the paths they name.
//!
//! The path carries the container's own token (fixed at acceptance, saved in the checkpoint), so
//! the address is the same after the agent restarts and a container cannot read another task's
//! metadata by guessing.

use super::NetworkMode;
use std::net::Ipv4Addr;

/// The variable AWS SDKs and agents read for the v4 endpoint.
pub const METADATA_URI_V4_VARIABLE: &str = "ECS_CONTAINER_METADATA_URI_V4";
/// The variable v3 clients read.
pub const METADATA_URI_V3_VARIABLE: &str = "ECS_CONTAINER_METADATA_URI";
/// The port ECS's own agent serves the endpoint on (behind 169.254.170.2:80); deckhand listens
/// on it directly.
pub const DEFAULT_METADATA_PORT: u16 = 51679;
/// Path prefixes of the two versions (`/v4/<token>`, `/v3/<token>`).
pub const METADATA_V4_PREFIX: &str = "v4";
pub const METADATA_V3_PREFIX: &str = "v3";

/// Where the agent serves the endpoint, as the engine needs it to point containers at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetadataEndpoint {
    /// The Docker bridge's gateway, where a bridge-mode container reaches the host; `None`
    /// when the agent does not listen there (then bridge-mode containers get no variables).
    pub bridge_address: Option<Ipv4Addr>,
    /// Whether the agent listens on 127.0.0.1 (for host-mode containers).
    pub loopback: bool,
    pub port: u16,
}

impl MetadataEndpoint {
    /// The address a container of `network_mode` reaches the endpoint at, if any: the bridge
    /// gateway in bridge mode, 127.0.0.1 in host mode, none without a network.
    pub fn address_for(&self, network_mode: NetworkMode) -> Option<Ipv4Addr> {
        match network_mode {
            // An awsvpc task's namespace is its sandbox's, on the bridge.
            NetworkMode::Bridge | NetworkMode::Awsvpc => self.bridge_address,
            NetworkMode::Host => Some(Ipv4Addr::LOCALHOST).filter(|_| self.loopback),
            NetworkMode::None => None,
        }
    }
}

/// The two variables (v4, then v3) for a container with `token`, or none when its network mode
/// cannot reach the endpoint.
pub fn metadata_environment(
    endpoint: &MetadataEndpoint,
    network_mode: NetworkMode,
    token: &str,
) -> Vec<(String, String)> {
    let Some(address) = endpoint.address_for(network_mode) else {
        return Vec::new();
    };
    let port = endpoint.port;
    vec![
        (
            METADATA_URI_V4_VARIABLE.to_string(),
            format!("http://{address}:{port}/{METADATA_V4_PREFIX}/{token}"),
        ),
        (
            METADATA_URI_V3_VARIABLE.to_string(),
            format!("http://{address}:{port}/{METADATA_V3_PREFIX}/{token}"),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_network_mode_gets_the_address_it_can_reach() {
        let endpoint = MetadataEndpoint {
            bridge_address: Some(Ipv4Addr::new(172, 17, 0, 1)),
            loopback: true,
            port: 51679,
        };
        let no_bridge = MetadataEndpoint {
            bridge_address: None,
            ..endpoint
        };
        // (endpoint, network mode, expected v4 URI)
        let table = [
            (
                endpoint,
                NetworkMode::Bridge,
                Some("http://172.17.0.1:51679/v4/abc"),
            ),
            (
                endpoint,
                NetworkMode::Host,
                Some("http://127.0.0.1:51679/v4/abc"),
            ),
            (endpoint, NetworkMode::None, None),
            (no_bridge, NetworkMode::Bridge, None),
            (
                no_bridge,
                NetworkMode::Host,
                Some("http://127.0.0.1:51679/v4/abc"),
            ),
        ];
        for (endpoint, mode, expected) in table {
            let variables = metadata_environment(&endpoint, mode, "abc");
            match expected {
                Some(uri) => {
                    assert_eq!(
                        variables,
                        vec![
                            (METADATA_URI_V4_VARIABLE.to_string(), uri.to_string()),
                            (
                                METADATA_URI_V3_VARIABLE.to_string(),
                                uri.replace("/v4/", "/v3/")
                            ),
                        ],
                        "{endpoint:?} {mode:?}"
                    );
                }
                None => assert!(variables.is_empty(), "{endpoint:?} {mode:?}"),
            }
        }
    }
}
