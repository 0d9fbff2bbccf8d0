//! Registry credentials the ECS way (§13): `ECS_ENGINE_AUTH_TYPE` names the format of
//! `ECS_ENGINE_AUTH_DATA`, a JSON object keyed by registry —
//! `docker`: `{"registry.example.com": {"username": "…", "password": "…", "email": "…"}}`,
//! `dockercfg` (the contents of a `.dockercfg`): `{"registry.example.com": {"auth": "<base64
//! user:password>", "email": "…"}}` — and the choice of one credential for an image reference,
//! which the engine hands to Docker's pull as `X-Registry-Auth`.
//!
//! A leaf module: the configuration parses and validates with it (so bad data is a configuration
//! error at start, exit 78), the engine matches images with it, and neither imports the other.
//!
//! Rules that are not obvious:
//! - A registry key is a host (with its port, if any), optionally after `https://` or `http://`
//!   and optionally followed by a path. The scheme is dropped, as ECS drops it; a leading `v1` or
//!   `v2` path segment (what `docker login` wrote into keys, `https://index.docker.io/v1/`) is an
//!   API version, not a namespace, and is dropped too. What is left of the path is a namespace.
//! - Docker Hub has several names (`docker.io`, `index.docker.io`, `registry-1.docker.io`); a key
//!   for any of them serves every Hub image, including the short ones (`busybox`, `team/app`).
//! - An image's registry is its first path component when that has a `.` or `:`, is `localhost`
//!   or has an upper-case letter (Docker's rule); otherwise the image is on Docker Hub.
//! - Matching is by host and port, exactly. Among keys for the same host, the longest namespace
//!   that the image's repository is in wins (a key without a namespace covers every repository);
//!   if none covers it, the host's first key in alphabetical order is used, since ECS also sends
//!   a host's credentials when only the host matches.
//! - Errors name registries and fields, never a value: the data holds passwords. The `Debug`
//!   output of every type here shows `<redacted>` for a password.

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

use crate::encoding::base64_standard_decode;

pub mod ecr;

/// The names Docker Hub goes by in image references and credential keys.
const DOCKER_HUB_HOSTS: &[&str] = &["docker.io", "index.docker.io", "registry-1.docker.io"];
/// The one name deckhand uses for Docker Hub once a key or reference is read.
pub const DOCKER_HUB: &str = "docker.io";
/// The server address Docker's own clients send with Docker Hub credentials.
pub const DOCKER_HUB_SERVER_ADDRESS: &str = "https://index.docker.io/v1/";

/// What stands for a secret in `Debug` output and messages.
const REDACTED: &str = "<redacted>";

/// `ECS_ENGINE_AUTH_TYPE`: how `ECS_ENGINE_AUTH_DATA` is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthDataFormat {
    /// `{"registry": {"username": …, "password": …, "email": …}}`.
    Docker,
    /// `{"registry": {"auth": base64("user:password"), "email": …}}`, a `.dockercfg`.
    Dockercfg,
}

impl FromStr for AuthDataFormat {
    type Err = String;
    fn from_str(value: &str) -> Result<AuthDataFormat, String> {
        match value {
            "docker" => Ok(AuthDataFormat::Docker),
            "dockercfg" => Ok(AuthDataFormat::Dockercfg),
            other => Err(format!(
                "unknown auth type {other:?} (expected docker or dockercfg)"
            )),
        }
    }
}

/// One registry's user name and password.
#[derive(Clone, PartialEq, Eq)]
pub struct RegistryCredential {
    pub username: String,
    pub password: String,
}

impl fmt::Debug for RegistryCredential {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("RegistryCredential")
            .field("username", &self.username)
            .field("password", &format_args!("{REDACTED}"))
            .finish()
    }
}

/// The credential chosen for an image: what to send to Docker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistryMatch<'a> {
    /// The registry as the configuration wrote it (for messages).
    pub registry: &'a str,
    /// Docker's `serveraddress`: the registry's host and port, or Docker Hub's usual address.
    pub server_address: &'a str,
    pub credential: &'a RegistryCredential,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct RegistryEntry {
    /// The key as written in the data.
    given: String,
    /// Lower case, with its port; Docker Hub as [`DOCKER_HUB`].
    host: String,
    /// The path after the host without an API version segment; empty for the whole registry.
    namespace: String,
    server_address: String,
    credential: RegistryCredential,
}

/// Every configured registry credential, in order of (host, namespace). Empty when none is
/// configured.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct RegistryCredentials {
    entries: Vec<RegistryEntry>,
}

impl fmt::Debug for RegistryCredentials {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_map()
            .entries(
                self.entries
                    .iter()
                    .map(|entry| (&entry.given, &entry.credential)),
            )
            .finish()
    }
}

impl RegistryCredentials {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The registries as the configuration wrote them, in matching order.
    pub fn registries(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|entry| entry.given.as_str())
    }

    /// The credential to pull `image` with, if one is configured for its registry.
    pub fn for_image(&self, image: &str) -> Option<RegistryMatch<'_>> {
        let (host, repository) = registry_of_image(image);
        let same_host: Vec<&RegistryEntry> = self
            .entries
            .iter()
            .filter(|entry| entry.host == host)
            .collect();
        let entry = same_host
            .iter()
            .filter(|entry| namespace_covers(&entry.namespace, &repository))
            .max_by_key(|entry| entry.namespace.len())
            .or(same_host.first())?;
        Some(RegistryMatch {
            registry: &entry.given,
            server_address: &entry.server_address,
            credential: &entry.credential,
        })
    }
}

/// Whether a key's namespace holds `repository` (`team` holds `team/app`, not `teamwork/app`).
fn namespace_covers(namespace: &str, repository: &str) -> bool {
    namespace.is_empty()
        || repository == namespace
        || repository
            .strip_prefix(namespace)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Reads `ECS_ENGINE_AUTH_DATA` written in `format`. The error names the registry and field at
/// fault and never quotes a value.
pub fn parse_auth_data(format: AuthDataFormat, data: &str) -> Result<RegistryCredentials, String> {
    let document: Value = serde_json::from_str(data).map_err(|error| {
        format!(
            "it is not valid JSON (line {}, column {})",
            error.line(),
            error.column()
        )
    })?;
    let Value::Object(registries) = document else {
        return Err(format!(
            "expected a JSON object keyed by registry, found {}",
            json_type(&document)
        ));
    };
    if registries.contains_key("auths") {
        return Err(
            "\"auths\" is not a registry: give the object inside \"auths\" (the \
                    registries of a config.json), not the whole file"
                .to_string(),
        );
    }
    let mut entries: Vec<RegistryEntry> = Vec::with_capacity(registries.len());
    for (registry, entry) in &registries {
        let Value::Object(fields) = entry else {
            return Err(format!(
                "registry {registry:?}: expected an object, found {}",
                json_type(entry)
            ));
        };
        let credential = match format {
            AuthDataFormat::Docker => docker_entry(fields),
            AuthDataFormat::Dockercfg => dockercfg_entry(fields),
        }
        .map_err(|why| format!("registry {registry:?}: {why}"))?;
        let (host, namespace) =
            parse_registry_key(registry).map_err(|why| format!("registry {registry:?}: {why}"))?;
        if let Some(same) = entries
            .iter()
            .find(|known| known.host == host && known.namespace == namespace)
        {
            return Err(format!(
                "registries {:?} and {registry:?} are the same registry",
                same.given
            ));
        }
        let server_address = if host == DOCKER_HUB {
            DOCKER_HUB_SERVER_ADDRESS.to_string()
        } else {
            host.clone()
        };
        entries.push(RegistryEntry {
            given: registry.clone(),
            host,
            namespace,
            server_address,
            credential,
        });
    }
    crate::sorting::sort_by(&mut entries, |a, b| {
        (&a.host, &a.namespace).cmp(&(&b.host, &b.namespace))
    });
    Ok(RegistryCredentials { entries })
}

/// A `docker` entry: `username` and `password` (required), `email` (accepted, unused: Docker
/// no longer reads it). Field names match in any case, as ECS's JSON reader matches them.
fn docker_entry(fields: &Map<String, Value>) -> Result<RegistryCredential, String> {
    let mut username = None;
    let mut password = None;
    for (field, value) in fields {
        match field.to_ascii_lowercase().as_str() {
            "username" => username = Some(string_field(field, value)?),
            "password" => password = Some(string_field(field, value)?),
            "email" => {
                string_field(field, value)?;
            }
            "auth" => {
                return Err(
                    "\"auth\" belongs to ECS_ENGINE_AUTH_TYPE=dockercfg; the docker \
                            type takes username and password"
                        .to_string(),
                )
            }
            _ => {
                return Err(format!(
                    "unknown field {field:?} (expected username, password and email)"
                ))
            }
        }
    }
    let username = username.ok_or("username is missing")?;
    let password = password.ok_or("password is missing")?;
    credential(username, password)
}

/// A `dockercfg` entry: `auth`, standard base64 of `user:password` (required), `email`
/// (accepted, unused).
fn dockercfg_entry(fields: &Map<String, Value>) -> Result<RegistryCredential, String> {
    let mut auth = None;
    for (field, value) in fields {
        match field.to_ascii_lowercase().as_str() {
            "auth" => auth = Some(string_field(field, value)?),
            "email" => {
                string_field(field, value)?;
            }
            "username" | "password" => {
                return Err(format!(
                    "{field:?} belongs to ECS_ENGINE_AUTH_TYPE=docker; the dockercfg type takes \
                     auth, the base64 of user:password"
                ))
            }
            _ => return Err(format!("unknown field {field:?} (expected auth and email)")),
        }
    }
    let auth = auth.ok_or("auth is missing")?;
    let decoded =
        base64_standard_decode(&auth).map_err(|why| format!("auth is not base64: {why}"))?;
    let text = String::from_utf8(decoded).map_err(|_| "auth does not decode to text")?;
    let (username, password) = text
        .split_once(':')
        .ok_or("auth must be the base64 of user:password (no ':' found)")?;
    credential(username.to_string(), password.to_string())
}

fn credential(username: String, password: String) -> Result<RegistryCredential, String> {
    if username.is_empty() {
        return Err("the user name is empty".to_string());
    }
    if password.is_empty() {
        return Err("the password is empty".to_string());
    }
    Ok(RegistryCredential { username, password })
}

fn string_field(field: &str, value: &Value) -> Result<String, String> {
    match value {
        Value::String(text) => Ok(text.clone()),
        other => Err(format!(
            "{field:?} must be a string, found {}",
            json_type(other)
        )),
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A registry key → (host with port, namespace): scheme dropped, host in lower case, Docker Hub's
/// names made one, a leading `v1`/`v2` path segment dropped.
pub fn parse_registry_key(key: &str) -> Result<(String, String), String> {
    if key.is_empty() {
        return Err("the registry is empty".to_string());
    }
    if key.chars().any(char::is_whitespace) {
        return Err("a registry holds no whitespace".to_string());
    }
    let lower = key.to_ascii_lowercase();
    let rest = ["https://", "http://"]
        .iter()
        .find(|scheme| lower.starts_with(*scheme))
        .map_or(key, |scheme| &key[scheme.len()..]);
    if rest.contains("://") {
        return Err("only https:// or http:// may come before the registry host".to_string());
    }
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    if host.is_empty() {
        return Err("the registry host is empty".to_string());
    }
    let host = canonical_host(host);
    let mut segments: Vec<&str> = path.split('/').filter(|part| !part.is_empty()).collect();
    if matches!(segments.first(), Some(&"v1") | Some(&"v2")) {
        segments.remove(0);
    }
    Ok((host, segments.join("/")))
}

fn canonical_host(host: &str) -> String {
    let host = host.to_ascii_lowercase();
    if DOCKER_HUB_HOSTS.contains(&host.as_str()) {
        DOCKER_HUB.to_string()
    } else {
        host
    }
}

/// An image reference → (registry host with port, repository path), tag and digest ignored.
/// Docker Hub is [`DOCKER_HUB`], and its one-part names are in `library/`, as Docker reads them.
pub fn registry_of_image(image: &str) -> (String, String) {
    let image = image.trim();
    let without_digest = image.split_once('@').map_or(image, |(name, _)| name);
    let last_slash = without_digest.rfind('/').map_or(0, |index| index + 1);
    let repository = match without_digest[last_slash..].rfind(':') {
        Some(colon) => &without_digest[..last_slash + colon],
        None => without_digest,
    };
    let (host, path) = match repository.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.chars().any(|c| c.is_ascii_uppercase()) =>
        {
            (canonical_host(first), rest)
        }
        _ => (DOCKER_HUB.to_string(), repository),
    };
    let path = if host == DOCKER_HUB && !path.contains('/') {
        format!("library/{path}")
    } else {
        path.to_string()
    };
    (host, path)
}

#[cfg(test)]
mod tests;
