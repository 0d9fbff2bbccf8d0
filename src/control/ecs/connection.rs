//! The ECS connection's threads (`ECS_EXTERNAL=true`): `ecs-session` registers this host
//! (RegisterContainerInstance, with the container instance ARN saved in `ecs.json` sent again),
//! discovers the ACS endpoint (DiscoverPollEndpoint) and holds the ACS session, applying each
//! payload to the engine before it is acknowledged; `ecs-reporter` reports state changes
//! ([`super::reporter`]); `ecs-telemetry` holds the telemetry session once this host is
//! registered ([`super::telemetry`]). None blocks the engine or another: with ECS out of reach
//! each waits and retries, and every task keeps running.

use super::register::{parse_register_response, register_request, RegistrationInput};
use super::reporter::{ecs_arn, RecordFile, RejectedTask, Reporter};
use super::session::AcsSession;
use super::session_driver::{run_sessions, AcsConnection, AcsTarget, ConnError};
use super::telemetry::{telemetry_thread, TelemetrySettings};
use super::websocket::{self, AcsQuery, AcsSocket};
use super::{CredentialChain, EcsClient, EcsError, Endpoint};
use crate::engine::{EngineError, EngineHandle};
use crate::task::acs::{AcsTask, AcsTaskError};
use crate::task::{TaskStatus, ECS_SOURCE_PREFIX};
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the agent waits before registering again after ECS said this instance was
/// deregistered (the ECS agent's inactive-instance delay).
pub const INACTIVE_INSTANCE_DELAY: Duration = Duration::from_secs(3600);
const REGISTER_RETRY_FIRST: Duration = Duration::from_millis(250);
const REGISTER_RETRY_MAX: Duration = Duration::from_secs(120);
/// Each API call's deadline.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Everything the connection needs, built by the agent from its configuration.
pub struct EcsSettings {
    pub cluster: String,
    pub region: String,
    pub endpoint: Endpoint,
    pub credentials: Arc<CredentialChain>,
    /// The registration without the saved container instance ARN (filled from `ecs.json`).
    pub registration: RegistrationInput,
    pub record: Arc<RecordFile>,
    pub exclude_ipv6: bool,
    pub docker_version: Option<String>,
    /// `ECS_DISABLE_METRICS`, for the telemetry session.
    pub disable_metrics: bool,
    /// Pings Docker: the telemetry session's runtime check.
    pub docker_ping: Arc<dyn Fn() -> bool + Send + Sync>,
}

/// The running connection; [`EcsConnection::shutdown`] stops and joins its threads.
pub struct EcsConnection {
    stop: Option<Sender<()>>,
    threads: Vec<JoinHandle<()>>,
}

impl EcsConnection {
    pub fn start(
        settings: EcsSettings,
        engine: Arc<dyn EngineHandle>,
    ) -> std::io::Result<EcsConnection> {
        let (stop_sender, stop) = bounded::<()>(0);
        let client = Arc::new(
            EcsClient::new(
                settings.endpoint.clone(),
                &settings.region,
                Arc::clone(&settings.credentials),
            )
            .with_timeout(CALL_TIMEOUT),
        );
        if let Some(arn) = settings.record.get().container_instance_arn {
            engine.set_container_instance_arn(arn);
        }
        let reporter = Reporter {
            engine: Arc::clone(&engine),
            caller: client.clone(),
            record: Arc::clone(&settings.record),
            cluster: settings.cluster.clone(),
            exclude_ipv6: settings.exclude_ipv6,
            stop: stop.clone(),
        };
        let reporter_thread = std::thread::Builder::new()
            .name("ecs-reporter".into())
            .spawn(move || reporter.run())?;
        // The telemetry session starts once the session thread has registered this host.
        let (registered_sender, registered) = bounded::<()>(1);
        let telemetry = TelemetrySettings {
            cluster: settings.cluster.clone(),
            region: settings.region.clone(),
            credentials: Arc::clone(&settings.credentials),
            docker_version: settings.docker_version.clone(),
            disable_metrics: settings.disable_metrics,
            docker_ping: Arc::clone(&settings.docker_ping),
        };
        let (telemetry_client, telemetry_engine, telemetry_stop) =
            (client.clone(), Arc::clone(&engine), stop.clone());
        let telemetry_thread = std::thread::Builder::new()
            .name("ecs-telemetry".into())
            .spawn(move || {
                telemetry_thread(
                    telemetry,
                    telemetry_client,
                    telemetry_engine,
                    registered,
                    telemetry_stop,
                )
            })?;
        let session_thread = std::thread::Builder::new()
            .name("ecs-session".into())
            .spawn(move || session_thread(settings, client, engine, stop, registered_sender))?;
        Ok(EcsConnection {
            stop: Some(stop_sender),
            threads: vec![reporter_thread, session_thread, telemetry_thread],
        })
    }

    /// Stops both threads (within about a second: reads and waits are sliced) and joins them.
    pub fn shutdown(mut self) {
        drop(self.stop.take());
        for thread in self.threads.drain(..) {
            if thread.join().is_err() {
                log::error!("ECS: a connection thread panicked");
            }
        }
    }
}

/// Waits `pause` unless the stop signal comes first; `false` once stopped.
fn wait(stop: &Receiver<()>, pause: Duration) -> bool {
    matches!(stop.recv_timeout(pause), Err(RecvTimeoutError::Timeout))
}

fn stopped(stop: &Receiver<()>) -> bool {
    !matches!(stop.try_recv(), Err(crossbeam_channel::TryRecvError::Empty))
}

fn session_thread(
    settings: EcsSettings,
    client: Arc<EcsClient>,
    engine: Arc<dyn EngineHandle>,
    stop: Receiver<()>,
    registered: Sender<()>,
) {
    let mut retry = REGISTER_RETRY_FIRST;
    let mut warned = false;
    let container_instance_arn = loop {
        match register(&settings, &client) {
            Ok(arn) => {
                log::info!(
                    "ECS: registered in cluster {} as {arn} ({})",
                    settings.cluster,
                    settings.endpoint
                );
                if let Err(error) = settings
                    .record
                    .update(|record| record.container_instance_arn = Some(arn.clone()))
                {
                    log::error!("ECS: cannot save the container instance ARN: {error}");
                }
                engine.set_container_instance_arn(arn.clone());
                let _ = registered.try_send(());
                break arn;
            }
            Err(error) if error.is_inactive_instance() => {
                log::error!(
                    "ECS: this container instance is deregistered ({error}); registering again in an hour — local tasks keep running"
                );
                if !wait(&stop, INACTIVE_INSTANCE_DELAY) {
                    return;
                }
            }
            Err(error) => {
                if warned {
                    log::debug!("ECS: still cannot register ({error})");
                } else {
                    log::warn!(
                        "ECS: cannot register yet ({error}); retrying — tasks keep running meanwhile"
                    );
                    warned = true;
                }
                if !wait(&stop, super::reporter::jittered(retry)) {
                    return;
                }
                retry = retry.mul_f64(1.5).min(REGISTER_RETRY_MAX);
            }
        }
    };

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos() as u64)
        .unwrap_or(1);
    let mut session = AcsSession::new(&settings.cluster, &container_instance_arn, seed);
    let target = EngineTarget {
        engine: Arc::clone(&engine),
        record: Arc::clone(&settings.record),
    };
    let mut connect = |seq_num: Option<i64>| -> Result<Socket, String> {
        connect_acs(&settings, &client, &container_instance_arn, seq_num)
            .map(|socket| Socket(Some(socket)))
            .map_err(|error| error.to_string())
    };
    let mut pause = |after: Duration| wait(&stop, after);
    let keep_going = || !stopped(&stop);
    run_sessions(&mut session, &target, &mut connect, &mut pause, &keep_going);
}

fn register(settings: &EcsSettings, client: &EcsClient) -> Result<String, EcsError> {
    let mut input = settings.registration.clone();
    input.container_instance_arn = settings.record.get().container_instance_arn;
    let body = register_request(&input).map_err(|error| EcsError::Config(error.to_string()))?;
    let answer = client.call("RegisterContainerInstance", &body)?;
    let bytes = serde_json::to_vec(&answer).unwrap_or_default();
    parse_register_response(&bytes).map_err(|error| EcsError::Protocol(error.to_string()))
}

fn connect_acs(
    settings: &EcsSettings,
    client: &EcsClient,
    container_instance_arn: &str,
    seq_num: Option<i64>,
) -> Result<AcsSocket, EcsError> {
    let answer = client.call(
        "DiscoverPollEndpoint",
        &serde_json::json!({
            "cluster": settings.cluster,
            "containerInstance": container_instance_arn,
        }),
    )?;
    let endpoint = answer
        .get("endpoint")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| {
            EcsError::Protocol("DiscoverPollEndpoint answered without an endpoint".into())
        })?;
    let credentials = settings
        .credentials
        .current()
        .map_err(EcsError::Credentials)?;
    let query = AcsQuery {
        cluster_arn: settings.cluster.clone(),
        container_instance_arn: container_instance_arn.to_string(),
        agent_hash: String::new(),
        agent_version: crate::VERSION.to_string(),
        docker_version: settings.docker_version.clone(),
        send_credentials: false,
        seq_num: seq_num.and_then(|seq| u64::try_from(seq).ok()).unwrap_or(0),
    };
    websocket::connect(
        endpoint,
        &query,
        &settings.region,
        &credentials,
        &super::sigv4::amz_date(crate::clock::now_millis()),
        CALL_TIMEOUT,
    )
}

/// The websocket as the session driver reads it (`None` once closed).
pub(super) struct Socket(pub(super) Option<AcsSocket>);

impl AcsConnection for Socket {
    fn read_text(&mut self, timeout: Duration) -> Result<Option<String>, ConnError> {
        let socket = self.0.as_mut().ok_or(ConnError::Closed)?;
        socket
            .set_read_timeout(Some(timeout))
            .map_err(|error| ConnError::Failed(error.to_string()))?;
        match socket.read_text() {
            Ok(Some(text)) => Ok(Some(text)),
            Ok(None) => Err(ConnError::Closed),
            Err(EcsError::ReadTimeout) => Ok(None),
            Err(error) => Err(ConnError::Failed(error.to_string())),
        }
    }

    fn send_text(&mut self, text: &str) -> Result<(), ConnError> {
        let socket = self.0.as_mut().ok_or(ConnError::Closed)?;
        socket
            .send_text(text)
            .map_err(|error| ConnError::Failed(error.to_string()))
    }

    fn close(&mut self) {
        if let Some(socket) = self.0.take() {
            socket.close();
        }
    }
}

/// The engine as the ACS session acts on it.
struct EngineTarget {
    engine: Arc<dyn EngineHandle>,
    record: Arc<RecordFile>,
}

impl EngineTarget {
    fn owned(&self) -> Vec<(String, crate::task::Task)> {
        self.engine
            .tasks()
            .into_iter()
            .filter_map(|task| ecs_arn(&task).map(|arn| (arn.to_string(), task.clone())))
            .collect()
    }
}

impl AcsTarget for EngineTarget {
    fn apply(&self, tasks: Vec<Result<AcsTask, AcsTaskError>>) -> Result<(), String> {
        let owned = self.owned();
        let find = |arn: &str| owned.iter().find(|(owned_arn, _)| owned_arn == arn);
        let mut rejected = Vec::new();
        let (stops, starts): (Vec<_>, Vec<_>) = tasks.into_iter().partition(
            |task| matches!(task, Ok(task) if task.desired_status == TaskStatus::Stopped),
        );
        // Stops before starts: a replacement's start waits for the stop numbered before it.
        for task in stops.into_iter().flatten() {
            let Some((_, local)) = find(&task.arn) else {
                log::info!(
                    "ECS: task {} is to stop and is not here; nothing to do",
                    task.arn
                );
                continue;
            };
            if local.desired_status == TaskStatus::Stopped {
                continue;
            }
            match self.engine.stop_from_control_plane(&local.id) {
                Ok(()) | Err(EngineError::NotFound { .. }) => {}
                Err(error) => return Err(format!("task {}: {error}", task.arn)),
            }
        }
        for task in starts {
            match task {
                Ok(task) => {
                    if find(&task.arn).is_some() {
                        continue;
                    }
                    for warning in &task.warnings {
                        log::warn!("ECS: task {}: {warning}", task.arn);
                    }
                    let source = format!("{ECS_SOURCE_PREFIX}{}", task.arn);
                    match self
                        .engine
                        .submit_with_arn(task.definition, task.arn.clone(), source)
                    {
                        Ok(accepted) => log::info!(
                            "ECS: task {} accepted as {} ({}:{})",
                            task.arn,
                            accepted.id,
                            task.family,
                            task.version
                        ),
                        Err(EngineError::Rejected { reason }) => rejected.push(RejectedTask {
                            arn: task.arn,
                            reason,
                        }),
                        Err(error) => return Err(format!("task {}: {error}", task.arn)),
                    }
                }
                Err(error) => match error.arn.clone() {
                    Some(arn) => rejected.push(RejectedTask {
                        arn,
                        reason: format!("{}: {}", error.path, error.message),
                    }),
                    None => log::error!(
                        "ECS: a payload task without an ARN cannot be taken or reported: {}: {}",
                        error.path,
                        error.message
                    ),
                },
            }
        }
        if rejected.is_empty() {
            return Ok(());
        }
        for task in &rejected {
            log::error!("ECS: task {} cannot run here: {}", task.arn, task.reason);
        }
        self.record.update(|record| {
            for task in rejected {
                if !record.rejected.iter().any(|known| known.arn == task.arn) {
                    record.rejected.push(task);
                }
            }
        })
    }

    fn stop(&self, arns: &[String]) {
        for (arn, task) in self.owned() {
            if arns.contains(&arn) && task.desired_status != TaskStatus::Stopped {
                log::info!("ECS: stopping task {arn}: ECS no longer lists it");
                if let Err(error) = self.engine.stop_from_control_plane(&task.id) {
                    log::warn!("ECS: cannot stop task {arn}: {error}");
                }
            }
        }
    }

    fn local_running(&self) -> Vec<String> {
        self.owned()
            .into_iter()
            .filter(|(_, task)| task.desired_status != TaskStatus::Stopped)
            .map(|(arn, _)| arn)
            .collect()
    }
}
