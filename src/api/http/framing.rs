//! Reading a message head and its body: framing (`Content-Length`, chunked, until close),
//! each under a hard limit.

use super::{ReadError, MAX_HEAD_BYTES};
use std::io::{self, Read};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BodyFraming {
    None,
    Length(usize),
    Chunked,
    /// Until the peer closes (responses only).
    UntilClose,
}

/// Bytes read from a stream beyond the head: the start of the body.
pub(super) struct Buffered<'a, R: Read> {
    pub(super) leftover: Vec<u8>,
    pub(super) position: usize,
    pub(super) inner: &'a mut R,
}

impl<R: Read> Read for Buffered<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match replay(&self.leftover, &mut self.position, buf) {
            Some(count) => Ok(count),
            None => self.inner.read(buf),
        }
    }
}

/// Copies into `buf` what is left of `leftover` (the bytes read past a head) from `position`,
/// moving it on; `None` once all of it was replayed (read the stream then).
pub(super) fn replay(leftover: &[u8], position: &mut usize, buf: &mut [u8]) -> Option<usize> {
    let available = leftover.get(*position..).filter(|rest| !rest.is_empty())?;
    let count = available.len().min(buf.len());
    buf.get_mut(..count)?
        .copy_from_slice(available.get(..count)?);
    *position += count;
    Some(count)
}

/// Reads until the blank line that ends a head; returns the head bytes and what followed.
pub(super) fn read_head<R: Read>(stream: &mut R) -> Result<(Vec<u8>, Vec<u8>), ReadError> {
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

pub(super) fn find_head_end(buffer: &[u8], from: usize) -> Option<usize> {
    buffer[from..]
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .map(|position| from + position + 4)
        .filter(|end| *end <= MAX_HEAD_BYTES)
}

pub(super) fn lower_headers(headers: &[httparse::Header<'_>]) -> Vec<(String, String)> {
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

pub(super) fn header_value<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
}

/// Decides the body framing from the headers (RFC 9112 §6.3), refusing contradictions.
pub(super) fn body_framing(
    headers: &[(String, String)],
    is_request: bool,
) -> Result<BodyFraming, ReadError> {
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
pub(super) fn read_body<R: Read>(
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

pub(super) fn read_exact_or_eof<R: Read>(
    reader: &mut R,
    buffer: &mut [u8],
) -> Result<(), ReadError> {
    reader.read_exact(buffer).map_err(|error| {
        if error.kind() == io::ErrorKind::UnexpectedEof {
            ReadError::UnexpectedEof
        } else {
            ReadError::Io(error)
        }
    })
}

/// One CRLF-terminated line of a chunked body (chunk size line or trailer), at most 4 KiB.
pub(super) fn read_line<R: Read>(reader: &mut R) -> Result<Vec<u8>, ReadError> {
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

pub(super) fn read_chunked<R: Read>(reader: &mut R, limit: usize) -> Result<Vec<u8>, ReadError> {
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
