//! Table tests of the hand-written websocket client (`websocket`): SHA-1 and the accept key
//! against their published vectors, the frame header decoder, and [`ClientSocket`] run over a
//! scripted stream (bytes handed out in chosen reads, timeouts between them, everything the
//! client writes kept and unmasked). The socket against another implementation's server is
//! tested in `tests/ecs_transport.rs`.

use std::collections::VecDeque;
use std::io::{self, Read, Write};

use super::websocket::*;
use super::EcsError;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[test]
fn sha1_matches_the_fips_vectors() {
    let million_a = "a".repeat(1_000_000);
    let cases: &[(&str, &str)] = &[
        ("", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
        ("abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        (
            "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1",
        ),
        (
            "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq\
             klmnopqrlmnopqrsmnopqrstnopqrstu",
            "a49b2446a02c645bf419f995b67091253a04a259",
        ),
        (&million_a, "34aa973cd4c4daa4f61eeb2bdbad27316534016f"),
    ];
    for (input, expected) in cases {
        assert_eq!(
            hex(&sha1(input.as_bytes())),
            *expected,
            "{} bytes",
            input.len()
        );
    }
}

#[test]
fn the_accept_key_is_rfc_6455s_example() {
    assert_eq!(
        accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
        "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    );
}

/// A server frame (unmasked), with the shortest length form.
fn frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut bytes = vec![if fin { 0x80 } else { 0 } | opcode];
    match payload.len() {
        length @ 0..=125 => bytes.push(length as u8),
        length @ 126..=0xFFFF => {
            bytes.push(126);
            bytes.extend_from_slice(&(length as u16).to_be_bytes());
        }
        length => {
            bytes.push(127);
            bytes.extend_from_slice(&(length as u64).to_be_bytes());
        }
    }
    bytes.extend_from_slice(payload);
    bytes
}

fn head(fin: bool, opcode: u8, header_len: usize, payload_len: usize) -> FrameHead {
    FrameHead {
        fin,
        opcode,
        header_len,
        payload_len,
    }
}

#[test]
fn frame_heads_decode_or_wait_or_refuse() {
    let long_127 = {
        let mut bytes = vec![0x82, 127];
        bytes.extend_from_slice(&70_000u64.to_be_bytes());
        bytes
    };
    /// The bytes, and their head or the close code refusing them.
    type Case<'a> = (&'a [u8], Result<Option<FrameHead>, u16>);
    let cases: &[Case] = &[
        (b"", Ok(None)),
        (b"\x81", Ok(None)),
        (b"\x81\x05hello", Ok(Some(head(true, OPCODE_TEXT, 2, 5)))),
        (b"\x01\x03hel", Ok(Some(head(false, OPCODE_TEXT, 2, 3)))),
        (b"\x80\x00", Ok(Some(head(true, OPCODE_CONTINUATION, 2, 0)))),
        (b"\x81\x7e", Ok(None)),
        (b"\x81\x7e\x01", Ok(None)),
        (
            b"\x81\x7e\x01\x00",
            Ok(Some(head(true, OPCODE_TEXT, 4, 256))),
        ),
        (b"\x82\x7f\x00\x00\x00\x00", Ok(None)),
        (&long_127, Ok(Some(head(true, OPCODE_BINARY, 10, 70_000)))),
        (b"\x89\x00", Ok(Some(head(true, OPCODE_PING, 2, 0)))),
        (b"\x8a\x7d", Ok(Some(head(true, OPCODE_PONG, 2, 125)))),
        // Masked: servers never mask.
        (b"\x81\x85\x01\x02\x03\x04", Err(CLOSE_PROTOCOL_ERROR)),
        // RSV1, RSV2, RSV3.
        (b"\xc1\x00", Err(CLOSE_PROTOCOL_ERROR)),
        (b"\xa1\x00", Err(CLOSE_PROTOCOL_ERROR)),
        (b"\x91\x00", Err(CLOSE_PROTOCOL_ERROR)),
        // Reserved opcodes.
        (b"\x83\x00", Err(CLOSE_PROTOCOL_ERROR)),
        (b"\x8b\x00", Err(CLOSE_PROTOCOL_ERROR)),
        // A fragmented ping, a ping over 125 bytes.
        (b"\x09\x00", Err(CLOSE_PROTOCOL_ERROR)),
        (b"\x89\x7e\x00\x7e", Err(CLOSE_PROTOCOL_ERROR)),
        // Over the limit: 4 MiB + 1, and the largest 64-bit length.
        (
            b"\x82\x7f\x00\x00\x00\x00\x00\x40\x00\x01",
            Err(CLOSE_TOO_BIG),
        ),
        (
            b"\x82\x7f\xff\xff\xff\xff\xff\xff\xff\xff",
            Err(CLOSE_TOO_BIG),
        ),
    ];
    for (bytes, expected) in cases {
        let got = decode_head(bytes, MAX_MESSAGE_BYTES).map_err(|error| error.code);
        assert_eq!(&got, expected, "{bytes:02x?}");
    }
    assert_eq!(
        decode_head(
            b"\x82\x7f\x00\x00\x00\x00\x00\x40\x00\x00",
            MAX_MESSAGE_BYTES
        ),
        Ok(Some(head(true, OPCODE_BINARY, 10, MAX_MESSAGE_BYTES))),
        "exactly the limit"
    );
}

/// One step of what the server side of a scripted stream does when read.
enum Step {
    Bytes(Vec<u8>),
    Timeout,
}

/// A stream that hands out its steps' bytes (each step in one or more reads of at most `step`
/// bytes), times out where told, then ends; whatever is written is kept.
struct Scripted {
    steps: VecDeque<Step>,
    most_per_read: usize,
    written: Vec<u8>,
}

impl Scripted {
    fn new(steps: Vec<Step>, most_per_read: usize) -> Scripted {
        Scripted {
            steps: steps.into(),
            most_per_read,
            written: Vec::new(),
        }
    }
}

impl Read for Scripted {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        match self.steps.front_mut() {
            None => Ok(0),
            Some(Step::Timeout) => {
                self.steps.pop_front();
                Err(io::Error::new(io::ErrorKind::TimedOut, "timed out"))
            }
            Some(Step::Bytes(bytes)) => {
                let count = bytes.len().min(buffer.len()).min(self.most_per_read);
                buffer[..count].copy_from_slice(&bytes[..count]);
                bytes.drain(..count);
                if bytes.is_empty() {
                    self.steps.pop_front();
                }
                Ok(count)
            }
        }
    }
}

impl Write for Scripted {
    fn write(&mut self, buffer: &[u8]) -> io::Result<usize> {
        self.written.extend_from_slice(buffer);
        Ok(buffer.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The client's frames in `bytes`, unmasked: each must be final and masked.
fn client_frames(mut bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut frames = Vec::new();
    while !bytes.is_empty() {
        assert_eq!(bytes[0] & 0xF0, 0x80, "final, no reserved bits");
        assert_eq!(bytes[1] & 0x80, 0x80, "masked");
        let (length, mut at) = match bytes[1] & 0x7F {
            126 => (u16::from_be_bytes([bytes[2], bytes[3]]) as usize, 4),
            127 => (
                u64::from_be_bytes(bytes[2..10].try_into().expect("8 bytes")) as usize,
                10,
            ),
            short => (short as usize, 2),
        };
        let mask = [bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]];
        at += 4;
        let payload = bytes[at..at + length]
            .iter()
            .zip(mask.iter().cycle())
            .map(|(byte, key)| byte ^ key)
            .collect();
        frames.push((bytes[0] & 0x0F, payload));
        bytes = &bytes[at + length..];
    }
    frames
}

/// What reading until the end saw: each message (text, or the error's kind) in order.
#[derive(Debug, PartialEq, Eq)]
enum Read_ {
    Text(String),
    Timeout,
    Protocol,
    End,
}

fn read_all(socket: &mut ClientSocket<Scripted>) -> Vec<Read_> {
    let mut seen = Vec::new();
    for _ in 0..32 {
        match socket.read_text() {
            Ok(Some(text)) => seen.push(Read_::Text(text)),
            Ok(None) => {
                seen.push(Read_::End);
                break;
            }
            Err(EcsError::ReadTimeout) => seen.push(Read_::Timeout),
            Err(EcsError::Protocol(_)) => {
                seen.push(Read_::Protocol);
                break;
            }
            Err(other) => panic!("{other}"),
        }
    }
    seen
}

fn text(value: &str) -> Read_ {
    Read_::Text(value.to_string())
}

fn close_body(code: u16) -> Vec<u8> {
    code.to_be_bytes().to_vec()
}

#[test]
fn server_frames_read_as_messages_in_any_split() {
    let big = "x".repeat(70_000);
    let mid = "y".repeat(300);
    let fragmented_with_ping = [
        frame(false, OPCODE_TEXT, b"{\"type\":"),
        frame(true, OPCODE_PING, b"hb"),
        frame(false, OPCODE_CONTINUATION, b"\"Heartbeat"),
        frame(true, OPCODE_PONG, b""),
        frame(true, OPCODE_CONTINUATION, b"Message\"}"),
    ]
    .concat();
    type Case<'a> = (&'a str, Vec<u8>, Vec<Read_>, Vec<(u8, Vec<u8>)>);
    let cases: Vec<Case> = vec![
        (
            "one text, then the end of the stream",
            frame(true, OPCODE_TEXT, b"hello"),
            vec![text("hello"), Read_::End],
            vec![],
        ),
        (
            "extended lengths: 16-bit and 64-bit",
            [
                frame(true, OPCODE_TEXT, mid.as_bytes()),
                frame(true, OPCODE_TEXT, big.as_bytes()),
            ]
            .concat(),
            vec![text(&mid), text(&big), Read_::End],
            vec![],
        ),
        (
            "a fragmented message with a ping and a pong between its frames",
            fragmented_with_ping,
            vec![text("{\"type\":\"HeartbeatMessage\"}"), Read_::End],
            vec![(OPCODE_PONG, b"hb".to_vec())],
        ),
        (
            "binary messages are skipped, empty texts kept",
            [
                frame(false, OPCODE_BINARY, b"\x00\x01"),
                frame(true, OPCODE_CONTINUATION, b"\x02"),
                frame(true, OPCODE_TEXT, b""),
                frame(true, OPCODE_TEXT, "é→".as_bytes()),
            ]
            .concat(),
            vec![text(""), text("é→"), Read_::End],
            vec![],
        ),
        (
            "the server's close is echoed and ends the reading",
            [
                frame(
                    true,
                    OPCODE_CLOSE,
                    &[&close_body(1001)[..], b"going away"].concat(),
                ),
                frame(true, OPCODE_TEXT, b"after the close"),
            ]
            .concat(),
            vec![Read_::End],
            vec![(OPCODE_CLOSE, close_body(1001))],
        ),
        (
            "an empty close is answered with an empty close",
            frame(true, OPCODE_CLOSE, b""),
            vec![Read_::End],
            vec![(OPCODE_CLOSE, vec![])],
        ),
        (
            "a masked server frame is a protocol error",
            b"\x81\x85\x01\x02\x03\x04abcde".to_vec(),
            vec![Read_::Protocol],
            vec![(OPCODE_CLOSE, close_body(CLOSE_PROTOCOL_ERROR))],
        ),
        (
            "a reserved bit is a protocol error",
            [frame(true, OPCODE_TEXT, b"ok"), vec![0xC1, 0x00]].concat(),
            vec![text("ok"), Read_::Protocol],
            vec![(OPCODE_CLOSE, close_body(CLOSE_PROTOCOL_ERROR))],
        ),
        (
            "a continuation with no message is a protocol error",
            frame(true, OPCODE_CONTINUATION, b"x"),
            vec![Read_::Protocol],
            vec![(OPCODE_CLOSE, close_body(CLOSE_PROTOCOL_ERROR))],
        ),
        (
            "a new message inside a fragmented one is a protocol error",
            [
                frame(false, OPCODE_TEXT, b"a"),
                frame(true, OPCODE_TEXT, b"b"),
            ]
            .concat(),
            vec![Read_::Protocol],
            vec![(OPCODE_CLOSE, close_body(CLOSE_PROTOCOL_ERROR))],
        ),
        (
            "text that is not UTF-8 is refused with 1007",
            frame(true, OPCODE_TEXT, b"\xff\xfe"),
            vec![Read_::Protocol],
            vec![(OPCODE_CLOSE, close_body(CLOSE_INVALID_DATA))],
        ),
        (
            "a frame over 4 MiB is refused from its header, before its payload",
            b"\x81\x7f\x00\x00\x00\x00\x00\x40\x00\x01".to_vec(),
            vec![Read_::Protocol],
            vec![(OPCODE_CLOSE, close_body(CLOSE_TOO_BIG))],
        ),
        (
            "a close of one byte is a protocol error",
            frame(true, OPCODE_CLOSE, b"\x03"),
            vec![Read_::Protocol],
            vec![(OPCODE_CLOSE, close_body(CLOSE_PROTOCOL_ERROR))],
        ),
    ];
    for (what, bytes, expected, written) in &cases {
        for most_per_read in [1, 3, 7, 4096, usize::MAX] {
            let stream = Scripted::new(vec![Step::Bytes(bytes.clone())], most_per_read);
            let mut socket = ClientSocket::new(stream, Vec::new());
            let seen = read_all(&mut socket);
            assert_eq!(&seen, expected, "{what}, {most_per_read} bytes per read");
            let frames = client_frames(&socket_written(&socket));
            assert_eq!(&frames, written, "{what}, {most_per_read} bytes per read");
            assert_eq!(
                socket.read_text().ok(),
                Some(None),
                "{what}: after the end, reads say so"
            );
        }
    }
}

fn socket_written(socket: &ClientSocket<Scripted>) -> Vec<u8> {
    socket.stream_ref().written.clone()
}

#[test]
fn fragments_over_the_limit_together_are_refused() {
    let quarter = vec![b'a'; MAX_MESSAGE_BYTES / 4];
    let mut bytes = frame(false, OPCODE_TEXT, &quarter);
    for _ in 0..3 {
        bytes.extend(frame(false, OPCODE_CONTINUATION, &quarter));
    }
    bytes.extend(frame(true, OPCODE_CONTINUATION, b"a"));
    let stream = Scripted::new(vec![Step::Bytes(bytes)], usize::MAX);
    let mut socket = ClientSocket::new(stream, Vec::new());
    assert_eq!(read_all(&mut socket), vec![Read_::Protocol]);
    assert_eq!(
        client_frames(&socket_written(&socket)),
        vec![(OPCODE_CLOSE, close_body(CLOSE_TOO_BIG))]
    );
}

#[test]
fn a_timeout_inside_a_frame_keeps_what_was_read() {
    let message = frame(true, OPCODE_TEXT, "x".repeat(300).as_bytes());
    let ping = frame(true, OPCODE_PING, b"p");
    let cuts = [1, 2, 3, 4, 100, message.len() - 1];
    for cut in cuts {
        let steps = vec![
            Step::Timeout,
            Step::Bytes(message[..cut].to_vec()),
            Step::Timeout,
            Step::Bytes([&message[cut..], &ping[..1]].concat()),
            Step::Timeout,
            Step::Bytes(ping[1..].to_vec()),
            Step::Bytes(frame(true, OPCODE_TEXT, b"next")),
        ];
        let mut socket = ClientSocket::new(Scripted::new(steps, 5), Vec::new());
        assert_eq!(
            read_all(&mut socket),
            vec![
                Read_::Timeout,
                Read_::Timeout,
                text(&"x".repeat(300)),
                Read_::Timeout,
                text("next"),
                Read_::End
            ],
            "cut at {cut}"
        );
        assert_eq!(
            client_frames(&socket_written(&socket)),
            vec![(OPCODE_PONG, b"p".to_vec())]
        );
    }
}

#[test]
fn bytes_read_past_the_upgrade_are_frames_too() {
    let first = frame(true, OPCODE_TEXT, b"early");
    let (ahead, rest) = first.split_at(3);
    let stream = Scripted::new(vec![Step::Bytes(rest.to_vec())], usize::MAX);
    let mut socket = ClientSocket::new(stream, ahead.to_vec());
    assert_eq!(read_all(&mut socket), vec![text("early"), Read_::End]);
}

#[test]
fn sent_messages_and_the_close_handshake_are_masked_frames() {
    let steps = vec![Step::Bytes(frame(true, OPCODE_CLOSE, &close_body(1000)))];
    let mut socket = ClientSocket::new(Scripted::new(steps, usize::MAX), Vec::new());
    let long = "z".repeat(70_000);
    for message in ["", "hi", &"m".repeat(200), &long] {
        socket.send_text(message).expect("sent");
    }
    socket.close();
    assert_eq!(
        client_frames(&socket_written(&socket)),
        vec![
            (OPCODE_TEXT, b"".to_vec()),
            (OPCODE_TEXT, b"hi".to_vec()),
            (OPCODE_TEXT, "m".repeat(200).into_bytes()),
            (OPCODE_TEXT, long.clone().into_bytes()),
            (OPCODE_CLOSE, close_body(CLOSE_NORMAL)),
        ],
        "the server's close answers ours: no second close"
    );
    assert!(matches!(
        socket.send_text("late"),
        Err(EcsError::Unreachable(_))
    ));
    assert_eq!(socket.read_text(), Ok(None));
}

#[test]
fn encoded_frames_use_the_shortest_length_and_the_mask() {
    let cases: &[(usize, &[u8])] = &[
        (0, b"\x81\x80"),
        (125, b"\x81\xfd"),
        (126, b"\x81\xfe\x00\x7e"),
        (65_535, b"\x81\xfe\xff\xff"),
        (65_536, b"\x81\xff\x00\x00\x00\x00\x00\x01\x00\x00"),
    ];
    for (length, header) in cases {
        let payload = vec![0x55; *length];
        let encoded = encode_frame(OPCODE_TEXT, &payload, [1, 2, 3, 4]);
        assert_eq!(&encoded[..header.len()], *header, "{length}");
        assert_eq!(&encoded[header.len()..header.len() + 4], &[1, 2, 3, 4]);
        assert_eq!(encoded.len(), header.len() + 4 + length);
        if *length > 0 {
            assert_eq!(encoded[header.len() + 4], 0x55 ^ 1);
        }
    }
}

#[test]
fn keys_are_standard_base64_of_16_random_bytes() {
    let cases: &[(&[u8], &str)] = &[
        (b"", ""),
        (b"f", "Zg=="),
        (b"fo", "Zm8="),
        (b"foo", "Zm9v"),
        (b"foobar", "Zm9vYmFy"),
        (b"\xfb\xff\xfe", "+//+"),
        (b"the sample nonce", "dGhlIHNhbXBsZSBub25jZQ=="),
    ];
    for (bytes, expected) in cases {
        assert_eq!(base64(bytes), *expected, "{bytes:?}");
    }
}
