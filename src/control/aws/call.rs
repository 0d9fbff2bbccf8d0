//! [`AwsClient`]: one signed call to STS, SSM, Secrets Manager or ECR, with its retries. The
//! request is signed with the credentials the caller hands over ([`SigningCredentials`]: fixed
//! ones, or a source read again before each attempt, so a token that expired meanwhile is
//! replaced), for the region the caller names, and sent through `ecs::signed_call`. An error
//! answer is read by its protocol (JSON `__type`/`message`, STS's XML `Code`/`Message`) and
//! then decided here ([`is_retryable_refusal`], pure): throttling, 5xx, an expired token or a
//! failure to connect is tried again after a back-off that doubles ([`RetryPolicy`], a few
//! attempts, bounded); an answer saying the signing time is off corrects the process's signing
//! clock and the call is signed again at once; anything else is final ([`AwsError::Refused`]).

use std::time::Duration;

use super::endpoint::service_endpoint;
use super::{AwsError, Service};
use crate::control::ecs::clock_skew::{signing_clock, SigningClock};
use crate::control::ecs::credentials::{CredentialChain, Credentials};
use crate::control::ecs::signed_call::{self, Answer, SignedRequest};
use crate::control::ecs::{is_throttling, EcsError, Endpoint};
use crate::net::proxy::ProxySettings;

/// An answer body larger than this is refused: a secret is at most 64 KiB, ten SSM parameters
/// at most 80 KiB.
pub const MAX_ANSWER_BYTES: u64 = 1024 * 1024;
/// Connect, send and answer of one attempt wait at most this long by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The JSON 1.1 protocol's content type (SSM, Secrets Manager, ECR).
pub const JSON_CONTENT_TYPE: &str = "application/x-amz-json-1.1";
/// The query protocol's content type (STS).
pub const FORM_CONTENT_TYPE: &str = "application/x-www-form-urlencoded; charset=utf-8";

/// Error codes that say the credentials' token expired or the request's time passed: signed
/// again with the source's current credentials, after a back-off.
const EXPIRED_TOKEN_CODES: &[&str] = &[
    "ExpiredToken",
    "ExpiredTokenException",
    "RequestExpired",
    "TokenRefreshRequired",
];
/// Error codes of a service failing on its side whatever the status.
const SERVICE_FAILURE_CODES: &[&str] = &[
    "InternalFailure",
    "InternalError",
    "InternalServerError",
    "InternalServiceError",
    "InternalServiceErrorException",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "ServerException",
    "IDPCommunicationError",
];

/// Where the credentials a call is signed with come from; read before each attempt.
pub trait SigningCredentials {
    fn signing_credentials(&self) -> Result<Credentials, String>;
}

impl SigningCredentials for Credentials {
    fn signing_credentials(&self) -> Result<Credentials, String> {
        Ok(self.clone())
    }
}

impl SigningCredentials for CredentialChain {
    fn signing_credentials(&self) -> Result<Credentials, String> {
        self.current()
    }
}

impl<F: Fn() -> Result<Credentials, String>> SigningCredentials for F {
    fn signing_credentials(&self) -> Result<Credentials, String> {
        self()
    }
}

/// How often and how patiently a call is tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, at least 1.
    pub attempts: u32,
    /// The wait before the second attempt; doubled for each next one.
    pub first_wait: Duration,
    /// No wait is longer than this.
    pub max_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            attempts: 4,
            first_wait: Duration::from_millis(250),
            max_wait: Duration::from_secs(4),
        }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt `attempt` (1-based).
    pub fn wait_after(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(16);
        self.first_wait
            .saturating_mul(1 << doublings)
            .min(self.max_wait)
    }
}

/// Whether an error answer (`status`, the service's `code`) is worth another attempt:
/// 5xx, 429, throttling, a service failure, an expired token. `AccessDenied`,
/// `ResourceNotFoundException`, `ParameterNotFound`, a validation error and every other
/// refusal are final, as the Go agent has them. Pure.
pub fn is_retryable_refusal(status: u16, code: &str) -> bool {
    status >= 500
        || status == 429
        || is_throttling(code)
        || EXPIRED_TOKEN_CODES.contains(&code)
        || SERVICE_FAILURE_CODES.contains(&code)
}

/// The protocol's error reader: (code, message) of an error answer.
pub(super) type ErrorReader = fn(&Answer) -> (String, String);

/// One operation to call.
pub(super) struct Operation<'a> {
    pub service: Service,
    /// The operation's name, for messages (`GetParameters`).
    pub name: &'a str,
    pub region: &'a str,
    /// Headers sent and signed besides `Host` (the content type, `X-Amz-Target`).
    pub headers: &'a [(&'a str, &'a str)],
    pub body: &'a [u8],
    pub read_error: ErrorReader,
}

/// A client of STS, SSM, Secrets Manager and ECR; cheap to clone, safe to share.
#[derive(Debug, Clone)]
pub struct AwsClient {
    /// The `AWS_ENDPOINT_URL*` values read at construction.
    endpoint_values: Vec<(String, String)>,
    proxies: ProxySettings,
    timeout: Duration,
    retry: RetryPolicy,
    clock: &'static SigningClock,
}

impl AwsClient {
    /// A client whose endpoints come from `lookup` (`AWS_ENDPOINT_URL_<SERVICE>`,
    /// `AWS_ENDPOINT_URL`), reached through `proxies`, signing with the process's signing clock.
    pub fn new(lookup: &dyn Fn(&str) -> Option<String>, proxies: ProxySettings) -> AwsClient {
        let names = [
            Service::Sts,
            Service::Ssm,
            Service::SecretsManager,
            Service::Ecr,
        ]
        .map(Service::endpoint_variable);
        let endpoint_values = names
            .iter()
            .copied()
            .chain(["AWS_ENDPOINT_URL"])
            .filter_map(|name| lookup(name).map(|value| (name.to_string(), value)))
            .collect();
        AwsClient {
            endpoint_values,
            proxies,
            timeout: DEFAULT_TIMEOUT,
            retry: RetryPolicy::default(),
            clock: signing_clock(),
        }
    }

    pub fn with_retry_policy(mut self, retry: RetryPolicy) -> AwsClient {
        self.retry = retry;
        self
    }

    pub fn with_timeout(mut self, timeout: Duration) -> AwsClient {
        self.timeout = timeout;
        self
    }

    /// Signs with `clock` instead of the process's (a test's own, so its corrections stay its
    /// own).
    pub fn with_signing_clock(mut self, clock: &'static SigningClock) -> AwsClient {
        self.clock = clock;
        self
    }

    pub fn retry_policy(&self) -> RetryPolicy {
        self.retry
    }

    /// Where `service` is for a call in `region`.
    pub fn endpoint(&self, service: Service, region: &str) -> Result<Endpoint, AwsError> {
        let lookup = |name: &str| {
            self.endpoint_values
                .iter()
                .find(|(known, _)| known == name)
                .map(|(_, value)| value.clone())
        };
        service_endpoint(service, region, &lookup).map_err(|error| {
            AwsError::Config(format!("{} endpoint: {error}", service.display_name()))
        })
    }

    /// Calls `operation` with its retries; the body of the successful answer.
    pub(super) fn call(
        &self,
        operation: &Operation<'_>,
        credentials: &dyn SigningCredentials,
    ) -> Result<Vec<u8>, AwsError> {
        let service = operation.service;
        let endpoint = self.endpoint(service, operation.region)?;
        let agent = signed_call::agent_for(&endpoint, &self.proxies, self.timeout)
            .map_err(|error| AwsError::Config(error.to_string()))?;
        let request = SignedRequest {
            method: "POST",
            endpoint: &endpoint,
            path: &endpoint.path,
            headers: operation.headers,
            body: operation.body,
            region: operation.region,
            service: service.signing_name(),
            max_answer_bytes: MAX_ANSWER_BYTES,
        };
        let attempts = self.retry.attempts.max(1);
        let mut attempt = 1;
        let mut skew_corrected = false;
        loop {
            let credentials = credentials
                .signing_credentials()
                .map_err(AwsError::Credentials)?;
            let failure =
                match signed_call::send(&agent, &request, &credentials, &self.clock.amz_date()) {
                    Ok(answer) if (200..300).contains(&answer.status) => return Ok(answer.body),
                    Ok(answer) => {
                        let (code, message) = (operation.read_error)(&answer);
                        let refusal = EcsError::Service {
                            status: answer.status,
                            error_type: code.clone(),
                            message: message.clone(),
                        };
                        if !skew_corrected
                            && self.clock.correct(
                                service.display_name(),
                                &refusal,
                                answer.date.as_deref(),
                            )
                        {
                            skew_corrected = true;
                            continue;
                        }
                        if !is_retryable_refusal(answer.status, &code) {
                            return Err(AwsError::Refused {
                                service,
                                operation: operation.name.to_string(),
                                status: answer.status,
                                code,
                                message,
                            });
                        }
                        format!("{} {code}: {message}", answer.status)
                    }
                    Err(EcsError::Unreachable(message)) => message,
                    Err(EcsError::Config(message)) => return Err(AwsError::Config(message)),
                    Err(other) => {
                        return Err(AwsError::Protocol {
                            service,
                            message: other.to_string(),
                        })
                    }
                };
            if attempt >= attempts {
                return Err(AwsError::Unreachable {
                    service,
                    message: format!(
                        "{} at {endpoint}, {attempt} attempt(s): {failure}",
                        operation.name
                    ),
                });
            }
            let wait = self.retry.wait_after(attempt);
            log::info!(
                "{} {} at {endpoint} (attempt {attempt}): {failure}; trying again in {wait:?}",
                service.display_name(),
                operation.name
            );
            std::thread::sleep(wait);
            attempt += 1;
        }
    }

    /// Calls a JSON 1.1 operation (`X-Amz-Target: <target>`) with `request`; the answer's JSON.
    pub(super) fn json_call(
        &self,
        service: Service,
        region: &str,
        target: &str,
        request: &serde_json::Value,
        credentials: &dyn SigningCredentials,
    ) -> Result<Vec<u8>, AwsError> {
        let body = serde_json::to_vec(request).map_err(|error| AwsError::Protocol {
            service,
            message: format!("encoding {target}: {error}"),
        })?;
        let name = target.rsplit('.').next().unwrap_or(target);
        self.call(
            &Operation {
                service,
                name,
                region,
                headers: &[
                    ("Content-Type", JSON_CONTENT_TYPE),
                    ("X-Amz-Target", target),
                ],
                body: &body,
                read_error: json_error,
            },
            credentials,
        )
    }
}

/// The code and message of a JSON protocol error answer (`__type` without its `prefix#`,
/// `message`), else `x-amzn-ErrorType`, else the status's reason.
pub(super) fn json_error(answer: &Answer) -> (String, String) {
    let (code, message) =
        crate::control::ecs::error_parts(answer.error_type.as_deref(), &answer.body);
    (code.unwrap_or_else(|| answer.reason.to_string()), message)
}

/// Reads a JSON 1.1 answer of `operation` as `T`: a JSON object (a struct whose fields all
/// have defaults would take an array too). The error names the place, never the content (an
/// answer may hold secrets). Pure.
pub(super) fn read_json_object<T: serde::de::DeserializeOwned>(
    body: &[u8],
    operation: &str,
) -> Result<T, String> {
    let not_json = |place: String| format!("the {operation} answer is not its JSON{place}");
    if body.iter().find(|byte| !byte.is_ascii_whitespace()) != Some(&b'{') {
        return Err(not_json(" (not an object)".to_string()));
    }
    serde_json::from_slice(body).map_err(|error| {
        not_json(format!(
            " (line {}, column {})",
            error.line(),
            error.column()
        ))
    })
}

/// Field `name` of a JSON answer's object as text: `None` when absent or `null`, an error when
/// it is another type (naming the field, never its content). Pure.
pub(super) fn string_field(
    object: &serde_json::Value,
    name: &str,
    operation: &str,
) -> Result<Option<String>, String> {
    match object.get(name) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(format!("the {operation} answer's {name} is not text")),
    }
}

/// Field `name` of a JSON answer's object as a list: empty when absent or `null`, an error when
/// it is another type. Pure.
pub(super) fn list_field<'a>(
    object: &'a serde_json::Value,
    name: &str,
    operation: &str,
) -> Result<&'a [serde_json::Value], String> {
    match object.get(name) {
        None | Some(serde_json::Value::Null) => Ok(&[]),
        Some(serde_json::Value::Array(items)) => Ok(items),
        Some(_) => Err(format!("the {operation} answer's {name} is not a list")),
    }
}
