//! The ACS websocket: the URL the Go agent builds from `DiscoverPollEndpoint`'s answer (`ws`
//! appended to an endpoint that ends in `/`, else `/ws`, and its query: `agentHash`,
//! `agentVersion`, `clusterArn`, `containerInstanceArn`, `dockerVersion`, `protocolVersion=2`,
//! `sendCredentials`, `seqNum`), the upgrade `GET` signed with SigV4 as the agent signs it
//! (`Host`, `X-Amz-Date`, `X-Amz-Security-Token`; service `ecs`), the upgrade's answer read
//! with `net::http1` (so an error answer's body is read whole, within a limit), and the
//! framing by `tungstenite` over the plain or TLS connection. The upgrade is written here, not
//! by tungstenite's client handshake: that one goes through the `http` crate's request, URI
//! and header types, which cost the stripped release binary 52 KB (measured: 138 KB → 86 KB
//! for the websocket path) for one request line.
//!
//! [`AcsSocket`] reads and sends text messages. A read that outlasts its timeout is
//! [`EcsError::ReadTimeout`] and leaves the socket usable; an HTTP error answer to the upgrade
//! (400 naming `InactiveInstanceException`, 403 for a bad signature) is [`EcsError::Service`]
//! with the body's type and message.

use std::time::Duration;

use std::io::{BufReader, Write};

use tungstenite::protocol::{Role, WebSocketConfig};
use tungstenite::{Error as WsError, Message, WebSocket};

use super::credentials::Credentials;
use super::endpoint::{Connection, Endpoint};
use super::{error_from_answer, sigv4, EcsError, SIGNING_SERVICE};
use crate::net::http1::{read_response_head, BodyReader, MAX_RESPONSE_HEAD_BYTES};

/// ACS's protocol version, as the Go agent sends it.
pub const ACS_PROTOCOL_VERSION: u32 = 2;
/// A message larger than this is refused (a payload of many tasks is some hundreds of KiB).
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// An error answer to the upgrade longer than this is cut.
const MAX_ERROR_BODY_BYTES: u64 = 64 * 1024;

/// The query of the ACS connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcsQuery {
    pub cluster_arn: String,
    pub container_instance_arn: String,
    pub agent_hash: String,
    pub agent_version: String,
    /// Docker's version (`20.10.24`), sent as ACS expects it: `DockerVersion: 20.10.24`.
    pub docker_version: Option<String>,
    /// Whether ACS should send every task's credentials on connecting (true on a session's
    /// first connection).
    pub send_credentials: bool,
    pub seq_num: u64,
}

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
        parameters.push(("seqNum", self.seq_num.to_string()));
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

/// An open ACS websocket.
#[derive(Debug)]
pub struct AcsSocket {
    socket: WebSocket<Connection>,
}

/// Connects the ACS websocket at `poll_endpoint` (DiscoverPollEndpoint's `endpoint`), signing
/// the upgrade with `credentials` for `region` at `amz_date` ([`sigv4::amz_date`]). `timeout`
/// bounds the connect, the handshake and then each read and write.
pub fn connect(
    poll_endpoint: &str,
    query: &AcsQuery,
    region: &str,
    credentials: &Credentials,
    amz_date: &str,
    timeout: Duration,
) -> Result<AcsSocket, EcsError> {
    let endpoint = Endpoint::parse(poll_endpoint).map_err(EcsError::Config)?;
    let path = acs_path(&endpoint.path);
    let parameters = query.parameters();
    let pairs: Vec<(&str, &str)> = parameters
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect();
    let host = endpoint.host_header();
    let signed = sigv4::sign(
        &sigv4::SignInput {
            method: "GET",
            path: &path,
            query: &pairs,
            headers: &[("Host", &host)],
            payload: b"",
        },
        credentials,
        region,
        SIGNING_SERVICE,
        amz_date,
    );
    let target = sigv4::request_target(&path, &pairs);
    let key = tungstenite::handshake::client::generate_key();
    let mut head = format!(
        "GET {target} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: deckhand/{}\r\n\
         Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: {key}\r\n",
        crate::VERSION
    );
    for (name, value) in &signed.headers {
        if value.contains(['\r', '\n']) {
            return Err(EcsError::Credentials(format!(
                "{name} would contain a line break"
            )));
        }
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut connection = endpoint.connect(timeout)?;
    let unreachable = |what: &str, error: std::io::Error| {
        EcsError::Unreachable(format!("ACS at {endpoint}: {what}: {error}"))
    };
    connection
        .write_all(head.as_bytes())
        .and_then(|()| connection.flush())
        .map_err(|error| unreachable("sending the upgrade", error))?;
    let mut reader = BufReader::new(connection);
    let answer = read_response_head(&mut reader, MAX_RESPONSE_HEAD_BYTES)
        .map_err(|error| unreachable("reading the upgrade's answer", error))?;
    if answer.status != 101 {
        let body = answer
            .body_framing("GET")
            .and_then(|framing| {
                BodyReader::new(&mut reader, framing).read_to_end_limited(MAX_ERROR_BODY_BYTES)
            })
            .unwrap_or_default();
        return Err(error_from_answer(
            answer.status,
            &answer.reason,
            answer.header("x-amzn-ErrorType"),
            &body,
        ));
    }
    let upgraded = answer
        .header("Upgrade")
        .is_some_and(|value| value.eq_ignore_ascii_case("websocket"));
    let accepted = answer.header("Sec-WebSocket-Accept")
        == Some(tungstenite::handshake::derive_accept_key(key.as_bytes()).as_str());
    if !upgraded || !accepted {
        return Err(EcsError::Protocol(format!(
            "ACS at {endpoint} answered 101 without a valid websocket upgrade"
        )));
    }
    // Frames ACS sent right after its answer may already be in the buffer.
    let read_ahead = reader.buffer().to_vec();
    let connection = reader.into_inner();
    let mut config = WebSocketConfig::default();
    config.max_message_size = Some(MAX_MESSAGE_BYTES);
    config.max_frame_size = Some(MAX_MESSAGE_BYTES);
    Ok(AcsSocket {
        socket: WebSocket::from_partially_read(connection, read_ahead, Role::Client, Some(config)),
    })
}

impl AcsSocket {
    /// The next text message; `None` when ACS closed the connection. Pings are answered and
    /// binary messages skipped on the way. A read timeout is [`EcsError::ReadTimeout`].
    pub fn read_text(&mut self) -> Result<Option<String>, EcsError> {
        loop {
            match self.socket.read() {
                Ok(Message::Text(text)) => return Ok(Some(text.as_str().to_string())),
                Ok(Message::Close(_)) => {
                    // Let tungstenite answer the close; the next read reports the end.
                    continue;
                }
                Ok(_) => continue,
                Err(WsError::ConnectionClosed | WsError::AlreadyClosed) => return Ok(None),
                Err(WsError::Protocol(
                    tungstenite::error::ProtocolError::ResetWithoutClosingHandshake,
                )) => return Ok(None),
                Err(error) => return Err(self.failure(error)),
            }
        }
    }

    /// Sends one text message.
    pub fn send_text(&mut self, text: &str) -> Result<(), EcsError> {
        self.socket
            .send(Message::text(text))
            .map_err(|error| self.failure(error))
    }

    /// Changes how long a read waits (`None`: forever).
    pub fn set_read_timeout(&mut self, timeout: Option<Duration>) -> Result<(), EcsError> {
        self.socket
            .get_ref()
            .set_read_timeout(timeout)
            .map_err(|error| EcsError::Unreachable(format!("ACS socket: {error}")))
    }

    /// Sends a close frame and waits (within the read timeout) for ACS's.
    pub fn close(mut self) {
        if self.socket.close(None).is_ok() {
            for _ in 0..16 {
                if self.socket.read().is_err() {
                    break;
                }
            }
        }
    }

    fn failure(&self, error: WsError) -> EcsError {
        match error {
            WsError::Io(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
                ) =>
            {
                EcsError::ReadTimeout
            }
            other => EcsError::Unreachable(format!("ACS: {other}")),
        }
    }
}
