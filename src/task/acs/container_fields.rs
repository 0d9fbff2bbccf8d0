//! The ACS container fields that need more than copying into the task-definition shape: a
//! container override's command, `secrets` (environment variables and log-driver options), and
//! `registryAuthentication`'s Secrets Manager pull credentials (`asmAuthData`), which become
//! the container's `repositoryCredentials`. An ECR login is not read from the payload: deckhand
//! knows an ECR image by its name.

use super::{join, AcsTaskError, Mapper, MAX_DOCKER_CONFIG_BYTES};
use serde_json::{json, Map, Value};

/// `registryAuthentication` of type `asm`: `{"credentialsParameter": <its secret>}`. Pure.
pub(super) fn repository_credentials(object: &Map<String, Value>) -> Option<Value> {
    let parameter = object
        .get("registryAuthentication")
        .filter(|auth| auth.get("type").and_then(Value::as_str) == Some("asm"))
        .and_then(|auth| auth.get("asmAuthData")?.get("credentialsParameter"))
        .and_then(Value::as_str)
        .filter(|parameter| !parameter.is_empty())?;
    Some(json!({ "credentialsParameter": parameter }))
}

impl Mapper {
    /// `overrides` (a JSON string, or an object): only `command`, which replaces the
    /// container's; anything else is refused, as the ECS agent refuses it.
    pub(super) fn command_override(
        &self,
        object: &Map<String, Value>,
        path: &str,
    ) -> Result<Option<Value>, AcsTaskError> {
        let overrides_path = join(path, "overrides");
        let parsed;
        let overrides = match object.get("overrides") {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::String(text)) if text.trim().is_empty() => return Ok(None),
            Some(Value::String(text)) => {
                if text.len() > MAX_DOCKER_CONFIG_BYTES {
                    return Err(self.error(&overrides_path, "too long"));
                }
                parsed = serde_json::from_str::<Value>(text).map_err(|error| {
                    self.error(&overrides_path, format!("not valid JSON: {error}"))
                })?;
                &parsed
            }
            Some(other) => other,
        };
        let overrides = self.object(&overrides_path, overrides)?;
        let mut command = None;
        for (key, value) in overrides {
            match key.as_str() {
                "command" if value.is_null() => {}
                "command" => command = Some(value.clone()),
                other => {
                    return Err(self.error(
                        &join(&overrides_path, other),
                        "not supported: a container override may only replace the command",
                    ))
                }
            }
        }
        Ok(command)
    }

    /// `secrets[]` by `valueFrom` (the secret store, else SSM or Secrets Manager with the
    /// execution role): `target` `CONTAINER` (or none) an environment variable, `LOG_DRIVER` an
    /// option of the container's log driver (the task definition's `secretOptions`), as the ECS
    /// agent gives them. Secrets mounted as files are refused.
    pub(super) fn secrets(
        &self,
        object: &Map<String, Value>,
        path: &str,
    ) -> Result<Option<AcsSecrets>, AcsTaskError> {
        let secrets_path = join(path, "secrets");
        let items = match object.get("secrets") {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Array(items)) => items,
            Some(_) => return Err(self.error(&secrets_path, "expected an array")),
        };
        let mut secrets = AcsSecrets::default();
        for (index, item) in items.iter().enumerate() {
            let item_path = format!("{secrets_path}[{index}]");
            let secret = self.object(&item_path, item)?;
            let for_log_driver = match self.string(secret, &item_path, "target")?.as_deref() {
                None | Some("" | "CONTAINER") => false,
                Some("LOG_DRIVER") => true,
                Some(target) => {
                    return Err(self.error(
                        &join(&item_path, "target"),
                        format!("{target:?} is not supported: expected CONTAINER or LOG_DRIVER"),
                    ))
                }
            };
            if let Some(kind) = self.string(secret, &item_path, "type")? {
                if kind != "ENVIRONMENT_VARIABLE" && !kind.is_empty() {
                    return Err(self.error(
                        &join(&item_path, "type"),
                        format!("{kind:?} is not supported: deckhand gives secrets to containers as environment variables"),
                    ));
                }
            }
            let mut mapped = Map::new();
            for key in ["name", "valueFrom"] {
                if let Some(value) = secret.get(key) {
                    mapped.insert(key.to_string(), value.clone());
                }
            }
            if for_log_driver {
                secrets.log_driver.push((item_path, Value::Object(mapped)));
            } else {
                secrets.environment.push(Value::Object(mapped));
            }
        }
        Ok(Some(secrets))
    }
}

/// A container's ACS `secrets`, by where they go.
#[derive(Default)]
pub(super) struct AcsSecrets {
    /// `{name, valueFrom}` of its environment variables.
    pub environment: Vec<Value>,
    /// `{name, valueFrom}` of its log driver's options, each with its path in the payload.
    pub log_driver: Vec<(String, Value)>,
}
