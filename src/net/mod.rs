//! Network plumbing with no knowledge of what travels over it, shared by the Docker client and
//! the ECS connection: HTTP/1.1 client framing over any `Read`/`Write` (`http1`), the proxy
//! settings and the `CONNECT` tunnel (`proxy`), and TCP/TLS streams with the host's trusted
//! roots (`wire`, rustls with the ring provider).

pub mod http1;
pub mod proxy;
pub mod wire;
