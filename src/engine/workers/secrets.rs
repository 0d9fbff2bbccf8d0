//! The secret store's values for one Docker call (§13): read at the call (so a rotated value is
//! used), a create's secrets merged into its request, a pull's registry credentials. A value is
//! never named in an error or a log line.

use super::{quoted_list, WorkerContext};
use crate::engine::messages::{SecretTarget, SecretUse};
use crate::runtime::{CreateContainer, RegistryAuth, RuntimeError};
use crate::secrets::SecretStore;

/// The secret store, read now (so a rotated value is used by this call); its failure is the
/// call's, named as ECS names a secret it could not retrieve.
fn read_secret_store(context: &WorkerContext) -> Result<SecretStore, RuntimeError> {
    let Some(path) = &context.secrets_file else {
        return Err(RuntimeError::ResourceInitialization {
            message: "no secret store is configured (DECKHAND_SECRETS_FILE)".to_string(),
        });
    };
    crate::secrets::load(path).map_err(|error| RuntimeError::ResourceInitialization {
        message: format!("unable to read secrets: {error}"),
    })
}

/// `repositoryCredentials`: the `{"username","password"}` the store holds under `reference`,
/// for `image`'s registry.
pub(super) fn repository_credentials(
    context: &WorkerContext,
    reference: &str,
    image: &str,
) -> Result<RegistryAuth, RuntimeError> {
    let store = read_secret_store(context)?;
    let (username, password) = store.registry_credentials(reference).map_err(|why| {
        RuntimeError::ResourceInitialization {
            message: format!("unable to retrieve the registry credentials: {why}"),
        }
    })?;
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
/// same name (ECS merges secrets over `environment`), or a log option. Every reference the
/// store lacks is named in the error; no value ever is.
pub(super) fn add_secrets(
    context: &WorkerContext,
    spec: &mut CreateContainer,
    secrets: &[SecretUse],
) -> Result<(), RuntimeError> {
    if secrets.is_empty() {
        return Ok(());
    }
    let store = read_secret_store(context)?;
    let missing = store.missing(secrets.iter().map(|secret| secret.value_from.as_str()));
    if !missing.is_empty() {
        return Err(RuntimeError::ResourceInitialization {
            message: format!(
                "unable to retrieve secrets: the secret store holds no value for {}",
                quoted_list(&missing)
            ),
        });
    }
    for secret in secrets {
        let value = store.value(&secret.value_from).unwrap_or_default();
        match secret.target {
            SecretTarget::Environment => {
                spec.env
                    .retain(|entry| entry.split('=').next().unwrap_or_default() != secret.name);
                spec.env.push(format!("{}={value}", secret.name));
            }
            SecretTarget::LogOption => {
                if let Some(log) = &mut spec.log_config {
                    log.options.insert(secret.name.clone(), value.to_string());
                }
            }
        }
    }
    Ok(())
}
