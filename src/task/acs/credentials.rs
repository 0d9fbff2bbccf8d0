//! A payload task's IAM role credentials (`roleCredentials`, `executionRoleCredentials`: ACS's
//! `IAMRoleCredentials` objects), read with [`crate::role_credentials::parse_acs_credentials`].
//! The credentials go to the in-memory store, the ids into the task model; an error names the
//! field, never a value.

use crate::role_credentials::{parse_acs_credentials, IdentifiedCredentials};
use crate::task::RoleCredentialsIds;
use serde_json::{Map, Value};

/// The task keys that carry credentials.
pub(super) const CREDENTIALS_KEYS: [&str; 2] = ["roleCredentials", "executionRoleCredentials"];

/// A payload task's credentials: the task role's and the execution role's, when it has them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AcsTaskCredentials {
    pub task_role: Option<IdentifiedCredentials>,
    pub execution_role: Option<IdentifiedCredentials>,
}

impl AcsTaskCredentials {
    /// The ids the task model keeps.
    pub fn ids(&self) -> RoleCredentialsIds {
        let id = |credentials: &Option<IdentifiedCredentials>| {
            credentials
                .as_ref()
                .map(|credentials| credentials.credentials_id.clone())
        };
        RoleCredentialsIds {
            task_role: id(&self.task_role),
            execution_role: id(&self.execution_role),
        }
    }
}

/// Reads both keys of a task object; an absent, null or empty one is no credentials. The error
/// is `(path, message)`.
pub(super) fn read_task_credentials(
    task: &Map<String, Value>,
) -> Result<AcsTaskCredentials, (String, String)> {
    let read = |key: &str| match task.get(key) {
        Some(value) if !super::is_empty(value) => parse_acs_credentials(value)
            .map(Some)
            .map_err(|message| (key.to_string(), message)),
        _ => Ok(None),
    };
    let [task_role, execution_role] = CREDENTIALS_KEYS;
    Ok(AcsTaskCredentials {
        task_role: read(task_role)?,
        execution_role: read(execution_role)?,
    })
}
