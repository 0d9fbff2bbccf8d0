//! The AWS credentials deckhand signs its ECS requests with, found the way the AWS SDKs find
//! them, in this order:
//!
//! 1. `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN`), from the
//!    configuration values the caller passes (the environment over deckhand's config file);
//! 2. the shared credentials file: `AWS_SHARED_CREDENTIALS_FILE`, by default
//!    `$HOME/.aws/credentials` (`/root/.aws/credentials` when `HOME` is unset, as it is for the
//!    system service), profile `AWS_PROFILE` (default `default`).
//!
//! The file is parsed as the SDKs parse it ([`parse_profiles`], pure and table-tested) and read
//! again when it changes: each [`CredentialChain::current`] compares the file's inode, size and
//! modification time with the last read's, a single `stat`. With no credentials anywhere, the
//! error says exactly where it looked. A secret never appears in `Debug` output or a message.
//! A file that its group or others may read is used, with a warning (once, until it is made
//! private): anyone who reads it can act as this host in ECS.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// A credentials file larger than this is refused: real ones are a few hundred bytes a profile.
pub const MAX_CREDENTIALS_FILE_BYTES: u64 = 1024 * 1024;

/// One set of AWS credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    /// For temporary credentials; sent (and signed) as `X-Amz-Security-Token`.
    pub session_token: Option<String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<hidden>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<hidden>"),
            )
            .finish()
    }
}

/// The profiles of a shared credentials file: name → key (lowercase) → value.
pub type Profiles = BTreeMap<String, BTreeMap<String, String>>;

/// Parses a shared credentials file as the AWS SDKs do: `[name]` starts a profile (a name
/// seen twice merges, later keys win), `key = value` sets a property (keys are
/// case-insensitive, whitespace around both is trimmed), a line starting with `#` or `;` is a
/// comment, and so is the rest of a line from a `#` or `;` that follows whitespace (or, on a
/// profile line, anywhere after the `]`). An indented line after a property continues its
/// value. Lines before the first profile are ignored. A line that is none of these is an
/// error naming its number, never quoting it (it may hold a secret).
pub fn parse_profiles(text: &str) -> Result<Profiles, String> {
    let mut profiles = Profiles::new();
    let mut current: Option<String> = None;
    let mut last_key: Option<String> = None;
    for (index, raw_line) in text.lines().enumerate() {
        let number = index + 1;
        let trimmed = raw_line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix('[') {
            let Some((name, after)) = rest.split_once(']') else {
                return Err(format!(
                    "line {number}: a profile line without its closing ']'"
                ));
            };
            let after = after.trim();
            if !(after.is_empty() || after.starts_with('#') || after.starts_with(';')) {
                return Err(format!("line {number}: text after a profile's ']'"));
            }
            let name = name.trim();
            if name.is_empty() {
                return Err(format!("line {number}: a profile without a name"));
            }
            profiles.entry(name.to_string()).or_default();
            current = Some(name.to_string());
            last_key = None;
            continue;
        }
        let Some(profile) = current.as_ref() else {
            // Before any profile: the SDKs ignore it.
            continue;
        };
        let properties = profiles.entry(profile.clone()).or_default();
        let indented = raw_line.starts_with([' ', '\t']);
        if indented {
            if let Some(key) = &last_key {
                // A continuation of the last property's value.
                if let Some(value) = properties.get_mut(key) {
                    value.push('\n');
                    value.push_str(strip_value_comment(trimmed).trim());
                }
                continue;
            }
        }
        let Some((key, value)) = trimmed.split_once('=') else {
            return Err(format!(
                "line {number}: expected `key = value`, a `[profile]` or a comment"
            ));
        };
        let key = key.trim().to_ascii_lowercase();
        if key.is_empty() {
            return Err(format!("line {number}: a property without a name"));
        }
        let value = strip_value_comment(value).trim().to_string();
        properties.insert(key.clone(), value);
        last_key = Some(key);
    }
    Ok(profiles)
}

/// `value  # comment` → `value`: a comment in a value starts at a `#` or `;` after whitespace,
/// so a secret with `#` inside survives.
fn strip_value_comment(value: &str) -> &str {
    let mut previous_is_space = true;
    for (at, character) in value.char_indices() {
        if (character == '#' || character == ';') && previous_is_space {
            return value.get(..at).unwrap_or(value);
        }
        previous_is_space = character.is_whitespace();
    }
    value
}

/// The credentials of `profile`, or `None` when it or its keys are absent; an error when the
/// profile has only one of the two keys.
pub fn profile_credentials(
    profiles: &Profiles,
    profile: &str,
) -> Result<Option<Credentials>, String> {
    let Some(properties) = profiles.get(profile) else {
        return Ok(None);
    };
    let value = |key: &str| {
        properties
            .get(key)
            .filter(|value| !value.is_empty())
            .cloned()
    };
    match (value("aws_access_key_id"), value("aws_secret_access_key")) {
        (Some(access_key_id), Some(secret_access_key)) => Ok(Some(Credentials {
            access_key_id,
            secret_access_key,
            session_token: value("aws_session_token").or_else(|| value("aws_security_token")),
        })),
        (None, None) => Ok(None),
        (Some(_), None) => Err(format!(
            "profile {profile} has aws_access_key_id but no aws_secret_access_key"
        )),
        (None, Some(_)) => Err(format!(
            "profile {profile} has aws_secret_access_key but no aws_access_key_id"
        )),
    }
}

/// What identifies a version of the file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    device: u64,
    inode: u64,
    length: u64,
    modified_seconds: i64,
    modified_nanoseconds: i64,
}

/// One read of the file: its stamp then, and what it gave.
type FileRead = (FileStamp, Result<Option<Credentials>, String>);

/// The credentials chain: the configured keys, else the shared file's profile, re-read when
/// the file changes.
pub struct CredentialChain {
    configured: Option<Credentials>,
    file: PathBuf,
    profile: String,
    /// The last read of the file and what it gave.
    cache: Mutex<Option<FileRead>>,
    /// The file's exposure was logged (reset once the file is private again).
    warned_exposed: AtomicBool,
}

impl fmt::Debug for CredentialChain {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("CredentialChain")
            .field("configured", &self.configured)
            .field("file", &self.file)
            .field("profile", &self.profile)
            .finish_non_exhaustive()
    }
}

impl CredentialChain {
    /// The chain from configuration values (the environment over the config file): the
    /// `AWS_*` names above and `HOME`. A value that is empty counts as unset.
    pub fn from_values(values: &BTreeMap<String, String>) -> CredentialChain {
        let value = |key: &str| values.get(key).filter(|value| !value.is_empty()).cloned();
        let configured = match (value("AWS_ACCESS_KEY_ID"), value("AWS_SECRET_ACCESS_KEY")) {
            (Some(access_key_id), Some(secret_access_key)) => Some(Credentials {
                access_key_id,
                secret_access_key,
                session_token: value("AWS_SESSION_TOKEN"),
            }),
            _ => None,
        };
        let file = match value("AWS_SHARED_CREDENTIALS_FILE") {
            Some(file) => expand_home(&file, value("HOME").as_deref()),
            None => Path::new(value("HOME").as_deref().unwrap_or("/root")).join(".aws/credentials"),
        };
        CredentialChain {
            configured,
            file,
            profile: value("AWS_PROFILE").unwrap_or_else(|| "default".to_string()),
            cache: Mutex::new(None),
            warned_exposed: AtomicBool::new(false),
        }
    }

    /// The shared credentials file this chain reads.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The credentials to sign with now.
    pub fn current(&self) -> Result<Credentials, String> {
        if let Some(credentials) = &self.configured {
            return Ok(credentials.clone());
        }
        let from_file = self.read_file();
        match from_file {
            Ok(Some(credentials)) => Ok(credentials),
            Ok(None) => Err(format!(
                "no AWS credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not both set \
                 (environment or config file), and the shared credentials file {} has no \
                 profile {} with aws_access_key_id and aws_secret_access_key \
                 (AWS_SHARED_CREDENTIALS_FILE, AWS_PROFILE)",
                self.file.display(),
                self.profile
            )),
            Err(message) => Err(format!(
                "no AWS credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not both set \
                 (environment or config file), and the shared credentials file {} (profile {}) \
                 could not be used: {message}",
                self.file.display(),
                self.profile
            )),
        }
    }

    fn read_file(&self) -> Result<Option<Credentials>, String> {
        let metadata = match std::fs::metadata(&self.file) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                self.store(None);
                return Ok(None);
            }
            Err(error) => return Err(error.to_string()),
        };
        let stamp = FileStamp {
            device: metadata.dev(),
            inode: metadata.ino(),
            length: metadata.len(),
            modified_seconds: metadata.mtime(),
            modified_nanoseconds: metadata.mtime_nsec(),
        };
        if let Ok(cache) = self.cache.lock() {
            if let Some((cached, result)) = cache.as_ref() {
                if *cached == stamp {
                    return result.clone();
                }
            }
        }
        match exposed_file_warning(&self.file, metadata.mode()) {
            Some(warning) => {
                if !self.warned_exposed.swap(true, Ordering::Relaxed) {
                    log::warn!("{warning}");
                }
            }
            None => self.warned_exposed.store(false, Ordering::Relaxed),
        }
        let result = read_limited(&self.file).and_then(|text| {
            let profiles = parse_profiles(&text)?;
            profile_credentials(&profiles, &self.profile)
        });
        if let Ok(mut cache) = self.cache.lock() {
            *cache = Some((stamp, result.clone()));
        }
        result
    }

    fn store(&self, entry: Option<FileRead>) {
        if let Ok(mut cache) = self.cache.lock() {
            *cache = entry;
        }
    }
}

/// The warning for a shared credentials file whose `mode` lets its group or others read it;
/// `None` when only its owner can. Pure.
pub fn exposed_file_warning(path: &Path, mode: u32) -> Option<String> {
    let readers = match (mode & 0o040 != 0, mode & 0o004 != 0) {
        (false, false) => return None,
        (true, false) => "its group",
        (false, true) => "others",
        (true, true) => "its group and others",
    };
    Some(format!(
        "the shared credentials file {} is readable by {readers} (mode {:04o}): whoever reads it \
         can act as this host in ECS; make it private (chmod 600)",
        path.display(),
        mode & 0o7777
    ))
}

/// `~/x` → `$HOME/x`, as the SDKs expand the file setting.
fn expand_home(path: &str, home: Option<&str>) -> PathBuf {
    match (path.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => Path::new(home).join(rest),
        _ => PathBuf::from(path),
    }
}

fn read_limited(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|error| error.to_string())?;
    let mut bytes = Vec::new();
    file.take(MAX_CREDENTIALS_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| error.to_string())?;
    if bytes.len() as u64 > MAX_CREDENTIALS_FILE_BYTES {
        return Err(format!("larger than {MAX_CREDENTIALS_FILE_BYTES} bytes"));
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    }

    fn profile(text: &str, name: &str) -> Result<Option<Credentials>, String> {
        profile_credentials(&parse_profiles(text)?, name)
    }

    fn keys(id: &str, secret: &str, token: Option<&str>) -> Option<Credentials> {
        Some(Credentials {
            access_key_id: id.into(),
            secret_access_key: secret.into(),
            session_token: token.map(str::to_string),
        })
    }

    #[test]
    fn profiles_parse_as_the_sdks_parse_them() {
        let cases: &[(&str, &str, Option<Credentials>)] = &[
            (
                "[default]\naws_access_key_id=AKID\naws_secret_access_key=SECRET\n",
                "default",
                keys("AKID", "SECRET", None),
            ),
            (
                "  [ default ]  \n\taws_access_key_id  =  AKID  \r\nAWS_Secret_Access_Key = SECRET\r\n",
                "default",
                keys("AKID", "SECRET", None),
            ),
            (
                "# comment\n; another\n[prod] ; why\naws_access_key_id = P # the key\n\
                 aws_secret_access_key = S#not-a-comment\naws_session_token = T\n",
                "prod",
                keys("P", "S#not-a-comment", Some("T")),
            ),
            (
                "[default]\naws_access_key_id = A\naws_secret_access_key = B\n[prod]\n\
                 aws_access_key_id = C\naws_secret_access_key = D\n",
                "prod",
                keys("C", "D", None),
            ),
            (
                "[default]\naws_access_key_id = A\n[other]\nx = y\n[default]\n\
                 aws_secret_access_key = B\naws_access_key_id = A2\n",
                "default",
                keys("A2", "B", None),
            ),
            (
                "stray = before any profile\n[default]\naws_access_key_id = A\n\
                 aws_secret_access_key = B\naws_security_token = OLD\n",
                "default",
                keys("A", "B", Some("OLD")),
            ),
            ("[default]\naws_access_key_id = A\naws_secret_access_key = B\n", "prod", None),
            ("[prod]\nregion = us-east-1\n", "prod", None),
            ("", "default", None),
        ];
        for (text, name, expected) in cases {
            assert_eq!(profile(text, name), Ok(expected.clone()), "{text:?}");
        }
        // An empty secret is no secret: the profile is half there.
        assert!(profile(
            "[default]\naws_access_key_id = A\naws_secret_access_key =\n",
            "default"
        )
        .is_err());
    }

    #[test]
    fn continuation_lines_extend_the_last_value() {
        let profiles =
            parse_profiles("[p]\ns3 =\n  max_concurrent_requests = 10\nk = v\n").expect("valid");
        assert_eq!(profiles["p"]["s3"], "\nmax_concurrent_requests = 10");
        assert_eq!(profiles["p"]["k"], "v");
    }

    #[test]
    fn malformed_lines_are_errors_naming_the_line_and_not_its_text() {
        for (text, line) in [
            ("[default]\naws_secret_access_key\n", "line 2"),
            ("[default\n", "line 1"),
            ("[]\n", "line 1"),
            ("[default] junk\n", "line 1"),
            ("[default]\n = value\n", "line 2"),
        ] {
            let error = parse_profiles(text).expect_err(text);
            assert!(error.contains(line), "{text:?}: {error}");
            assert!(!error.contains("aws_secret_access_key\n"), "{error}");
        }
        let error = profile("[p]\naws_access_key_id = A\n", "p").expect_err("half");
        assert!(error.contains("no aws_secret_access_key"), "{error}");
    }

    #[test]
    fn configured_keys_come_first_and_empty_values_count_as_unset() {
        let chain = CredentialChain::from_values(&values(&[
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "SECRET"),
            ("AWS_SESSION_TOKEN", "TOKEN"),
            ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials"),
        ]));
        assert_eq!(
            chain.current(),
            Ok(keys("AKID", "SECRET", Some("TOKEN")).expect("some"))
        );
        let chain = CredentialChain::from_values(&values(&[
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", ""),
            ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials"),
        ]));
        assert!(chain.current().is_err());
    }

    #[test]
    fn the_file_defaults_follow_home_and_the_profile_defaults_to_default() {
        let chain = CredentialChain::from_values(&values(&[("HOME", "/home/edge")]));
        assert_eq!(chain.file(), Path::new("/home/edge/.aws/credentials"));
        assert_eq!(chain.profile, "default");
        let chain = CredentialChain::from_values(&values(&[]));
        assert_eq!(chain.file(), Path::new("/root/.aws/credentials"));
        let chain = CredentialChain::from_values(&values(&[
            ("HOME", "/home/edge"),
            ("AWS_SHARED_CREDENTIALS_FILE", "~/creds"),
            ("AWS_PROFILE", "edge"),
        ]));
        assert_eq!(chain.file(), Path::new("/home/edge/creds"));
        assert_eq!(chain.profile, "edge");
    }

    #[test]
    fn no_credentials_says_where_it_looked() {
        let chain = CredentialChain::from_values(&values(&[
            ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials"),
            ("AWS_PROFILE", "edge"),
        ]));
        let error = chain.current().expect_err("none");
        for named in [
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "/nonexistent/credentials",
            "profile edge",
        ] {
            assert!(error.contains(named), "{named}: {error}");
        }
    }

    #[test]
    fn the_file_is_read_again_when_it_changes() {
        let directory = std::env::temp_dir().join(format!(
            "deckhand-credentials-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&directory).expect("temp dir");
        let file = directory.join("credentials");
        std::fs::write(
            &file,
            "[default]\naws_access_key_id = A\naws_secret_access_key = B\n",
        )
        .expect("write");
        let chain = CredentialChain::from_values(&values(&[(
            "AWS_SHARED_CREDENTIALS_FILE",
            file.to_str().expect("utf-8 path"),
        )]));
        assert_eq!(chain.current().expect("first").access_key_id, "A");
        // Replaced by a rename, as tools rotate it: another inode, so read again even when the
        // size and the second of the change match.
        let next = directory.join("credentials.new");
        std::fs::write(
            &next,
            "[default]\naws_access_key_id = C\naws_secret_access_key = D\n",
        )
        .expect("write");
        std::fs::rename(&next, &file).expect("rename");
        assert_eq!(chain.current().expect("second").access_key_id, "C");
        std::fs::remove_file(&file).expect("remove");
        assert!(chain.current().is_err());
        let _ = std::fs::remove_dir(&directory);
    }

    #[test]
    fn debug_hides_the_secret_and_the_token() {
        let credentials = keys("AKID", "SECRETKEY", Some("TOKENVALUE")).expect("some");
        let debug = format!("{credentials:?}");
        assert!(debug.contains("AKID"));
        assert!(
            !debug.contains("SECRETKEY") && !debug.contains("TOKENVALUE"),
            "{debug}"
        );
    }

    #[test]
    fn a_file_others_can_read_is_named_in_a_warning() {
        let path = Path::new("/root/.aws/credentials");
        let cases: &[(u32, Option<&str>)] = &[
            (0o100600, None),
            (0o100400, None),
            (0o100700, None),
            (0o100640, Some("readable by its group (mode 0640)")),
            (0o100604, Some("readable by others (mode 0604)")),
            (
                0o100644,
                Some("readable by its group and others (mode 0644)"),
            ),
            (0o100620, None),
        ];
        for (mode, expected) in cases {
            let warning = exposed_file_warning(path, *mode);
            match expected {
                None => assert_eq!(warning, None, "{mode:o}"),
                Some(needle) => {
                    let warning = warning.expect("a warning");
                    assert!(warning.contains(needle), "{warning}");
                    assert!(warning.contains("/root/.aws/credentials"), "{warning}");
                }
            }
        }
    }
}
