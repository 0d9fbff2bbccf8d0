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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyFraming {
    None,
    Length(usize),
    Chunked,
    /// Until the peer closes (responses only).
    UntilClose,
}

/// Bytes read from a stream beyond the head: the start of the body.
struct Buffered<'a, R: Read> {
    leftover: Vec<u8>,
    position: usize,
    inner: &'a mut R,
}

impl<R: Read> Read for Buffered<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.position < self.leftover.len() {
            let available = &self.leftover[self.position..];
            let count = available.len().min(buf.len());
            buf[..count].copy_from_slice(&available[..count]);
            self.position += count;
            return Ok(count);
        }
        self.inner.read(buf)
    }
}

/// Reads until the blank line that ends a head; returns the head bytes and what followed.
fn read_head<R: Read>(stream: &mut R) -> Result<(Vec<u8>, Vec<u8>), ReadError> {
    let mut buffer: Vec<u8> = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let count = match stream.read(&mut chunk) {
            Ok(count) => count,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(ReadError::Io(error)),
        };
        if count == 0 {
            return Err(if buffer.is_empty() {
                ReadError::ClosedBeforeRequest
            } else {
                ReadError::UnexpectedEof
            });
        }
        let search_from = buffer.len().saturating_sub(3);
        buffer.extend_from_slice(&chunk[..count]);
        if let Some(end) = find_head_end(&buffer, search_from) {
            let rest = buffer.split_off(end);
            return Ok((buffer, rest));
        }
        if buffer.len() > MAX_HEAD_BYTES {
            return Err(ReadError::HeadTooLarge);
        }
    }
}

fn find_head_end(buffer: &[u8], from: usize) -> Option<usize> {
    buffer[from..]
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .map(|position| from + position + 4)
        .filter(|end| *end <= MAX_HEAD_BYTES)
}

fn lower_headers(headers: &[httparse::Header<'_>]) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|header| {
            (
                header.name.to_ascii_lowercase(),
                String::from_utf8_lossy(header.value).trim().to_string(),
            )
        })
        .collect()
}

fn header_value<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
}

/// Decides the body framing from the headers (RFC 9112 §6.3), refusing contradictions.
fn body_framing(headers: &[(String, String)], is_request: bool) -> Result<BodyFraming, ReadError> {
    let transfer_encoding = header_value(headers, "transfer-encoding");
    let content_lengths: Vec<&str> = headers
        .iter()
        .filter(|(key, _)| key == "content-length")
        .map(|(_, value)| value.as_str())
        .collect();
    if let Some(encoding) = transfer_encoding {
        if !content_lengths.is_empty() {
            return Err(ReadError::Malformed(
                "both Transfer-Encoding and Content-Length are present".into(),
            ));
        }
        let last = encoding.rsplit(',').next().unwrap_or("").trim();
        if !last.eq_ignore_ascii_case("chunked") {
            return Err(ReadError::Malformed(format!(
                "unsupported Transfer-Encoding {encoding:?} (only chunked)"
            )));
        }
        return Ok(BodyFraming::Chunked);
    }
    match content_lengths.as_slice() {
        [] if is_request => Ok(BodyFraming::None),
        [] => Ok(BodyFraming::UntilClose),
        [first, rest @ ..] => {
            if rest.iter().any(|other| other != first) {
                return Err(ReadError::Malformed(
                    "conflicting Content-Length headers".into(),
                ));
            }
            first
                .parse::<usize>()
                .map(BodyFraming::Length)
                .map_err(|_| ReadError::Malformed(format!("bad Content-Length {first:?}")))
        }
    }
}

/// Reads a body delimited by `framing`, refusing to go past `limit` bytes.
fn read_body<R: Read>(
    reader: &mut R,
    framing: BodyFraming,
    limit: usize,
) -> Result<Vec<u8>, ReadError> {
    match framing {
        BodyFraming::None => Ok(Vec::new()),
        BodyFraming::Length(length) => {
            if length > limit {
                return Err(ReadError::BodyTooLarge { limit });
            }
            let mut body = vec![0u8; length];
            read_exact_or_eof(reader, &mut body)?;
            Ok(body)
        }
        BodyFraming::UntilClose => {
            let mut body = Vec::new();
            let read = reader
                .take(limit as u64 + 1)
                .read_to_end(&mut body)
                .map_err(ReadError::Io)?;
            if read > limit {
                return Err(ReadError::BodyTooLarge { limit });
            }
            Ok(body)
        }
        BodyFraming::Chunked => read_chunked(reader, limit),
    }
}

fn read_exact_or_eof<R: Read>(reader: &mut R, buffer: &mut [u8]) -> Result<(), ReadError> {
    reader.read_exact(buffer).map_err(|error| {
        if error.kind() == io::ErrorKind::UnexpectedEof {
            ReadError::UnexpectedEof
        } else {
            ReadError::Io(error)
        }
    })
}

/// One CRLF-terminated line of a chunked body (chunk size line or trailer), at most 4 KiB.
fn read_line<R: Read>(reader: &mut R) -> Result<Vec<u8>, ReadError> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        read_exact_or_eof(reader, &mut byte)?;
        line.push(byte[0]);
        if line.ends_with(b"\r\n") {
            line.truncate(line.len() - 2);
            return Ok(line);
        }
        if line.len() > 4096 {
            return Err(ReadError::Malformed(
                "chunk line longer than 4096 bytes".into(),
            ));
        }
    }
}

fn read_chunked<R: Read>(reader: &mut R, limit: usize) -> Result<Vec<u8>, ReadError> {
    let mut body = Vec::new();
    loop {
        let line = read_line(reader)?;
        // Chunk extensions (`;name=value`) are allowed and ignored.
        let size_text = line.split(|byte| *byte == b';').next().unwrap_or(&[]);
        let size_text = std::str::from_utf8(size_text)
            .map_err(|_| ReadError::Malformed("chunk size is not ASCII".into()))?
            .trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| ReadError::Malformed(format!("bad chunk size {size_text:?}")))?;
        if size == 0 {
            // Trailers, up to the empty line.
            while !read_line(reader)?.is_empty() {}
            return Ok(body);
        }
        if body.len().saturating_add(size) > limit {
            return Err(ReadError::BodyTooLarge { limit });
        }
        let start = body.len();
        body.resize(start + size, 0);
        read_exact_or_eof(reader, &mut body[start..])?;
        let mut crlf = [0u8; 2];
        read_exact_or_eof(reader, &mut crlf)?;
        if &crlf != b"\r\n" {
            return Err(ReadError::Malformed("chunk not followed by CRLF".into()));
        }
    }
}

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

/// A response body read as it arrives (the CLI's side of a streamed response).
pub struct BodyStream<R: Read> {
    leftover: Vec<u8>,
    position: usize,
    inner: R,
    framing: BodyFraming,
    /// Bytes left in the current chunk (chunked) or in the body (`Content-Length`).
    remaining: usize,
    finished: bool,
}

impl<R: Read> BodyStream<R> {
    /// The connection under the body.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    fn read_raw(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.position < self.leftover.len() {
            let available = &self.leftover[self.position..];
            let count = available.len().min(buf.len());
            buf[..count].copy_from_slice(&available[..count]);
            self.position += count;
            return Ok(count);
        }
        self.inner.read(buf)
    }

    fn raw_line(&mut self) -> io::Result<Vec<u8>> {
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        loop {
            if self.read_raw(&mut byte)? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed in the middle of a chunked body",
                ));
            }
            line.push(byte[0]);
            if line.ends_with(b"\r\n") {
                line.truncate(line.len() - 2);
                return Ok(line);
            }
            if line.len() > 4096 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "chunk line longer than 4096 bytes",
                ));
            }
        }
    }
}

impl<R: Read> Read for BodyStream<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.finished || buf.is_empty() {
            return Ok(0);
        }
        match self.framing {
            BodyFraming::None => Ok(0),
            BodyFraming::UntilClose => self.read_raw(buf),
            BodyFraming::Length(_) => {
                if self.remaining == 0 {
                    self.finished = true;
                    return Ok(0);
                }
                let limit = self.remaining.min(buf.len());
                let count = self.read_raw(&mut buf[..limit])?;
                if count == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed in the middle of the body",
                    ));
                }
                self.remaining -= count;
                Ok(count)
            }
            BodyFraming::Chunked => {
                if self.remaining == 0 {
                    let line = self.raw_line()?;
                    let size_text = line.split(|byte| *byte == b';').next().unwrap_or(&[]);
                    let size = std::str::from_utf8(size_text)
                        .ok()
                        .and_then(|text| usize::from_str_radix(text.trim(), 16).ok())
                        .ok_or_else(|| {
                            io::Error::new(io::ErrorKind::InvalidData, "bad chunk size")
                        })?;
                    if size == 0 {
                        while !self.raw_line()?.is_empty() {}
                        self.finished = true;
                        return Ok(0);
                    }
                    self.remaining = size;
                }
                let limit = self.remaining.min(buf.len());
                let count = self.read_raw(&mut buf[..limit])?;
                if count == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed in the middle of a chunk",
                    ));
                }
                self.remaining -= count;
                if self.remaining == 0 && self.raw_line()? != b"" {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "chunk not followed by CRLF",
                    ));
                }
                Ok(count)
            }
        }
    }
}

/// A response whose head was read; the body is read as it arrives.
pub struct OpenedResponse<R: Read> {
    pub status: u16,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: BodyStream<R>,
}

/// Reads a response's head (skipping interim `1xx` responses) and returns its status and
/// headers, with the body left to be read as it arrives.
pub fn open_response<R: Read>(mut stream: R) -> Result<OpenedResponse<R>, ReadError> {
    let FinalHead {
        status,
        headers,
        framing,
        rest,
    } = read_final_head(&mut stream)?;
    let remaining = match framing {
        BodyFraming::Length(length) => length,
        _ => 0,
    };
    let body = BodyStream {
        leftover: rest,
        position: 0,
        inner: stream,
        framing,
        remaining,
        finished: false,
    };
    Ok(OpenedResponse {
        status,
        headers,
        body,
    })
}

/// A response's head after any interim `1xx` responses.
struct FinalHead {
    status: u16,
    /// Header names in lower case.
    headers: Vec<(String, String)>,
    framing: BodyFraming,
    /// The bytes read past the head: the body's first bytes.
    rest: Vec<u8>,
}

/// Reads a response's head, skipping interim `1xx` responses.
fn read_final_head<R: Read>(stream: &mut R) -> Result<FinalHead, ReadError> {
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let (head, rest) = {
            let mut chained = Buffered {
                leftover: std::mem::take(&mut pending),
                position: 0,
                inner: &mut *stream,
            };
            read_head(&mut chained)?
        };
        let mut header_storage = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Response::new(&mut header_storage);
        match parsed.parse(&head) {
            Ok(httparse::Status::Complete(_)) => {}
            Ok(httparse::Status::Partial) => {
                return Err(ReadError::Malformed("incomplete response head".into()))
            }
            Err(error) => return Err(ReadError::Malformed(error.to_string())),
        }
        let status = parsed.code.unwrap_or(0);
        let headers = lower_headers(parsed.headers);
        if (100..200).contains(&status) {
            pending = rest;
            continue;
        }
        let framing = if status == 204 || status == 304 {
            BodyFraming::None
        } else {
            body_framing(&headers, false)?
        };
        return Ok(FinalHead {
            status,
            headers,
            framing,
            rest,
        });
    }
}

/// Writes a request with a `Content-Length` body and `Connection: close` (the CLI's side).
pub fn write_request<W: Write>(
    stream: &mut W,
    method: &str,
    target: &str,
    body: Option<&[u8]>,
) -> io::Result<()> {
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: deckhand\r\nConnection: close\r\n");
    if let Some(body) = body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    let mut message = head.into_bytes();
    if let Some(body) = body {
        message.extend_from_slice(body);
    }
    stream.write_all(&message)?;
    stream.flush()
}

/// Reads one response (the CLI's side), skipping interim `1xx` responses.
pub fn read_response<R: Read>(
    stream: &mut R,
    body_limit: usize,
) -> Result<HttpResponse, ReadError> {
    let FinalHead {
        status,
        headers,
        framing,
        rest,
    } = read_final_head(stream)?;
    let mut reader = Buffered {
        leftover: rest,
        position: 0,
        inner: stream,
    };
    let body = read_body(&mut reader, framing, body_limit)?;
    Ok(HttpResponse {
        status,
        headers,
        body,
        stream: None,
    })
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
mod tests {
    use super::*;
    use std::io::{BufReader, Cursor};
    use std::os::unix::net::UnixStream;
    use std::thread;

    /// A `Read + Write` over fixed input that hands out at most `step` bytes per read, to prove
    /// the framing does not depend on how the bytes are split.
    struct SplitReads {
        input: Cursor<Vec<u8>>,
        step: usize,
        written: Vec<u8>,
    }

    impl Read for SplitReads {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let limit = buf.len().min(self.step);
            self.input.read(&mut buf[..limit])
        }
    }

    impl Write for SplitReads {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.written.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn split(input: &[u8], step: usize) -> SplitReads {
        SplitReads {
            input: Cursor::new(input.to_vec()),
            step,
            written: Vec::new(),
        }
    }

    #[test]
    fn request_with_content_length_reads_the_same_at_every_split() {
        let raw = b"POST /v1/tasks?wait=5&since=2 HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n{\"a\": true}";
        for step in [1, 2, 3, 7, 64, 4096] {
            let request = read_request(&mut split(raw, step), 1024).expect("valid request");
            assert_eq!(request.method, "POST", "step {step}");
            assert_eq!(request.path, "/v1/tasks");
            assert_eq!(request.query, "wait=5&since=2");
            assert_eq!(request.body, b"{\"a\": true}");
            assert_eq!(request.header("host"), Some("x"));
        }
    }

    #[test]
    fn chunked_body_with_extensions_and_trailers() {
        let raw = b"POST /v1/tasks HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nabcd\r\n3\r\nefg\r\n0\r\nX-Trailer: yes\r\n\r\n";
        for step in [1, 5, 4096] {
            let request = read_request(&mut split(raw, step), 1024).expect("valid chunked");
            assert_eq!(request.body, b"abcdefg", "step {step}");
        }
    }

    #[test]
    fn oversized_content_length_is_refused_without_reading_the_body() {
        // The announced body is never sent: the refusal must not wait for it.
        let raw = b"POST /v1/tasks HTTP/1.1\r\nContent-Length: 2097152\r\n\r\n";
        let error = read_request(&mut split(raw, 4096), MAX_REQUEST_BODY_BYTES).unwrap_err();
        assert!(
            matches!(error, ReadError::BodyTooLarge { limit } if limit == MAX_REQUEST_BODY_BYTES)
        );
        assert_eq!(error.response_status(), Some(413));
        // A content length that does not even fit in memory is refused the same way.
        let raw = b"POST / HTTP/1.1\r\nContent-Length: 99999999999999\r\n\r\n";
        let error = read_request(&mut split(raw, 4096), 1024).unwrap_err();
        assert_eq!(error.response_status(), Some(413));
    }

    #[test]
    fn oversized_chunked_body_is_refused_once_past_the_limit() {
        let raw = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n";
        let error = read_request(&mut split(raw, 4096), 1024).unwrap_err();
        assert_eq!(error.response_status(), Some(413));
    }

    #[test]
    fn oversized_head_is_refused() {
        let mut raw = b"GET / HTTP/1.1\r\nX-Long: ".to_vec();
        raw.extend(std::iter::repeat_n(b'a', MAX_HEAD_BYTES + 10));
        raw.extend_from_slice(b"\r\n\r\n");
        let error = read_request(&mut split(&raw, 4096), 1024).unwrap_err();
        assert!(matches!(error, ReadError::HeadTooLarge), "{error}");
        assert_eq!(error.response_status(), Some(431));
    }

    #[test]
    fn malformed_and_contradictory_requests_are_told_apart() {
        let cases: [(&[u8], &str); 5] = [
            (b"NOT HTTP AT ALL\r\n\r\n", "malformed"),
            (
                b"POST / HTTP/1.1\r\nContent-Length: ten\r\n\r\n",
                "Content-Length",
            ),
            (
                b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                "both",
            ),
            (
                b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
                "unsupported",
            ),
            (
                b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                "conflicting",
            ),
        ];
        for (raw, expected) in cases {
            let error = read_request(&mut split(raw, 4096), 1024).unwrap_err();
            assert_eq!(error.response_status(), Some(400), "{error}");
            assert!(
                error.to_string().contains(expected),
                "{error} lacks {expected}"
            );
        }
    }

    #[test]
    fn peer_closing_mid_body_is_an_error_not_a_hang() {
        let (mut client, mut server) = UnixStream::pair().expect("socketpair");
        let writer = thread::spawn(move || {
            client
                .write_all(b"POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\nonly a little")
                .expect("write");
            // Dropping `client` closes the connection mid-body.
        });
        writer.join().expect("writer thread");
        let error = read_request(&mut server, 1024).unwrap_err();
        assert!(matches!(error, ReadError::UnexpectedEof), "{error}");
        assert_eq!(error.response_status(), None);
    }

    #[test]
    fn closed_before_any_byte_is_told_apart() {
        let error = read_request(&mut split(b"", 10), 1024).unwrap_err();
        assert!(matches!(error, ReadError::ClosedBeforeRequest));
        let error = read_request(&mut split(b"GET / HT", 10), 1024).unwrap_err();
        assert!(matches!(error, ReadError::UnexpectedEof));
    }

    #[test]
    fn expect_continue_gets_an_interim_response_before_the_body() {
        let (mut client, mut server) = UnixStream::pair().expect("socketpair");
        let reader = thread::spawn(move || read_request(&mut server, 1024));
        client
            .write_all(b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
            .expect("write head");
        let mut interim = [0u8; 25];
        client.read_exact(&mut interim).expect("100 Continue");
        assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
        client.write_all(b"{}").expect("write body");
        let request = reader.join().expect("reader").expect("request");
        assert_eq!(request.body, b"{}");
    }

    #[test]
    fn response_round_trip_and_interim_responses_are_skipped() {
        let response = HttpResponse::error(404, "no task abc").with_header("X-Test", "1");
        let mut wire = b"HTTP/1.1 100 Continue\r\n\r\n".to_vec();
        write_response(&mut wire, &response).expect("write");
        for step in [1, 3, 4096] {
            let read = read_response(&mut BufReader::new(split(&wire, step)), 1024).expect("read");
            assert_eq!(read.status, 404);
            assert_eq!(read.header("x-test"), Some("1"));
            let value: serde_json::Value = serde_json::from_slice(&read.body).expect("json");
            assert_eq!(value["error"], "no task abc");
        }
    }

    #[test]
    fn a_streamed_response_reads_back_as_it_arrives() {
        let response = HttpResponse::streaming("text/plain", Box::new(NeverStream));
        let mut wire = b"HTTP/1.1 100 Continue\r\n\r\n".to_vec();
        write_streaming_head(&mut wire, &response).expect("head");
        write_chunk(&mut wire, b"first line\n").expect("chunk");
        write_chunk(&mut wire, b"").expect("an empty chunk writes nothing");
        write_chunk(&mut wire, b"second\n").expect("chunk");
        write_last_chunk(&mut wire).expect("end");
        for step in [1, 2, 5, 4096] {
            let opened = open_response(split(&wire, step)).expect("a response head");
            assert_eq!(opened.status, 200);
            assert_eq!(
                header_value(&opened.headers, "content-type"),
                Some("text/plain")
            );
            let mut body = opened.body;
            let mut text = Vec::new();
            body.read_to_end(&mut text).expect("the whole body");
            assert_eq!(text, b"first line\nsecond\n", "step {step}");
        }
        // Cut before the last chunk: an error, not a quiet end.
        let cut = &wire[..wire.len() - 5];
        let mut body = open_response(split(cut, 7)).expect("head").body;
        let mut text = Vec::new();
        let error = body.read_to_end(&mut text).expect_err("cut");
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
        // A Content-Length body reads the same way, and stops at its length.
        let mut plain = Vec::new();
        write_response(&mut plain, &HttpResponse::error(404, "gone")).expect("write");
        plain.extend_from_slice(b"trailing bytes are not the body");
        let opened = open_response(split(&plain, 3)).expect("head");
        let mut body = opened.body;
        let mut text = Vec::new();
        body.read_to_end(&mut text).expect("body");
        assert_eq!(opened.status, 404);
        assert_eq!(text, b"{\"error\":\"gone\"}\n");
    }

    struct NeverStream;

    impl ResponseStream for NeverStream {
        fn next_event(&mut self, _wait: Duration) -> StreamEvent {
            StreamEvent::End
        }
    }

    #[test]
    fn request_writer_produces_what_the_reader_accepts() {
        let mut wire = Vec::new();
        write_request(&mut wire, "POST", "/v1/tasks", Some(b"{\"family\":\"x\"}")).expect("write");
        let request = read_request(&mut split(&wire, 5), 1024).expect("read");
        assert_eq!(request.method, "POST");
        assert_eq!(request.body, b"{\"family\":\"x\"}");
    }

    #[test]
    fn percent_coding_round_trips_an_arn() {
        let arn = "arn:aws:ecs:local:000000000000:task/default/0123abcd";
        let encoded = percent_encode(arn);
        assert!(!encoded.contains('/') && !encoded.contains(':'));
        assert_eq!(percent_decode(&encoded), arn);
        let request = HttpRequest {
            method: "GET".into(),
            path: format!("/v1/tasks/{encoded}"),
            query: "dockerid=abc&taskarn=a%3Ab+c".into(),
            headers: Vec::new(),
            body: Vec::new(),
        };
        assert_eq!(request.path_segments(), vec!["v1", "tasks", arn]);
        let with_path = |path: &str| HttpRequest {
            path: path.into(),
            ..request.clone()
        };
        assert_eq!(with_path("/v1/tasks/").path_segments(), vec!["v1", "tasks"]);
        assert_eq!(
            with_path("/v1/tasks//stop").path_segments(),
            vec!["v1", "tasks", "", "stop"]
        );
        assert!(with_path("/").path_segments().is_empty());
        assert_eq!(
            request.query_pairs(),
            vec![
                ("dockerid".to_string(), "abc".to_string()),
                ("taskarn".to_string(), "a:b c".to_string())
            ]
        );
        // Broken escapes are kept, not dropped.
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }
}
