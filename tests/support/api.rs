//! Helpers for the API-layer tests: temp directories, an API server over a [`MemoryEngine`],
//! raw requests over the socket, and task definitions.
#![allow(dead_code)]

#[path = "scratch.rs"]
mod scratch;
pub use scratch::TempDir;

use super::memory_engine::MemoryEngine;
use deckhand::api::ApiServers;
use deckhand::cli::client::{ApiClient, ApiResponse};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub const WEB_DEFINITION: &str = r#"{
  "family": "web",
  "containerDefinitions": [
    {
      "name": "web",
      "image": "busybox:latest",
      "essential": true,
      "command": ["httpd", "-f", "-p", "8080"],
      "portMappings": [{"containerPort": 8080, "hostPort": 8080}]
    }
  ]
}"#;

/// Two errors at once: no image, and a dependency on a container that does not exist.
pub const INVALID_DEFINITION: &str = r#"{
  "family": "broken",
  "containerDefinitions": [
    {
      "name": "app",
      "dependsOn": [{"containerName": "db", "condition": "START"}]
    }
  ]
}"#;

/// An API server over a memory engine, on a socket in its own temp dir (and, if asked, the
/// introspection endpoint on a free loopback port).
pub struct TestApi {
    pub engine: Arc<MemoryEngine>,
    pub servers: ApiServers,
    pub socket: PathBuf,
    pub directory: TempDir,
}

impl TestApi {
    pub fn start(with_introspection: bool) -> TestApi {
        let directory = TempDir::new("api");
        let socket = directory.path().join("run").join("api.sock");
        let engine = Arc::new(MemoryEngine::new("test-cluster"));
        let introspection: Option<SocketAddr> = if with_introspection {
            Some("127.0.0.1:0".parse().expect("address"))
        } else {
            None
        };
        let servers = ApiServers::start(engine.clone(), &socket, introspection).expect("start API");
        TestApi {
            engine,
            servers,
            socket,
            directory,
        }
    }

    pub fn client(&self) -> ApiClient {
        ApiClient::new(&self.socket)
    }

    pub fn request(&self, method: &str, target: &str, body: Option<&str>) -> ApiResponse {
        self.client()
            .request(
                method,
                target,
                body.map(str::as_bytes),
                Duration::from_secs(70),
            )
            .unwrap_or_else(|error| panic!("{method} {target}: {error}"))
    }

    pub fn introspection_address(&self) -> SocketAddr {
        match self
            .servers
            .introspection
            .as_ref()
            .map(|server| server.address())
        {
            Some(deckhand::api::server::ListenAddress::Tcp(address)) => *address,
            other => panic!("no introspection endpoint: {other:?}"),
        }
    }
}

/// Sends raw bytes on a new connection and returns everything the server answers.
pub fn raw_exchange(socket: &Path, request: &[u8]) -> String {
    let mut stream = UnixStream::connect(socket).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let _ = stream.write_all(request);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// A plain HTTP GET over TCP (for the introspection endpoint); returns (status, JSON body).
pub fn tcp_get(address: SocketAddr, target: &str) -> (u16, serde_json::Value) {
    tcp_request(address, "GET", target)
}

pub fn tcp_request(address: SocketAddr, method: &str, target: &str) -> (u16, serde_json::Value) {
    let mut stream = std::net::TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    deckhand::api::http::write_request(&mut stream, method, target, None).expect("write");
    let response = deckhand::api::http::read_response(&mut stream, 1 << 20).expect("response");
    let body = serde_json::from_slice(&response.body).unwrap_or(serde_json::Value::Null);
    (response.status, body)
}
