//! The agent's HTTP surfaces over the engine's read side and its two commands: the local API
//! on a Unix socket (read/write; the CLI's server), the read-only ECS introspection endpoint on
//! TCP, and the read-only task metadata endpoint containers read (TCP, on the Docker bridge
//! gateway and 127.0.0.1). All read the engine only through [`crate::engine::EngineHandle`].

pub mod credentials;
pub mod http;
pub mod introspection;
pub mod local;
pub mod log_stream;
pub mod logs_query;
pub mod server;
pub mod stats;
pub mod task_metadata;
pub mod views;

use crate::config::Scope;
use crate::engine::EngineHandle;
use crate::role_credentials::CredentialsStore;
use crate::task::metadata_endpoint::MetadataEndpoint;
use server::{HttpServer, ListenError};
use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Whether the agent starts without introspection when its address cannot be had: a per-user
/// agent (a developer's, beside the system one that holds the ECS port) does, with a warning; the
/// system agent refuses to start, since ECS tools expect the endpoint there.
pub fn introspection_optional(error: &ListenError, scope: Scope) -> bool {
    scope == Scope::User
        && matches!(error, ListenError::Io { source, .. }
            if matches!(source.kind(), ErrorKind::AddrInUse | ErrorKind::PermissionDenied))
}

/// The running API servers; [`ApiServers::shutdown`] stops both and joins their threads.
pub struct ApiServers {
    pub local: HttpServer,
    pub introspection: Option<HttpServer>,
    stopping: Arc<AtomicBool>,
}

impl ApiServers {
    /// Starts the local API on `socket` and, if `introspection` is set, the ECS introspection
    /// endpoint on that address ([`ApiServers::start_with_credentials`] with a store of its own).
    pub fn start(
        engine: Arc<dyn EngineHandle>,
        socket: &Path,
        introspection: Option<SocketAddr>,
    ) -> Result<ApiServers, ListenError> {
        ApiServers::start_with_credentials(engine, socket, introspection, CredentialsStore::new())
    }

    /// [`ApiServers::start`] whose `inspect` shows the state of tasks' role credentials in
    /// `role_credentials` (never the credentials).
    pub fn start_with_credentials(
        engine: Arc<dyn EngineHandle>,
        socket: &Path,
        introspection: Option<SocketAddr>,
        role_credentials: CredentialsStore,
    ) -> Result<ApiServers, ListenError> {
        let stopping = Arc::new(AtomicBool::new(false));
        let local_api = Arc::new(
            local::LocalApi::new(engine.clone(), stopping.clone())
                .with_role_credentials(role_credentials),
        );
        let local = HttpServer::serve_unix(
            "api",
            socket,
            server::WORKER_THREADS,
            Arc::new(move |request: &http::HttpRequest| local_api.handle(request)),
        )?;
        let introspection = match introspection {
            Some(address) => {
                let introspection_api = Arc::new(introspection::IntrospectionApi::new(engine));
                let served = HttpServer::serve_tcp(
                    "introspection",
                    address,
                    server::INTROSPECTION_WORKER_THREADS,
                    Arc::new(move |request: &http::HttpRequest| introspection_api.handle(request)),
                );
                match served {
                    Ok(server) => Some(server),
                    Err(error) if introspection_optional(&error, Scope::of_current_process()) => {
                        log::warn!(
                            "{error}: the ECS introspection endpoint is off for this per-user \
                             agent (another agent has the port?); choose another address with \
                             DECKHAND_INTROSPECTION_ADDR, or set it empty to turn it off"
                        );
                        None
                    }
                    Err(error) => return Err(error),
                }
            }
            None => None,
        };
        Ok(ApiServers {
            local,
            introspection,
            stopping,
        })
    }

    /// Stops accepting requests, ends waiting long polls, and joins every server thread.
    pub fn shutdown(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.local.shutdown();
        if let Some(introspection) = &mut self.introspection {
            introspection.shutdown();
        }
    }
}

/// The task metadata endpoint's listeners (§14): one on 127.0.0.1, one on the Docker bridge's
/// gateway when there is one, both on the same port, served by one server (one accept thread
/// for both, and workers shared between them).
pub struct TaskMetadataServers {
    pub api: Arc<task_metadata::TaskMetadataApi>,
    /// Where containers are pointed: what the engine puts in their environment.
    pub endpoint: MetadataEndpoint,
    server: HttpServer,
}

impl TaskMetadataServers {
    /// Listens on `127.0.0.1:port` and, if `bridge_gateway` is given, on `bridge_gateway:port`.
    /// The engine is attached later ([`task_metadata::TaskMetadataApi::attach`]). `None`, after
    /// a warning, when 127.0.0.1 cannot be had (the port taken): the agent runs without the
    /// endpoint, as with the introspection port. A gateway that cannot be listened on leaves
    /// bridge-mode containers without the endpoint (warned), host-mode ones keep it. It serves
    /// task role credentials (`/v2/credentials/<id>`) from `credentials`.
    pub fn start(
        bridge_gateway: Option<Ipv4Addr>,
        port: u16,
        credentials: CredentialsStore,
    ) -> Option<TaskMetadataServers> {
        let api = Arc::new(task_metadata::TaskMetadataApi::with_credentials(
            credentials,
        ));
        let off = |error: &ListenError| {
            log::warn!(
                "{error}: the task metadata endpoint is off, and containers get no \
                 ECS_CONTAINER_METADATA_URI_V4 (choose another port with \
                 DECKHAND_TASK_METADATA_PORT, or turn it off with DECKHAND_TASK_METADATA=false)"
            );
        };
        let loopback = match server::bind_tcp(SocketAddr::from((Ipv4Addr::LOCALHOST, port))) {
            Ok(listener) => listener,
            Err(error) => {
                off(&error);
                return None;
            }
        };
        let mut listeners = vec![loopback];
        let bridge_address = match bridge_gateway {
            Some(gateway) => match server::bind_tcp(SocketAddr::from((gateway, port))) {
                Ok(listener) => {
                    listeners.push(listener);
                    Some(gateway)
                }
                Err(error) => {
                    log::warn!(
                        "{error}: bridge-mode containers get no task metadata endpoint \
                         (host-mode containers still do, on 127.0.0.1:{port})"
                    );
                    None
                }
            },
            None => {
                log::warn!(
                    "Docker has no bridge network gateway: bridge-mode containers get no task \
                     metadata endpoint (host-mode containers still do, on 127.0.0.1:{port})"
                );
                None
            }
        };
        // The workers each listener had before they shared them.
        let workers = task_metadata::TASK_METADATA_WORKER_THREADS * listeners.len();
        let handler_api = api.clone();
        let served = HttpServer::serve_listeners(
            "task-metadata",
            listeners,
            workers,
            Arc::new(move |request: &http::HttpRequest| handler_api.handle(request)),
        );
        let server = match served {
            Ok(server) => server,
            Err(error) => {
                off(&error);
                return None;
            }
        };
        Some(TaskMetadataServers {
            api,
            endpoint: MetadataEndpoint {
                bridge_address,
                loopback: true,
                port,
            },
            server,
        })
    }

    /// Stops every listener and joins its threads.
    pub fn shutdown(&mut self) {
        self.server.shutdown();
    }
}

impl Drop for ApiServers {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn only_a_per_user_agent_goes_on_without_introspection() {
        let io_error = |kind: ErrorKind| ListenError::Io {
            what: "cannot listen on 127.0.0.1:51678".into(),
            source: io::Error::from(kind),
        };
        // (error, scope, optional)
        let table = [
            (io_error(ErrorKind::AddrInUse), Scope::User, true),
            (io_error(ErrorKind::PermissionDenied), Scope::User, true),
            (io_error(ErrorKind::AddrInUse), Scope::System, false),
            (io_error(ErrorKind::AddrNotAvailable), Scope::User, false),
            (
                ListenError::InUse {
                    path: "/run/deckhand/api.sock".into(),
                },
                Scope::User,
                false,
            ),
        ];
        for (error, scope, expected) in table {
            assert_eq!(
                introspection_optional(&error, scope),
                expected,
                "{error} {scope:?}"
            );
        }
    }
}
