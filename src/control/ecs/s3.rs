//! Environment files from where an operator keeps them: the local mirror
//! (`DECKHAND_ENVIRONMENT_FILES_DIR/<bucket>/<key>`, synced while online, read first so a host
//! offline still starts its tasks), else S3's `GetObject`, signed with SigV4 (service `s3`) with
//! the host's credentials — the chain the ECS connection reads. The endpoint is
//! `AWS_ENDPOINT_URL_S3`, else `AWS_ENDPOINT_URL` (path-style: `<endpoint>/<bucket>/<key>`),
//! else `https://<bucket>.s3.<region>.amazonaws.com/<key>`.
//!
//! The S3 request is made in one function, [`S3EnvironmentFiles::get_object`]: ureq over rustls
//! with the host's trusted roots and the proxies of `HTTPS_PROXY`/`NO_PROXY`, sent by
//! `signed_call` as every AWS call is, signed with the skew-corrected signing clock (`clock_skew`) that ECS's
//! answers teach and that a refused GET's `Date` corrects too.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::clock_skew;
use super::credentials::CredentialChain;
use super::endpoint::Endpoint;
use super::{signed_call, sigv4, EcsError};
use crate::net::proxy::ProxySettings;
use crate::task::environment_files::MAX_ENVIRONMENT_FILE_BYTES;

/// S3's SigV4 service name.
const S3_SERVICE: &str = "s3";
/// Connect, write and each read of a GET wait at most this long.
const S3_TIMEOUT: Duration = Duration::from_secs(30);
/// Attempts of a GET that S3 throttles, answers 5xx to or cannot be reached for.
const S3_ATTEMPTS: u32 = 3;
/// The first wait between two attempts; doubled each time.
const S3_RETRY_INITIAL: Duration = Duration::from_millis(500);

/// The mirror, then S3.
#[derive(Debug)]
pub struct S3EnvironmentFiles {
    mirror: Option<PathBuf>,
    region: Option<String>,
    /// A configured endpoint (path-style); `None`: S3's own for the region.
    endpoint: Option<Endpoint>,
    credentials: Arc<CredentialChain>,
    /// The proxies S3 is reached through; an error (a proxy variable that cannot be used) is
    /// kept to fail each GET naming it, while the mirror still serves.
    proxies: Result<ProxySettings, String>,
}

/// Why one GET failed, and whether another attempt may do better.
struct GetFailure {
    message: String,
    retry: bool,
}

impl S3EnvironmentFiles {
    /// `endpoint`: `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL`, if set.
    pub fn new(
        mirror: Option<PathBuf>,
        region: Option<String>,
        endpoint: Option<&str>,
        credentials: Arc<CredentialChain>,
        proxies: Result<ProxySettings, String>,
    ) -> Result<S3EnvironmentFiles, String> {
        let endpoint = match endpoint.map(str::trim).filter(|url| !url.is_empty()) {
            Some(url) => Some(Endpoint::parse(url)?),
            None => None,
        };
        Ok(S3EnvironmentFiles {
            mirror,
            region,
            endpoint,
            credentials,
            proxies,
        })
    }

    /// The mirror's copy: `Ok(None)` when it has none (or there is no mirror). A key with `.`
    /// or `..` segments is never looked up there: it could name a file outside the mirror.
    fn mirrored_copy(&self, bucket: &str, key: &str) -> Result<Option<Vec<u8>>, String> {
        let Some(mirror) = &self.mirror else {
            return Ok(None);
        };
        if key
            .split('/')
            .any(|segment| segment.is_empty() || segment == "." || segment == "..")
        {
            return Ok(None);
        }
        let path = mirror.join(bucket).join(key);
        match std::fs::File::open(&path) {
            Ok(file) => read_limited(file).map(Some).map_err(|error| {
                format!("cannot read the mirror's copy {}: {error}", path.display())
            }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            // Unreadable is not absent: say so rather than fetch something else.
            Err(error) => Err(format!(
                "cannot open the mirror's copy {}: {error}",
                path.display()
            )),
        }
    }

    /// `GET` of the object, signed; retried with back-off when S3 throttles, fails (5xx) or
    /// cannot be reached.
    pub fn get_object(&self, bucket: &str, key: &str) -> Result<Vec<u8>, String> {
        let region = self.region.as_deref().ok_or_else(|| {
            "no AWS region to fetch it from S3 (AWS_REGION or AWS_DEFAULT_REGION); or put it \
             in the mirror (DECKHAND_ENVIRONMENT_FILES_DIR)"
                .to_string()
        })?;
        let (endpoint, path) = match &self.endpoint {
            Some(endpoint) => {
                let base = endpoint.path.trim_end_matches('/');
                (endpoint.clone(), format!("{base}/{bucket}/{key}"))
            }
            None => (
                Endpoint::parse(&format!("https://{bucket}.s3.{region}.amazonaws.com"))?,
                format!("/{key}"),
            ),
        };
        let mut wait = S3_RETRY_INITIAL;
        let mut attempt = 1;
        loop {
            match self.get_once(&endpoint, &path, region) {
                Ok(bytes) => return Ok(bytes),
                Err(failure) if failure.retry && attempt < S3_ATTEMPTS => {
                    log::info!(
                        "S3 GET {} (attempt {attempt}): {}; trying again in {wait:?}",
                        endpoint.url(),
                        failure.message
                    );
                    std::thread::sleep(wait);
                    wait *= 2;
                    attempt += 1;
                }
                Err(failure) => return Err(failure.message),
            }
        }
    }

    fn get_once(
        &self,
        endpoint: &Endpoint,
        path: &str,
        region: &str,
    ) -> Result<Vec<u8>, GetFailure> {
        let fatal = |message: String| GetFailure {
            message,
            retry: false,
        };
        let unreachable = |message: String| GetFailure {
            message,
            retry: true,
        };
        let credentials = self.credentials.current().map_err(fatal)?;
        let proxies = self
            .proxies
            .as_ref()
            .map_err(|error| fatal(format!("the proxy settings: {error}")))?;
        let agent = signed_call::agent_for(endpoint, proxies, S3_TIMEOUT)
            .map_err(|error| fatal(error.to_string()))?;
        let payload_hash = sigv4::sha256_hex(b"");
        let clock = clock_skew::signing_clock();
        let request = signed_call::SignedRequest {
            method: "GET",
            endpoint,
            path,
            headers: &[("x-amz-content-sha256", &payload_hash)],
            body: b"",
            region,
            service: S3_SERVICE,
            max_answer_bytes: MAX_ENVIRONMENT_FILE_BYTES as u64 + 1,
        };
        let answer = signed_call::send(&agent, &request, &credentials, &clock.amz_date()).map_err(
            |error| match error {
                EcsError::Unreachable(message) => unreachable(format!("S3 at {message}")),
                EcsError::Protocol(message) if message.contains("over its limit") => fatal(
                    format!("the object is larger than {MAX_ENVIRONMENT_FILE_BYTES} bytes"),
                ),
                EcsError::Protocol(message) => unreachable(format!("S3 at {message}")),
                other => fatal(format!("S3 at {other}")),
            },
        )?;
        let (status, reason) = (answer.status, answer.reason);
        match status {
            200 => Ok(answer.body),
            404 => Err(fatal("S3 has no such object (404)".to_string())),
            // Throttling or a server error: again.
            429 | 500..=599 => Err(unreachable(format!("S3 answered {status} {reason}"))),
            // 400/403 may be an expired token or a skewed clock: the next attempt signs again
            // with the chain's current credentials and, when the answer's `Date` says this
            // host's clock is off, with the corrected signing clock (as every ECS call).
            code => {
                let message = format!("S3 refused the GET: {code} {reason}");
                let refusal = EcsError::Service {
                    status: code,
                    error_type: String::new(),
                    message: message.clone(),
                };
                clock.correct("S3", &refusal, answer.date.as_deref());
                Err(GetFailure {
                    message,
                    retry: matches!(code, 400 | 403),
                })
            }
        }
    }
}

fn read_limited(file: std::fs::File) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(MAX_ENVIRONMENT_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

impl S3EnvironmentFiles {
    /// The mirror's copy of `bucket`/`key` if it has one, else S3's.
    pub fn fetch(&self, bucket: &str, key: &str) -> Result<Vec<u8>, String> {
        match self.mirrored_copy(bucket, key)? {
            Some(bytes) => Ok(bytes),
            None => self.get_object(bucket, key),
        }
    }
}
