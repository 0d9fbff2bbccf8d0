//! Fuzz entry points for the agent's configuration file and the registry credentials it holds.

use std::path::Path;

/// The configuration file, then `KEY=VALUE` environment lines after a NUL byte, for both the
/// system and the per-user scope.
pub fn config_file(data: &[u8]) {
    let (file, environment) = match data.iter().position(|byte| *byte == 0) {
        Some(split) => (&data[..split], &data[split + 1..]),
        None => (data, &[][..]),
    };
    // The agent reads the file as UTF-8 text (`read_to_string`); other bytes stop there.
    let Ok(text) = std::str::from_utf8(file) else {
        return;
    };
    let environment: Vec<(String, String)> = String::from_utf8_lossy(environment)
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect();
    let env = |key: &str| {
        environment
            .iter()
            .rev()
            .find(|(candidate, _)| candidate == key)
            .map(|(_, value)| value.clone())
    };
    for scope in [crate::config::Scope::System, crate::config::Scope::User] {
        let path = Path::new("/etc/deckhand/deckhand.conf");
        let _ = crate::config::Config::from_sources(Some((path, text)), &env, scope);
    }
    let _ = crate::config::parse_duration(text);
    registry_credentials(text);
}

/// Registry credentials (part of `config_file`): the whole text as `ECS_ENGINE_AUTH_DATA` in both
/// formats (each line then matched as an image), and each line as an image reference, a registry
/// key and a `.dockercfg` `auth`.
fn registry_credentials(text: &str) {
    use crate::registry::{parse_auth_data, parse_registry_key, registry_of_image, AuthDataFormat};
    for format in [AuthDataFormat::Docker, AuthDataFormat::Dockercfg] {
        match parse_auth_data(format, text) {
            Ok(credentials) => {
                for line in text.lines() {
                    if let Some(matched) = credentials.for_image(line) {
                        assert!(credentials
                            .registries()
                            .any(|given| given == matched.registry));
                    }
                }
                // Every password stands as `<redacted>` in the Debug output.
                let debug = format!("{credentials:?}");
                assert!(debug.matches("<redacted>").count() >= credentials.registries().count());
            }
            Err(message) => {
                assert!(!message.is_empty());
            }
        }
    }
    for line in text.lines() {
        let _ = registry_of_image(line);
        let _ = parse_registry_key(line);
        let _ = crate::encoding::base64_standard_decode(line);
    }
}
