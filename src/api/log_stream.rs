//! Container log streams, as bytes: Docker's multiplexed stdout/stderr framing (decoded from
//! Docker, and written again by the local API so that `deckhand logs` can send each line to the
//! right one of its own stdout and stderr), the splitting of a stream into whole lines, and the
//! `NAME | ` prefix that `deckhand logs` puts before each line when it shows several containers.
//!
//! Docker's framing (a container without a TTY): each frame is an 8-byte header — the stream
//! (0 stdin, 1 stdout, 2 stderr), three zero bytes, the payload length as a big-endian `u32` —
//! then the payload. A TTY container's log is the raw terminal output, with no framing and no
//! way to tell stderr from stdout: all of it is stdout.
//!
//! Everything here is pure and works on whatever pieces the socket hands out: a header split
//! over two reads, a payload split over many. Nothing is allocated from an announced length (a
//! frame claiming 4 GiB is read piece by piece as it arrives), and no line grows past
//! [`MAX_LINE_BYTES`]: a longer one is cut into pieces of that size.

use std::fmt;

/// The longest piece of one line that is kept before it is passed on as if it ended.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;
/// Length of a frame header.
pub const FRAME_HEADER_BYTES: usize = 8;
/// The media type of a multiplexed stream (Docker's own name for it).
pub const MULTIPLEXED_CONTENT_TYPE: &str = "application/vnd.docker.multiplexed-stream";

/// Which of a container's output streams bytes came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OutputStream {
    Stdout,
    Stderr,
}

impl OutputStream {
    /// The stream byte of a frame header.
    pub fn frame_byte(self) -> u8 {
        match self {
            OutputStream::Stdout => 1,
            OutputStream::Stderr => 2,
        }
    }
}

/// A multiplexed stream that is not one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// A header whose stream byte is not 0, 1 or 2, or whose padding is not zero: these bytes
    /// are not Docker's framing (perhaps a TTY container's raw output).
    BadHeader { header: [u8; FRAME_HEADER_BYTES] },
    /// The stream ended inside a frame.
    Truncated { missing: usize },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::BadHeader { header } => write!(
                f,
                "the log stream is not multiplexed: bad frame header {header:02x?}"
            ),
            FrameError::Truncated { missing } => write!(
                f,
                "the log stream ended inside a frame ({missing} bytes missing)"
            ),
        }
    }
}

impl std::error::Error for FrameError {}

#[derive(Debug, Clone, PartialEq, Eq)]
enum DecoderState {
    /// Collecting a header (the bytes so far).
    Header(Vec<u8>),
    /// Inside a frame's payload: its stream (`None` for stdin, whose bytes are dropped) and
    /// how many bytes of it are still to come.
    Payload {
        stream: Option<OutputStream>,
        remaining: u64,
    },
    /// A TTY container: everything is stdout.
    Raw,
    /// A bad header was seen; nothing more is decoded.
    Failed,
}

/// Decodes a log stream piece by piece into `(stream, bytes)` pieces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameDecoder {
    state: DecoderState,
}

impl FrameDecoder {
    /// A decoder of Docker's framing, or, for a TTY container (`tty`), of raw output.
    pub fn new(tty: bool) -> FrameDecoder {
        FrameDecoder {
            state: if tty {
                DecoderState::Raw
            } else {
                DecoderState::Header(Vec::with_capacity(FRAME_HEADER_BYTES))
            },
        }
    }

    /// Decodes `bytes`, appending what they carry to `out` (consecutive bytes of one frame may
    /// come out as several pieces). After an error, every call fails again.
    pub fn push(
        &mut self,
        mut bytes: &[u8],
        out: &mut Vec<(OutputStream, Vec<u8>)>,
    ) -> Result<(), FrameError> {
        while !bytes.is_empty() {
            match &mut self.state {
                DecoderState::Raw => {
                    out.push((OutputStream::Stdout, bytes.to_vec()));
                    return Ok(());
                }
                DecoderState::Failed => {
                    return Err(FrameError::BadHeader {
                        header: [0; FRAME_HEADER_BYTES],
                    })
                }
                DecoderState::Header(collected) => {
                    let wanted = FRAME_HEADER_BYTES - collected.len();
                    let taken = wanted.min(bytes.len());
                    collected.extend_from_slice(&bytes[..taken]);
                    bytes = &bytes[taken..];
                    if collected.len() < FRAME_HEADER_BYTES {
                        continue;
                    }
                    let mut header = [0u8; FRAME_HEADER_BYTES];
                    header.copy_from_slice(collected);
                    let stream = match header[0] {
                        0 => None,
                        1 => Some(OutputStream::Stdout),
                        2 => Some(OutputStream::Stderr),
                        _ => {
                            self.state = DecoderState::Failed;
                            return Err(FrameError::BadHeader { header });
                        }
                    };
                    if header[1..4] != [0, 0, 0] {
                        self.state = DecoderState::Failed;
                        return Err(FrameError::BadHeader { header });
                    }
                    let length = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
                    self.state = if length == 0 {
                        DecoderState::Header(Vec::with_capacity(FRAME_HEADER_BYTES))
                    } else {
                        DecoderState::Payload {
                            stream,
                            remaining: u64::from(length),
                        }
                    };
                }
                DecoderState::Payload { stream, remaining } => {
                    let taken = usize::try_from(*remaining)
                        .unwrap_or(usize::MAX)
                        .min(bytes.len());
                    if let Some(stream) = stream {
                        out.push((*stream, bytes[..taken].to_vec()));
                    }
                    bytes = &bytes[taken..];
                    *remaining -= taken as u64;
                    if *remaining == 0 {
                        self.state = DecoderState::Header(Vec::with_capacity(FRAME_HEADER_BYTES));
                    }
                }
            }
        }
        Ok(())
    }

    /// The stream ended: an error when it ended inside a frame.
    pub fn finish(&self) -> Result<(), FrameError> {
        match &self.state {
            DecoderState::Header(collected) if !collected.is_empty() => {
                Err(FrameError::Truncated {
                    missing: FRAME_HEADER_BYTES - collected.len(),
                })
            }
            DecoderState::Payload { remaining, .. } => Err(FrameError::Truncated {
                missing: usize::try_from(*remaining).unwrap_or(usize::MAX),
            }),
            _ => Ok(()),
        }
    }
}

/// Cuts each stream of one container into lines (each keeps its `\n`), so that lines of
/// several containers can be interleaved without tearing one. A line longer than
/// [`MAX_LINE_BYTES`] is passed on in pieces of that size.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineSplitter {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl LineSplitter {
    pub fn new() -> LineSplitter {
        LineSplitter::default()
    }

    fn partial(&mut self, stream: OutputStream) -> &mut Vec<u8> {
        match stream {
            OutputStream::Stdout => &mut self.stdout,
            OutputStream::Stderr => &mut self.stderr,
        }
    }

    /// Adds `bytes` of `stream`; appends each line they complete to `out`.
    pub fn push(
        &mut self,
        stream: OutputStream,
        mut bytes: &[u8],
        out: &mut Vec<(OutputStream, Vec<u8>)>,
    ) {
        let partial = self.partial(stream);
        while !bytes.is_empty() {
            let room = MAX_LINE_BYTES - partial.len();
            match bytes.iter().position(|byte| *byte == b'\n') {
                Some(end) if end < room => {
                    partial.extend_from_slice(&bytes[..=end]);
                    bytes = &bytes[end + 1..];
                    out.push((stream, std::mem::take(partial)));
                }
                _ => {
                    let taken = room.min(bytes.len());
                    partial.extend_from_slice(&bytes[..taken]);
                    bytes = &bytes[taken..];
                    if partial.len() >= MAX_LINE_BYTES {
                        out.push((stream, std::mem::take(partial)));
                    }
                }
            }
        }
    }

    /// The stream ended: whatever is left of an unfinished line, stdout first.
    pub fn finish(&mut self, out: &mut Vec<(OutputStream, Vec<u8>)>) {
        for stream in [OutputStream::Stdout, OutputStream::Stderr] {
            let partial = self.partial(stream);
            if !partial.is_empty() {
                out.push((stream, std::mem::take(partial)));
            }
        }
    }
}

/// `NAME | line`, as `docker compose logs` shows a service's lines; names are padded to
/// `width` so that the bars line up. A piece without its `\n` (the last of a stream, or a cut
/// long line) gets one, so that the next container's line starts on a line of its own.
pub fn prefixed_line(name: &str, width: usize, line: &[u8]) -> Vec<u8> {
    let mut prefixed = format!("{name:<width$} | ").into_bytes();
    prefixed.extend_from_slice(line);
    if !prefixed.ends_with(b"\n") {
        prefixed.push(b'\n');
    }
    prefixed
}

/// One frame of Docker's framing carrying `payload` on `stream`. Payloads longer than a `u32`
/// are split into several frames.
pub fn encode_frames(stream: OutputStream, payload: &[u8]) -> Vec<u8> {
    let mut framed = Vec::with_capacity(payload.len() + FRAME_HEADER_BYTES);
    for piece in payload.chunks(u32::MAX as usize) {
        framed.push(stream.frame_byte());
        framed.extend_from_slice(&[0, 0, 0]);
        framed.extend_from_slice(&(piece.len() as u32).to_be_bytes());
        framed.extend_from_slice(piece);
    }
    framed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(stream: u8, payload: &[u8]) -> Vec<u8> {
        let mut bytes = vec![stream, 0, 0, 0];
        bytes.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        bytes.extend_from_slice(payload);
        bytes
    }

    /// Decodes `bytes` handed out `step` at a time; the pieces of each stream joined.
    fn decode_in_steps(bytes: &[u8], step: usize) -> (Vec<u8>, Vec<u8>, Result<(), FrameError>) {
        let mut decoder = FrameDecoder::new(false);
        let mut pieces = Vec::new();
        for chunk in bytes.chunks(step) {
            if let Err(error) = decoder.push(chunk, &mut pieces) {
                return (Vec::new(), Vec::new(), Err(error));
            }
        }
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        for (stream, piece) in pieces {
            match stream {
                OutputStream::Stdout => stdout.extend(piece),
                OutputStream::Stderr => stderr.extend(piece),
            }
        }
        (stdout, stderr, decoder.finish())
    }

    #[test]
    fn frames_decode_the_same_at_every_split() {
        let mut bytes = frame(1, b"out one\n");
        bytes.extend(frame(2, b"err one\n"));
        bytes.extend(frame(0, b"stdin is dropped"));
        bytes.extend(frame(1, b""));
        bytes.extend(frame(1, b"out two\n"));
        for step in [1, 2, 3, 7, 8, 9, 64, 4096] {
            let (stdout, stderr, end) = decode_in_steps(&bytes, step);
            assert_eq!(stdout, b"out one\nout two\n", "step {step}");
            assert_eq!(stderr, b"err one\n", "step {step}");
            assert_eq!(end, Ok(()), "step {step}");
        }
    }

    #[test]
    fn a_stream_cut_inside_a_frame_is_truncated() {
        // (bytes, missing)
        let whole = frame(1, b"hello\n");
        let table: [(&[u8], usize); 3] = [
            (&whole[..3], 5),
            (&whole[..8], 6),
            (&whole[..whole.len() - 1], 1),
        ];
        for (bytes, missing) in table {
            let (_, _, end) = decode_in_steps(bytes, 2);
            assert_eq!(end, Err(FrameError::Truncated { missing }), "{bytes:?}");
        }
    }

    #[test]
    fn bad_headers_are_refused_and_stay_refused() {
        for header in [
            [3u8, 0, 0, 0, 0, 0, 0, 1],
            [1, 0, 1, 0, 0, 0, 0, 1],
            *b"hello wo",
        ] {
            let mut decoder = FrameDecoder::new(false);
            let mut pieces = Vec::new();
            let error = decoder.push(&header, &mut pieces).unwrap_err();
            assert_eq!(error, FrameError::BadHeader { header });
            assert!(error.to_string().contains("not multiplexed"));
            assert!(decoder.push(b"more", &mut pieces).is_err());
            assert!(pieces.is_empty());
        }
    }

    #[test]
    fn an_oversized_length_allocates_nothing_it_has_not_received() {
        let mut decoder = FrameDecoder::new(false);
        let mut pieces = Vec::new();
        decoder
            .push(
                &[1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, b'a', b'b'],
                &mut pieces,
            )
            .expect("a valid header");
        assert_eq!(pieces, vec![(OutputStream::Stdout, b"ab".to_vec())]);
        assert_eq!(
            decoder.finish(),
            Err(FrameError::Truncated {
                missing: u32::MAX as usize - 2
            })
        );
    }

    #[test]
    fn a_tty_stream_is_all_stdout() {
        let mut decoder = FrameDecoder::new(true);
        let mut pieces = Vec::new();
        decoder
            .push(&frame(2, b"looks framed\r\n"), &mut pieces)
            .expect("raw");
        assert_eq!(
            pieces,
            vec![(OutputStream::Stdout, frame(2, b"looks framed\r\n"))]
        );
        assert_eq!(decoder.finish(), Ok(()));
    }

    #[test]
    fn lines_are_never_torn_and_never_longer_than_the_cap() {
        let mut splitter = LineSplitter::new();
        let mut lines = Vec::new();
        splitter.push(OutputStream::Stdout, b"par", &mut lines);
        splitter.push(OutputStream::Stderr, b"e1\ne", &mut lines);
        splitter.push(OutputStream::Stdout, b"tial\nwhole\nre", &mut lines);
        splitter.push(OutputStream::Stderr, b"2\n", &mut lines);
        splitter.finish(&mut lines);
        assert_eq!(
            lines,
            vec![
                (OutputStream::Stderr, b"e1\n".to_vec()),
                (OutputStream::Stdout, b"partial\n".to_vec()),
                (OutputStream::Stdout, b"whole\n".to_vec()),
                (OutputStream::Stderr, b"e2\n".to_vec()),
                (OutputStream::Stdout, b"re".to_vec()),
            ]
        );

        let mut long = vec![b'x'; MAX_LINE_BYTES * 2 + 10];
        long.push(b'\n');
        let mut lines = Vec::new();
        for piece in long.chunks(100_000) {
            splitter.push(OutputStream::Stdout, piece, &mut lines);
        }
        let lengths: Vec<usize> = lines.iter().map(|(_, line)| line.len()).collect();
        assert_eq!(lengths, vec![MAX_LINE_BYTES, MAX_LINE_BYTES, 11]);
        // A newline exactly at the cap ends the line there.
        let mut exact = vec![b'y'; MAX_LINE_BYTES - 1];
        exact.push(b'\n');
        let mut lines = Vec::new();
        splitter.push(OutputStream::Stdout, &exact, &mut lines);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].1.len(), MAX_LINE_BYTES);
    }

    #[test]
    fn prefixes_line_up_and_end_every_line() {
        // (name, width, line, expected)
        let table: [(&str, usize, &[u8], &[u8]); 3] = [
            ("web", 7, b"hello\n", b"web     | hello\n"),
            ("sidecar", 7, b"no newline", b"sidecar | no newline\n"),
            ("a", 0, b"\n", b"a | \n"),
        ];
        for (name, width, line, expected) in table {
            assert_eq!(prefixed_line(name, width, line), expected, "{name}");
        }
    }

    #[test]
    fn encoded_frames_decode_back() {
        let mut bytes = encode_frames(OutputStream::Stderr, b"oops\n");
        bytes.extend(encode_frames(OutputStream::Stdout, b"fine\n"));
        let (stdout, stderr, end) = decode_in_steps(&bytes, 3);
        assert_eq!(
            (stdout.as_slice(), stderr.as_slice()),
            (&b"fine\n"[..], &b"oops\n"[..])
        );
        assert_eq!(end, Ok(()));
    }
}
