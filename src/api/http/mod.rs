//! HTTP/1.1 framing for the local API, the ECS introspection endpoint and the CLI's client:
//! reading a message head and body with hard limits, and writing a response.
//!
//! Everything here is generic over `Read`/`Write`, so the tests push bytes through
//! `UnixStream::pair()`. The limits are the point: a request head over [`MAX_HEAD_BYTES`] or a
//! body over the caller's limit is refused *before* it is read or buffered, so no client can make
//! the agent allocate what it announces. One request per connection (`Connection: close`): the
//! API is a handful of small JSON calls, and that keeps the framing free of pipelining state.

use std::fmt;
use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Largest request or response head (request line, status line and headers) accepted.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Most headers accepted in one head.
pub const MAX_HEADERS: usize = 64;
/// Largest request body the API accepts: a task definition.
pub const MAX_REQUEST_BODY_BYTES: usize = crate::task::MAX_TASK_DEFINITION_BYTES;

/// A parsed request: method, target split into path and query, headers and the whole body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    pub method: String,
    /// The path as sent, still percent-encoded.
    pub path: String,
    /// The raw query string after `?` (empty when none), still percent-encoded.
    pub query: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    /// The first header with that (lower-case) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        header_value(&self.headers, name)
    }

    /// The path split into percent-decoded segments (`/v1/tasks/a%2Fb` → `["v1","tasks","a/b"]`).
    /// One trailing slash is ignored; an empty segment inside (`/v1/tasks//stop`) is kept, so
    /// that it matches no route.
    pub fn path_segments(&self) -> Vec<String> {
        let trimmed = self.path.strip_prefix('/').unwrap_or(&self.path);
        let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
        if trimmed.is_empty() {
            return Vec::new();
        }
        trimmed.split('/').map(percent_decode).collect()
    }

    /// Query parameters, percent-decoded (`+` is a space), in order.
    pub fn query_pairs(&self) -> Vec<(String, String)> {
        parse_query(&self.query)
    }
}

/// A response ready to be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// A body written as it is produced (chunked), instead of `body`.
    pub stream: Option<StreamBody>,
}

/// What a streamed body has next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    /// Bytes to send now.
    Data(Vec<u8>),
    /// Nothing within the wait: the server checks that the client is still there.
    Idle,
    /// The body is complete.
    End,
}

/// A body produced while it is sent (a followed log). Dropping it releases what it holds: the
/// server drops it when the body ends, the client goes away, or the server stops.
pub trait ResponseStream: Send {
    /// Waits at most `wait` for what comes next.
    fn next_event(&mut self, wait: Duration) -> StreamEvent;
}

/// A [`ResponseStream`] inside a response; the server takes it out once to write it.
#[derive(Clone)]
pub struct StreamBody(Arc<Mutex<Option<Box<dyn ResponseStream>>>>);

impl StreamBody {
    pub fn new(stream: Box<dyn ResponseStream>) -> StreamBody {
        StreamBody(Arc::new(Mutex::new(Some(stream))))
    }

    /// The stream, the first time only.
    pub fn take(&self) -> Option<Box<dyn ResponseStream>> {
        match self.0.lock() {
            Ok(mut stream) => stream.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        }
    }
}

impl fmt::Debug for StreamBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StreamBody")
    }
}

impl PartialEq for StreamBody {
    fn eq(&self, other: &StreamBody) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for StreamBody {}

impl HttpResponse {
    /// A JSON response; `value` is serialized with a trailing newline (friendly to `curl`).
    pub fn json(status: u16, value: &serde_json::Value) -> HttpResponse {
        let mut body = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
        body.push(b'\n');
        HttpResponse {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body,
            stream: None,
        }
    }

    /// A 200 whose body is `stream`, sent with chunked transfer encoding as it is produced.
    pub fn streaming(content_type: &str, stream: Box<dyn ResponseStream>) -> HttpResponse {
        HttpResponse {
            status: 200,
            headers: vec![("Content-Type".into(), content_type.into())],
            body: Vec::new(),
            stream: Some(StreamBody::new(stream)),
        }
    }

    /// `{"error": message}` with the given status.
    pub fn error(status: u16, message: impl Into<String>) -> HttpResponse {
        HttpResponse::json(status, &serde_json::json!({ "error": message.into() }))
    }

    pub fn with_header(mut self, name: &str, value: &str) -> HttpResponse {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        header_value(&self.headers, name)
    }
}

/// Why a request could not be read. Each maps onto the status the server answers with, if any.
#[derive(Debug)]
pub enum ReadError {
    /// The peer closed the connection before sending a single byte (nothing to answer).
    ClosedBeforeRequest,
    /// The head grew past [`MAX_HEAD_BYTES`] without ending.
    HeadTooLarge,
    /// The body announced, or read so far, is larger than the limit; it was not read.
    BodyTooLarge { limit: usize },
    /// The bytes are not HTTP/1.x, or the framing headers contradict each other.
    Malformed(String),
    /// The peer closed the connection in the middle of the message.
    UnexpectedEof,
    /// A read failed or timed out.
    Io(io::Error),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::ClosedBeforeRequest => f.write_str("connection closed before a request"),
            ReadError::HeadTooLarge => {
                write!(f, "message head larger than {MAX_HEAD_BYTES} bytes")
            }
            ReadError::BodyTooLarge { limit } => {
                write!(f, "body larger than the {limit} bytes accepted")
            }
            ReadError::Malformed(message) => write!(f, "malformed HTTP message: {message}"),
            ReadError::UnexpectedEof => f.write_str("connection closed in the middle of a message"),
            ReadError::Io(error) => write!(f, "read failed: {error}"),
        }
    }
}

impl std::error::Error for ReadError {}

impl ReadError {
    /// The status to answer a request that failed this way with (`None`: just close).
    pub fn response_status(&self) -> Option<u16> {
        match self {
            ReadError::ClosedBeforeRequest | ReadError::UnexpectedEof | ReadError::Io(_) => None,
            ReadError::HeadTooLarge => Some(431),
            ReadError::BodyTooLarge { .. } => Some(413),
            ReadError::Malformed(_) => Some(400),
        }
    }
}

/// How the body of a message is delimited.
mod client;
mod framing;

pub use client::*;
use framing::*;

/// Reads one request. When the client asked `Expect: 100-continue` and the body is within
/// `body_limit`, the interim `100 Continue` is written before the body is read; an oversized body
/// is refused without reading it.
pub fn read_request<S: Read + Write>(
    stream: &mut S,
    body_limit: usize,
) -> Result<HttpRequest, ReadError> {
    let (head, rest) = read_head(stream)?;
    let mut header_storage = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut header_storage);
    match parsed.parse(&head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => {
            return Err(ReadError::Malformed("incomplete request head".into()))
        }
        Err(error) => return Err(ReadError::Malformed(error.to_string())),
    }
    let method = parsed.method.unwrap_or("").to_string();
    let target = parsed.path.unwrap_or("").to_string();
    let headers = lower_headers(parsed.headers);
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (path.to_string(), query.to_string()),
        None => (target.clone(), String::new()),
    };
    let framing = body_framing(&headers, true)?;
    if let BodyFraming::Length(length) = framing {
        if length > body_limit {
            return Err(ReadError::BodyTooLarge { limit: body_limit });
        }
    }
    let expects_continue = header_value(&headers, "expect")
        .is_some_and(|value| value.eq_ignore_ascii_case("100-continue"));
    if expects_continue && framing != BodyFraming::None && rest.is_empty() {
        stream
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .map_err(ReadError::Io)?;
    }
    let mut reader = Buffered {
        leftover: rest,
        position: 0,
        inner: stream,
    };
    let body = read_body(&mut reader, framing, body_limit)?;
    Ok(HttpRequest {
        method,
        path,
        query,
        headers,
        body,
    })
}

/// The standard reason phrase of the statuses deckhand sends.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

/// Writes `response` with `Content-Length` and `Connection: close`.
pub fn write_response<W: Write>(stream: &mut W, response: &HttpResponse) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        response.status,
        reason_phrase(response.status),
        response.body.len()
    );
    for (name, value) in &response.headers {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    let mut message = head.into_bytes();
    message.extend_from_slice(&response.body);
    stream.write_all(&message)?;
    stream.flush()
}

/// Writes the head of a streamed response: `Transfer-Encoding: chunked`, `Connection: close`.
pub fn write_streaming_head<W: Write>(stream: &mut W, response: &HttpResponse) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n",
        response.status,
        reason_phrase(response.status)
    );
    for (name, value) in &response.headers {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.flush()
}

/// Writes one chunk of a chunked body (nothing for empty `data`: an empty chunk would end it).
pub fn write_chunk<W: Write>(stream: &mut W, data: &[u8]) -> io::Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    let mut message = format!("{:x}\r\n", data.len()).into_bytes();
    message.extend_from_slice(data);
    message.extend_from_slice(b"\r\n");
    stream.write_all(&message)?;
    stream.flush()
}

/// Ends a chunked body.
pub fn write_last_chunk<W: Write>(stream: &mut W) -> io::Result<()> {
    stream.write_all(b"0\r\n\r\n")?;
    stream.flush()
}

/// Percent-decodes one path segment or query component (invalid escapes are kept as written).
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' && index + 2 < bytes.len() {
            let high = (bytes[index + 1] as char).to_digit(16);
            let low = (bytes[index + 2] as char).to_digit(16);
            if let (Some(high), Some(low)) = (high, low) {
                decoded.push((high * 16 + low) as u8);
                index += 3;
                continue;
            }
        }
        decoded.push(bytes[index]);
        index += 1;
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

/// Percent-encodes everything but unreserved characters (for a path segment or query value):
/// the same encoding the Docker client uses for its paths.
pub fn percent_encode(text: &str) -> String {
    crate::encoding::percent_encode(text, false)
}

/// `a=1&b=x%20y` → `[("a","1"),("b","x y")]`.
pub fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (
                percent_decode(&key.replace('+', " ")),
                percent_decode(&value.replace('+', " ")),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests;
