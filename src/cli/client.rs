//! The CLI's client of the local API: one blocking HTTP/1.1 request per connection over the
//! agent's Unix socket, using the same framing as the server (`crate::api::http`).

use crate::api::http::{open_response, read_response, write_request, BodyStream, ReadError};
use std::fmt;
use std::io;
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The largest response body the CLI accepts (a long `ps --all` or an events page).
const MAX_RESPONSE_BODY_BYTES: usize = 64 * 1024 * 1024;

/// Why a request got no usable answer.
#[derive(Debug)]
pub enum ClientError {
    /// Nothing listens on the socket (or it may not be used).
    Unreachable { socket: PathBuf, source: io::Error },
    /// The connection broke, timed out, or the answer is not HTTP/JSON.
    Protocol { socket: PathBuf, message: String },
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Unreachable { socket, source } => write!(
                f,
                "cannot reach the deckhand agent at {}: {source}\n\
                 `deckhand run` must be running and serving that socket \
                 (choose another socket with --socket PATH or DECKHAND_API_SOCKET)",
                socket.display()
            ),
            ClientError::Protocol { socket, message } => write!(
                f,
                "bad answer from the deckhand agent at {}: {message}",
                socket.display()
            ),
        }
    }
}

impl std::error::Error for ClientError {}

/// An answer: the status and the JSON body (`null` when the body was empty).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiResponse {
    pub status: u16,
    pub body: serde_json::Value,
}

impl ApiResponse {
    /// The `error` message of an error answer, else the status line.
    pub fn error_message(&self) -> String {
        self.body
            .get("error")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("the agent answered HTTP {}", self.status))
    }
}

/// The answer to a streamed request: the body to read as it arrives (a 200), or an error answer
/// read whole.
pub enum StreamAnswer {
    Stream(BodyStream<UnixStream>),
    Answer(ApiResponse),
}

pub struct ApiClient {
    socket: PathBuf,
}

impl ApiClient {
    pub fn new(socket: &Path) -> ApiClient {
        ApiClient {
            socket: socket.to_path_buf(),
        }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Sends one request and reads the answer, waiting at most `timeout` for it.
    pub fn request(
        &self,
        method: &str,
        target: &str,
        body: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<ApiResponse, ClientError> {
        let mut stream =
            UnixStream::connect(&self.socket).map_err(|source| ClientError::Unreachable {
                socket: self.socket.clone(),
                source,
            })?;
        let protocol = |message: String| ClientError::Protocol {
            socket: self.socket.clone(),
            message,
        };
        stream
            .set_read_timeout(Some(timeout))
            .and_then(|()| stream.set_write_timeout(Some(timeout)))
            .map_err(|error| protocol(error.to_string()))?;
        if let Err(error) = write_request(&mut stream, method, target, body) {
            // The agent may have refused the request early (413) and closed its side; its
            // answer is still worth reading, so only give up if there is none.
            if !matches!(
                error.kind(),
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
            ) {
                return Err(protocol(format!("sending the request failed: {error}")));
            }
        }
        let response = read_response(&mut stream, MAX_RESPONSE_BODY_BYTES).map_err(|error| {
            protocol(match error {
                ReadError::Io(io_error) if io_error.kind() == io::ErrorKind::WouldBlock => {
                    format!("no answer within {}s", timeout.as_secs())
                }
                other => other.to_string(),
            })
        })?;
        let body = if response.body.iter().all(u8::is_ascii_whitespace) {
            serde_json::Value::Null
        } else {
            serde_json::from_slice(&response.body)
                .map_err(|error| protocol(format!("the answer is not JSON: {error}")))?
        };
        Ok(ApiResponse {
            status: response.status,
            body,
        })
    }

    /// Sends a GET whose 200 answer is streamed (a followed log): waits at most
    /// `head_timeout` for the answer's head, then `body_timeout` for each read of the body
    /// (`None`: as long as it takes).
    pub fn request_stream(
        &self,
        target: &str,
        head_timeout: Duration,
        body_timeout: Option<Duration>,
    ) -> Result<StreamAnswer, ClientError> {
        let mut stream =
            UnixStream::connect(&self.socket).map_err(|source| ClientError::Unreachable {
                socket: self.socket.clone(),
                source,
            })?;
        let protocol = |message: String| ClientError::Protocol {
            socket: self.socket.clone(),
            message,
        };
        stream
            .set_read_timeout(Some(head_timeout))
            .and_then(|()| stream.set_write_timeout(Some(head_timeout)))
            .map_err(|error| protocol(error.to_string()))?;
        write_request(&mut stream, "GET", target, None)
            .map_err(|error| protocol(format!("sending the request failed: {error}")))?;
        let opened = open_response(stream).map_err(|error| {
            protocol(match error {
                ReadError::Io(io_error) if io_error.kind() == io::ErrorKind::WouldBlock => {
                    format!("no answer within {}s", head_timeout.as_secs())
                }
                other => other.to_string(),
            })
        })?;
        let (status, body) = (opened.status, opened.body);
        if status == 200 {
            body.get_ref()
                .set_read_timeout(body_timeout)
                .map_err(|error| protocol(error.to_string()))?;
            return Ok(StreamAnswer::Stream(body));
        }
        let mut bytes = Vec::new();
        body.take(MAX_RESPONSE_BODY_BYTES as u64)
            .read_to_end(&mut bytes)
            .map_err(|error| protocol(error.to_string()))?;
        let value = if bytes.iter().all(u8::is_ascii_whitespace) {
            serde_json::Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .map_err(|error| protocol(format!("the answer is not JSON: {error}")))?
        };
        Ok(StreamAnswer::Answer(ApiResponse {
            status,
            body: value,
        }))
    }
}
