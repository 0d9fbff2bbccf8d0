//! The engine's [`ExecutionRoleAws`] made of the AWS clients (`control::aws`), wired here so
//! the engine imports nothing of them: SSM `GetParameters` (with decryption, one call per
//! region), Secrets Manager `GetSecretValue`, and ECR logins from `GetAuthorizationToken`,
//! each kept per (registry, credentials id) until shortly before it expires (ECS's ECR token
//! cache), signed with a task's execution-role credentials or, for ECR without them, the
//! host's own (the chain the ECS connection and S3 read). Region: a reference's ARN's, else
//! `AWS_REGION`/`AWS_DEFAULT_REGION`; an ECR image's from its host. Messages take ECS's
//! wording; none holds a value, a key or a token.

use std::sync::{Arc, Mutex};

use crate::control::aws::{ecr, secrets_manager, ssm, AwsClient};
use crate::control::ecs::credentials::{CredentialChain, Credentials};
use crate::engine::workers::ExecutionRoleAws;
use crate::role_credentials::RoleCredentials;
use crate::runtime::RegistryAuth;

/// An ECR login is asked again this long before it expires (ECS's minimum early refresh).
const ECR_REFRESH_BEFORE_MILLIS: u64 = 30 * 60 * 1000;

/// A login kept for (registry host, credentials id; empty: the host's).
struct CachedLogin {
    host: String,
    credentials_id: String,
    auth: RegistryAuth,
    refresh_at_millis: u64,
}

/// SSM, Secrets Manager and ECR for the execution role. `Debug` shows no login.
pub struct AwsExecutionRole {
    client: AwsClient,
    region: Option<String>,
    host_credentials: Arc<CredentialChain>,
    logins: Mutex<Vec<CachedLogin>>,
}

impl std::fmt::Debug for AwsExecutionRole {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("AwsExecutionRole")
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

/// A role's credentials as the clients sign with them.
fn signing(credentials: &RoleCredentials) -> Credentials {
    Credentials {
        access_key_id: credentials.access_key_id.clone(),
        secret_access_key: credentials.secret_access_key.clone(),
        session_token: (!credentials.session_token.is_empty())
            .then(|| credentials.session_token.clone()),
    }
}

/// When a login that expires at `expires_at` (epoch milliseconds) is asked again: 30 minutes
/// before, or halfway for a shorter one. Pure.
pub(super) fn refresh_at(now: u64, expires_at: u64) -> u64 {
    let left = expires_at.saturating_sub(now);
    now + left.saturating_sub(ECR_REFRESH_BEFORE_MILLIS.min(left / 2))
}

impl AwsExecutionRole {
    /// The agent's: its endpoints, region and host credentials from the configuration.
    pub(super) fn new(
        config: &crate::config::Config,
        proxies: crate::net::proxy::ProxySettings,
    ) -> AwsExecutionRole {
        let endpoints = config.aws_endpoints.clone();
        let lookup = move |key: &str| endpoints.get(key).cloned();
        AwsExecutionRole::from_parts(
            AwsClient::new(&lookup, proxies),
            config.environment_files.region.clone(),
            Arc::new(CredentialChain::from_values(
                &config.environment_files.credential_values,
            )),
        )
    }

    /// One over `client`, asking `region` for references without one, and signing ECR logins
    /// of tasks without an execution role with `host_credentials`.
    pub fn from_parts(
        client: AwsClient,
        region: Option<String>,
        host_credentials: Arc<CredentialChain>,
    ) -> AwsExecutionRole {
        AwsExecutionRole {
            client,
            region: region.filter(|region| !region.is_empty()),
            host_credentials,
            logins: Mutex::new(Vec::new()),
        }
    }

    fn default_region(&self) -> &str {
        self.region.as_deref().unwrap_or_default()
    }

    fn cached(&self, host: &str, credentials_id: &str, now: u64) -> Option<RegistryAuth> {
        let mut logins = self.logins.lock().unwrap_or_else(|p| p.into_inner());
        logins.retain(|login| now < login.refresh_at_millis);
        logins
            .iter()
            .find(|login| login.host == host && login.credentials_id == credentials_id)
            .map(|login| login.auth.clone())
    }
}

impl ExecutionRoleAws for AwsExecutionRole {
    fn ecr_login(
        &self,
        image: &str,
        credentials: Option<(&str, &RoleCredentials)>,
    ) -> Option<Result<RegistryAuth, String>> {
        let registry = ecr::parse_ecr_image(image)?;
        let credentials_id = credentials.map_or("", |(id, _)| id);
        let now = crate::clock::now_millis();
        if let Some(auth) = self.cached(&registry.host, credentials_id, now) {
            return Some(Ok(auth));
        }
        let login = match credentials {
            Some((_, role)) => self.client.registry_login(&registry, &signing(role)),
            None => self
                .client
                .registry_login(&registry, self.host_credentials.as_ref()),
        };
        let login = match login {
            Ok(login) => login,
            Err(error) => return Some(Err(format!("ecr auth for {}: {error}", registry.host))),
        };
        let auth = RegistryAuth {
            username: login.username,
            password: login.password,
            // ECS's: the token's proxy endpoint is the registry's server address.
            server_address: login
                .proxy_endpoint
                .unwrap_or_else(|| format!("https://{}", registry.host)),
        };
        let mut logins = self.logins.lock().unwrap_or_else(|p| p.into_inner());
        logins.retain(|kept| kept.host != registry.host || kept.credentials_id != credentials_id);
        logins.push(CachedLogin {
            host: registry.host,
            credentials_id: credentials_id.to_string(),
            auth: auth.clone(),
            refresh_at_millis: refresh_at(now, login.expires_at_millis),
        });
        Some(Ok(auth))
    }

    fn ssm_values(
        &self,
        references: &[&str],
        credentials: &RoleCredentials,
    ) -> Result<Vec<String>, String> {
        let mut parsed = Vec::with_capacity(references.len());
        for reference in references {
            parsed.push(ssm::parse_value_from(reference)?);
        }
        let default = self.default_region();
        let signing = signing(credentials);
        let mut values = vec![String::new(); parsed.len()];
        let mut done = vec![false; parsed.len()];
        for start in 0..parsed.len() {
            if done[start] {
                continue;
            }
            // Every parameter of this one's region, in one call (ten names a request).
            let region = parsed[start].region_or(default).to_string();
            let mut names = Vec::new();
            let mut indices = Vec::new();
            for (index, reference) in parsed.iter().enumerate() {
                if !done[index] && reference.region_or(default) == region {
                    names.push(reference.asked.clone());
                    indices.push(index);
                    done[index] = true;
                }
            }
            let failed = |message: String| {
                format!("fetching secret data from SSM Parameter Store in {region}: {message}")
            };
            let answer = self
                .client
                .get_parameters(&region, &names, &signing)
                .map_err(|error| failed(error.to_string()))?;
            if !answer.invalid.is_empty() {
                // The Go agent's words.
                let invalid = answer.invalid.join(",");
                return Err(failed(format!("invalid parameters: {invalid}")));
            }
            for index in indices {
                let asked = &parsed[index].asked;
                let value = answer.value_of(asked).ok_or_else(|| {
                    failed(format!("the GetParameters answer has no value for {asked}"))
                })?;
                values[index] = value.to_string();
            }
        }
        Ok(values)
    }

    fn secret_text(
        &self,
        reference: &str,
        credentials: &RoleCredentials,
    ) -> Result<String, String> {
        let parsed = secrets_manager::parse_value_from(reference)?;
        self.client
            .secret_text(self.default_region(), &parsed, &signing(credentials))
            .map_err(|error| {
                format!(
                    "trying to retrieve secret with value {reference} resulted in error: {error}"
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ecr_login_is_asked_again_30_minutes_before_it_expires_or_halfway() {
        const MINUTE: u64 = 60_000;
        // (now, expires at, asked again at)
        let table = [
            (0, 12 * 60 * MINUTE, 12 * 60 * MINUTE - 30 * MINUTE),
            (0, 60 * MINUTE, 30 * MINUTE),
            (0, 20 * MINUTE, 10 * MINUTE),
            (1_000, 1_000, 1_000),
            (5_000, 1_000, 5_000),
        ];
        for (now, expires_at, expected) in table {
            assert_eq!(refresh_at(now, expires_at), expected, "{now} {expires_at}");
        }
    }
}
