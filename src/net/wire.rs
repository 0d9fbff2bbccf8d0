//! TLS and raw connections for deckhand's calls to AWS, with no knowledge of what travels over
//! them: the host's trusted roots, loaded once ([`trusted_roots`]: rustls-native-certs, so
//! `SSL_CERT_FILE`, `SSL_CERT_DIR` and an operator's CA in `/etc/ssl/certs` count), the rustls
//! client configuration built from them (ring provider), and [`open_stream`], which connects to
//! `host:port` — TCP with a timeout to each resolved address, through an HTTP proxy's
//! `CONNECT` tunnel when [`ProxySettings`] says so, then TLS with the host's name checked for a
//! TLS target. The websockets run over it; the ECS API client (ureq) takes the same roots and
//! proxy decision.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::{CertificateDer, ServerName};

use super::proxy::{connect_tunnel, ProxySettings};

/// The host's trusted roots and the TLS client configuration made from them.
#[derive(Clone)]
pub struct TrustedRoots {
    /// The certificates, in ureq's type so the API client's agents share this one copy.
    pub certificates: Arc<Vec<ureq::tls::Certificate<'static>>>,
    /// The rustls client configuration (ring, TLS 1.2 and 1.3, no client certificate).
    pub client_config: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for TrustedRoots {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "TrustedRoots({} certificates)",
            self.certificates.len()
        )
    }
}

/// The ring crypto provider every TLS connection uses. rustls marks ring's provider deprecated
/// for its lack of post-quantum key exchange; AWS's endpoints do not need it, and ring builds
/// without a C toolchain's cmake and is the smaller of the two providers.
#[allow(deprecated)]
pub fn crypto_provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The host's trusted roots, read on first use and kept (a failed read is tried again on the
/// next use: installing `ca-certificates` must not need a restart). An error says where the
/// roots were looked for.
pub fn trusted_roots() -> Result<TrustedRoots, String> {
    static ROOTS: Mutex<Option<TrustedRoots>> = Mutex::new(None);
    let mut kept = ROOTS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(roots) = kept.as_ref() {
        return Ok(roots.clone());
    }
    let loaded = rustls_native_certs::load_native_certs();
    let roots = roots_from(loaded.certs).map_err(|why| {
        let errors: Vec<String> = loaded.errors.iter().map(ToString::to_string).collect();
        if errors.is_empty() {
            why
        } else {
            format!("{why} ({})", errors.join("; "))
        }
    })?;
    *kept = Some(roots.clone());
    Ok(roots)
}

/// The configuration for these roots; an error when none of them is usable.
pub fn roots_from(certificates: Vec<CertificateDer<'static>>) -> Result<TrustedRoots, String> {
    let mut store = rustls::RootCertStore::empty();
    let (added, _ignored) = store.add_parsable_certificates(certificates.iter().cloned());
    if added == 0 {
        return Err(
            "no trusted root certificates on this host: install the ca-certificates \
                    package, or point SSL_CERT_FILE at a PEM bundle"
                .to_string(),
        );
    }
    let client_config = rustls::ClientConfig::builder_with_provider(crypto_provider())
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("TLS configuration: {error}"))?
        .with_root_certificates(store)
        .with_no_client_auth();
    let certificates = certificates
        .iter()
        .map(|der| ureq::tls::Certificate::from_der(der.as_ref()).to_owned())
        .collect();
    Ok(TrustedRoots {
        certificates: Arc::new(certificates),
        client_config: Arc::new(client_config),
    })
}

/// Why a stream could not be opened: the configuration cannot work (`Config`: no roots, a
/// host name that is not one), or the network or the peer failed (`Unreachable`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenError {
    Config(String),
    Unreachable(String),
}

/// A connection to a peer, plain or TLS, over TCP (perhaps tunnelled through a proxy).
#[derive(Debug)]
pub enum WireStream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl WireStream {
    /// The TCP socket underneath, for its timeouts.
    pub fn socket(&self) -> &TcpStream {
        match self {
            WireStream::Plain(socket) => socket,
            WireStream::Tls(stream) => &stream.sock,
        }
    }

    /// Changes the read timeout (`None`: wait forever).
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.socket().set_read_timeout(timeout)
    }
}

/// A blocking socket's timeout is EAGAIN: say what it means.
fn timed_out(error: io::Error) -> io::Error {
    match error.kind() {
        io::ErrorKind::WouldBlock => io::Error::new(io::ErrorKind::TimedOut, "timed out"),
        _ => error,
    }
}

impl Read for WireStream {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        match self {
            WireStream::Plain(socket) => socket.read(buffer),
            WireStream::Tls(stream) => stream.read(buffer),
        }
        .map_err(timed_out)
    }
}

impl Write for WireStream {
    fn write(&mut self, buffer: &[u8]) -> io::Result<usize> {
        match self {
            WireStream::Plain(socket) => socket.write(buffer),
            WireStream::Tls(stream) => stream.write(buffer),
        }
        .map_err(timed_out)
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            WireStream::Plain(socket) => socket.flush(),
            WireStream::Tls(stream) => stream.flush(),
        }
        .map_err(timed_out)
    }
}

/// TCP to each address `host:port` resolves to, each within `timeout`.
fn tcp_connect(host: &str, port: u16, timeout: Duration) -> Result<TcpStream, String> {
    let addresses: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|error| format!("resolving {host}: {error}"))?
        .collect();
    let mut last_error = None;
    for address in addresses {
        match TcpStream::connect_timeout(&address, timeout) {
            Ok(socket) => return Ok(socket),
            Err(error) => last_error = Some(format!("{address}: {error}")),
        }
    }
    Err(last_error.unwrap_or_else(|| format!("{host} has no address")))
}

/// Connects to `host:port` (a name, or an address without brackets): directly or through the
/// proxy `proxies` names for it, then TLS with `host` checked when `tls`. Connect, each read
/// and each write wait at most `timeout`.
pub fn open_stream(
    host: &str,
    port: u16,
    tls: bool,
    proxies: &ProxySettings,
    timeout: Duration,
) -> Result<WireStream, OpenError> {
    let target = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let proxy = proxies.proxy_for(tls, host);
    let mut socket = match proxy {
        Some(proxy) => tcp_connect(&proxy.host, proxy.port, timeout).map_err(|error| {
            OpenError::Unreachable(format!("the proxy {}: {error}", proxy.display()))
        })?,
        None => tcp_connect(host, port, timeout).map_err(OpenError::Unreachable)?,
    };
    socket
        .set_read_timeout(Some(timeout))
        .and_then(|()| socket.set_write_timeout(Some(timeout)))
        .and_then(|()| socket.set_nodelay(true))
        .map_err(|error| OpenError::Unreachable(format!("{target}: {error}")))?;
    if let Some(proxy) = proxy {
        connect_tunnel(&mut socket, proxy, host, port)
            .map_err(|error| OpenError::Unreachable(timed_out(error).to_string()))?;
    }
    if !tls {
        return Ok(WireStream::Plain(socket));
    }
    let roots = trusted_roots().map_err(OpenError::Config)?;
    let name = ServerName::try_from(host.to_string())
        .map_err(|error| OpenError::Config(format!("TLS to {host:?}: {error}")))?;
    let mut connection = rustls::ClientConnection::new(roots.client_config, name)
        .map_err(|error| OpenError::Config(format!("TLS to {target}: {error}")))?;
    // The handshake now, so a certificate that does not verify fails the open, not a later read.
    while connection.is_handshaking() {
        connection.complete_io(&mut socket).map_err(|error| {
            OpenError::Unreachable(format!("TLS to {target}: {}", timed_out(error)))
        })?;
    }
    Ok(WireStream::Tls(Box::new(rustls::StreamOwned::new(
        connection, socket,
    ))))
}
