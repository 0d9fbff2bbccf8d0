//! Amazon ECR: `AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken` (JSON 1.1, signed
//! for `ecr`) and the readers around it (pure, fuzzed): whether an image lives in ECR
//! ([`parse_ecr_image`]: `<account>.dkr.ecr.<region>.<partition suffix>[:port]/repo:tag`, the FIPS
//! `dkr.ecr-fips` hosts and the dual-stack `dkr-ecr` ones, as Amazon's credential helper knows
//! them) and the answer ([`parse_authorization_answer`]: each `authorizationData`'s token
//! decoded into the registry user and password, `expiresAt` in epoch seconds, `proxyEndpoint`).

use std::fmt;

use super::call::{list_field, read_json_object, string_field, AwsClient, SigningCredentials};
use super::{AwsError, Service};

/// The ECR registry of an image, read where the engine reads it too (a leaf module below both).
pub use crate::registry::ecr::{parse_ecr_image, EcrRegistry};

/// The JSON 1.1 target of `GetAuthorizationToken`.
pub const GET_AUTHORIZATION_TOKEN_TARGET: &str =
    "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken";

/// A registry login from ECR.
#[derive(Clone, PartialEq, Eq)]
pub struct EcrAuthorization {
    pub username: String,
    pub password: String,
    /// When the token expires, in epoch milliseconds.
    pub expires_at_millis: u64,
    /// The registry's URL (`https://123456789012.dkr.ecr.us-west-2.amazonaws.com`).
    pub proxy_endpoint: Option<String>,
}

impl fmt::Debug for EcrAuthorization {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("EcrAuthorization")
            .field("username", &self.username)
            .field("password", &"<hidden>")
            .field("expires_at_millis", &self.expires_at_millis)
            .field("proxy_endpoint", &self.proxy_endpoint)
            .finish()
    }
}

/// An `authorizationToken` decoded: base64 of `user:password`. The error never quotes it. Pure.
pub fn decode_token(token: &str) -> Result<(String, String), String> {
    let bytes = crate::encoding::base64_standard_decode(token.trim())
        .map_err(|error| format!("the authorization token is not base64: {error}"))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| "the authorization token is not UTF-8 text".to_string())?;
    match text.split_once(':') {
        Some((user, password)) if !user.is_empty() => Ok((user.to_string(), password.to_string())),
        _ => Err("the authorization token is not user:password".to_string()),
    }
}

/// Reads a `GetAuthorizationToken` answer: every `authorizationData` with its token decoded
/// and its expiry (epoch seconds, a fraction allowed); one without a token or an expiry in
/// range is an error. Pure.
pub fn parse_authorization_answer(body: &[u8]) -> Result<Vec<EcrAuthorization>, String> {
    const OPERATION: &str = "GetAuthorizationToken";
    let answer: serde_json::Value = read_json_object(body, OPERATION)?;
    list_field(&answer, "authorizationData", OPERATION)?
        .iter()
        .map(|data| {
            let token = string_field(data, "authorizationToken", OPERATION)?
                .ok_or("an authorizationData has no authorizationToken")?;
            let (username, password) = decode_token(&token)?;
            let seconds = data
                .get("expiresAt")
                .and_then(serde_json::Value::as_f64)
                .filter(|seconds| seconds.is_finite() && (0.0..1e13).contains(seconds))
                .ok_or("an authorizationData has no expiresAt in range")?;
            Ok(EcrAuthorization {
                username,
                password,
                expires_at_millis: (seconds * 1000.0) as u64,
                proxy_endpoint: string_field(data, "proxyEndpoint", OPERATION)?,
            })
        })
        .collect()
}

/// The body of a `GetAuthorizationToken` call. Pure.
pub fn get_authorization_token_request(registry_ids: &[String]) -> serde_json::Value {
    if registry_ids.is_empty() {
        serde_json::json!({})
    } else {
        serde_json::json!({ "registryIds": registry_ids })
    }
}

impl AwsClient {
    /// `GetAuthorizationToken` from `region`'s ECR: the logins of `registry_ids` (none: the
    /// account's default registry), in ECR's order.
    pub fn get_authorization_token(
        &self,
        region: &str,
        registry_ids: &[String],
        credentials: &dyn SigningCredentials,
    ) -> Result<Vec<EcrAuthorization>, AwsError> {
        let body = self.json_call(
            Service::Ecr,
            region,
            GET_AUTHORIZATION_TOKEN_TARGET,
            &get_authorization_token_request(registry_ids),
            credentials,
        )?;
        parse_authorization_answer(&body).map_err(|message| AwsError::Protocol {
            service: Service::Ecr,
            message,
        })
    }

    /// The login for `registry` (its account's token from its region's ECR); ECR must answer
    /// exactly one, as the Go agent requires.
    pub fn registry_login(
        &self,
        registry: &EcrRegistry,
        credentials: &dyn SigningCredentials,
    ) -> Result<EcrAuthorization, AwsError> {
        let mut logins = self.get_authorization_token(
            &registry.region,
            std::slice::from_ref(&registry.account),
            credentials,
        )?;
        if logins.len() != 1 {
            return Err(AwsError::Protocol {
                service: Service::Ecr,
                message: format!(
                    "unexpected number of results in AuthorizationData ({})",
                    logins.len()
                ),
            });
        }
        Ok(logins.remove(0))
    }
}
