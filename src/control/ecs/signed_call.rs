//! One SigV4-signed HTTP call to an AWS service over ureq, the way every AWS call of deckhand is
//! made (the ECS API in `client`, S3's `GetObject` in `s3`, STS, SSM, Secrets Manager and ECR in
//! `control::aws`): the ureq agent for an endpoint ([`agent_for`]: rustls with the host's
//! trusted roots, the endpoint's `CONNECT` proxy from `HTTPS_PROXY`/`NO_PROXY`, no redirects,
//! no idle connections, error statuses returned as answers), and the request signed for a
//! region and a service at the signing clock's time and sent with exactly the headers signed
//! ([`send`]). The answer comes back whole (status, `Date`, `x-amzn-ErrorType`, the body within
//! a limit) for the caller's protocol to read; a call that got no answer is classified
//! ([`EcsError::Config`]: retrying cannot help; [`EcsError::Protocol`]: the answer broke HTTP
//! or its limit; [`EcsError::Unreachable`]: everything else, worth another attempt).

use std::time::Duration;

use super::credentials::Credentials;
use super::endpoint::Endpoint;
use super::{sigv4, EcsError};
use crate::net::proxy::ProxySettings;
use crate::net::wire::{crypto_provider, trusted_roots};

/// One request to sign and send.
#[derive(Debug, Clone, Copy)]
pub struct SignedRequest<'a> {
    pub method: &'a str,
    pub endpoint: &'a Endpoint,
    /// The path, decoded (the endpoint's own path already joined in).
    pub path: &'a str,
    /// The headers sent and signed besides `Host` and those [`sigv4::sign`] adds.
    pub headers: &'a [(&'a str, &'a str)],
    pub body: &'a [u8],
    pub region: &'a str,
    /// The SigV4 service name (`ecs`, `s3`, `sts`, …).
    pub service: &'a str,
    /// An answer body larger than this is refused ([`EcsError::Protocol`]).
    pub max_answer_bytes: u64,
}

/// An answer, whatever its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    /// The status's canonical reason (`Bad Request`), empty for an unknown status.
    pub reason: &'static str,
    /// The `Date` header, which corrects a skewed signing clock.
    pub date: Option<String>,
    /// The `x-amzn-ErrorType` header.
    pub error_type: Option<String>,
    pub body: Vec<u8>,
}

/// The ureq agent for calls to `endpoint`: TLS (rustls, ring) with the host's trusted roots for
/// `https://`, the proxy `proxies` name for its host (or none: ureq would otherwise read the
/// environment itself), no redirects, no idle connections, `timeout` for the whole call, and
/// error statuses returned as answers, to classify by the caller.
pub fn agent_for(
    endpoint: &Endpoint,
    proxies: &ProxySettings,
    timeout: Duration,
) -> Result<ureq::Agent, EcsError> {
    let mut tls = ureq::tls::TlsConfig::builder()
        .provider(ureq::tls::TlsProvider::Rustls)
        .unversioned_rustls_crypto_provider(crypto_provider());
    if endpoint.tls {
        let roots = trusted_roots().map_err(EcsError::Config)?;
        tls = tls.root_certs(ureq::tls::RootCerts::Specific(roots.certificates));
    }
    let proxy = match proxies.proxy_for(endpoint.tls, &endpoint.host) {
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
        .timeout_global(Some(timeout))
        .build();
    Ok(config.new_agent())
}

/// Signs `request` with `credentials` at `amz_date` (the signing clock's `X-Amz-Date`) and sends
/// it through `agent`; the answer whatever its status, or why there was none. Errors name the
/// endpoint.
pub fn send(
    agent: &ureq::Agent,
    request: &SignedRequest<'_>,
    credentials: &Credentials,
    amz_date: &str,
) -> Result<Answer, EcsError> {
    let endpoint = request.endpoint;
    let host = endpoint.host_header();
    let mut signed_headers: Vec<(&str, &str)> = Vec::with_capacity(request.headers.len() + 1);
    signed_headers.push(("Host", &host));
    signed_headers.extend_from_slice(request.headers);
    let signed = sigv4::sign(
        &sigv4::SignInput {
            method: request.method,
            path: request.path,
            query: &[],
            headers: &signed_headers,
            payload: request.body,
        },
        credentials,
        request.region,
        request.service,
        amz_date,
    );
    let scheme = if endpoint.tls { "https" } else { "http" };
    let url = format!(
        "{scheme}://{host}{}",
        sigv4::request_target(request.path, &[])
    );
    let failed = |error: ureq::Error| match classify(error) {
        EcsError::Unreachable(message) => EcsError::Unreachable(format!("{endpoint}: {message}")),
        EcsError::Protocol(message) => EcsError::Protocol(format!("{endpoint}: {message}")),
        EcsError::Config(message) => EcsError::Config(format!("{endpoint}: {message}")),
        other => other,
    };
    let builder = ureq::http::Request::builder()
        .method(request.method)
        .uri(&url)
        // The Host signed, exactly (ureq would write its own from the URL otherwise).
        .header("Host", &host);
    let builder = request
        .headers
        .iter()
        .fold(builder, |builder, (name, value)| {
            builder.header(*name, *value)
        });
    let builder = signed
        .headers
        .iter()
        .fold(builder, |builder, (name, value)| {
            builder.header(*name, value)
        });
    let bad_request =
        |error: ureq::http::Error| EcsError::Config(format!("{endpoint}: the request: {error}"));
    // A GET goes without a body (ureq would otherwise announce an empty one).
    let sent = if request.body.is_empty() && request.method == "GET" {
        agent.run(builder.body(()).map_err(bad_request)?)
    } else {
        agent.run(builder.body(request.body).map_err(bad_request)?)
    };
    let mut answer = sent.map_err(failed)?;
    let status = answer.status();
    let header = |name: &str| {
        answer
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string)
    };
    let (date, error_type) = (header("Date"), header("x-amzn-ErrorType"));
    let body = answer
        .body_mut()
        .with_config()
        .limit(request.max_answer_bytes)
        .read_to_vec()
        .map_err(failed)?;
    Ok(Answer {
        status: status.as_u16(),
        reason: status.canonical_reason().unwrap_or(""),
        date,
        error_type,
        body,
    })
}

/// What a failed ureq call means for the caller: the configuration (a URL or proxy that cannot
/// work) is [`EcsError::Config`], an answer that breaks HTTP or its limit
/// [`EcsError::Protocol`], everything else (refused, reset, timed out, TLS refused, the proxy
/// refusing the tunnel) [`EcsError::Unreachable`].
pub fn classify(error: ureq::Error) -> EcsError {
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
