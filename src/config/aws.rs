//! The AWS-facing settings: the Amazon ECS connection (`ECS_EXTERNAL` and what it needs: the
//! region, the endpoint, custom attributes and tags, where the credentials are), the keys
//! behind the awslogs decision, and where environment files come from (S3's endpoint, the
//! credentials that sign its requests; the local mirror is `Config::environment_files_dir`,
//! which FireLens's S3 configuration files share). Read from the same sources as every other
//! key; the ECS rules for attributes and tags are checked where the registration is built
//! (`control::ecs::register`), this module only reads their JSON.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use super::keys::default_of;
use super::parse::{parse_absolute_path, Sources};
use super::scope::default_shared_credentials_file;
use super::ConfigError;

/// The Amazon ECS connection's settings (`ECS_EXTERNAL=true`). `Debug` leaves out the secret
/// key and the session token.
#[derive(Clone, PartialEq, Eq)]
pub struct EcsConfig {
    /// `AWS_REGION`, else `AWS_DEFAULT_REGION`.
    pub region: String,
    /// `ECS_BACKEND_HOST`, else `https://ecs.<region>.amazonaws.com`.
    pub backend_host: String,
    /// `ECS_INSTANCE_ATTRIBUTES`, in name order.
    pub instance_attributes: Vec<(String, String)>,
    /// `ECS_CONTAINER_INSTANCE_TAGS`, in key order.
    pub instance_tags: Vec<(String, String)>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    /// `AWS_SHARED_CREDENTIALS_FILE`, else `$HOME/.aws/credentials`, else
    /// `/root/.aws/credentials` (the packaged service has no HOME).
    pub shared_credentials_file: PathBuf,
    /// `AWS_PROFILE`, else `default`.
    pub profile: String,
}

impl fmt::Debug for EcsConfig {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("EcsConfig")
            .field("region", &self.region)
            .field("backend_host", &self.backend_host)
            .field("instance_attributes", &self.instance_attributes)
            .field("instance_tags", &self.instance_tags)
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "<redacted>"),
            )
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .field("shared_credentials_file", &self.shared_credentials_file)
            .field("profile", &self.profile)
            .finish()
    }
}

/// The keys behind the awslogs decision (docs/ENGINE.md §13): with credentials and a region
/// configured, awslogs goes to Docker's driver; otherwise the container runs with
/// `log_driver_fallback`. Holds no secret: only whether the access keys are set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsLogsConfig {
    /// `DECKHAND_LOG_DRIVER_FALLBACK`.
    pub log_driver_fallback: String,
    /// `AWS_REGION`, else `AWS_DEFAULT_REGION`.
    pub region: Option<String>,
    /// `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` are both set.
    pub access_keys: bool,
    /// `AWS_SHARED_CREDENTIALS_FILE`, else `$HOME/.aws/credentials` (`None` without a `HOME`).
    pub shared_credentials_file: Option<PathBuf>,
    /// `AWS_PROFILE`.
    pub profile: String,
}

/// The awslogs keys: the fallback driver (not empty), the region, whether the access keys are
/// both set, the shared credentials file and profile.
pub(super) fn read_aws_logs(
    sources: &Sources,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<AwsLogsConfig, ConfigError> {
    let text = |key: &'static str| sources.value(key).map(|raw| raw.value.clone());
    let log_driver_fallback = text("DECKHAND_LOG_DRIVER_FALLBACK")
        .unwrap_or_else(|| default_of("DECKHAND_LOG_DRIVER_FALLBACK").to_string());
    if let Some(raw) = sources.value("DECKHAND_LOG_DRIVER_FALLBACK") {
        raw.parse_with(|value| {
            if value == "awslogs" || value.contains(char::is_whitespace) {
                Err(
                    "must be a local Docker log driver such as json-file, local or none"
                        .to_string(),
                )
            } else {
                Ok(())
            }
        })?;
    }
    let shared_credentials_file = match sources.value("AWS_SHARED_CREDENTIALS_FILE") {
        Some(raw) => Some(raw.parse_with(parse_absolute_path)?),
        None => default_shared_credentials_file(env),
    };
    Ok(AwsLogsConfig {
        log_driver_fallback,
        region: text("AWS_REGION").or_else(|| text("AWS_DEFAULT_REGION")),
        access_keys: text("AWS_ACCESS_KEY_ID").is_some() && text("AWS_SECRET_ACCESS_KEY").is_some(),
        shared_credentials_file,
        profile: text("AWS_PROFILE").unwrap_or_else(|| default_of("AWS_PROFILE").to_string()),
    })
}

/// `ECS_EXTERNAL` and what it needs: a region and the endpoint. Credentials are looked up by the
/// ECS connection itself (the shared file is re-read when it changes), so only their sources are
/// kept here.
pub(super) fn read_ecs(
    sources: &Sources,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<EcsConfig>, ConfigError> {
    let text = |key: &'static str| sources.value(key).map(|raw| raw.value.clone());
    // Every key is read and checked even with the connection off: a bad value is an error
    // either way, not a surprise the day ECS_EXTERNAL is turned on.
    let external = sources.boolean("ECS_EXTERNAL")?;
    if let Some(raw) = sources.value("ECS_BACKEND_HOST") {
        raw.parse_with(|value| {
            if value.starts_with("https://") || value.starts_with("http://") {
                Ok(())
            } else {
                Err("must be an https:// (or, for a test endpoint, http://) URL".to_string())
            }
        })?;
    }
    let instance_attributes = match sources.value("ECS_INSTANCE_ATTRIBUTES") {
        Some(raw) => raw.parse_with(|text| parse_string_object(text, "attribute"))?,
        None => Vec::new(),
    };
    let instance_tags = match sources.value("ECS_CONTAINER_INSTANCE_TAGS") {
        Some(raw) => raw.parse_with(|text| parse_string_object(text, "tag"))?,
        None => Vec::new(),
    };
    let session_token = text("AWS_SESSION_TOKEN");
    if !external {
        return Ok(None);
    }
    let region = match text("AWS_REGION").or_else(|| text("AWS_DEFAULT_REGION")) {
        Some(region) => {
            let valid = region
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if !valid {
                let raw = sources
                    .value("AWS_REGION")
                    .or_else(|| sources.value("AWS_DEFAULT_REGION"))
                    .expect("the region came from one of the two keys");
                return Err(raw.refused("an AWS region is lowercase letters, digits and '-', e.g. us-west-2".to_string()));
            }
            region
        }
        None => {
            return Err(ConfigError::Required {
                message: "ECS_EXTERNAL=true needs the AWS region of the cluster: set AWS_REGION or AWS_DEFAULT_REGION".to_string(),
            })
        }
    };
    let backend_host =
        text("ECS_BACKEND_HOST").unwrap_or_else(|| format!("https://ecs.{region}.amazonaws.com"));
    let shared_credentials_file = match sources.value("AWS_SHARED_CREDENTIALS_FILE") {
        Some(raw) => raw.parse_with(parse_absolute_path)?,
        // The packaged service runs without HOME: the file ECS Anywhere's SSM agent rotates is
        // root's.
        None => default_shared_credentials_file(env)
            .unwrap_or_else(|| PathBuf::from("/root/.aws/credentials")),
    };
    Ok(Some(EcsConfig {
        region,
        backend_host,
        instance_attributes,
        instance_tags,
        access_key_id: text("AWS_ACCESS_KEY_ID"),
        secret_access_key: text("AWS_SECRET_ACCESS_KEY"),
        session_token,
        shared_credentials_file,
        profile: text("AWS_PROFILE").unwrap_or_else(|| default_of("AWS_PROFILE").to_string()),
    }))
}

/// `ECS_INSTANCE_ATTRIBUTES` and `ECS_CONTAINER_INSTANCE_TAGS`: a JSON object of names to
/// string values, as the ECS agent reads them (`what` names one in an error: "attribute",
/// "tag"). ECS's rules for names and values are checked when registering.
fn parse_string_object(text: &str, what: &str) -> Result<Vec<(String, String)>, String> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|error| format!("must be a JSON object of names to values: {error}"))?;
    let serde_json::Value::Object(map) = value else {
        return Err(
            "must be a JSON object of names to values, e.g. {\"stack\":\"prod\"}".to_string(),
        );
    };
    map.into_iter()
        .map(|(name, value)| match value {
            serde_json::Value::String(value) => Ok((name, value)),
            other => Err(format!(
                "the value of {what} {name:?} must be a string, not {other}"
            )),
        })
        .collect()
}

/// Where `environmentFiles` come from when the mirror (`DECKHAND_ENVIRONMENT_FILES_DIR`,
/// `Config::environment_files_dir`) has no copy: S3 at `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL` or
/// `https://s3.<region>.amazonaws.com`, signed with the host's credentials (the chain the ECS
/// connection reads). `Debug` names the credential keys it holds, never their values.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct EnvironmentFilesConfig {
    /// `AWS_REGION`, else `AWS_DEFAULT_REGION`.
    pub region: Option<String>,
    /// `AWS_ENDPOINT_URL_S3`, else `AWS_ENDPOINT_URL`.
    pub endpoint: Option<String>,
    /// The credential chain's values (`AWS_ACCESS_KEY_ID`, …, `HOME`), as
    /// `CredentialChain::from_values` takes them.
    pub credential_values: BTreeMap<String, String>,
}

impl fmt::Debug for EnvironmentFilesConfig {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("EnvironmentFilesConfig")
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .field(
                "credential_keys",
                &self.credential_values.keys().collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// The environment-file keys but the mirror (read with the other paths).
pub(super) fn read_environment_files(
    sources: &Sources,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<EnvironmentFilesConfig, ConfigError> {
    let text = |key: &'static str| sources.value(key).map(|raw| raw.value.clone());
    let mut credential_values = BTreeMap::new();
    for key in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
    ] {
        if let Some(value) = text(key) {
            credential_values.insert(key.to_string(), value);
        }
    }
    credential_values.insert(
        "AWS_PROFILE".to_string(),
        text("AWS_PROFILE").unwrap_or_else(|| default_of("AWS_PROFILE").to_string()),
    );
    let shared_file = match sources.value("AWS_SHARED_CREDENTIALS_FILE") {
        Some(raw) => Some(raw.parse_with(parse_absolute_path)?),
        None => default_shared_credentials_file(env),
    };
    let shared_file = shared_file.unwrap_or_else(|| PathBuf::from("/root/.aws/credentials"));
    credential_values.insert(
        "AWS_SHARED_CREDENTIALS_FILE".to_string(),
        shared_file.display().to_string(),
    );
    Ok(EnvironmentFilesConfig {
        region: text("AWS_REGION").or_else(|| text("AWS_DEFAULT_REGION")),
        endpoint: text("AWS_ENDPOINT_URL_S3").or_else(|| text("AWS_ENDPOINT_URL")),
        credential_values,
    })
}

/// The keys that say where an AWS service of tasks' roles is, as the AWS SDKs read them.
pub const AWS_ENDPOINT_KEYS: [&str; 5] = [
    "AWS_ENDPOINT_URL_STS",
    "AWS_ENDPOINT_URL_SSM",
    "AWS_ENDPOINT_URL_SECRETS_MANAGER",
    "AWS_ENDPOINT_URL_ECR",
    "AWS_ENDPOINT_URL",
];

/// The values of [`AWS_ENDPOINT_KEYS`] that are set and not empty (checked where they are
/// used: `control::aws`, whose errors name the key).
pub(super) fn read_aws_endpoints(sources: &Sources) -> BTreeMap<String, String> {
    crate::sorting::map_of(AWS_ENDPOINT_KEYS.iter().filter_map(|key| {
        let raw = sources.value(key)?;
        (!raw.value.trim().is_empty()).then(|| (key.to_string(), raw.value.clone()))
    }))
}

/// `DECKHAND_TASK_ROLES`: where the credentials of a local task's roles (`taskRoleArn`,
/// `executionRoleArn`; not ECS's tasks, whose credentials ECS sends) come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaskRoles {
    /// The roles are ignored (with a warning at submit).
    #[default]
    Off,
    /// STS `AssumeRole` of each role with the host's credentials.
    Assume,
    /// The host's own credentials (development hosts).
    Host,
}

impl TaskRoles {
    pub(super) fn parse(text: &str) -> Result<TaskRoles, String> {
        match text.trim() {
            "off" => Ok(TaskRoles::Off),
            "assume" => Ok(TaskRoles::Assume),
            "host" => Ok(TaskRoles::Host),
            other => Err(format!(
                "unknown task roles mode {other:?} (expected off, assume or host)"
            )),
        }
    }
}
