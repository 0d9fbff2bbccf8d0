//! deckhand's local secret store (`DECKHAND_SECRETS_FILE`): what stands in, on a host with no
//! AWS, for Secrets Manager and SSM Parameter Store. One JSON object from a `valueFrom` as the
//! task definition writes it (a Secrets Manager ARN, with or without a JSON key suffix, an SSM
//! parameter ARN or name) to its value: a string, or for `repositoryCredentials` an object
//! `{"username","password"}` (also accepted as a string holding that JSON).
//!
//! The file is read when a task that needs it is submitted (every missing reference refuses the
//! task) and again at each create and pull that needs it, so a rotated value is used by the next
//! create. It must be a regular file owned by the agent's user with no permission for group or
//! others (mode 0600 or stricter), as `ssh` asks of a private key.
//!
//! Values never leave this module except into the Docker create body and the `X-Registry-Auth`
//! header: neither [`SecretStore`]'s `Debug` nor any error here quotes one. [`parse_secrets`] and
//! [`check_file`] are pure (fuzzed and table-tested); [`load`] is the only I/O.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest secrets file deckhand reads.
pub const MAX_SECRETS_FILE_BYTES: u64 = 1024 * 1024;

/// The secret store's values by reference. Its `Debug` output lists the references only.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct SecretStore {
    values: BTreeMap<String, String>,
}

impl fmt::Debug for SecretStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretStore")
            .field("references", &self.values.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl SecretStore {
    /// The value stored under `value_from`, exactly as written in the task definition.
    pub fn value(&self, value_from: &str) -> Option<&str> {
        self.values.get(value_from).map(String::as_str)
    }

    /// The references of `wanted` the store does not hold, in order, without repeats.
    pub fn missing<'a>(&self, wanted: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
        let mut missing: Vec<&str> = Vec::new();
        for reference in wanted {
            if !self.values.contains_key(reference) && !missing.contains(&reference) {
                missing.push(reference);
            }
        }
        missing
    }

    /// The registry credentials stored under `value_from`: `(username, password)`.
    pub fn registry_credentials(&self, value_from: &str) -> Result<(String, String), String> {
        let value = self
            .value(value_from)
            .ok_or_else(|| format!("the secret store holds no value for {value_from:?}"))?;
        registry_credentials(value).map_err(|why| format!("{value_from:?}: {why}"))
    }
}

/// `{"username": …, "password": …}` (the shape Secrets Manager holds for ECS's
/// `repositoryCredentials`). The error never quotes the value.
pub fn registry_credentials(value: &str) -> Result<(String, String), String> {
    const SHAPE: &str =
        "registry credentials must be a JSON object {\"username\": …, \"password\": …}";
    let parsed: serde_json::Value = serde_json::from_str(value).map_err(|_| SHAPE.to_string())?;
    let field = |name: &str| {
        parsed
            .get(name)
            .and_then(serde_json::Value::as_str)
            .filter(|text| !text.is_empty())
            .map(str::to_string)
    };
    match (field("username"), field("password")) {
        (Some(username), Some(password)) => Ok((username, password)),
        _ => Err(SHAPE.to_string()),
    }
}

/// Parses the file's bytes: a JSON object whose values are strings or objects (an object is
/// kept as its JSON text). The error names the key at fault, never a value.
pub fn parse_secrets(bytes: &[u8]) -> Result<SecretStore, String> {
    let document: serde_json::Value = serde_json::from_slice(bytes).map_err(|error| {
        // serde_json's message names a line and column, never the text around it.
        format!("not valid JSON: {error}")
    })?;
    let serde_json::Value::Object(entries) = document else {
        return Err("expected a JSON object from valueFrom to its value".to_string());
    };
    let mut values = BTreeMap::new();
    for (reference, value) in entries {
        let text = match value {
            serde_json::Value::String(text) => text,
            serde_json::Value::Object(_) => value.to_string(),
            _ => {
                return Err(format!(
                    "the value of {reference:?} must be a string (or an object, for registry \
                     credentials)"
                ))
            }
        };
        if reference.is_empty() {
            return Err("a key is empty: keys are valueFrom references".to_string());
        }
        values.insert(reference, text);
    }
    Ok(SecretStore { values })
}

/// What is wrong with the file itself (before its content is read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileProblem {
    NotARegularFile,
    /// Group or others have some permission: the mode, to show.
    TooOpen {
        mode: u32,
    },
    /// Owned by another user than the agent's.
    WrongOwner {
        owner: u32,
        agent: u32,
    },
}

/// The checks on the file's metadata: a regular file, `mode & 0o077 == 0`, owned by `agent_uid`.
pub fn check_file(
    is_regular_file: bool,
    mode: u32,
    owner: u32,
    agent_uid: u32,
) -> Result<(), FileProblem> {
    if !is_regular_file {
        return Err(FileProblem::NotARegularFile);
    }
    if mode & 0o077 != 0 {
        return Err(FileProblem::TooOpen {
            mode: mode & 0o7777,
        });
    }
    if owner != agent_uid {
        return Err(FileProblem::WrongOwner {
            owner,
            agent: agent_uid,
        });
    }
    Ok(())
}

/// Why the secret store could not be read; names the path and the problem, never a value.
#[derive(Debug)]
pub enum SecretsFileError {
    Missing {
        path: PathBuf,
    },
    Unreadable {
        path: PathBuf,
        error: std::io::Error,
    },
    Unsafe {
        path: PathBuf,
        problem: FileProblem,
    },
    TooLarge {
        path: PathBuf,
    },
    Invalid {
        path: PathBuf,
        message: String,
    },
}

impl fmt::Display for SecretsFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretsFileError::Missing { path } => write!(
                f,
                "the secret store {} does not exist (DECKHAND_SECRETS_FILE)",
                path.display()
            ),
            SecretsFileError::Unreadable { path, error } => {
                write!(
                    f,
                    "cannot read the secret store {}: {error}",
                    path.display()
                )
            }
            SecretsFileError::Unsafe { path, problem } => match problem {
                FileProblem::NotARegularFile => {
                    write!(
                        f,
                        "the secret store {} is not a regular file",
                        path.display()
                    )
                }
                FileProblem::TooOpen { mode } => write!(
                    f,
                    "the secret store {} has mode {mode:04o}: group and others must have no \
                     permission (chmod 0600 {})",
                    path.display(),
                    path.display()
                ),
                FileProblem::WrongOwner { owner, agent } => write!(
                    f,
                    "the secret store {} is owned by uid {owner}, not by the agent's user (uid \
                     {agent})",
                    path.display()
                ),
            },
            SecretsFileError::TooLarge { path } => write!(
                f,
                "the secret store {} is larger than {MAX_SECRETS_FILE_BYTES} bytes",
                path.display()
            ),
            SecretsFileError::Invalid { path, message } => {
                write!(
                    f,
                    "the secret store {} is not valid: {message}",
                    path.display()
                )
            }
        }
    }
}

impl std::error::Error for SecretsFileError {}

/// Reads and checks the secret store at `path`. The checks are made on the opened file, so the
/// file checked is the file read.
pub fn load(path: &Path) -> Result<SecretStore, SecretsFileError> {
    use std::os::unix::fs::MetadataExt;
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(SecretsFileError::Missing {
                path: path.to_path_buf(),
            })
        }
        Err(error) => {
            return Err(SecretsFileError::Unreadable {
                path: path.to_path_buf(),
                error,
            })
        }
    };
    let metadata = file
        .metadata()
        .map_err(|error| SecretsFileError::Unreadable {
            path: path.to_path_buf(),
            error,
        })?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let agent_uid = unsafe { libc::geteuid() };
    check_file(
        metadata.file_type().is_file(),
        metadata.mode(),
        metadata.uid(),
        agent_uid,
    )
    .map_err(|problem| SecretsFileError::Unsafe {
        path: path.to_path_buf(),
        problem,
    })?;
    let mut bytes = Vec::new();
    file.take(MAX_SECRETS_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| SecretsFileError::Unreadable {
            path: path.to_path_buf(),
            error,
        })?;
    if bytes.len() as u64 > MAX_SECRETS_FILE_BYTES {
        return Err(SecretsFileError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    parse_secrets(&bytes).map_err(|message| SecretsFileError::Invalid {
        path: path.to_path_buf(),
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_checks_one_row_each() {
        // (regular, mode, owner, agent, expected)
        let table = [
            (true, 0o100600, 1000, 1000, Ok(())),
            (true, 0o100400, 0, 0, Ok(())),
            (true, 0o100700, 0, 0, Ok(())),
            (false, 0o040700, 0, 0, Err(FileProblem::NotARegularFile)),
            (
                true,
                0o100640,
                0,
                0,
                Err(FileProblem::TooOpen { mode: 0o640 }),
            ),
            (
                true,
                0o100604,
                0,
                0,
                Err(FileProblem::TooOpen { mode: 0o604 }),
            ),
            (
                true,
                0o100600,
                0,
                1000,
                Err(FileProblem::WrongOwner {
                    owner: 0,
                    agent: 1000,
                }),
            ),
        ];
        for (regular, mode, owner, agent, expected) in table {
            assert_eq!(
                check_file(regular, mode, owner, agent),
                expected,
                "{mode:o}"
            );
        }
    }

    #[test]
    fn the_file_is_an_object_of_strings_or_credential_objects() {
        let store = parse_secrets(
            br#"{"arn:aws:secretsmanager:eu-west-1:1:secret:db-AbC:password::": "s3cr3t",
                 "/shop/api-key": "k",
                 "arn:aws:secretsmanager:eu-west-1:1:secret:registry": {"username": "u", "password": "p"}}"#,
        )
        .expect("valid");
        assert_eq!(store.value("/shop/api-key"), Some("k"));
        assert_eq!(
            store.registry_credentials("arn:aws:secretsmanager:eu-west-1:1:secret:registry"),
            Ok(("u".to_string(), "p".to_string()))
        );
        assert_eq!(
            store.missing(["/shop/api-key", "nope", "nope", "other"]),
            vec!["nope", "other"]
        );
        let debug = format!("{store:?}");
        assert!(
            !debug.contains("s3cr3t") && debug.contains("/shop/api-key"),
            "{debug}"
        );
        let not_credentials = store.registry_credentials("/shop/api-key").expect_err("no");
        assert!(!not_credentials.contains("\"k\""), "{not_credentials}");
    }

    #[test]
    fn invalid_files_are_named_without_values() {
        // (content, message)
        let table: [(&[u8], &str); 4] = [
            (b"[]", "expected a JSON object from valueFrom to its value"),
            (
                br#"{"a": 1}"#,
                "the value of \"a\" must be a string (or an object, for registry credentials)",
            ),
            (
                br#"{"": "x"}"#,
                "a key is empty: keys are valueFrom references",
            ),
            (
                b"{\"a\": \"s3cr3t",
                "not valid JSON: EOF while parsing a string at line 1 column 13",
            ),
        ];
        for (content, message) in table {
            assert_eq!(parse_secrets(content), Err(message.to_string()));
        }
    }
}
