//! Table tests of the ECS transport's pure parts: endpoint URLs, error answers, the ACS URL.
//! The parts that talk to a server are tested in `tests/ecs_transport.rs`, against fakes on
//! 127.0.0.1 over plain TCP and TLS.

use super::endpoint::Endpoint;
use super::websocket::{acs_path, AcsQuery};
use super::{error_from_answer, EcsError};

#[test]
fn endpoint_urls_parse_with_defaults_and_ipv6() {
    let cases: &[(&str, bool, &str, u16, &str, &str)] = &[
        (
            "https://ecs.us-east-1.amazonaws.com",
            true,
            "ecs.us-east-1.amazonaws.com",
            443,
            "/",
            "ecs.us-east-1.amazonaws.com",
        ),
        (
            "http://127.0.0.1:8080",
            false,
            "127.0.0.1",
            8080,
            "/",
            "127.0.0.1:8080",
        ),
        (
            "HTTP://Localhost:80/api/",
            false,
            "localhost",
            80,
            "/api/",
            "localhost",
        ),
        (
            "https://[::1]:8443/x%20y",
            true,
            "::1",
            8443,
            "/x y",
            "[::1]:8443",
        ),
        ("https://[fd00::1]", true, "fd00::1", 443, "/", "[fd00::1]"),
        (
            "wss://ecs-a-1.us-east-1.amazonaws.com/",
            true,
            "ecs-a-1.us-east-1.amazonaws.com",
            443,
            "/",
            "ecs-a-1.us-east-1.amazonaws.com",
        ),
        (
            "ws://127.0.0.1:9000",
            false,
            "127.0.0.1",
            9000,
            "/",
            "127.0.0.1:9000",
        ),
    ];
    for (url, tls, host, port, path, host_header) in cases {
        let endpoint = Endpoint::parse(url).unwrap_or_else(|error| panic!("{url}: {error}"));
        assert_eq!(
            (
                endpoint.tls,
                endpoint.host.as_str(),
                endpoint.port,
                endpoint.path.as_str()
            ),
            (*tls, *host, *port, *path),
            "{url}"
        );
        assert_eq!(endpoint.host_header(), *host_header, "{url}");
    }
}

#[test]
fn bad_endpoint_urls_are_refused_naming_the_url() {
    for url in [
        "ecs.us-east-1.amazonaws.com",
        "ftp://host",
        "https://",
        "https://host:0",
        "https://host:70000",
        "https://host:x",
        "https://[::1",
        "https://[::1]x",
        "https://[nothex]:1",
        "https://user:pass@host",
        "https://host/?a=b",
        "https://host/#f",
        "https://ho st/",
        "https://host/%zz",
        "https://host/%",
        "https://höst/",
    ] {
        let error = Endpoint::parse(url).expect_err(url);
        assert!(error.contains(&format!("{url:?}")), "{url}: {error}");
    }
}

#[test]
fn the_default_endpoint_is_the_regions() {
    let endpoint = Endpoint::from_config(None, "eu-west-1").expect("default");
    assert_eq!(endpoint.url(), "https://ecs.eu-west-1.amazonaws.com/");
    let endpoint = Endpoint::from_config(Some("  "), "eu-west-1").expect("blank is unset");
    assert!(endpoint.tls);
    let endpoint = Endpoint::from_config(Some("http://127.0.0.1:1"), "eu-west-1").expect("set");
    assert_eq!(endpoint.url(), "http://127.0.0.1:1/");
    assert!(matches!(
        Endpoint::from_config(Some("nope"), "eu-west-1"),
        Err(EcsError::Config(_))
    ));
}

#[test]
fn error_answers_are_classified() {
    let service = |status: u16, error_type: &str, message: &str| EcsError::Service {
        status,
        error_type: error_type.into(),
        message: message.into(),
    };
    let cases: &[(u16, Option<&str>, &[u8], EcsError)] = &[
        (
            400,
            None,
            br#"{"__type":"com.amazonaws.ecs#InactiveInstanceException","message":"gone"}"#,
            service(400, "InactiveInstanceException", "gone"),
        ),
        (
            400,
            None,
            br#"{"__type":"ClientException","Message":"bad cluster"}"#,
            service(400, "ClientException", "bad cluster"),
        ),
        (
            403,
            Some("InvalidSignatureException:http://internal.amazon.com/"),
            br#"{"message":"The request signature we calculated does not match"}"#,
            service(
                403,
                "InvalidSignatureException",
                "The request signature we calculated does not match",
            ),
        ),
        (
            400,
            None,
            br#"{"InactiveInstanceException":"instance is inactive"}"#,
            service(400, "InactiveInstanceException", "instance is inactive"),
        ),
        (
            400,
            None,
            br#"{"type":"BadRequestException","message":"no"}"#,
            service(400, "BadRequestException", "no"),
        ),
        (
            404,
            None,
            b"not json at all",
            service(404, "Not Found", "not json at all"),
        ),
    ];
    for (status, header, body, expected) in cases {
        assert_eq!(
            &error_from_answer(*status, "Not Found", *header, body),
            expected,
            "{}",
            String::from_utf8_lossy(body)
        );
    }
    for (status, body) in [
        (
            500,
            &br#"{"__type":"ServerException","message":"oops"}"#[..],
        ),
        (503, &b""[..]),
        (
            400,
            &br#"{"__type":"ThrottlingException","message":"Rate exceeded"}"#[..],
        ),
        (429, &b"slow down"[..]),
        (
            400,
            &br#"{"__type":"RequestTimeoutException","message":"timed out"}"#[..],
        ),
        (400, &br#"{"__type":"SlowDown","message":"slow"}"#[..]),
    ] {
        let error = error_from_answer(status, "x", None, body);
        assert!(
            matches!(error, EcsError::Unreachable(_)),
            "{status}: {error:?}"
        );
        assert!(error.is_retryable());
    }
    assert!(service(400, "InactiveInstanceException", "").is_inactive_instance());
    assert!(!service(400, "ClientException", "").is_inactive_instance());
    assert!(!EcsError::Unreachable("x".into()).is_inactive_instance());
}

#[test]
fn the_acs_url_is_the_go_agents() {
    assert_eq!(acs_path("/"), "/ws");
    assert_eq!(acs_path("/acs"), "/acs/ws");
    assert_eq!(acs_path("/acs/"), "/acs/ws");
    let query = AcsQuery {
        cluster_arn: "arn:aws:ecs:us-east-1:123456789012:cluster/edge".into(),
        container_instance_arn: "arn:aws:ecs:us-east-1:123456789012:container-instance/edge/abc"
            .into(),
        agent_hash: "deadbeef".into(),
        agent_version: "1.0.0".into(),
        docker_version: Some("24.0.7".into()),
        send_credentials: true,
    };
    let names: Vec<&str> = query.parameters().iter().map(|(name, _)| *name).collect();
    assert_eq!(
        names,
        [
            "agentHash",
            "agentVersion",
            "clusterArn",
            "containerInstanceArn",
            "dockerVersion",
            "protocolVersion",
            "sendCredentials",
            "seqNum"
        ]
    );
    let parameters = query.parameters();
    let value = |name: &str| {
        parameters
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.as_str())
    };
    assert_eq!(value("dockerVersion"), Some("DockerVersion: 24.0.7"));
    assert_eq!(value("protocolVersion"), Some("2"));
    assert_eq!(value("sendCredentials"), Some("true"));
    assert_eq!(
        value("seqNum"),
        Some("1"),
        "always 1, as the ECS agent sends it"
    );
    assert_eq!(value("agentHash"), Some("deadbeef"));
    let without_docker = AcsQuery {
        docker_version: None,
        ..query
    };
    assert!(without_docker
        .parameters()
        .iter()
        .all(|(name, _)| *name != "dockerVersion"));
}

/// xorshift64: deterministic, so a failing case replays by its seed.
struct Xorshift(u64);

impl Xorshift {
    fn below(&mut self, bound: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % bound as u64) as usize
    }
}

/// Random mutations of real-looking inputs through the fuzz entry points of the credentials
/// parser, the API answer reader and the websocket frame reader: no panic, and both the
/// accepting and the refusing paths run.
#[test]
fn mutated_credentials_files_answers_and_frames_never_panic() {
    let seeds: [(&[u8], crate::fuzzing::Target); 3] = [
        (
            b"# c\n[default] ; x\naws_access_key_id = A # k\naws_secret_access_key = S\n  more = 1\n[p]\nk=v\n",
            crate::fuzzing::ecs_credentials,
        ),
        (
            b"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n1a\r\n{\"__type\":\"a#B\",\"message\"\r\n4\r\n:\"m\"\r\n1\r\n}\r\n0\r\n\r\n",
            crate::fuzzing::ecs_http,
        ),
        (
            b"\x01\x03{\"a\x89\x02hb\x80\x02\":\x8a\x00\x81\x7e\x00\x02{}\x80\x01}\x88\x02\x03\xe8",
            crate::fuzzing::acs_frames,
        ),
    ];
    let noise = b"\r\n[]=#;: \t{}\"%0123456789abcdef\xff\xc3\x00\x01\x7e\x7f\x80\x81\x88\x89\xc1";
    let mut random = Xorshift(0x0ecd_5eed_0000_0001);
    for (seed, target) in seeds {
        for _ in 0..2000 {
            let mut bytes = seed.to_vec();
            for _ in 0..random.below(5) {
                if bytes.is_empty() {
                    break;
                }
                let at = random.below(bytes.len());
                match random.below(4) {
                    0 => bytes[at] = noise[random.below(noise.len())],
                    1 => bytes.insert(at, noise[random.below(noise.len())]),
                    2 => {
                        bytes.remove(at);
                    }
                    _ => bytes.truncate(at),
                }
            }
            target(&bytes);
        }
    }
    // Both paths of the parser ran.
    assert!(super::credentials::parse_profiles("[a]\nk = v\n").is_ok());
    assert!(super::credentials::parse_profiles("[a]\nnot a property\n").is_err());
}
