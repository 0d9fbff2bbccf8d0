//! `EcsClient`: calls to the ECS JSON API (`RegisterContainerInstance`, `DiscoverPollEndpoint`,
//! `SubmitTaskStateChange`, …) as the AWS SDKs make them: `POST` to the endpoint's path with
//! `X-Amz-Target: AmazonEC2ContainerServiceV20141113.<Operation>` and
//! `Content-Type: application/x-amz-json-1.1`, signed with SigV4 for service `ecs`.
//!
//! One connection per call (`Connection: close`): calls are minutes apart, so a kept-alive
//! connection would mostly be a dead one to detect. Answers are read with the head and body
//! limits of `net::http1`, and every failure is classified ([`EcsError`]) so the caller knows
//! whether to retry.

use std::io::{BufRead, BufReader};
use std::sync::Arc;
use std::time::Duration;

use super::clock_skew::{self, Failed};
use super::credentials::CredentialChain;
use super::endpoint::Endpoint;
use super::{error_from_answer, sigv4, EcsError, SIGNING_SERVICE};
use crate::net::http1::{
    read_response_head, write_request, BodyReader, Request, MAX_RESPONSE_HEAD_BYTES,
};

/// The JSON protocol's target prefix for ECS operations.
pub const TARGET_PREFIX: &str = "AmazonEC2ContainerServiceV20141113";
pub const CONTENT_TYPE: &str = "application/x-amz-json-1.1";
/// An answer body larger than this is refused.
pub const MAX_ANSWER_BYTES: u64 = 4 * 1024 * 1024;
/// Connect, write and each read of a call wait at most this long by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A client of the ECS API at one endpoint, for one region.
#[derive(Debug, Clone)]
pub struct EcsClient {
    endpoint: Endpoint,
    region: String,
    credentials: Arc<CredentialChain>,
    timeout: Duration,
}

impl EcsClient {
    pub fn new(endpoint: Endpoint, region: &str, credentials: Arc<CredentialChain>) -> EcsClient {
        EcsClient {
            endpoint,
            region: region.to_string(),
            credentials,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The same client with another timeout for connect, write and each read.
    pub fn with_timeout(mut self, timeout: Duration) -> EcsClient {
        self.timeout = timeout;
        self
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    pub fn credentials(&self) -> &Arc<CredentialChain> {
        &self.credentials
    }

    /// Calls `operation` (`"RegisterContainerInstance"`) with `request` as its JSON body and
    /// returns the answer's JSON. An answer saying the signing time is off corrects the
    /// signing clock, and the call is signed again ([`clock_skew`]).
    pub fn call(
        &self,
        operation: &str,
        request: &serde_json::Value,
    ) -> Result<serde_json::Value, EcsError> {
        clock_skew::signed_again_if_skewed(clock_skew::signing_clock(), || {
            self.call_once(operation, request)
        })
    }

    fn call_once(
        &self,
        operation: &str,
        request: &serde_json::Value,
    ) -> Result<serde_json::Value, Failed> {
        let credentials = self.credentials.current().map_err(EcsError::Credentials)?;
        let body = serde_json::to_vec(request)
            .map_err(|error| EcsError::Protocol(format!("encoding {operation}: {error}")))?;
        let host = self.endpoint.host_header();
        let target = format!("{TARGET_PREFIX}.{operation}");
        let signed = sigv4::sign(
            &sigv4::SignInput {
                method: "POST",
                path: &self.endpoint.path,
                query: &[],
                headers: &[
                    ("Host", &host),
                    ("Content-Type", CONTENT_TYPE),
                    ("X-Amz-Target", &target),
                ],
                payload: &body,
            },
            &credentials,
            &self.region,
            SIGNING_SERVICE,
            &clock_skew::signing_clock().amz_date(),
        );
        let mut headers = vec![("X-Amz-Target", target.clone())];
        headers.extend(signed.headers);
        let http_request = Request {
            method: "POST",
            host: &host,
            target: sigv4::request_target(&self.endpoint.path, &[]),
            headers,
            body: Some((CONTENT_TYPE, &body)),
        };
        let mut connection = self.endpoint.connect(self.timeout)?;
        if let Err(error) = write_request(&mut connection, &http_request) {
            return Err(Failed::from(EcsError::Unreachable(format!(
                "{operation} to {}: sending the request: {error}",
                self.endpoint
            ))));
        }
        read_dated_answer(BufReader::new(connection)).map_err(|failed| Failed {
            error: match failed.error {
                EcsError::Unreachable(message) => {
                    EcsError::Unreachable(format!("{operation} to {}: {message}", self.endpoint))
                }
                EcsError::Protocol(message) => {
                    EcsError::Protocol(format!("{operation} to {}: {message}", self.endpoint))
                }
                other => other,
            },
            date: failed.date,
        })
    }
}

/// Reads one answer of the JSON API: its head and body within their limits, then its JSON, or
/// the error an error status means ([`error_from_answer`]). Broken or timed-out reads are
/// [`EcsError::Unreachable`], bytes that break the protocol [`EcsError::Protocol`].
pub fn read_answer<R: BufRead>(reader: R) -> Result<serde_json::Value, EcsError> {
    read_dated_answer(reader).map_err(|failed| failed.error)
}

/// [`read_answer`], an error answer's `Date` header kept with its error.
pub fn read_dated_answer<R: BufRead>(mut reader: R) -> Result<serde_json::Value, Failed> {
    let reading =
        |error: std::io::Error| EcsError::Unreachable(format!("reading the answer: {error}"));
    let head = read_response_head(&mut reader, MAX_RESPONSE_HEAD_BYTES).map_err(reading)?;
    let framing = head
        .body_framing("POST")
        .map_err(|error| EcsError::Protocol(format!("the answer's framing: {error}")))?;
    let answer = BodyReader::new(reader, framing)
        .read_to_end_limited(MAX_ANSWER_BYTES)
        .map_err(|error| match error.kind() {
            std::io::ErrorKind::InvalidData => {
                EcsError::Protocol(format!("the answer's body: {error}"))
            }
            _ => reading(error),
        })?;
    if !(200..300).contains(&head.status) {
        return Err(Failed {
            error: error_from_answer(
                head.status,
                &head.reason,
                head.header("x-amzn-ErrorType"),
                &answer,
            ),
            date: head.header("Date").map(str::to_string),
        });
    }
    if answer.iter().all(u8::is_ascii_whitespace) {
        return Ok(serde_json::Value::Object(serde_json::Map::new()));
    }
    serde_json::from_slice(&answer).map_err(|error| {
        Failed::from(EcsError::Protocol(format!(
            "the answer is not JSON: {error}"
        )))
    })
}
