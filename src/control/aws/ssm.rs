//! SSM Parameter Store: `AmazonSSM.GetParameters` with decryption (JSON 1.1, signed for `ssm`),
//! at most ten names a call as the API allows, and the readers around it (pure, fuzzed): a
//! secret's `valueFrom` naming a parameter ([`parse_value_from`]: a name, a `/path/name`, or
//! `arn:<partition>:ssm:<region>:<account>:parameter/<name>`, whose region decides which SSM
//! is asked, as ECS's does) and the answer ([`parse_get_parameters_answer`]: `Parameters[]`'s
//! `Name`, `ARN` and `Value`, and `InvalidParameters`).

use std::fmt;

use super::call::{list_field, read_json_object, string_field, AwsClient, SigningCredentials};
use super::endpoint::is_region;
use super::{AwsError, Service};

/// The JSON 1.1 target of `GetParameters`.
pub const GET_PARAMETERS_TARGET: &str = "AmazonSSM.GetParameters";
/// Names in one `GetParameters` call at most (the API's limit).
pub const MAX_NAMES_PER_CALL: usize = 10;
/// A parameter name (with its `:version` or `:label`) or ARN longer than this is refused.
const MAX_REFERENCE_CHARS: usize = 2048;

/// A `valueFrom` naming an SSM parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SsmReference {
    /// What `GetParameters` is asked for: the `valueFrom` as written (a name or an ARN).
    pub asked: String,
    /// The parameter's name (`/path/name` or `name`), from the ARN when it is one.
    pub name: String,
    /// The ARN's region; `None` for a name (the caller's region is asked).
    pub region: Option<String>,
}

impl SsmReference {
    /// The region whose SSM holds the parameter.
    pub fn region_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.region.as_deref().unwrap_or(default)
    }
}

/// Reads a `valueFrom` naming an SSM parameter. Pure.
pub fn parse_value_from(text: &str) -> Result<SsmReference, String> {
    if text.is_empty() || text.chars().count() > MAX_REFERENCE_CHARS {
        return Err(format!(
            "an SSM parameter is named by 1 to {MAX_REFERENCE_CHARS} characters"
        ));
    }
    if text
        .chars()
        .any(|character| character.is_whitespace() || character.is_control())
    {
        return Err("an SSM parameter name has no spaces or control characters".to_string());
    }
    let Some(arn) = text.strip_prefix("arn:") else {
        return Ok(SsmReference {
            asked: text.to_string(),
            name: text.to_string(),
            region: None,
        });
    };
    let bad = || {
        format!(
            "{:?} is not an SSM parameter ARN (arn:<partition>:ssm:<region>:<account>:parameter/<name>)",
            crate::text::truncate_chars(text, 200)
        )
    };
    let mut fields = arn.splitn(5, ':');
    let (Some(partition), Some(service), Some(region), Some(account), Some(resource)) = (
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
    ) else {
        return Err(bad());
    };
    let parameter = resource.strip_prefix("parameter/").ok_or_else(bad)?;
    if partition.is_empty()
        || service != "ssm"
        || !is_region(region)
        || account.is_empty()
        || !account.bytes().all(|byte| byte.is_ascii_digit())
        || parameter.is_empty()
        || parameter.starts_with('/')
    {
        return Err(bad());
    }
    // A hierarchical name (`/path/name`) loses its first `/` in the ARN.
    let name = if parameter.contains('/') {
        format!("/{parameter}")
    } else {
        parameter.to_string()
    };
    Ok(SsmReference {
        asked: text.to_string(),
        name,
        region: Some(region.to_string()),
    })
}

/// One parameter of an answer.
#[derive(Clone, PartialEq, Eq)]
pub struct SsmParameter {
    pub name: String,
    pub arn: Option<String>,
    pub value: String,
}

impl fmt::Debug for SsmParameter {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("SsmParameter")
            .field("name", &self.name)
            .field("arn", &self.arn)
            .field("value", &"<hidden>")
            .finish()
    }
}

/// A `GetParameters` answer (or several, for more than ten names).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SsmParameters {
    pub parameters: Vec<SsmParameter>,
    /// The names SSM does not know (or may not be read).
    pub invalid: Vec<String>,
}

impl SsmParameters {
    /// The value of the parameter `asked` names: by the name, the ARN, or an ARN's name.
    pub fn value_of(&self, asked: &str) -> Option<&str> {
        let name = parse_value_from(asked).map(|reference| reference.name).ok();
        self.parameters
            .iter()
            .find(|parameter| {
                parameter.name == asked
                    || parameter.arn.as_deref() == Some(asked)
                    || name.as_deref() == Some(parameter.name.as_str())
            })
            .map(|parameter| parameter.value.as_str())
    }
}

/// Reads a `GetParameters` answer: a parameter without a name or a value is an error. The
/// error never quotes the answer (it holds secrets). Pure.
pub fn parse_get_parameters_answer(body: &[u8]) -> Result<SsmParameters, String> {
    const OPERATION: &str = "GetParameters";
    let answer: serde_json::Value = read_json_object(body, OPERATION)?;
    let items = list_field(&answer, "Parameters", OPERATION)?;
    let mut parameters = Vec::with_capacity(items.len());
    for item in items {
        let name = string_field(item, "Name", OPERATION)?;
        let value = string_field(item, "Value", OPERATION)?;
        let (Some(name), Some(value)) = (name, value) else {
            return Err("the GetParameters answer has a parameter without a Name or Value".into());
        };
        parameters.push(SsmParameter {
            name,
            arn: string_field(item, "ARN", OPERATION)?,
            value,
        });
    }
    let invalid = list_field(&answer, "InvalidParameters", OPERATION)?
        .iter()
        .map(|name| {
            name.as_str().map(str::to_string).ok_or_else(|| {
                "the GetParameters answer's InvalidParameters is not names".to_string()
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(SsmParameters {
        parameters,
        invalid,
    })
}

/// The body of one `GetParameters` call. Pure.
pub fn get_parameters_request(names: &[String]) -> serde_json::Value {
    serde_json::json!({"Names": names, "WithDecryption": true})
}

impl AwsClient {
    /// `GetParameters` of `names` with decryption in `region`'s SSM, ten names a call.
    pub fn get_parameters(
        &self,
        region: &str,
        names: &[String],
        credentials: &dyn SigningCredentials,
    ) -> Result<SsmParameters, AwsError> {
        let mut all = SsmParameters::default();
        for chunk in names.chunks(MAX_NAMES_PER_CALL) {
            let body = self.json_call(
                Service::Ssm,
                region,
                GET_PARAMETERS_TARGET,
                &get_parameters_request(chunk),
                credentials,
            )?;
            let answer =
                parse_get_parameters_answer(&body).map_err(|message| AwsError::Protocol {
                    service: Service::Ssm,
                    message,
                })?;
            all.parameters.extend(answer.parameters);
            all.invalid.extend(answer.invalid);
        }
        Ok(all)
    }

    /// The values of `references` (each from its ARN's region, else `default_region`), in
    /// their order; an error when SSM says any is invalid (`invalid parameters: <names>`, as
    /// the Go agent words it) or leaves one out.
    pub fn parameter_values(
        &self,
        default_region: &str,
        references: &[SsmReference],
        credentials: &dyn SigningCredentials,
    ) -> Result<Vec<String>, AwsError> {
        let mut regions: Vec<&str> = references
            .iter()
            .map(|reference| reference.region_or(default_region))
            .collect();
        crate::sorting::sort(&mut regions);
        regions.dedup();
        let mut answers = Vec::new();
        for region in regions {
            let mut names: Vec<String> = references
                .iter()
                .filter(|reference| reference.region_or(default_region) == region)
                .map(|reference| reference.asked.clone())
                .collect();
            crate::sorting::sort(&mut names);
            names.dedup();
            let answer = self.get_parameters(region, &names, credentials)?;
            if !answer.invalid.is_empty() {
                return Err(AwsError::Refused {
                    service: Service::Ssm,
                    operation: "GetParameters".to_string(),
                    status: 200,
                    code: "InvalidParameters".to_string(),
                    message: format!("invalid parameters: {}", answer.invalid.join(",")),
                });
            }
            answers.push((region, answer));
        }
        references
            .iter()
            .map(|reference| {
                let region = reference.region_or(default_region);
                answers
                    .iter()
                    .find(|(answered, _)| *answered == region)
                    .and_then(|(_, answer)| answer.value_of(&reference.asked))
                    .map(str::to_string)
                    .ok_or_else(|| AwsError::Protocol {
                        service: Service::Ssm,
                        message: format!(
                            "the GetParameters answer has no value for {}",
                            reference.asked
                        ),
                    })
            })
            .collect()
    }
}
