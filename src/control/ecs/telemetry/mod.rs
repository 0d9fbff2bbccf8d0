//! The ECS telemetry session (TCS), as the ECS agent opens it (`ecs-agent/tcs/`): on its own
//! thread (`ecs-telemetry`), once this host is registered, a second SigV4-signed websocket to
//! `DiscoverPollEndpoint`'s `telemetryEndpoint` (path `ws`, query `agentHash`, `agentVersion`,
//! `cluster`, `containerInstance`, `dockerVersion`) that carries, every 20 s, each ECS task's
//! container CPU and memory (`PublishMetricsRequest`; `ECS_DISABLE_METRICS=true` sends the
//! instance as idle), the health of the containers with a health check
//! (`PublishHealthRequest`: what the console shows and what a service's deployment waits for)
//! and the Docker runtime check (`PublishInstanceStatusRequest`, a ping of Docker run at each
//! publication; the ECS agent runs it on each ACS heartbeat and sends a new result at its next
//! 20 s tick).
//!
//! The timing is [`session::TelemetrySession`] (sans-I/O), the messages are built by the pure
//! functions of [`messages`] and [`publish`], the readings kept in [`window::UsageWindows`]
//! (bounded). This file is the thin part: the loop that performs the session's effects over a
//! connection ([`AcsConnection`], so tests plug in their own), and the real connection: the
//! websocket ACS uses ([`super::websocket::connect_signed`] over `open_signed_websocket`:
//! tungstenite over rustls, through the proxy settings, the upgrade and every message signed
//! with the skew-corrected [`super::clock_skew::signing_clock`]). The telemetry endpoint is the
//! `telemetryEndpoint` of the DiscoverPollEndpoint answer ACS keeps
//! ([`super::poll_endpoint`]), asked for only when none is kept. As in the ECS agent (whose
//! DiscoverTelemetryEndpoint reads the same cache), a failed TCS connect does not forget the
//! answer: ACS's failed connect or the cache's TTL renews it, so a TCS that keeps refusing
//! costs no API calls and never makes ACS ask again.
//! A TCS failure only makes this thread wait and retry: the ACS session, the reporter and the
//! tasks never wait on it.

pub mod messages;
pub mod publish;
pub mod session;
pub mod window;

use super::clock_skew::signing_clock;
use super::connection::{lock, poll_endpoints, Socket};
use super::poll_endpoint::PollEndpointCache;
use super::session_driver::{AcsConnection, ConnError};
use super::websocket::{acs_path, connect_signed, SignedUpgrade};
use super::{sigv4, CredentialChain, EcsClient, EcsError, Endpoint, SIGNING_SERVICE};
use crate::engine::EngineHandle;
use crate::metrics::cgroup::CgroupRoot;
use crate::net::proxy::ProxySettings;
use crate::task::{Millis, Task};
use crossbeam_channel::{Receiver, RecvTimeoutError};
use messages::Identity;
use publish::RuntimeCheck;
use session::{TelemetryEffect, TelemetryInput, TelemetrySession};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use window::{Reading, UsageWindows};

/// The longest one wait lasts, so a stop request is seen within it.
const WAIT_SLICE: Duration = Duration::from_secs(1);
/// Deadline of a connect and then of each read and write.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// What the telemetry session reads from the rest of the agent.
pub trait TelemetrySources {
    /// The cluster and this instance's ARN, once registered.
    fn identity(&self) -> Option<Identity>;
    fn tasks(&self) -> Vec<Task>;
    /// One container's cgroup reading, memory as ECS counts it.
    fn usage(&self, docker_id: &str) -> Reading;
    /// Whether Docker answers a ping (the runtime check).
    fn docker_answers(&self) -> bool;
    fn now_millis(&self) -> Millis;
}

/// What the session's loop keeps between publications.
pub struct Telemetry {
    pub disable_metrics: bool,
    windows: UsageWindows,
    runtime: RuntimeCheck,
    /// xorshift state for message ids.
    random: u64,
}

impl Telemetry {
    pub fn new(disable_metrics: bool, cores: usize, now: Millis, seed: u64) -> Telemetry {
        Telemetry {
            disable_metrics,
            windows: UsageWindows::new(cores),
            runtime: RuntimeCheck::new(now),
            random: seed | 1,
        }
    }

    /// A random version-4 UUID for `messageId` and `requestId` (unique, not secret).
    fn uuid(&mut self) -> String {
        let mut bytes = [0u8; 16];
        for chunk in bytes.chunks_mut(8) {
            self.random ^= self.random << 13;
            self.random ^= self.random >> 7;
            self.random ^= self.random << 17;
            chunk.copy_from_slice(&self.random.to_le_bytes());
        }
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
        let part = |range: std::ops::Range<usize>| hex.get(range).unwrap_or("");
        format!(
            "{}-{}-{}-{}-{}",
            part(0..8),
            part(8..12),
            part(12..16),
            part(16..20),
            part(20..32)
        )
    }

    /// One sampling round over the running containers of ECS's tasks.
    pub fn sample(&mut self, sources: &dyn TelemetrySources, at: Instant) {
        if self.disable_metrics {
            return;
        }
        let readings = publish::sampled_containers(&sources.tasks())
            .into_iter()
            .map(|key| {
                let reading = sources.usage(&key.2);
                (key, reading)
            })
            .collect();
        self.windows.record(readings, at);
    }

    /// The messages of one publication: metrics (idle when nothing is sampled), health,
    /// the runtime check (run now).
    pub fn publication(&mut self, sources: &dyn TelemetrySources) -> Vec<String> {
        let Some(identity) = sources.identity() else {
            return Vec::new();
        };
        let tasks = sources.tasks();
        let now = sources.now_millis();
        let mut frames = Vec::new();
        let idle = self.disable_metrics || publish::sampled_containers(&tasks).is_empty();
        let task_metrics = if idle {
            Vec::new()
        } else {
            publish::task_metrics(&tasks, &mut self.windows)
        };
        // Containers that run but have no full window yet: nothing to say this time (the ECS
        // agent's EmptyMetricsError), not "idle".
        if idle || !task_metrics.is_empty() {
            let id = self.uuid();
            frames.extend(messages::publish_metrics_requests(
                &identity,
                &id,
                &task_metrics,
                now,
            ));
        }
        let id = self.uuid();
        frames.extend(messages::publish_health_requests(
            &identity,
            &id,
            &publish::task_healths(&tasks, now),
            now,
        ));
        self.runtime.record(sources.docker_answers(), now);
        let id = self.uuid();
        frames.push(messages::publish_instance_status_request(
            &identity,
            &id,
            &[self.runtime.status()],
            sources.now_millis(),
        ));
        frames
    }
}

/// Runs the session until `keep_going` says stop (checked at least once a second). `connect`
/// opens the websocket; `wait` pauses while there is none (false: stop).
pub fn run_telemetry<C: AcsConnection>(
    session: &mut TelemetrySession,
    telemetry: &mut Telemetry,
    sources: &dyn TelemetrySources,
    connect: &mut dyn FnMut() -> Result<C, String>,
    wait: &mut dyn FnMut(Duration) -> bool,
    keep_going: &dyn Fn() -> bool,
) {
    let mut connection: Option<C> = None;
    let mut queue: VecDeque<TelemetryEffect> = VecDeque::new();
    while keep_going() {
        queue.extend(session.handle(TelemetryInput::Tick, Instant::now()));
        while let Some(effect) = queue.pop_front() {
            let follow = match effect {
                TelemetryEffect::Connect => {
                    if let Some(mut old) = connection.take() {
                        old.close();
                    }
                    match connect() {
                        Ok(open) => {
                            connection = Some(open);
                            TelemetryInput::Connected
                        }
                        Err(error) => TelemetryInput::ConnectFailed(error),
                    }
                }
                TelemetryEffect::Sample => {
                    telemetry.sample(sources, Instant::now());
                    continue;
                }
                TelemetryEffect::Publish => {
                    let Some(open) = connection.as_mut() else {
                        continue;
                    };
                    let failed = telemetry
                        .publication(sources)
                        .iter()
                        .find_map(|frame| open.send_text(frame).err());
                    match failed {
                        None => continue,
                        Some(ConnError::Closed) => TelemetryInput::Closed,
                        Some(ConnError::Failed(error)) => TelemetryInput::ConnectionError(error),
                    }
                }
                TelemetryEffect::Close => {
                    if let Some(mut open) = connection.take() {
                        open.close();
                    }
                    continue;
                }
                TelemetryEffect::Log(level, message) => {
                    log::log!(level, "{message}");
                    continue;
                }
            };
            queue.extend(session.handle(follow, Instant::now()));
        }
        // At least a millisecond: a socket refuses a zero read timeout, and a deadline that
        // passed while publishing is handled by the next tick anyway.
        let timeout = session
            .next_deadline()
            .saturating_duration_since(Instant::now())
            .clamp(Duration::from_millis(1), WAIT_SLICE);
        let Some(open) = connection.as_mut() else {
            if !wait(timeout) {
                return;
            }
            continue;
        };
        let input = match open.read_text(timeout) {
            Ok(None) => continue,
            Ok(Some(text)) => match messages::read_server_message(&text) {
                Ok(message) => TelemetryInput::Message(message),
                Err(error) => {
                    log::debug!(
                        "ECS telemetry: ignoring a frame that is not a TCS message: {error}"
                    );
                    continue;
                }
            },
            Err(ConnError::Closed) => {
                connection = None;
                TelemetryInput::Closed
            }
            Err(ConnError::Failed(error)) => TelemetryInput::ConnectionError(error),
        };
        queue.extend(session.handle(input, Instant::now()));
    }
    if let Some(mut open) = connection {
        open.close();
    }
}

/// What the `ecs-telemetry` thread needs, built by the ECS connection.
pub struct TelemetrySettings {
    pub cluster: String,
    pub region: String,
    pub credentials: Arc<CredentialChain>,
    pub docker_version: Option<String>,
    pub disable_metrics: bool,
    /// Pings Docker (the runtime check): true when it answered.
    pub docker_ping: Arc<dyn Fn() -> bool + Send + Sync>,
    /// `HTTPS_PROXY`, `NO_PROXY` and the others, as for ACS.
    pub proxies: ProxySettings,
    /// DiscoverPollEndpoint's answer, shared with the ACS session.
    pub poll_endpoints: Arc<Mutex<PollEndpointCache>>,
}

/// The agent as the telemetry session reads it.
struct AgentSources {
    cluster: String,
    engine: Arc<dyn EngineHandle>,
    cgroups: CgroupRoot,
    docker_ping: Arc<dyn Fn() -> bool + Send + Sync>,
}

impl TelemetrySources for AgentSources {
    fn identity(&self) -> Option<Identity> {
        Some(Identity {
            cluster: self.cluster.clone(),
            container_instance: self.engine.container_instance_arn()?,
        })
    }
    fn tasks(&self) -> Vec<Task> {
        self.engine.tasks()
    }
    fn usage(&self, docker_id: &str) -> Reading {
        let layouts = self.cgroups.present_layouts();
        let usage = self.cgroups.container_usage_for_ecs(&layouts, docker_id);
        Reading {
            cpu_seconds: usage.cpu_seconds,
            memory_bytes: usage.memory_bytes,
        }
    }
    fn docker_answers(&self) -> bool {
        (self.docker_ping)()
    }
    fn now_millis(&self) -> Millis {
        crate::clock::now_millis()
    }
}

/// The body of the `ecs-telemetry` thread: waits for the registration (`registered`), then
/// holds the session until `stop` is dropped.
pub fn telemetry_thread(
    settings: TelemetrySettings,
    client: Arc<EcsClient>,
    engine: Arc<dyn EngineHandle>,
    registered: Receiver<()>,
    stop: Receiver<()>,
) {
    crossbeam_channel::select! {
        recv(registered) -> got => if got.is_err() { return },
        recv(stop) -> _ => return,
    }
    let seed = crate::clock::now_millis() ^ u64::from(std::process::id()) << 32;
    let mut session = TelemetrySession::new(Instant::now(), seed);
    let mut telemetry = Telemetry::new(
        settings.disable_metrics,
        usize::try_from(crate::host::cpu_cores()).unwrap_or(1),
        crate::clock::now_millis(),
        seed.rotate_left(17),
    );
    let sources = AgentSources {
        cluster: settings.cluster.clone(),
        engine: Arc::clone(&engine),
        cgroups: CgroupRoot::default(),
        docker_ping: Arc::clone(&settings.docker_ping),
    };
    let mut connect = || -> Result<TelemetrySocket, String> {
        let instance = engine
            .container_instance_arn()
            .ok_or("not registered yet")?;
        let url = telemetry_endpoint(&client, &settings, &instance).map_err(|e| e.to_string())?;
        let socket = open(&settings, &url, &instance).map_err(|error| error.to_string())?;
        log::info!("ECS telemetry: connected to {url}");
        Ok(socket)
    };
    let mut wait =
        |pause: Duration| matches!(stop.recv_timeout(pause), Err(RecvTimeoutError::Timeout));
    let keep_going = || matches!(stop.try_recv(), Err(crossbeam_channel::TryRecvError::Empty));
    run_telemetry(
        &mut session,
        &mut telemetry,
        &sources,
        &mut connect,
        &mut wait,
        &keep_going,
    );
}

/// `DiscoverPollEndpoint`'s `telemetryEndpoint`: the kept answer's, else a new answer's (an
/// answer without one is not kept, so the next try asks again).
fn telemetry_endpoint(
    client: &EcsClient,
    settings: &TelemetrySettings,
    instance: &str,
) -> Result<String, EcsError> {
    let endpoints = poll_endpoints(
        client,
        &settings.poll_endpoints,
        &settings.cluster,
        instance,
    )?;
    endpoints.telemetry.ok_or_else(|| {
        lock(&settings.poll_endpoints).forget();
        EcsError::Protocol("DiscoverPollEndpoint answered without a telemetryEndpoint".into())
    })
}

/// The TCS query, sorted by name as the ECS agent encodes it.
pub fn telemetry_query(
    cluster: &str,
    container_instance: &str,
    docker_version: Option<&str>,
) -> Vec<(&'static str, String)> {
    let mut query = vec![
        ("agentHash", String::new()),
        ("agentVersion", crate::VERSION.to_string()),
        ("cluster", cluster.to_string()),
        ("containerInstance", container_instance.to_string()),
    ];
    if let Some(version) = docker_version.filter(|version| !version.is_empty()) {
        query.push(("dockerVersion", version.to_string()));
    }
    query
}

fn open(
    settings: &TelemetrySettings,
    url: &str,
    instance: &str,
) -> Result<TelemetrySocket, EcsError> {
    let endpoint = Endpoint::parse(url).map_err(EcsError::Config)?;
    let query = telemetry_query(
        &settings.cluster,
        instance,
        settings.docker_version.as_deref(),
    );
    let credentials = settings
        .credentials
        .current()
        .map_err(EcsError::Credentials)?;
    let amz_date = signing_clock().amz_date();
    let upgrade = SignedUpgrade {
        region: &settings.region,
        credentials: &credentials,
        amz_date: &amz_date,
    };
    let socket = connect_signed(url, &query, upgrade, &settings.proxies, CONNECT_TIMEOUT).map_err(
        |error| match error {
            EcsError::Unreachable(message) => EcsError::Unreachable(format!("TCS: {message}")),
            other => other,
        },
    )?;
    Ok(TelemetrySocket {
        socket: Socket::opened(socket, "TCS"),
        host: endpoint.host_header(),
        path: acs_path(&endpoint.path),
        query,
        region: settings.region.clone(),
        credentials: Arc::clone(&settings.credentials),
    })
}

/// The TCS websocket: every message sent goes behind its own signed headers.
struct TelemetrySocket {
    socket: Socket,
    host: String,
    path: String,
    query: Vec<(&'static str, String)>,
    region: String,
    credentials: Arc<CredentialChain>,
}

impl AcsConnection for TelemetrySocket {
    fn read_text(&mut self, timeout: Duration) -> Result<Option<String>, ConnError> {
        self.socket.read_text(timeout)
    }

    fn send_text(&mut self, text: &str) -> Result<(), ConnError> {
        let credentials = self
            .credentials
            .current()
            .map_err(|error| ConnError::Failed(format!("no credentials to sign with: {error}")))?;
        let pairs: Vec<(&str, &str)> = self
            .query
            .iter()
            .map(|(name, value)| (*name, value.as_str()))
            .collect();
        let signed = sigv4::sign(
            &sigv4::SignInput {
                method: "GET",
                path: &self.path,
                query: &pairs,
                headers: &[("Host", &self.host)],
                payload: text.as_bytes(),
            },
            &credentials,
            &self.region,
            SIGNING_SERVICE,
            &signing_clock().amz_date(),
        );
        let mut headers: Vec<(&str, &str)> = signed
            .headers
            .iter()
            .map(|(name, value)| (*name, value.as_str()))
            .collect();
        headers.push(("Host", &self.host));
        crate::sorting::sort_by(&mut headers, |left, right| left.0.cmp(right.0));
        if headers
            .iter()
            .any(|(_, value)| value.contains(['\r', '\n']))
        {
            return Err(ConnError::Failed(
                "a signed header would contain a line break".into(),
            ));
        }
        self.socket
            .send_text(&messages::signed_frame(&headers, text))
    }

    fn close(&mut self) {
        self.socket.close();
    }
}

#[cfg(test)]
mod tests;
