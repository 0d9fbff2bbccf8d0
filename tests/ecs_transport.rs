//! The ECS transport against fakes on 127.0.0.1: the JSON API client and the ACS websocket,
//! over plain TCP and over TLS (rustls servers) with the fixture certificates of
//! `tests/fixtures/tls/` (the test CA trusted through `SSL_CERT_FILE`, as a host adds a CA;
//! a certificate for another name, an expired one and a self-signed one refused), directly and
//! through the counting `CONNECT` proxy of `tests/support/proxy.rs` (`HTTPS_PROXY`, and none
//! when `NO_PROXY` covers the endpoint). Every fake recomputes the request's SigV4 signature
//! with the secret it knows and refuses a request whose signature differs, as ECS does.

#[path = "support/proxy.rs"]
mod proxy;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Once};
use std::thread;
use std::time::Duration;

use deckhand::control::ecs::credentials::Credentials;
use deckhand::control::ecs::sigv4;
use deckhand::control::ecs::websocket::{self, AcsQuery, AcsSocket, Received, SignedUpgrade};
use deckhand::control::ecs::{CredentialChain, EcsClient, EcsError, Endpoint};
use deckhand::net::proxy::ProxySettings;
use proxy::TestProxy;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::json;

const ACCESS_KEY: &str = "AKIDTEST";
const SECRET: &str = "test/secret+key";
const REGION: &str = "us-west-2";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tls")
        .join(name)
}

/// Trusts the fixture CA for the whole process. Every test calls it before any TLS, so no
/// thread reads the environment while it is set (deckhand reads the roots once).
fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| std::env::set_var("SSL_CERT_FILE", fixture("ca.pem")));
}

/// Accepts one connection on a free port of 127.0.0.1 and hands it (reads time out after 10 s)
/// to `handle` on its own thread.
fn serve_once<T: Send + 'static>(
    handle: impl FnOnce(std::net::TcpStream) -> T + Send + 'static,
) -> (u16, thread::JoinHandle<T>) {
    setup();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let server = thread::spawn(move || {
        let (socket, _) = listener.accept().expect("accept");
        socket
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        handle(socket)
    });
    (port, server)
}

/// A TLS server stream presenting the fixture certificate `certificate` (with `server.key`),
/// its handshake done; `None` when the client refused it.
fn tls_accept(
    certificate: &str,
    mut socket: std::net::TcpStream,
) -> Option<rustls::StreamOwned<rustls::ServerConnection, std::net::TcpStream>> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(fixture(certificate))
        .expect("the certificate fixture")
        .collect::<Result<_, _>>()
        .expect("PEM");
    let key = PrivateKeyDer::from_pem_file(fixture("server.key")).expect("the key fixture");
    let config =
        rustls::ServerConfig::builder_with_provider(deckhand::net::wire::crypto_provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("a server configuration");
    let mut connection = rustls::ServerConnection::new(Arc::new(config)).expect("a connection");
    while connection.is_handshaking() {
        connection.complete_io(&mut socket).ok()?;
    }
    Some(rustls::StreamOwned::new(connection, socket))
}

fn chain(secret: &str, token: Option<&str>) -> Arc<CredentialChain> {
    let mut values = BTreeMap::new();
    values.insert("AWS_ACCESS_KEY_ID".to_string(), ACCESS_KEY.to_string());
    values.insert("AWS_SECRET_ACCESS_KEY".to_string(), secret.to_string());
    if let Some(token) = token {
        values.insert("AWS_SESSION_TOKEN".to_string(), token.to_string());
    }
    values.insert(
        "AWS_SHARED_CREDENTIALS_FILE".to_string(),
        "/nonexistent/credentials".to_string(),
    );
    Arc::new(CredentialChain::from_values(&values))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' && index + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[index + 1..index + 3]).expect("ascii");
            out.push(u8::from_str_radix(hex, 16).expect("hex"));
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).expect("utf-8")
}

/// Recomputes the signature of a request as ECS would, with `SECRET`; `Err` names what is off.
fn check_signature(
    method: &str,
    target: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<(), String> {
    let header = |name: &str| {
        headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.clone())
    };
    let authorization = header("Authorization").ok_or("no Authorization")?;
    let date = header("X-Amz-Date").ok_or("no X-Amz-Date")?;
    let signed_names = authorization
        .split("SignedHeaders=")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .ok_or("no SignedHeaders")?
        .to_string();
    if !authorization.contains(&format!(
        "Credential={ACCESS_KEY}/{}/{REGION}/ecs/aws4_request",
        &date[..8]
    )) {
        return Err(format!("wrong credential scope: {authorization}"));
    }
    let signed: Vec<(String, String)> = signed_names
        .split(';')
        .filter(|name| *name != "x-amz-date" && *name != "x-amz-security-token")
        .map(|name| (name.to_string(), header(name).unwrap_or_default()))
        .collect();
    let signed_refs: Vec<(&str, &str)> = signed
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(key), percent_decode(value))
        })
        .collect();
    let pair_refs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(key, value)| (key.as_str(), value.as_str()))
        .collect();
    let credentials = Credentials {
        access_key_id: ACCESS_KEY.into(),
        secret_access_key: SECRET.into(),
        session_token: header("X-Amz-Security-Token"),
    };
    let expected = sigv4::sign(
        &sigv4::SignInput {
            method,
            path: &percent_decode(path),
            query: &pair_refs,
            headers: &signed_refs,
            payload: body,
        },
        &credentials,
        REGION,
        "ecs",
        &date,
    );
    if expected.authorization != authorization {
        return Err("signature mismatch".into());
    }
    Ok(())
}

/// A request as the fake read it.
#[derive(Debug, Clone)]
struct Seen {
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

fn read_request<R: Read>(stream: R) -> Seen {
    let mut reader = BufReader::new(stream);
    let mut head = Vec::new();
    loop {
        let mut line = Vec::new();
        reader.read_until(b'\n', &mut line).expect("request head");
        assert!(!line.is_empty(), "closed in the request head");
        head.extend_from_slice(&line);
        if line == b"\r\n" {
            break;
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut request = httparse::Request::new(&mut headers);
    request.parse(&head).expect("a valid request head");
    let headers: Vec<(String, String)> = request
        .headers
        .iter()
        .map(|header| {
            (
                header.name.to_string(),
                String::from_utf8_lossy(header.value).to_string(),
            )
        })
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("Content-Length"))
        .map(|(_, value)| value.parse().expect("length"))
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).expect("request body");
    Seen {
        target: request.path.expect("path").to_string(),
        headers,
        body,
    }
}

/// How the fake answers one API request.
type Answer = Box<dyn FnOnce(&Seen) -> Vec<u8> + Send>;

fn http_answer(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/x-amz-json-1.1\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// One API request served, over TLS when `tls`: a signature that does not check is answered
/// 403 `InvalidSignatureException`, as ECS answers it.
fn serve_api(tls: bool, answer: Answer) -> (String, thread::JoinHandle<Seen>) {
    serve_api_presenting(tls.then_some("server.pem"), answer)
}

/// [`serve_api`] over TLS with the fixture `certificate` (`None`: plain TCP). When the client
/// refuses the certificate, the thread ends with an empty [`Seen`].
fn serve_api_presenting(
    certificate: Option<&'static str>,
    answer: Answer,
) -> (String, thread::JoinHandle<Seen>) {
    let tls = certificate.is_some();
    let (port, server) = serve_once(move |socket| {
        let mut stream: Box<dyn ReadWrite> = match certificate {
            Some(certificate) => match tls_accept(certificate, socket) {
                Some(stream) => Box::new(stream),
                None => {
                    return Seen {
                        target: String::new(),
                        headers: Vec::new(),
                        body: Vec::new(),
                    }
                }
            },
            None => Box::new(socket),
        };
        let seen = read_request(&mut stream);
        let reply = match check_signature("POST", &seen.target, &seen.headers, &seen.body) {
            Ok(()) => answer(&seen),
            Err(why) => http_answer(
                "403 Forbidden",
                &json!({"__type": "InvalidSignatureException", "message": why}).to_string(),
            ),
        };
        stream.write_all(&reply).expect("answer");
        seen
    });
    let scheme = if tls { "https" } else { "http" };
    let host = if tls { "localhost" } else { "127.0.0.1" };
    (format!("{scheme}://{host}:{port}"), server)
}

trait ReadWrite: Read + Write + Send {}
impl<T: Read + Write + Send> ReadWrite for T {}

fn client(url: &str, secret: &str) -> EcsClient {
    setup();
    EcsClient::new(
        Endpoint::parse(url).expect("url"),
        REGION,
        chain(secret, None),
    )
    .with_timeout(Duration::from_secs(5))
}

fn header_of<'a>(seen: &'a Seen, name: &str) -> Option<&'a str> {
    seen.headers
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
}

#[test]
fn a_signed_call_over_tcp_and_over_tls_returns_the_answer() {
    for tls in [false, true] {
        let (url, server) = serve_api(
            tls,
            Box::new(|_| {
                http_answer(
                    "200 OK",
                    r#"{"endpoint":"https://ecs-a-1.us-west-2.amazonaws.com/","telemetryEndpoint":"x"}"#,
                )
            }),
        );
        let answer = client(&url, SECRET)
            .call(
                "DiscoverPollEndpoint",
                &json!({"containerInstance": "abc", "cluster": "edge"}),
            )
            .unwrap_or_else(|error| panic!("tls {tls}: {error}"));
        assert_eq!(
            answer["endpoint"],
            "https://ecs-a-1.us-west-2.amazonaws.com/"
        );
        let seen = server.join().expect("server");
        assert_eq!(seen.target, "/");
        assert_eq!(
            header_of(&seen, "X-Amz-Target"),
            Some("AmazonEC2ContainerServiceV20141113.DiscoverPollEndpoint")
        );
        assert_eq!(
            header_of(&seen, "Content-Type"),
            Some("application/x-amz-json-1.1")
        );
        let body: serde_json::Value = serde_json::from_slice(&seen.body).expect("json body");
        assert_eq!(body["cluster"], "edge");
        let authorization = header_of(&seen, "Authorization").expect("signed");
        assert!(
            authorization.contains("SignedHeaders=content-type;host;x-amz-date;x-amz-target"),
            "{authorization}"
        );
    }
}

#[test]
fn a_session_token_is_sent_and_signed() {
    let (url, server) = serve_api(false, Box::new(|_| http_answer("200 OK", "{}")));
    EcsClient::new(
        Endpoint::parse(&url).expect("url"),
        REGION,
        chain(SECRET, Some("TOKEN/1")),
    )
    .call("RegisterContainerInstance", &json!({}))
    .expect("accepted");
    let seen = server.join().expect("server");
    assert_eq!(header_of(&seen, "X-Amz-Security-Token"), Some("TOKEN/1"));
    assert!(header_of(&seen, "Authorization")
        .expect("signed")
        .contains(";x-amz-security-token"));
}

#[test]
fn a_wrong_secret_is_refused_with_ecs_error_type() {
    let (url, server) = serve_api(true, Box::new(|_| http_answer("200 OK", "{}")));
    let error = client(&url, "not-the-secret")
        .call("RegisterContainerInstance", &json!({}))
        .expect_err("bad signature");
    assert_eq!(
        error.error_type(),
        Some("InvalidSignatureException"),
        "{error}"
    );
    assert!(matches!(error, EcsError::Service { status: 403, .. }));
    server.join().expect("server");
}

#[test]
fn error_answers_are_classified_for_the_caller() {
    type Check = fn(&EcsError) -> bool;
    let cases: Vec<(&str, &str, Check)> = vec![
        (
            "400 Bad Request",
            r#"{"__type":"com.amazonaws.ecs#InactiveInstanceException","message":"deregistered"}"#,
            |error| error.is_inactive_instance(),
        ),
        (
            "400 Bad Request",
            r#"{"__type":"ThrottlingException","message":"Rate exceeded"}"#,
            |error| matches!(error, EcsError::Unreachable(_)),
        ),
        (
            "500 Internal Server Error",
            r#"{"__type":"ServerException","message":"oops"}"#,
            |error| matches!(error, EcsError::Unreachable(_)),
        ),
        ("200 OK", "not json", |error| {
            matches!(error, EcsError::Protocol(_))
        }),
    ];
    for (status, body, check) in cases {
        let reply = http_answer(status, body);
        let (url, server) = serve_api(false, Box::new(move |_| reply));
        let error = client(&url, SECRET)
            .call("SubmitTaskStateChange", &json!({}))
            .expect_err(status);
        assert!(check(&error), "{status} {body}: {error:?}");
        server.join().expect("server");
    }
}

#[test]
fn an_answer_over_the_size_limit_is_refused() {
    let (url, server) = serve_api(
        false,
        Box::new(|_| {
            let mut reply = b"HTTP/1.1 200 OK\r\nContent-Length: 5000000\r\n\r\n".to_vec();
            reply.extend(std::iter::repeat_n(b' ', 5_000_000));
            reply
        }),
    );
    let error = client(&url, SECRET)
        .call("ListTasks", &json!({}))
        .expect_err("too large");
    assert!(matches!(error, EcsError::Protocol(_)), "{error:?}");
    let _ = server.join();
}

#[test]
fn unreachable_endpoints_and_silent_servers_are_unreachable() {
    setup();
    // A port nobody listens on.
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address")
        .port();
    let error = client(&format!("http://127.0.0.1:{port}"), SECRET)
        .call("ListTasks", &json!({}))
        .expect_err("refused");
    assert!(matches!(error, EcsError::Unreachable(_)), "{error:?}");
    // A server that accepts and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!(
        "http://127.0.0.1:{}",
        listener.local_addr().expect("a").port()
    );
    let error = client(&url, SECRET)
        .with_timeout(Duration::from_millis(300))
        .call("ListTasks", &json!({}))
        .expect_err("silent");
    assert!(matches!(error, EcsError::Unreachable(_)), "{error:?}");
    assert!(error.to_string().contains("timed out"), "{error}");
    drop(listener);
}

/// One TLS connection accepted on 127.0.0.1 presenting `certificate`; the thread says whether
/// the handshake completed.
fn tls_server_once(certificate: &'static str) -> (u16, thread::JoinHandle<bool>) {
    serve_once(move |socket| tls_accept(certificate, socket).is_some())
}

#[test]
fn certificates_for_another_name_expired_or_self_signed_are_refused() {
    for (certificate, why) in [
        ("wrong-name.pem", "not valid for name"),
        ("expired.pem", "expired"),
        ("self-signed.pem", "UnknownIssuer"),
    ] {
        // The API client.
        let (port, server) = tls_server_once(certificate);
        let error = client(&format!("https://localhost:{port}"), SECRET)
            .call("ListTasks", &json!({}))
            .expect_err(certificate);
        assert!(matches!(error, EcsError::Unreachable(_)), "{error:?}");
        assert!(error.to_string().contains(why), "{certificate}: {error}");
        assert!(
            !server.join().expect("server"),
            "{certificate}: handshake done"
        );
        // The websocket.
        let (port, server) = tls_server_once(certificate);
        let error = acs_connect(
            &format!("https://localhost:{port}/"),
            SECRET,
            &ProxySettings::direct(),
        )
        .expect_err(certificate);
        assert!(matches!(error, EcsError::Unreachable(_)), "{error:?}");
        assert!(error.to_string().contains(why), "{certificate}: {error}");
        assert!(
            !server.join().expect("server"),
            "{certificate}: handshake done"
        );
    }
}

fn proxies(pairs: &[(&'static str, String)]) -> ProxySettings {
    let pairs = pairs.to_vec();
    ProxySettings::from_lookup(&move |name| {
        pairs
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.clone())
    })
    .expect("proxy settings")
}

fn heartbeat_session() -> Session {
    Box::new(|socket| {
        socket
            .send(tungstenite::Message::text(r#"{"type":"HeartbeatMessage"}"#))
            .expect("send");
        socket.close(None).expect("close");
        let _ = socket.read();
    })
}

#[test]
fn all_ecs_traffic_goes_through_the_proxy_and_none_when_no_proxy_covers_it() {
    let proxy = TestProxy::start();
    // HTTPS_PROXY for https/wss (the TLS runs inside the tunnel, end to end), HTTP_PROXY for
    // http/ws: every call and every websocket is one CONNECT.
    let through = proxies(&[("HTTPS_PROXY", proxy.url()), ("http_proxy", proxy.url())]);
    for tls in [true, false] {
        let (url, server) = serve_api(tls, Box::new(|_| http_answer("200 OK", r#"{"a":1}"#)));
        let answer = client(&url, SECRET)
            .with_proxies(through.clone())
            .call("ListTasks", &json!({}))
            .unwrap_or_else(|error| panic!("tls {tls}: {error}"));
        assert_eq!(answer["a"], 1);
        server.join().expect("server");
        let (url, server) = serve_acs(tls, None, heartbeat_session());
        let mut socket = acs_connect(&url, SECRET, &through).expect("through the proxy");
        assert_eq!(
            socket.read_text().expect("read"),
            text(r#"{"type":"HeartbeatMessage"}"#)
        );
        socket.close();
        server.join().expect("server");
    }
    let targets = proxy.targets();
    assert_eq!(targets.len(), 4, "{targets:?}");
    assert!(targets[0].starts_with("localhost:"), "{targets:?}");
    assert!(targets[1].starts_with("localhost:"), "{targets:?}");
    assert!(targets[2].starts_with("127.0.0.1:"), "{targets:?}");
    assert!(targets[3].starts_with("127.0.0.1:"), "{targets:?}");

    // NO_PROXY by name (a suffix rule) and by range: no CONNECT at all.
    for no_proxy in [".localhost, 127.0.0.0/8", "localhost,127.0.0.1"] {
        let direct = proxies(&[
            ("HTTPS_PROXY", proxy.url()),
            ("HTTP_PROXY", proxy.url()),
            ("NO_PROXY", no_proxy.to_string()),
        ]);
        for tls in [true, false] {
            let (url, server) = serve_api(tls, Box::new(|_| http_answer("200 OK", "{}")));
            client(&url, SECRET)
                .with_proxies(direct.clone())
                .call("ListTasks", &json!({}))
                .unwrap_or_else(|error| panic!("{no_proxy} tls {tls}: {error}"));
            server.join().expect("server");
            let (url, server) = serve_acs(tls, None, heartbeat_session());
            acs_connect(&url, SECRET, &direct)
                .expect("directly")
                .close();
            server.join().expect("server");
        }
    }
    assert_eq!(proxy.connects(), 4, "NO_PROXY kept every connection direct");
}

#[test]
fn a_proxy_that_refuses_the_tunnel_is_unreachable_naming_its_answer() {
    let proxy = TestProxy::refuse_with("407 Proxy Authentication Required");
    let url = proxy.url().replace("http://", "http://deck:hand%21@");
    let through = proxies(&[("HTTPS_PROXY", url)]);
    let error = client("https://localhost:1", SECRET)
        .with_proxies(through.clone())
        .call("ListTasks", &json!({}))
        .expect_err("refused");
    assert!(matches!(error, EcsError::Unreachable(_)), "{error:?}");
    assert!(error.to_string().contains("407"), "{error}");
    let error = acs_connect("https://localhost:1/", SECRET, &through).expect_err("refused");
    assert!(matches!(error, EcsError::Unreachable(_)), "{error:?}");
    assert!(error.to_string().contains("407"), "{error}");
    assert_eq!(proxy.connects(), 2);
    // Both asked with the URL's credentials (deck:hand!).
    let expected = Some("Basic ZGVjazpoYW5kIQ==".to_string());
    assert_eq!(proxy.authorizations(), [expected.clone(), expected]);
}

#[test]
fn no_credentials_is_a_credentials_error() {
    let values: BTreeMap<String, String> = [(
        "AWS_SHARED_CREDENTIALS_FILE".to_string(),
        "/nonexistent/credentials".to_string(),
    )]
    .into();
    let error = EcsClient::new(
        Endpoint::parse("http://127.0.0.1:1").expect("url"),
        REGION,
        Arc::new(CredentialChain::from_values(&values)),
    )
    .call("ListTasks", &json!({}))
    .expect_err("no credentials");
    assert!(matches!(error, EcsError::Credentials(_)), "{error:?}");
}

// The ACS websocket.

fn query() -> AcsQuery {
    AcsQuery {
        cluster_arn: "arn:aws:ecs:us-west-2:123456789012:cluster/edge".into(),
        container_instance_arn: "arn:aws:ecs:us-west-2:123456789012:container-instance/edge/abc"
            .into(),
        agent_hash: "0123abcd".into(),
        agent_version: "0.1.0".into(),
        docker_version: Some("24.0.7".into()),
        send_credentials: true,
    }
}

fn credentials(secret: &str) -> Credentials {
    Credentials {
        access_key_id: ACCESS_KEY.into(),
        secret_access_key: secret.into(),
        session_token: None,
    }
}

fn now() -> String {
    sigv4::amz_date(deckhand::clock::now_millis())
}

/// Connects the ACS websocket at `url`, signed with `secret`, through `proxies`.
fn acs_connect(url: &str, secret: &str, proxies: &ProxySettings) -> Result<AcsSocket, EcsError> {
    setup();
    let credentials = credentials(secret);
    let amz_date = now();
    websocket::connect(
        url,
        &query(),
        SignedUpgrade {
            region: REGION,
            credentials: &credentials,
            amz_date: &amz_date,
        },
        proxies,
        Duration::from_secs(5),
    )
}

fn text(value: &str) -> Received {
    Received::Text(value.to_string())
}

type Session = Box<dyn FnOnce(&mut tungstenite::WebSocket<Box<dyn ReadWrite>>) + Send>;

/// One ACS connection served: the upgrade's signature checked (403 when off), its target
/// recorded, then `session` run on the socket. `refuse` answers the upgrade with that status
/// and body instead.
fn serve_acs(
    tls: bool,
    refuse: Option<(u16, &'static str)>,
    session: Session,
) -> (String, thread::JoinHandle<Option<String>>) {
    let (port, server) = serve_once(move |socket| {
        let stream: Box<dyn ReadWrite> = if tls {
            Box::new(tls_accept("server.pem", socket).expect("server handshake"))
        } else {
            Box::new(socket)
        };
        let mut target = None;
        #[allow(clippy::result_large_err)] // tungstenite's callback type
        let callback = |request: &tungstenite::handshake::server::Request,
                        response: tungstenite::handshake::server::Response| {
            let path = request
                .uri()
                .path_and_query()
                .map(|path| path.as_str().to_string())
                .unwrap_or_default();
            target = Some(path.clone());
            let headers: Vec<(String, String)> = request
                .headers()
                .iter()
                .map(|(name, value)| {
                    (
                        name.as_str().to_string(),
                        value.to_str().unwrap_or("").to_string(),
                    )
                })
                .collect();
            let refusal = |status: u16, body: String| {
                let mut answer = tungstenite::handshake::server::ErrorResponse::new(Some(body));
                *answer.status_mut() =
                    tungstenite::http::StatusCode::from_u16(status).expect("status");
                answer
            };
            if let Err(why) = check_signature("GET", &path, &headers, b"") {
                return Err(refusal(
                    403,
                    json!({"type": "InvalidSignatureException", "message": why}).to_string(),
                ));
            }
            if let Some((status, body)) = refuse {
                return Err(refusal(status, body.to_string()));
            }
            Ok(response)
        };
        if let Ok(mut socket) = tungstenite::accept_hdr(stream, callback) {
            session(&mut socket);
        }
        target
    });
    let scheme = if tls { "https" } else { "http" };
    let host = if tls { "localhost" } else { "127.0.0.1" };
    (format!("{scheme}://{host}:{port}/"), server)
}

#[test]
fn the_acs_websocket_connects_signed_and_carries_text_both_ways() {
    for tls in [false, true] {
        let (url, server) = serve_acs(
            tls,
            None,
            Box::new(|socket| {
                socket
                    .send(tungstenite::Message::text(r#"{"type":"HeartbeatMessage"}"#))
                    .expect("send");
                let reply = socket.read().expect("the client's reply");
                assert_eq!(reply.to_text().expect("text"), r#"{"type":"AckRequest"}"#);
                socket.close(None).expect("close");
                let _ = socket.read();
            }),
        );
        let mut socket = acs_connect(&url, SECRET, &ProxySettings::direct())
            .unwrap_or_else(|error| panic!("tls {tls}: {error}"));
        assert_eq!(
            socket.read_text().expect("read"),
            text(r#"{"type":"HeartbeatMessage"}"#)
        );
        socket.send_text(r#"{"type":"AckRequest"}"#).expect("send");
        // The fake closes without a code.
        assert_eq!(
            socket.read_text().expect("the close"),
            Received::Closed {
                code: None,
                reason: String::new()
            }
        );
        let target = server.join().expect("server").expect("a request came");
        assert!(
            target.starts_with(
                "/ws?agentHash=0123abcd&agentVersion=0.1.0&clusterArn=arn%3Aaws%3Aecs"
            ),
            "{target}"
        );
        assert!(
            target.contains("&dockerVersion=DockerVersion%3A%2024.0.7&protocolVersion=2&sendCredentials=true&seqNum=1"),
            "{target}"
        );
    }
}

#[test]
fn pings_fragments_large_messages_and_the_close_handshake_work_with_another_implementation() {
    use tungstenite::protocol::frame::coding::{Data, OpCode};
    use tungstenite::protocol::frame::Frame;
    let large = "p".repeat(300_000);
    let expected_large = large.clone();
    for tls in [false, true] {
        let large = large.clone();
        let (seen_sender, seen) = crossbeam_channel::unbounded::<String>();
        let (url, server) = serve_acs(
            tls,
            None,
            Box::new(move |socket| {
                socket
                    .send(tungstenite::Message::Ping(b"hb".to_vec().into()))
                    .expect("ping");
                for (part, opcode, last) in [
                    ("{\"type\":", OpCode::Data(Data::Text), false),
                    ("\"Heartbeat", OpCode::Data(Data::Continue), false),
                    ("Message\"}", OpCode::Data(Data::Continue), true),
                ] {
                    socket
                        .send(tungstenite::Message::Frame(Frame::message(
                            part.as_bytes().to_vec(),
                            opcode,
                            last,
                        )))
                        .expect("fragment");
                }
                socket
                    .send(tungstenite::Message::binary(vec![1, 2, 3]))
                    .expect("binary");
                socket
                    .send(tungstenite::Message::text(large))
                    .expect("large");
                for _ in 0..4 {
                    match socket.read() {
                        Ok(message) => seen_sender.send(format!("{message:?}")).expect("seen"),
                        Err(error) => {
                            seen_sender.send(format!("{error}")).expect("seen");
                            break;
                        }
                    }
                }
            }),
        );
        let mut socket = acs_connect(&url, SECRET, &ProxySettings::direct())
            .unwrap_or_else(|error| panic!("tls {tls}: {error}"));
        assert_eq!(
            socket.read_text().expect("read"),
            text(r#"{"type":"HeartbeatMessage"}"#)
        );
        assert_eq!(socket.read_text().expect("read"), text(&expected_large));
        socket.send_text("ack").expect("send");
        socket.close();
        server.join().expect("server");
        let seen: Vec<String> = seen.try_iter().collect();
        assert_eq!(seen.len(), 4, "tls {tls}: {seen:?}");
        assert!(
            seen[0].starts_with("Pong(") && seen[0].contains("hb"),
            "{seen:?}"
        );
        assert!(
            seen[1].starts_with("Text(") && seen[1].contains("ack"),
            "{seen:?}"
        );
        assert!(
            seen[2].starts_with("Close(Some(CloseFrame { code: Normal"),
            "{seen:?}"
        );
        assert!(seen[3].contains("closed"), "tls {tls}: {seen:?}");
    }
}

#[test]
fn an_idle_acs_socket_times_out_distinguishably_and_stays_usable() {
    let (release, released) = crossbeam_channel::bounded::<()>(1);
    let (url, server) = serve_acs(
        false,
        None,
        Box::new(move |socket| {
            released
                .recv_timeout(Duration::from_secs(10))
                .expect("released");
            socket
                .send(tungstenite::Message::text("late"))
                .expect("send");
            let _ = socket.read();
        }),
    );
    let mut socket = acs_connect(&url, SECRET, &ProxySettings::direct()).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    assert_eq!(socket.read_text(), Err(EcsError::ReadTimeout));
    release.send(()).expect("server waits");
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    assert_eq!(socket.read_text().expect("read"), text("late"));
    socket.close();
    server.join().expect("server");
}

#[test]
fn an_error_answer_to_the_upgrade_is_a_service_error() {
    let (url, server) = serve_acs(
        false,
        Some((
            400,
            r#"{"InactiveInstanceException":"Container instance is inactive"}"#,
        )),
        Box::new(|_| {}),
    );
    let error = acs_connect(&url, SECRET, &ProxySettings::direct()).expect_err("refused");
    assert!(error.is_inactive_instance(), "{error:?}");
    assert!(
        error.to_string().contains("Container instance is inactive"),
        "{error}"
    );
    server.join().expect("server");

    let (url, server) = serve_acs(true, None, Box::new(|_| {}));
    let error = acs_connect(&url, "wrong", &ProxySettings::direct()).expect_err("bad signature");
    assert_eq!(
        error.error_type(),
        Some("InvalidSignatureException"),
        "{error:?}"
    );
    assert!(matches!(error, EcsError::Service { status: 403, .. }));
    server.join().expect("server");
}
