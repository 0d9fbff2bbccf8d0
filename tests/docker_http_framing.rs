//! HTTP/1.1 framing over a real socket pair: responses that arrive in pieces, chunked bodies with
//! extensions and trailers, newline-delimited JSON split across chunks, an oversized head, and a
//! peer that closes in the middle of a body (an error, never a hang or a panic).

use std::io::{self, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::Duration;

use deckhand::net::http1::{
    read_line_limited, read_response_head, BodyFraming, BodyReader, MAX_RESPONSE_HEAD_BYTES,
};

/// Hands out at most one byte per read, so every parser boundary is crossed mid-token.
struct OneByteAtATime<R>(R);

impl<R: Read> Read for OneByteAtATime<R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let end = buffer.len().min(1);
        self.0.read(&mut buffer[..end])
    }
}

/// A socket pair whose client side times out reads after 10 s, so a bug shows as a failure,
/// not a hung test.
fn socket_pair() -> (UnixStream, UnixStream) {
    let (client, server) = UnixStream::pair().expect("socket pair");
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    (client, server)
}

/// Writes `pieces` one write call each, then closes (when `close` is set) or keeps the socket.
fn serve_pieces(mut server: UnixStream, pieces: Vec<Vec<u8>>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        for piece in pieces {
            if server.write_all(&piece).is_err() {
                return;
            }
            let _ = server.flush();
        }
    })
}

const CHUNKED_RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
Transfer-Encoding: chunked\r\n\r\n\
a;ext=1\r\n{\"n\":1}\n{\"\r\n\
6;quoted=\"a;b\"\r\nn\":2}\n\r\n\
0\r\nX-Trailer: yes\r\nX-Other: 2\r\n\r\n";

#[test]
fn a_response_split_into_single_bytes_parses_the_same() {
    let (client, server) = socket_pair();
    let pieces = CHUNKED_RESPONSE.chunks(3).map(<[u8]>::to_vec).collect();
    let writer = serve_pieces(server, pieces);
    let mut reader = BufReader::with_capacity(1, OneByteAtATime(client));
    let head = read_response_head(&mut reader, MAX_RESPONSE_HEAD_BYTES).expect("head");
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-type"), Some("application/json"));
    let framing = head.body_framing("GET").expect("framing");
    assert_eq!(framing, BodyFraming::Chunked);
    let mut lines = BufReader::with_capacity(1, BodyReader::new(reader, framing));
    let mut line = Vec::new();
    let mut seen = Vec::new();
    while read_line_limited(&mut lines, 1024, &mut line).expect("line") {
        seen.push(String::from_utf8(line.clone()).expect("utf-8"));
    }
    assert_eq!(seen, vec!["{\"n\":1}\n", "{\"n\":2}\n"]);
    writer.join().expect("writer");
}

#[test]
fn chunked_body_with_extensions_and_trailers_over_a_socket() {
    let (client, server) = socket_pair();
    let writer = serve_pieces(server, vec![CHUNKED_RESPONSE.to_vec()]);
    let mut reader = BufReader::new(client);
    let head = read_response_head(&mut reader, MAX_RESPONSE_HEAD_BYTES).expect("head");
    let mut body = BodyReader::new(reader, head.body_framing("GET").expect("framing"));
    let decoded = body.read_to_end_limited(1024).expect("body");
    assert_eq!(decoded, b"{\"n\":1}\n{\"n\":2}\n");
    writer.join().expect("writer");
}

#[test]
fn an_oversized_head_is_refused() {
    let (client, server) = socket_pair();
    let mut response = b"HTTP/1.1 200 OK\r\n".to_vec();
    for index in 0..4000 {
        response.extend_from_slice(format!("X-Filler-{index}: {}\r\n", "x".repeat(20)).as_bytes());
    }
    response.extend_from_slice(b"\r\n");
    let writer = serve_pieces(server, vec![response]);
    let mut reader = BufReader::new(client);
    let error = read_response_head(&mut reader, MAX_RESPONSE_HEAD_BYTES)
        .expect_err("a 100 KiB head must be refused");
    assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    assert!(error.to_string().contains("larger than"), "{error}");
    drop(reader);
    writer.join().expect("writer");
}

#[test]
fn a_peer_closing_mid_body_is_an_error_not_a_hang() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "content-length",
            b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"partial\":".to_vec(),
        ),
        (
            "mid-chunk",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n{\"partial\":".to_vec(),
        ),
        (
            "between chunks",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n".to_vec(),
        ),
        ("mid-head", b"HTTP/1.1 200 OK\r\nContent-Length: 1".to_vec()),
    ];
    for (name, bytes) in cases {
        let (client, server) = socket_pair();
        // The writer drops its end after sending: the peer closes.
        let writer = serve_pieces(server, vec![bytes]);
        writer.join().expect("writer");
        let mut reader = BufReader::new(client);
        let result = read_response_head(&mut reader, MAX_RESPONSE_HEAD_BYTES).and_then(|head| {
            let framing = head.body_framing("GET")?;
            BodyReader::new(reader, framing).read_to_end_limited(1024)
        });
        let error = result.expect_err(name);
        assert_eq!(
            error.kind(),
            io::ErrorKind::UnexpectedEof,
            "{name}: {error}"
        );
    }
}

#[test]
fn a_body_that_runs_to_the_end_of_the_connection() {
    let (client, server) = socket_pair();
    let writer = serve_pieces(
        server,
        vec![
            b"HTTP/1.0 200 OK\r\n\r\nfirst ".to_vec(),
            b"second".to_vec(),
        ],
    );
    let mut reader = BufReader::new(client);
    let head = read_response_head(&mut reader, MAX_RESPONSE_HEAD_BYTES).expect("head");
    let framing = head.body_framing("GET").expect("framing");
    assert_eq!(framing, BodyFraming::UntilEof);
    writer.join().expect("writer");
    let body = BodyReader::new(reader, framing)
        .read_to_end_limited(1024)
        .expect("body");
    assert_eq!(body, b"first second");
}
