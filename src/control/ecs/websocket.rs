//! The signed websockets to ECS (ACS, and the telemetry session over the same function): the
//! URL the Go agent builds from `DiscoverPollEndpoint`'s answer (`ws` appended to an endpoint
//! that ends in `/`, else `/ws`; ACS's query: `agentHash`, `agentVersion`, `clusterArn`,
//! `containerInstanceArn`, `dockerVersion`, `protocolVersion=2`, `sendCredentials`, `seqNum`),
//! and the upgrade `GET` signed with SigV4 as the agent signs it (`Host`, `X-Amz-Date`,
//! `X-Amz-Security-Token`; service `ecs`).
//!
//! **Opening one**: [`open_signed_websocket`] takes the endpoint (its path the websocket's),
//! the query, a [`SignedUpgrade`] (region, credentials, the signing time) and the
//! [`ProxySettings`]; it connects through `net::wire` (TCP, the proxy's `CONNECT` tunnel when
//! one applies, rustls with the host's roots for `https`/`wss`) and runs tungstenite's client
//! handshake with the signed headers. Any other signed websocket (the telemetry session) opens
//! the same way, with its own path and query.
//!
//! The framing is tungstenite's (RFC 6455: masking, fragments, pings answered, the close
//! handshake; a message or frame over [`MAX_MESSAGE_BYTES`] refused). [`SignedSocket`] reads
//! and sends text: a read that outlasts its timeout is [`EcsError::ReadTimeout`] and leaves
//! the socket usable (a frame half read is kept); a close says its code ([`Received::Closed`]),
//! and a connection that ends without a close frame, at a frame's edge or in the middle of one,
//! is an abnormal close (1006), as the Go agent's websocket library reports it. An HTTP error
//! answer to the upgrade (400 naming `InactiveInstanceException`, 403 for a bad signature) is
//! [`EcsError::Service`] with the body's type and message.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use tungstenite::client::IntoClientRequest;
use tungstenite::http::HeaderValue;
use tungstenite::protocol::WebSocketConfig;
use tungstenite::{HandshakeError, Message, WebSocket};

use super::credentials::Credentials;
use super::endpoint::Endpoint;
use super::{error_from_answer, sigv4, EcsError, SIGNING_SERVICE};
use crate::net::proxy::ProxySettings;
use crate::net::wire::{open_stream, OpenError, WireStream};

/// ACS's protocol version, as the Go agent sends it.
pub const ACS_PROTOCOL_VERSION: u32 = 2;
/// A message larger than this is refused (a payload of many tasks is some hundreds of KiB).
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// An error answer to the upgrade longer than this is cut.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;
/// How long [`SignedSocket::close`] waits for the peer's close frame.
const CLOSE_WAIT: Duration = Duration::from_secs(2);
/// The close code of a connection that ended without a close frame (RFC 6455 §7.1.5).
pub const CLOSE_ABNORMAL: u16 = 1006;

/// The query of the ACS connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcsQuery {
    pub cluster_arn: String,
    pub container_instance_arn: String,
    pub agent_hash: String,
    pub agent_version: String,
    /// Docker's version (`20.10.24`), sent as ACS expects it: `DockerVersion: 20.10.24`.
    pub docker_version: Option<String>,
    /// Whether ACS should send every task's credentials on connecting (true on the agent's
    /// first connection).
    pub send_credentials: bool,
}

/// The `seqNum` the ECS agent sends on every connection: always 1 (ACS keeps its own
/// sequence; payloads carry theirs).
pub const ACS_SEQ_NUM: u64 = 1;

impl AcsQuery {
    /// The query's parameters, decoded, sorted by name.
    pub fn parameters(&self) -> Vec<(&'static str, String)> {
        let mut parameters = vec![
            ("agentHash", self.agent_hash.clone()),
            ("agentVersion", self.agent_version.clone()),
            ("clusterArn", self.cluster_arn.clone()),
            ("containerInstanceArn", self.container_instance_arn.clone()),
        ];
        if let Some(version) = self.docker_version.as_deref().filter(|v| !v.is_empty()) {
            let formatted = if version == "containerd" {
                version.to_string()
            } else {
                format!("DockerVersion: {version}")
            };
            parameters.push(("dockerVersion", formatted));
        }
        parameters.push(("protocolVersion", ACS_PROTOCOL_VERSION.to_string()));
        parameters.push(("sendCredentials", self.send_credentials.to_string()));
        parameters.push(("seqNum", ACS_SEQ_NUM.to_string()));
        parameters
    }
}

/// The websocket's path for a poll endpoint's path: `/` → `/ws`, `/a/` → `/a/ws`, `/a` → `/a/ws`.
pub fn acs_path(endpoint_path: &str) -> String {
    if endpoint_path.ends_with('/') {
        format!("{endpoint_path}ws")
    } else {
        format!("{endpoint_path}/ws")
    }
}

/// How an upgrade is signed: SigV4 for `region` with `credentials`, at `amz_date`
/// ([`sigv4::amz_date`]).
#[derive(Debug, Clone, Copy)]
pub struct SignedUpgrade<'a> {
    pub region: &'a str,
    pub credentials: &'a Credentials,
    pub amz_date: &'a str,
}

/// What a read brought.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    Text(String),
    /// The connection is over: the peer's close code (`None`: a close frame without one;
    /// [`CLOSE_ABNORMAL`]: no close frame at all) and its reason.
    Closed {
        code: Option<u16>,
        reason: String,
    },
}

/// An open signed websocket (over a [`WireStream`]; any other stream in tests and fuzzing).
#[derive(Debug)]
pub struct SignedSocket<S: Read + Write = WireStream> {
    socket: WebSocket<S>,
    peer: String,
}

/// The ACS websocket.
pub type AcsSocket = SignedSocket;

/// Opens a websocket at `endpoint` (scheme `ws`/`http` or `wss`/`https`; its path is the
/// websocket's) with `query`, the upgrade signed as `upgrade` says, through the proxy
/// `proxies` names for the host. `timeout` bounds the connect, the handshake and then each
/// read and write.
pub fn open_signed_websocket(
    endpoint: &Endpoint,
    query: &[(&str, &str)],
    upgrade: SignedUpgrade<'_>,
    proxies: &ProxySettings,
    timeout: Duration,
) -> Result<SignedSocket, EcsError> {
    let host = endpoint.host_header();
    let signed = sigv4::sign(
        &sigv4::SignInput {
            method: "GET",
            path: &endpoint.path,
            query,
            headers: &[("Host", &host)],
            payload: b"",
        },
        upgrade.credentials,
        upgrade.region,
        SIGNING_SERVICE,
        upgrade.amz_date,
    );
    let scheme = if endpoint.tls { "wss" } else { "ws" };
    let url = format!(
        "{scheme}://{host}{}",
        sigv4::request_target(&endpoint.path, query)
    );
    let peer = format!("{scheme}://{host}{}", endpoint.path);
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|error| EcsError::Config(format!("websocket URL {peer}: {error}")))?;
    let header = |name: &str, value: &str| {
        HeaderValue::from_str(value)
            .map_err(|_| EcsError::Credentials(format!("{name} is not a valid header value")))
    };
    let headers = request.headers_mut();
    headers.insert("Host", header("Host", &host)?);
    headers.insert(
        "User-Agent",
        header("User-Agent", &format!("deckhand/{}", crate::VERSION))?,
    );
    for (name, value) in &signed.headers {
        headers.insert(*name, header(name, value)?);
    }
    let stream = open_stream(
        &endpoint.host,
        endpoint.port,
        endpoint.tls,
        proxies,
        timeout,
    )
    .map_err(|error| match error {
        OpenError::Config(message) => EcsError::Config(format!("{peer}: {message}")),
        OpenError::Unreachable(message) => EcsError::Unreachable(format!("{peer}: {message}")),
    })?;
    match tungstenite::client::client_with_config(request, stream, Some(websocket_config())) {
        Ok((socket, _answer)) => Ok(SignedSocket { socket, peer }),
        Err(HandshakeError::Failure(tungstenite::Error::Http(answer))) => {
            let error_type = answer
                .headers()
                .get("x-amzn-ErrorType")
                .and_then(|value| value.to_str().ok());
            let body = answer.body().as_deref().unwrap_or_default();
            let body = body.get(..MAX_ERROR_BODY_BYTES).unwrap_or(body);
            Err(error_from_answer(
                answer.status().as_u16(),
                answer.status().canonical_reason().unwrap_or(""),
                error_type,
                body,
            ))
        }
        Err(HandshakeError::Failure(error)) => Err(EcsError::Unreachable(format!(
            "{peer}: the websocket upgrade: {error}"
        ))),
        Err(HandshakeError::Interrupted(_)) => Err(EcsError::Unreachable(format!(
            "{peer}: the websocket upgrade timed out"
        ))),
    }
}

/// Connects the ACS websocket at `poll_endpoint` (DiscoverPollEndpoint's `endpoint`) with
/// `query`, signed as `upgrade` says, through `proxies`.
pub fn connect(
    poll_endpoint: &str,
    query: &AcsQuery,
    upgrade: SignedUpgrade<'_>,
    proxies: &ProxySettings,
    timeout: Duration,
) -> Result<AcsSocket, EcsError> {
    connect_signed(
        poll_endpoint,
        &query.parameters(),
        upgrade,
        proxies,
        timeout,
    )
}

/// Connects a signed websocket at `endpoint`'s `ws` path ([`acs_path`]) with these query
/// parameters, through [`open_signed_websocket`]: how both ACS and the telemetry session
/// (TCS) open theirs.
pub fn connect_signed(
    endpoint: &str,
    parameters: &[(&'static str, String)],
    upgrade: SignedUpgrade<'_>,
    proxies: &ProxySettings,
    timeout: Duration,
) -> Result<AcsSocket, EcsError> {
    let mut endpoint = Endpoint::parse(endpoint).map_err(EcsError::Config)?;
    endpoint.path = acs_path(&endpoint.path);
    let pairs: Vec<(&str, &str)> = parameters
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect();
    open_signed_websocket(&endpoint, &pairs, upgrade, proxies, timeout)
}

/// Whether a tungstenite error means the connection ended without a close frame.
fn is_abnormal_end(error: &tungstenite::Error) -> bool {
    use std::io::ErrorKind;
    match error {
        tungstenite::Error::Protocol(
            tungstenite::error::ProtocolError::ResetWithoutClosingHandshake,
        ) => true,
        tungstenite::Error::Io(error) => matches!(
            error.kind(),
            ErrorKind::UnexpectedEof
                | ErrorKind::ConnectionReset
                | ErrorKind::ConnectionAborted
                | ErrorKind::BrokenPipe
        ),
        _ => false,
    }
}

fn is_timeout(error: &tungstenite::Error) -> bool {
    matches!(error, tungstenite::Error::Io(error)
        if matches!(error.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock))
}

/// The websocket configuration: the message and frame limits.
fn websocket_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE_BYTES))
        .max_frame_size(Some(MAX_MESSAGE_BYTES))
}

impl<S: Read + Write> SignedSocket<S> {
    /// The client side of a websocket whose upgrade already happened on `stream` (`peer`
    /// names it in messages): for tests and fuzzing.
    pub fn from_upgraded(stream: S, peer: &str) -> SignedSocket<S> {
        SignedSocket {
            socket: WebSocket::from_raw_socket(
                stream,
                tungstenite::protocol::Role::Client,
                Some(websocket_config()),
            ),
            peer: peer.to_string(),
        }
    }

    /// The stream underneath.
    pub fn stream(&self) -> &S {
        self.socket.get_ref()
    }

    /// The next text message, or how the connection ended. Pings are answered and binary
    /// messages skipped on the way. A read timeout is [`EcsError::ReadTimeout`]; a message
    /// over the limit or bytes that break the protocol are [`EcsError::Protocol`].
    pub fn read_text(&mut self) -> Result<Received, EcsError> {
        loop {
            match self.socket.read() {
                Ok(Message::Text(text)) => return Ok(Received::Text(text.as_str().to_string())),
                Ok(Message::Close(frame)) => {
                    // The reply to the close is queued: send it, as far as the peer still reads.
                    let _ = self.socket.flush();
                    return Ok(match frame {
                        Some(frame) => Received::Closed {
                            code: Some(u16::from(frame.code)),
                            reason: frame.reason.as_str().to_string(),
                        },
                        None => Received::Closed {
                            code: None,
                            reason: String::new(),
                        },
                    });
                }
                Ok(_) => continue,
                Err(error) if is_timeout(&error) => return Err(EcsError::ReadTimeout),
                Err(tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed) => {
                    return Ok(Received::Closed {
                        code: None,
                        reason: String::new(),
                    })
                }
                Err(error) if is_abnormal_end(&error) => {
                    return Ok(Received::Closed {
                        code: Some(CLOSE_ABNORMAL),
                        reason: error.to_string(),
                    })
                }
                Err(
                    error @ (tungstenite::Error::Capacity(_)
                    | tungstenite::Error::Protocol(_)
                    | tungstenite::Error::Utf8(_)),
                ) => return Err(EcsError::Protocol(format!("{}: {error}", self.peer))),
                Err(error) => return Err(EcsError::Unreachable(format!("{}: {error}", self.peer))),
            }
        }
    }

    /// Sends one text message.
    pub fn send_text(&mut self, text: &str) -> Result<(), EcsError> {
        self.socket
            .send(Message::text(text))
            .map_err(|error| EcsError::Unreachable(format!("{}: sending: {error}", self.peer)))
    }

    /// Sends a close frame (1000) and waits a little for the peer's.
    pub fn close(mut self) {
        let normal = tungstenite::protocol::CloseFrame {
            code: tungstenite::protocol::frame::coding::CloseCode::Normal,
            reason: "".into(),
        };
        if self.socket.close(Some(normal)).is_err() {
            return;
        }
        let deadline = Instant::now() + CLOSE_WAIT;
        while Instant::now() < deadline {
            if self.socket.read().is_err() {
                return;
            }
        }
    }
}

impl SignedSocket<WireStream> {
    /// Changes how long a read waits (`None`: forever).
    pub fn set_read_timeout(&mut self, timeout: Option<Duration>) -> Result<(), EcsError> {
        self.socket
            .get_ref()
            .set_read_timeout(timeout)
            .map_err(|error| EcsError::Unreachable(format!("{}: {error}", self.peer)))
    }
}
