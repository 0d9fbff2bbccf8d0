//! Amazon ECS as a desired-state source: deckhand registered as an external container instance
//! (`ECS_EXTERNAL=true`). The transport: where the backend is (`endpoint`), the AWS credentials
//! (`credentials`), Signature Version 4 (`sigv4`), the ECS JSON API client over ureq
//! (`client`), the signed websockets over tungstenite (`websocket`), both over rustls and
//! through the `HTTPS_PROXY` of `net::proxy`, and the cached poll endpoint
//! (`poll_endpoint`); each request ECS
//! gets is built by a pure function (`register`, `report`), table-tested against ECS's model;
//! [`EcsError`] says whether a failure is worth retrying.

pub mod client;
pub mod clock_skew;
pub mod connection;
pub mod credentials;
pub mod endpoint;
pub mod messages;
pub mod poll_endpoint;
pub mod register;
pub mod report;
pub mod reporter;
pub mod s3;
pub mod session;
pub mod session_driver;
pub mod signed_call;
pub mod sigv4;
pub mod telemetry;
pub mod websocket;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod websocket_tests;

use std::fmt;

pub use client::EcsClient;
pub use credentials::{CredentialChain, Credentials};
pub use endpoint::Endpoint;
pub use websocket::{open_signed_websocket, AcsQuery, AcsSocket, SignedSocket, SignedUpgrade};

/// The service name ECS requests are signed for (the Go agent's `wsclient.ServiceName`, and
/// the API's signing name).
pub const SIGNING_SERVICE: &str = "ecs";

/// Why an ECS call or the ACS connection failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EcsError {
    /// ECS could not be reached or is not answering well right now: a refused or broken
    /// connection, a TLS failure, a timeout, a 5xx or a throttling answer. Retry later.
    Unreachable(String),
    /// ECS answered with an error of its own (`__type` without its `prefix#`, and its message).
    Service {
        status: u16,
        error_type: String,
        message: String,
    },
    /// No usable AWS credentials; the message says where they were looked for.
    Credentials(String),
    /// The configuration cannot work: a bad endpoint or proxy URL, no trusted root
    /// certificates for an `https://` endpoint. Retrying changes nothing until the host or the configuration does.
    Config(String),
    /// ECS's answer is not what the protocol says (not JSON, too large).
    Protocol(String),
    /// An ACS websocket read waited past its timeout: the connection is idle (the session
    /// decides whether to close it). The socket stays usable.
    ReadTimeout,
}

impl EcsError {
    /// `InactiveInstanceException`: this container instance was deregistered.
    pub fn is_inactive_instance(&self) -> bool {
        self.error_type() == Some("InactiveInstanceException")
    }

    /// The service's error type, for a [`EcsError::Service`].
    pub fn error_type(&self) -> Option<&str> {
        match self {
            EcsError::Service { error_type, .. } => Some(error_type),
            _ => None,
        }
    }

    /// Whether the same call may work later without a change here: unreachable, or idle.
    pub fn is_retryable(&self) -> bool {
        matches!(self, EcsError::Unreachable(_) | EcsError::ReadTimeout)
    }
}

impl fmt::Display for EcsError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EcsError::Unreachable(message) => write!(formatter, "ECS unreachable: {message}"),
            EcsError::Service {
                status,
                error_type,
                message,
            } => write!(formatter, "ECS refused ({status} {error_type}): {message}"),
            EcsError::Credentials(message)
            | EcsError::Config(message)
            | EcsError::Protocol(message) => write!(formatter, "{message}"),
            EcsError::ReadTimeout => {
                write!(formatter, "no message from ACS within the read timeout")
            }
        }
    }
}

impl std::error::Error for EcsError {}

/// Error types that mean "slow down" or "try again", whatever their status: the AWS SDK's
/// throttling codes and its retryable timeouts (aws-sdk-go-v2 `retry` as the ECS agent uses it).
const THROTTLING_TYPES: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottledException",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "TransactionInProgressException",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
    "LimitExceededException",
    "RequestThrottled",
    "SlowDown",
    "PriorRequestNotComplete",
    "EC2ThrottledException",
    "RequestTimeout",
    "RequestTimeoutException",
];

/// The error an HTTP error answer means: its type and message ([`error_parts`]); 5xx and
/// throttling ([`is_throttling`]) are [`EcsError::Unreachable`]. Pure.
pub fn error_from_answer(
    status: u16,
    reason: &str,
    error_type_header: Option<&str>,
    body: &[u8],
) -> EcsError {
    let (error_type, message) = error_parts(error_type_header, body);
    let throttled = status == 429 || error_type.as_deref().is_some_and(is_throttling);
    if status >= 500 || throttled {
        let named = error_type.unwrap_or_else(|| reason.to_string());
        return EcsError::Unreachable(format!("ECS answered {status} {named}: {message}"));
    }
    EcsError::Service {
        status,
        error_type: error_type.unwrap_or_else(|| reason.to_string()),
        message,
    }
}

/// Whether an error type means "slow down" or "try again" whatever the status.
pub fn is_throttling(error_type: &str) -> bool {
    THROTTLING_TYPES.contains(&error_type)
}

/// The type and message of an AWS JSON protocol error answer: from the JSON body (the API's
/// `{"__type": "prefix#Type", "message": …}`, or ACS's `{"type": …, "message": …}` and
/// `{"Type": "message"}` forms), else `x-amzn-ErrorType`; the type without its `prefix#` (and
/// a header's `:…` tail), the message else the body's text (its first 512 characters). Pure.
pub fn error_parts(error_type_header: Option<&str>, body: &[u8]) -> (Option<String>, String) {
    let document: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let text = |value: Option<&serde_json::Value>| {
        value
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    };
    let (mut error_type, mut message) = (None, None);
    if let Some(object) = document.as_ref().and_then(serde_json::Value::as_object) {
        error_type = text(object.get("__type"))
            .or_else(|| text(object.get("type")))
            .or_else(|| text(object.get("Type")));
        message = text(object.get("message")).or_else(|| text(object.get("Message")));
        if error_type.is_none()
            && message.is_none()
            && error_type_header.is_none()
            && object.len() == 1
        {
            if let Some((key, value)) = object.iter().next() {
                if let Some(value) = value.as_str() {
                    error_type = Some(key.clone());
                    message = Some(value.to_string());
                }
            }
        }
    }
    let error_type = error_type
        .or_else(|| {
            error_type_header.map(|header| header.split(':').next().unwrap_or("").to_string())
        })
        .map(|full| full.rsplit('#').next().unwrap_or("").trim().to_string())
        .filter(|name| !name.is_empty());
    let message = message.unwrap_or_else(|| {
        let body_text = String::from_utf8_lossy(body);
        crate::text::truncate_chars(body_text.trim(), 512).to_string()
    });
    (error_type, message)
}
