//! The execution role's part of a pull and a create: what the local secret store does not hold
//! comes from AWS, signed with the task's execution-role credentials (from the
//! [`CredentialsStore`], by the task's execution credentials id), through the engine's
//! [`ExecutionRoleAws`] (the agent wires the SSM, Secrets Manager and ECR clients behind it).
//!
//! - A secret's `valueFrom` (`secrets`, `secretOptions`) that the local store lacks: an SSM
//!   parameter (name or ARN; every such one of a create in one `GetParameters` per region) or
//!   a Secrets Manager secret (its ARN, with `:json-key:version-stage:version-id`), as ECS
//!   tells them apart: by the ARN's service ([`names_secrets_manager`], pure).
//! - `repositoryCredentials.credentialsParameter` that the local store lacks: the secret's
//!   `{"username","password"}`.
//! - An image in ECR: the login of `GetAuthorizationToken`, with the execution role's
//!   credentials when the task has them, else the host's own.
//!
//! Failures carry ECS's wording: `ResourceInitializationError` for secrets, the resource's
//! "unable to find execution role credentials" when the task has none;
//! `CannotPullECRContainerError` for an ECR login. A value is never in an error or a log line.

use super::WorkerContext;
use crate::role_credentials::{CredentialsLookup, RoleCredentials};
use crate::runtime::{RegistryAuth, RuntimeError};

/// The AWS calls the execution role makes for a task's pulls and creates. Each error is a
/// message in ECS's words that names references and regions, never a value.
pub trait ExecutionRoleAws: Send + Sync + std::fmt::Debug {
    /// The registry login of `image` when it is in ECR (`None`: it is not), signed with
    /// `credentials` (the execution role's id and credentials), else the host's own.
    fn ecr_login(
        &self,
        image: &str,
        credentials: Option<(&str, &RoleCredentials)>,
    ) -> Option<Result<RegistryAuth, String>>;

    /// The values of the SSM parameters `references` names (names or ARNs), in order.
    fn ssm_values(
        &self,
        references: &[&str],
        credentials: &RoleCredentials,
    ) -> Result<Vec<String>, String>;

    /// The text a Secrets Manager `valueFrom` names (the `SecretString`, or its JSON key's
    /// value).
    fn secret_text(&self, reference: &str, credentials: &RoleCredentials)
        -> Result<String, String>;
}

/// Whether `value_from` names a Secrets Manager secret (an ARN of service `secretsmanager`);
/// anything else is an SSM parameter, as ECS reads a task definition's secrets. Pure.
pub fn names_secrets_manager(value_from: &str) -> bool {
    let mut fields = value_from.split(':');
    fields.next() == Some("arn") && fields.nth(1) == Some("secretsmanager")
}

/// The ECS resource's words for a task with no execution-role credentials to sign with.
fn no_credentials(value_from: &str) -> String {
    if names_secrets_manager(value_from) {
        "ASM secret resource: unable to find execution role credentials".to_string()
    } else {
        "ssm secret resource: unable to find execution role credentials".to_string()
    }
}

/// The AWS side and the execution role's credentials id, when the task can reach AWS at all.
pub(super) fn aws_route<'a>(
    context: &'a WorkerContext,
    execution_id: Option<&'a str>,
) -> Option<(&'a dyn ExecutionRoleAws, &'a str)> {
    Some((context.execution_role.as_deref()?, execution_id?))
}

/// The execution role's credentials of id `id`, when they are there.
fn credentials_of(context: &WorkerContext, id: &str) -> Option<RoleCredentials> {
    match context.role_credentials.lookup(id) {
        CredentialsLookup::Ready { credentials, .. } => Some(credentials),
        CredentialsLookup::Unknown | CredentialsLookup::Pending => None,
    }
}

/// Fills each `None` of `values` (the local store lacked it) from AWS: the SSM ones in one
/// call per region, each Secrets Manager one once.
pub(super) fn fill_from_aws(
    aws: &dyn ExecutionRoleAws,
    context: &WorkerContext,
    execution_id: &str,
    references: &[&str],
    values: &mut [Option<String>],
) -> Result<(), RuntimeError> {
    let failed = |message: String| RuntimeError::ResourceInitialization { message };
    let Some(first) = references
        .iter()
        .zip(values.iter())
        .find(|(_, value)| value.is_none())
        .map(|(reference, _)| *reference)
    else {
        return Ok(());
    };
    let credentials =
        credentials_of(context, execution_id).ok_or_else(|| failed(no_credentials(first)))?;
    let mut ssm: Vec<&str> = Vec::new();
    for (reference, value) in references.iter().zip(values.iter()) {
        if value.is_none() && !names_secrets_manager(reference) && !ssm.contains(reference) {
            ssm.push(reference);
        }
    }
    if !ssm.is_empty() {
        let answers = aws.ssm_values(&ssm, &credentials).map_err(failed)?;
        for (reference, value) in references.iter().zip(values.iter_mut()) {
            if value.is_none() {
                if let Some(index) = ssm.iter().position(|asked| asked == reference) {
                    *value = answers.get(index).cloned();
                }
            }
        }
    }
    for index in 0..references.len() {
        if values[index].is_some() {
            continue;
        }
        let reference = references[index];
        let text = aws.secret_text(reference, &credentials).map_err(failed)?;
        // The same secret named twice is asked once.
        for (other, value) in references.iter().zip(values.iter_mut()) {
            if *other == reference && value.is_none() {
                *value = Some(text.clone());
            }
        }
    }
    Ok(())
}

/// `repositoryCredentials` the local store lacks: the Secrets Manager secret's
/// `{"username","password"}`, in ECS's words when it cannot be had.
pub(super) fn repository_credentials_from_aws(
    aws: &dyn ExecutionRoleAws,
    context: &WorkerContext,
    execution_id: &str,
    reference: &str,
) -> Result<(String, String), RuntimeError> {
    let failed = |message: String| RuntimeError::ResourceInitialization { message };
    let credentials = credentials_of(context, execution_id).ok_or_else(|| {
        failed("asm resource: unable to find execution role credentials".to_string())
    })?;
    let text = aws.secret_text(reference, &credentials).map_err(failed)?;
    crate::secrets::registry_credentials(&text).map_err(|why| {
        failed(format!(
            "asm fetching authorization data for {reference}: {why}"
        ))
    })
}

/// The ECR login of `image`'s pull, when it is in ECR and the engine reaches AWS: with the
/// task's execution-role credentials when they are there, else the host's.
pub(super) fn ecr_auth(
    context: &WorkerContext,
    execution_id: Option<&str>,
    image: &str,
) -> Option<Result<RegistryAuth, RuntimeError>> {
    let aws = context.execution_role.as_deref()?;
    let credentials = execution_id
        .and_then(|id| credentials_of(context, id).map(|credentials| (id, credentials)));
    let login = aws.ecr_login(
        image,
        credentials
            .as_ref()
            .map(|(id, credentials)| (*id, credentials)),
    )?;
    Some(login.map_err(|message| RuntimeError::CannotPullEcr { message }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_from_is_a_secrets_manager_secret_only_by_its_arns_service() {
        // (valueFrom, Secrets Manager?)
        let table = [
            (
                "arn:aws:secretsmanager:us-west-2:123456789012:secret:db-AbCdEf",
                true,
            ),
            (
                "arn:aws:secretsmanager:us-west-2:123456789012:secret:db-AbCdEf:password::",
                true,
            ),
            (
                "arn:aws-cn:secretsmanager:cn-north-1:123456789012:secret:x",
                true,
            ),
            (
                "arn:aws:ssm:us-west-2:123456789012:parameter/db/password",
                false,
            ),
            ("/db/password", false),
            ("db-password", false),
            ("secretsmanager", false),
            ("arn:aws:secretsmanager", true),
            ("", false),
        ];
        for (value_from, expected) in table {
            assert_eq!(names_secrets_manager(value_from), expected, "{value_from}");
        }
    }
}
