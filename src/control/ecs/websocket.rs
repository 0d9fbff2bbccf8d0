//! The ACS websocket: the URL the Go agent builds from `DiscoverPollEndpoint`'s answer (`ws`
//! appended to an endpoint that ends in `/`, else `/ws`, and its query: `agentHash`,
//! `agentVersion`, `clusterArn`, `containerInstanceArn`, `dockerVersion`, `protocolVersion=2`,
//! `sendCredentials`, `seqNum`), the upgrade `GET` signed with SigV4 as the agent signs it
//! (`Host`, `X-Amz-Date`, `X-Amz-Security-Token`; service `ecs`), the upgrade's answer read
//! with `net::http1` (so an error answer's body is read whole, within a limit), and the
//! client side of RFC 6455 over the plain or TLS connection.
//!
//! The websocket protocol is written here rather than taken from a crate: ACS needs text
//! messages, pings and the close handshake, and a general websocket crate cost the stripped
//! release binary tens of KB for what is a few hundred lines. The frame reader is pure
//! ([`decode_head`], [`Assembler`]) and [`ClientSocket`] runs it over any byte stream: frames are
//! read into a buffer that survives a read timeout, so a timeout in the middle of a frame loses
//! nothing. Server frames that are masked, set a reserved bit, use an unknown opcode, or break
//! the fragmentation rules are a protocol error (the connection is closed with 1002); a frame or
//! message over [`MAX_MESSAGE_BYTES`] is refused (1009), text that is not UTF-8 too (1007).
//! Client frames are masked with a key from `getrandom(2)`.
//!
//! [`AcsSocket`] reads and sends text messages. A read that outlasts its timeout is
//! [`EcsError::ReadTimeout`] and leaves the socket usable; an HTTP error answer to the upgrade
//! (400 naming `InactiveInstanceException`, 403 for a bad signature) is [`EcsError::Service`]
//! with the body's type and message.

use std::time::Duration;

use std::io::{self, BufReader, Read, Write};

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
    socket: ClientSocket<Connection>,
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
    connect_signed(
        poll_endpoint,
        &query.parameters(),
        region,
        credentials,
        amz_date,
        timeout,
    )
}

/// Connects a signed websocket at `endpoint`'s `ws` path ([`acs_path`]) with this query: the
/// one way both ACS and the telemetry session (TCS) open theirs.
pub fn connect_signed(
    endpoint: &str,
    parameters: &[(&'static str, String)],
    region: &str,
    credentials: &Credentials,
    amz_date: &str,
    timeout: Duration,
) -> Result<AcsSocket, EcsError> {
    let endpoint = Endpoint::parse(endpoint).map_err(EcsError::Config)?;
    let path = acs_path(&endpoint.path);
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
    let mut nonce = [0u8; 16];
    random_bytes(&mut nonce)
        .map_err(|error| EcsError::Unreachable(format!("no random bytes for the key: {error}")))?;
    let key = base64(&nonce);
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
    let accepted = answer.header("Sec-WebSocket-Accept") == Some(accept_key(&key).as_str());
    if !upgraded || !accepted {
        return Err(EcsError::Protocol(format!(
            "ACS at {endpoint} answered 101 without a valid websocket upgrade"
        )));
    }
    // Frames ACS sent right after its answer may already be in the buffer.
    let read_ahead = reader.buffer().to_vec();
    Ok(AcsSocket {
        socket: ClientSocket::new(reader.into_inner(), read_ahead),
    })
}

impl AcsSocket {
    /// The next text message; `None` when ACS closed the connection. Pings are answered and
    /// binary messages skipped on the way. A read timeout is [`EcsError::ReadTimeout`].
    pub fn read_text(&mut self) -> Result<Option<String>, EcsError> {
        self.socket.read_text()
    }

    /// Sends one text message.
    pub fn send_text(&mut self, text: &str) -> Result<(), EcsError> {
        self.socket.send_text(text)
    }

    /// Changes how long a read waits (`None`: forever).
    pub fn set_read_timeout(&mut self, timeout: Option<Duration>) -> Result<(), EcsError> {
        self.socket
            .stream
            .set_read_timeout(timeout)
            .map_err(|error| EcsError::Unreachable(format!("ACS socket: {error}")))
    }

    /// Sends a close frame and waits (within the read timeout) for ACS's.
    pub fn close(mut self) {
        self.socket.close();
    }
}

/// The GUID RFC 6455 §1.3 appends to the key before hashing it.
const ACCEPT_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The `Sec-WebSocket-Accept` a server must answer to `key` (RFC 6455 §4.2.2). Pure.
pub fn accept_key(key: &str) -> String {
    base64(&sha1(format!("{key}{ACCEPT_GUID}").as_bytes()))
}

/// Standard base64 (RFC 4648 §4) with padding, for the key and the accept key. Pure.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut encoded = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let joined = group
            .iter()
            .enumerate()
            .fold(0u32, |joined, (index, byte)| {
                joined | u32::from(*byte) << (16 - 8 * index)
            });
        for index in 0..4 {
            if index <= group.len() {
                encoded.push(char::from(
                    ALPHABET[(joined >> (18 - 6 * index)) as usize & 63],
                ));
            } else {
                encoded.push('=');
            }
        }
    }
    encoded
}

/// SHA-1 (FIPS 180-4), for the handshake's accept key only: RFC 6455 names it, and nothing
/// secret depends on it. Pure.
pub fn sha1(data: &[u8]) -> [u8; 20] {
    let mut state: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let mut message = data.to_vec();
    message.push(0x80);
    while message.len() % 64 != 56 {
        message.push(0);
    }
    message.extend_from_slice(&((data.len() as u64).wrapping_mul(8)).to_be_bytes());
    for block in message.chunks_exact(64) {
        let mut words = [0u32; 80];
        for (word, bytes) in words.iter_mut().zip(block.chunks_exact(4)) {
            *word = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        }
        for index in 16..80 {
            words[index] =
                (words[index - 3] ^ words[index - 8] ^ words[index - 14] ^ words[index - 16])
                    .rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = state;
        for (index, word) in words.iter().enumerate() {
            let (f, k) = match index / 20 {
                0 => ((b & c) | (!b & d), 0x5A82_7999),
                1 => (b ^ c ^ d, 0x6ED9_EBA1),
                2 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let next = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*word);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = next;
        }
        for (kept, new) in state.iter_mut().zip([a, b, c, d, e]) {
            *kept = kept.wrapping_add(new);
        }
    }
    let mut digest = [0u8; 20];
    for (bytes, word) in digest.chunks_exact_mut(4).zip(state) {
        bytes.copy_from_slice(&word.to_be_bytes());
    }
    digest
}

/// Fills `buffer` from the kernel's random source (`getrandom(2)`).
fn random_bytes(buffer: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < buffer.len() {
        let rest = buffer.get_mut(filled..).unwrap_or_default();
        // SAFETY: the pointer and length are those of a live, writable slice.
        let count = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if count < 0 {
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::Interrupted {
                return Err(error);
            }
        } else {
            filled += count as usize;
        }
    }
    Ok(())
}

/// Frame opcodes (RFC 6455 §5.2).
pub const OPCODE_CONTINUATION: u8 = 0x0;
pub const OPCODE_TEXT: u8 = 0x1;
pub const OPCODE_BINARY: u8 = 0x2;
pub const OPCODE_CLOSE: u8 = 0x8;
pub const OPCODE_PING: u8 = 0x9;
pub const OPCODE_PONG: u8 = 0xA;

/// Close codes (RFC 6455 §7.4.1).
pub const CLOSE_NORMAL: u16 = 1000;
pub const CLOSE_PROTOCOL_ERROR: u16 = 1002;
pub const CLOSE_INVALID_DATA: u16 = 1007;
pub const CLOSE_TOO_BIG: u16 = 1009;

/// Why the server's frames cannot be read: the close code to answer with, and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError {
    pub code: u16,
    pub problem: String,
}

fn refuse(code: u16, problem: impl Into<String>) -> FrameError {
    FrameError {
        code,
        problem: problem.into(),
    }
}

/// A frame's header, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHead {
    pub fin: bool,
    pub opcode: u8,
    /// The bytes of the header (2 to 10: a server's frames carry no mask).
    pub header_len: usize,
    pub payload_len: usize,
}

/// The header at the start of `bytes`, `None` when more bytes are needed; a frame the server
/// may not send, or one longer than `max_payload`, is refused. Pure.
pub fn decode_head(bytes: &[u8], max_payload: usize) -> Result<Option<FrameHead>, FrameError> {
    let (Some(&first), Some(&second)) = (bytes.first(), bytes.get(1)) else {
        return Ok(None);
    };
    if first & 0x70 != 0 {
        return Err(refuse(
            CLOSE_PROTOCOL_ERROR,
            "a frame with a reserved bit set",
        ));
    }
    let opcode = first & 0x0F;
    if !matches!(
        opcode,
        OPCODE_CONTINUATION
            | OPCODE_TEXT
            | OPCODE_BINARY
            | OPCODE_CLOSE
            | OPCODE_PING
            | OPCODE_PONG
    ) {
        return Err(refuse(
            CLOSE_PROTOCOL_ERROR,
            format!("a frame with the unknown opcode {opcode:#x}"),
        ));
    }
    if second & 0x80 != 0 {
        return Err(refuse(
            CLOSE_PROTOCOL_ERROR,
            "a masked frame from the server",
        ));
    }
    let fin = first & 0x80 != 0;
    let (header_len, length) = match second & 0x7F {
        126 => match bytes.get(2..4) {
            Some(extended) => (4, u64::from(u16::from_be_bytes([extended[0], extended[1]]))),
            None => return Ok(None),
        },
        127 => match bytes
            .get(2..10)
            .and_then(|extended| <[u8; 8]>::try_from(extended).ok())
        {
            Some(extended) => (10, u64::from_be_bytes(extended)),
            None => return Ok(None),
        },
        short => (2, u64::from(short)),
    };
    if opcode >= OPCODE_CLOSE && (!fin || length > 125) {
        return Err(refuse(
            CLOSE_PROTOCOL_ERROR,
            "a control frame fragmented or over 125 bytes",
        ));
    }
    let payload_len = usize::try_from(length)
        .ok()
        .filter(|length| *length <= max_payload)
        .ok_or_else(|| {
            refuse(
                CLOSE_TOO_BIG,
                format!("a frame of {length} bytes, over the limit of {max_payload}"),
            )
        })?;
    Ok(Some(FrameHead {
        fin,
        opcode,
        header_len,
        payload_len,
    }))
}

/// What a frame meant, once its message (if any) is whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    Text(String),
    Binary(usize),
    Ping(Vec<u8>),
    Pong,
    /// The server's close code (`None` when its close frame had no body).
    Close(Option<u16>),
}

/// Reassembles fragmented messages (RFC 6455 §5.4) within a size limit.
#[derive(Debug, Default)]
pub struct Assembler {
    /// The opcode of the message being received, while its frames arrive.
    opcode: Option<u8>,
    message: Vec<u8>,
}

impl Assembler {
    /// Takes one frame; `None` while a fragmented message is not whole yet.
    pub fn accept(
        &mut self,
        head: &FrameHead,
        payload: &[u8],
        max_message: usize,
    ) -> Result<Option<Incoming>, FrameError> {
        match head.opcode {
            OPCODE_PING => return Ok(Some(Incoming::Ping(payload.to_vec()))),
            OPCODE_PONG => return Ok(Some(Incoming::Pong)),
            OPCODE_CLOSE => return close_frame(payload).map(Some),
            OPCODE_CONTINUATION if self.opcode.is_none() => {
                return Err(refuse(
                    CLOSE_PROTOCOL_ERROR,
                    "a continuation frame with no message to continue",
                ))
            }
            OPCODE_CONTINUATION => {}
            _ if self.opcode.is_some() => {
                return Err(refuse(
                    CLOSE_PROTOCOL_ERROR,
                    "a new message before the last one ended",
                ))
            }
            opcode => self.opcode = Some(opcode),
        }
        if self.message.len().saturating_add(payload.len()) > max_message {
            return Err(refuse(
                CLOSE_TOO_BIG,
                format!("a message over the limit of {max_message} bytes"),
            ));
        }
        self.message.extend_from_slice(payload);
        if !head.fin {
            return Ok(None);
        }
        let message = std::mem::take(&mut self.message);
        match self.opcode.take() {
            Some(OPCODE_TEXT) => String::from_utf8(message)
                .map(|text| Some(Incoming::Text(text)))
                .map_err(|_| refuse(CLOSE_INVALID_DATA, "a text message that is not UTF-8")),
            _ => Ok(Some(Incoming::Binary(message.len()))),
        }
    }
}

fn close_frame(payload: &[u8]) -> Result<Incoming, FrameError> {
    match payload {
        [] => Ok(Incoming::Close(None)),
        [high, low, reason @ ..] if std::str::from_utf8(reason).is_ok() => {
            Ok(Incoming::Close(Some(u16::from_be_bytes([*high, *low]))))
        }
        [_, _, ..] => Err(refuse(
            CLOSE_INVALID_DATA,
            "a close reason that is not UTF-8",
        )),
        [_] => Err(refuse(CLOSE_PROTOCOL_ERROR, "a close frame of one byte")),
    }
}

/// One final client frame: `opcode`, `payload` masked with `mask` (RFC 6455 §5.3). Pure.
pub fn encode_frame(opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(payload.len() + 14);
    frame.push(0x80 | opcode);
    match payload.len() {
        length @ 0..=125 => frame.push(0x80 | length as u8),
        length @ 126..=0xFFFF => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(length as u16).to_be_bytes());
        }
        length => {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(length as u64).to_be_bytes());
        }
    }
    frame.extend_from_slice(&mask);
    frame.extend(
        payload
            .iter()
            .zip(mask.iter().cycle())
            .map(|(byte, key)| byte ^ key),
    );
    frame
}

/// How much is asked of the stream per read.
const READ_CHUNK_BYTES: usize = 16 * 1024;

/// The client side of a websocket over `stream`, after the upgrade.
#[derive(Debug)]
pub struct ClientSocket<S> {
    stream: S,
    /// Bytes read and not yet taken as whole frames: a partial frame waits here across a
    /// read timeout.
    input: Vec<u8>,
    assembler: Assembler,
    /// The server's close frame came (or the connection ended, or its frames broke the
    /// protocol): reads say `None`.
    closed: bool,
    close_sent: bool,
}

impl<S: Read + Write> ClientSocket<S> {
    /// The socket over `stream`; `read_ahead` are bytes already read past the upgrade's answer.
    pub fn new(stream: S, read_ahead: Vec<u8>) -> ClientSocket<S> {
        ClientSocket {
            stream,
            input: read_ahead,
            assembler: Assembler::default(),
            closed: false,
            close_sent: false,
        }
    }

    /// The next text message; `None` once the server closed (its close is answered) or the
    /// connection ended. Pings are answered with pongs, binary messages and pongs skipped.
    pub fn read_text(&mut self) -> Result<Option<String>, EcsError> {
        while !self.closed {
            let head = match decode_head(&self.input, MAX_MESSAGE_BYTES) {
                Ok(head) => head,
                Err(error) => return Err(self.fail(error)),
            };
            let whole = head.filter(|head| self.input.len() >= head.header_len + head.payload_len);
            let Some(head) = whole else {
                self.fill()?;
                continue;
            };
            let end = head.header_len + head.payload_len;
            let payload = self.input.get(head.header_len..end).unwrap_or_default();
            let incoming = self.assembler.accept(&head, payload, MAX_MESSAGE_BYTES);
            self.input.drain(..end);
            match incoming {
                Err(error) => return Err(self.fail(error)),
                Ok(Some(Incoming::Text(text))) => return Ok(Some(text)),
                Ok(Some(Incoming::Ping(payload))) => self.send_frame(OPCODE_PONG, &payload)?,
                Ok(Some(Incoming::Close(code))) => {
                    self.closed = true;
                    if !self.close_sent {
                        let echo = code.map(u16::to_be_bytes).unwrap_or_default();
                        let body = if code.is_some() { &echo[..] } else { &[] };
                        // The answer is a courtesy: the connection ends either way.
                        let _ = self.send_frame(OPCODE_CLOSE, body);
                    }
                }
                Ok(_) => {}
            }
        }
        Ok(None)
    }

    /// The stream underneath.
    pub fn stream_ref(&self) -> &S {
        &self.stream
    }

    /// Sends one text message, in one frame.
    pub fn send_text(&mut self, text: &str) -> Result<(), EcsError> {
        if self.closed || self.close_sent {
            return Err(EcsError::Unreachable("ACS: the websocket is closed".into()));
        }
        self.send_frame(OPCODE_TEXT, text.as_bytes())
    }

    /// Sends a normal close and reads (within the read timeout, at most 16 messages) until the
    /// server's close.
    pub fn close(&mut self) {
        if !self.close_sent && !self.closed {
            let sent = self.send_frame(OPCODE_CLOSE, &CLOSE_NORMAL.to_be_bytes());
            for _ in 0..16 {
                if sent.is_err() || !matches!(self.read_text(), Ok(Some(_))) {
                    break;
                }
            }
        }
    }

    fn send_frame(&mut self, opcode: u8, payload: &[u8]) -> Result<(), EcsError> {
        let mut mask = [0u8; 4];
        random_bytes(&mut mask)
            .map_err(|error| EcsError::Unreachable(format!("ACS: no random mask: {error}")))?;
        if opcode == OPCODE_CLOSE {
            self.close_sent = true;
        }
        self.stream
            .write_all(&encode_frame(opcode, payload, mask))
            .and_then(|()| self.stream.flush())
            .map_err(|error| {
                // Part of a frame may be out: nothing more can be sent after it.
                self.close_sent = true;
                EcsError::Unreachable(format!("ACS: sending: {error}"))
            })
    }

    /// Reads more bytes into `input`; the end of the stream closes the socket.
    fn fill(&mut self) -> Result<(), EcsError> {
        let mut chunk = [0u8; READ_CHUNK_BYTES];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    self.closed = true;
                    return Ok(());
                }
                Ok(count) => {
                    self.input
                        .extend_from_slice(chunk.get(..count).unwrap_or_default());
                    return Ok(());
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error)
                    if matches!(
                        error.kind(),
                        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                    ) =>
                {
                    return Err(EcsError::ReadTimeout)
                }
                Err(error) => return Err(EcsError::Unreachable(format!("ACS: {error}"))),
            }
        }
    }

    /// Closes with `error`'s code (best effort) and says what the server did wrong.
    fn fail(&mut self, error: FrameError) -> EcsError {
        self.closed = true;
        if !self.close_sent {
            let _ = self.send_frame(OPCODE_CLOSE, &error.code.to_be_bytes());
        }
        EcsError::Protocol(format!("ACS sent {}", error.problem))
    }
}
