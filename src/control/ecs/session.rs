//! The ACS session as a sans-I/O state machine: [`AcsSession::handle`] takes what happened (a
//! connection made or lost, a text frame, the engine's answer, a tick) and the current time,
//! and returns what to do ([`SessionEffect`]: send a frame, apply or stop tasks, compare the
//! manifest, reconnect after a delay, log). It owns no socket, thread or clock, so the tests
//! drive whole conversations step by step; the loop around it is the driver's.
//!
//! The rules are the ECS agent's (`ecs-agent/acs/session/`): a payload is acknowledged only once
//! its tasks are durable (the driver answers [`SessionInput::Applied`]); a heartbeat is acked at
//! once; a task manifest newer than the highest sequence number seen is acked and compared with
//! the local tasks, and the running ones it does not list with `desiredStatus` RUNNING (left
//! out, or listed STOPPED) are sent for stop verification in ECS's `TaskIdentifier` shape; a stop
//! verification ack stops tasks only when it answers the manifest we last took; updates are
//! refused (deckhand is updated by its package manager). Task IAM role credentials (the ECS
//! agent's `payload_responder.go` and `refresh_credentials_responder.go`): a payload's tasks'
//! credentials are acknowledged with one `IAMRoleCredentialsAckRequest` each after the payload's
//! `AckRequest`; an `IAMRoleCredentialsMessage` is checked as the ECS agent checks it, handed
//! to the driver to set ([`SessionEffect::SetCredentials`]), and acknowledged the same way once
//! set — not when its task is unknown here. Reconnects back off from 250 ms to
//! 2 min (×1.5, up to 20 % jitter), reset once a session stayed up past the heartbeat timeout
//! plus jitter; a clean close reconnects at once; a deregistered instance
//! (`InactiveInstanceException`) waits an hour. No message for 1 min + up to 1 min of jitter
//! ends the session.

use super::messages::{self, Incoming};
use crate::role_credentials::{parse_acs_credentials, IdentifiedCredentials, RoleType};
use crate::task::acs::{parse_acs_task, AcsTask, AcsTaskError};
use crate::task::TaskStatus;
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The ECS agent's values (`session.go`).
pub const BACKOFF_MIN: Duration = Duration::from_millis(250);
pub const BACKOFF_MAX: Duration = Duration::from_secs(120);
pub const BACKOFF_MULTIPLIER: f64 = 1.5;
pub const BACKOFF_JITTER: f64 = 0.2;
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(60);
pub const HEARTBEAT_JITTER: Duration = Duration::from_secs(60);
pub const INACTIVE_INSTANCE_DELAY: Duration = Duration::from_secs(3600);
const INACTIVE_INSTANCE_EXCEPTION: &str = "InactiveInstanceException";
/// The reason of the `NackRequest` sent for update messages.
pub const UPDATES_DISABLED: &str = "updates are disabled";
/// Payloads waiting for their `Applied`: beyond this the oldest is forgotten (ECS re-sends an
/// unacknowledged payload).
const MAX_PENDING_ACKS: usize = 64;

/// What happened.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionInput {
    /// The websocket is open.
    Connected,
    /// Opening it failed (the error's text: an `InactiveInstanceException` waits an hour).
    ConnectFailed(String),
    /// A text frame.
    Text(String),
    /// The peer closed cleanly (EOF).
    Closed,
    /// Reading or sending failed.
    ConnectionError(String),
    /// The tasks of payload `message_id` are durable (`ok`), or could not be made so.
    Applied { message_id: String, ok: bool },
    /// The running local tasks, answering [`SessionEffect::CompareManifest`].
    LocalRunning {
        message_id: String,
        arns: Vec<String>,
    },
    /// The credentials of [`SessionEffect::SetCredentials`] for `message_id` are set (`ok`),
    /// or could not be (their task is not here).
    CredentialsSet {
        message_id: String,
        credentials_id: String,
        expiration: String,
        ok: bool,
    },
    /// Time passed (the driver wakes at [`AcsSession::next_deadline`]).
    Tick,
}

#[derive(Debug, Clone, PartialEq)]
pub enum LogLevel {
    Info,
    Warn,
    Error,
}

/// What to do.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionEffect {
    Send(String),
    /// Make these durable through the engine (a task that failed to map is handed over as an
    /// error, to report STOPPED with the reason), then answer [`SessionInput::Applied`]. Tasks
    /// that stop come first.
    Apply {
        message_id: String,
        seq_num: Option<i64>,
        tasks: Vec<Result<AcsTask, AcsTaskError>>,
    },
    /// Answer [`SessionInput::LocalRunning`] with the tasks running here.
    CompareManifest {
        message_id: String,
        manifest_arns: Vec<String>,
        timeline: i64,
    },
    StopTasks(Vec<String>),
    /// An `IAMRoleCredentialsMessage`: set these credentials for `task_arn`'s `role` in the
    /// store, then answer [`SessionInput::CredentialsSet`]. (`Debug` shows no secret.)
    SetCredentials {
        message_id: String,
        task_arn: String,
        role: RoleType,
        credentials: IdentifiedCredentials,
    },
    /// Close the connection (if open) and connect again after this long.
    Reconnect {
        after: Duration,
    },
    Log(LogLevel, String),
}

/// One ACS session, across reconnects.
pub struct AcsSession {
    cluster: String,
    container_instance: String,
    /// xorshift state for jitter: seeded, so tests are deterministic.
    random: u64,
    backoff_next: Duration,
    connected_at: Option<Instant>,
    backoff_reset_after: Duration,
    idle_deadline: Option<Instant>,
    highest_seq_num: Option<i64>,
    /// Payloads waiting for `Applied`.
    pending_acks: Vec<PendingAck>,
    /// The manifest last taken.
    manifest: Option<TakenManifest>,
}

/// A payload waiting for its tasks to be durable: what its acknowledgements say.
struct PendingAck {
    message_id: String,
    cluster: String,
    container_instance: String,
    /// `(credentials id, expiration)` of every credentials its tasks carry.
    credentials: Vec<(String, String)>,
}

/// A task manifest taken: what its stop verification is compared with.
struct TakenManifest {
    message_id: String,
    /// The tasks it lists with `desiredStatus` RUNNING (the others are to stop).
    running: BTreeSet<String>,
    /// Its `clusterArn` (empty when it had none).
    cluster_arn: String,
}

impl AcsSession {
    pub fn new(cluster: &str, container_instance: &str, seed: u64) -> AcsSession {
        AcsSession {
            cluster: cluster.to_string(),
            container_instance: container_instance.to_string(),
            random: seed | 1,
            backoff_next: BACKOFF_MIN,
            connected_at: None,
            backoff_reset_after: HEARTBEAT_TIMEOUT,
            idle_deadline: None,
            highest_seq_num: None,
            pending_acks: Vec::new(),
            manifest: None,
        }
    }

    /// The highest `seqNum` (or manifest timeline) seen: the driver sends it on reconnect.
    pub fn highest_seq_num(&self) -> Option<i64> {
        self.highest_seq_num
    }

    /// When the driver must call [`SessionInput::Tick`] at the latest.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.idle_deadline
    }

    fn next_random(&mut self) -> u64 {
        let mut x = self.random;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.random = x;
        x
    }

    /// `up_to × [0, 1)`.
    fn jitter(&mut self, up_to: Duration) -> Duration {
        let fraction = (self.next_random() >> 11) as f64 / (1u64 << 53) as f64;
        up_to.mul_f64(fraction)
    }

    fn backoff(&mut self) -> Duration {
        let current = self.backoff_next;
        self.backoff_next = current.mul_f64(BACKOFF_MULTIPLIER).min(BACKOFF_MAX);
        current + self.jitter(current.mul_f64(BACKOFF_JITTER))
    }

    fn reset_idle(&mut self, now: Instant) {
        self.idle_deadline = Some(now + HEARTBEAT_TIMEOUT + self.jitter(HEARTBEAT_JITTER));
    }

    /// The session is over: how long to wait before the next one. A session that stayed up
    /// long enough resets the back-off first.
    fn end(&mut self, now: Instant, why: Ending) -> Vec<SessionEffect> {
        if let Some(connected_at) = self.connected_at.take() {
            if now.saturating_duration_since(connected_at) >= self.backoff_reset_after {
                self.backoff_next = BACKOFF_MIN;
            }
        }
        self.idle_deadline = None;
        self.pending_acks.clear();
        let after = match why {
            Ending::Clean => {
                self.backoff_next = BACKOFF_MIN;
                Duration::ZERO
            }
            Ending::Inactive => INACTIVE_INSTANCE_DELAY,
            Ending::Failed => self.backoff(),
        };
        vec![SessionEffect::Reconnect { after }]
    }

    fn ending_of(error: &str) -> Ending {
        if error.contains(INACTIVE_INSTANCE_EXCEPTION) {
            Ending::Inactive
        } else {
            Ending::Failed
        }
    }

    pub fn handle(&mut self, input: SessionInput, now: Instant) -> Vec<SessionEffect> {
        match input {
            SessionInput::Connected => {
                self.connected_at = Some(now);
                self.backoff_reset_after = HEARTBEAT_TIMEOUT + self.jitter(HEARTBEAT_JITTER);
                self.reset_idle(now);
                Vec::new()
            }
            SessionInput::ConnectFailed(error) | SessionInput::ConnectionError(error) => {
                let why = Self::ending_of(&error);
                let mut effects = vec![SessionEffect::Log(
                    LogLevel::Error,
                    format!("ACS connection: {error}"),
                )];
                effects.extend(self.end(now, why));
                effects
            }
            SessionInput::Closed => {
                let mut effects = vec![SessionEffect::Log(
                    LogLevel::Info,
                    "ACS closed the connection".into(),
                )];
                effects.extend(self.end(now, Ending::Clean));
                effects
            }
            SessionInput::Tick => match self.idle_deadline {
                Some(deadline) if now >= deadline => {
                    let mut effects = vec![SessionEffect::Log(
                        LogLevel::Warn,
                        "ACS connection had no activity for too long; closing it".into(),
                    )];
                    effects.extend(self.end(now, Ending::Failed));
                    effects
                }
                _ => Vec::new(),
            },
            SessionInput::Applied { message_id, ok } => self.applied(&message_id, ok),
            SessionInput::CredentialsSet {
                message_id,
                credentials_id,
                expiration,
                ok,
            } => {
                if ok {
                    vec![SessionEffect::Send(messages::iam_role_credentials_ack(
                        &message_id,
                        &credentials_id,
                        &expiration,
                    ))]
                } else {
                    Vec::new()
                }
            }
            SessionInput::LocalRunning { message_id, arns } => {
                self.local_running(&message_id, arns)
            }
            SessionInput::Text(text) => {
                if self.idle_deadline.is_some() {
                    self.reset_idle(now);
                }
                match messages::read_message(&text) {
                    Ok(message) => self.message(message, now),
                    Err(why) => vec![SessionEffect::Log(
                        LogLevel::Warn,
                        format!("ignored an ACS frame: {why}"),
                    )],
                }
            }
        }
    }

    /// The message's `clusterArn` and `containerInstanceArn`, or this instance's when it left
    /// them out (the ECS agent echoes the message's).
    fn addressed(&self, body: &serde_json::Map<String, Value>) -> (String, String) {
        let or = |value: String, default: &str| {
            if value.is_empty() {
                default.to_string()
            } else {
                value
            }
        };
        (
            or(messages::text(body, "clusterArn"), &self.cluster),
            or(
                messages::text(body, "containerInstanceArn"),
                &self.container_instance,
            ),
        )
    }

    fn message(&mut self, message: Incoming, now: Instant) -> Vec<SessionEffect> {
        let body = &message.body;
        let message_id = messages::text(body, "messageId");
        match message.kind.as_str() {
            "PayloadMessage" => self.payload(body),
            "HeartbeatMessage" => vec![SessionEffect::Send(messages::heartbeat_ack(&message_id))],
            "TaskManifestMessage" => self.manifest(body),
            "TaskStopVerificationAck" => self.stop_verification_ack(body),
            "CloseMessage" => {
                let mut effects = vec![SessionEffect::Log(
                    LogLevel::Info,
                    format!(
                        "ACS closes the session: {}",
                        messages::text(body, "message")
                    ),
                )];
                effects.extend(self.end(now, Ending::Clean));
                effects
            }
            "ErrorMessage" => {
                let error = messages::text(body, "message");
                let mut effects = vec![SessionEffect::Log(
                    LogLevel::Error,
                    format!("ACS error: {error}"),
                )];
                effects.extend(self.end(now, Self::ending_of(&error)));
                effects
            }
            "PerformUpdateMessage" | "StageUpdateMessage" => {
                let (cluster, container_instance) = self.addressed(body);
                vec![SessionEffect::Send(messages::nack_request(
                    &cluster,
                    &container_instance,
                    &message_id,
                    UPDATES_DISABLED,
                ))]
            }
            "IAMRoleCredentialsMessage" => self.credentials_message(body),
            // Not one the ECS agent handles: refreshes come as IAMRoleCredentialsMessage.
            "RefreshTaskIAMRoleCredentialsMessage" => vec![SessionEffect::Log(
                LogLevel::Info,
                "ignored RefreshTaskIAMRoleCredentialsMessage: credentials are taken from \
                 IAMRoleCredentialsMessage, as the ECS agent takes them"
                    .to_string(),
            )],
            "AttachTaskNetworkInterfacesMessage"
            | "AttachInstanceNetworkInterfacesMessage"
            | "ConfirmAttachmentMessage" => vec![SessionEffect::Log(
                LogLevel::Info,
                format!(
                    "ignored {}: deckhand advertises no network interfaces",
                    message.kind
                ),
            )],
            other => vec![SessionEffect::Log(
                LogLevel::Info,
                format!("ignored an ACS message of type {other:?}"),
            )],
        }
    }

    fn payload(&mut self, body: &serde_json::Map<String, Value>) -> Vec<SessionEffect> {
        let message_id = messages::text(body, "messageId");
        let cluster = messages::text(body, "clusterArn");
        let container_instance = messages::text(body, "containerInstanceArn");
        if message_id.is_empty() || cluster.is_empty() || container_instance.is_empty() {
            return vec![SessionEffect::Log(
                LogLevel::Error,
                "ignored a PayloadMessage without messageId, clusterArn or containerInstanceArn"
                    .into(),
            )];
        }
        let seq_num = body.get("seqNum").and_then(Value::as_i64);
        if let Some(seq_num) = seq_num {
            self.highest_seq_num = Some(
                self.highest_seq_num
                    .map_or(seq_num, |seen| seen.max(seq_num)),
            );
        }
        let items: &[Value] = match body.get("tasks") {
            Some(Value::Array(items)) => items,
            _ => &[],
        };
        let mut tasks: Vec<Result<AcsTask, AcsTaskError>> = items
            .iter()
            .enumerate()
            .map(|(index, task)| {
                parse_acs_task(task).map_err(|error| error.within(&format!("tasks[{index}]")))
            })
            .collect();
        // Stops first, so a replacement finds its resources free (the ECS agent's order); a
        // task that failed to map is reported stopped, so it sorts with the stops.
        crate::sorting::sort_by_key(&mut tasks, |task| match task {
            Ok(task) => task.desired_status != TaskStatus::Stopped,
            Err(_) => false,
        });
        // Every task's credentials are acknowledged, as the ECS agent acknowledges those of
        // each task it added (a task that failed to map has none to acknowledge).
        let credentials = tasks
            .iter()
            .flatten()
            .flat_map(|task| {
                [
                    &task.credentials.task_role,
                    &task.credentials.execution_role,
                ]
            })
            .flatten()
            .map(|identified| {
                (
                    identified.credentials_id.clone(),
                    identified.credentials.expiration.clone(),
                )
            })
            .collect();
        if self.pending_acks.len() >= MAX_PENDING_ACKS {
            self.pending_acks.remove(0);
        }
        self.pending_acks.push(PendingAck {
            message_id: message_id.clone(),
            cluster,
            container_instance,
            credentials,
        });
        vec![SessionEffect::Apply {
            message_id,
            seq_num,
            tasks,
        }]
    }

    fn applied(&mut self, message_id: &str, ok: bool) -> Vec<SessionEffect> {
        let Some(position) = self
            .pending_acks
            .iter()
            .position(|pending| pending.message_id == message_id)
        else {
            return Vec::new();
        };
        let pending = self.pending_acks.remove(position);
        if !ok {
            return vec![SessionEffect::Log(
                LogLevel::Error,
                format!(
                    "payload {} not applied: not acknowledged, ECS sends it again",
                    pending.message_id
                ),
            )];
        }
        let mut effects = vec![SessionEffect::Send(messages::ack_request(
            &pending.cluster,
            &pending.container_instance,
            &pending.message_id,
        ))];
        effects.extend(
            pending
                .credentials
                .iter()
                .map(|(credentials_id, expiration)| {
                    SessionEffect::Send(messages::iam_role_credentials_ack(
                        &pending.message_id,
                        credentials_id,
                        expiration,
                    ))
                }),
        );
        effects
    }

    /// `IAMRoleCredentialsMessage`, checked as the ECS agent checks it (`messageId`,
    /// `taskArn`, `roleCredentials` with a `credentialsId`, `roleType` one of ECS's two);
    /// a message that fails is logged and not acknowledged.
    fn credentials_message(&mut self, body: &serde_json::Map<String, Value>) -> Vec<SessionEffect> {
        let message_id = messages::text(body, "messageId");
        let task_arn = messages::text(body, "taskArn");
        let refused = |why: String| {
            vec![SessionEffect::Log(
                LogLevel::Error,
                format!("ignored IAMRoleCredentialsMessage {message_id:?}: {why}"),
            )]
        };
        if message_id.is_empty() {
            return refused("Message ID is not set".into());
        }
        if task_arn.is_empty() {
            return refused("taskArn is not set".into());
        }
        let credentials = match body.get("roleCredentials") {
            None | Some(Value::Null) => return refused("roleCredentials is not set".into()),
            Some(value) => match parse_acs_credentials(value) {
                Ok(credentials) => credentials,
                Err(why) => return refused(format!("roleCredentials: {why}")),
            },
        };
        let role_type = messages::text(body, "roleType");
        let Some(role) = RoleType::from_ecs_name(&role_type) else {
            return refused(format!(
                "roleType {role_type:?} is invalid for task {task_arn}"
            ));
        };
        vec![SessionEffect::SetCredentials {
            message_id,
            task_arn,
            role,
            credentials,
        }]
    }

    fn manifest(&mut self, body: &serde_json::Map<String, Value>) -> Vec<SessionEffect> {
        let message_id = messages::text(body, "messageId");
        let timeline = body.get("timeline").and_then(Value::as_i64).unwrap_or(0);
        if self.highest_seq_num.is_some_and(|seen| timeline <= seen) {
            return vec![SessionEffect::Log(
                LogLevel::Warn,
                format!("discarded task manifest {message_id}: timeline {timeline} is not newer than what was seen"),
            )];
        }
        self.highest_seq_num = Some(timeline);
        let manifest_arns = messages::manifest_running_arns(body);
        // The candidates name the manifest's cluster (`taskClusterArn`), as the ECS agent's do.
        self.manifest = Some(TakenManifest {
            message_id: message_id.clone(),
            running: crate::sorting::set_of(manifest_arns.iter().cloned()),
            cluster_arn: messages::text(body, "clusterArn"),
        });
        let (cluster, container_instance) = self.addressed(body);
        vec![
            SessionEffect::Send(messages::ack_request(
                &cluster,
                &container_instance,
                &message_id,
            )),
            SessionEffect::CompareManifest {
                message_id,
                manifest_arns,
                timeline,
            },
        ]
    }

    fn local_running(&mut self, message_id: &str, arns: Vec<String>) -> Vec<SessionEffect> {
        let Some(manifest) = &self.manifest else {
            return Vec::new();
        };
        if manifest.message_id != message_id {
            return Vec::new();
        }
        let candidates: Vec<String> = arns
            .into_iter()
            .filter(|arn| !manifest.running.contains(arn))
            .collect();
        if candidates.is_empty() {
            return Vec::new();
        }
        vec![SessionEffect::Send(messages::task_stop_verification(
            message_id,
            &manifest.cluster_arn,
            &candidates,
        ))]
    }

    fn stop_verification_ack(
        &mut self,
        body: &serde_json::Map<String, Value>,
    ) -> Vec<SessionEffect> {
        let message_id = messages::text(body, "messageId");
        let matches = self
            .manifest
            .as_ref()
            .is_some_and(|taken| !message_id.is_empty() && taken.message_id == message_id);
        if !matches {
            return vec![SessionEffect::Log(
                LogLevel::Error,
                format!("ignored TaskStopVerificationAck {message_id:?}: it answers no manifest we took"),
            )];
        }
        self.manifest = None;
        let arns: Vec<String> = match body.get("stopTasks") {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|task| task.get("taskArn").and_then(Value::as_str))
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        };
        // The ECS agent sends no ack for it.
        vec![SessionEffect::StopTasks(arns)]
    }
}

#[derive(Debug, Clone, Copy)]
enum Ending {
    /// EOF or a CloseMessage: reconnect at once, back-off reset (the ECS agent's rule).
    Clean,
    Inactive,
    Failed,
}

#[cfg(test)]
#[rustfmt::skip]
mod tests;
