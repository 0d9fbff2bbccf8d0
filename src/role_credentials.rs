//! Task IAM role credentials: the temporary AWS credentials a task's containers (its task
//! role) and the agent's work on its behalf (its execution role: Docker's awslogs driver, later
//! pulls and secrets) use, and the in-memory store that serves them at
//! `/v2/credentials/<credentials id>`.
//!
//! - [`RoleCredentials`]: one set of credentials as ECS hands them out. Its `Debug` shows no key,
//!   secret or token; it has no `Display` and no `Serialize`, so it cannot reach a checkpoint, a
//!   log line or an API view by accident. [`RoleCredentials::endpoint_json`] is the one way out:
//!   the credentials endpoint's answer.
//! - [`RoleType`]: ECS's names of the two roles (`TaskApplication`, `TaskExecution`).
//! - [`CredentialsStore`]: a cloneable, thread-safe handle onto one map, **in memory only**
//!   (the model of the ECS agent's `ecs-agent/credentials/manager.go`). A credentials id is
//!   *expected* (pending: the endpoint answers 503) from the moment a task that names it is
//!   accepted or restored, *ready* once credentials were set for it, and forgotten with its task.
//!   A failure to get credentials (the host's own AssumeRole, later) is recorded beside them, for
//!   `inspect`. The ids are not secret: the task model checkpoints them, so a restored task knows
//!   its ids and its endpoint says 503 — not 400 — until ECS sends the credentials again.
//! - [`parse_acs_credentials`]: ACS's `IAMRoleCredentials` object (a payload task's
//!   `roleCredentials` and `executionRoleCredentials`, an `IAMRoleCredentialsMessage`'s
//!   `roleCredentials`), checked; its errors never quote a value.
//! - [`new_credentials_id`]: a random 128-bit id (32 hex characters) for a task whose
//!   credentials deckhand makes itself.
//!
//! Who calls what: the ECS session sets the credentials of a payload or a refresh; the engine
//! expects a task's ids when it accepts or restores the task and forgets them when it removes
//! it; the task metadata server answers lookups; the local API shows [`CredentialsStore::states`].
//!
//! Where it is reached: the agent makes one store and hands clones to
//! `EngineConfig::role_credentials` (inside the engine: `TaskShared::role_credentials`), the
//! task metadata server, the local API and `EcsSettings::role_credentials`. A task's ids are
//! `Task::credentials_ids` ([`crate::task::RoleCredentialsIds`], checkpointed), fixed at
//! acceptance (`EngineHandle::submit_with_arn` takes them). Code that acts for a task with its
//! execution role (the engine's pulls and secrets, `engine::workers::execution_role`) looks up
//! the task's execution credentials id ([`CredentialsStore::lookup`]; by ARN:
//! `task_credentials(&task.arn, RoleType::TaskExecution)`); code that makes credentials itself
//! (local mode) takes ids from [`new_credentials_id`], [`CredentialsStore::set`]s what it got,
//! and [`CredentialsStore::record_failure`]s what it could not get.

pub mod local;

use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The credentials endpoint's path; a credentials id follows (`/v2/credentials/<id>`).
pub const CREDENTIALS_PATH_V2: &str = "/v2/credentials";
/// The environment variable every AWS SDK reads the credentials endpoint's path from.
pub const CREDENTIALS_RELATIVE_URI_VARIABLE: &str = "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI";
/// The awslogs log option that points Docker's driver at the execution role's credentials.
pub const AWSLOGS_CREDENTIALS_ENDPOINT_OPTION: &str = "awslogs-credentials-endpoint";
/// The longest credentials id taken (ECS's are UUIDs, 36 characters).
pub const MAX_CREDENTIALS_ID_CHARS: usize = 256;
/// The longest value of any other credentials field taken (session tokens run to about 2 KB).
pub const MAX_CREDENTIALS_FIELD_CHARS: usize = 16 * 1024;

/// `/v2/credentials/<id>`: what a container's `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` and an
/// awslogs container's `awslogs-credentials-endpoint` say.
pub fn relative_uri(credentials_id: &str) -> String {
    format!("{CREDENTIALS_PATH_V2}/{credentials_id}")
}

/// Which role a set of credentials is for, with ECS's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RoleType {
    /// The task role: what the task's own code uses (`taskRoleArn`).
    TaskApplication,
    /// The execution role: what the agent and Docker use for the task (`executionRoleArn`).
    TaskExecution,
}

impl RoleType {
    pub const ALL: [RoleType; 2] = [RoleType::TaskApplication, RoleType::TaskExecution];

    pub fn as_str(self) -> &'static str {
        match self {
            RoleType::TaskApplication => "TaskApplication",
            RoleType::TaskExecution => "TaskExecution",
        }
    }

    /// ECS's name (`roleType` of an `IAMRoleCredentialsMessage`); `None` for any other text.
    pub fn from_ecs_name(name: &str) -> Option<RoleType> {
        RoleType::ALL.into_iter().find(|role| role.as_str() == name)
    }
}

/// One set of temporary credentials, as ECS hands them out. `Debug` shows the role and the
/// expiration only.
#[derive(Clone, PartialEq, Eq)]
pub struct RoleCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: String,
    /// As ECS sends it (RFC 3339); echoed, never parsed, as the ECS agent does.
    pub expiration: String,
    pub role_arn: String,
}

impl fmt::Debug for RoleCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RoleCredentials")
            .field("role_arn", &self.role_arn)
            .field("expiration", &self.expiration)
            .field("access_key_id", &"<redacted>")
            .field("secret_access_key", &"<redacted>")
            .field("session_token", &"<redacted>")
            .finish()
    }
}

impl RoleCredentials {
    /// The credentials endpoint's answer, with the ECS agent's field names (`AccessKeyId`,
    /// `SecretAccessKey`, `Token`, `Expiration`, `RoleArn`).
    pub fn endpoint_json(&self) -> Value {
        json!({
            "RoleArn": self.role_arn,
            "AccessKeyId": self.access_key_id,
            "SecretAccessKey": self.secret_access_key,
            "Token": self.session_token,
            "Expiration": self.expiration,
        })
    }
}

/// Credentials and the id ECS gave them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentifiedCredentials {
    pub credentials_id: String,
    pub credentials: RoleCredentials,
}

/// Whether a credentials id is fit for a URL path segment and an environment variable: 1 to
/// [`MAX_CREDENTIALS_ID_CHARS`] visible ASCII characters, none of `/ ? # %`.
pub fn valid_credentials_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_CREDENTIALS_ID_CHARS
        && id
            .bytes()
            .all(|byte| byte.is_ascii_graphic() && !matches!(byte, b'/' | b'?' | b'#' | b'%'))
}

/// Reads ACS's `IAMRoleCredentials` object (`credentialsId`, `accessKeyId`, `secretAccessKey`,
/// `sessionToken`, `expiration`, `roleArn`; `credentialScope` and unknown keys are ignored). A
/// `credentialsId` is required, as the ECS agent requires it; the other fields are taken as
/// they come (absent: empty). The error names the field, never its value.
pub fn parse_acs_credentials(value: &Value) -> Result<IdentifiedCredentials, String> {
    let Value::Object(object) = value else {
        return Err("expected an object".to_string());
    };
    let credentials_id = acs_field(object, "credentialsId")?;
    if credentials_id.is_empty() {
        return Err("credentialsId: required".to_string());
    }
    if !valid_credentials_id(&credentials_id) {
        return Err(format!(
            "credentialsId: not a credentials id (1 to {MAX_CREDENTIALS_ID_CHARS} visible \
             characters, none of / ? # %)"
        ));
    }
    Ok(IdentifiedCredentials {
        credentials_id,
        credentials: RoleCredentials {
            access_key_id: acs_field(object, "accessKeyId")?,
            secret_access_key: acs_field(object, "secretAccessKey")?,
            session_token: acs_field(object, "sessionToken")?,
            expiration: acs_field(object, "expiration")?,
            role_arn: acs_field(object, "roleArn")?,
        },
    })
}

fn acs_field(object: &Map<String, Value>, key: &str) -> Result<String, String> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) if text.len() > MAX_CREDENTIALS_FIELD_CHARS => {
            Err(format!("{key}: too long"))
        }
        Some(Value::String(text)) => Ok(text.clone()),
        Some(_) => Err(format!("{key}: expected a string")),
    }
}

/// A new credentials id: 16 random bytes from `/dev/urandom` as 32 lowercase hex characters.
pub fn new_credentials_id() -> std::io::Result<String> {
    let mut buffer = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buffer)?;
    Ok(buffer.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// What the store knows of a credentials id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialsLookup {
    /// No task names it (never did, or its task is gone): the endpoint's 400.
    Unknown,
    /// A task names it and its credentials have not arrived (or could not be had): 503.
    Pending,
    /// The credentials, for the task with this ARN and this role.
    Ready {
        task_arn: String,
        role: RoleType,
        credentials: RoleCredentials,
    },
}

/// What `inspect` may show of one credentials id: everything but the credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialsState {
    pub role: RoleType,
    pub credentials_id: String,
    /// Whether credentials are there to serve.
    pub ready: bool,
    /// Their role ARN and expiration, once they arrived.
    pub role_arn: Option<String>,
    pub expiration: Option<String>,
    /// The last failure to get them, until credentials are set again.
    pub failure: Option<String>,
}

#[derive(Debug)]
struct Entry {
    task_arn: String,
    role: RoleType,
    credentials: Option<RoleCredentials>,
    failure: Option<String>,
    /// When it was last expected or set (the store's counter): the newest id of a task's role is
    /// the one [`CredentialsStore::task_credentials`] answers with.
    touched: u64,
}

#[derive(Debug, Default)]
struct Entries {
    by_id: HashMap<String, Entry>,
    counter: u64,
    /// Who waits for the credentials of an id ([`CredentialsStore::watch`]): told once, when
    /// they are set, and dropped then or when the id is forgotten.
    watchers: Vec<(String, crossbeam_channel::Sender<()>)>,
}

impl Entries {
    fn tick(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    /// The entry for `id`, made pending for this task and role when unknown. An id already
    /// known keeps its credentials and changes owner only if another task now names it.
    fn entry(&mut self, task_arn: &str, role: RoleType, id: &str) -> &mut Entry {
        let touched = self.tick();
        let entry = self.by_id.entry(id.to_string()).or_insert_with(|| Entry {
            task_arn: task_arn.to_string(),
            role,
            credentials: None,
            failure: None,
            touched,
        });
        if entry.task_arn != task_arn || entry.role != role {
            entry.task_arn = task_arn.to_string();
            entry.role = role;
            entry.credentials = None;
            entry.failure = None;
        }
        entry.touched = touched;
        entry
    }
}

/// Why the store refused credentials (the ECS agent's checks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    EmptyCredentialsId,
    EmptyTaskArn,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::EmptyCredentialsId => f.write_str("CredentialsId is empty"),
            StoreError::EmptyTaskArn => f.write_str("task ARN is empty"),
        }
    }
}

impl std::error::Error for StoreError {}

/// The credentials of every task, by credentials id, in memory only. Clones share one map.
#[derive(Clone, Default)]
pub struct CredentialsStore {
    entries: Arc<Mutex<Entries>>,
}

impl fmt::Debug for CredentialsStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialsStore")
            .field("ids", &self.lock().by_id.len())
            .finish()
    }
}

impl CredentialsStore {
    pub fn new() -> CredentialsStore {
        CredentialsStore::default()
    }

    /// The map, even if a thread panicked while holding it (it holds plain data).
    fn lock(&self) -> MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Task `task_arn` uses credentials id `id` for `role`: from now on the id is known, and
    /// pending until credentials are set. Credentials already set for it stay.
    pub fn expect(&self, task_arn: &str, role: RoleType, id: &str) {
        if id.is_empty() || task_arn.is_empty() {
            return;
        }
        self.lock().entry(task_arn, role, id);
    }

    /// Sets (or replaces) the credentials of `id`, for task `task_arn` and `role`, and clears a
    /// recorded failure.
    pub fn set(
        &self,
        task_arn: &str,
        role: RoleType,
        id: &str,
        credentials: RoleCredentials,
    ) -> Result<(), StoreError> {
        if id.is_empty() {
            return Err(StoreError::EmptyCredentialsId);
        }
        if task_arn.is_empty() {
            return Err(StoreError::EmptyTaskArn);
        }
        let mut entries = self.lock();
        let entry = entries.entry(task_arn, role, id);
        entry.credentials = Some(credentials);
        entry.failure = None;
        entries.watchers.retain(|(watched, sender)| {
            let waits = watched != id;
            if !waits {
                let _ = sender.try_send(());
            }
            waits
        });
        Ok(())
    }

    /// Records why credentials for `id` could not be had (shown by `inspect`). Credentials set
    /// earlier are still served until they are replaced or forgotten.
    pub fn record_failure(&self, task_arn: &str, role: RoleType, id: &str, reason: &str) {
        if id.is_empty() || task_arn.is_empty() {
            return;
        }
        self.lock().entry(task_arn, role, id).failure = Some(reason.to_string());
    }

    /// Sets the credentials of `id`, or records why they could not be had, only while the store
    /// knows `id` (a refresher's answer for a task removed meanwhile is dropped). `false`: the
    /// id is unknown, its task is gone.
    pub fn update_known(&self, id: &str, outcome: Result<RoleCredentials, String>) -> bool {
        let mut entries = self.lock();
        let Some(entry) = entries.by_id.get_mut(id) else {
            return false;
        };
        match outcome {
            Ok(credentials) => {
                entry.credentials = Some(credentials);
                entry.failure = None;
            }
            Err(reason) => entry.failure = Some(reason),
        }
        true
    }

    /// What the store knows of `id`.
    pub fn lookup(&self, id: &str) -> CredentialsLookup {
        let entries = self.lock();
        match entries.by_id.get(id) {
            None => CredentialsLookup::Unknown,
            Some(Entry {
                credentials: None, ..
            }) => CredentialsLookup::Pending,
            Some(Entry {
                task_arn,
                role,
                credentials: Some(credentials),
                ..
            }) => CredentialsLookup::Ready {
                task_arn: task_arn.clone(),
                role: *role,
                credentials: credentials.clone(),
            },
        }
    }

    /// Whether the credentials of `id` are there (without copying them).
    pub fn is_ready(&self, id: &str) -> bool {
        matches!(
            self.lock().by_id.get(id),
            Some(Entry {
                credentials: Some(_),
                ..
            })
        )
    }

    /// A receiver that gets one message once credentials are set for `id` — at once when they
    /// are there already. A managed task waiting for its execution role's credentials wakes on
    /// it rather than at the end of its wait. Its sender goes when it fired or the id is
    /// forgotten (then the receiver reads as disconnected).
    pub fn watch(&self, id: &str) -> crossbeam_channel::Receiver<()> {
        let (sender, receiver) = crossbeam_channel::bounded(1);
        let mut entries = self.lock();
        let ready = matches!(
            entries.by_id.get(id),
            Some(Entry {
                credentials: Some(_),
                ..
            })
        );
        if ready {
            let _ = sender.try_send(());
        } else {
            entries.watchers.push((id.to_string(), sender));
        }
        receiver
    }

    /// Drops the watchers of ids the store no longer knows.
    fn drop_orphan_watchers(entries: &mut Entries) {
        let Entries {
            by_id, watchers, ..
        } = entries;
        watchers.retain(|(id, _)| by_id.contains_key(id));
    }

    /// The credentials of task `task_arn` for `role` (its newest id's), when they are there.
    pub fn task_credentials(
        &self,
        task_arn: &str,
        role: RoleType,
    ) -> Option<IdentifiedCredentials> {
        let entries = self.lock();
        let (id, entry) = entries
            .by_id
            .iter()
            .filter(|(_, entry)| entry.task_arn == task_arn && entry.role == role)
            .max_by_key(|(_, entry)| entry.touched)?;
        Some(IdentifiedCredentials {
            credentials_id: id.clone(),
            credentials: entry.credentials.clone()?,
        })
    }

    /// Every id task `task_arn` holds, without the credentials, by role then id.
    pub fn states(&self, task_arn: &str) -> Vec<CredentialsState> {
        let entries = self.lock();
        let mut states: Vec<CredentialsState> = entries
            .by_id
            .iter()
            .filter(|(_, entry)| entry.task_arn == task_arn)
            .map(|(id, entry)| CredentialsState {
                role: entry.role,
                credentials_id: id.clone(),
                ready: entry.credentials.is_some(),
                role_arn: entry.credentials.as_ref().map(|c| c.role_arn.clone()),
                expiration: entry.credentials.as_ref().map(|c| c.expiration.clone()),
                failure: entry.failure.clone(),
            })
            .collect();
        crate::sorting::sort_by(&mut states, |a, b| {
            (a.role, &a.credentials_id).cmp(&(b.role, &b.credentials_id))
        });
        states
    }

    /// Forgets every id of task `task_arn` and its credentials: the task is gone.
    pub fn forget_task(&self, task_arn: &str) {
        let mut entries = self.lock();
        entries.by_id.retain(|_, entry| entry.task_arn != task_arn);
        Self::drop_orphan_watchers(&mut entries);
    }

    /// Forgets the ids task `task_arn` holds for `role` only.
    pub fn forget_role(&self, task_arn: &str, role: RoleType) {
        let mut entries = self.lock();
        entries
            .by_id
            .retain(|_, entry| entry.task_arn != task_arn || entry.role != role);
        Self::drop_orphan_watchers(&mut entries);
    }

    /// How many ids the store knows (for tests and `/metrics`).
    pub fn len(&self) -> usize {
        self.lock().by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
#[rustfmt::skip] // The tables read best one case per line.
mod tests;
