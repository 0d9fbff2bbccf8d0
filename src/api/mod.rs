//! The agent's two HTTP surfaces over the engine's read side and its two commands: the local API
//! on a Unix socket (read/write; the CLI's server) and the read-only ECS introspection endpoint on
//! TCP. Both read the engine only through [`crate::engine::EngineHandle`].

pub mod http;
pub mod introspection;
pub mod local;
pub mod server;
pub mod views;

use crate::engine::EngineHandle;
use server::{HttpServer, ListenError};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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
                Some(HttpServer::serve_tcp(
                    "introspection",
                    address,
                    server::INTROSPECTION_WORKER_THREADS,
                    Arc::new(move |request: &http::HttpRequest| introspection_api.handle(request)),
                )?)
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
