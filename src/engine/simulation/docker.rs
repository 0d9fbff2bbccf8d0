//! The simulator's Docker Engine (tests only): containers, names and images in memory, behind
//! the real [`ContainerRuntime`] trait, so the engine's own worker code (`workers.rs`) and
//! restore code (`restore.rs`) run against it unchanged.
//!
//! It behaves like the daemon where deckhand's correctness depends on it: a name is unique (a
//! second create with a taken name is a 409 conflict), a start of a running container and a stop
//! of a stopped one succeed, a stop sends `die` (with the exit code) then `stop`, an unknown id
//! or name is a 404, and every change is announced as a [`RuntimeEvent`] the simulator delivers
//! (late, out of order, twice, or not at all). While chaos is on, calls also fail: a 500, a
//! time-out after which the call may or may not have happened, and windows in which the daemon
//! is unreachable (every call fails until the window ends). Everything is decided by the
//! simulator's seeded generator, so a seed replays exactly.

use super::Random;
use crate::engine::container_spec::LABEL_TASK_ARN;
use crate::runtime::{
    ContainerInfo, ContainerRuntime, ContainerState, ContainerSummary, CreateContainer,
    CreateVolume, EventFilter, EventStream, HealthState, ImageInfo, RegistryAuth, RuntimeError,
    RuntimeEvent, VolumeInfo,
};
use crate::task::Millis;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SimState {
    Created,
    Running,
    Exited,
}

#[derive(Debug, Clone)]
pub(super) struct SimContainer {
    pub(super) name: String,
    pub(super) task_arn: String,
    pub(super) image: String,
    pub(super) state: SimState,
    pub(super) exit_code: i64,
    pub(super) oom_killed: bool,
    pub(super) health: Option<String>,
    pub(super) created_at: Millis,
    pub(super) started_at: Millis,
    pub(super) finished_at: Millis,
    /// The container whose network namespace it joins (`container:<name>`), as in an awsvpc
    /// task; Docker refuses to start it while that one is not running.
    pub(super) joins: Option<String>,
}

/// A successful create, for the simulator's invariants.
#[derive(Debug, Clone)]
pub(super) struct Created {
    pub(super) docker_id: String,
    pub(super) name: String,
    pub(super) task_arn: String,
    /// Named volumes the container mounts that Docker did not have at its create (Docker would
    /// have made them itself, without the driver, options and labels the task asks for).
    pub(super) missing_volumes: Vec<String>,
    /// The namespace holder it joins, when Docker never had a container of that name before.
    pub(super) missing_namespace_holder: Option<String>,
}

/// How a call fails, decided once per runtime call.
enum Fault {
    Unreachable,
    /// The call's deadline passed; `acted`: Docker did it anyway.
    Timeout {
        acted: bool,
    },
    /// A 500 from the daemon; nothing happened.
    ServerError,
}

pub(super) struct DockerState {
    pub(super) now: Millis,
    pub(super) random: Random,
    /// Failures are injected only while true.
    pub(super) chaos: bool,
    /// Percent of calls that fail (500 or time-out) while chaos is on.
    pub(super) failure_percent: u64,
    /// Every call fails as unreachable before this time (a daemon restart).
    pub(super) unreachable_until: Millis,
    /// Only "unreachable" and time-outs, no 500s (see `INSPECT_ERRORS_AT_RESTORE`).
    pub(super) only_unanswered_faults: bool,
    pub(super) containers: BTreeMap<String, SimContainer>,
    /// Name → id; a name is unique.
    pub(super) names: HashMap<String, String>,
    pub(super) images: std::collections::HashSet<String>,
    /// Named volumes by name.
    pub(super) volumes: BTreeMap<String, VolumeInfo>,
    next_id: u64,
    /// Events since the simulator last collected them.
    pub(super) events: Vec<RuntimeEvent>,
    /// Successful creates since the simulator last collected them.
    pub(super) created: Vec<Created>,
    /// Successful creates per name over the whole run.
    pub(super) creates_per_name: HashMap<String, u32>,
    /// Calls made (all kinds), for the statistics.
    pub(super) calls: u64,
    /// Calls that failed on purpose.
    pub(super) failures: u64,
}

/// The simulated daemon. One lock; the simulator is single-threaded, the lock is only there
/// because the runtime trait is `Sync`.
pub(super) struct SimDocker {
    state: Mutex<DockerState>,
}

impl SimDocker {
    pub(super) fn new(random: Random, failure_percent: u64) -> SimDocker {
        SimDocker {
            state: Mutex::new(DockerState {
                now: 0,
                random,
                chaos: true,
                failure_percent,
                unreachable_until: 0,
                only_unanswered_faults: false,
                containers: BTreeMap::new(),
                names: HashMap::new(),
                images: std::collections::HashSet::new(),
                volumes: BTreeMap::new(),
                next_id: 0,
                events: Vec::new(),
                created: Vec::new(),
                creates_per_name: HashMap::new(),
                calls: 0,
                failures: 0,
            }),
        }
    }

    pub(super) fn state(&self) -> MutexGuard<'_, DockerState> {
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

/// Docker writes RFC 3339 with nanoseconds; virtual time starts near the epoch, so days stay
/// within January 1970 (runs are hours long).
pub(super) fn docker_time(millis: Millis) -> String {
    if millis == 0 {
        return "0001-01-01T00:00:00Z".to_string();
    }
    let seconds = millis / 1000;
    format!(
        "1970-01-{:02}T{:02}:{:02}:{:02}.{:03}000000Z",
        1 + seconds / 86_400,
        seconds / 3600 % 24,
        seconds / 60 % 60,
        seconds % 60,
        millis % 1000
    )
}

impl DockerState {
    fn fault(&mut self) -> Option<Fault> {
        self.calls += 1;
        if self.now < self.unreachable_until {
            self.failures += 1;
            return Some(Fault::Unreachable);
        }
        if !self.chaos {
            return None;
        }
        // Now and then the daemon goes away for a few seconds (a restart, an upgrade).
        if self.random.chance_per_mille(3) {
            self.unreachable_until = self.now + 1_000 + self.random.below(9_000);
            self.failures += 1;
            return Some(Fault::Unreachable);
        }
        if self.random.below(100) >= self.failure_percent {
            return None;
        }
        self.failures += 1;
        Some(if self.random.chance(50) && !self.only_unanswered_faults {
            Fault::ServerError
        } else {
            Fault::Timeout {
                acted: self.random.chance(50),
            }
        })
    }

    fn error(fault: &Fault, operation: &str) -> RuntimeError {
        match fault {
            Fault::Unreachable => RuntimeError::Unreachable {
                message: "simulated: the daemon is restarting".into(),
            },
            Fault::Timeout { .. } => RuntimeError::Timeout {
                operation: operation.into(),
                after: Duration::from_secs(1),
            },
            Fault::ServerError => RuntimeError::Api {
                status: 500,
                message: format!("simulated: {operation} failed"),
            },
        }
    }

    /// Runs `action` unless `fault` says the call never got through; returns the call's answer.
    fn call<T>(
        &mut self,
        operation: &str,
        action: impl FnOnce(&mut DockerState) -> Result<T, RuntimeError>,
    ) -> Result<T, RuntimeError> {
        match self.fault() {
            None => action(self),
            Some(fault @ Fault::Timeout { acted: true }) => {
                let _ = action(self);
                Err(Self::error(&fault, operation))
            }
            Some(fault) => Err(Self::error(&fault, operation)),
        }
    }

    pub(super) fn resolve(&self, id_or_name: &str) -> Option<String> {
        if self.containers.contains_key(id_or_name) {
            return Some(id_or_name.to_string());
        }
        self.names.get(id_or_name.trim_start_matches('/')).cloned()
    }

    fn no_such(id_or_name: &str) -> RuntimeError {
        RuntimeError::NoSuchContainer {
            message: format!("No such container: {id_or_name}"),
        }
    }

    pub(super) fn event(&mut self, id: &str, action: &str, exit_code: Option<i64>) {
        let mut attributes = BTreeMap::new();
        if let Some(code) = exit_code {
            attributes.insert("exitCode".to_string(), code.to_string());
        }
        let time_nano = i64::try_from(self.now).unwrap_or(0) * 1_000_000;
        self.events.push(RuntimeEvent {
            id: id.to_string(),
            action: action.to_string(),
            attributes,
            time_nano,
        });
    }

    pub(super) fn start(&mut self, id: &str) {
        let now = self.now;
        if let Some(container) = self.containers.get_mut(id) {
            if container.state != SimState::Running {
                container.state = SimState::Running;
                container.started_at = now;
                container.oom_killed = false;
                self.event(id, "start", None);
            }
        }
    }

    /// The container's process ends (by itself, killed by a stop, or for memory).
    pub(super) fn exit(&mut self, id: &str, code: i64, oom: bool) {
        let now = self.now;
        let Some(container) = self.containers.get_mut(id) else {
            return;
        };
        if container.state != SimState::Running {
            return;
        }
        container.state = SimState::Exited;
        container.exit_code = code;
        container.finished_at = now.max(container.started_at + 1);
        container.oom_killed = oom;
        if oom {
            self.event(id, "oom", None);
        }
        self.event(id, "die", Some(code));
    }

    pub(super) fn remove(&mut self, id: &str) {
        if let Some(container) = self.containers.get(id) {
            if container.state == SimState::Running {
                self.exit(id, 137, false);
            }
        }
        if let Some(container) = self.containers.remove(id) {
            self.names.remove(&container.name);
            self.event(id, "destroy", None);
        }
    }

    pub(super) fn info(&self, id: &str) -> Option<ContainerInfo> {
        let container = self.containers.get(id)?;
        Some(ContainerInfo {
            id: id.to_string(),
            name: container.name.clone(),
            image: container.image.clone(),
            image_id: format!("sha256:{}", container.image.len()),
            created: docker_time(container.created_at),
            labels: BTreeMap::from([(LABEL_TASK_ARN.to_string(), container.task_arn.clone())]),
            state: ContainerState {
                status: match container.state {
                    SimState::Created => "created",
                    SimState::Running => "running",
                    SimState::Exited => "exited",
                }
                .into(),
                running: container.state == SimState::Running,
                exit_code: container.exit_code,
                oom_killed: container.oom_killed,
                started_at: docker_time(container.started_at),
                finished_at: docker_time(container.finished_at),
                health: container.health.clone().map(|status| HealthState {
                    status,
                    ..HealthState::default()
                }),
                ..ContainerState::default()
            },
            ..ContainerInfo::default()
        })
    }

    pub(super) fn running_ids_of(&self, task_arn: &str) -> Vec<String> {
        self.containers
            .iter()
            .filter(|(_, c)| c.task_arn == task_arn && c.state == SimState::Running)
            .map(|(id, _)| id.clone())
            .collect()
    }
}

impl ContainerRuntime for SimDocker {
    fn pull_image(&self, image: &str, _auth: Option<&RegistryAuth>) -> Result<(), RuntimeError> {
        let mut state = self.state();
        // A registry error is the pull's own failure, not the daemon's.
        if state.chaos && state.random.chance(4) {
            return Err(RuntimeError::CannotPull {
                message: "simulated: registry says no".into(),
            });
        }
        state.call("pull", |docker| {
            docker.images.insert(image.to_string());
            Ok(())
        })
    }

    fn inspect_image(&self, image: &str) -> Result<ImageInfo, RuntimeError> {
        self.state().call("inspect image", |docker| {
            if docker.images.contains(image) {
                Ok(ImageInfo {
                    id: format!("sha256:{}", image.len()),
                    repo_tags: vec![image.to_string()],
                })
            } else {
                Err(RuntimeError::NoSuchImage {
                    message: image.to_string(),
                })
            }
        })
    }

    fn create_container(&self, spec: &CreateContainer) -> Result<String, RuntimeError> {
        self.state().call("create", |docker| {
            if docker.names.contains_key(&spec.name) {
                return Err(RuntimeError::Conflict {
                    message: format!(
                        "Conflict. The container name \"/{}\" is already in use",
                        spec.name
                    ),
                });
            }
            if !docker.images.contains(&spec.image) {
                return Err(RuntimeError::NoSuchImage {
                    message: spec.image.clone(),
                });
            }
            docker.next_id += 1;
            let id = format!("{:064x}", docker.next_id);
            let task_arn = spec.labels.get(LABEL_TASK_ARN).cloned().unwrap_or_default();
            let now = docker.now;
            let joins = spec
                .network_mode
                .as_deref()
                .and_then(|mode| mode.strip_prefix("container:"))
                .map(str::to_string);
            // Never created at all (a user may remove it between the engine's call and this).
            let missing_namespace_holder = joins
                .clone()
                .filter(|holder| !docker.creates_per_name.contains_key(holder));
            docker.containers.insert(
                id.clone(),
                SimContainer {
                    name: spec.name.clone(),
                    task_arn: task_arn.clone(),
                    image: spec.image.clone(),
                    state: SimState::Created,
                    exit_code: 0,
                    oom_killed: false,
                    health: None,
                    created_at: now.max(1),
                    started_at: 0,
                    finished_at: 0,
                    joins,
                },
            );
            docker.names.insert(spec.name.clone(), id.clone());
            *docker
                .creates_per_name
                .entry(spec.name.clone())
                .or_insert(0) += 1;
            let missing_volumes = spec
                .binds
                .iter()
                .filter_map(|bind| bind.split(':').next())
                .filter(|source| !source.starts_with('/') && !docker.volumes.contains_key(*source))
                .map(str::to_string)
                .collect();
            docker.created.push(Created {
                docker_id: id.clone(),
                name: spec.name.clone(),
                task_arn,
                missing_volumes,
                missing_namespace_holder,
            });
            docker.event(&id, "create", None);
            Ok(id)
        })
    }

    fn import_image(
        &self,
        _tarball: &[u8],
        repository: &str,
        tag: &str,
    ) -> Result<String, RuntimeError> {
        self.state().call("import", |docker| {
            let image = format!("{repository}:{tag}");
            docker.images.insert(image.clone());
            Ok(format!("sha256:{}", image.len()))
        })
    }

    fn start_container(&self, id: &str) -> Result<(), RuntimeError> {
        self.state().call("start", |docker| {
            let Some(id) = docker.resolve(id) else {
                return Err(DockerState::no_such(id));
            };
            let holder = docker.containers.get(&id).and_then(|c| c.joins.clone());
            if let Some(holder) = holder {
                let running = docker
                    .resolve(&holder)
                    .and_then(|holder| docker.containers.get(&holder))
                    .is_some_and(|holder| holder.state == SimState::Running);
                if !running {
                    return Err(RuntimeError::Api {
                        status: 500,
                        message: format!(
                            "cannot join network of a non running container: {holder}"
                        ),
                    });
                }
            }
            docker.start(&id);
            Ok(())
        })
    }

    fn stop_container(&self, id: &str, _grace: Duration) -> Result<(), RuntimeError> {
        self.state().call("stop", |docker| {
            let Some(id) = docker.resolve(id) else {
                return Err(DockerState::no_such(id));
            };
            if docker.containers.get(&id).map(|c| c.state) == Some(SimState::Running) {
                docker.exit(&id, 143, false);
                docker.event(&id, "stop", None);
            }
            Ok(())
        })
    }

    fn inspect_container(&self, id_or_name: &str) -> Result<ContainerInfo, RuntimeError> {
        self.state().call("inspect", |docker| {
            docker
                .resolve(id_or_name)
                .and_then(|id| docker.info(&id))
                .ok_or_else(|| DockerState::no_such(id_or_name))
        })
    }

    fn remove_container(&self, id: &str, _volumes: bool) -> Result<(), RuntimeError> {
        self.state().call("remove", |docker| {
            let Some(id) = docker.resolve(id) else {
                return Err(DockerState::no_such(id));
            };
            docker.remove(&id);
            Ok(())
        })
    }

    fn list_containers(
        &self,
        label_filters: &[String],
    ) -> Result<Vec<ContainerSummary>, RuntimeError> {
        // Every simulated container carries this cluster's labels.
        let _ = label_filters;
        self.state().call("list", |docker| {
            Ok(docker
                .containers
                .iter()
                .map(|(id, container)| ContainerSummary {
                    id: id.clone(),
                    name: format!("/{}", container.name),
                    image: container.image.clone(),
                    state: "running".into(),
                    labels: BTreeMap::from([(
                        LABEL_TASK_ARN.to_string(),
                        container.task_arn.clone(),
                    )]),
                })
                .collect())
        })
    }

    fn events(&self, _filter: &EventFilter) -> Result<Box<dyn EventStream>, RuntimeError> {
        // The simulator delivers events itself.
        Err(RuntimeError::Unreachable {
            message: "simulated: events are delivered by the simulator".into(),
        })
    }

    fn ping(&self) -> Result<(), RuntimeError> {
        let state = self.state();
        if state.now < state.unreachable_until {
            return Err(DockerState::error(&Fault::Unreachable, "ping"));
        }
        Ok(())
    }

    fn remove_volume(&self, name: &str) -> Result<(), RuntimeError> {
        self.state().call("remove volume", |docker| {
            docker.volumes.remove(name);
            Ok(())
        })
    }

    fn create_volume(&self, spec: &CreateVolume) -> Result<(), RuntimeError> {
        self.state().call("create volume", |docker| {
            docker
                .volumes
                .entry(spec.name.clone())
                .or_insert_with(|| VolumeInfo {
                    name: spec.name.clone(),
                    driver: spec.driver.clone(),
                    options: spec.driver_opts.clone(),
                    labels: spec.labels.clone(),
                });
            Ok(())
        })
    }

    fn inspect_volume(&self, name: &str) -> Result<Option<VolumeInfo>, RuntimeError> {
        self.state().call("inspect volume", |docker| {
            Ok(docker.volumes.get(name).cloned())
        })
    }
}
