//! Fuzz entry points for the AWS service clients of tasks' roles (`control::aws`): the answers
//! of STS (XML), SSM, Secrets Manager and ECR (JSON), their error bodies, and the references a
//! task hands them (SSM and Secrets Manager `valueFrom`, ECR image references and tokens).

use crate::control::aws::{ecr, secrets_manager, service_endpoint, ssm, sts, Service};

/// The services' answers: never a panic; credentials read from an STS answer are complete and
/// never in their `Debug`; an STS error has a code; every SSM parameter read is found again by
/// its name; every ECR login has a user; a JSON error body's code has no `prefix#`.
pub fn aws_answers(data: &[u8]) {
    match sts::parse_assume_role_answer(data) {
        Ok(role) => {
            let credentials = &role.credentials;
            assert!(!credentials.access_key_id.is_empty());
            assert!(!credentials.secret_access_key.is_empty());
            assert!(credentials
                .session_token
                .as_deref()
                .is_some_and(|token| !token.is_empty()));
            let debug = format!("{role:?}");
            assert!(debug.matches("<hidden>").count() == 2, "{debug}");
        }
        Err(message) => assert!(!message.is_empty()),
    }
    if let Some((code, _message)) = sts::parse_error_answer(data) {
        assert!(!code.is_empty() && code.trim() == code, "{code:?}");
    }
    let _ = sts::xml_texts(data, &["a", "a/b", "a/b/c"]);
    if let Ok(answer) = ssm::parse_get_parameters_answer(data) {
        for parameter in &answer.parameters {
            assert!(answer.value_of(&parameter.name).is_some(), "{parameter:?}");
        }
    }
    let _ = secrets_manager::parse_get_secret_value_answer(data);
    if let Ok(logins) = ecr::parse_authorization_answer(data) {
        for login in logins {
            assert!(!login.username.is_empty());
            assert!(format!("{login:?}").contains("password: \"<hidden>\""));
        }
    }
    let (code, _message) = crate::control::ecs::error_parts(None, data);
    if let Some(code) = code {
        assert!(!code.contains('#') && !code.is_empty(), "{code:?}");
        let _ = crate::control::aws::call::is_retryable_refusal(400, &code);
    }
}

/// What a task hands the clients, as text: an SSM `valueFrom` (an ARN's name and region are
/// consistent), a Secrets Manager `valueFrom` (an ARN's secret id reads back as itself with no
/// key, stage or version), an image reference (an ECR registry's host starts the image, its
/// account is 12 digits), a token, a JSON `SecretString`, a region's endpoints and a task id's
/// session name (2 to 64 of STS's characters). Never a panic.
pub fn aws_references(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(reference) = ssm::parse_value_from(text) {
        assert_eq!(reference.asked, text);
        assert!(!reference.name.is_empty());
        if let Some(region) = &reference.region {
            assert!(!region.is_empty());
            assert_eq!(
                reference.name.starts_with('/'),
                reference.name.matches('/').count() > 1
            );
        }
    }
    if let Ok(reference) = secrets_manager::parse_value_from(text) {
        assert!(!reference.secret_id.is_empty());
        if reference.region.is_some() {
            let again = secrets_manager::parse_value_from(&reference.secret_id)
                .expect("a secret's ARN reads back");
            assert_eq!(again.secret_id, reference.secret_id);
            assert_eq!(again.json_key, None);
            assert_eq!(again.version_stage, None);
            assert_eq!(again.version_id, None);
        }
        let _ = crate::control::aws::secrets_manager::get_secret_value_request(&reference);
    }
    if let Some(registry) = ecr::parse_ecr_image(text) {
        assert!(text.starts_with(&format!("{}/", registry.host)));
        assert!(registry.account.len() == 12 && registry.host.contains(&registry.region));
    }
    if crate::engine::workers::names_secrets_manager(text) {
        assert!(text.starts_with("arn:"));
    }
    let _ = ecr::decode_token(text);
    let _ = secrets_manager::json_key_value(text, "password");
    for service in [
        Service::Sts,
        Service::Ssm,
        Service::SecretsManager,
        Service::Ecr,
    ] {
        if let Ok(endpoint) = service_endpoint(service, text, &|_| None) {
            assert!(endpoint.tls && endpoint.host.contains(text), "{endpoint}");
        }
    }
    let name = sts::session_name(text);
    assert!(name.starts_with("deckhand-") && name.chars().count() <= 64);
    assert!(name
        .chars()
        .all(|character| character.is_ascii_alphanumeric() || "+=,.@_-".contains(character)));
}
