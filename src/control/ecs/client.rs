//! `EcsClient`: calls to the ECS JSON API (`RegisterContainerInstance`, `DiscoverPollEndpoint`,
//! `SubmitTaskStateChange`, …) as the AWS SDKs make them: `POST` to the endpoint's path with
//! `X-Amz-Target: AmazonEC2ContainerServiceV20141113.<Operation>` and
//! `Content-Type: application/x-amz-json-1.1`, signed with SigV4 for service `ecs`.
//!
//! The HTTP is ureq's, over rustls with the host's trusted roots (`net::wire`), through the
//! `CONNECT` proxy that [`ProxySettings`] names for the endpoint (`HTTPS_PROXY`, `NO_PROXY`),
//! signed and sent by `signed_call`, which every AWS call of deckhand shares.
//! One connection per call (no idle pool): calls are minutes apart, so a kept-alive connection
//! would mostly be a dead one to detect. The answer's body is read within
//! [`MAX_ANSWER_BYTES`], and every failure is classified ([`EcsError`]) so the caller knows
//! whether to retry ([`parse_answer`], pure and fuzzed).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::clock_skew::{self, Failed};
use super::credentials::CredentialChain;
use super::endpoint::Endpoint;
use super::{error_from_answer, signed_call, EcsError, SIGNING_SERVICE};
use crate::net::proxy::ProxySettings;

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
    proxies: ProxySettings,
    /// The ureq agent, made on the first call (its TLS configuration parses the roots once).
    agent: Arc<OnceLock<ureq::Agent>>,
}

impl EcsClient {
    /// A client that connects directly; [`EcsClient::with_proxies`] names the proxies.
    pub fn new(endpoint: Endpoint, region: &str, credentials: Arc<CredentialChain>) -> EcsClient {
        EcsClient {
            endpoint,
            region: region.to_string(),
            credentials,
            timeout: DEFAULT_TIMEOUT,
            proxies: ProxySettings::direct(),
            agent: Arc::default(),
        }
    }

    /// The same client with another deadline for each call (connect, send and answer).
    pub fn with_timeout(mut self, timeout: Duration) -> EcsClient {
        self.timeout = timeout;
        self.agent = Arc::default();
        self
    }

    /// The same client reaching ECS through these proxies (`HTTPS_PROXY`, `NO_PROXY`).
    pub fn with_proxies(mut self, proxies: ProxySettings) -> EcsClient {
        self.proxies = proxies;
        self.agent = Arc::default();
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

    /// The proxy settings the client (and the websockets it leads to) use.
    pub fn proxies(&self) -> &ProxySettings {
        &self.proxies
    }

    /// The ureq agent for this client's calls ([`signed_call::agent_for`]), made once.
    fn agent(&self) -> Result<ureq::Agent, EcsError> {
        if let Some(agent) = self.agent.get() {
            return Ok(agent.clone());
        }
        let agent = signed_call::agent_for(&self.endpoint, &self.proxies, self.timeout)?;
        Ok(self.agent.get_or_init(|| agent).clone())
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
        let target = format!("{TARGET_PREFIX}.{operation}");
        let request = signed_call::SignedRequest {
            method: "POST",
            endpoint: &self.endpoint,
            path: &self.endpoint.path,
            headers: &[("Content-Type", CONTENT_TYPE), ("X-Amz-Target", &target)],
            body: &body,
            region: &self.region,
            service: SIGNING_SERVICE,
            max_answer_bytes: MAX_ANSWER_BYTES,
        };
        let answer = signed_call::send(
            &self.agent()?,
            &request,
            &credentials,
            &clock_skew::signing_clock().amz_date(),
        )
        .map_err(|error| match error {
            EcsError::Unreachable(message) => {
                EcsError::Unreachable(format!("{operation} to {message}"))
            }
            EcsError::Protocol(message) => EcsError::Protocol(format!("{operation} to {message}")),
            other => other,
        })?;
        let date = answer.date;
        parse_answer(
            answer.status,
            answer.reason,
            answer.error_type.as_deref(),
            &answer.body,
        )
        .map_err(|error| Failed {
            error: match error {
                EcsError::Protocol(message) => {
                    EcsError::Protocol(format!("{operation} to {}: {message}", self.endpoint))
                }
                other => other,
            },
            date,
        })
    }
}

/// One answer of the JSON API, as its status, `x-amzn-ErrorType` and body: its JSON (an
/// empty body is `{}`), or the error an error status means ([`error_from_answer`]). A body
/// that is not JSON is [`EcsError::Protocol`]. Pure.
pub fn parse_answer(
    status: u16,
    reason: &str,
    error_type_header: Option<&str>,
    body: &[u8],
) -> Result<serde_json::Value, EcsError> {
    if !(200..300).contains(&status) {
        return Err(error_from_answer(status, reason, error_type_header, body));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(serde_json::Value::Object(serde_json::Map::new()));
    }
    serde_json::from_slice(body)
        .map_err(|error| EcsError::Protocol(format!("the answer is not JSON: {error}")))
}
