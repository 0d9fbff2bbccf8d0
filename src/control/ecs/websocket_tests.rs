//! Tests of the signed websocket (`websocket`) against tungstenite's server side on real
//! loopback sockets: texts both ways, pings answered, a read timeout in the middle of a frame
//! that loses nothing, close codes reported, a connection that ends without a close frame (at
//! a frame's edge or inside one) read as an abnormal close, and the URL and query the Go agent
//! builds. The signed upgrade, TLS and proxies are tested in `tests/ecs_transport.rs`.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::{CloseFrame, Role};
use tungstenite::{Message, WebSocket};

use super::websocket::*;
use super::EcsError;
use crate::net::wire::WireStream;

/// A client socket (already upgraded) and the server's raw end of the same TCP connection.
fn pair() -> (SignedSocket, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let client = TcpStream::connect(listener.local_addr().expect("address")).expect("connect");
    let (server, _) = listener.accept().expect("accept");
    let mut socket = SignedSocket::from_upgraded(WireStream::Plain(client), "test");
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    (socket, server)
}

fn server_socket(stream: TcpStream) -> WebSocket<TcpStream> {
    WebSocket::from_raw_socket(stream, Role::Server, None)
}

#[test]
fn texts_go_both_ways_and_pings_are_answered() {
    let (mut client, server) = pair();
    let peer = thread::spawn(move || {
        let mut server = server_socket(server);
        server
            .send(Message::Ping(b"are you there".to_vec().into()))
            .expect("ping");
        server
            .send(Message::Binary(vec![1, 2, 3].into()))
            .expect("binary");
        server.send(Message::text("hello")).expect("text");
        let mut seen = Vec::new();
        while seen.len() < 2 {
            match server.read().expect("read") {
                Message::Pong(payload) => {
                    seen.push(format!("pong {}", String::from_utf8_lossy(&payload)))
                }
                Message::Text(text) => seen.push(format!("text {text}")),
                _ => {}
            }
        }
        seen
    });
    assert_eq!(client.read_text(), Ok(Received::Text("hello".into())));
    client.send_text("hi back").expect("send");
    let seen = peer.join().expect("server");
    assert_eq!(seen, ["pong are you there", "text hi back"]);
}

#[test]
fn a_timeout_inside_a_frame_keeps_what_was_read() {
    let (mut client, mut server) = pair();
    client
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    // A text frame of 5 bytes, sent in two halves with a timeout between them.
    server
        .write_all(&[0x81, 0x05, b'h', b'e'])
        .expect("first half");
    assert_eq!(client.read_text(), Err(EcsError::ReadTimeout));
    server.write_all(b"llo").expect("second half");
    assert_eq!(client.read_text(), Ok(Received::Text("hello".into())));
}

#[test]
fn close_codes_and_abnormal_ends_are_reported() {
    let (mut client, server) = pair();
    let peer = thread::spawn(move || {
        let mut server = server_socket(server);
        server
            .close(Some(CloseFrame {
                code: CloseCode::Policy,
                reason: "go away".into(),
            }))
            .expect("close");
        // The client's answer to the close.
        while server.read().is_ok() {}
    });
    assert_eq!(
        client.read_text(),
        Ok(Received::Closed {
            code: Some(1008),
            reason: "go away".into()
        })
    );
    peer.join().expect("server");

    // EOF at a frame's edge, and EOF inside a frame: both an abnormal close (1006).
    for bytes in [&b""[..], &[0x81, 0x05, b'h', b'e'][..]] {
        let (mut client, mut server) = pair();
        server.write_all(bytes).expect("write");
        drop(server);
        match client.read_text() {
            Ok(Received::Closed { code, .. }) => assert_eq!(code, Some(CLOSE_ABNORMAL)),
            other => panic!("{bytes:?}: {other:?}"),
        }
    }
}

#[test]
fn frames_that_break_the_protocol_or_the_limit_are_protocol_errors() {
    // A masked frame from the server; a frame longer than the limit.
    let over = (MAX_MESSAGE_BYTES as u64 + 1).to_be_bytes();
    let oversized = [&[0x81, 127][..], &over[..]].concat();
    for bytes in [vec![0x81, 0x85, 1, 2, 3, 4, 0, 0, 0, 0, 0], oversized] {
        let (mut client, mut server) = pair();
        server.write_all(&bytes).expect("write");
        assert!(
            matches!(client.read_text(), Err(EcsError::Protocol(_))),
            "{bytes:?}"
        );
    }
}

#[test]
fn the_acs_url_and_query_are_the_go_agents() {
    assert_eq!(acs_path("/"), "/ws");
    assert_eq!(acs_path("/a/"), "/a/ws");
    assert_eq!(acs_path("/a"), "/a/ws");
    let query = AcsQuery {
        cluster_arn: "c".into(),
        container_instance_arn: "i".into(),
        agent_hash: "h".into(),
        agent_version: "0.1.0".into(),
        docker_version: Some("24.0.7".into()),
        send_credentials: true,
    };
    let names: Vec<(&str, String)> = query.parameters();
    assert_eq!(
        names,
        [
            ("agentHash", "h".to_string()),
            ("agentVersion", "0.1.0".into()),
            ("clusterArn", "c".into()),
            ("containerInstanceArn", "i".into()),
            ("dockerVersion", "DockerVersion: 24.0.7".into()),
            ("protocolVersion", "2".into()),
            ("sendCredentials", "true".into()),
            ("seqNum", "1".into()),
        ]
    );
}
