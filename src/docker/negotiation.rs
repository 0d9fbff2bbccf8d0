//! Docker API version negotiation: deckhand speaks the lower of the daemon's highest version and
//! the highest it was written for, and refuses a daemon older than the oldest it supports.

use std::fmt;

use crate::runtime::RuntimeError;

/// An API version such as `1.41`; ordered numerically (1.9 < 1.41).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ApiVersion {
    pub major: u32,
    pub minor: u32,
}

impl ApiVersion {
    pub const fn new(major: u32, minor: u32) -> ApiVersion {
        ApiVersion { major, minor }
    }

    pub fn parse(text: &str) -> Option<ApiVersion> {
        let (major, minor) = text.trim().split_once('.')?;
        Some(ApiVersion {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        })
    }
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}.{}", self.major, self.minor)
    }
}

/// The oldest API deckhand can use (Docker Engine 20.10).
pub const MIN_API_VERSION: ApiVersion = ApiVersion::new(1, 41);
/// The newest API deckhand was written against.
pub const MAX_API_VERSION: ApiVersion = ApiVersion::new(1, 47);

/// The version to speak, given the daemon's highest (`API-Version` from `/_ping`, or
/// `ApiVersion` from `/version`).
pub fn negotiate(daemon_highest: &str) -> Result<ApiVersion, RuntimeError> {
    let daemon = ApiVersion::parse(daemon_highest).ok_or_else(|| RuntimeError::Protocol {
        message: format!("Docker reported an unreadable API version {daemon_highest:?}"),
    })?;
    if daemon < MIN_API_VERSION {
        return Err(RuntimeError::Api {
            status: 0,
            message: format!(
                "the Docker Engine speaks API {daemon}, but deckhand needs at least \
                 {MIN_API_VERSION} (Docker Engine 20.10 or newer); upgrade Docker"
            ),
        });
    }
    Ok(daemon.min(MAX_API_VERSION))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_table() {
        let cases: &[(&str, Result<&str, &str>)] = &[
            ("1.41", Ok("1.41")),
            ("1.43", Ok("1.43")),
            ("1.47", Ok("1.47")),
            ("1.50", Ok("1.47")),
            ("2.0", Ok("1.47")),
            ("1.40", Err("needs at least 1.41")),
            ("1.9", Err("needs at least 1.41")),
            ("one.four", Err("unreadable API version")),
            ("", Err("unreadable API version")),
        ];
        for (daemon, expected) in cases {
            match (negotiate(daemon), expected) {
                (Ok(version), Ok(expected)) => assert_eq!(version.to_string(), *expected),
                (Err(error), Err(expected)) => {
                    assert!(error.to_string().contains(expected), "{daemon}: {error}")
                }
                (other, _) => panic!("{daemon:?} gave {other:?}"),
            }
        }
    }
}
