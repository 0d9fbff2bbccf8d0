//! The telemetry session's timing as a sans-I/O machine: [`TelemetrySession::handle`] takes
//! what happened (a connection made, failed or lost, a message from TCS, time passing) and the
//! current time, and says what to do ([`TelemetryEffect`]: connect, sample the cgroups,
//! publish, close). The rules are the ECS agent's (`ecs-agent/tcs/handler/handler.go`,
//! `agent/stats/`):
//!
//! - samples are taken every 10 s (the ECS agent's polling interval, half the publish
//!   interval), connected or not;
//! - metrics, health and the instance status are published every 20 s while connected, and at
//!   once on every connect, so readings kept while ECS was away go out as soon as it is back;
//! - a heartbeat or an ack from TCS keeps the connection; none for 1 min plus up to 1 min of
//!   jitter closes it, and a connection is closed after 30 min plus up to 5 min anyway; both
//!   reconnect at once, as a clean close does;
//! - a failed connect or a broken connection reconnects after a back-off from 1 s to 1 min
//!   (×2, up to 20 % more), reset by a clean close.

use super::messages::ServerMessage;
use std::time::{Duration, Instant};

pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(10);
pub const PUBLISH_INTERVAL: Duration = Duration::from_secs(20);
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(60);
pub const HEARTBEAT_JITTER: Duration = Duration::from_secs(60);
pub const DISCONNECT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
pub const DISCONNECT_JITTER: Duration = Duration::from_secs(5 * 60);
pub const BACKOFF_MIN: Duration = Duration::from_secs(1);
pub const BACKOFF_MAX: Duration = Duration::from_secs(60);
const BACKOFF_MULTIPLIER: u32 = 2;
const BACKOFF_JITTER: f64 = 0.2;

/// What happened.
#[derive(Debug, Clone, PartialEq)]
pub enum TelemetryInput {
    /// The websocket is open.
    Connected,
    ConnectFailed(String),
    /// A message from TCS.
    Message(ServerMessage),
    /// The peer closed cleanly.
    Closed,
    /// Reading or sending failed.
    ConnectionError(String),
    /// Time passed (the driver wakes at [`TelemetrySession::next_deadline`]).
    Tick,
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TelemetryEffect {
    /// Open the websocket, then answer `Connected` or `ConnectFailed`.
    Connect,
    /// Read every running container's cgroup into the windows.
    Sample,
    /// Send metrics, health and the instance status.
    Publish,
    /// Close the websocket (the session reconnects by itself).
    Close,
    Log(log::Level, String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    /// Waiting to connect at this time.
    Waiting(Instant),
    /// A `Connect` is out.
    Connecting,
    Connected {
        heartbeat_deadline: Instant,
        disconnect_at: Instant,
    },
}

/// One telemetry session, across reconnects.
#[derive(Debug)]
pub struct TelemetrySession {
    link: Link,
    next_sample: Instant,
    next_publish: Instant,
    backoff: Duration,
    /// xorshift state for jitter: seeded, so tests are deterministic.
    random: u64,
    /// Failed connects since the last success, so only the first is a warning.
    failures: u32,
}

impl TelemetrySession {
    pub fn new(now: Instant, seed: u64) -> TelemetrySession {
        TelemetrySession {
            link: Link::Waiting(now),
            next_sample: now,
            next_publish: now + PUBLISH_INTERVAL,
            backoff: BACKOFF_MIN,
            random: seed | 1,
            failures: 0,
        }
    }

    pub fn is_connected(&self) -> bool {
        matches!(self.link, Link::Connected { .. })
    }

    /// The latest time the driver must send a [`TelemetryInput::Tick`].
    pub fn next_deadline(&self) -> Instant {
        let link = match self.link {
            Link::Waiting(at) => Some(at),
            Link::Connecting => None,
            Link::Connected {
                heartbeat_deadline,
                disconnect_at,
            } => Some(heartbeat_deadline.min(disconnect_at).min(self.next_publish)),
        };
        link.map_or(self.next_sample, |at| at.min(self.next_sample))
    }

    fn jitter(&mut self, most: Duration) -> Duration {
        self.random ^= self.random << 13;
        self.random ^= self.random >> 7;
        self.random ^= self.random << 17;
        most.mul_f64((self.random % 10_000) as f64 / 10_000.0)
    }

    fn back_off(&mut self, now: Instant) -> Duration {
        let extra = self.jitter(self.backoff.mul_f64(BACKOFF_JITTER));
        let pause = self.backoff + extra;
        self.backoff = (self.backoff * BACKOFF_MULTIPLIER).min(BACKOFF_MAX);
        self.link = Link::Waiting(now + pause);
        pause
    }

    fn reconnect_now(&mut self, now: Instant) {
        self.backoff = BACKOFF_MIN;
        self.link = Link::Waiting(now);
    }

    fn heartbeat_deadline(&mut self, now: Instant) -> Instant {
        now + HEARTBEAT_TIMEOUT + self.jitter(HEARTBEAT_JITTER)
    }

    pub fn handle(&mut self, input: TelemetryInput, now: Instant) -> Vec<TelemetryEffect> {
        let mut effects = Vec::new();
        match input {
            TelemetryInput::Connected => {
                let heartbeat_deadline = self.heartbeat_deadline(now);
                let disconnect_at = now + DISCONNECT_TIMEOUT + self.jitter(DISCONNECT_JITTER);
                self.link = Link::Connected {
                    heartbeat_deadline,
                    disconnect_at,
                };
                self.failures = 0;
                effects.push(TelemetryEffect::Publish);
                self.next_publish = now + PUBLISH_INTERVAL;
            }
            TelemetryInput::ConnectFailed(error) => {
                let pause = self.back_off(now);
                let level = if self.failures == 0 {
                    log::Level::Warn
                } else {
                    log::Level::Debug
                };
                self.failures = self.failures.saturating_add(1);
                effects.push(TelemetryEffect::Log(
                    level,
                    format!(
                        "ECS telemetry: cannot connect ({error}); again in {} ms — tasks and the ACS session are not affected",
                        pause.as_millis()
                    ),
                ));
            }
            TelemetryInput::Message(message) => self.message(message, now, &mut effects),
            TelemetryInput::Closed => {
                if self.is_connected() {
                    effects.push(TelemetryEffect::Log(
                        log::Level::Info,
                        "ECS telemetry: TCS closed the connection; reconnecting".into(),
                    ));
                }
                self.reconnect_now(now);
            }
            TelemetryInput::ConnectionError(error) => {
                effects.push(TelemetryEffect::Close);
                let pause = self.back_off(now);
                effects.push(TelemetryEffect::Log(
                    log::Level::Warn,
                    format!(
                        "ECS telemetry: connection lost ({error}); reconnecting in {} ms",
                        pause.as_millis()
                    ),
                ));
            }
            TelemetryInput::Tick => self.tick(now, &mut effects),
        }
        effects
    }

    fn message(
        &mut self,
        message: ServerMessage,
        now: Instant,
        effects: &mut Vec<TelemetryEffect>,
    ) {
        match message {
            ServerMessage::Heartbeat { .. } | ServerMessage::Ack(_) => {
                let deadline = self.heartbeat_deadline(now);
                if let Link::Connected {
                    heartbeat_deadline, ..
                } = &mut self.link
                {
                    *heartbeat_deadline = deadline;
                }
            }
            ServerMessage::StopSession(text) => effects.push(TelemetryEffect::Log(
                log::Level::Info,
                format!("ECS telemetry: TCS sent StopTelemetrySessionMessage ({text})"),
            )),
            ServerMessage::Error { kind, message } => effects.push(TelemetryEffect::Log(
                log::Level::Warn,
                format!("ECS telemetry: TCS answered {kind}: {message}"),
            )),
            ServerMessage::Other(kind) => effects.push(TelemetryEffect::Log(
                log::Level::Debug,
                format!("ECS telemetry: ignoring a {kind} message"),
            )),
        }
    }

    fn tick(&mut self, now: Instant, effects: &mut Vec<TelemetryEffect>) {
        if now >= self.next_sample {
            effects.push(TelemetryEffect::Sample);
            self.next_sample = (self.next_sample + SAMPLE_INTERVAL).max(now);
            if self.next_sample == now {
                self.next_sample = now + SAMPLE_INTERVAL;
            }
        }
        match self.link {
            Link::Waiting(at) if now >= at => {
                self.link = Link::Connecting;
                effects.push(TelemetryEffect::Connect);
            }
            Link::Connected {
                heartbeat_deadline,
                disconnect_at,
            } => {
                if now >= heartbeat_deadline || now >= disconnect_at {
                    let why = if now >= heartbeat_deadline {
                        "no heartbeat from TCS"
                    } else {
                        "the connection's time is up"
                    };
                    effects.push(TelemetryEffect::Close);
                    effects.push(TelemetryEffect::Log(
                        log::Level::Info,
                        format!("ECS telemetry: closing the connection ({why}); reconnecting"),
                    ));
                    self.reconnect_now(now);
                    effects.push(TelemetryEffect::Connect);
                    self.link = Link::Connecting;
                } else if now >= self.next_publish {
                    effects.push(TelemetryEffect::Publish);
                    self.next_publish = now + PUBLISH_INTERVAL;
                }
            }
            // While away, publications are skipped: the windows keep the latest readings.
            _ => {
                if now >= self.next_publish {
                    self.next_publish = now + PUBLISH_INTERVAL;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TelemetryEffect::*;

    fn actions(effects: Vec<TelemetryEffect>) -> Vec<TelemetryEffect> {
        effects
            .into_iter()
            .filter(|effect| !matches!(effect, Log(..)))
            .collect()
    }

    #[test]
    fn it_connects_samples_and_publishes_on_its_intervals() {
        let start = Instant::now();
        let at = |seconds: u64| start + Duration::from_secs(seconds);
        let mut session = TelemetrySession::new(start, 7);
        assert_eq!(
            actions(session.handle(TelemetryInput::Tick, at(0))),
            [Sample, Connect]
        );
        assert_eq!(
            session.next_deadline(),
            at(10),
            "connecting: only the next sample"
        );
        assert_eq!(
            actions(session.handle(TelemetryInput::Connected, at(1))),
            [Publish]
        );
        // (time, input, effects)
        let table: Vec<(u64, TelemetryInput, Vec<TelemetryEffect>)> = vec![
            (10, TelemetryInput::Tick, vec![Sample]),
            (
                15,
                TelemetryInput::Message(ServerMessage::Heartbeat {
                    healthy: Some(true),
                }),
                vec![],
            ),
            (20, TelemetryInput::Tick, vec![Sample]),
            (21, TelemetryInput::Tick, vec![Publish]),
            (30, TelemetryInput::Tick, vec![Sample]),
            (41, TelemetryInput::Tick, vec![Sample, Publish]),
            (
                50,
                TelemetryInput::Message(ServerMessage::Ack("AckPublishMetric".into())),
                vec![],
            ),
        ];
        for (seconds, input, expected) in table {
            assert_eq!(
                actions(session.handle(input.clone(), at(seconds))),
                expected,
                "{seconds} s: {input:?}"
            );
        }
        assert!(session.next_deadline() <= at(60));
    }

    #[test]
    fn no_heartbeat_closes_and_reconnects_at_once() {
        let start = Instant::now();
        let mut session = TelemetrySession::new(start, 3);
        session.handle(TelemetryInput::Tick, start);
        session.handle(TelemetryInput::Connected, start);
        let mut now = start;
        let mut effects = Vec::new();
        // Ticks at the session's deadlines, publishing, until the heartbeat deadline passes.
        for _ in 0..100 {
            now = session.next_deadline();
            effects = actions(session.handle(TelemetryInput::Tick, now));
            if effects.contains(&Close) {
                break;
            }
        }
        assert!(effects.ends_with(&[Close, Connect]), "{effects:?}");
        let waited = now - start;
        assert!(
            waited >= HEARTBEAT_TIMEOUT && waited <= HEARTBEAT_TIMEOUT + HEARTBEAT_JITTER,
            "{waited:?}"
        );
    }

    #[test]
    fn failures_back_off_doubling_to_a_minute_and_a_clean_close_resets() {
        let start = Instant::now();
        let mut session = TelemetrySession::new(start, 11);
        let mut now = start;
        let mut pauses = Vec::new();
        while pauses.len() < 8 {
            now = session.next_deadline().max(now);
            let effects = actions(session.handle(TelemetryInput::Tick, now));
            if !effects.contains(&Connect) {
                continue;
            }
            session.handle(TelemetryInput::ConnectFailed("refused".into()), now);
            let Link::Waiting(at) = session.link else {
                panic!("waiting")
            };
            pauses.push(at - now);
        }
        for (pause, base) in pauses.iter().zip([1u64, 2, 4, 8, 16, 32, 60, 60]) {
            let base = Duration::from_secs(base);
            assert!(*pause >= base && *pause <= base.mul_f64(1.2), "{pauses:?}");
        }
        session.link = Link::Connecting;
        session.handle(TelemetryInput::Connected, now);
        session.handle(TelemetryInput::Closed, now);
        assert_eq!(
            session.link,
            Link::Waiting(now),
            "a clean close reconnects at once"
        );
        assert_eq!(session.backoff, BACKOFF_MIN);
        session.link = Link::Connecting;
        session.handle(TelemetryInput::Connected, now);
        let effects = actions(session.handle(TelemetryInput::ConnectionError("reset".into()), now));
        assert_eq!(effects, [Close]);
        assert!(matches!(session.link, Link::Waiting(at) if at >= now + BACKOFF_MIN));
    }

    #[test]
    fn away_from_ecs_it_keeps_sampling_and_publishes_once_back() {
        let start = Instant::now();
        let at = |seconds: u64| start + Duration::from_secs(seconds);
        let mut session = TelemetrySession::new(start, 5);
        session.handle(TelemetryInput::Tick, at(0));
        session.handle(TelemetryInput::ConnectFailed("down".into()), at(0));
        let mut seen = Vec::new();
        for seconds in 1..=45 {
            for effect in actions(session.handle(TelemetryInput::Tick, at(seconds))) {
                if effect == Connect {
                    session.handle(TelemetryInput::ConnectFailed("down".into()), at(seconds));
                }
                seen.push(effect);
            }
        }
        assert!(!seen.contains(&Publish), "{seen:?}");
        assert_eq!(seen.iter().filter(|effect| **effect == Sample).count(), 4);
        session.link = Link::Connecting;
        assert_eq!(
            actions(session.handle(TelemetryInput::Connected, at(46))),
            [Publish]
        );
    }

    #[test]
    fn errors_and_stop_messages_are_logged_and_keep_the_connection() {
        let start = Instant::now();
        let mut session = TelemetrySession::new(start, 9);
        session.handle(TelemetryInput::Tick, start);
        session.handle(TelemetryInput::Connected, start);
        for message in [
            ServerMessage::Error {
                kind: "ServerException".into(),
                message: "oops".into(),
            },
            ServerMessage::StopSession("bye".into()),
            ServerMessage::Other("Surprise".into()),
        ] {
            let effects = session.handle(TelemetryInput::Message(message), start);
            assert!(matches!(effects.as_slice(), [Log(..)]), "{effects:?}");
            assert!(session.is_connected());
        }
    }
}
