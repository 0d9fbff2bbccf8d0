//! The agent's side of the credentials redirect (README: credentials endpoint): what to point
//! `169.254.170.2:80` at, from the configuration, the task metadata listeners and Docker's bridge
//! network, and the log lines that say what came of it. The rules themselves are
//! `host::credentials_redirect`'s.
//!
//! A redirect that cannot be installed is a warning, not a failure to start: tasks without a
//! role, and every local task, need none of it, and the endpoint still answers at the address in
//! `ECS_CONTAINER_METADATA_URI_V4`. (The ECS agent's `ecs-init` refuses to start the agent
//! instead, because that agent then advertises task roles regardless.)

use crate::config::Config;
use crate::host::credentials_redirect::{
    is_interface_name, Bridge, CredentialsRedirect, RedirectTarget, SystemIptables,
    CREDENTIALS_ADDRESS, CREDENTIALS_PORT, REDIRECT_CHAIN,
};
use crate::runtime::ContainerRuntime;
use crate::task::metadata_endpoint::MetadataEndpoint;

/// The most of a device name from Docker shown in a log line.
const MAX_SHOWN_NAME_CHARS: usize = 64;

/// Installs the redirect unless `DECKHAND_CREDENTIALS_ENDPOINT=false` or the task metadata
/// endpoint does not listen (`endpoint` is `None`). `None`, after a log line saying why, when
/// there is none.
pub(super) fn start_credentials_redirect(
    config: &Config,
    runtime: &dyn ContainerRuntime,
    endpoint: Option<MetadataEndpoint>,
) -> Option<CredentialsRedirect> {
    let address = format!("{CREDENTIALS_ADDRESS}:{CREDENTIALS_PORT}");
    if !config.credentials_endpoint {
        log::info!("{address} is not redirected (DECKHAND_CREDENTIALS_ENDPOINT=false)");
        return None;
    }
    let Some(endpoint) = endpoint else {
        log::info!("{address} is not redirected: the task metadata endpoint is off");
        return None;
    };
    let no_bridge = "containers on the Docker bridge cannot reach it there; this host's own \
                     connections (host-network containers, the Docker daemon) can";
    let bridge = match endpoint.bridge_address {
        Some(gateway) => match runtime.bridge_interface() {
            Ok(Some(interface)) if is_interface_name(&interface) => {
                Some(Bridge { interface, gateway })
            }
            Ok(Some(interface)) => {
                let shown: String = interface.chars().take(MAX_SHOWN_NAME_CHARS).collect();
                log::warn!(
                    "Docker names the bridge network's device {shown:?}, which is not an \
                     interface name: {address} is redirected for this host only ({no_bridge})"
                );
                None
            }
            Ok(None) => {
                log::warn!(
                    "Docker does not name the bridge network's device: {address} is redirected \
                     for this host only ({no_bridge})"
                );
                None
            }
            Err(error) => {
                log::warn!(
                    "cannot read the Docker bridge network's device: {error}: {address} is \
                     redirected for this host only ({no_bridge})"
                );
                None
            }
        },
        // Already warned: the endpoint does not listen on the bridge.
        None => None,
    };
    let target = RedirectTarget {
        bridge,
        port: endpoint.port,
    };
    match CredentialsRedirect::install(Box::new(SystemIptables), &target) {
        Ok(redirect) => {
            let from = match &target.bridge {
                Some(bridge) => format!("from {} and from this host", bridge.interface),
                None => "from this host".to_string(),
            };
            log::info!(
                "{address} leads to the task metadata endpoint at {} {from} (iptables nat chain \
                 {REDIRECT_CHAIN})",
                target.destination()
            );
            Some(redirect)
        }
        Err(error) => {
            log::warn!(
                "cannot redirect {address} to the task metadata endpoint: {error}; containers \
                 and the Docker daemon cannot reach it at that address, the agent runs on \
                 (install iptables and let the agent use CAP_NET_ADMIN and CAP_NET_RAW, or set \
                 DECKHAND_CREDENTIALS_ENDPOINT=false)"
            );
            None
        }
    }
}

/// Removes the redirect at a clean stop, saying so.
pub(super) fn stop_credentials_redirect(redirect: Option<CredentialsRedirect>) {
    let Some(mut redirect) = redirect else {
        return;
    };
    match redirect.remove() {
        Ok(()) => log::info!(
            "removed the redirect of {CREDENTIALS_ADDRESS}:{CREDENTIALS_PORT} (chain {REDIRECT_CHAIN})"
        ),
        Err(error) => log::warn!(
            "cannot remove the redirect of {CREDENTIALS_ADDRESS}:{CREDENTIALS_PORT}: {error} \
             (the next start replaces it; `iptables -t nat -S` shows it)"
        ),
    }
}
