//! The agent's two HTTP surfaces over the engine's read side and its two commands: the local API
//! on a Unix socket (read/write; the CLI's server) and the read-only ECS introspection endpoint on
//! TCP. Both read the engine only through [`crate::engine::EngineHandle`].

pub mod http;
pub mod introspection;
pub mod local;
pub mod server;
pub mod views;

use crate::config::Scope;
use crate::engine::EngineHandle;
use server::{HttpServer, ListenError};
use std::io::ErrorKind;
use std::net::SocketAddr;
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
    /// endpoint on that address.
    pub fn start(
        engine: Arc<dyn EngineHandle>,
        socket: &Path,
        introspection: Option<SocketAddr>,
    ) -> Result<ApiServers, ListenError> {
        let stopping = Arc::new(AtomicBool::new(false));
        let local_api = Arc::new(local::LocalApi::new(engine.clone(), stopping.clone()));
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
