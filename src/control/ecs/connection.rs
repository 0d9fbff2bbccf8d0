//! The ECS connection's threads (`ECS_EXTERNAL=true`): `ecs-session` registers this host
//! (RegisterContainerInstance, with the container instance ARN saved in `ecs.json` sent again,
//! or forgotten and a new instance registered when ECS says the saved one is inactive),
//! discovers the ACS endpoint (DiscoverPollEndpoint, cached until connecting to it fails:
//! [`super::poll_endpoint`]) and holds the ACS session, applying each payload to the engine
//! before it is acknowledged; `ecs-reporter` reports state changes ([`super::reporter`]);
//! `ecs-telemetry` holds the telemetry session once this host is registered
//! ([`super::telemetry`]), its endpoint taken from the same cached DiscoverPollEndpoint answer.
//! None blocks the engine or another: with ECS out of reach each waits and retries, and every
//! task keeps running. All reach ECS through the proxy settings of [`EcsSettings::proxies`].
//!
//! How a websocket's end maps onto the session ([`close_outcome`], as the Go agent's
//! `wsclient` reads close codes): a close with 1000, 1001 or 1011, or a connection lost
//! without a close frame (1006, an EOF in the middle of a frame too), reconnects at once —
//! unless the connection lasted under [`SHORT_LIVED`], which backs off, so a server that
//! accepts and drops never gets a tight loop; any other close code (1008, …) backs off.

use super::poll_endpoint::{PollEndpointCache, PollEndpoints};
use super::register::{parse_register_response, register_request, starts_over, RegistrationInput};
use super::reporter::{ecs_arn, RecordFile, RejectedTask, Reporter};
use super::session::AcsSession;
use super::session_driver::{run_sessions, AcsConnection, AcsTarget, ConnError};
use super::telemetry::{telemetry_thread, TelemetrySettings};
use super::websocket::{self, AcsQuery, AcsSocket, Received, SignedUpgrade, CLOSE_ABNORMAL};
use super::{CredentialChain, EcsClient, EcsError, Endpoint};
use crate::engine::{EngineError, EngineHandle};
use crate::net::proxy::ProxySettings;
use crate::role_credentials::{CredentialsStore, IdentifiedCredentials, RoleType};
use crate::task::acs::{AcsTask, AcsTaskError};
use crate::task::{TaskStatus, ECS_SOURCE_PREFIX};
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the agent waits before registering again after ECS said this instance was
/// deregistered (the ECS agent's inactive-instance delay).
pub const INACTIVE_INSTANCE_DELAY: Duration = Duration::from_secs(3600);
const REGISTER_RETRY_FIRST: Duration = Duration::from_millis(250);
const REGISTER_RETRY_MAX: Duration = Duration::from_secs(120);
/// Each API call's deadline.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// A websocket that ends sooner than this after it opened backs off whatever its close code.
pub const SHORT_LIVED: Duration = Duration::from_secs(1);

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
    /// `HTTPS_PROXY`, `NO_PROXY` and the others, for the API calls and the websockets.
    pub proxies: ProxySettings,
    /// `ECS_DISABLE_METRICS`, for the telemetry session.
    pub disable_metrics: bool,
    /// Pings Docker: the telemetry session's runtime check.
    pub docker_ping: Arc<dyn Fn() -> bool + Send + Sync>,
    /// Where the credentials of ECS tasks' IAM roles go (the task metadata server serves them).
    pub role_credentials: CredentialsStore,
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
            .with_timeout(CALL_TIMEOUT)
            .with_proxies(settings.proxies.clone()),
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
        let poll_endpoints = Arc::new(Mutex::new(PollEndpointCache::default()));
        let telemetry = TelemetrySettings {
            cluster: settings.cluster.clone(),
            region: settings.region.clone(),
            credentials: Arc::clone(&settings.credentials),
            docker_version: settings.docker_version.clone(),
            disable_metrics: settings.disable_metrics,
            docker_ping: Arc::clone(&settings.docker_ping),
            proxies: settings.proxies.clone(),
            poll_endpoints: Arc::clone(&poll_endpoints),
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
            .spawn(move || {
                let registration = Registration {
                    registered: registered_sender,
                    poll_endpoints,
                };
                session_thread(settings, client, engine, stop, registration)
            })?;
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

/// What the session thread shares with the telemetry thread.
struct Registration {
    /// Told once this host is registered.
    registered: Sender<()>,
    /// DiscoverPollEndpoint's answer, for both websockets.
    poll_endpoints: Arc<Mutex<PollEndpointCache>>,
}

fn session_thread(
    settings: EcsSettings,
    client: Arc<EcsClient>,
    engine: Arc<dyn EngineHandle>,
    stop: Receiver<()>,
    registration: Registration,
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
                let _ = registration.registered.try_send(());
                break arn;
            }
            Err(error)
                if starts_over(
                    &error,
                    settings.record.get().container_instance_arn.as_deref(),
                ) =>
            {
                log::warn!("ECS: the saved container instance is inactive ({error}); forgetting it and registering as a new instance");
                if let Err(save) = settings
                    .record
                    .update(|record| record.container_instance_arn = None)
                {
                    log::error!("ECS: cannot forget the saved container instance ARN: {save}");
                    if !wait(&stop, super::reporter::jittered(REGISTER_RETRY_MAX)) {
                        return;
                    }
                }
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
        credentials: settings.role_credentials.clone(),
    };
    // ACS sends every task's credentials on the agent's first connection only, as the ECS
    // agent asks (`sendCredentials`).
    let mut first_connection = true;
    let mut connect = |_seq_num: Option<i64>| -> Result<Socket, String> {
        let socket = connect_acs(
            &settings,
            &client,
            &registration.poll_endpoints,
            &container_instance_arn,
            first_connection,
        );
        first_connection &= socket.is_err();
        socket
            .map(|socket| Socket::opened(socket, "ACS"))
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

/// `DiscoverPollEndpoint`'s answer for this instance: the one kept in `cache` while it is
/// fresh, else asked of ECS and kept. ACS and the telemetry session share the cache, so one
/// answer serves both; the cache stays locked during the call, so when both connect at once
/// the second waits for the first's answer instead of asking again.
pub(super) fn poll_endpoints(
    client: &EcsClient,
    cache: &Mutex<PollEndpointCache>,
    cluster: &str,
    container_instance_arn: &str,
) -> Result<PollEndpoints, EcsError> {
    let mut kept = lock(cache);
    if let Some(endpoints) = kept.get(Instant::now()) {
        return Ok(endpoints.clone());
    }
    let answer = client.call(
        "DiscoverPollEndpoint",
        &serde_json::json!({
            "cluster": cluster,
            "containerInstance": container_instance_arn,
        }),
    )?;
    let endpoints = PollEndpoints::from_answer(&answer)?;
    kept.store(endpoints.clone(), Instant::now());
    Ok(endpoints)
}

/// The cache, even if a thread panicked while holding it (it holds plain data).
pub(super) fn lock(cache: &Mutex<PollEndpointCache>) -> MutexGuard<'_, PollEndpointCache> {
    cache.lock().unwrap_or_else(PoisonError::into_inner)
}

fn connect_acs(
    settings: &EcsSettings,
    client: &EcsClient,
    cache: &Mutex<PollEndpointCache>,
    container_instance_arn: &str,
    send_credentials: bool,
) -> Result<AcsSocket, EcsError> {
    let endpoints = poll_endpoints(client, cache, &settings.cluster, container_instance_arn)?;
    let credentials = settings
        .credentials
        .current()
        .map_err(EcsError::Credentials)?;
    let query = AcsQuery {
        cluster_arn: settings.cluster.clone(),
        container_instance_arn: container_instance_arn.to_string(),
        agent_hash: settings.registration.agent_hash.clone(),
        agent_version: crate::VERSION.to_string(),
        docker_version: settings.docker_version.clone(),
        send_credentials,
    };
    let amz_date = super::clock_skew::signing_clock().amz_date();
    let upgrade = SignedUpgrade {
        region: &settings.region,
        credentials: &credentials,
        amz_date: &amz_date,
    };
    websocket::connect(
        &endpoints.acs,
        &query,
        upgrade,
        &settings.proxies,
        CALL_TIMEOUT,
    )
    .inspect_err(|_| lock(cache).forget())
}

/// What the end of a websocket means for the session: [`ConnError::Closed`] reconnects at
/// once, [`ConnError::Failed`] backs off. Close codes 1000, 1001 and 1011 and an abnormal end
/// (1006: no close frame) are the Go agent's "closed for a valid reason"; every other code,
/// and any end within [`SHORT_LIVED`] of the open, backs off. `peer` names the other end in
/// the description (`ACS`, `TCS`). Pure.
pub fn close_outcome(peer: &str, code: Option<u16>, reason: &str, lasted: Duration) -> ConnError {
    let described = match code {
        Some(CLOSE_ABNORMAL) => format!("{peer} connection ended without a close frame ({reason})"),
        Some(code) if reason.is_empty() => format!("{peer} closed the connection with code {code}"),
        Some(code) => format!("{peer} closed the connection with code {code}: {reason}"),
        None => format!("{peer} closed the connection without a close code"),
    };
    if lasted < SHORT_LIVED {
        return ConnError::Failed(format!(
            "{described}, {} ms after it opened",
            lasted.as_millis()
        ));
    }
    match code {
        Some(1000 | 1001 | CLOSE_ABNORMAL | 1011) => ConnError::Closed,
        _ => ConnError::Failed(described),
    }
}

/// The websocket as the session driver reads it (`None` once closed).
pub(super) struct Socket {
    socket: Option<AcsSocket>,
    opened: Instant,
    /// The other end, as its close is described: `ACS` or `TCS`.
    peer: &'static str,
}

impl Socket {
    /// A websocket to `peer` (`ACS`, `TCS`) that just opened.
    pub(super) fn opened(socket: AcsSocket, peer: &'static str) -> Socket {
        Socket {
            socket: Some(socket),
            opened: Instant::now(),
            peer,
        }
    }
}

impl AcsConnection for Socket {
    fn read_text(&mut self, timeout: Duration) -> Result<Option<String>, ConnError> {
        let socket = self.socket.as_mut().ok_or(ConnError::Closed)?;
        socket
            .set_read_timeout(Some(timeout))
            .map_err(|error| ConnError::Failed(error.to_string()))?;
        match socket.read_text() {
            Ok(Received::Text(text)) => Ok(Some(text)),
            Ok(Received::Closed { code, reason }) => {
                self.socket = None;
                Err(close_outcome(
                    self.peer,
                    code,
                    &reason,
                    self.opened.elapsed(),
                ))
            }
            Err(EcsError::ReadTimeout) => Ok(None),
            Err(error) => Err(ConnError::Failed(error.to_string())),
        }
    }

    fn send_text(&mut self, text: &str) -> Result<(), ConnError> {
        let socket = self.socket.as_mut().ok_or(ConnError::Closed)?;
        socket
            .send_text(text)
            .map_err(|error| ConnError::Failed(error.to_string()))
    }

    fn close(&mut self) {
        if let Some(socket) = self.socket.take() {
            socket.close();
        }
    }
}

/// The engine as the ACS session acts on it.
struct EngineTarget {
    engine: Arc<dyn EngineHandle>,
    record: Arc<RecordFile>,
    credentials: CredentialsStore,
}

impl EngineTarget {
    fn owned(&self) -> Vec<(String, crate::task::Task)> {
        self.engine
            .tasks()
            .into_iter()
            .filter_map(|task| ecs_arn(&task).map(|arn| (arn.to_string(), task.clone())))
            .collect()
    }

    /// Puts a payload task's credentials in the store (before the task is accepted, so its
    /// containers never find them missing). A task's credentials are set again each time ECS
    /// sends them: after a restart, its first connection's payload brings every task's. A task
    /// already STOPPED here gets its execution role's only: its task role's were dropped at its
    /// STOPPED and stay dropped.
    fn store_credentials(&self, task: &AcsTask, stopped_here: bool) {
        let roles = [
            (RoleType::TaskApplication, &task.credentials.task_role),
            (RoleType::TaskExecution, &task.credentials.execution_role),
        ];
        for (role, credentials) in roles {
            let Some(identified) = credentials else {
                continue;
            };
            if stopped_here && role == RoleType::TaskApplication {
                continue;
            }
            if let Err(error) = self.credentials.set(
                &task.arn,
                role,
                &identified.credentials_id,
                identified.credentials.clone(),
            ) {
                log::error!(
                    "ECS: task {}: cannot keep its {} credentials: {error}",
                    task.arn,
                    role.as_str()
                );
            }
        }
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
            // A stopping task may still ship its logs with its execution role.
            self.store_credentials(&task, local.known_status == TaskStatus::Stopped);
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
                    let here = find(&task.arn);
                    let stopped_here =
                        here.is_some_and(|(_, local)| local.known_status == TaskStatus::Stopped);
                    self.store_credentials(&task, stopped_here);
                    if here.is_some() {
                        continue;
                    }
                    for warning in &task.warnings {
                        log::warn!("ECS: task {}: {warning}", task.arn);
                    }
                    let source = format!("{ECS_SOURCE_PREFIX}{}", task.arn);
                    let credentials_ids = task.credentials.ids();
                    let submitted = self.engine.submit_with_arn(
                        task.definition,
                        task.arn.clone(),
                        source,
                        credentials_ids,
                    );
                    if submitted.is_err() {
                        // Not here: nothing would ever forget them.
                        self.credentials.forget_task(&task.arn);
                    }
                    match submitted {
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

    /// The ECS agent sets a refresh's credentials only for a task its engine holds, and sends
    /// no acknowledgement otherwise. A STOPPED task's task role credentials are acknowledged and
    /// dropped: they went at its STOPPED.
    fn set_credentials(
        &self,
        task_arn: &str,
        role: RoleType,
        credentials: IdentifiedCredentials,
    ) -> Result<(), String> {
        let owned = self.owned();
        let Some((_, local)) = owned.iter().find(|(arn, _)| arn == task_arn) else {
            return Err(format!("task {task_arn} is not in the task engine"));
        };
        if role == RoleType::TaskApplication && local.known_status == TaskStatus::Stopped {
            // Acknowledged, not kept: a STOPPED task's task role is served no more.
            log::info!(
                "ECS: task {task_arn} is STOPPED: its new task role credentials are not kept"
            );
            return Ok(());
        }
        let expiration = credentials.credentials.expiration.clone();
        self.credentials
            .set(
                task_arn,
                role,
                &credentials.credentials_id,
                credentials.credentials,
            )
            .map_err(|error| error.to_string())?;
        log::info!(
            "ECS: task {task_arn}: new {} credentials, expiring {expiration:?}",
            role.as_str()
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_codes_reconnect_at_once_or_back_off_as_the_go_agent_reads_them() {
        let long = Duration::from_secs(30);
        let table: &[(Option<u16>, Duration, bool)] = &[
            (Some(1000), long, true),
            (Some(1001), long, true),
            (Some(1006), long, true),
            (Some(1011), long, true),
            (Some(1008), long, false),
            (Some(1002), long, false),
            (Some(1009), long, false),
            (Some(4000), long, false),
            (None, long, false),
            // Closed at once: backs off whatever the code.
            (Some(1000), Duration::from_millis(10), false),
            (Some(1006), Duration::ZERO, false),
        ];
        for (code, lasted, prompt) in table {
            let outcome = close_outcome("ACS", *code, "bye", *lasted);
            assert_eq!(
                outcome == ConnError::Closed,
                *prompt,
                "{code:?} after {lasted:?}: {outcome:?}"
            );
        }
        // (peer, code, reason, the description)
        let described = [
            (
                "ACS",
                Some(1008),
                "policy",
                "ACS closed the connection with code 1008: policy",
            ),
            (
                "TCS",
                Some(4000),
                "",
                "TCS closed the connection with code 4000",
            ),
            (
                "TCS",
                None,
                "",
                "TCS closed the connection without a close code",
            ),
        ];
        for (peer, code, reason, expected) in described {
            let ConnError::Failed(message) = close_outcome(peer, code, reason, long) else {
                panic!("{code:?} backs off");
            };
            assert_eq!(message, expected);
        }
        let ConnError::Failed(message) = close_outcome("TCS", Some(1006), "reset", Duration::ZERO)
        else {
            panic!("a 1006 at once backs off");
        };
        assert!(
            message.starts_with("TCS connection ended without a close frame (reset), 0 ms"),
            "{message}"
        );
    }
}
