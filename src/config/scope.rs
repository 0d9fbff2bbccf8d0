//! Who runs the agent (root or another user) and where that puts the default files: the system
//! paths under /etc, /var/lib and /run for root, per-user XDG places otherwise, so `deckhand run`
//! works for a developer without root.

use std::path::{Path, PathBuf};

use super::keys::default_of;
use super::ConfigError;

/// The config file read when the agent runs as root and no `--config` is given.
pub const SYSTEM_CONFIG_FILE: &str = "/etc/deckhand/deckhand.conf";

/// Who runs the agent, which decides where the default paths are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Effective uid 0: system paths under /etc, /var/lib and /run.
    System,
    /// Any other user: per-user XDG paths.
    User,
}

impl Scope {
    /// The scope of this process, from the effective uid on the `Uid:` line of
    /// `/proc/self/status` (real, effective, saved, fs). Reading it needs no extra crate and, unlike
    /// `$USER`, cannot be faked by the environment. If it cannot be read (no /proc), the system
    /// scope is assumed: a non-root user then gets a clear permission error on the system paths.
    pub fn of_current_process() -> Scope {
        match std::fs::read_to_string("/proc/self/status") {
            Ok(status) => scope_from_proc_status(&status).unwrap_or(Scope::System),
            Err(_) => Scope::System,
        }
    }
}

/// Reads the effective uid from the text of `/proc/<pid>/status`; `None` if the line is missing
/// or malformed.
pub fn scope_from_proc_status(status: &str) -> Option<Scope> {
    let uid_line = status.lines().find(|line| line.starts_with("Uid:"))?;
    let effective_uid: u32 = uid_line
        .trim_start_matches("Uid:")
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(if effective_uid == 0 {
        Scope::System
    } else {
        Scope::User
    })
}

/// The config file read when no `--config` is given: the system file for root, else
/// `$XDG_CONFIG_HOME/deckhand/deckhand.conf` (or `~/.config/deckhand/deckhand.conf`).
pub fn default_config_file(
    scope: Scope,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<PathBuf, ConfigError> {
    match scope {
        Scope::System => Ok(PathBuf::from(SYSTEM_CONFIG_FILE)),
        Scope::User => Ok(
            user_directory(env, "--config", "XDG_CONFIG_HOME", ".config")?
                .join("deckhand")
                .join("deckhand.conf"),
        ),
    }
}

/// `ECS_DATADIR` when not set: the system directory, or `$XDG_STATE_HOME/deckhand`
/// (`~/.local/state/deckhand`).
pub(super) fn default_data_dir(
    scope: Scope,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<PathBuf, ConfigError> {
    Ok(match scope {
        Scope::System => PathBuf::from(default_of("ECS_DATADIR")),
        Scope::User => {
            user_directory(env, "ECS_DATADIR", "XDG_STATE_HOME", ".local/state")?.join("deckhand")
        }
    })
}

/// `DECKHAND_API_SOCKET` when not set: the system socket, or `$XDG_RUNTIME_DIR/deckhand/api.sock`,
/// or `api.sock` in the data directory.
pub(super) fn default_api_socket(
    scope: Scope,
    env: &dyn Fn(&str) -> Option<String>,
    data_dir: &Path,
) -> PathBuf {
    match scope {
        Scope::System => PathBuf::from(default_of("DECKHAND_API_SOCKET")),
        // Without a runtime directory the socket lives beside the state, which the user
        // owns; a socket in /tmp could be squatted by another user.
        Scope::User => match absolute_env_path(env, "XDG_RUNTIME_DIR") {
            Some(runtime_dir) => runtime_dir.join("deckhand").join("api.sock"),
            None => data_dir.join("api.sock"),
        },
    }
}

/// `DECKHAND_TASKS_DIR` when not set: the system directory, or
/// `$XDG_CONFIG_HOME/deckhand/tasks.d` (`~/.config/deckhand/tasks.d`).
pub(super) fn default_tasks_dir(
    scope: Scope,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<PathBuf, ConfigError> {
    Ok(match scope {
        Scope::System => PathBuf::from(default_of("DECKHAND_TASKS_DIR")),
        Scope::User => user_directory(env, "DECKHAND_TASKS_DIR", "XDG_CONFIG_HOME", ".config")?
            .join("deckhand")
            .join("tasks.d"),
    })
}

/// `DECKHAND_SECRETS_FILE` when not set: the system file, or
/// `$XDG_CONFIG_HOME/deckhand/secrets.json` (`~/.config/deckhand/secrets.json`).
pub(super) fn default_secrets_file(
    scope: Scope,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<PathBuf, ConfigError> {
    Ok(match scope {
        Scope::System => PathBuf::from(default_of("DECKHAND_SECRETS_FILE")),
        Scope::User => user_directory(env, "DECKHAND_SECRETS_FILE", "XDG_CONFIG_HOME", ".config")?
            .join("deckhand")
            .join("secrets.json"),
    })
}

/// The AWS shared credentials file when `AWS_SHARED_CREDENTIALS_FILE` is not set:
/// `$HOME/.aws/credentials`, as the AWS SDKs look for it; `None` without a `HOME`.
pub(super) fn default_shared_credentials_file(
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<PathBuf> {
    absolute_env_path(env, "HOME").map(|home| home.join(".aws").join("credentials"))
}

/// An XDG variable's value if it is an absolute path; the XDG spec says to ignore relative ones.
fn absolute_env_path(env: &dyn Fn(&str) -> Option<String>, variable: &str) -> Option<PathBuf> {
    env(variable)
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
}

/// `$<xdg_variable>` if absolute, else `$HOME/<home_fallback>`.
fn user_directory(
    env: &dyn Fn(&str) -> Option<String>,
    key: &'static str,
    xdg_variable: &'static str,
    home_fallback: &str,
) -> Result<PathBuf, ConfigError> {
    if let Some(directory) = absolute_env_path(env, xdg_variable) {
        return Ok(directory);
    }
    match absolute_env_path(env, "HOME") {
        Some(home) => Ok(home.join(home_fallback)),
        None => Err(ConfigError::NoUserDirectory { key, xdg_variable }),
    }
}
