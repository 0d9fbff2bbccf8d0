//! Secrets Manager: `secretsmanager.GetSecretValue` (JSON 1.1, signed for `secretsmanager`) and
//! the readers around it (pure, fuzzed): a secret's `valueFrom` ([`parse_value_from`]: the
//! secret's ARN, optionally followed by `:json-key:version-stage:version-id` as ECS reads it,
//! each of the three possibly empty; or a bare name), the answer
//! ([`parse_get_secret_value_answer`]: `SecretString` or `SecretBinary`), and a JSON key's value
//! in a `SecretString` ([`json_key_value`]).

use std::fmt;

use super::call::{read_json_object, string_field, AwsClient, SigningCredentials};
use super::endpoint::is_region;
use super::{AwsError, Service};

/// The JSON 1.1 target of `GetSecretValue`.
pub const GET_SECRET_VALUE_TARGET: &str = "secretsmanager.GetSecretValue";
/// A `valueFrom` longer than this is refused (a secret's ARN is at most 2048 characters).
const MAX_REFERENCE_CHARS: usize = 4096;

/// A `valueFrom` naming a Secrets Manager secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretReference {
    /// The `SecretId` asked: the secret's ARN without the three fields after it, or the name.
    pub secret_id: String,
    /// The ARN's region; `None` for a name.
    pub region: Option<String>,
    /// The key of the JSON `SecretString` whose value is wanted; `None`: the whole string.
    pub json_key: Option<String>,
    pub version_stage: Option<String>,
    pub version_id: Option<String>,
}

impl SecretReference {
    /// The region whose Secrets Manager holds the secret.
    pub fn region_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.region.as_deref().unwrap_or(default)
    }
}

/// Reads a `valueFrom` naming a secret: `arn:<partition>:secretsmanager:<region>:<account>:secret:<id>`
/// then either nothing or exactly `:<json-key>:<version-stage>:<version-id>` (ECS's message for
/// any other count: "an invalid ARN format for the AWS Secrets Manager secret was specified");
/// a text that is not an ARN is the secret's name. Pure.
pub fn parse_value_from(text: &str) -> Result<SecretReference, String> {
    if text.is_empty() || text.chars().count() > MAX_REFERENCE_CHARS {
        return Err(format!(
            "a secret is named by 1 to {MAX_REFERENCE_CHARS} characters"
        ));
    }
    if text
        .chars()
        .any(|character| character.is_whitespace() || character.is_control())
    {
        return Err("a secret's name or ARN has no spaces or control characters".to_string());
    }
    let Some(arn) = text.strip_prefix("arn:") else {
        return Ok(SecretReference {
            secret_id: text.to_string(),
            region: None,
            json_key: None,
            version_stage: None,
            version_id: None,
        });
    };
    let invalid = || {
        "an invalid ARN format for the AWS Secrets Manager secret was specified. Specify a valid \
         ARN and try again."
            .to_string()
    };
    let fields: Vec<&str> = arn.split(':').collect();
    let [partition, service, region, account, "secret", id, ref rest @ ..] = fields[..] else {
        return Err(invalid());
    };
    if partition.is_empty()
        || service != "secretsmanager"
        || !is_region(region)
        || account.is_empty()
        || !account.bytes().all(|byte| byte.is_ascii_digit())
        || id.is_empty()
    {
        return Err(invalid());
    }
    let optional = |value: &str| (!value.is_empty()).then(|| value.to_string());
    let (json_key, version_stage, version_id) = match rest {
        [] => (None, None, None),
        [key, stage, version] => (optional(key), optional(stage), optional(version)),
        _ => return Err(invalid()),
    };
    Ok(SecretReference {
        secret_id: format!("arn:{partition}:{service}:{region}:{account}:secret:{id}"),
        region: Some(region.to_string()),
        json_key,
        version_stage,
        version_id,
    })
}

/// A secret's value.
#[derive(Clone, PartialEq, Eq)]
pub enum SecretValue {
    String(String),
    Binary(Vec<u8>),
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretValue::String(_) => formatter.write_str("SecretValue::String(<hidden>)"),
            SecretValue::Binary(_) => formatter.write_str("SecretValue::Binary(<hidden>)"),
        }
    }
}

/// Reads a `GetSecretValue` answer: its `SecretString`, else its `SecretBinary` (base64). The
/// error never quotes the answer. Pure.
pub fn parse_get_secret_value_answer(body: &[u8]) -> Result<SecretValue, String> {
    const OPERATION: &str = "GetSecretValue";
    let answer: serde_json::Value = read_json_object(body, OPERATION)?;
    let text = string_field(&answer, "SecretString", OPERATION)?;
    match (text, string_field(&answer, "SecretBinary", OPERATION)?) {
        (Some(text), _) => Ok(SecretValue::String(text)),
        (None, Some(encoded)) => crate::encoding::base64_standard_decode(&encoded)
            .map(SecretValue::Binary)
            .map_err(|error| format!("the GetSecretValue answer's SecretBinary: {error}")),
        (None, None) => {
            Err("the GetSecretValue answer has neither SecretString nor SecretBinary".into())
        }
    }
}

/// The value of `key` in a JSON object `SecretString`: a string as it is, anything else as its
/// JSON text. The error never quotes the secret. Pure.
pub fn json_key_value(secret: &str, key: &str) -> Result<String, String> {
    let document: serde_json::Value = serde_json::from_str(secret)
        .map_err(|_| "the secret's value is not JSON, so it has no JSON key".to_string())?;
    match document.as_object().and_then(|object| object.get(key)) {
        Some(serde_json::Value::String(text)) => Ok(text.clone()),
        Some(other) => Ok(other.to_string()),
        None => Err(format!(
            "retrieved secret from Secrets Manager did not contain json key {key}"
        )),
    }
}

/// The body of a `GetSecretValue` call. Pure.
pub fn get_secret_value_request(reference: &SecretReference) -> serde_json::Value {
    let mut request = serde_json::json!({"SecretId": reference.secret_id});
    if let Some(stage) = &reference.version_stage {
        request["VersionStage"] = serde_json::Value::from(stage.as_str());
    }
    if let Some(version) = &reference.version_id {
        request["VersionId"] = serde_json::Value::from(version.as_str());
    }
    request
}

impl AwsClient {
    /// `GetSecretValue` of the secret (its version or stage when named) from `region`'s
    /// Secrets Manager.
    pub fn get_secret_value(
        &self,
        region: &str,
        reference: &SecretReference,
        credentials: &dyn SigningCredentials,
    ) -> Result<SecretValue, AwsError> {
        let body = self.json_call(
            Service::SecretsManager,
            region,
            GET_SECRET_VALUE_TARGET,
            &get_secret_value_request(reference),
            credentials,
        )?;
        parse_get_secret_value_answer(&body).map_err(|message| AwsError::Protocol {
            service: Service::SecretsManager,
            message,
        })
    }

    /// What a container's secret gets from `reference`: the `SecretString` (from the ARN's
    /// region, else `default_region`), or its JSON key's value when one is named.
    pub fn secret_text(
        &self,
        default_region: &str,
        reference: &SecretReference,
        credentials: &dyn SigningCredentials,
    ) -> Result<String, AwsError> {
        let region = reference.region_or(default_region);
        let value = self.get_secret_value(region, reference, credentials)?;
        let protocol = |message: String| AwsError::Protocol {
            service: Service::SecretsManager,
            message: format!("secret {}: {message}", reference.secret_id),
        };
        let SecretValue::String(text) = value else {
            return Err(protocol(
                "it holds a SecretBinary, not a SecretString".to_string(),
            ));
        };
        match &reference.json_key {
            None => Ok(text),
            Some(key) => json_key_value(&text, key).map_err(protocol),
        }
    }
}
