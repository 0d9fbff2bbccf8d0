//! An in-process fake of Amazon ECS on 127.0.0.1 (plain HTTP), for the tests of deckhand's ECS
//! connection: the JSON API (`POST /`, `X-Amz-Target: AmazonEC2ContainerServiceV20141113.<Op>`)
//! with RegisterContainerInstance, DiscoverPollEndpoint, SubmitTaskStateChange and
//! SubmitContainerStateChange, and the ACS websocket at `/ws` — every request's SigV4 signature
//! checked by its own implementation (service `ecs`). The test scripts it (payloads, heartbeats,
//! manifests, closes, ECS out of reach, an inactive instance) and reads what it recorded
//! (registrations, state changes, the agent's ACS messages), waiting on a Condvar with a
//! deadline, never sleeping. It can also fail chosen API calls a number of times
//! ([`FakeEcs::fail_next`]), refuse a deregistered instance's ARN at registration
//! ([`FakeEcs::deregister`]) and run its clock ahead of the host's ([`FakeEcs::set_clock_ahead`]):
//! signatures more than 5 minutes from its clock are refused, and every answer's `Date` says
//! its time. Shapes follow ECS's and ACS's models; errors are the AWS JSON
//! protocol's `{"__type": ..., "message": ...}`.
#![allow(dead_code)]

use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::hash_map::RandomState;
use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tungstenite::{Message, WebSocket};

pub const ACCOUNT: &str = "123456789012";
pub const TARGET_PREFIX: &str = "AmazonEC2ContainerServiceV20141113.";
pub const JSON_CONTENT_TYPE: &str = "application/x-amz-json-1.1";
const SERVICE: &str = "ecs";
const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 1024 * 1024;

/// AWS credentials: the fake accepts requests signed with these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub access_key: String,
    pub secret_key: String,
    pub session_token: Option<String>,
}

impl Credentials {
    pub fn test() -> Credentials {
        Credentials {
            access_key: "AKIDEXAMPLEDECKHAND".to_string(),
            secret_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".to_string(),
            session_token: Some("session-token-1".to_string()),
        }
    }
}

// ---------------------------------------------------------------- SigV4 (independent of deckhand)

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(data.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

fn aws_encode(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' && index + 2 < bytes.len() {
            let digits = String::from_utf8_lossy(&bytes[index + 1..index + 3]).into_owned();
            if let Ok(byte) = u8::from_str_radix(&digits, 16) {
                out.push(byte);
                index += 3;
                continue;
            }
        }
        out.push(if bytes[index] == b'+' {
            b' '
        } else {
            bytes[index]
        });
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A raw query string as name → value (decoded).
pub fn parse_query(raw: &str) -> BTreeMap<String, String> {
    raw.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(name), percent_decode(value))
        })
        .collect()
}

fn canonical_query(raw: &str) -> String {
    let mut pairs: Vec<(String, String)> = raw
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (
                aws_encode(&percent_decode(name)),
                aws_encode(&percent_decode(value)),
            )
        })
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

fn header_value<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// The SigV4 signature of a request, over the headers named in `signed` (lowercase).
#[allow(clippy::too_many_arguments)]
fn signature(
    service: &str,
    credentials: &Credentials,
    region: &str,
    method: &str,
    path: &str,
    raw_query: &str,
    headers: &[(String, String)],
    signed: &[String],
    body: &[u8],
    amz_date: &str,
) -> String {
    let date = amz_date.get(..8).unwrap_or("");
    let mut canonical_headers = String::new();
    for name in signed {
        let values: Vec<String> = headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        canonical_headers.push_str(&format!("{name}:{}\n", values.join(",")));
    }
    let path = if path.is_empty() { "/" } else { path };
    let canonical_request = format!(
        "{method}\n{path}\n{}\n{canonical_headers}\n{}\n{}",
        canonical_query(raw_query),
        signed.join(";"),
        sha256_hex(body)
    );
    let scope = format!("{date}/{region}/{service}/aws4_request");
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        sha256_hex(canonical_request.as_bytes())
    );
    let key = hmac(format!("AWS4{}", credentials.secret_key).as_bytes(), date);
    let key = hmac(&key, region);
    let key = hmac(&key, service);
    let key = hmac(&key, "aws4_request");
    hex(&hmac(&key, &string_to_sign))
}

/// `YYYYMMDDTHHMMSSZ` for a time.
pub fn amz_date(time: SystemTime) -> String {
    let seconds = time
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64;
    let (year, month, day, rest) = civil(seconds);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// An HTTP `Date` (IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`) for epoch seconds.
pub fn http_date(seconds: i64) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (year, month, day, rest) = civil(seconds);
    // 1970-01-01 was a Thursday.
    let weekday = DAYS[(seconds.div_euclid(86_400) + 4).rem_euclid(7) as usize];
    format!(
        "{weekday}, {day:02} {} {year:04} {:02}:{:02}:{:02} GMT",
        MONTHS[(month - 1) as usize],
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// (year, month, day, seconds into the day) of epoch seconds.
fn civil(seconds: i64) -> (i64, i64, i64, i64) {
    let (days, rest) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, rest)
}

fn seconds_of_amz_date(text: &str) -> Option<i64> {
    let number = |range: std::ops::Range<usize>| text.get(range)?.parse::<i64>().ok();
    let (year, month, day) = (number(0..4)?, number(4..6)?, number(6..8)?);
    let (hour, minute, second) = (number(9..11)?, number(11..13)?, number(13..15)?);
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Signs a request: the headers to add (`host`, `x-amz-date`, `x-amz-security-token` with a
/// session token, `authorization`). `headers` are the others the request sends; all are signed.
#[allow(clippy::too_many_arguments)]
pub fn sign_request(
    credentials: &Credentials,
    region: &str,
    method: &str,
    host: &str,
    path: &str,
    raw_query: &str,
    headers: &[(String, String)],
    body: &[u8],
    time: SystemTime,
) -> Vec<(String, String)> {
    let date = amz_date(time);
    let mut all: Vec<(String, String)> = headers
        .iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .collect();
    all.push(("host".to_string(), host.to_string()));
    all.push(("x-amz-date".to_string(), date.clone()));
    if let Some(token) = &credentials.session_token {
        all.push(("x-amz-security-token".to_string(), token.clone()));
    }
    let mut signed: Vec<String> = all.iter().map(|(n, _)| n.clone()).collect();
    signed.sort();
    signed.dedup();
    let signature = signature(
        SERVICE,
        credentials,
        region,
        method,
        path,
        raw_query,
        &all,
        &signed,
        body,
        &date,
    );
    let day = date.get(..8).unwrap_or("");
    all.push((
        "authorization".to_string(),
        format!(
            "AWS4-HMAC-SHA256 Credential={}/{day}/{region}/{SERVICE}/aws4_request, SignedHeaders={}, Signature={signature}",
            credentials.access_key,
            signed.join(";")
        ),
    ));
    all
}

/// Why a request's signature is refused: (`__type`, message). `now` is the fake's clock
/// (seconds since the epoch).
#[allow(clippy::too_many_arguments)]
pub fn verify(
    now: i64,
    accepted: &[Credentials],
    region: &str,
    method: &str,
    path: &str,
    raw_query: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<(), (&'static str, String)> {
    verify_for_service(
        SERVICE, now, accepted, region, method, path, raw_query, headers, body,
    )
}

/// [`verify`] for requests to `service` (`s3` for the fake S3 of environment-file tests), at
/// `now` (epoch seconds).
#[allow(clippy::too_many_arguments)]
pub fn verify_for_service(
    service_name: &str,
    now: i64,
    accepted: &[Credentials],
    region: &str,
    method: &str,
    path: &str,
    raw_query: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<(), (&'static str, String)> {
    let Some(authorization) = header_value(headers, "authorization") else {
        return Err((
            "MissingAuthenticationTokenException",
            "Missing Authentication Token".into(),
        ));
    };
    let invalid = |message: &str| ("InvalidSignatureException", message.to_string());
    let rest = authorization
        .strip_prefix("AWS4-HMAC-SHA256 ")
        .ok_or_else(|| invalid("Only AWS4-HMAC-SHA256 is accepted"))?;
    let mut fields = BTreeMap::new();
    for part in rest.split(',') {
        if let Some((name, value)) = part.trim().split_once('=') {
            fields.insert(name.to_string(), value.to_string());
        }
    }
    let (Some(credential), Some(signed), Some(given)) = (
        fields.get("Credential"),
        fields.get("SignedHeaders"),
        fields.get("Signature"),
    ) else {
        return Err(invalid(
            "Authorization header lacks Credential, SignedHeaders or Signature",
        ));
    };
    let scope: Vec<&str> = credential.split('/').collect();
    let [access_key, day, scope_region, service, terminator] = scope[..] else {
        return Err(invalid("Credential should be scoped to a valid region"));
    };
    let Some(credentials) = accepted.iter().find(|c| c.access_key == access_key) else {
        return Err((
            "UnrecognizedClientException",
            "The security token included in the request is invalid.".into(),
        ));
    };
    if credentials.session_token.as_deref() != header_value(headers, "x-amz-security-token") {
        return Err((
            "UnrecognizedClientException",
            "The security token included in the request is invalid.".into(),
        ));
    }
    if service != service_name || scope_region != region || terminator != "aws4_request" {
        return Err(invalid(&format!(
            "Credential should be scoped to a valid region and service '{service_name}'"
        )));
    }
    let date = header_value(headers, "x-amz-date").ok_or_else(|| invalid("Missing X-Amz-Date"))?;
    if date.get(..8) != Some(day) {
        return Err(invalid(
            "Date in Credential scope does not match X-Amz-Date",
        ));
    }
    match seconds_of_amz_date(date) {
        Some(then) if (now - then).abs() <= 300 => {}
        _ => {
            return Err(invalid(&format!(
                "Signature expired: {date} is not within 5 min of now"
            )))
        }
    }
    let signed: Vec<String> = signed.split(';').map(str::to_string).collect();
    for needed in ["host", "x-amz-date"] {
        if !signed.iter().any(|name| name == needed) {
            return Err(invalid(&format!("'{needed}' must be a signed header")));
        }
    }
    let expected = signature(
        service_name,
        credentials,
        region,
        method,
        path,
        raw_query,
        headers,
        &signed,
        body,
        date,
    );
    if &expected != given {
        return Err(invalid(
            "The request signature we calculated does not match the signature you provided.",
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------- recorded state

/// A message the agent sent on the ACS websocket.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentMessage {
    /// `AckRequest`, `HeartbeatAckRequest`, `NackRequest`, `TaskStopVerificationMessage`, …
    pub type_name: String,
    pub message: Value,
}

/// A SubmitTaskStateChange or SubmitContainerStateChange received.
#[derive(Debug, Clone, PartialEq)]
pub struct StateChange {
    pub operation: String,
    pub task_arn: String,
    /// The task's status (SubmitTaskStateChange) or the container's.
    pub status: String,
    pub reason: Option<String>,
    /// The containers of a task change; the one container of a container change.
    pub containers: Vec<Value>,
    pub body: Value,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// TCP connections accepted while up.
    pub connections: u64,
    /// Connections closed at once because ECS was down.
    pub refused: u64,
    pub api_requests: u64,
    pub signature_failures: u64,
    /// ACS websocket sessions opened.
    pub acs_sessions: u64,
}

enum Outgoing {
    Text(String),
    Close,
    /// A close frame with this code.
    CloseWith(u16),
}

struct AcsSession {
    sender: mpsc::Sender<Outgoing>,
    stream: TcpStream,
    query: BTreeMap<String, String>,
}

/// An API call to answer with an error, `remaining` more times.
struct Fault {
    operation: String,
    remaining: usize,
    status: u16,
    type_name: String,
    message: String,
}

struct State {
    credentials: Vec<Credentials>,
    /// How far the fake's clock is ahead of the host's.
    clock_ahead_seconds: i64,
    faults: Vec<Fault>,
    /// ARNs RegisterContainerInstance refuses with InactiveInstanceException.
    deregistered: Vec<String>,
    /// Every API call that passed the signature check: its operation and the status answered.
    calls: Vec<(String, u16)>,
    down: bool,
    inactive: bool,
    stopping: bool,
    registrations: Vec<Value>,
    instances: Vec<String>,
    state_changes: Vec<StateChange>,
    agent_messages: Vec<AgentMessage>,
    acs: Option<AcsSession>,
    acs_queries: Vec<BTreeMap<String, String>>,
    counters: Counters,
    /// DiscoverPollEndpoint's `telemetryEndpoint` (a fake TCS); this fake's own URL if unset.
    telemetry_endpoint: Option<String>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    region: String,
    port: u16,
}

impl Shared {
    /// The fake's clock, in epoch seconds.
    fn now(&self) -> i64 {
        let host = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0) as i64;
        host + self.lock().clock_ahead_seconds
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn update(&self, change: impl FnOnce(&mut State)) {
        change(&mut self.lock());
        self.changed.notify_all();
    }
}

static IDS: AtomicU64 = AtomicU64::new(0);

/// 32 lowercase hex digits, different on every call.
pub fn random_hex32() -> String {
    let state = RandomState::new();
    let mut text = String::new();
    for half in 0..2u64 {
        let mut hasher = state.build_hasher();
        hasher.write_u64(IDS.fetch_add(1, Ordering::Relaxed));
        hasher.write_u64(half);
        hasher.write_u128(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        text.push_str(&format!("{:016x}", hasher.finish()));
    }
    text
}

/// A task ARN as ECS writes them.
pub fn task_arn(cluster: &str) -> String {
    format!(
        "arn:aws:ecs:us-west-2:{ACCOUNT}:task/{cluster}/{}",
        random_hex32()
    )
}

/// An ACS container for a busybox-style task: `port_mappings` are (containerPort, hostPort,
/// protocol).
pub fn acs_container(
    name: &str,
    image: &str,
    command: &[&str],
    essential: bool,
    port_mappings: &[(u16, u16, &str)],
) -> Value {
    json!({
        "name": name,
        "image": image,
        "command": command,
        "essential": essential,
        "cpu": 0,
        "memory": 64,
        "portMappings": port_mappings.iter().map(|(container_port, host_port, protocol)| json!({
            "containerPort": container_port, "hostPort": host_port, "protocol": protocol
        })).collect::<Vec<_>>(),
        "environment": {},
        "mountPoints": [],
        "volumesFrom": [],
        "links": [],
        "entryPoint": [],
        "containerArn": format!("arn:aws:ecs:us-west-2:{ACCOUNT}:container/{}", random_hex32()),
    })
}

/// An ACS task (the PayloadMessage's `tasks` element) with these containers.
pub fn acs_task(arn: &str, family: &str, desired_status: &str, containers: Vec<Value>) -> Value {
    json!({
        "arn": arn,
        "family": family,
        "version": "1",
        "desiredStatus": desired_status,
        "taskDefinitionAccountId": ACCOUNT,
        "networkMode": "bridge",
        "launchType": "EXTERNAL",
        "containers": containers,
        "volumes": [],
        "associations": [],
        "elasticNetworkInterfaces": [],
    })
}

fn epoch_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn message_id() -> String {
    let hex = random_hex32();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

// ---------------------------------------------------------------- the fake

/// The fake ECS. Dropping it stops accepting and ends the ACS session.
pub struct FakeEcs {
    shared: Arc<Shared>,
}

impl FakeEcs {
    /// Listens on a free loopback port, for region `us-west-2` and [`Credentials::test`].
    pub fn start() -> FakeEcs {
        FakeEcs::start_with("us-west-2", Credentials::test())
    }

    pub fn start_with(region: &str, credentials: Credentials) -> FakeEcs {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake ECS");
        let port = listener.local_addr().expect("its address").port();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                credentials: vec![credentials],
                clock_ahead_seconds: 0,
                faults: Vec::new(),
                deregistered: Vec::new(),
                calls: Vec::new(),
                down: false,
                inactive: false,
                stopping: false,
                registrations: Vec::new(),
                instances: Vec::new(),
                state_changes: Vec::new(),
                agent_messages: Vec::new(),
                acs: None,
                acs_queries: Vec::new(),
                counters: Counters::default(),
                telemetry_endpoint: None,
            }),
            changed: Condvar::new(),
            region: region.to_string(),
            port,
        });
        let accepting = Arc::clone(&shared);
        thread::Builder::new()
            .name("fake-ecs-accept".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { continue };
                    let (stopping, down) = {
                        let state = accepting.lock();
                        (state.stopping, state.down)
                    };
                    if stopping {
                        return;
                    }
                    if down {
                        accepting.update(|state| state.counters.refused += 1);
                        let _ = stream.shutdown(Shutdown::Both);
                        continue;
                    }
                    accepting.update(|state| state.counters.connections += 1);
                    let connection = Arc::clone(&accepting);
                    let _ = thread::Builder::new()
                        .name("fake-ecs-conn".into())
                        .spawn(move || serve_connection(&connection, stream));
                }
            })
            .expect("spawn the fake ECS");
        FakeEcs { shared }
    }

    pub fn port(&self) -> u16 {
        self.shared.port
    }

    /// The environment that joins an agent to this fake as an external instance of `cluster`:
    /// `ECS_EXTERNAL`, the region and endpoint, the cluster and the host's test credentials.
    pub fn agent_env(&self, cluster: &str) -> Vec<(String, String)> {
        let host = Credentials::test();
        vec![
            ("ECS_EXTERNAL".into(), "true".into()),
            ("AWS_REGION".into(), self.region().into()),
            ("ECS_BACKEND_HOST".into(), self.endpoint()),
            ("ECS_CLUSTER".into(), cluster.into()),
            ("AWS_ACCESS_KEY_ID".into(), host.access_key),
            ("AWS_SECRET_ACCESS_KEY".into(), host.secret_key),
            (
                "AWS_SESSION_TOKEN".into(),
                host.session_token.unwrap_or_default(),
            ),
        ]
    }

    pub fn region(&self) -> &str {
        &self.shared.region
    }

    /// The API endpoint (`ECS_BACKEND_HOST`-style): `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.shared.port)
    }

    /// Only these credentials are accepted from now on (a rotated key).
    pub fn set_credentials(&self, credentials: Credentials) {
        self.shared
            .update(|state| state.credentials = vec![credentials]);
    }

    /// These are accepted too.
    pub fn accept_credentials(&self, credentials: Credentials) {
        self.shared
            .update(|state| state.credentials.push(credentials));
    }

    /// ECS out of reach: new connections are closed at once, the ACS session and kept-alive API
    /// connections are dropped.
    pub fn set_down(&self, down: bool) {
        self.shared.update(|state| {
            state.down = down;
            if down {
                if let Some(session) = state.acs.take() {
                    let _ = session.stream.shutdown(Shutdown::Both);
                }
            }
        });
    }

    /// The fake's clock runs `seconds` ahead of the host's (behind when negative): signatures
    /// more than 5 minutes from it are refused, and answers' `Date` says its time.
    pub fn set_clock_ahead(&self, seconds: i64) {
        self.shared
            .update(|state| state.clock_ahead_seconds = seconds);
    }

    /// The next `times` calls of `operation` (signed well) are answered `status` with an
    /// error of `type_name`.
    pub fn fail_next(
        &self,
        operation: &str,
        times: usize,
        status: u16,
        type_name: &str,
        message: &str,
    ) {
        self.shared.update(|state| {
            state.faults.push(Fault {
                operation: operation.to_string(),
                remaining: times,
                status,
                type_name: type_name.to_string(),
                message: message.to_string(),
            })
        });
    }

    /// `arn` is deregistered: RegisterContainerInstance with it answers
    /// InactiveInstanceException (a registration without an ARN gets a new one).
    pub fn deregister(&self, arn: &str) {
        self.shared
            .update(|state| state.deregistered.push(arn.to_string()));
    }

    /// Every API call that passed the signature check, in order: (operation, status).
    pub fn calls(&self) -> Vec<(String, u16)> {
        self.shared.lock().calls.clone()
    }

    /// The statuses `operation` was answered with, once there are at least `count` (waiting
    /// until `deadline`).
    pub fn wait_for_answers(&self, operation: &str, count: usize, deadline: Instant) -> Vec<u16> {
        let answers = |state: &State| -> Vec<u16> {
            state
                .calls
                .iter()
                .filter(|(called, _)| called == operation)
                .map(|(_, status)| *status)
                .collect()
        };
        self.wait(deadline, |state| {
            let seen = answers(state);
            (seen.len() >= count).then_some(seen)
        })
        .unwrap_or_else(|| panic!("fewer than {count} {operation}: {:?}", self.calls()))
    }

    /// DiscoverPollEndpoint answers this `telemetryEndpoint` (a fake TCS's URL).
    pub fn set_telemetry_endpoint(&self, url: &str) {
        self.shared
            .update(|state| state.telemetry_endpoint = Some(url.to_string()));
    }

    /// RegisterContainerInstance and the ACS upgrade answer InactiveInstanceException.
    pub fn set_inactive(&self, inactive: bool) {
        self.shared.update(|state| state.inactive = inactive);
    }

    pub fn counters(&self) -> Counters {
        self.shared.lock().counters
    }

    /// Every RegisterContainerInstance body received, in order.
    pub fn registrations(&self) -> Vec<Value> {
        self.shared.lock().registrations.clone()
    }

    /// Every state change received, in order.
    pub fn state_changes(&self) -> Vec<StateChange> {
        self.shared.lock().state_changes.clone()
    }

    /// Every message the agent sent on ACS, in order.
    pub fn agent_messages(&self) -> Vec<AgentMessage> {
        self.shared.lock().agent_messages.clone()
    }

    /// The query of every ACS upgrade accepted, in order.
    pub fn acs_queries(&self) -> Vec<BTreeMap<String, String>> {
        self.shared.lock().acs_queries.clone()
    }

    pub fn acs_connected(&self) -> bool {
        self.shared.lock().acs.is_some()
    }

    /// Waits until `check` holds on the state (or the deadline passes) and returns its answer.
    fn wait<T>(&self, deadline: Instant, mut check: impl FnMut(&State) -> Option<T>) -> Option<T> {
        let mut state = self.shared.lock();
        loop {
            if let Some(answer) = check(&state) {
                return Some(answer);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, deadline - now)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
        }
    }

    /// The first agent message that `matches`, waiting for it until `deadline`; panics (listing
    /// what came) when none does.
    pub fn wait_for_message(
        &self,
        mut matches: impl FnMut(&AgentMessage) -> bool,
        deadline: Instant,
    ) -> AgentMessage {
        self.wait(deadline, |state| {
            state.agent_messages.iter().find(|m| matches(m)).cloned()
        })
        .unwrap_or_else(|| {
            panic!(
                "no matching ACS message; received: {:?}",
                self.agent_messages()
            )
        })
    }

    /// The first SubmitTaskStateChange of `task_arn` with `status`, waiting until `deadline`.
    pub fn wait_for_task_state(
        &self,
        task_arn: &str,
        status: &str,
        deadline: Instant,
    ) -> StateChange {
        self.wait(deadline, |state| {
            state
                .state_changes
                .iter()
                .find(|c| {
                    c.operation == "SubmitTaskStateChange"
                        && c.task_arn == task_arn
                        && c.status == status
                })
                .cloned()
        })
        .unwrap_or_else(|| {
            panic!(
                "no {status} for {task_arn}; received: {:#?}",
                self.state_changes()
            )
        })
    }

    /// Waits until `count` registrations arrived; returns them.
    pub fn wait_for_registrations(&self, count: usize, deadline: Instant) -> Vec<Value> {
        self.wait(deadline, |state| {
            (state.registrations.len() >= count).then(|| state.registrations.clone())
        })
        .unwrap_or_else(|| {
            panic!(
                "fewer than {count} registrations: {:?}",
                self.registrations()
            )
        })
    }

    /// Waits until the `count`th ACS session is open; returns its query.
    pub fn wait_for_acs_session(&self, count: u64, deadline: Instant) -> BTreeMap<String, String> {
        self.wait(deadline, |state| {
            (state.counters.acs_sessions >= count && state.acs.is_some()).then(|| {
                state
                    .acs
                    .as_ref()
                    .map(|s| s.query.clone())
                    .unwrap_or_default()
            })
        })
        .unwrap_or_else(|| panic!("ACS session {count} did not open"))
    }

    fn send(&self, outgoing: Outgoing) {
        let state = self.shared.lock();
        let session = state.acs.as_ref().expect("an open ACS session to send on");
        let _ = session.sender.send(outgoing);
    }

    fn session_arns(&self) -> (String, String) {
        let state = self.shared.lock();
        let query = state
            .acs
            .as_ref()
            .map(|s| s.query.clone())
            .unwrap_or_default();
        (
            query.get("clusterArn").cloned().unwrap_or_default(),
            query
                .get("containerInstanceArn")
                .cloned()
                .unwrap_or_default(),
        )
    }

    fn send_message(&self, type_name: &str, message: Value) {
        self.send(Outgoing::Text(
            json!({"type": type_name, "message": message}).to_string(),
        ));
    }

    /// Sends a PayloadMessage with `tasks` (a JSON array of ACS tasks); returns its messageId.
    pub fn send_payload(&self, tasks: Value, seq_num: u64) -> String {
        let (cluster, instance) = self.session_arns();
        let id = message_id();
        self.send_message(
            "PayloadMessage",
            json!({"clusterArn": cluster, "containerInstanceArn": instance, "messageId": id,
                   "seqNum": seq_num, "generatedAt": epoch_millis(), "tasks": tasks}),
        );
        id
    }

    /// Sends an IAMRoleCredentialsMessage for `task_arn` (`role_type`: `TaskApplication` or
    /// `TaskExecution`) carrying `role_credentials` (ACS's `IAMRoleCredentials` object); returns
    /// its messageId.
    pub fn send_credentials_message(
        &self,
        task_arn: &str,
        role_type: &str,
        role_credentials: Value,
    ) -> String {
        let (cluster, _) = self.session_arns();
        let id = message_id();
        self.send_message(
            "IAMRoleCredentialsMessage",
            json!({"messageId": id, "taskArn": task_arn, "taskClusterArn": cluster,
                   "roleType": role_type, "roleCredentials": role_credentials}),
        );
        id
    }

    /// Sends a HeartbeatMessage; returns its messageId.
    pub fn send_heartbeat(&self) -> String {
        let id = message_id();
        self.send_message(
            "HeartbeatMessage",
            json!({"messageId": id, "healthy": true}),
        );
        id
    }

    /// Sends a TaskManifestMessage listing `tasks` as (task ARN, desired status); returns its
    /// messageId.
    pub fn send_manifest(&self, tasks: &[(&str, &str)], timeline: i64) -> String {
        let (cluster, instance) = self.session_arns();
        let id = message_id();
        let tasks: Vec<Value> = tasks
            .iter()
            .map(|(arn, desired)| json!({"taskArn": arn, "taskClusterArn": cluster, "desiredStatus": desired}))
            .collect();
        self.send_message(
            "TaskManifestMessage",
            json!({"clusterArn": cluster, "containerInstanceArn": instance, "messageId": id,
                   "generatedAt": epoch_millis(), "tasks": tasks, "timeline": timeline}),
        );
        id
    }

    /// Answers a TaskStopVerificationMessage: these tasks are to stop.
    pub fn send_stop_verification_ack(&self, message_id: &str, task_arns: &[&str]) {
        let stop: Vec<Value> = task_arns
            .iter()
            .map(|arn| json!({"taskArn": arn, "desiredStatus": "STOPPED"}))
            .collect();
        self.send_message(
            "TaskStopVerificationAck",
            json!({"messageId": message_id, "generatedAt": epoch_millis(), "stopTasks": stop}),
        );
    }

    /// Sends a CloseMessage, then closes the websocket.
    pub fn send_close(&self) {
        self.send_message(
            "CloseMessage",
            json!({"message": "ACS closes the connection"}),
        );
        self.send(Outgoing::Close);
    }

    /// Closes the websocket with a close frame carrying `code` (1008: policy violation).
    pub fn close_with_code(&self, code: u16) {
        self.send(Outgoing::CloseWith(code));
    }

    /// Cuts the ACS connection with no close frame.
    pub fn drop_connection(&self) {
        self.shared.update(|state| {
            if let Some(session) = state.acs.take() {
                let _ = session.stream.shutdown(Shutdown::Both);
            }
        });
    }
}

impl Drop for FakeEcs {
    fn drop(&mut self) {
        self.shared.update(|state| {
            state.stopping = true;
            if let Some(session) = state.acs.take() {
                let _ = session.stream.shutdown(Shutdown::Both);
            }
        });
        // Wakes the accept loop so it sees `stopping`.
        let _ = TcpStream::connect(("127.0.0.1", self.shared.port));
    }
}

// ---------------------------------------------------------------- connections

/// One request as the fakes read it (this one's, and those of `fake_aws.rs` and `fake_logs.rs`):
/// lower-case header names.
pub struct HttpRequest {
    pub method: String,
    pub path: String,
    pub raw_query: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The bytes of the head as received (replayed to tungstenite for an upgrade).
    pub head: Vec<u8>,
}

/// Reads one request; `buffer` keeps bytes read past it. `None` on close or a bad request.
pub fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<HttpRequest> {
    let mut chunk = [0u8; 8192];
    loop {
        let mut header_storage = [httparse::EMPTY_HEADER; 64];
        let mut request = httparse::Request::new(&mut header_storage);
        match request.parse(buffer) {
            Ok(httparse::Status::Complete(head_len)) => {
                let method = request.method?.to_string();
                let target = request.path?.to_string();
                let headers: Vec<(String, String)> = request
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_ascii_lowercase(),
                            String::from_utf8_lossy(h.value).into_owned(),
                        )
                    })
                    .collect();
                let length: usize = header_value(&headers, "content-length")
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                if length > MAX_BODY {
                    return None;
                }
                while buffer.len() < head_len + length {
                    let read = stream.read(&mut chunk).ok()?;
                    if read == 0 {
                        return None;
                    }
                    buffer.extend_from_slice(&chunk[..read]);
                }
                let head = buffer[..head_len].to_vec();
                let body = buffer[head_len..head_len + length].to_vec();
                buffer.drain(..head_len + length);
                let (path, raw_query) = target.split_once('?').unwrap_or((&target, ""));
                return Some(HttpRequest {
                    method,
                    path: path.to_string(),
                    raw_query: raw_query.to_string(),
                    headers,
                    body,
                    head,
                });
            }
            Ok(httparse::Status::Partial) if buffer.len() < MAX_HEAD => {
                let read = stream.read(&mut chunk).ok()?;
                if read == 0 {
                    return None;
                }
                buffer.extend_from_slice(&chunk[..read]);
            }
            _ => return None,
        }
    }
}

fn write_response(stream: &mut TcpStream, date: &str, status: u16, body: &Value) -> io::Result<()> {
    let body = body.to_string();
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        _ => "Error",
    };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nDate: {date}\r\nContent-Type: {JSON_CONTENT_TYPE}\r\nContent-Length: {}\r\nx-amzn-RequestId: {}\r\n\r\n{body}",
        body.len(),
        message_id()
    );
    stream.write_all(response.as_bytes())?;
    stream.flush()
}

fn error_body(type_name: &str, message: &str) -> Value {
    json!({"__type": type_name, "message": message})
}

fn serve_connection(shared: &Arc<Shared>, mut stream: TcpStream) {
    let mut buffer = Vec::new();
    while let Some(request) = read_request(&mut stream, &mut buffer) {
        if shared.lock().down {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
        let upgrade = header_value(&request.headers, "upgrade")
            .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
        if request.method == "GET" && upgrade {
            let mut prefix = request.head;
            prefix.extend_from_slice(&buffer);
            serve_acs(
                shared,
                stream,
                prefix,
                request.path,
                request.raw_query,
                request.headers,
            );
            return;
        }
        let (status, body) = api_call(shared, &request);
        if write_response(&mut stream, &http_date(shared.now()), status, &body).is_err() {
            return;
        }
        if header_value(&request.headers, "connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
        {
            return;
        }
    }
}

fn api_call(shared: &Arc<Shared>, request: &HttpRequest) -> (u16, Value) {
    let credentials = {
        let mut state = shared.lock();
        state.counters.api_requests += 1;
        state.credentials.clone()
    };
    shared.changed.notify_all();
    if let Err((type_name, message)) = verify(
        shared.now(),
        &credentials,
        &shared.region,
        &request.method,
        &request.path,
        &request.raw_query,
        &request.headers,
        &request.body,
    ) {
        shared.update(|state| state.counters.signature_failures += 1);
        return (403, error_body(type_name, &message));
    }
    let operation = header_value(&request.headers, "x-amz-target")
        .and_then(|target| target.strip_prefix(TARGET_PREFIX))
        .unwrap_or("")
        .to_string();
    let injected = {
        let mut state = shared.lock();
        state
            .faults
            .iter_mut()
            .find(|fault| fault.operation == operation && fault.remaining > 0)
            .map(|fault| {
                fault.remaining -= 1;
                (fault.status, error_body(&fault.type_name, &fault.message))
            })
    };
    let (status, answer) = match injected {
        Some(injected) => injected,
        None => answer_call(shared, request, &operation),
    };
    shared.update(|state| state.calls.push((operation.clone(), status)));
    (status, answer)
}

/// The answer to a well-signed call of `operation`.
fn answer_call(shared: &Arc<Shared>, request: &HttpRequest, operation: &str) -> (u16, Value) {
    let content_type_ok = header_value(&request.headers, "content-type")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(JSON_CONTENT_TYPE));
    if request.method != "POST" || request.path != "/" || !content_type_ok {
        return (
            400,
            error_body(
                "UnknownOperationException",
                "expected POST / with application/x-amz-json-1.1",
            ),
        );
    }
    let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
        return (
            400,
            error_body("SerializationException", "the body is not JSON"),
        );
    };
    let text = |name: &str| {
        body.get(name)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    match operation {
        "RegisterContainerInstance" => {
            let mut state = shared.lock();
            state.registrations.push(body.clone());
            let deregistered = body
                .get("containerInstanceArn")
                .and_then(Value::as_str)
                .is_some_and(|arn| state.deregistered.iter().any(|known| known == arn));
            if state.inactive || deregistered {
                drop(state);
                shared.changed.notify_all();
                return (
                    400,
                    error_body(
                        "InactiveInstanceException",
                        "The container instance is inactive.",
                    ),
                );
            }
            let cluster_ref = text("cluster");
            let cluster = cluster_ref.rsplit('/').next().unwrap_or("default");
            let cluster = if cluster.is_empty() {
                "default"
            } else {
                cluster
            };
            let arn = match body.get("containerInstanceArn").and_then(Value::as_str) {
                Some(arn) if !arn.is_empty() => arn.to_string(),
                _ => format!(
                    "arn:aws:ecs:{}:{ACCOUNT}:container-instance/{cluster}/{}",
                    shared.region,
                    random_hex32()
                ),
            };
            if !state.instances.contains(&arn) {
                state.instances.push(arn.clone());
            }
            drop(state);
            shared.changed.notify_all();
            (
                200,
                json!({"containerInstance": {
                    "containerInstanceArn": arn,
                    "ec2InstanceId": format!("mi-{}", &random_hex32()[..17]),
                    "status": "ACTIVE",
                    "agentConnected": false,
                    "versionInfo": body.get("versionInfo").cloned().unwrap_or(json!({})),
                    "attributes": body.get("attributes").cloned().unwrap_or(json!([])),
                    "registeredResources": body.get("totalResources").cloned().unwrap_or(json!([])),
                    "remainingResources": body.get("totalResources").cloned().unwrap_or(json!([])),
                    "registeredAt": epoch_millis() as f64 / 1000.0,
                    "runningTasksCount": 0,
                    "pendingTasksCount": 0,
                }}),
            )
        }
        "DiscoverPollEndpoint" => {
            let url = format!("http://127.0.0.1:{}/", shared.port);
            let telemetry = shared
                .lock()
                .telemetry_endpoint
                .clone()
                .unwrap_or_else(|| url.clone());
            (
                200,
                json!({"endpoint": url, "telemetryEndpoint": telemetry, "serviceConnectEndpoint": url}),
            )
        }
        "SubmitTaskStateChange" | "SubmitContainerStateChange" => {
            let containers = if operation == "SubmitTaskStateChange" {
                body.get("containers")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
            } else {
                vec![body.clone()]
            };
            let change = StateChange {
                operation: operation.to_string(),
                task_arn: text("task"),
                status: text("status"),
                reason: body
                    .get("reason")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                containers,
                body: body.clone(),
            };
            shared.update(|state| state.state_changes.push(change));
            (200, json!({"acknowledgment": "true"}))
        }
        _ => (
            400,
            error_body(
                "UnknownOperationException",
                &format!("unknown operation {operation:?}"),
            ),
        ),
    }
}

/// The connection's bytes with the request head (already read) put back in front.
struct Replayed {
    prefix: Vec<u8>,
    position: usize,
    stream: TcpStream,
}

impl Read for Replayed {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.position < self.prefix.len() {
            let count = out.len().min(self.prefix.len() - self.position);
            out[..count].copy_from_slice(&self.prefix[self.position..self.position + count]);
            self.position += count;
            return Ok(count);
        }
        self.stream.read(out)
    }
}

impl Write for Replayed {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.stream.write(bytes)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

fn refuse(status: u16, body: Value) -> ErrorResponse {
    let mut response = ErrorResponse::new(Some(body.to_string()));
    *response.status_mut() = tungstenite::http::StatusCode::from_u16(status)
        .unwrap_or(tungstenite::http::StatusCode::BAD_REQUEST);
    response
}

fn serve_acs(
    shared: &Arc<Shared>,
    stream: TcpStream,
    prefix: Vec<u8>,
    path: String,
    raw_query: String,
    headers: Vec<(String, String)>,
) {
    let query = parse_query(&raw_query);
    let (credentials, inactive, known) = {
        let state = shared.lock();
        let instance = query
            .get("containerInstanceArn")
            .cloned()
            .unwrap_or_default();
        (
            state.credentials.clone(),
            state.inactive,
            state.instances.contains(&instance),
        )
    };
    let Ok(control) = stream.try_clone() else {
        return;
    };
    let replayed = Replayed {
        prefix,
        position: 0,
        stream,
    };
    let region = shared.region.clone();
    let now = shared.now();
    let signature_failed = std::cell::Cell::new(false);
    // tungstenite's callback returns its own (large) ErrorResponse.
    #[allow(clippy::result_large_err)]
    let check = |_request: &Request, response: Response| -> Result<Response, ErrorResponse> {
        verify(
            now,
            &credentials,
            &region,
            "GET",
            &path,
            &raw_query,
            &headers,
            b"",
        )
        .map_err(|(type_name, message)| {
            signature_failed.set(true);
            refuse(403, error_body(type_name, &message))
        })?;
        if path != "/ws" {
            return Err(refuse(
                404,
                error_body("UnknownOperationException", "ACS listens on /ws"),
            ));
        }
        for name in [
            "clusterArn",
            "containerInstanceArn",
            "seqNum",
            "protocolVersion",
            "sendCredentials",
        ] {
            if !query.contains_key(name) {
                return Err(refuse(
                    400,
                    error_body("BadRequestException", &format!("missing {name}")),
                ));
            }
        }
        if inactive {
            return Err(refuse(
                400,
                error_body(
                    "InactiveInstanceException",
                    "The container instance is inactive.",
                ),
            ));
        }
        if !known {
            return Err(refuse(
                400,
                error_body("InvalidInstanceException", "unknown containerInstanceArn"),
            ));
        }
        Ok(response)
    };
    let mut socket: WebSocket<Replayed> = match tungstenite::accept_hdr(replayed, check) {
        Ok(socket) => socket,
        Err(_) => {
            if signature_failed.get() {
                shared.update(|state| state.counters.signature_failures += 1);
            }
            return;
        }
    };
    let (sender, receiver) = mpsc::channel();
    let Ok(session_stream) = control.try_clone() else {
        return;
    };
    shared.update(|state| {
        if let Some(old) = state.acs.take() {
            let _ = old.stream.shutdown(Shutdown::Both);
        }
        state.acs = Some(AcsSession {
            sender,
            stream: session_stream,
            query: query.clone(),
        });
        state.acs_queries.push(query.clone());
        state.counters.acs_sessions += 1;
    });
    let peer = control.peer_addr().ok();
    let _ = control.set_read_timeout(Some(Duration::from_millis(20)));
    loop {
        while let Ok(outgoing) = receiver.try_recv() {
            let sent = match outgoing {
                Outgoing::Text(text) => socket.send(Message::text(text)),
                Outgoing::Close => socket.close(None),
                Outgoing::CloseWith(code) => {
                    socket.close(Some(tungstenite::protocol::CloseFrame {
                        code: code.into(),
                        reason: "closed by the fake".into(),
                    }))
                }
            };
            if sent.is_err() {
                break;
            }
        }
        match socket.read() {
            Ok(Message::Text(text)) => {
                if let Ok(value) = serde_json::from_str::<Value>(text.as_str()) {
                    let message = AgentMessage {
                        type_name: value
                            .get("type")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        message: value.get("message").cloned().unwrap_or(Value::Null),
                    };
                    shared.update(|state| state.agent_messages.push(message));
                }
            }
            Ok(_) => {}
            Err(tungstenite::Error::Io(error))
                if matches!(
                    error.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                let _ = socket.flush();
            }
            Err(_) => break,
        }
    }
    let _ = control.shutdown(Shutdown::Both);
    shared.update(|state| {
        let same = state
            .acs
            .as_ref()
            .is_some_and(|s| s.stream.peer_addr().ok() == peer);
        if same {
            state.acs = None;
        }
    });
}
