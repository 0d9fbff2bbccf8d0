//! The AWS services a task's roles need besides ECS: STS `AssumeRole` (`sts`, the query protocol
//! and its XML answer), SSM `GetParameters` (`ssm`), Secrets Manager `GetSecretValue`
//! (`secrets_manager`) and ECR `GetAuthorizationToken` (`ecr`), the last three over the JSON 1.1
//! protocol. [`AwsClient`] (`call`) makes the calls: each signed with the credentials its caller
//! hands it (a role's temporary ones or the host's own, [`SigningCredentials`]) for the region
//! it names, at the endpoint the AWS SDKs' convention gives (`endpoint`: `AWS_ENDPOINT_URL_<SERVICE>`,
//! `AWS_ENDPOINT_URL`, else the region's public one), through `ecs::signed_call` as every AWS
//! call of deckhand, retried with back-off while the service throttles, fails (5xx), cannot be
//! reached or says the token expired, and signed again at once when its answer says the host's
//! clock is off. Each service's file also holds the pure readers of what its callers are given:
//! an SSM or Secrets Manager `valueFrom`, an ECR image reference and its token.
//!
//! A secret (a key, a token, a parameter's or secret's value) is never in a `Debug` or an error
//! message.
//!
//! # The API other parts call
//!
//! ```text
//! AwsClient::new(lookup: &dyn Fn(&str) -> Option<String>, proxies: ProxySettings) -> AwsClient
//!     // lookup: the config (environment over file) for AWS_ENDPOINT_URL[_<SERVICE>]
//!     .with_retry_policy(RetryPolicy) .with_timeout(Duration) .with_signing_clock(&'static SigningClock)
//! // credentials: &dyn SigningCredentials = a Credentials, a CredentialChain, or
//! //   Fn() -> Result<Credentials, String>, read again before each attempt.
//! client.assume_role(region, &sts::AssumeRoleRequest { role_arn, session_name, duration_seconds },
//!     credentials) -> Result<sts::AssumedRole { credentials, expiration_millis, assumed_role_arn }, AwsError>
//! sts::session_name(task_id) -> String                          // "deckhand-<task id>", STS-safe
//! ssm::parse_value_from(text) -> Result<ssm::SsmReference { asked, name, region }, String>
//! client.parameter_values(default_region, &[SsmReference], credentials) -> Result<Vec<String>, AwsError>
//!     // in order; code() == Some("InvalidParameters") when SSM names any invalid
//! client.get_parameters(region, &[String], credentials) -> Result<ssm::SsmParameters, AwsError>
//! secrets_manager::parse_value_from(text)
//!     -> Result<SecretReference { secret_id, region, json_key, version_stage, version_id }, String>
//! client.secret_text(default_region, &SecretReference, credentials) -> Result<String, AwsError>
//!     // the SecretString, or its JSON key's value
//! client.get_secret_value(region, &SecretReference, credentials) -> Result<SecretValue, AwsError>
//! ecr::parse_ecr_image(image) -> Option<ecr::EcrRegistry { host, account, region, fips }>
//! client.registry_login(&EcrRegistry, credentials)
//!     -> Result<ecr::EcrAuthorization { username, password, expires_at_millis, proxy_endpoint }, AwsError>
//! client.get_authorization_token(region, registry_ids: &[String], credentials) -> Result<Vec<EcrAuthorization>, AwsError>
//! AwsError: Unreachable | Refused { service, operation, status, code, message } | Credentials
//!     | Config | Protocol;  .code() -> Option<&str>, .is_retryable() -> bool, Display names
//!     the service, the operation and the code.
//! ```

pub mod call;
pub mod ecr;
pub mod endpoint;
pub mod secrets_manager;
pub mod ssm;
pub mod sts;
pub mod xml;

#[cfg(test)]
mod tests;

use std::fmt;

pub use call::{AwsClient, RetryPolicy, SigningCredentials};
pub use endpoint::service_endpoint;

/// An AWS service deckhand calls for tasks' roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Service {
    Sts,
    Ssm,
    SecretsManager,
    Ecr,
}

impl Service {
    /// The SigV4 signing name.
    pub fn signing_name(self) -> &'static str {
        match self {
            Service::Sts => "sts",
            Service::Ssm => "ssm",
            Service::SecretsManager => "secretsmanager",
            Service::Ecr => "ecr",
        }
    }

    /// The service's part of `AWS_ENDPOINT_URL_<SERVICE>` (the SDKs' service id, upper case,
    /// spaces as `_`).
    pub fn endpoint_variable(self) -> &'static str {
        match self {
            Service::Sts => "AWS_ENDPOINT_URL_STS",
            Service::Ssm => "AWS_ENDPOINT_URL_SSM",
            Service::SecretsManager => "AWS_ENDPOINT_URL_SECRETS_MANAGER",
            Service::Ecr => "AWS_ENDPOINT_URL_ECR",
        }
    }

    /// The first labels of the service's public host name (`api.ecr` in
    /// `api.ecr.<region>.amazonaws.com`).
    pub fn host_prefix(self) -> &'static str {
        match self {
            Service::Sts => "sts",
            Service::Ssm => "ssm",
            Service::SecretsManager => "secretsmanager",
            Service::Ecr => "api.ecr",
        }
    }

    /// The service's name in messages.
    pub fn display_name(self) -> &'static str {
        match self {
            Service::Sts => "STS",
            Service::Ssm => "SSM",
            Service::SecretsManager => "Secrets Manager",
            Service::Ecr => "ECR",
        }
    }
}

/// Why a call to one of these services failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AwsError {
    /// The service could not be reached or is not answering well (a refused or broken
    /// connection, a timeout, a 5xx, throttling, an expired token), after every attempt.
    Unreachable { service: Service, message: String },
    /// The service refused the call with an error the Go agent treats as final (`AccessDenied`,
    /// `ResourceNotFoundException`, `ParameterNotFound`, …): its code and message.
    Refused {
        service: Service,
        /// The operation refused (`AssumeRole`).
        operation: String,
        status: u16,
        code: String,
        message: String,
    },
    /// No credentials to sign with; the message says why.
    Credentials(String),
    /// The endpoint or the proxies cannot work; nothing changes until the configuration does.
    Config(String),
    /// The answer is not what the protocol says (not JSON or XML, a field missing, too large).
    Protocol { service: Service, message: String },
}

impl AwsError {
    /// The service's error code, for a refusal.
    pub fn code(&self) -> Option<&str> {
        match self {
            AwsError::Refused { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Whether the same call may work later without a change here.
    pub fn is_retryable(&self) -> bool {
        matches!(self, AwsError::Unreachable { .. })
    }
}

impl fmt::Display for AwsError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AwsError::Unreachable { service, message } => {
                write!(
                    formatter,
                    "{} unreachable: {message}",
                    service.display_name()
                )
            }
            AwsError::Refused {
                service,
                operation,
                status,
                code,
                message,
            } => write!(
                formatter,
                "{} {operation} refused ({status} {code}): {message}",
                service.display_name()
            ),
            AwsError::Credentials(message) | AwsError::Config(message) => {
                formatter.write_str(message)
            }
            AwsError::Protocol { service, message } => {
                write!(formatter, "{}: {message}", service.display_name())
            }
        }
    }
}

impl std::error::Error for AwsError {}
