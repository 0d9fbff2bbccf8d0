//! An in-process fake of the AWS services a task's roles need, on 127.0.0.1 (plain HTTP), one
//! server for all four as `AWS_ENDPOINT_URL` makes them: STS `AssumeRole` (the query protocol:
//! a form body, an XML answer, XML `ErrorResponse`s), SSM `GetParameters`, Secrets Manager
//! `GetSecretValue` and ECR `GetAuthorizationToken` (JSON 1.1: `X-Amz-Target`, errors as
//! `{"__type", "message"}`). Every request's SigV4 signature is checked with the independent
//! implementation of `fake_ecs.rs` (`verify_for_service`, for the service the operation
//! belongs to and any region the test allows), so a test file that uses this one includes
//! `support/fake_ecs.rs` as `mod fake_ecs` too. The test sets what the services hold (roles,
//! parameters, secrets and their versions, registries), scripts failures
//! ([`FakeAws::fail_next`]: an error answer or a connection closed without one, a number of
//! times), runs the fake's clock ahead of the host's ([`FakeAws::set_clock_ahead`]: every
//! answer's `Date` says it, signatures 5 minutes off are refused), and reads every call it
//! answered ([`FakeAws::calls`]). Shapes follow the services' models.
#![allow(dead_code)]

use crate::fake_ecs::{
    http_date, parse_query, read_request, verify_for_service, Credentials, HttpRequest as Request,
};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{SystemTime, UNIX_EPOCH};

pub const ACCOUNT: &str = "123456789012";
pub const SSM_TARGET: &str = "AmazonSSM.GetParameters";
pub const SECRETS_TARGET: &str = "secretsmanager.GetSecretValue";
pub const ECR_TARGET: &str = "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken";

/// What a scripted failure does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Answers this status with this error code and message in the service's protocol.
    Answer {
        status: u16,
        code: String,
        message: String,
    },
    /// Closes the connection without an answer.
    Close,
}

impl Fault {
    pub fn answer(status: u16, code: &str, message: &str) -> Fault {
        Fault::Answer {
            status,
            code: code.to_string(),
            message: message.to_string(),
        }
    }
}

/// One request the fake answered (or closed on a [`Fault::Close`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The SigV4 service it was signed for and belongs to: `sts`, `ssm`, `secretsmanager`, `ecr`.
    pub service: String,
    /// `AssumeRole`, `GetParameters`, `GetSecretValue`, `GetAuthorizationToken`, or `?`.
    pub operation: String,
    /// The region of the signature's scope.
    pub region: String,
    /// The access key it was signed with.
    pub access_key: String,
    /// The status answered; 0 for a closed connection, 403 for a refused signature.
    pub status: u16,
    /// The request: the JSON body, or STS's form as a JSON object of strings.
    pub request: Value,
}

/// A version of a secret.
#[derive(Debug, Clone)]
pub struct SecretVersion {
    pub version_id: String,
    pub stages: Vec<String>,
    /// `Ok`: a `SecretString`; `Err`: a `SecretBinary`'s bytes.
    pub value: Result<String, Vec<u8>>,
}

struct State {
    credentials: Vec<Credentials>,
    regions: Vec<String>,
    clock_ahead_seconds: i64,
    /// (operation, remaining, fault).
    faults: Vec<(String, u32, Fault)>,
    roles: Vec<String>,
    parameters: BTreeMap<String, String>,
    /// Secret name → its versions.
    secrets: BTreeMap<String, Vec<SecretVersion>>,
    issued: u64,
    /// Overrides every `AssumeRole`'s lifetime, in seconds (shorter than STS allows).
    lifetime_seconds: Option<i64>,
    calls: Vec<Call>,
    stopping: bool,
}

struct Shared {
    state: Mutex<State>,
    port: u16,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn now(&self) -> i64 {
        let local = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|elapsed| elapsed.as_secs() as i64)
            .unwrap_or(0);
        local + self.lock().clock_ahead_seconds
    }
}

/// The fake. Dropping it stops accepting.
pub struct FakeAws {
    shared: Arc<Shared>,
}

impl FakeAws {
    /// Listens on a free loopback port; accepts [`Credentials::test`] in `us-west-2`.
    pub fn start() -> FakeAws {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake AWS");
        let port = listener.local_addr().expect("its address").port();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                credentials: vec![Credentials::test()],
                regions: vec!["us-west-2".to_string()],
                clock_ahead_seconds: 0,
                faults: Vec::new(),
                roles: Vec::new(),
                parameters: BTreeMap::new(),
                secrets: BTreeMap::new(),
                issued: 0,
                lifetime_seconds: None,
                calls: Vec::new(),
                stopping: false,
            }),
            port,
        });
        let accepting = Arc::clone(&shared);
        thread::Builder::new()
            .name("fake-aws-accept".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { continue };
                    if accepting.lock().stopping {
                        return;
                    }
                    let connection = Arc::clone(&accepting);
                    let _ = thread::Builder::new()
                        .name("fake-aws-conn".into())
                        .spawn(move || serve_connection(&connection, stream));
                }
            })
            .expect("spawn the fake AWS");
        FakeAws { shared }
    }

    /// `http://127.0.0.1:<port>`, for `AWS_ENDPOINT_URL`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.shared.port)
    }

    pub fn port(&self) -> u16 {
        self.shared.port
    }

    /// Also accepts signatures made with `credentials`.
    pub fn accept_credentials(&self, credentials: Credentials) {
        self.shared.lock().credentials.push(credentials);
    }

    /// Also accepts signatures scoped to `region`.
    pub fn accept_region(&self, region: &str) {
        self.shared.lock().regions.push(region.to_string());
    }

    /// The fake's clock runs `seconds` ahead of the host's (behind when negative).
    pub fn set_clock_ahead(&self, seconds: i64) {
        self.shared.lock().clock_ahead_seconds = seconds;
    }

    /// The next `count` calls of `operation` (`AssumeRole`, …) fail with `fault`, after their
    /// signature was checked.
    pub fn fail_next(&self, operation: &str, count: u32, fault: Fault) {
        self.shared
            .lock()
            .faults
            .push((operation.to_string(), count, fault));
    }

    /// Every `AssumeRole` from now on hands out credentials that expire in `seconds`, whatever
    /// the request asked (STS's own minimum is 15 minutes: this lets a test see a refresh).
    pub fn set_credentials_lifetime(&self, seconds: i64) {
        self.shared.lock().lifetime_seconds = Some(seconds);
    }

    /// STS lets the fake's credentials assume `role_arn`.
    pub fn add_role(&self, role_arn: &str) {
        self.shared.lock().roles.push(role_arn.to_string());
    }

    /// SSM holds parameter `name` (`/path/name` or `name`) with `value`.
    pub fn put_parameter(&self, name: &str, value: &str) {
        self.shared
            .lock()
            .parameters
            .insert(name.to_string(), value.to_string());
    }

    /// Secrets Manager holds secret `name` with these versions (the first with `AWSCURRENT`
    /// in its stages is the default).
    pub fn put_secret(&self, name: &str, versions: Vec<SecretVersion>) {
        self.shared
            .lock()
            .secrets
            .insert(name.to_string(), versions);
    }

    /// The ARN of secret `name` in `region` (with the random suffix Secrets Manager adds).
    pub fn secret_arn(region: &str, name: &str) -> String {
        format!("arn:aws:secretsmanager:{region}:{ACCOUNT}:secret:{name}-AbCdEf")
    }

    /// The ARN of parameter `name` in `region`.
    pub fn parameter_arn(region: &str, name: &str) -> String {
        format!(
            "arn:aws:ssm:{region}:{ACCOUNT}:parameter/{}",
            name.strip_prefix('/').unwrap_or(name)
        )
    }

    /// The ECR password of the `n`th token issued (1-based).
    pub fn ecr_password(n: u64) -> String {
        format!("ecr-password-{n}")
    }

    /// Every call answered, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.shared.lock().calls.clone()
    }

    /// The statuses answered to `operation`, in order.
    pub fn statuses(&self, operation: &str) -> Vec<u16> {
        self.calls()
            .into_iter()
            .filter(|call| call.operation == operation)
            .map(|call| call.status)
            .collect()
    }
}

impl Drop for FakeAws {
    fn drop(&mut self) {
        self.shared.lock().stopping = true;
        // Wakes the accept loop so it sees `stopping`.
        let _ = TcpStream::connect(("127.0.0.1", self.shared.port));
    }
}

// ---------------------------------------------------------------- HTTP

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(known, _)| known.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
}

/// An answer: status, content type, body.
type Answer = (u16, &'static str, String);

fn serve_connection(shared: &Arc<Shared>, mut stream: TcpStream) {
    let mut buffer = Vec::new();
    while let Some(request) = read_request(&mut stream, &mut buffer) {
        let Some((status, content_type, body)) = answer(shared, &request) else {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        };
        let reason = match status {
            200 => "OK",
            400 => "Bad Request",
            403 => "Forbidden",
            429 => "Too Many Requests",
            500 => "Internal Server Error",
            503 => "Service Unavailable",
            _ => "Error",
        };
        let response = format!(
            "HTTP/1.1 {status} {reason}\r\nDate: {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nx-amzn-RequestId: 00000000-0000-4000-8000-000000000000\r\n\r\n{body}",
            http_date(shared.now()),
            body.len()
        );
        if stream.write_all(response.as_bytes()).is_err() {
            return;
        }
        if header(&request.headers, "connection").is_some_and(|v| v.eq_ignore_ascii_case("close")) {
            return;
        }
    }
}

/// The service and operation of a request: STS by its form's `Action`, the others by their
/// `X-Amz-Target`.
fn operation_of(request: &Request) -> (&'static str, String, Value) {
    if let Some(target) = header(&request.headers, "x-amz-target") {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let service = match target {
            SSM_TARGET => "ssm",
            SECRETS_TARGET => "secretsmanager",
            ECR_TARGET => "ecr",
            _ => "?",
        };
        let operation = target.rsplit('.').next().unwrap_or("?").to_string();
        return (service, operation, body);
    }
    let form = parse_query(&String::from_utf8_lossy(&request.body));
    let action = form.get("Action").cloned().unwrap_or_else(|| "?".into());
    let form = Value::Object(
        form.into_iter()
            .map(|(name, value)| (name, Value::String(value)))
            .collect(),
    );
    ("sts", action, form)
}

/// The region of the request's signature scope.
fn scope_region(headers: &[(String, String)]) -> String {
    header(headers, "authorization")
        .and_then(|value| value.split("Credential=").nth(1))
        .and_then(|credential| credential.split('/').nth(2))
        .unwrap_or("")
        .to_string()
}

fn scope_access_key(headers: &[(String, String)]) -> String {
    header(headers, "authorization")
        .and_then(|value| value.split("Credential=").nth(1))
        .and_then(|credential| credential.split('/').next())
        .unwrap_or("")
        .to_string()
}

fn error_answer(service: &str, status: u16, code: &str, message: &str) -> Answer {
    if service == "sts" {
        let kind = if status >= 500 { "Receiver" } else { "Sender" };
        let body = format!(
            "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\n  <Error>\n    <Type>{kind}</Type>\n    <Code>{}</Code>\n    <Message>{}</Message>\n  </Error>\n  <RequestId>00000000-0000-4000-8000-000000000000</RequestId>\n</ErrorResponse>\n",
            xml_escape(code),
            xml_escape(message)
        );
        return (status, "text/xml", body);
    }
    let body = json!({"__type": code, "message": message}).to_string();
    (status, "application/x-amz-json-1.1", body)
}

fn answer(shared: &Arc<Shared>, request: &Request) -> Option<Answer> {
    let (service, operation, body) = operation_of(request);
    let region = scope_region(&request.headers);
    let (credentials, regions) = {
        let state = shared.lock();
        (state.credentials.clone(), state.regions.clone())
    };
    let signed = if request.method != "POST" || request.path != "/" {
        Err((
            "UnknownOperationException",
            format!("{} {} is not an operation", request.method, request.path),
        ))
    } else if !regions.contains(&region) {
        Err((
            "InvalidSignatureException",
            format!("Credential should be scoped to a valid region, not '{region}'"),
        ))
    } else {
        verify_for_service(
            service,
            shared.now(),
            &credentials,
            &region,
            &request.method,
            &request.path,
            &request.raw_query,
            &request.headers,
            &request.body,
        )
        .map_err(|(kind, message)| {
            // STS names a refused signature its own way.
            let kind = match (service, kind) {
                ("sts", "InvalidSignatureException") => "SignatureDoesNotMatch",
                ("sts", "UnrecognizedClientException") => "InvalidClientTokenId",
                (_, kind) => kind,
            };
            (kind, message)
        })
    };
    let injected = signed.is_ok().then(|| {
        let mut state = shared.lock();
        state
            .faults
            .iter_mut()
            .find(|(name, remaining, _)| *name == operation && *remaining > 0)
            .map(|(_, remaining, fault)| {
                *remaining -= 1;
                fault.clone()
            })
    });
    let answered = match (signed, injected.flatten()) {
        (Err((kind, message)), _) => Some(error_answer(service, 403, kind, &message)),
        (Ok(()), Some(Fault::Close)) => None,
        (
            Ok(()),
            Some(Fault::Answer {
                status,
                code,
                message,
            }),
        ) => Some(error_answer(service, status, &code, &message)),
        (Ok(()), None) => Some(match operation.as_str() {
            "AssumeRole" if service == "sts" => assume_role(shared, &body),
            "GetParameters" => get_parameters(shared, &region, &body),
            "GetSecretValue" => get_secret_value(shared, &body),
            "GetAuthorizationToken" => get_authorization_token(shared, &region, &body),
            _ => error_answer(
                service,
                400,
                "UnknownOperationException",
                &format!("{operation} is not an operation"),
            ),
        }),
    };
    shared.lock().calls.push(Call {
        service: service.to_string(),
        operation,
        region,
        access_key: scope_access_key(&request.headers),
        status: answered.as_ref().map_or(0, |(status, _, _)| *status),
        request: body,
    });
    answered
}

// ---------------------------------------------------------------- the services

fn assume_role(shared: &Arc<Shared>, form: &Value) -> Answer {
    let field = |name: &str| form.get(name).and_then(Value::as_str).unwrap_or("");
    let invalid = |message: &str| error_answer("sts", 400, "ValidationError", message);
    if field("Version") != "2011-06-15" {
        return invalid("Version must be 2011-06-15");
    }
    let session = field("RoleSessionName");
    if session.len() < 2
        || session.len() > 64
        || !session
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+=,.@_-".contains(c))
    {
        return invalid(
            "1 validation error detected: Value at 'roleSessionName' failed to satisfy constraint",
        );
    }
    let duration: i64 = match field("DurationSeconds") {
        "" => 3600,
        text => match text.parse() {
            Ok(seconds) if (900..=43200).contains(&seconds) => seconds,
            _ => return invalid("DurationSeconds must be between 900 and 43200"),
        },
    };
    let role = field("RoleArn").to_string();
    let now = shared.now();
    let issued = {
        let mut state = shared.lock();
        if !state.roles.contains(&role) {
            return error_answer(
                "sts",
                403,
                "AccessDenied",
                &format!("User: arn:aws:iam::{ACCOUNT}:user/test is not authorized to perform: sts:AssumeRole on resource: {role}"),
            );
        }
        state.issued += 1;
        (state.issued, state.lifetime_seconds.unwrap_or(duration))
    };
    let (issued, duration) = issued;
    let role_name = role.rsplit('/').next().unwrap_or("role");
    let body = format!(
        "<AssumeRoleResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\n  <AssumeRoleResult>\n    <SourceIdentity>deckhand</SourceIdentity>\n    <AssumedRoleUser>\n      <Arn>arn:aws:sts::{ACCOUNT}:assumed-role/{role_name}/{session}</Arn>\n      <AssumedRoleId>AROA3XFRBF535PLBIFPI4:{session}</AssumedRoleId>\n    </AssumedRoleUser>\n    <Credentials>\n      <AccessKeyId>ASIAFAKE{issued:08}</AccessKeyId>\n      <SecretAccessKey>secret/{issued}+key&amp;more</SecretAccessKey>\n      <SessionToken>token-{issued}</SessionToken>\n      <Expiration>{}</Expiration>\n    </Credentials>\n    <PackedPolicySize>6</PackedPolicySize>\n  </AssumeRoleResult>\n  <ResponseMetadata>\n    <RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId>\n  </ResponseMetadata>\n</AssumeRoleResponse>\n",
        rfc3339(now + duration)
    );
    (200, "text/xml", body)
}

/// The credentials the `n`th `AssumeRole` hands out (1-based).
pub fn assumed_credentials(n: u64) -> Credentials {
    Credentials {
        access_key: format!("ASIAFAKE{n:08}"),
        secret_key: format!("secret/{n}+key&more"),
        session_token: Some(format!("token-{n}")),
    }
}

fn get_parameters(shared: &Arc<Shared>, region: &str, body: &Value) -> Answer {
    let invalid = |message: &str| error_answer("ssm", 400, "ValidationException", message);
    let Some(names) = body.get("Names").and_then(Value::as_array) else {
        return invalid("Names is required");
    };
    if names.is_empty() || names.len() > 10 {
        return invalid("Names holds 1 to 10 names");
    }
    let state = shared.lock();
    let decrypt = body.get("WithDecryption") == Some(&Value::Bool(true));
    let mut parameters = Vec::new();
    let mut invalid_names = Vec::new();
    for name in names.iter().filter_map(Value::as_str) {
        let stored = state.parameters.iter().find(|(known, _)| {
            known.as_str() == name || FakeAws::parameter_arn(region, known) == name
        });
        match stored {
            Some((known, value)) => parameters.push(json!({
                "Name": known,
                "Type": "SecureString",
                "Value": if decrypt { value.clone() } else { "AQICAHencrypted".to_string() },
                "Version": 1,
                "ARN": FakeAws::parameter_arn(region, known),
                "DataType": "text",
                "LastModifiedDate": 1.7e9,
            })),
            None => invalid_names.push(name.to_string()),
        }
    }
    let body = json!({"Parameters": parameters, "InvalidParameters": invalid_names});
    (200, "application/x-amz-json-1.1", body.to_string())
}

fn get_secret_value(shared: &Arc<Shared>, body: &Value) -> Answer {
    let field = |name: &str| body.get(name).and_then(Value::as_str);
    let not_found = || {
        error_answer(
            "secretsmanager",
            400,
            "ResourceNotFoundException",
            "Secrets Manager can't find the specified secret.",
        )
    };
    let Some(id) = field("SecretId") else {
        return error_answer(
            "secretsmanager",
            400,
            "ValidationException",
            "SecretId is required",
        );
    };
    let state = shared.lock();
    let Some((name, versions)) = state.secrets.iter().find(|(name, _)| {
        name.as_str() == id
            || state
                .regions
                .iter()
                .any(|region| FakeAws::secret_arn(region, name) == id)
    }) else {
        return not_found();
    };
    let stage = field("VersionStage");
    let version_id = field("VersionId");
    let found = versions.iter().find(|version| {
        version_id.is_none_or(|wanted| version.version_id == wanted)
            && match (stage, version_id) {
                (Some(stage), _) => version.stages.iter().any(|known| known == stage),
                (None, Some(_)) => true,
                (None, None) => version.stages.iter().any(|known| known == "AWSCURRENT"),
            }
    });
    let Some(version) = found else {
        return not_found();
    };
    let mut answer = json!({
        "ARN": FakeAws::secret_arn(state.regions.first().map_or("us-west-2", String::as_str), name),
        "Name": name,
        "VersionId": version.version_id,
        "VersionStages": version.stages,
        "CreatedDate": 1.7e9,
    });
    match &version.value {
        Ok(text) => answer["SecretString"] = Value::from(text.as_str()),
        Err(bytes) => answer["SecretBinary"] = Value::from(base64(bytes)),
    }
    (200, "application/x-amz-json-1.1", answer.to_string())
}

fn get_authorization_token(shared: &Arc<Shared>, region: &str, body: &Value) -> Answer {
    let registries: Vec<String> = match body.get("registryIds").and_then(Value::as_array) {
        Some(ids) => ids
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        None => vec![ACCOUNT.to_string()],
    };
    let now = shared.now();
    let mut state = shared.lock();
    let data: Vec<Value> = registries
        .iter()
        .map(|registry| {
            state.issued += 1;
            let token = base64(format!("AWS:{}", FakeAws::ecr_password(state.issued)).as_bytes());
            json!({
                "authorizationToken": token,
                "expiresAt": (now + 12 * 3600) as f64 + 0.5,
                "proxyEndpoint": format!("https://{registry}.dkr.ecr.{region}.amazonaws.com"),
            })
        })
        .collect();
    let body = json!({"authorizationData": data});
    (200, "application/x-amz-json-1.1", body.to_string())
}

// ---------------------------------------------------------------- encodings (independent)

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `YYYY-MM-DDTHH:MM:SSZ` of epoch `seconds`.
pub fn rfc3339(seconds: i64) -> String {
    let days = seconds.div_euclid(86_400);
    let rest = seconds.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}
