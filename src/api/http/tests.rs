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
    assert!(matches!(error, ReadError::BodyTooLarge { limit } if limit == MAX_REQUEST_BODY_BYTES));
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

#[test]
fn bytes_read_past_the_head_are_replayed_in_order_then_the_stream() {
    /// (leftover, position, buffer size, count replayed, position after)
    type Case = (&'static [u8], usize, usize, Option<usize>, usize);
    let table: [Case; 6] = [
        (b"abcdef", 0, 4, Some(4), 4),
        (b"abcdef", 4, 4, Some(2), 6),
        (b"abcdef", 6, 4, None, 6),
        (b"", 0, 4, None, 0),
        (b"abc", 0, 0, Some(0), 0),
        // A position past the end (never made, but no panic): the stream.
        (b"abc", 9, 4, None, 9),
    ];
    for (leftover, position, size, expected, after) in table {
        let mut at = position;
        let mut buf = vec![0u8; size];
        let count = super::framing::replay(leftover, &mut at, &mut buf);
        assert_eq!(
            (count, at),
            (expected, after),
            "{leftover:?} from {position}"
        );
        if let Some(count) = count {
            assert_eq!(&buf[..count], &leftover[position..position + count]);
        }
    }
}
