//! Network plumbing with no knowledge of what travels over it, shared by the Docker client and
//! the ECS connection: HTTP/1.1 client framing over any `Read`/`Write` (`http1`), and TLS
//! client streams over the system's OpenSSL, loaded at run time only when an `https://` or
//! `wss://` endpoint is used (`tls`).

pub mod http1;
pub mod tls;
