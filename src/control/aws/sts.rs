//! STS `AssumeRole` over the query protocol: `POST` of the form
//! `Action=AssumeRole&Version=2011-06-15&RoleArn=…&RoleSessionName=…&DurationSeconds=…`, signed
//! for service `sts`, answered in XML. The answer's reader ([`parse_assume_role_answer`]) and the
//! error's ([`parse_error_answer`], `<ErrorResponse><Error><Code>…<Message>…`) read the XML with
//! [`xml_texts`] (`xml`: the text of a few element paths, entities resolved, depth bounded, no
//! `DOCTYPE`); pure and fuzzed. [`session_name`] makes the session name of a task's role.

use std::fmt;

use super::call::{AwsClient, Operation, SigningCredentials, FORM_CONTENT_TYPE};
use super::{AwsError, Service};
use crate::control::ecs::credentials::Credentials;
use crate::control::ecs::signed_call::Answer;
use crate::control::ecs::sigv4::uri_encode;

pub use super::xml::xml_texts;

/// The query protocol's API version of STS.
pub const STS_VERSION: &str = "2011-06-15";
/// The duration asked when the caller names none: STS's default, one hour.
pub const DEFAULT_DURATION_SECONDS: u32 = 3600;

/// What to assume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssumeRoleRequest {
    pub role_arn: String,
    /// 2 to 64 of `[A-Za-z0-9+=,.@_-]` ([`session_name`] makes one).
    pub session_name: String,
    /// `None`: STS's default (an hour).
    pub duration_seconds: Option<u32>,
}

/// A role's temporary credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct AssumedRole {
    pub credentials: Credentials,
    /// When they expire, in epoch milliseconds.
    pub expiration_millis: u64,
    /// The assumed role's ARN (`arn:aws:sts::<account>:assumed-role/<role>/<session>`).
    pub assumed_role_arn: Option<String>,
}

impl fmt::Debug for AssumedRole {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("AssumedRole")
            .field("credentials", &self.credentials)
            .field("expiration_millis", &self.expiration_millis)
            .field("assumed_role_arn", &self.assumed_role_arn)
            .finish()
    }
}

impl AwsClient {
    /// `AssumeRole` in `region`, signed with `credentials` (the host's, usually).
    pub fn assume_role(
        &self,
        region: &str,
        request: &AssumeRoleRequest,
        credentials: &dyn SigningCredentials,
    ) -> Result<AssumedRole, AwsError> {
        let body = assume_role_form(request);
        let answer = self.call(
            &Operation {
                service: Service::Sts,
                name: "AssumeRole",
                region,
                headers: &[("Content-Type", FORM_CONTENT_TYPE)],
                body: body.as_bytes(),
                read_error: xml_error,
            },
            credentials,
        )?;
        parse_assume_role_answer(&answer).map_err(|message| AwsError::Protocol {
            service: Service::Sts,
            message: format!("the AssumeRole answer: {message}"),
        })
    }
}

/// The form body of an `AssumeRole` request. Pure.
pub fn assume_role_form(request: &AssumeRoleRequest) -> String {
    let duration = request
        .duration_seconds
        .unwrap_or(DEFAULT_DURATION_SECONDS)
        .to_string();
    [
        ("Action", "AssumeRole"),
        ("Version", STS_VERSION),
        ("RoleArn", request.role_arn.as_str()),
        ("RoleSessionName", request.session_name.as_str()),
        ("DurationSeconds", duration.as_str()),
    ]
    .iter()
    .map(|(name, value)| format!("{name}={}", uri_encode(value, false)))
    .collect::<Vec<_>>()
    .join("&")
}

/// The session name of a task's role: `deckhand-<task id>`, with every character STS refuses
/// replaced by `-`, at most 64 characters. Pure.
pub fn session_name(task_id: &str) -> String {
    let name: String = format!("deckhand-{task_id}")
        .chars()
        .map(|character| {
            if character.is_ascii_alphanumeric() || "+=,.@_-".contains(character) {
                character
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    name
}

const ANSWER_PATHS: [&str; 5] = [
    "AssumeRoleResponse/AssumeRoleResult/Credentials/AccessKeyId",
    "AssumeRoleResponse/AssumeRoleResult/Credentials/SecretAccessKey",
    "AssumeRoleResponse/AssumeRoleResult/Credentials/SessionToken",
    "AssumeRoleResponse/AssumeRoleResult/Credentials/Expiration",
    "AssumeRoleResponse/AssumeRoleResult/AssumedRoleUser/Arn",
];

/// Reads `AssumeRoleResponse`: the three credentials and their `Expiration` (RFC 3339) are
/// needed, the assumed role's ARN is kept when present. The error never quotes a value. Pure.
pub fn parse_assume_role_answer(body: &[u8]) -> Result<AssumedRole, String> {
    let [key, secret, token, expiration, arn] = xml_texts(body, &ANSWER_PATHS)?;
    let needed = |value: Option<String>, name: &str| {
        value
            .map(|text| text.trim().to_string())
            .filter(|text| !text.is_empty())
            .ok_or_else(|| format!("it has no {name}"))
    };
    let credentials = Credentials {
        access_key_id: needed(key, "AccessKeyId")?,
        secret_access_key: needed(secret, "SecretAccessKey")?,
        session_token: Some(needed(token, "SessionToken")?),
    };
    let expiration = needed(expiration, "Expiration")?;
    let expiration_millis = crate::task::time::millis_from_rfc3339(&expiration)
        .ok_or("its Expiration is not an RFC 3339 time")?;
    Ok(AssumedRole {
        credentials,
        expiration_millis,
        assumed_role_arn: arn
            .map(|text| text.trim().to_string())
            .filter(|text| !text.is_empty()),
    })
}

/// The `Code` and `Message` of STS's `<ErrorResponse><Error>…` (or a bare `<Error>`); `None`
/// when the body is not such XML. Pure.
pub fn parse_error_answer(body: &[u8]) -> Option<(String, String)> {
    let [code, message, bare_code, bare_message] = xml_texts(
        body,
        &[
            "ErrorResponse/Error/Code",
            "ErrorResponse/Error/Message",
            "Error/Code",
            "Error/Message",
        ],
    )
    .ok()?;
    let code = code.or(bare_code)?.trim().to_string();
    (!code.is_empty()).then(|| (code, message.or(bare_message).unwrap_or_default()))
}

/// The error of an STS answer: its XML's, else the status's reason and the body's text.
fn xml_error(answer: &Answer) -> (String, String) {
    parse_error_answer(&answer.body).unwrap_or_else(|| {
        let text = String::from_utf8_lossy(&answer.body);
        (
            answer.reason.to_string(),
            crate::text::truncate_chars(text.trim(), 512).to_string(),
        )
    })
}
