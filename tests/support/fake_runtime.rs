//! A scripted fake of `ContainerRuntime` for engine tests. Never compiled into the binary.
//!
//! It keeps containers and images in memory, records every call in order, and behaves like
//! Docker where the engine depends on it: create needs the image, start and stop emit Docker-like
//! events (`create`, `start`, `kill`, `die` with `exitCode`, `stop`, `destroy`) on every
//! subscribed stream, stop of a stopped container succeeds, unknown ids give `NoSuchContainer`.
//! A test can script the next call for one subject to fail (with no effect, or after its effect
//! happened, as a start that timed out but ran), to panic, hold a call until it releases it, make a
//! container exit with a code, report health, restart a container behind the engine's back,
//! drop or buffer-and-reorder events, and break the event streams.
//!
//! Calls on containers are keyed by the container's ECS name (its
//! `com.amazonaws.ecs.container-name` label); pulls and image inspections by image.

#![allow(dead_code)]

use crossbeam_channel::{unbounded, Receiver, Sender};
use deckhand::runtime::{
    ContainerInfo, ContainerRuntime, ContainerState, ContainerSummary, CreateContainer,
    CreateVolume, EventFilter, EventStream, HealthState, ImageInfo, ImageSummary, RegistryAuth,
    RuntimeError, RuntimeEvent, StreamCanceller, VolumeInfo,
};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub const LABEL_CONTAINER_NAME: &str = "com.amazonaws.ecs.container-name";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Pull,
    InspectImage,
    Create,
    Start,
    Stop,
    Inspect,
    Remove,
    List,
    Events,
    Ping,
    RemoveVolume,
    CreateVolume,
    InspectVolume,
    ListImages,
    RemoveImage,
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// Position in the order of all calls, from 0.
    pub order: u64,
    pub op: Op,
    /// ECS container name, image, or volume name.
    pub subject: String,
    pub docker_id: Option<String>,
    /// Stop grace, for stops.
    pub grace: Option<Duration>,
    /// The create request, for creates.
    pub spec: Option<CreateContainer>,
    /// Wall-clock time the call began.
    pub at: SystemTime,
}

/// What the next call for a subject does instead of succeeding plainly.
#[derive(Debug, Clone)]
pub enum Script {
    /// Fails with no effect.
    Fail(RuntimeError),
    /// Has its effect, then reports the error (a start that timed out but happened).
    EffectThenFail(RuntimeError),
    /// Blocks until the gate is released, then proceeds normally.
    Hold(u64),
    /// Panics with this message, with no effect (deckhand choking on an answer it did not
    /// expect, inside the call).
    Panic(String),
}

/// A held call's release handle.
#[derive(Clone)]
pub struct Gate {
    id: u64,
    fake: Arc<FakeRuntime>,
}

impl Gate {
    pub fn release(&self) {
        let mut state = self.fake.state();
        state.released_gates.insert(self.id);
        drop(state);
        self.fake.changed.notify_all();
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FakeStatus {
    Created,
    Running,
    Exited,
}

/// A container as the fake holds it.
#[derive(Debug, Clone)]
pub struct FakeContainer {
    pub id: String,
    pub name: String,
    pub ecs_name: String,
    pub spec: CreateContainer,
    pub status: FakeStatus,
    pub exit_code: i64,
    pub health: Option<String>,
    /// Logical clock values (order of all state changes), 0 = never.
    pub created_tick: u64,
    pub started_tick: u64,
    pub finished_tick: u64,
    pub created_at: SystemTime,
    pub started_at: Option<SystemTime>,
    pub finished_at: Option<SystemTime>,
    pub start_count: u32,
}

#[derive(Default)]
struct FakeState {
    calls: Vec<Call>,
    /// Each pull's image and registry credentials.
    pull_auths: Vec<(String, Option<RegistryAuth>)>,
    scripts: HashMap<(Op, String), VecDeque<Script>>,
    next_gate: u64,
    released_gates: HashSet<u64>,
    images: HashSet<String>,
    /// When each image was built (Unix seconds); 0 when not set.
    image_created: HashMap<String, i64>,
    /// What `docker_root_dir` answers.
    docker_root_dir: Option<String>,
    /// Named volumes by name.
    volumes: BTreeMap<String, VolumeInfo>,
    containers: BTreeMap<String, FakeContainer>,
    next_id: u64,
    tick: u64,
    subscribers: Vec<(EventFilter, Sender<RuntimeEvent>)>,
    drop_events: bool,
    buffer_events: bool,
    buffered: Vec<RuntimeEvent>,
    docker_down: bool,
    /// Exit code a stop gives a running container (SIGTERM honoured: 143).
    stop_exit_codes: HashMap<String, i64>,
}

pub struct FakeRuntime {
    state: Mutex<FakeState>,
    changed: Condvar,
}

fn matches_filter(filter: &EventFilter, event: &RuntimeEvent) -> bool {
    let labels_match = filter
        .labels
        .iter()
        .all(|label| match label.split_once('=') {
            Some((key, value)) => event.attributes.get(key).map(String::as_str) == Some(value),
            None => event.attributes.contains_key(label),
        });
    let action_matches = filter.actions.is_empty()
        || filter.actions.iter().any(|action| {
            event.action == *action
                || (action == "health_status" && event.action.starts_with("health_status"))
        });
    labels_match && action_matches
}

impl FakeState {
    fn tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    fn emit(&mut self, container_id: &str, action: &str, extra: &[(&str, String)]) {
        let Some(container) = self.containers.get(container_id) else {
            return;
        };
        let mut attributes = container.spec.labels.clone();
        attributes.insert("name".to_string(), container.name.clone());
        attributes.insert("image".to_string(), container.spec.image.clone());
        for (key, value) in extra {
            attributes.insert(key.to_string(), value.clone());
        }
        let event = RuntimeEvent {
            id: container_id.to_string(),
            action: action.to_string(),
            attributes,
            time_nano: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|since| i64::try_from(since.as_nanos()).unwrap_or(i64::MAX))
                .unwrap_or(0),
        };
        if self.drop_events {
            return;
        }
        if self.buffer_events {
            self.buffered.push(event);
            return;
        }
        self.deliver(event);
    }

    fn deliver(&mut self, event: RuntimeEvent) {
        self.subscribers.retain(|(filter, sender)| {
            if matches_filter(filter, &event) {
                sender.send(event.clone()).is_ok()
            } else {
                true
            }
        });
    }

    fn find_by_ecs_name(&self, ecs_name: &str) -> Option<String> {
        self.containers
            .values()
            .filter(|container| container.ecs_name == ecs_name)
            .max_by_key(|container| container.id.clone())
            .map(|container| container.id.clone())
    }

    fn find(&self, id_or_name: &str) -> Option<String> {
        if self.containers.contains_key(id_or_name) {
            return Some(id_or_name.to_string());
        }
        self.containers
            .values()
            .find(|container| container.name == id_or_name)
            .map(|container| container.id.clone())
    }

    fn stop_running(&mut self, id: &str, exit_code: i64) {
        let tick = self.tick();
        if let Some(container) = self.containers.get_mut(id) {
            container.status = FakeStatus::Exited;
            container.exit_code = exit_code;
            container.finished_tick = tick;
            container.finished_at = Some(SystemTime::now());
        }
        self.emit(id, "die", &[("exitCode", exit_code.to_string())]);
    }
}

/// `2024-01-01T00:00:00.123456789Z` for a time after the epoch (Howard Hinnant's civil-from-days).
fn rfc3339(at: SystemTime) -> String {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let seconds = since.as_secs() as i64;
    let (days, rest) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:09}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60,
        since.subsec_nanos()
    )
}

fn no_such_container(id: &str) -> RuntimeError {
    RuntimeError::NoSuchContainer {
        message: format!("No such container: {id}"),
    }
}

impl FakeRuntime {
    pub fn new() -> Arc<FakeRuntime> {
        Arc::new(FakeRuntime {
            state: Mutex::new(FakeState::default()),
            changed: Condvar::new(),
        })
    }

    fn state(&self) -> MutexGuard<'_, FakeState> {
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    // ---- scripting -----------------------------------------------------------------------

    pub fn add_image(&self, image: &str) {
        self.state().images.insert(image.to_string());
    }

    /// Each pull's image and the registry credentials it was given, in order.
    pub fn pull_auths(&self) -> Vec<(String, Option<RegistryAuth>)> {
        self.state().pull_auths.clone()
    }

    pub fn has_image(&self, image: &str) -> bool {
        self.state().images.contains(image)
    }

    /// Sets when `image` was built (Unix seconds), for untracked cleanup's age.
    pub fn set_image_created(&self, image: &str, created: i64) {
        self.state()
            .image_created
            .insert(image.to_string(), created);
    }

    /// Sets what `docker_root_dir` answers (a directory whose file system image cleanup
    /// watches).
    pub fn set_docker_root_dir(&self, dir: Option<&str>) {
        self.state().docker_root_dir = dir.map(str::to_string);
    }

    /// Puts a volume in the fake as if someone had made it outside deckhand.
    pub fn add_volume(&self, volume: VolumeInfo) {
        self.state().volumes.insert(volume.name.clone(), volume);
    }

    /// The named volume, as the fake holds it.
    pub fn volume(&self, name: &str) -> Option<VolumeInfo> {
        self.state().volumes.get(name).cloned()
    }

    /// The names of every volume the fake holds.
    pub fn volume_names(&self) -> Vec<String> {
        self.state().volumes.keys().cloned().collect()
    }

    pub fn script(&self, op: Op, subject: &str, script: Script) {
        self.state()
            .scripts
            .entry((op, subject.to_string()))
            .or_default()
            .push_back(script);
    }

    pub fn fail_next(&self, op: Op, subject: &str, error: RuntimeError) {
        self.script(op, subject, Script::Fail(error));
    }

    /// The next `times` calls of `op` on `subject` panic with `message`.
    pub fn panic_next(&self, op: Op, subject: &str, times: usize, message: &str) {
        for _ in 0..times {
            self.script(op, subject, Script::Panic(message.to_string()));
        }
    }

    /// The next `op` on `subject` blocks until the returned gate is released.
    pub fn hold_next(self: &Arc<Self>, op: Op, subject: &str) -> Gate {
        let id = {
            let mut state = self.state();
            state.next_gate += 1;
            state.next_gate
        };
        self.script(op, subject, Script::Hold(id));
        Gate {
            id,
            fake: Arc::clone(self),
        }
    }

    /// Exit code a stop gives this container (default 143).
    pub fn set_stop_exit_code(&self, ecs_name: &str, exit_code: i64) {
        self.state()
            .stop_exit_codes
            .insert(ecs_name.to_string(), exit_code);
    }

    /// Makes a running container exit with `exit_code` (emits `die`).
    pub fn exit(&self, ecs_name: &str, exit_code: i64) {
        let mut state = self.state();
        let id = state
            .find_by_ecs_name(ecs_name)
            .unwrap_or_else(|| panic!("the fake has no container {ecs_name}"));
        state.stop_running(&id, exit_code);
        drop(state);
        self.changed.notify_all();
    }

    /// Reports a health status (`healthy`, `unhealthy`) for a container.
    pub fn set_health(&self, ecs_name: &str, health: &str) {
        let mut state = self.state();
        let id = state
            .find_by_ecs_name(ecs_name)
            .unwrap_or_else(|| panic!("the fake has no container {ecs_name}"));
        if let Some(container) = state.containers.get_mut(&id) {
            container.health = Some(health.to_string());
        }
        state.emit(&id, &format!("health_status: {health}"), &[]);
    }

    /// Starts a stopped container behind the engine's back (emits `start`).
    pub fn restart_behind_the_engines_back(&self, ecs_name: &str) {
        let mut state = self.state();
        let id = state
            .find_by_ecs_name(ecs_name)
            .unwrap_or_else(|| panic!("the fake has no container {ecs_name}"));
        let tick = state.tick();
        if let Some(container) = state.containers.get_mut(&id) {
            container.status = FakeStatus::Running;
            container.started_tick = tick;
            container.started_at = Some(SystemTime::now());
            container.start_count += 1;
        }
        state.emit(&id, "start", &[]);
    }

    /// Events are silently lost while set (a missed `die`).
    pub fn set_drop_events(&self, drop_events: bool) {
        self.state().drop_events = drop_events;
    }

    /// Buffers events until [`FakeRuntime::flush_events`].
    pub fn buffer_events(&self) {
        self.state().buffer_events = true;
    }

    /// Delivers buffered events, in reverse order when `reverse`.
    pub fn flush_events(&self, reverse: bool) {
        let mut state = self.state();
        state.buffer_events = false;
        let mut buffered = std::mem::take(&mut state.buffered);
        if reverse {
            buffered.reverse();
        }
        for event in buffered {
            state.deliver(event);
        }
    }

    /// Ends every event stream (Docker restarted or the connection broke).
    pub fn break_event_streams(&self) {
        self.state().subscribers.clear();
    }

    pub fn set_docker_down(&self, down: bool) {
        self.state().docker_down = down;
    }

    // ---- observation ---------------------------------------------------------------------

    pub fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    pub fn calls_of(&self, op: Op) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|call| call.op == op)
            .collect()
    }

    pub fn count(&self, op: Op, subject: &str) -> usize {
        self.state()
            .calls
            .iter()
            .filter(|call| call.op == op && call.subject == subject)
            .count()
    }

    /// Waits until at least `count` calls of `op` on `subject` were made.
    pub fn wait_for_calls(
        &self,
        op: Op,
        subject: &str,
        count: usize,
        timeout: Duration,
    ) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let mut state = self.state();
        loop {
            let seen = state
                .calls
                .iter()
                .filter(|call| call.op == op && call.subject == subject)
                .count();
            if seen >= count {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(format!(
                    "waited {timeout:?} for {count} {op:?} call(s) on {subject}, saw {seen}; calls: {:?}",
                    state.calls.iter().map(|c| (c.op, c.subject.clone())).collect::<Vec<_>>()
                ));
            }
            state = self
                .changed
                .wait_timeout(state, deadline - now)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|poison| poison.into_inner().0);
        }
    }

    /// Waits until `condition` holds (checked after every call and scripted change).
    pub fn wait_for(
        &self,
        timeout: Duration,
        condition: impl Fn(&FakeRuntime) -> bool,
    ) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let mut state = self.state();
        loop {
            drop(state);
            if condition(self) {
                return Ok(());
            }
            state = self.state();
            let now = Instant::now();
            if now >= deadline {
                return Err(format!("condition not met within {timeout:?}"));
            }
            // Short bounded waits: a change between the check and the wait is seen next round.
            state = self
                .changed
                .wait_timeout(state, (deadline - now).min(Duration::from_millis(50)))
                .map(|(guard, _)| guard)
                .unwrap_or_else(|poison| poison.into_inner().0);
        }
    }

    pub fn container(&self, ecs_name: &str) -> Option<FakeContainer> {
        let state = self.state();
        let id = state.find_by_ecs_name(ecs_name)?;
        state.containers.get(&id).cloned()
    }

    pub fn containers(&self) -> Vec<FakeContainer> {
        self.state().containers.values().cloned().collect()
    }

    // ---- the call path -------------------------------------------------------------------

    /// Records a call, then applies its script: `Ok(None)` proceed, `Ok(Some(e))` proceed and
    /// fail with `e` afterwards, `Err(e)` fail now.
    fn begin(
        &self,
        op: Op,
        subject: &str,
        docker_id: Option<&str>,
        grace: Option<Duration>,
        spec: Option<&CreateContainer>,
    ) -> Result<Option<RuntimeError>, RuntimeError> {
        let mut state = self.state();
        let order = state.calls.len() as u64;
        state.calls.push(Call {
            order,
            op,
            subject: subject.to_string(),
            docker_id: docker_id.map(str::to_string),
            grace,
            spec: spec.cloned(),
            at: SystemTime::now(),
        });
        self.changed.notify_all();
        if state.docker_down && op != Op::Events {
            return Err(RuntimeError::Unreachable {
                message: "connection refused".to_string(),
            });
        }
        let script = state
            .scripts
            .get_mut(&(op, subject.to_string()))
            .and_then(VecDeque::pop_front);
        match script {
            None => Ok(None),
            Some(Script::Fail(error)) => Err(error),
            Some(Script::EffectThenFail(error)) => Ok(Some(error)),
            Some(Script::Panic(message)) => {
                // Not while holding the lock: the fake stays usable after the panic.
                drop(state);
                self.changed.notify_all();
                panic!("{message}");
            }
            Some(Script::Hold(gate)) => {
                while !state.released_gates.contains(&gate) {
                    state = self
                        .changed
                        .wait(state)
                        .unwrap_or_else(|poison| poison.into_inner());
                }
                Ok(None)
            }
        }
    }

    fn ecs_name_of(&self, id: &str) -> String {
        let state = self.state();
        state
            .find(id)
            .and_then(|id| state.containers.get(&id))
            .map(|container| container.ecs_name.clone())
            .unwrap_or_else(|| id.to_string())
    }

    fn finish(&self, after: Option<RuntimeError>) -> Result<(), RuntimeError> {
        self.changed.notify_all();
        match after {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

impl ContainerRuntime for FakeRuntime {
    fn pull_image(&self, image: &str, auth: Option<&RegistryAuth>) -> Result<(), RuntimeError> {
        self.state()
            .pull_auths
            .push((image.to_string(), auth.cloned()));
        let after = self.begin(Op::Pull, image, None, None, None)?;
        self.state().images.insert(image.to_string());
        self.finish(after)
    }

    fn inspect_image(&self, image: &str) -> Result<ImageInfo, RuntimeError> {
        self.begin(Op::InspectImage, image, None, None, None)?;
        if self.has_image(image) {
            Ok(ImageInfo {
                id: format!("sha256:{image}"),
                repo_tags: vec![image.to_string()],
            })
        } else {
            Err(RuntimeError::NoSuchImage {
                message: format!("No such image: {image}"),
            })
        }
    }

    fn create_container(&self, spec: &CreateContainer) -> Result<String, RuntimeError> {
        let ecs_name = spec
            .labels
            .get(LABEL_CONTAINER_NAME)
            .cloned()
            .unwrap_or_else(|| spec.name.clone());
        let after = self.begin(Op::Create, &ecs_name, None, None, Some(spec))?;
        let mut state = self.state();
        if !state.images.contains(&spec.image) {
            return Err(RuntimeError::NoSuchImage {
                message: format!("No such image: {}", spec.image),
            });
        }
        if state.containers.values().any(|c| c.name == spec.name) {
            return Err(RuntimeError::Conflict {
                message: format!("The container name \"/{}\" is already in use", spec.name),
            });
        }
        state.next_id += 1;
        let id = format!("{:064x}", state.next_id);
        let created_tick = state.tick();
        state.containers.insert(
            id.clone(),
            FakeContainer {
                id: id.clone(),
                name: spec.name.clone(),
                ecs_name,
                spec: spec.clone(),
                status: FakeStatus::Created,
                exit_code: 0,
                health: None,
                created_tick,
                started_tick: 0,
                finished_tick: 0,
                created_at: SystemTime::now(),
                started_at: None,
                finished_at: None,
                start_count: 0,
            },
        );
        state.emit(&id, "create", &[]);
        drop(state);
        self.finish(after).map(|()| id)
    }

    fn start_container(&self, id: &str) -> Result<(), RuntimeError> {
        let subject = self.ecs_name_of(id);
        let after = self.begin(Op::Start, &subject, Some(id), None, None)?;
        let mut state = self.state();
        let Some(key) = state.find(id) else {
            return Err(no_such_container(id));
        };
        let tick = state.tick();
        let container = state.containers.get_mut(&key).expect("found above");
        if container.status != FakeStatus::Running {
            container.status = FakeStatus::Running;
            container.started_tick = tick;
            container.started_at = Some(SystemTime::now());
            container.start_count += 1;
            state.emit(&key, "start", &[]);
        }
        drop(state);
        self.finish(after)
    }

    fn stop_container(&self, id: &str, grace: Duration) -> Result<(), RuntimeError> {
        let subject = self.ecs_name_of(id);
        let after = self.begin(Op::Stop, &subject, Some(id), Some(grace), None)?;
        let mut state = self.state();
        let Some(key) = state.find(id) else {
            return Err(no_such_container(id));
        };
        let running = state.containers[&key].status == FakeStatus::Running;
        if running {
            let exit_code = state.stop_exit_codes.get(&subject).copied().unwrap_or(143);
            state.emit(&key, "kill", &[("signal", "15".to_string())]);
            state.stop_running(&key, exit_code);
            state.emit(&key, "stop", &[]);
        }
        drop(state);
        self.finish(after)
    }

    /// A stats object naming the container (not scripted: no engine decision depends on it).
    fn container_stats(&self, id: &str) -> Result<serde_json::Value, RuntimeError> {
        let state = self.state();
        let Some(key) = state.find(id) else {
            return Err(no_such_container(id));
        };
        let container = &state.containers[&key];
        Ok(serde_json::json!({
            "id": container.id,
            "name": format!("/{}", container.name),
            "memory_stats": {"usage": 4096},
        }))
    }

    /// A short canned log in Docker's framing: one stdout and one stderr line naming the
    /// container (not scripted: no engine decision depends on it; options are ignored).
    fn container_logs(
        &self,
        id: &str,
        _options: &deckhand::runtime::LogOptions,
    ) -> Result<deckhand::runtime::LogStream, RuntimeError> {
        let state = self.state();
        let Some(key) = state.find(id) else {
            return Err(no_such_container(id));
        };
        let name = state.containers[&key].name.clone();
        let mut bytes = Vec::new();
        for (stream, text) in [(1u8, format!("{name} out\n")), (2, format!("{name} err\n"))] {
            bytes.extend_from_slice(&[stream, 0, 0, 0]);
            bytes.extend_from_slice(&(text.len() as u32).to_be_bytes());
            bytes.extend_from_slice(text.as_bytes());
        }
        Ok(deckhand::runtime::LogStream {
            reader: Box::new(std::io::Cursor::new(bytes)),
            close: Box::new(|| {}),
        })
    }

    /// The address Docker's default bridge gateway usually has.
    fn bridge_gateway(&self) -> Result<Option<std::net::Ipv4Addr>, RuntimeError> {
        Ok(Some(std::net::Ipv4Addr::new(172, 17, 0, 1)))
    }

    fn inspect_container(&self, id_or_name: &str) -> Result<ContainerInfo, RuntimeError> {
        let subject = self.ecs_name_of(id_or_name);
        self.begin(Op::Inspect, &subject, Some(id_or_name), None, None)?;
        let state = self.state();
        let Some(key) = state.find(id_or_name) else {
            return Err(no_such_container(id_or_name));
        };
        let container = &state.containers[&key];
        let time = |at: Option<SystemTime>| match at {
            None => "0001-01-01T00:00:00Z".to_string(),
            Some(at) => rfc3339(at),
        };
        Ok(ContainerInfo {
            id: container.id.clone(),
            name: container.name.clone(),
            image: container.spec.image.clone(),
            image_id: format!("sha256:{}", container.spec.image),
            created: time(Some(container.created_at)),
            labels: container.spec.labels.clone(),
            state: ContainerState {
                status: match container.status {
                    FakeStatus::Created => "created",
                    FakeStatus::Running => "running",
                    FakeStatus::Exited => "exited",
                }
                .to_string(),
                running: container.status == FakeStatus::Running,
                dead: false,
                oom_killed: false,
                exit_code: container.exit_code,
                error: String::new(),
                started_at: time(container.started_at),
                finished_at: time(container.finished_at),
                health: container.health.as_ref().map(|status| HealthState {
                    status: status.clone(),
                    failing_streak: 0,
                    last_output: None,
                    last_exit_code: None,
                }),
            },
            ports: container.spec.port_bindings.clone(),
            networks: Vec::new(),
            mounts: Vec::new(),
        })
    }

    fn remove_container(&self, id: &str, _volumes: bool) -> Result<(), RuntimeError> {
        let subject = self.ecs_name_of(id);
        let after = self.begin(Op::Remove, &subject, Some(id), None, None)?;
        let mut state = self.state();
        let Some(key) = state.find(id) else {
            return Err(no_such_container(id));
        };
        state.emit(&key, "destroy", &[]);
        state.containers.remove(&key);
        drop(state);
        self.finish(after)
    }

    fn list_containers(
        &self,
        label_filters: &[String],
    ) -> Result<Vec<ContainerSummary>, RuntimeError> {
        self.begin(Op::List, "", None, None, None)?;
        let state = self.state();
        Ok(state
            .containers
            .values()
            .filter(|container| {
                label_filters
                    .iter()
                    .all(|filter| match filter.split_once('=') {
                        Some((key, value)) => {
                            container.spec.labels.get(key).map(String::as_str) == Some(value)
                        }
                        None => container.spec.labels.contains_key(filter),
                    })
            })
            .map(|container| ContainerSummary {
                id: container.id.clone(),
                name: container.name.clone(),
                image: container.spec.image.clone(),
                state: format!("{:?}", container.status).to_lowercase(),
                labels: container.spec.labels.clone(),
            })
            .collect())
    }

    fn events(&self, filter: &EventFilter) -> Result<Box<dyn EventStream>, RuntimeError> {
        self.begin(Op::Events, "", None, None, None)?;
        let mut state = self.state();
        if state.docker_down {
            return Err(RuntimeError::Unreachable {
                message: "connection refused".to_string(),
            });
        }
        let (sender, receiver) = unbounded();
        state.subscribers.push((filter.clone(), sender));
        let (cancel_sender, cancel_receiver) = unbounded();
        Ok(Box::new(FakeEventStream {
            events: receiver,
            cancelled: cancel_receiver,
            cancel: cancel_sender,
        }))
    }

    fn ping(&self) -> Result<(), RuntimeError> {
        self.begin(Op::Ping, "", None, None, None).map(|_| ())
    }

    fn remove_volume(&self, name: &str) -> Result<(), RuntimeError> {
        let after = self.begin(Op::RemoveVolume, name, None, None, None)?;
        self.state().volumes.remove(name);
        self.finish(after)
    }

    /// Docker's rule: a name that exists already is left as it is.
    fn create_volume(&self, spec: &CreateVolume) -> Result<(), RuntimeError> {
        let after = self.begin(Op::CreateVolume, &spec.name, None, None, None)?;
        self.state()
            .volumes
            .entry(spec.name.clone())
            .or_insert_with(|| VolumeInfo {
                name: spec.name.clone(),
                driver: spec.driver.clone(),
                options: spec.driver_opts.clone(),
                labels: spec.labels.clone(),
            });
        self.finish(after)
    }

    /// Each image name is an image of its own, id `sha256:<name>`, 1000 bytes.
    fn list_images(&self) -> Result<Vec<ImageSummary>, RuntimeError> {
        self.begin(Op::ListImages, "", None, None, None)?;
        let state = self.state();
        let mut images: Vec<ImageSummary> = state
            .images
            .iter()
            .map(|image| ImageSummary {
                id: format!("sha256:{image}"),
                repo_tags: vec![image.clone()],
                repo_digests: Vec::new(),
                size: 1000,
                created: state.image_created.get(image).copied().unwrap_or(0),
            })
            .collect();
        images.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(images)
    }

    /// By name or id; a container of the image (any status) makes it a conflict, as in Docker.
    fn remove_image(&self, name: &str) -> Result<(), RuntimeError> {
        self.begin(Op::RemoveImage, name, None, None, None)?;
        let mut state = self.state();
        let image = name.strip_prefix("sha256:").unwrap_or(name).to_string();
        if !state.images.contains(&image) {
            return Err(RuntimeError::NoSuchImage {
                message: format!("No such image: {name}"),
            });
        }
        if let Some(container) = state.containers.values().find(|c| c.spec.image == image) {
            return Err(RuntimeError::Conflict {
                message: format!(
                    "conflict: unable to remove repository reference \"{name}\" (must force) - container {} is using its referenced image",
                    container.id
                ),
            });
        }
        state.images.remove(&image);
        drop(state);
        self.finish(None)
    }

    fn docker_root_dir(&self) -> Result<Option<String>, RuntimeError> {
        Ok(self.state().docker_root_dir.clone())
    }

    fn inspect_volume(&self, name: &str) -> Result<Option<VolumeInfo>, RuntimeError> {
        self.begin(Op::InspectVolume, name, None, None, None)?;
        Ok(self.state().volumes.get(name).cloned())
    }
}

struct FakeEventStream {
    events: Receiver<RuntimeEvent>,
    cancelled: Receiver<()>,
    cancel: Sender<()>,
}

impl EventStream for FakeEventStream {
    fn next_event(&mut self) -> Result<Option<RuntimeEvent>, RuntimeError> {
        crossbeam_channel::select! {
            recv(self.events) -> event => Ok(event.ok()),
            recv(self.cancelled) -> _ => Ok(None),
        }
    }

    fn canceller(&self) -> StreamCanceller {
        let cancel = self.cancel.clone();
        StreamCanceller::new(move || {
            let _ = cancel.send(());
        })
    }
}
