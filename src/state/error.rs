//! The state store's error type, [`StateError`]: what went wrong with which file, its message as
//! the agent logs or reports it, and which error stops start-up as a configuration problem.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Errors of the state store. Each names the file it concerns.
#[derive(Debug)]
pub enum StateError {
    /// A file-system call failed: `step` is what was being done (`write`, `fsync`, `rename`, …).
    Io {
        path: PathBuf,
        step: &'static str,
        source: io::Error,
    },
    /// A file written by a newer deckhand. Start-up must stop (exit 78): reading it with this
    /// binary would silently drop what the newer one recorded.
    FutureSchema {
        path: PathBuf,
        found: u64,
        supported: u64,
    },
    /// A file deckhand cannot read (only reported for reads after start-up; at start-up such a
    /// file is quarantined instead).
    Corrupt { path: PathBuf, message: String },
    /// A task id that cannot be a file name.
    InvalidTaskId { id: String },
    /// Serialising a record failed (cannot happen for the model's types; kept for honesty).
    Encode { what: String, message: String },
    /// An event appended out of order: the log is gap-free.
    EventSequence { expected: u64, found: u64 },
    /// A control source's record that does not parse.
    Damaged { path: PathBuf, message: String },
}

impl StateError {
    pub(crate) fn io(path: &Path, step: &'static str, source: io::Error) -> StateError {
        StateError::Io {
            path: path.to_path_buf(),
            step,
            source,
        }
    }

    /// True for the error that must stop start-up as a configuration problem (exit 78), rather
    /// than a failure worth restarting for.
    pub fn is_future_schema(&self) -> bool {
        matches!(self, StateError::FutureSchema { .. })
    }
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateError::Io { path, step, source } => {
                write!(f, "state file {}: {step} failed: {source}", path.display())
            }
            StateError::FutureSchema {
                path,
                found,
                supported,
            } => write!(
                f,
                "state file {} has schema version {found}, but this deckhand reads versions up to \
                 {supported}: it was written by a newer deckhand; run that version, or move the \
                 file away to discard what it holds",
                path.display()
            ),
            StateError::Corrupt { path, message } => {
                write!(f, "state file {} is unreadable: {message}", path.display())
            }
            StateError::InvalidTaskId { id } => write!(
                f,
                "task id {id:?} cannot name a state file (expected 1-128 characters from \
                 [A-Za-z0-9_-])"
            ),
            StateError::Encode { what, message } => {
                write!(f, "cannot serialise {what}: {message}")
            }
            StateError::Damaged { path, message } => write!(
                f,
                "{} is damaged ({message}); move it aside to start afresh",
                path.display()
            ),
            StateError::EventSequence { expected, found } => write!(
                f,
                "event log is gap-free: expected event {expected}, got {found}"
            ),
        }
    }
}

impl std::error::Error for StateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StateError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
