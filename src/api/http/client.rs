//! The client side of the framing (the CLI's): writing a request, reading a response whole
//! or as it arrives.

use super::framing::*;
use super::{HttpResponse, ReadError, MAX_HEADERS};
use std::io::{self, Read, Write};

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
        match replay(&self.leftover, &mut self.position, buf) {
            Some(count) => Ok(count),
            None => self.inner.read(buf),
        }
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
