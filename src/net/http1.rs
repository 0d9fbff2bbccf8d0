//! HTTP/1.1 client framing shared by deckhand's clients (the Docker Engine over its Unix socket,
//! Amazon ECS over TCP or TLS): the request writer, the response head (parsed by `httparse`,
//! with a size limit), the body decoders (`Content-Length`, `chunked`, read-to-EOF) and the line
//! reader used for newline-delimited JSON streams.
//!
//! Everything here is generic over `Read`/`Write` and owns no socket, so the framing is tested by
//! pushing bytes through `UnixStream::pair()`. Errors are `io::Error`s whose kind says what went
//! wrong (`InvalidData` for bytes that are not HTTP, `UnexpectedEof` for a peer that closed early,
//! `TimedOut` from the transport); each client turns them into its own errors.

use std::io::{self, BufRead, Read, Write};

/// A response head larger than this is refused: Docker's and ECS's heads are a few hundred bytes.
pub const MAX_RESPONSE_HEAD_BYTES: usize = 64 * 1024;
/// Most headers a response head may carry.
pub const MAX_RESPONSE_HEADERS: usize = 64;
/// A chunk-size line (size plus extensions) or trailer line longer than this is refused.
pub const MAX_CHUNK_LINE_BYTES: usize = 4 * 1024;
/// One JSON line of a stream (pull progress, events) longer than this is refused.
pub const MAX_STREAM_LINE_BYTES: usize = 1024 * 1024;
/// A whole (non-streamed) response body larger than this is refused.
pub const MAX_BODY_BYTES: u64 = 64 * 1024 * 1024;

/// One request. The writer adds `Host`, `User-Agent`, `Content-Length` and `Connection: close`;
/// each request uses its own connection, which keeps framing simple.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request<'a> {
    pub method: &'a str,
    /// The `Host` header's value: `docker` for the Docker Engine, `host[:port]` for ECS.
    pub host: &'a str,
    /// Path and query string, already percent-encoded.
    pub target: String,
    pub headers: Vec<(&'a str, String)>,
    /// `(content type, bytes)`.
    pub body: Option<(&'a str, &'a [u8])>,
}

/// Writes `request` in HTTP/1.1 form.
pub fn write_request<W: Write>(writer: &mut W, request: &Request<'_>) -> io::Result<()> {
    let mut head = format!(
        "{} {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: deckhand/{}\r\nConnection: close\r\n",
        request.method,
        request.target,
        request.host,
        crate::VERSION
    );
    if [request.method, &request.target, request.host]
        .iter()
        .any(|part| part.contains(['\r', '\n', ' ']))
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "request line or host contains a space or a line break",
        ));
    }
    for (name, value) in &request.headers {
        if value.contains(['\r', '\n']) || name.contains(['\r', '\n', ':']) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("header {name:?} contains a line break"),
            ));
        }
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    match request.body {
        Some((content_type, bytes)) => {
            head.push_str(&format!(
                "Content-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
                bytes.len()
            ));
            writer.write_all(head.as_bytes())?;
            writer.write_all(bytes)?;
        }
        None => {
            // POST without a body still says so, or some servers wait for one.
            if request.method != "GET" && request.method != "HEAD" {
                head.push_str("Content-Length: 0\r\n");
            }
            head.push_str("\r\n");
            writer.write_all(head.as_bytes())?;
        }
    }
    writer.flush()
}

/// Status line and headers of a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    pub reason: String,
    /// Names as sent; look them up with [`ResponseHead::header`].
    pub headers: Vec<(String, String)>,
}

impl ResponseHead {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(header_name, _)| header_name.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// How the body that follows this head is delimited (RFC 9112 §6.3, for responses).
    pub fn body_framing(&self, request_method: &str) -> io::Result<BodyFraming> {
        if request_method == "HEAD"
            || (100..200).contains(&self.status)
            || self.status == 204
            || self.status == 304
        {
            return Ok(BodyFraming::Empty);
        }
        if let Some(transfer_encoding) = self.header("Transfer-Encoding") {
            let last_coding = transfer_encoding
                .rsplit(',')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            return if last_coding == "chunked" {
                Ok(BodyFraming::Chunked)
            } else {
                // Not chunked last: the body runs to the end of the connection.
                Ok(BodyFraming::UntilEof)
            };
        }
        let mut length: Option<u64> = None;
        for (name, value) in &self.headers {
            if !name.eq_ignore_ascii_case("Content-Length") {
                continue;
            }
            let parsed: u64 = value
                .trim()
                .parse()
                .map_err(|_| invalid_data(format!("Content-Length {value:?} is not a number")))?;
            if length.is_some_and(|earlier| earlier != parsed) {
                return Err(invalid_data("conflicting Content-Length headers".into()));
            }
            length = Some(parsed);
        }
        Ok(match length {
            Some(length) => BodyFraming::Length(length),
            None => BodyFraming::UntilEof,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    Empty,
    Length(u64),
    Chunked,
    UntilEof,
}

fn invalid_data(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

fn closed_early(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, message.to_string())
}

/// Reads one line (through `\n`) into `line`, refusing lines longer than `max` bytes. Returns
/// `false` at a clean end of input (nothing read). A last line without `\n` is returned as is.
pub fn read_line_limited<R: BufRead>(
    reader: &mut R,
    max: usize,
    line: &mut Vec<u8>,
) -> io::Result<bool> {
    line.clear();
    let read = reader.take(max as u64 + 1).read_until(b'\n', line)?;
    if read == 0 {
        return Ok(false);
    }
    if line.len() > max && line.last() != Some(&b'\n') {
        return Err(invalid_data(format!("line longer than {max} bytes")));
    }
    Ok(true)
}

/// Reads and parses a response head, refusing one longer than `max_bytes`.
pub fn read_response_head<R: BufRead>(
    reader: &mut R,
    max_bytes: usize,
) -> io::Result<ResponseHead> {
    let mut head: Vec<u8> = Vec::with_capacity(512);
    let mut line = Vec::with_capacity(128);
    loop {
        let remaining = max_bytes.saturating_sub(head.len());
        if remaining == 0 {
            return Err(invalid_data(format!(
                "response head is larger than {max_bytes} bytes"
            )));
        }
        let got_line = match read_line_limited(reader, remaining, &mut line) {
            Ok(got_line) => got_line,
            Err(error) if error.kind() == io::ErrorKind::InvalidData => {
                return Err(invalid_data(format!(
                    "response head is larger than {max_bytes} bytes"
                )))
            }
            Err(error) => return Err(error),
        };
        if !got_line || line.last() != Some(&b'\n') {
            return Err(if head.is_empty() && line.is_empty() {
                closed_early("connection closed before any response")
            } else {
                closed_early("connection closed in the middle of the response head")
            });
        }
        head.extend_from_slice(&line);
        let blank = line == b"\r\n" || line == b"\n";
        if blank && head.len() > line.len() {
            break;
        }
        if blank {
            // Stray empty line before the status line: tolerated (RFC 9112 §2.2).
            head.clear();
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(&head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => {
            return Err(invalid_data("incomplete response head".into()));
        }
        Err(error) => {
            return Err(invalid_data(format!("malformed response head: {error}")));
        }
    }
    let status = response
        .code
        .ok_or_else(|| invalid_data("response head without a status code".into()))?;
    let reason = response.reason.unwrap_or("").to_string();
    let headers = response
        .headers
        .iter()
        .map(|header| {
            (
                header.name.to_string(),
                String::from_utf8_lossy(header.value).trim().to_string(),
            )
        })
        .collect();
    Ok(ResponseHead {
        status,
        reason,
        headers,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyState {
    /// Bytes left of a `Content-Length` body.
    Length(u64),
    /// Expecting a chunk-size line.
    ChunkSize,
    /// Bytes left of the current chunk.
    ChunkData(u64),
    /// Expecting the CRLF that ends a chunk's data.
    ChunkEnd,
    UntilEof,
    Done,
}

/// The decoded body of a response, as a `Read`. It returns `Ok(0)` only at the body's real end;
/// a peer that closes early gives `UnexpectedEof`, bad framing gives `InvalidData`.
#[derive(Debug)]
pub struct BodyReader<R> {
    inner: R,
    state: BodyState,
}

impl<R: BufRead> BodyReader<R> {
    pub fn new(inner: R, framing: BodyFraming) -> BodyReader<R> {
        let state = match framing {
            BodyFraming::Empty | BodyFraming::Length(0) => BodyState::Done,
            BodyFraming::Length(length) => BodyState::Length(length),
            BodyFraming::Chunked => BodyState::ChunkSize,
            BodyFraming::UntilEof => BodyState::UntilEof,
        };
        BodyReader { inner, state }
    }

    /// The transport underneath (to reach the socket, for example).
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }

    /// Reads the rest of the body, refusing more than `max` bytes.
    pub fn read_to_end_limited(&mut self, max: u64) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        let read = self.by_ref().take(max + 1).read_to_end(&mut body)?;
        if read as u64 > max {
            return Err(invalid_data(format!(
                "response body is larger than {max} bytes"
            )));
        }
        Ok(body)
    }

    fn read_chunk_size(&mut self) -> io::Result<()> {
        let mut line = Vec::new();
        if !read_line_limited(&mut self.inner, MAX_CHUNK_LINE_BYTES, &mut line)?
            || line.last() != Some(&b'\n')
        {
            return Err(closed_early("connection closed before a chunk size"));
        }
        let text = std::str::from_utf8(&line)
            .map_err(|_| invalid_data("chunk size line is not text".into()))?;
        // Extensions (`;name=value`) are allowed and ignored.
        let size_text = text.split(';').next().unwrap_or("").trim();
        let not_hexadecimal =
            || invalid_data(format!("chunk size {size_text:?} is not hexadecimal"));
        if size_text.is_empty() || !size_text.bytes().all(|byte| byte.is_ascii_hexdigit()) {
            return Err(not_hexadecimal());
        }
        let size = u64::from_str_radix(size_text, 16).map_err(|_| not_hexadecimal())?;
        if size == 0 {
            self.skip_trailers()?;
            self.state = BodyState::Done;
        } else {
            self.state = BodyState::ChunkData(size);
        }
        Ok(())
    }

    fn skip_trailers(&mut self) -> io::Result<()> {
        let mut line = Vec::new();
        loop {
            if !read_line_limited(&mut self.inner, MAX_CHUNK_LINE_BYTES, &mut line)?
                || line.last() != Some(&b'\n')
            {
                return Err(closed_early("connection closed in the chunked trailers"));
            }
            if line == b"\r\n" || line == b"\n" {
                return Ok(());
            }
        }
    }

    fn read_chunk_end(&mut self) -> io::Result<()> {
        let mut line = Vec::new();
        if !read_line_limited(&mut self.inner, MAX_CHUNK_LINE_BYTES, &mut line)?
            || line.last() != Some(&b'\n')
        {
            return Err(closed_early("connection closed at the end of a chunk"));
        }
        if line != b"\r\n" && line != b"\n" {
            return Err(invalid_data("chunk data longer than its size".into()));
        }
        self.state = BodyState::ChunkSize;
        Ok(())
    }
}

impl<R: BufRead> Read for BodyReader<R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        if buffer.is_empty() {
            return Ok(0);
        }
        loop {
            match self.state {
                BodyState::Done => return Ok(0),
                BodyState::UntilEof => return self.inner.read(buffer),
                BodyState::Length(remaining) => {
                    let wanted = buffer
                        .len()
                        .min(usize::try_from(remaining).unwrap_or(usize::MAX));
                    let read = self.inner.read(&mut buffer[..wanted])?;
                    if read == 0 {
                        return Err(closed_early(&format!(
                            "connection closed with {remaining} bytes of the body missing"
                        )));
                    }
                    let left = remaining - read as u64;
                    self.state = if left == 0 {
                        BodyState::Done
                    } else {
                        BodyState::Length(left)
                    };
                    return Ok(read);
                }
                BodyState::ChunkSize => self.read_chunk_size()?,
                BodyState::ChunkEnd => self.read_chunk_end()?,
                BodyState::ChunkData(remaining) => {
                    let wanted = buffer
                        .len()
                        .min(usize::try_from(remaining).unwrap_or(usize::MAX));
                    let read = self.inner.read(&mut buffer[..wanted])?;
                    if read == 0 {
                        return Err(closed_early("connection closed in the middle of a chunk"));
                    }
                    let left = remaining - read as u64;
                    self.state = if left == 0 {
                        BodyState::ChunkEnd
                    } else {
                        BodyState::ChunkData(left)
                    };
                    return Ok(read);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufReader, Cursor};

    fn head_of(bytes: &[u8]) -> io::Result<ResponseHead> {
        read_response_head(&mut Cursor::new(bytes), MAX_RESPONSE_HEAD_BYTES)
    }

    #[test]
    fn request_has_host_length_and_body() {
        let mut written = Vec::new();
        let body = br#"{"Image":"x"}"#;
        write_request(
            &mut written,
            &Request {
                method: "POST",
                host: "docker",
                target: "/v1.41/containers/create?name=a".into(),
                headers: vec![("X-Registry-Auth", "abc".into())],
                body: Some(("application/json", body)),
            },
        )
        .expect("writing to a Vec cannot fail");
        let text = String::from_utf8(written).expect("ascii");
        assert!(text.starts_with("POST /v1.41/containers/create?name=a HTTP/1.1\r\n"));
        assert!(text.contains("\r\nHost: docker\r\n"));
        assert!(text.contains("\r\nX-Registry-Auth: abc\r\n"));
        assert!(text.contains("\r\nContent-Length: 13\r\n\r\n{\"Image\":\"x\"}"));
    }

    #[test]
    fn request_refuses_header_injection() {
        let error = write_request(
            &mut Vec::new(),
            &Request {
                method: "GET",
                host: "docker",
                target: "/_ping".into(),
                headers: vec![("X-Registry-Auth", "a\r\nEvil: 1".into())],
                body: None,
            },
        )
        .expect_err("a line break in a header must be refused");
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn body_framing_follows_status_and_headers() {
        let cases: &[(&[u8], &str, BodyFraming)] = &[
            (
                b"HTTP/1.1 204 No Content\r\n\r\n",
                "POST",
                BodyFraming::Empty,
            ),
            (
                b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
                "POST",
                BodyFraming::Empty,
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
                "HEAD",
                BodyFraming::Empty,
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
                "GET",
                BodyFraming::Length(5),
            ),
            (
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n",
                "GET",
                BodyFraming::Chunked,
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                "GET",
                BodyFraming::UntilEof,
            ),
            (b"HTTP/1.1 200 OK\r\n\r\n", "GET", BodyFraming::UntilEof),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n",
                "GET",
                BodyFraming::Length(3),
            ),
        ];
        for (bytes, method, expected) in cases {
            let head = head_of(bytes).expect("valid head");
            assert_eq!(
                head.body_framing(method).expect("valid framing"),
                *expected,
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn bad_content_length_is_refused() {
        for bytes in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n"[..],
            &b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n"[..],
        ] {
            let head = head_of(bytes).expect("valid head");
            let error = head.body_framing("GET").expect_err("must be refused");
            assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        }
    }

    #[test]
    fn head_parses_status_reason_and_headers() {
        let head = head_of(b"HTTP/1.1 404 Not Found\r\nApi-Version: 1.41\r\nX: y\r\n\r\nbody")
            .expect("valid head");
        assert_eq!(head.status, 404);
        assert_eq!(head.reason, "Not Found");
        assert_eq!(head.header("API-VERSION"), Some("1.41"));
        assert_eq!(head.header("missing"), None);
    }

    #[test]
    fn malformed_or_truncated_heads_are_errors() {
        let cases: &[(&[u8], io::ErrorKind)] = &[
            (b"", io::ErrorKind::UnexpectedEof),
            (
                b"HTTP/1.1 200 OK\r\nContent-Le",
                io::ErrorKind::UnexpectedEof,
            ),
            (b"SMTP ready\r\n\r\n", io::ErrorKind::InvalidData),
            (b"HTTP/1.1 2x0 OK\r\n\r\n", io::ErrorKind::InvalidData),
        ];
        for (bytes, kind) in cases {
            let error = head_of(bytes).expect_err("must fail");
            assert_eq!(error.kind(), *kind, "{}", String::from_utf8_lossy(bytes));
        }
    }

    #[test]
    fn chunked_body_decodes_with_extensions_and_trailers() {
        let wire = b"4;name=value\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0;last\r\nExpires: never\r\nX: 1\r\n\r\nNEXT";
        let mut reader = Cursor::new(&wire[..]);
        let mut body = BodyReader::new(&mut reader, BodyFraming::Chunked);
        let decoded = body.read_to_end_limited(1024).expect("valid chunked body");
        assert_eq!(decoded, b"Wikipedia in\r\n\r\nchunks.");
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).expect("cursor");
        assert_eq!(
            rest, b"NEXT",
            "the decoder must stop right after the trailers"
        );
    }

    #[test]
    fn chunked_body_errors() {
        let cases: &[(&[u8], io::ErrorKind)] = &[
            (b"zz\r\nab\r\n0\r\n\r\n", io::ErrorKind::InvalidData),
            (b"+2\r\nab\r\n0\r\n\r\n", io::ErrorKind::InvalidData),
            (b"\r\nab\r\n0\r\n\r\n", io::ErrorKind::InvalidData),
            (b"10000000000000000\r\n", io::ErrorKind::InvalidData),
            (b"2\r\nabc\r\n0\r\n\r\n", io::ErrorKind::InvalidData),
            (b"5\r\nab", io::ErrorKind::UnexpectedEof),
            (b"2\r\nab\r\n", io::ErrorKind::UnexpectedEof),
            (b"0\r\nTrailer: x\r\n", io::ErrorKind::UnexpectedEof),
        ];
        for (wire, kind) in cases {
            let mut body = BodyReader::new(Cursor::new(*wire), BodyFraming::Chunked);
            let error = body.read_to_end_limited(1024).expect_err("must fail");
            assert_eq!(error.kind(), *kind, "{}", String::from_utf8_lossy(wire));
        }
    }

    #[test]
    fn length_body_stops_at_length_and_detects_truncation() {
        let mut body = BodyReader::new(Cursor::new(&b"hello world"[..]), BodyFraming::Length(5));
        assert_eq!(body.read_to_end_limited(100).expect("complete"), b"hello");
        let mut short = BodyReader::new(Cursor::new(&b"hel"[..]), BodyFraming::Length(5));
        let error = short.read_to_end_limited(100).expect_err("truncated");
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
        let mut big = BodyReader::new(Cursor::new(&b"hello"[..]), BodyFraming::UntilEof);
        let error = big.read_to_end_limited(4).expect_err("over the limit");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    }

    /// xorshift64: a deterministic generator, so a failing case can be replayed by its seed.
    struct Xorshift(u64);

    impl Xorshift {
        fn below(&mut self, bound: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % bound as u64) as usize
        }
    }

    /// Returns reads of random sizes from a byte slice.
    struct RandomReads<'a> {
        bytes: &'a [u8],
        random: Xorshift,
    }

    impl Read for RandomReads<'_> {
        fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
            let size = (1 + self.random.below(16))
                .min(buffer.len())
                .min(self.bytes.len());
            buffer[..size].copy_from_slice(&self.bytes[..size]);
            self.bytes = &self.bytes[size..];
            Ok(size)
        }
    }

    #[test]
    fn random_chunkings_and_read_splits_decode_to_the_same_body() {
        let mut random = Xorshift(0x5eed_dec4_a11d_0001);
        for case in 0..500 {
            let body: Vec<u8> = (0..random.below(300))
                .map(|_| random.below(256) as u8)
                .collect();
            let mut wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            let mut rest = &body[..];
            while !rest.is_empty() {
                let size = (1 + random.below(40)).min(rest.len());
                let extension = if random.below(3) == 0 { ";x=\"y\"" } else { "" };
                wire.extend_from_slice(format!("{size:X}{extension}\r\n").as_bytes());
                wire.extend_from_slice(&rest[..size]);
                wire.extend_from_slice(b"\r\n");
                rest = &rest[size..];
            }
            wire.extend_from_slice(b"0\r\n");
            for trailer in 0..random.below(3) {
                wire.extend_from_slice(format!("T{trailer}: v\r\n").as_bytes());
            }
            wire.extend_from_slice(b"\r\n");
            let mut reader = BufReader::with_capacity(
                1 + random.below(8),
                RandomReads {
                    bytes: &wire,
                    random: Xorshift(case + 1),
                },
            );
            let head = read_response_head(&mut reader, MAX_RESPONSE_HEAD_BYTES).expect("head");
            let framing = head.body_framing("GET").expect("framing");
            let decoded = BodyReader::new(reader, framing)
                .read_to_end_limited(4096)
                .unwrap_or_else(|error| panic!("case {case}: {error}"));
            assert_eq!(decoded, body, "case {case}");
        }
    }

    #[test]
    fn mutated_responses_never_panic() {
        let valid: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
5;a=b\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nT: v\r\n\r\n";
        let noise = b"\r\n:;0123456789abcdefHTTP/ \xff";
        let mut random = Xorshift(0x0bad_f00d_0000_0001);
        let (mut decoded, mut refused) = (0, 0);
        for _ in 0..3000 {
            let mut bytes = valid.to_vec();
            for _ in 0..random.below(4) {
                let at = random.below(bytes.len());
                match random.below(4) {
                    0 => bytes[at] = noise[random.below(noise.len())],
                    1 => bytes.insert(at, noise[random.below(noise.len())]),
                    2 => {
                        bytes.remove(at);
                    }
                    _ => bytes.truncate(at),
                }
                if bytes.is_empty() {
                    break;
                }
            }
            let mut reader = Cursor::new(&bytes[..]);
            let outcome = read_response_head(&mut reader, 256).and_then(|head| {
                let framing = head.body_framing("GET")?;
                BodyReader::new(reader, framing).read_to_end_limited(4096)
            });
            match outcome {
                Ok(_) => decoded += 1,
                Err(_) => refused += 1,
            }
        }
        // Both paths ran, so the mutations really exercised the parser.
        assert!(
            decoded > 0 && refused > 0,
            "decoded {decoded}, refused {refused}"
        );
    }

    #[test]
    fn line_reader_limits_length() {
        let mut reader = BufReader::new(Cursor::new(&b"short\nthis line is long\nend"[..]));
        let mut line = Vec::new();
        assert!(read_line_limited(&mut reader, 8, &mut line).expect("fits"));
        assert_eq!(line, b"short\n");
        let error = read_line_limited(&mut reader, 8, &mut line).expect_err("too long");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        let mut reader = BufReader::new(Cursor::new(&b"end"[..]));
        assert!(read_line_limited(&mut reader, 8, &mut line).expect("last line"));
        assert_eq!(line, b"end");
        assert!(!read_line_limited(&mut reader, 8, &mut line).expect("eof"));
    }
}
