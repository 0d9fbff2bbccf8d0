//! Host resources (docs/ENGINE.md §9a): what the host offers tasks (memory, CPU, host ports),
//! what each task needs, and the first-come-first-served queue of tasks that wait for room.
//!
//! [`HostResources`] is the ledger, plain data with no lock, clock or channel: whether a task
//! fits, consuming and releasing, and which queued tasks are admitted next. [`HostResourceQueue`]
//! wraps it for the engine's threads the way the wait group does: the engine enqueues a task on
//! the thread that accepts it (so the queue's order is the order of start numbers), and the task's
//! own thread asks for a receiver that fires once the task is admitted, which sits in its
//! `select!` so a waiting task still answers a stop. A task releases what it holds when it becomes
//! known STOPPED (or when it leaves the queue after a stop).
//!
//! A task's needs: its task-level `memory` and `cpu` when given, else the sum of its containers'
//! (`memoryReservation` when a container sets one, else `memory`, as the ECS agent accounts), its
//! static host ports per protocol, and its containers' GPUs (`resourceRequirements`). Memory is
//! in MiB, CPU in units (1024 per core); GPUs are handed out by id ([`gpus::GpuPool`]) when the
//! task is admitted, and the ids reach its thread with the admission.

pub mod gpus;

use crate::task::{ContainerStatus, NetworkMode, Protocol, Task, TaskStatus};
use crossbeam_channel::{bounded, Receiver, Sender};
use gpus::{GpuPool, TooFewGpus};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Mutex;

/// What the host offers tasks in all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCapacity {
    /// `MemTotal` in MiB less `ECS_RESERVED_MEMORY`.
    pub memory_mib: u64,
    /// 1024 per core.
    pub cpu_units: u64,
    /// `ECS_RESERVED_PORTS`: no task may bind these TCP host ports.
    pub reserved_tcp_ports: BTreeSet<u16>,
    /// `ECS_RESERVED_PORTS_UDP`: no task may bind these UDP host ports.
    pub reserved_udp_ports: BTreeSet<u16>,
    /// The host's GPU ids (`DECKHAND_GPU_IDS`, else found at start), in the order they are
    /// handed out.
    pub gpu_ids: Vec<String>,
}

impl HostCapacity {
    /// No limit on memory or CPU, no reserved port and no GPU: only host ports are accounted
    /// (what an engine gets when nobody told it the host's size, as in most tests).
    pub fn unlimited() -> HostCapacity {
        HostCapacity {
            memory_mib: u64::MAX,
            cpu_units: u64::MAX,
            reserved_tcp_ports: BTreeSet::new(),
            reserved_udp_ports: BTreeSet::new(),
            gpu_ids: Vec::new(),
        }
    }

    fn reserved(&self, protocol: Protocol) -> &BTreeSet<u16> {
        match protocol {
            Protocol::Tcp => &self.reserved_tcp_ports,
            Protocol::Udp => &self.reserved_udp_ports,
        }
    }
}

impl Default for HostCapacity {
    fn default() -> HostCapacity {
        HostCapacity::unlimited()
    }
}

/// What one task takes from the host while it is admitted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceNeeds {
    pub memory_mib: u64,
    pub cpu_units: u64,
    /// Static host ports, each with its protocol.
    pub ports: BTreeSet<(u16, Protocol)>,
    /// GPUs, the sum of the containers'.
    pub gpus: usize,
}

impl ResourceNeeds {
    /// A task's needs (see the module documentation).
    pub fn of_task(task: &Task) -> ResourceNeeds {
        let containers = task
            .containers
            .iter()
            .map(|container| &container.definition);
        let memory_mib = match task.memory_mib.filter(|memory| *memory > 0) {
            Some(memory) => memory,
            None => containers
                .clone()
                .map(|container| {
                    container
                        .memory_reservation_mib
                        .filter(|reservation| *reservation > 0)
                        .or(container.memory_mib)
                        .unwrap_or(0)
                })
                .fold(0u64, u64::saturating_add),
        };
        let cpu_units = match task.cpu.filter(|cpu| *cpu > 0) {
            Some(cpu) => cpu,
            None => containers
                .clone()
                .map(|container| container.cpu.unwrap_or(0))
                .fold(0u64, u64::saturating_add),
        };
        let mut ports = BTreeSet::new();
        for container in containers {
            for mapping in &container.port_mappings {
                match task.network_mode {
                    // The task's own network namespace: every container port on the same host
                    // port.
                    NetworkMode::Host | NetworkMode::Awsvpc => {
                        for port in mapping.container_ports() {
                            ports.insert((port, mapping.protocol));
                        }
                    }
                    NetworkMode::Bridge => {
                        if let Some(port) = mapping.host_port.filter(|port| *port != 0) {
                            ports.insert((port, mapping.protocol));
                        }
                    }
                    NetworkMode::None => {}
                }
            }
        }
        let gpus = task
            .containers
            .iter()
            .map(|container| container.definition.gpus as usize)
            .fold(0usize, usize::saturating_add);
        ResourceNeeds {
            memory_mib,
            cpu_units,
            ports,
            gpus,
        }
    }
}

/// Why a task can never run on this host: it is refused at submit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NeverFits {
    Memory { needs: u64, offers: u64 },
    Cpu { needs: u64, offers: u64 },
    ReservedPort { port: u16, protocol: Protocol },
    Gpus(TooFewGpus),
}

impl fmt::Display for NeverFits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NeverFits::Memory { needs, offers } => write!(
                f,
                "memory: needs {needs} MiB, the host offers {offers} MiB to tasks in all"
            ),
            NeverFits::Cpu { needs, offers } => write!(
                f,
                "cpu: needs {needs} units, the host offers {offers} units to tasks in all"
            ),
            NeverFits::ReservedPort { port, protocol } => {
                let key = match protocol {
                    Protocol::Tcp => "ECS_RESERVED_PORTS",
                    Protocol::Udp => "ECS_RESERVED_PORTS_UDP",
                };
                write!(
                    f,
                    "port {port}/{}: reserved on this host ({key})",
                    protocol.as_str()
                )
            }
            NeverFits::Gpus(too_few) => write!(f, "gpu: {too_few}"),
        }
    }
}

/// Why a task does not fit now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shortfall {
    Memory {
        needs: u64,
        free: u64,
    },
    Cpu {
        needs: u64,
        free: u64,
    },
    Port {
        port: u16,
        protocol: Protocol,
        held_by: String,
    },
    Gpus {
        needs: usize,
        free: usize,
    },
    /// It would fit, but an earlier task waits ahead of it (first come, first served).
    Behind {
        task: String,
    },
}

impl fmt::Display for Shortfall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shortfall::Memory { needs, free } => {
                write!(f, "memory: needs {needs} MiB, {free} MiB free")
            }
            Shortfall::Cpu { needs, free } => write!(f, "cpu: needs {needs} units, {free} free"),
            Shortfall::Port {
                port,
                protocol,
                held_by,
            } => write!(
                f,
                "port {port}/{}: held by task {held_by}",
                protocol.as_str()
            ),
            Shortfall::Gpus { needs, free } => {
                let unit = if *needs == 1 { "GPU" } else { "GPUs" };
                write!(f, "gpu: needs {needs} {unit}, {free} free")
            }
            Shortfall::Behind { task } => {
                write!(
                    f,
                    "its turn: task {task} waits for host resources ahead of it"
                )
            }
        }
    }
}

/// Joins several reasons into one line.
fn joined<T: fmt::Display>(reasons: &[T]) -> String {
    reasons
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The ledger: what is consumed, by whom, and who waits in which order. Pure.
#[derive(Debug, Clone)]
pub struct HostResources {
    capacity: HostCapacity,
    /// Admitted tasks and what each holds.
    consumed: BTreeMap<String, ResourceNeeds>,
    used_memory_mib: u64,
    used_cpu_units: u64,
    /// Host port → the task that holds it.
    port_holders: BTreeMap<(u16, Protocol), String>,
    /// The host's GPUs and who holds which.
    gpus: GpuPool,
    /// Waiting tasks, by (start number, id): the head is the earliest.
    queue: BTreeMap<(u64, String), ResourceNeeds>,
}

impl HostResources {
    pub fn new(capacity: HostCapacity) -> HostResources {
        HostResources {
            gpus: GpuPool::new(capacity.gpu_ids.clone()),
            capacity,
            consumed: BTreeMap::new(),
            used_memory_mib: 0,
            used_cpu_units: 0,
            port_holders: BTreeMap::new(),
            queue: BTreeMap::new(),
        }
    }

    pub fn capacity(&self) -> &HostCapacity {
        &self.capacity
    }

    /// Memory and CPU in use by admitted tasks.
    pub fn used(&self) -> (u64, u64) {
        (self.used_memory_mib, self.used_cpu_units)
    }

    /// Why `needs` can never be met on this host, whatever else runs (empty: it can be).
    pub fn never_fits(&self, needs: &ResourceNeeds) -> Vec<NeverFits> {
        let mut reasons = Vec::new();
        if needs.memory_mib > self.capacity.memory_mib {
            reasons.push(NeverFits::Memory {
                needs: needs.memory_mib,
                offers: self.capacity.memory_mib,
            });
        }
        if needs.cpu_units > self.capacity.cpu_units {
            reasons.push(NeverFits::Cpu {
                needs: needs.cpu_units,
                offers: self.capacity.cpu_units,
            });
        }
        for (port, protocol) in &needs.ports {
            if self.capacity.reserved(*protocol).contains(port) {
                reasons.push(NeverFits::ReservedPort {
                    port: *port,
                    protocol: *protocol,
                });
            }
        }
        if let Some(too_few) = self.gpus.never_fits(needs.gpus) {
            reasons.push(NeverFits::Gpus(too_few));
        }
        reasons
    }

    /// Why `needs` does not fit beside what is consumed now (empty: it fits).
    pub fn shortfalls(&self, needs: &ResourceNeeds) -> Vec<Shortfall> {
        let mut reasons = Vec::new();
        let free_memory = self
            .capacity
            .memory_mib
            .saturating_sub(self.used_memory_mib);
        if needs.memory_mib > free_memory {
            reasons.push(Shortfall::Memory {
                needs: needs.memory_mib,
                free: free_memory,
            });
        }
        let free_cpu = self.capacity.cpu_units.saturating_sub(self.used_cpu_units);
        if needs.cpu_units > free_cpu {
            reasons.push(Shortfall::Cpu {
                needs: needs.cpu_units,
                free: free_cpu,
            });
        }
        for key in &needs.ports {
            if let Some(holder) = self.port_holders.get(key) {
                reasons.push(Shortfall::Port {
                    port: key.0,
                    protocol: key.1,
                    held_by: holder.clone(),
                });
            }
        }
        let free_gpus = self.gpus.free();
        if needs.gpus > free_gpus {
            reasons.push(Shortfall::Gpus {
                needs: needs.gpus,
                free: free_gpus,
            });
        }
        reasons
    }

    pub fn fits(&self, needs: &ResourceNeeds) -> bool {
        self.shortfalls(needs).is_empty() && self.never_fits(needs).is_empty()
    }

    pub fn is_admitted(&self, task_id: &str) -> bool {
        self.consumed.contains_key(task_id)
    }

    pub fn is_queued(&self, task_id: &str) -> bool {
        self.queue.keys().any(|(_, id)| id == task_id)
    }

    /// Admitted task ids (for diagnostics and tests).
    pub fn admitted(&self) -> Vec<String> {
        self.consumed.keys().cloned().collect()
    }

    /// Waiting task ids, head first.
    pub fn queued(&self) -> Vec<String> {
        self.queue.keys().map(|(_, id)| id.clone()).collect()
    }

    /// The GPU ids `task_id` holds, in the host's order.
    pub fn gpus_held_by(&self, task_id: &str) -> Vec<String> {
        self.gpus.held_by(task_id)
    }

    /// How many of the host's GPUs nobody holds.
    pub fn free_gpus(&self) -> usize {
        self.gpus.free()
    }

    /// Restore: `task_id` takes back the GPU ids its containers were created with (before
    /// [`HostResources::consume`], which then only adds what it lacks). Returns the ids another
    /// task claimed first, each with that task.
    pub fn take_back_gpus(&mut self, task_id: &str, ids: &[String]) -> Vec<(String, String)> {
        self.gpus.take_back(task_id, ids)
    }

    /// Takes `needs` for `task_id` whether or not they fit: restore re-consumes for a task that
    /// had been admitted before the restart (its containers exist and hold what they hold).
    /// A task already admitted keeps what it holds. Its GPUs are the first free ids, less those
    /// it took back.
    pub fn consume(&mut self, task_id: &str, needs: ResourceNeeds) {
        if self.consumed.contains_key(task_id) {
            return;
        }
        self.gpus.assign(task_id, needs.gpus);
        self.queue.retain(|(_, id), _| id != task_id);
        self.used_memory_mib = self.used_memory_mib.saturating_add(needs.memory_mib);
        self.used_cpu_units = self.used_cpu_units.saturating_add(needs.cpu_units);
        for key in &needs.ports {
            self.port_holders
                .entry(*key)
                .or_insert_with(|| task_id.to_string());
        }
        self.consumed.insert(task_id.to_string(), needs);
    }

    /// Puts `task_id` in the queue at its start number's place. A task already admitted or
    /// queued is left as it is.
    pub fn enqueue(&mut self, task_id: &str, start_sequence: u64, needs: ResourceNeeds) {
        if self.consumed.contains_key(task_id) || self.is_queued(task_id) {
            return;
        }
        self.queue
            .insert((start_sequence, task_id.to_string()), needs);
    }

    /// Gives back what `task_id` holds, or takes it out of the queue. Idempotent; true when it
    /// changed anything (then [`HostResources::admit`] may have work).
    pub fn release(&mut self, task_id: &str) -> bool {
        let before = self.queue.len();
        self.queue.retain(|(_, id), _| id != task_id);
        let dequeued = self.queue.len() != before;
        let gave_back_gpus = self.gpus.release(task_id);
        let Some(needs) = self.consumed.remove(task_id) else {
            return dequeued || gave_back_gpus;
        };
        self.used_memory_mib = self.used_memory_mib.saturating_sub(needs.memory_mib);
        self.used_cpu_units = self.used_cpu_units.saturating_sub(needs.cpu_units);
        for key in &needs.ports {
            if self.port_holders.get(key).map(String::as_str) == Some(task_id) {
                self.port_holders.remove(key);
            }
        }
        true
    }

    /// Admits waiting tasks in order, head first, while the head fits; returns their ids. The
    /// first one that does not fit stops the walk, so a later small task never overtakes an
    /// earlier one. A task that can never fit (the host's size changed across a restart) is
    /// passed over and blocks nobody; it keeps waiting, its reason says why.
    pub fn admit(&mut self) -> Vec<String> {
        let mut admitted = Vec::new();
        let keys: Vec<(u64, String)> = self.queue.keys().cloned().collect();
        for key in keys {
            let Some(needs) = self.queue.get(&key) else {
                continue;
            };
            if !self.never_fits(needs).is_empty() {
                continue;
            }
            if !self.shortfalls(needs).is_empty() {
                break;
            }
            if let Some(needs) = self.queue.remove(&key) {
                self.consume(&key.1, needs);
                admitted.push(key.1);
            }
        }
        admitted
    }

    /// Why a queued task waits (`None` when it is not queued): what it lacks now, or the earlier
    /// task it waits behind.
    pub fn waiting_reason(&self, task_id: &str) -> Option<String> {
        let (_, needs) = self.queue.iter().find(|((_, id), _)| id == task_id)?;
        let never = self.never_fits(needs);
        if !never.is_empty() {
            return Some(joined(&never));
        }
        let shortfalls = self.shortfalls(needs);
        if !shortfalls.is_empty() {
            return Some(joined(&shortfalls));
        }
        // It fits now: something ahead of it holds the queue.
        let ahead = self
            .queue
            .iter()
            .find(|((_, id), needs)| id != task_id && self.never_fits(needs).is_empty())
            .map(|((_, id), _)| id.clone())
            .unwrap_or_default();
        Some(Shortfall::Behind { task: ahead }.to_string())
    }
}

/// A saved task that holds host resources at restore: not known STOPPED, and some container
/// got past NONE (its image pulled, or further), as the ECS agent re-consumes for a task with
/// active containers.
pub fn restore_holds_resources(task: &Task) -> bool {
    task.known_status < TaskStatus::Stopped
        && task
            .containers
            .iter()
            .any(|container| container.known_status > ContainerStatus::None)
}

/// A saved task that queues for host resources again at restore: it had not got past the
/// queue, still wants to run, and waits for admission when its loop starts (a start number).
pub fn restore_waits_for_resources(task: &Task) -> bool {
    task.known_status < TaskStatus::Stopped
        && task.desired_status < TaskStatus::Stopped
        && task.start_sequence > 0
        && !restore_holds_resources(task)
}

/// The ledger shared between the engine (which enqueues at acceptance and reads reasons) and the
/// tasks' threads (which wait to be admitted and release).
#[derive(Debug)]
pub struct HostResourceQueue {
    inner: Mutex<QueueState>,
}

#[derive(Debug)]
struct QueueState {
    ledger: HostResources,
    /// A task's thread waiting to be admitted: it is sent the GPU ids it was given.
    waiters: HashMap<String, Sender<Vec<String>>>,
}

impl QueueState {
    /// Admits what fits now and wakes those tasks' threads.
    fn admit_and_wake(&mut self) {
        for task_id in self.ledger.admit() {
            if let Some(sender) = self.waiters.remove(&task_id) {
                // The task may have stopped waiting; nothing to do then.
                let _ = sender.try_send(self.ledger.gpus_held_by(&task_id));
            }
        }
    }
}

impl HostResourceQueue {
    pub fn new(capacity: HostCapacity) -> HostResourceQueue {
        HostResourceQueue {
            inner: Mutex::new(QueueState {
                ledger: HostResources::new(capacity),
                waiters: HashMap::new(),
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, QueueState> {
        // A panic while holding this lock leaves plain numbers and maps behind; keep going.
        self.inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Why `task` can never run on this host, as one line (`None`: it can).
    pub fn refusal(&self, task: &Task) -> Option<String> {
        let reasons = self
            .state()
            .ledger
            .never_fits(&ResourceNeeds::of_task(task));
        (!reasons.is_empty()).then(|| joined(&reasons))
    }

    /// Queues `task` at its start number's place and admits what fits.
    pub fn enqueue(&self, task: &Task) {
        let mut state = self.state();
        state
            .ledger
            .enqueue(&task.id, task.start_sequence, ResourceNeeds::of_task(task));
        state.admit_and_wake();
    }

    /// Restore: `task` had been admitted before the restart; it holds its needs again.
    pub fn consume_admitted(&self, task: &Task) {
        self.state()
            .ledger
            .consume(&task.id, ResourceNeeds::of_task(task));
    }

    /// Restore (§11): the saved tasks come back into the ledger in start order. One that had got
    /// past the queue (a container pulled, created or running) holds its needs again, whether
    /// or not they still fit; one that still waited, desired RUNNING, queues again at its
    /// place. A task admitted before the restart whose containers had not moved yet queues
    /// again too, and is admitted again: everything admitted before it is earlier in the queue.
    pub fn restore<'a>(&self, tasks: impl IntoIterator<Item = &'a Task>) {
        let mut tasks: Vec<&Task> = tasks.into_iter().collect();
        crate::sorting::sort_by(&mut tasks, |a, b| {
            (a.start_sequence, &a.id).cmp(&(b.start_sequence, &b.id))
        });
        let mut state = self.state();
        // The GPUs the containers were created with first, so no task is handed another's.
        for task in tasks.iter().filter(|task| restore_holds_resources(task)) {
            let saved: Vec<String> = task
                .containers
                .iter()
                .flat_map(|container| container.gpu_ids.iter().cloned())
                .collect();
            for (id, holder) in state.ledger.take_back_gpus(&task.id, &saved) {
                log::warn!(
                    "restore: task {}: GPU {id} is also held by task {holder}; both tasks' \
                     containers were created with it",
                    task.id
                );
            }
        }
        for task in &tasks {
            if restore_holds_resources(task) {
                state.ledger.consume(&task.id, ResourceNeeds::of_task(task));
            }
        }
        for task in &tasks {
            if restore_waits_for_resources(task) {
                state
                    .ledger
                    .enqueue(&task.id, task.start_sequence, ResourceNeeds::of_task(task));
            }
        }
        state.admit_and_wake();
    }

    /// A receiver that yields the GPU ids `task_id` holds once it is admitted: at once when it
    /// is admitted already, or not accounted here at all (no ids then).
    pub fn ready(&self, task_id: &str) -> Receiver<Vec<String>> {
        let (sender, receiver) = bounded(1);
        let mut state = self.state();
        if state.ledger.is_queued(task_id) {
            state.waiters.insert(task_id.to_string(), sender);
        } else {
            sender
                .try_send(state.ledger.gpus_held_by(task_id))
                .expect("a fresh channel of capacity one has room for one message");
        }
        receiver
    }

    /// `task_id` gives back what it holds (known STOPPED) or leaves the queue (stopped while it
    /// waited); later tasks that now fit are admitted. Idempotent.
    pub fn release(&self, task_id: &str) {
        let mut state = self.state();
        state.waiters.remove(task_id);
        if state.ledger.release(task_id) {
            state.admit_and_wake();
        }
    }

    /// Why `task_id` waits for host resources, for `inspect` (`None`: it does not).
    pub fn waiting_reason(&self, task_id: &str) -> Option<String> {
        self.state().ledger.waiting_reason(task_id)
    }

    /// A copy of the ledger (diagnostics and tests).
    pub fn ledger(&self) -> HostResources {
        self.state().ledger.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capacity(memory_mib: u64, cpu_units: u64) -> HostCapacity {
        HostCapacity {
            memory_mib,
            cpu_units,
            reserved_tcp_ports: [22, 2375].into_iter().collect(),
            reserved_udp_ports: [53].into_iter().collect(),
            gpu_ids: Vec::new(),
        }
    }

    fn needs(memory_mib: u64, cpu_units: u64, ports: &[(u16, Protocol)]) -> ResourceNeeds {
        ResourceNeeds {
            memory_mib,
            cpu_units,
            ports: ports.iter().copied().collect(),
            gpus: 0,
        }
    }

    #[test]
    fn table_of_fits_against_what_is_consumed() {
        // (consumed by "held", asked, shortfall text or "" for fits)
        let tcp = Protocol::Tcp;
        let udp = Protocol::Udp;
        let table: &[(ResourceNeeds, ResourceNeeds, &str)] = &[
            (needs(0, 0, &[]), needs(1024, 2048, &[]), ""),
            (needs(524, 0, &[]), needs(500, 0, &[]), ""),
            (
                needs(724, 0, &[]),
                needs(512, 0, &[]),
                "memory: needs 512 MiB, 300 MiB free",
            ),
            (
                needs(0, 1024, &[]),
                needs(0, 2048, &[]),
                "cpu: needs 2048 units, 1024 free",
            ),
            (
                needs(0, 0, &[(8080, tcp)]),
                needs(0, 0, &[(8080, tcp)]),
                "port 8080/tcp: held by task held",
            ),
            // The same number on the other protocol is another port.
            (needs(0, 0, &[(8080, tcp)]), needs(0, 0, &[(8080, udp)]), ""),
            (
                needs(1000, 2048, &[(9000, udp)]),
                needs(100, 1, &[(9000, udp)]),
                "memory: needs 100 MiB, 24 MiB free; cpu: needs 1 units, 0 free; port 9000/udp: held by task held",
            ),
        ];
        for (held, asked, expected) in table {
            let mut ledger = HostResources::new(capacity(1024, 2048));
            ledger.consume("held", held.clone());
            assert_eq!(
                joined(&ledger.shortfalls(asked)),
                *expected,
                "held {held:?}, asked {asked:?}"
            );
            assert_eq!(ledger.fits(asked), expected.is_empty());
        }
    }

    #[test]
    fn table_of_tasks_that_can_never_fit() {
        let table: &[(ResourceNeeds, &str)] = &[
            (needs(1024, 2048, &[(8080, Protocol::Tcp)]), ""),
            (
                needs(1025, 0, &[]),
                "memory: needs 1025 MiB, the host offers 1024 MiB to tasks in all",
            ),
            (
                needs(0, 4096, &[]),
                "cpu: needs 4096 units, the host offers 2048 units to tasks in all",
            ),
            (
                needs(0, 0, &[(22, Protocol::Tcp)]),
                "port 22/tcp: reserved on this host (ECS_RESERVED_PORTS)",
            ),
            (
                needs(0, 0, &[(53, Protocol::Udp)]),
                "port 53/udp: reserved on this host (ECS_RESERVED_PORTS_UDP)",
            ),
            (needs(0, 0, &[(53, Protocol::Tcp)]), ""),
        ];
        let ledger = HostResources::new(capacity(1024, 2048));
        for (asked, expected) in table {
            assert_eq!(joined(&ledger.never_fits(asked)), *expected, "{asked:?}");
        }
    }

    #[test]
    fn release_gives_back_what_was_consumed_and_is_idempotent() {
        let mut ledger = HostResources::new(capacity(1024, 2048));
        ledger.consume("a", needs(512, 1024, &[(80, Protocol::Tcp)]));
        ledger.consume("b", needs(256, 0, &[]));
        assert_eq!(ledger.used(), (768, 1024));
        assert!(ledger.release("a"));
        assert_eq!(ledger.used(), (256, 0));
        assert!(ledger.fits(&needs(0, 0, &[(80, Protocol::Tcp)])));
        assert!(!ledger.release("a"), "a second release changes nothing");
        assert_eq!(ledger.used(), (256, 0));
        // Consuming twice holds once.
        ledger.consume("b", needs(256, 0, &[]));
        assert_eq!(ledger.used(), (256, 0));
    }

    #[test]
    fn the_queue_admits_first_come_first_served_and_nobody_overtakes() {
        let mut ledger = HostResources::new(capacity(1024, 4096));
        ledger.consume("running", needs(700, 0, &[]));
        // Enqueued out of order; the start number decides.
        ledger.enqueue("small-later", 7, needs(100, 0, &[]));
        ledger.enqueue("big-earlier", 5, needs(512, 0, &[]));
        assert_eq!(
            ledger.admit(),
            Vec::<String>::new(),
            "the head does not fit"
        );
        assert_eq!(ledger.queued(), vec!["big-earlier", "small-later"]);
        assert_eq!(
            ledger.waiting_reason("big-earlier").as_deref(),
            Some("memory: needs 512 MiB, 324 MiB free")
        );
        assert_eq!(
            ledger.waiting_reason("small-later").as_deref(),
            Some("its turn: task big-earlier waits for host resources ahead of it")
        );
        assert!(ledger.release("running"));
        assert_eq!(ledger.admit(), vec!["big-earlier", "small-later"]);
        assert_eq!(ledger.used(), (612, 0));
        assert_eq!(ledger.waiting_reason("big-earlier"), None);
    }

    #[test]
    fn leaving_the_queue_lets_the_next_one_in() {
        let mut ledger = HostResources::new(capacity(1024, 4096));
        ledger.consume("running", needs(600, 0, &[]));
        ledger.enqueue("waits", 2, needs(512, 0, &[]));
        ledger.enqueue("fits", 3, needs(400, 0, &[]));
        assert!(ledger.admit().is_empty());
        // The head is stopped while it waits.
        assert!(ledger.release("waits"));
        assert_eq!(ledger.admit(), vec!["fits"]);
        assert!(!ledger.is_queued("waits"));
        assert!(!ledger.is_admitted("waits"));
    }

    #[test]
    fn a_task_that_can_never_fit_blocks_nobody() {
        let mut ledger = HostResources::new(capacity(1024, 4096));
        ledger.enqueue("too-big", 1, needs(2048, 0, &[]));
        ledger.enqueue("reserved", 2, needs(0, 0, &[(22, Protocol::Tcp)]));
        ledger.enqueue("fits", 3, needs(512, 0, &[]));
        assert_eq!(ledger.admit(), vec!["fits"]);
        assert_eq!(
            ledger.waiting_reason("too-big").as_deref(),
            Some("memory: needs 2048 MiB, the host offers 1024 MiB to tasks in all")
        );
    }

    #[test]
    fn restore_consumes_beyond_the_capacity_and_queues_behind() {
        let mut ledger = HostResources::new(capacity(1024, 4096));
        ledger.consume("a", needs(800, 0, &[]));
        ledger.consume("b", needs(800, 0, &[]));
        assert_eq!(ledger.used(), (1600, 0));
        ledger.enqueue("c", 9, needs(300, 0, &[]));
        assert!(ledger.admit().is_empty());
        assert_eq!(
            ledger.waiting_reason("c").as_deref(),
            Some("memory: needs 300 MiB, 0 MiB free")
        );
        ledger.release("a");
        assert!(ledger.admit().is_empty(), "800 used of 1024 leaves 224 MiB");
        assert_eq!(ledger.used(), (800, 0));
        ledger.release("b");
        assert_eq!(ledger.admit(), vec!["c"]);
    }

    #[test]
    fn a_tasks_needs_follow_the_ecs_rules() {
        use crate::task::{ContainerDefinition, PortMapping, TaskDefinition};
        let mut web = ContainerDefinition::new("web", "busybox");
        web.memory_mib = Some(512);
        web.memory_reservation_mib = Some(128);
        web.cpu = Some(256);
        web.port_mappings = vec![
            PortMapping {
                container_port: 80,
                host_port: Some(8080),
                protocol: Protocol::Tcp,
                container_port_range: None,
            },
            PortMapping {
                container_port: 81,
                host_port: None,
                protocol: Protocol::Tcp,
                container_port_range: None,
            },
            PortMapping {
                container_port: 53,
                host_port: Some(5353),
                protocol: Protocol::Udp,
                container_port_range: None,
            },
        ];
        let mut sidecar = ContainerDefinition::new("sidecar", "busybox");
        sidecar.memory_mib = Some(64);
        sidecar.cpu = Some(128);
        let definition = TaskDefinition {
            roles: Default::default(),
            family: "needs".to_string(),
            revision: 1,
            network_mode: NetworkMode::Bridge,
            cpu: None,
            memory_mib: None,
            volumes: Vec::new(),
            containers: vec![web, sidecar],
            pid_mode: None,
            ipc_mode: None,
        };
        let task = Task::new("t".to_string(), "default", definition.clone(), 1, 0);
        assert_eq!(
            ResourceNeeds::of_task(&task),
            needs(
                128 + 64,
                384,
                &[(8080, Protocol::Tcp), (5353, Protocol::Udp)]
            )
        );
        // Task-level sizes win over the containers'.
        let mut sized = definition.clone();
        sized.cpu = Some(2048);
        sized.memory_mib = Some(1024);
        let task = Task::new("t".to_string(), "default", sized, 1, 0);
        assert_eq!(ResourceNeeds::of_task(&task).memory_mib, 1024);
        assert_eq!(ResourceNeeds::of_task(&task).cpu_units, 2048);
        // Host mode binds the container port on the host.
        let mut host = definition;
        host.network_mode = NetworkMode::Host;
        let task = Task::new("t".to_string(), "default", host, 1, 0);
        assert_eq!(
            ResourceNeeds::of_task(&task).ports,
            [
                (80, Protocol::Tcp),
                (81, Protocol::Tcp),
                (53, Protocol::Udp)
            ]
            .into_iter()
            .collect()
        );
    }

    #[test]
    fn the_queue_wakes_a_waiting_thread_once_admitted() {
        use crate::task::{ContainerDefinition, TaskDefinition};
        let task = |id: &str, sequence: u64, memory: u64| {
            let mut container = ContainerDefinition::new("app", "busybox");
            container.memory_mib = Some(memory);
            let definition = TaskDefinition {
                roles: Default::default(),
                family: "queue".to_string(),
                revision: 1,
                network_mode: NetworkMode::Bridge,
                cpu: None,
                memory_mib: None,
                volumes: Vec::new(),
                containers: vec![container],
                pid_mode: None,
                ipc_mode: None,
            };
            Task::new(id.to_string(), "default", definition, sequence, 0)
        };
        let queue = HostResourceQueue::new(capacity(1024, 4096));
        let first = task("first", 1, 600);
        let second = task("second", 2, 600);
        queue.enqueue(&first);
        queue.enqueue(&second);
        assert!(queue.ready("first").try_recv().is_ok(), "admitted at once");
        let waiting = queue.ready("second");
        assert!(waiting.try_recv().is_err());
        assert_eq!(
            queue.waiting_reason("second").as_deref(),
            Some("memory: needs 600 MiB, 424 MiB free")
        );
        queue.release("first");
        assert!(
            waiting.try_recv().is_ok(),
            "admitted once the first released"
        );
        assert!(queue.ready("unknown").try_recv().is_ok(), "not accounted");
        assert_eq!(
            queue.refusal(&task("huge", 3, 4096)).as_deref(),
            Some("memory: needs 4096 MiB, the host offers 1024 MiB to tasks in all")
        );
    }

    fn with_gpus(needed: usize) -> ResourceNeeds {
        ResourceNeeds {
            gpus: needed,
            ..needs(0, 0, &[])
        }
    }

    #[test]
    fn gpus_are_handed_out_by_id_and_counted_like_the_other_resources() {
        let host_gpus = |count: usize| HostCapacity {
            gpu_ids: (0..count).map(|index| format!("GPU-{index}")).collect(),
            ..capacity(1024, 4096)
        };
        let none = HostResources::new(host_gpus(0));
        assert_eq!(
            joined(&none.never_fits(&with_gpus(1))),
            "gpu: needs 1 GPU, the host has 0"
        );
        assert!(none.never_fits(&with_gpus(0)).is_empty());
        let mut ledger = HostResources::new(host_gpus(3));
        assert_eq!(
            joined(&ledger.never_fits(&with_gpus(4))),
            "gpu: needs 4 GPUs, the host has 3"
        );
        ledger.enqueue("a", 1, with_gpus(2));
        ledger.enqueue("b", 2, with_gpus(2));
        ledger.enqueue("c", 3, with_gpus(1));
        assert_eq!(ledger.admit(), vec!["a"], "b waits, and c behind it");
        assert_eq!(ledger.gpus_held_by("a"), vec!["GPU-0", "GPU-1"]);
        assert_eq!(
            ledger.waiting_reason("b").as_deref(),
            Some("gpu: needs 2 GPUs, 1 free")
        );
        assert!(ledger.release("a"));
        assert_eq!(ledger.admit(), vec!["b", "c"]);
        assert_eq!(ledger.gpus_held_by("b"), vec!["GPU-0", "GPU-1"]);
        assert_eq!(ledger.gpus_held_by("c"), vec!["GPU-2"]);
        assert_eq!(ledger.free_gpus(), 0);
        assert!(ledger.release("b"));
        assert_eq!(ledger.free_gpus(), 2);
        assert!(!ledger.release("b"));
    }

    #[test]
    fn restore_takes_back_the_gpus_the_containers_were_created_with() {
        let mut ledger = HostResources::new(HostCapacity {
            gpu_ids: vec!["GPU-0".into(), "GPU-1".into(), "GPU-2".into()],
            ..capacity(1024, 4096)
        });
        // Restored in start order: the first task's saved ids are the host's last.
        assert!(ledger
            .take_back_gpus("first", &["GPU-2".to_string()])
            .is_empty());
        assert!(ledger
            .take_back_gpus("second", &["GPU-0".to_string()])
            .is_empty());
        ledger.consume("first", with_gpus(1));
        ledger.consume("second", with_gpus(2));
        assert_eq!(ledger.gpus_held_by("first"), vec!["GPU-2"]);
        assert_eq!(
            ledger.gpus_held_by("second"),
            vec!["GPU-0", "GPU-1"],
            "it kept its id and got what it lacked"
        );
        assert_eq!(ledger.free_gpus(), 0);
    }
}
