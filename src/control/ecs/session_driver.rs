//! The loop around [`AcsSession`]: connect, read frames, hand each to the session and perform
//! what it returns, until told to stop. Generic over the connection ([`AcsConnection`], the
//! shape of the websocket client's `read_text` / `send_text` / `close`) and over what applies
//! tasks ([`AcsTarget`], the engine), so tests run it over an in-memory connection.

use super::session::{AcsSession, LogLevel, SessionEffect, SessionInput};
use crate::role_credentials::{IdentifiedCredentials, RoleType};
use crate::task::acs::{AcsTask, AcsTaskError};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The longest a read waits, so a stop request is seen within it.
/// The shortest read wait a socket accepts (zero means "no timeout" to the kernel and is
/// refused by the standard library).
const MIN_READ_WAIT: Duration = Duration::from_millis(1);
const READ_SLICE: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnError {
    /// The peer closed cleanly.
    Closed,
    Failed(String),
}

/// One open ACS websocket.
pub trait AcsConnection {
    /// The next text frame; `Ok(None)` when `timeout` passed first.
    fn read_text(&mut self, timeout: Duration) -> Result<Option<String>, ConnError>;
    fn send_text(&mut self, text: &str) -> Result<(), ConnError>;
    fn close(&mut self);
}

/// What the session acts on: the engine.
pub trait AcsTarget {
    /// Makes the tasks durable (accepts the good ones, records the failed ones as STOPPED with
    /// their reason); `Err` when that could not be done, so the payload is not acknowledged.
    fn apply(&self, tasks: Vec<Result<AcsTask, AcsTaskError>>) -> Result<(), String>;
    fn stop(&self, arns: &[String]);
    /// The ARNs of the ECS tasks running here.
    fn local_running(&self) -> Vec<String>;
    /// Sets (replaces) the `role` credentials of task `task_arn` from an
    /// `IAMRoleCredentialsMessage`; `Err` (why) when the task is not here.
    fn set_credentials(
        &self,
        task_arn: &str,
        role: RoleType,
        credentials: IdentifiedCredentials,
    ) -> Result<(), String>;
}

/// Runs sessions until `wait` (called with each reconnect delay) or `keep_going` (checked at
/// least once a second) says to stop. `connect` gets the highest sequence number seen.
pub fn run_sessions<C: AcsConnection>(
    session: &mut AcsSession,
    target: &dyn AcsTarget,
    connect: &mut dyn FnMut(Option<i64>) -> Result<C, String>,
    wait: &mut dyn FnMut(Duration) -> bool,
    keep_going: &dyn Fn() -> bool,
) {
    while keep_going() {
        let (mut connection, first) = match connect(session.highest_seq_num()) {
            Ok(connection) => (Some(connection), SessionInput::Connected),
            Err(error) => (None, SessionInput::ConnectFailed(error)),
        };
        // `deckhand_ecs_connected`: up from the open until the session decides to reconnect.
        crate::metrics::global().set_ecs_connected(connection.is_some());
        let mut queue: VecDeque<SessionEffect> = session.handle(first, Instant::now()).into();
        let mut reconnect = None;
        loop {
            while let Some(effect) = queue.pop_front() {
                let follow = match effect {
                    SessionEffect::Send(text) => {
                        match connection.as_mut().map(|c| c.send_text(&text)) {
                            Some(Err(ConnError::Closed)) => Some(SessionInput::Closed),
                            Some(Err(ConnError::Failed(error))) => {
                                Some(SessionInput::ConnectionError(error))
                            }
                            _ => None,
                        }
                    }
                    SessionEffect::Apply {
                        message_id, tasks, ..
                    } => {
                        let ok = match target.apply(tasks) {
                            Ok(()) => true,
                            Err(error) => {
                                log::error!("ACS payload {message_id}: {error}");
                                false
                            }
                        };
                        Some(SessionInput::Applied { message_id, ok })
                    }
                    SessionEffect::CompareManifest { message_id, .. } => {
                        Some(SessionInput::LocalRunning {
                            message_id,
                            arns: target.local_running(),
                        })
                    }
                    SessionEffect::StopTasks(arns) => {
                        target.stop(&arns);
                        None
                    }
                    SessionEffect::SetCredentials {
                        message_id,
                        task_arn,
                        role,
                        credentials,
                    } => {
                        let credentials_id = credentials.credentials_id.clone();
                        let expiration = credentials.credentials.expiration.clone();
                        let ok = match target.set_credentials(&task_arn, role, credentials) {
                            Ok(()) => true,
                            Err(error) => {
                                log::error!(
                                    "ACS IAMRoleCredentialsMessage {message_id}: {error}; not acknowledged"
                                );
                                false
                            }
                        };
                        Some(SessionInput::CredentialsSet {
                            message_id,
                            credentials_id,
                            expiration,
                            ok,
                        })
                    }
                    SessionEffect::Reconnect { after } => {
                        reconnect = Some(after);
                        None
                    }
                    SessionEffect::Log(level, message) => {
                        match level {
                            LogLevel::Info => log::info!("{message}"),
                            LogLevel::Warn => log::warn!("{message}"),
                            LogLevel::Error => log::error!("{message}"),
                        }
                        None
                    }
                };
                if let Some(input) = follow {
                    queue.extend(session.handle(input, Instant::now()));
                }
            }
            if let Some(after) = reconnect {
                crate::metrics::global().set_ecs_connected(false);
                if let Some(connection) = connection.as_mut() {
                    connection.close();
                }
                if !wait(after) {
                    return;
                }
                break;
            }
            if !keep_going() {
                if let Some(connection) = connection.as_mut() {
                    connection.close();
                }
                return;
            }
            let Some(open) = connection.as_mut() else {
                break;
            };
            let now = Instant::now();
            let timeout = read_wait(session.next_deadline(), now);
            let input = match open.read_text(timeout) {
                Ok(Some(text)) => SessionInput::Text(text),
                Ok(None) => SessionInput::Tick,
                Err(ConnError::Closed) => SessionInput::Closed,
                Err(ConnError::Failed(error)) => SessionInput::ConnectionError(error),
            };
            queue.extend(session.handle(input, Instant::now()));
        }
    }
}

/// How long the next read waits: until the session's next deadline, at most [`READ_SLICE`]
/// (so a stop is seen), and at least [`MIN_READ_WAIT`]: a socket refuses a zero read timeout,
/// and a deadline that passed while the last input was handled must not end the connection.
/// Pure.
fn read_wait(next_deadline: Option<Instant>, now: Instant) -> Duration {
    next_deadline
        .map_or(READ_SLICE, |deadline| {
            deadline.saturating_duration_since(now).min(READ_SLICE)
        })
        .max(MIN_READ_WAIT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use std::cell::RefCell;
    use std::rc::Rc;

    /// Reads come from a script; sends are recorded.
    struct Scripted {
        reads: VecDeque<Result<Option<String>, ConnError>>,
        sent: Rc<RefCell<Vec<Value>>>,
    }

    impl AcsConnection for Scripted {
        fn read_text(&mut self, _timeout: Duration) -> Result<Option<String>, ConnError> {
            self.reads.pop_front().unwrap_or(Err(ConnError::Closed))
        }
        fn send_text(&mut self, text: &str) -> Result<(), ConnError> {
            self.sent
                .borrow_mut()
                .push(serde_json::from_str(text).map_err(|e| ConnError::Failed(e.to_string()))?);
            Ok(())
        }
        fn close(&mut self) {}
    }

    #[derive(Default)]
    struct Engine {
        applied: RefCell<Vec<String>>,
        stopped: RefCell<Vec<String>>,
        credentials: RefCell<Vec<(RoleType, String)>>,
        fail_apply: bool,
    }

    impl AcsTarget for Engine {
        fn apply(&self, tasks: Vec<Result<AcsTask, AcsTaskError>>) -> Result<(), String> {
            if self.fail_apply {
                return Err("disk full".into());
            }
            self.applied.borrow_mut().extend(
                tasks
                    .into_iter()
                    .filter_map(Result::ok)
                    .map(|task| task.arn),
            );
            Ok(())
        }
        fn stop(&self, arns: &[String]) {
            self.stopped.borrow_mut().extend_from_slice(arns);
        }
        fn local_running(&self) -> Vec<String> {
            vec!["arn:a".into(), "arn:old".into()]
        }
        fn set_credentials(
            &self,
            task_arn: &str,
            role: RoleType,
            credentials: IdentifiedCredentials,
        ) -> Result<(), String> {
            if task_arn != "arn:a" {
                return Err(format!("task {task_arn} is not here"));
            }
            self.credentials
                .borrow_mut()
                .push((role, credentials.credentials_id));
            Ok(())
        }
    }

    #[test]
    fn a_read_waits_until_the_deadline_within_its_slice_and_never_zero() {
        let now = Instant::now();
        let cases = [
            (None, READ_SLICE),
            (
                Some(now + Duration::from_millis(250)),
                Duration::from_millis(250),
            ),
            (Some(now + Duration::from_secs(30)), READ_SLICE),
            (Some(now), MIN_READ_WAIT),
            (now.checked_sub(Duration::from_secs(1)), MIN_READ_WAIT),
        ];
        for (deadline, expected) in cases {
            assert_eq!(read_wait(deadline, now), expected, "{deadline:?}");
        }
    }

    fn frame(kind: &str, message: Value) -> Result<Option<String>, ConnError> {
        Ok(Some(json!({"type": kind, "message": message}).to_string()))
    }

    fn run(
        engine: &Engine,
        sessions: Vec<Vec<Result<Option<String>, ConnError>>>,
    ) -> (Vec<Value>, Vec<Duration>, Vec<Option<i64>>) {
        let sent = Rc::new(RefCell::new(Vec::new()));
        let mut scripts: VecDeque<_> = sessions.into();
        let mut seq_nums = Vec::new();
        let mut delays = Vec::new();
        let mut session = AcsSession::new("c", "i", 3);
        let mut connect = |seq_num: Option<i64>| {
            seq_nums.push(seq_num);
            match scripts.pop_front() {
                Some(reads) => Ok(Scripted {
                    reads: reads.into(),
                    sent: sent.clone(),
                }),
                None => Err("InactiveInstanceException".to_string()),
            }
        };
        let mut wait = |after: Duration| {
            delays.push(after);
            after < Duration::from_secs(3600)
        };
        run_sessions(&mut session, engine, &mut connect, &mut wait, &|| true);
        let sent = sent.borrow().clone();
        (sent, delays, seq_nums)
    }

    #[test]
    fn the_driver_applies_acks_verifies_and_reconnects() {
        let engine = Engine::default();
        let task = json!({"arn": "arn:a", "desiredStatus": "RUNNING", "family": "f", "version": "1", "containers": [{"name": "a", "image": "busybox", "essential": true}]});
        let (sent, delays, seq_nums) = run(
            &engine,
            vec![
                vec![
                    frame(
                        "PayloadMessage",
                        json!({"messageId": "p1", "clusterArn": "c", "containerInstanceArn": "i", "seqNum": 4, "tasks": [task]}),
                    ),
                    Ok(None),
                    frame(
                        "TaskManifestMessage",
                        json!({"messageId": "m1", "timeline": 5, "tasks": [{"taskArn": "arn:a", "desiredStatus": "RUNNING"}]}),
                    ),
                    frame(
                        "TaskStopVerificationAck",
                        json!({"messageId": "m1", "stopTasks": [{"taskArn": "arn:old"}]}),
                    ),
                    Err(ConnError::Failed("reset".into())),
                ],
                vec![Err(ConnError::Closed)],
            ],
        );
        let kinds: Vec<&str> = sent
            .iter()
            .filter_map(|frame| frame["type"].as_str())
            .collect();
        assert_eq!(
            kinds,
            ["AckRequest", "AckRequest", "TaskStopVerificationMessage"]
        );
        assert_eq!(
            sent[2]["message"]["stopCandidates"],
            json!([{"taskArn": "arn:old", "desiredStatus": "STOPPED"}])
        );
        assert_eq!(*engine.applied.borrow(), ["arn:a"]);
        assert_eq!(*engine.stopped.borrow(), ["arn:old"]);
        assert_eq!(
            seq_nums,
            [None, Some(5), Some(5)],
            "reconnects carry the highest sequence number"
        );
        assert_eq!(delays.len(), 3);
        assert!(
            delays[0] >= Duration::from_millis(250),
            "an error backs off: {delays:?}"
        );
        assert_eq!(
            delays[1],
            Duration::ZERO,
            "a clean close reconnects at once"
        );
        assert_eq!(
            delays[2],
            Duration::from_secs(3600),
            "an inactive instance waits an hour"
        );
    }

    #[test]
    fn credentials_of_a_task_here_are_set_and_acked_and_of_one_elsewhere_not() {
        let engine = Engine::default();
        let message = |id: &str, arn: &str| {
            frame(
                "IAMRoleCredentialsMessage",
                json!({"messageId": id, "taskArn": arn, "roleType": "TaskExecution",
                       "roleCredentials": {"credentialsId": format!("cred-{id}"), "expiration": "2026-12-05T03:00:00Z",
                                           "accessKeyId": "AKIA1", "secretAccessKey": "s", "sessionToken": "t"}}),
            )
        };
        let (sent, _, _) = run(
            &engine,
            vec![vec![message("m1", "arn:a"), message("m2", "arn:gone")]],
        );
        assert_eq!(
            sent,
            vec![
                json!({"type": "IAMRoleCredentialsAckRequest", "message": {"messageId": "m1", "credentialsId": "cred-m1", "expiration": "2026-12-05T03:00:00Z"}})
            ]
        );
        assert_eq!(
            *engine.credentials.borrow(),
            [(RoleType::TaskExecution, "cred-m1".to_string())]
        );
    }

    #[test]
    fn a_payload_the_engine_could_not_save_is_not_acked() {
        let engine = Engine {
            fail_apply: true,
            ..Engine::default()
        };
        let (sent, _, _) = run(
            &engine,
            vec![vec![frame(
                "PayloadMessage",
                json!({"messageId": "p1", "clusterArn": "c", "containerInstanceArn": "i", "tasks": []}),
            )]],
        );
        assert!(sent.is_empty(), "{sent:?}");
    }
}
