//! Local tasks' role credentials (`DECKHAND_TASK_ROLES=assume|host`): one thread for every
//! role of every local task. The engine hands it each role ([`LocalRole`]) when it accepts or
//! restores the task; the thread gets the role's credentials — STS `AssumeRole` of the role with
//! the host's credentials (the chain the ECS connection reads), session `deckhand-<task id>`,
//! or, in `host` mode, the host's own credentials — and puts them in the shared
//! [`CredentialsStore`] under the task's credentials id, where the credentials endpoint serves
//! them. It gets them again halfway to their expiry and at least 5 minutes before it
//! ([`refresh_delay`]); a failure is recorded beside the id (shown by `inspect`), earlier
//! credentials are still served, and it is tried again after a back-off that doubles up to 5
//! minutes ([`retry_delay`]). A role whose id the store forgot (its task is gone) is dropped.
//!
//! As in ECS, a task's containers do not wait for its task role's credentials: the endpoint
//! answers 503 until they arrive, and the SDKs ask again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError, Sender};

use crate::control::aws::sts::{session_name, AssumeRoleRequest};
use crate::control::aws::AwsClient;
use crate::control::ecs::CredentialChain;
use crate::role_credentials::local::{refresh_delay, retry_delay, LocalRole, LocalRoles};
use crate::role_credentials::{CredentialsStore, RoleCredentials};

/// How long the host's own credentials are said to last (`host` mode): they are read again
/// halfway, so a rotated credentials file is picked up.
pub const HOST_CREDENTIALS_LIFETIME: Duration = Duration::from_secs(3600);

/// Where the credentials come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleSource {
    /// STS `AssumeRole` with the host's credentials.
    Assume,
    /// The host's own credentials.
    Host,
}

/// What the thread needs.
pub struct RefresherSettings {
    pub source: RoleSource,
    pub store: CredentialsStore,
    pub client: AwsClient,
    pub host_credentials: Arc<CredentialChain>,
    /// The region STS is called in.
    pub region: String,
    /// Set at shutdown: no more calls are started.
    pub stopping: Arc<AtomicBool>,
}

/// What the thread's one inbox carries.
enum Message {
    Track(LocalRole),
    Shutdown,
}

/// The engine's side: each role goes to the thread's inbox.
#[derive(Debug)]
struct Inbox(Sender<Message>);

impl LocalRoles for Inbox {
    fn track(&self, role: LocalRole) {
        // The thread is gone only at shutdown, when nothing more is served.
        let _ = self.0.send(Message::Track(role));
    }
}

/// The running thread; [`TaskRoleRefresher::shutdown`] ends it.
pub struct TaskRoleRefresher {
    inbox: Sender<Message>,
    stopping: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl TaskRoleRefresher {
    /// Starts the thread; the second value is what the engine tells of each role.
    pub fn start(
        settings: RefresherSettings,
    ) -> std::io::Result<(TaskRoleRefresher, Arc<dyn LocalRoles>)> {
        let (sender, inbox) = unbounded();
        let stopping = Arc::clone(&settings.stopping);
        let thread = std::thread::Builder::new()
            .name("task-roles".into())
            .spawn(move || run(&settings, &inbox))?;
        Ok((
            TaskRoleRefresher {
                inbox: sender.clone(),
                stopping,
                thread: Some(thread),
            },
            Arc::new(Inbox(sender)),
        ))
    }

    pub fn shutdown(&mut self) {
        self.stopping.store(true, Ordering::Relaxed);
        let _ = self.inbox.send(Message::Shutdown);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct Tracked {
    role: LocalRole,
    due: Instant,
    failures: u32,
}

/// The loop: wait for a role or the next one due (one inbox, its deadline the timer), then
/// refresh every role due.
fn run(settings: &RefresherSettings, inbox: &Receiver<Message>) {
    let mut tracked: Vec<Tracked> = Vec::new();
    loop {
        let next_due = tracked.iter().map(|entry| entry.due).min();
        let message = match next_due {
            Some(due) => inbox.recv_deadline(due),
            None => inbox.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match message {
            Ok(Message::Shutdown) | Err(RecvTimeoutError::Disconnected) => return,
            Ok(Message::Track(role)) => {
                tracked.retain(|entry| entry.role.credentials_id != role.credentials_id);
                tracked.push(Tracked {
                    role,
                    due: Instant::now(),
                    failures: 0,
                });
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
        let mut index = 0;
        while index < tracked.len() && !settings.stopping.load(Ordering::Relaxed) {
            let due = tracked[index].due <= Instant::now();
            if due && !refresh(settings, &mut tracked[index]) {
                tracked.swap_remove(index);
            } else {
                index += 1;
            }
        }
    }
}

/// Gets one role's credentials and stores them (or the failure); `false` when its task is gone.
fn refresh(settings: &RefresherSettings, entry: &mut Tracked) -> bool {
    let role = &entry.role;
    let outcome = fetch(settings, role);
    let label = format!("task {}: {}", role.task_id, role.role.as_str());
    match outcome {
        Ok((credentials, remaining)) => {
            if entry.failures > 0 {
                log::info!("{label}: credentials of {} got again", role.role_arn);
            }
            entry.failures = 0;
            entry.due = Instant::now() + refresh_delay(remaining);
            settings
                .store
                .update_known(&role.credentials_id, Ok(credentials))
        }
        Err(reason) => {
            entry.failures = entry.failures.saturating_add(1);
            let delay = retry_delay(entry.failures);
            entry.due = Instant::now() + delay;
            log::warn!(
                "{label}: no credentials for {}: {reason}; trying again in {}s",
                role.role_arn,
                delay.as_secs()
            );
            settings
                .store
                .update_known(&role.credentials_id, Err(reason))
        }
    }
}

/// The role's credentials and how long they last.
fn fetch(
    settings: &RefresherSettings,
    role: &LocalRole,
) -> Result<(RoleCredentials, Duration), String> {
    let now = crate::clock::now_millis();
    let (credentials, expiration_millis, role_arn) = match settings.source {
        RoleSource::Assume => {
            let request = AssumeRoleRequest {
                role_arn: role.role_arn.clone(),
                session_name: session_name(&role.task_id),
                duration_seconds: None,
            };
            let assumed = settings
                .client
                .assume_role(&settings.region, &request, &*settings.host_credentials)
                .map_err(|error| error.to_string())?;
            (
                assumed.credentials,
                assumed.expiration_millis,
                role.role_arn.clone(),
            )
        }
        RoleSource::Host => {
            let lifetime = HOST_CREDENTIALS_LIFETIME.as_millis() as u64;
            let credentials = settings
                .host_credentials
                .current()
                .map_err(|error| format!("the host's credentials: {error}"))?;
            // Not the role's: the answer names no role.
            (credentials, now.saturating_add(lifetime), String::new())
        }
    };
    let remaining = Duration::from_millis(expiration_millis.saturating_sub(now));
    Ok((
        RoleCredentials {
            access_key_id: credentials.access_key_id,
            secret_access_key: credentials.secret_access_key,
            session_token: credentials.session_token.unwrap_or_default(),
            expiration: crate::task::time::rfc3339_from_millis(expiration_millis),
            role_arn,
        },
        remaining,
    ))
}
