//! `EcsClient`: calls to the ECS JSON API (`RegisterContainerInstance`, `DiscoverPollEndpoint`,
//! `SubmitTaskStateChange`, …) as the AWS SDKs make them: `POST` to the endpoint's path with
//! `X-Amz-Target: AmazonEC2ContainerServiceV20141113.<Operation>` and
//! `Content-Type: application/x-amz-json-1.1`, signed with SigV4 for service `ecs`.
//!
//! The HTTP is ureq's, over rustls with the host's trusted roots (`net::wire`), through the
//! `CONNECT` proxy that [`ProxySettings`] names for the endpoint (`HTTPS_PROXY`, `NO_PROXY`).
//! One connection per call (no idle pool): calls are minutes apart, so a kept-alive connection
//! would mostly be a dead one to detect. The answer's body is read within
//! [`MAX_ANSWER_BYTES`], and every failure is classified ([`EcsError`]) so the caller knows
//! whether to retry ([`parse_answer`], pure and fuzzed).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::clock_skew::{self, Failed};
use super::credentials::CredentialChain;
use super::endpoint::Endpoint;
use super::{error_from_answer, sigv4, EcsError, SIGNING_SERVICE};
use crate::net::proxy::ProxySettings;
use crate::net::wire::{crypto_provider, trusted_roots};

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

    /// The ureq agent for one call: TLS with the host's roots, the endpoint's proxy (or none:
    /// ureq would otherwise read the environment itself), no redirects, no idle connections,
    /// and error statuses returned as answers, to classify here.
    fn agent(&self) -> Result<ureq::Agent, EcsError> {
        if let Some(agent) = self.agent.get() {
            return Ok(agent.clone());
        }
        let mut tls = ureq::tls::TlsConfig::builder()
            .provider(ureq::tls::TlsProvider::Rustls)
            .unversioned_rustls_crypto_provider(crypto_provider());
        if self.endpoint.tls {
            let roots = trusted_roots().map_err(EcsError::Config)?;
            tls = tls.root_certs(ureq::tls::RootCerts::Specific(roots.certificates));
        }
        let proxy = match self
            .proxies
            .proxy_for(self.endpoint.tls, &self.endpoint.host)
        {
            Some(proxy) => Some(ureq::Proxy::new(&proxy.url).map_err(|error| {
                EcsError::Config(format!("the proxy {}: {error}", proxy.display()))
            })?),
            None => None,
        };
        let config = ureq::Agent::config_builder()
            .tls_config(tls.build())
            .proxy(proxy)
            .http_status_as_error(false)
            .max_redirects(0)
            .max_idle_connections(0)
            .user_agent(format!("deckhand/{}", crate::VERSION))
            .timeout_global(Some(self.timeout))
            .build();
        Ok(self.agent.get_or_init(|| config.new_agent()).clone())
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
        let scheme = if self.endpoint.tls { "https" } else { "http" };
        let url = format!(
            "{scheme}://{host}{}",
            sigv4::request_target(&self.endpoint.path, &[])
        );
        let mut call = self
            .agent()?
            .post(&url)
            // The Host signed, exactly (ureq would write its own from the URL otherwise).
            .header("Host", &host)
            .header("Content-Type", CONTENT_TYPE)
            .header("X-Amz-Target", &target);
        for (name, value) in &signed.headers {
            call = call.header(*name, value);
        }
        let failed = |error: ureq::Error| {
            let error = classify(error);
            match error {
                EcsError::Unreachable(message) => {
                    EcsError::Unreachable(format!("{operation} to {}: {message}", self.endpoint))
                }
                EcsError::Protocol(message) => {
                    EcsError::Protocol(format!("{operation} to {}: {message}", self.endpoint))
                }
                other => other,
            }
        };
        let mut answer = call.send(&body[..]).map_err(failed)?;
        let status = answer.status();
        let date = answer
            .headers()
            .get("Date")
            .and_then(|value| value.to_str().ok())
            .map(str::to_string);
        let error_type = answer
            .headers()
            .get("x-amzn-ErrorType")
            .and_then(|value| value.to_str().ok())
            .map(str::to_string);
        let bytes = answer
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER_BYTES)
            .read_to_vec()
            .map_err(failed)?;
        parse_answer(
            status.as_u16(),
            status.canonical_reason().unwrap_or(""),
            error_type.as_deref(),
            &bytes,
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

/// What a failed ureq call means for the caller: the configuration (a URL or proxy that cannot
/// work) is [`EcsError::Config`], an answer that breaks HTTP or its limit
/// [`EcsError::Protocol`], everything else (refused, reset, timed out, TLS refused, the proxy
/// refusing the tunnel) [`EcsError::Unreachable`].
fn classify(error: ureq::Error) -> EcsError {
    match error {
        ureq::Error::BadUri(_) | ureq::Error::InvalidProxyUrl => {
            EcsError::Config(error.to_string())
        }
        ureq::Error::BodyExceedsLimit(limit) => {
            EcsError::Protocol(format!("the answer is over its limit of {limit} bytes"))
        }
        ureq::Error::Protocol(_) => EcsError::Protocol(format!("the answer: {error}")),
        ureq::Error::Timeout(which) => EcsError::Unreachable(format!("timed out ({which})")),
        ureq::Error::Rustls(tls) => EcsError::Unreachable(format!("TLS: {tls}")),
        other => EcsError::Unreachable(other.to_string()),
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
