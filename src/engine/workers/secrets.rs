//! The secrets of one Docker call (§13): read at the call (so a rotated value is used), a
//! create's secrets merged into its request, a pull's registry credentials. The local secret
//! store answers first; what it lacks comes from AWS with the task's execution role
//! (`execution_role.rs`) when the task has one. A value is never named in an error or a log
//! line.

use super::execution_role::{aws_route, fill_from_aws, repository_credentials_from_aws};
use super::{quoted_list, WorkerContext};
use crate::engine::messages::{SecretTarget, SecretUse};
use crate::runtime::{CreateContainer, RegistryAuth, RuntimeError};
use crate::secrets::{SecretStore, SecretsFileError};

/// The secret store, read now (so a rotated value is used by this call); its failure is the
/// call's, named as ECS names a secret it could not retrieve. With a way to AWS (`aws`), no
/// store configured or no file is an empty store: AWS answers what it lacks.
fn read_secret_store(context: &WorkerContext, aws: bool) -> Result<SecretStore, RuntimeError> {
    let Some(path) = &context.secrets_file else {
        if aws {
            return Ok(SecretStore::default());
        }
        return Err(RuntimeError::ResourceInitialization {
            message: "no secret store is configured (DECKHAND_SECRETS_FILE)".to_string(),
        });
    };
    match crate::secrets::load(path) {
        Ok(store) => Ok(store),
        Err(SecretsFileError::Missing { .. }) if aws => Ok(SecretStore::default()),
        Err(error) => Err(RuntimeError::ResourceInitialization {
            message: format!("unable to read secrets: {error}"),
        }),
    }
}

/// `repositoryCredentials`: the `{"username","password"}` the store holds under `reference`,
/// else the Secrets Manager secret it names (with the execution role), for `image`'s registry.
pub(super) fn repository_credentials(
    context: &WorkerContext,
    reference: &str,
    image: &str,
    execution_id: Option<&str>,
) -> Result<RegistryAuth, RuntimeError> {
    let route = aws_route(context, execution_id);
    let store = read_secret_store(context, route.is_some())?;
    let (username, password) = match (store.value(reference), route) {
        (None, Some((aws, id))) => repository_credentials_from_aws(aws, context, id, reference)?,
        _ => store.registry_credentials(reference).map_err(|why| {
            RuntimeError::ResourceInitialization {
                message: format!("unable to retrieve the registry credentials: {why}"),
            }
        })?,
    };
    let (host, _) = crate::registry::registry_of_image(image);
    let server_address = if host == crate::registry::DOCKER_HUB {
        crate::registry::DOCKER_HUB_SERVER_ADDRESS.to_string()
    } else {
        host
    };
    Ok(RegistryAuth {
        username,
        password,
        server_address,
    })
}

/// Adds each secret of a create to its request: an environment variable replacing one of the
/// same name (ECS merges secrets over `environment`), or a log option. Every reference neither
/// the store nor AWS answers is named in the error; no value ever is.
pub(super) fn add_secrets(
    context: &WorkerContext,
    spec: &mut CreateContainer,
    secrets: &[SecretUse],
    execution_id: Option<&str>,
) -> Result<(), RuntimeError> {
    if secrets.is_empty() {
        return Ok(());
    }
    let route = aws_route(context, execution_id);
    let store = read_secret_store(context, route.is_some())?;
    let references: Vec<&str> = secrets.iter().map(|s| s.value_from.as_str()).collect();
    let mut values: Vec<Option<String>> = references
        .iter()
        .map(|reference| store.value(reference).map(str::to_string))
        .collect();
    match route {
        Some((aws, id)) => fill_from_aws(aws, context, id, &references, &mut values)?,
        None => {
            let missing = store.missing(references.iter().copied());
            if !missing.is_empty() {
                return Err(RuntimeError::ResourceInitialization {
                    message: format!(
                        "unable to retrieve secrets: the secret store holds no value for {}",
                        quoted_list(&missing)
                    ),
                });
            }
        }
    }
    for (secret, value) in secrets.iter().zip(values) {
        let value = value.unwrap_or_default();
        match secret.target {
            SecretTarget::Environment => {
                spec.env
                    .retain(|entry| entry.split('=').next().unwrap_or_default() != secret.name);
                spec.env.push(format!("{}={value}", secret.name));
            }
            SecretTarget::LogOption => {
                if let Some(log) = &mut spec.log_config {
                    log.options.insert(secret.name.clone(), value);
                }
            }
        }
    }
    Ok(())
}
