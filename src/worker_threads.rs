//! Worker threads started on demand and let go when idle ([`WorkerThreads`]): the Docker worker
//! pool, the HTTP servers' workers and the state log's compaction run their jobs on one.
//!
//! Why: an agent that runs nothing most of the day should not hold a thread per possible
//! concurrent call (it held 35 threads idle, each with its stack and glibc's bookkeeping). A
//! job queued while no worker waits starts a worker, up to the maximum; a worker that finds
//! nothing to do for the idle timeout ends. A burst still gets every worker at once: a job
//! starts one whenever the jobs queued outnumber the workers waiting for them.
//!
//! What a job is, and in which order jobs are taken, is the queue's ([`WorkQueue`]), a plain
//! data structure under the pool's lock: the Docker pool's priorities and pull slots, or an
//! HTTP server's bounded FIFO of connections. A job that panics does not take its worker down.

use crate::text::panic_message;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a worker waits for a job before it ends, unless its pool says otherwise: long
/// enough that a steady trickle of work (a scrape every 15 s, a task's calls) mostly finds a
/// worker waiting, short enough that an idle agent lets its workers go soon after a burst.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// The jobs waiting for a worker, kept under the pool's lock.
pub trait WorkQueue: Send + 'static {
    type Job: Send + 'static;
    /// What the queue needs back when a job it handed out has finished (a pull slot to free).
    type Receipt: Send + 'static;

    /// Queues a job; `Err` gives it back when the queue is full.
    fn push(&mut self, job: Self::Job) -> Result<(), Self::Job>;
    /// The job a free worker should run now, if any may run.
    fn take(&mut self) -> Option<(Self::Job, Self::Receipt)>;
    /// A job from [`WorkQueue::take`] finished; `true` when that may let a waiting job run.
    fn finished(&mut self, receipt: Self::Receipt) -> bool;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Drops every queued job unrun; how many there were.
    fn clear(&mut self) -> usize;
}

/// The simplest queue: first in, first out, at most `capacity` jobs waiting.
pub struct BoundedFifo<J> {
    jobs: std::collections::VecDeque<J>,
    capacity: usize,
}

impl<J> BoundedFifo<J> {
    pub fn new(capacity: usize) -> BoundedFifo<J> {
        BoundedFifo {
            jobs: std::collections::VecDeque::new(),
            capacity,
        }
    }
}

impl<J: Send + 'static> WorkQueue for BoundedFifo<J> {
    type Job = J;
    type Receipt = ();

    fn push(&mut self, job: J) -> Result<(), J> {
        if self.jobs.len() >= self.capacity {
            return Err(job);
        }
        self.jobs.push_back(job);
        Ok(())
    }

    fn take(&mut self) -> Option<(J, ())> {
        self.jobs.pop_front().map(|job| (job, ()))
    }

    fn finished(&mut self, (): ()) -> bool {
        false
    }

    fn len(&self) -> usize {
        self.jobs.len()
    }

    fn clear(&mut self) -> usize {
        let dropped = self.jobs.len();
        self.jobs.clear();
        dropped
    }
}

/// Why [`WorkerThreads::submit`] gave a job back.
#[derive(Debug)]
pub enum Refused<J> {
    /// The pool is shutting down: nobody will run it.
    Stopping(J),
    /// The queue is full.
    Full(J),
    /// No worker runs and none could be started (the system is out of threads).
    NoWorker(J),
}

impl<J> Refused<J> {
    pub fn into_job(self) -> J {
        match self {
            Refused::Stopping(job) | Refused::Full(job) | Refused::NoWorker(job) => job,
        }
    }
}

/// How a pool's workers are made.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// Thread names are `<name>-<n>`, `n` counting the workers started.
    pub name: String,
    /// The most workers at once (at least one).
    pub max_workers: usize,
    /// How long a worker waits for a job before it ends.
    pub idle_timeout: Duration,
    /// The stack reserved per worker; the standard library's default when `None`.
    pub stack_size: Option<usize>,
}

impl WorkerSettings {
    pub fn new(name: &str, max_workers: usize) -> WorkerSettings {
        WorkerSettings {
            name: name.to_string(),
            max_workers: max_workers.max(1),
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            stack_size: None,
        }
    }
}

/// Counters for diagnostics, tests and the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WorkerStats {
    /// Worker threads alive now.
    pub workers: usize,
    /// Workers waiting for a job now.
    pub waiting: usize,
    /// Jobs running now.
    pub busy: usize,
    /// The most jobs that ran at once since the pool started.
    pub peak_busy: usize,
    /// The most workers alive at once.
    pub peak_workers: usize,
    /// Jobs waiting for a worker.
    pub queued: usize,
    /// Jobs finished (including those that panicked).
    pub completed: u64,
    /// Jobs that panicked.
    pub panicked: u64,
    /// Workers started since the pool started.
    pub started: u64,
    /// Workers that ended after the idle timeout.
    pub ended_idle: u64,
}

/// What [`WorkerThreads::shutdown`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shutdown {
    /// Worker threads that ended and were joined.
    pub joined: usize,
    /// Worker threads still inside a job at the deadline, left to finish on their own.
    pub still_busy: usize,
    /// Queued jobs dropped unrun.
    pub dropped: usize,
}

struct State<Q> {
    queue: Q,
    stopping: bool,
    stats: WorkerStats,
    /// Handles of workers started; those that ended are joined at the next start or shutdown.
    threads: Vec<JoinHandle<()>>,
}

type Runner<J> = Box<dyn Fn(J) + Send + Sync>;
type PanicHandler = Box<dyn Fn(&str, String) + Send + Sync>;

struct Shared<Q: WorkQueue> {
    settings: WorkerSettings,
    run: Runner<Q::Job>,
    /// Called with the thread's name and the message when a job panicked.
    on_panic: PanicHandler,
    state: Mutex<State<Q>>,
    /// Signalled when a job is queued, a finished job may free another, or the pool stops.
    work_available: Condvar,
    /// Signalled when a worker starts, ends, begins waiting or finishes a job, for
    /// [`WorkerThreads::wait_for`].
    workers_changed: Condvar,
}

impl<Q: WorkQueue> Shared<Q> {
    fn state(&self) -> MutexGuard<'_, State<Q>> {
        // Every change under the lock is a few counters and the queue: a panic elsewhere
        // cannot leave them half-written.
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

/// The pool. Dropping it without [`WorkerThreads::shutdown`] lets its idle workers end after
/// the idle timeout.
pub struct WorkerThreads<Q: WorkQueue> {
    shared: Arc<Shared<Q>>,
}

impl<Q: WorkQueue> WorkerThreads<Q> {
    /// A pool with no worker yet: `run` runs each job on a worker; `on_panic` hears of a job
    /// that panicked (after the pool logged it).
    pub fn new(
        settings: WorkerSettings,
        queue: Q,
        run: impl Fn(Q::Job) + Send + Sync + 'static,
        on_panic: impl Fn(&str, String) + Send + Sync + 'static,
    ) -> WorkerThreads<Q> {
        WorkerThreads {
            shared: Arc::new(Shared {
                settings,
                run: Box::new(run),
                on_panic: Box::new(on_panic),
                state: Mutex::new(State {
                    queue,
                    stopping: false,
                    stats: WorkerStats::default(),
                    threads: Vec::new(),
                }),
                work_available: Condvar::new(),
                workers_changed: Condvar::new(),
            }),
        }
    }

    /// Queues a job, starting a worker when the queued jobs outnumber the workers waiting and
    /// the pool is below its maximum.
    pub fn submit(&self, job: Q::Job) -> Result<(), Refused<Q::Job>> {
        let mut state = self.shared.state();
        if state.stopping {
            return Err(Refused::Stopping(job));
        }
        let needs_worker = state.queue.len() + 1 > state.stats.waiting
            && state.stats.workers < self.shared.settings.max_workers;
        if needs_worker {
            if let Err(error) = start_worker(&self.shared, &mut state) {
                if state.stats.workers == 0 {
                    log::error!(
                        "{}: cannot start a worker thread: {error}",
                        self.shared.settings.name
                    );
                    return Err(Refused::NoWorker(job));
                }
                // The running workers take it in turn.
                log::warn!(
                    "{}: cannot start another worker thread: {error}",
                    self.shared.settings.name
                );
            }
        }
        if let Err(job) = state.queue.push(job) {
            return Err(Refused::Full(job));
        }
        drop(state);
        self.shared.work_available.notify_one();
        Ok(())
    }

    /// Runs `change` on the queue under the pool's lock, then wakes every waiting worker (a
    /// job may have become ready to take).
    pub fn with_queue<T>(&self, change: impl FnOnce(&mut Q) -> T) -> T {
        // Under the lock: a worker is then either before its look at the queue (and sees the
        // change) or already waiting (and is woken).
        let mut state = self.shared.state();
        let answer = change(&mut state.queue);
        self.shared.work_available.notify_all();
        answer
    }

    pub fn stats(&self) -> WorkerStats {
        let state = self.shared.state();
        WorkerStats {
            queued: state.queue.len(),
            ..state.stats
        }
    }

    /// Waits until exactly `count` workers are alive, or `deadline` passes; the stats then.
    pub fn wait_for_workers(&self, count: usize, deadline: Duration) -> WorkerStats {
        self.wait_for(|stats| stats.workers == count, deadline)
    }

    /// Waits until `condition` holds of the stats (checked whenever a worker starts, ends,
    /// begins waiting or finishes a job), or `deadline` passes; the stats then.
    pub fn wait_for(
        &self,
        condition: impl Fn(&WorkerStats) -> bool,
        deadline: Duration,
    ) -> WorkerStats {
        let until = Instant::now() + deadline;
        let mut state = self.shared.state();
        loop {
            let stats = WorkerStats {
                queued: state.queue.len(),
                ..state.stats
            };
            if condition(&stats) {
                break;
            }
            let now = Instant::now();
            if now >= until {
                break;
            }
            state = self
                .shared
                .workers_changed
                .wait_timeout(state, until - now)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|poison| poison.into_inner().0);
        }
        WorkerStats {
            queued: state.queue.len(),
            ..state.stats
        }
    }

    /// Stops taking jobs, drops the queued ones, and joins every worker that ends within
    /// `deadline`. A worker still inside a job then (a pull can take hours) is left to finish
    /// it on its own: nothing waits for its answer any more, and the process is about to exit.
    /// Idempotent.
    pub fn shutdown(&self, deadline: Duration) -> Shutdown {
        let (dropped, threads) = {
            let mut state = self.shared.state();
            state.stopping = true;
            (state.queue.clear(), std::mem::take(&mut state.threads))
        };
        self.shared.work_available.notify_all();
        let stats = self.wait_for_workers(0, deadline);
        let mut joined = 0;
        let mut still_busy = 0;
        for thread in threads {
            // A worker that said it is leaving is past its last job: joining it returns at once.
            if stats.workers == 0 || thread.is_finished() {
                if thread.join().is_err() {
                    log::error!("a {} worker thread panicked", self.shared.settings.name);
                }
                joined += 1;
            } else {
                still_busy += 1;
            }
        }
        Shutdown {
            joined,
            still_busy,
            dropped,
        }
    }
}

/// Starts one worker; called under the lock, so the counts never disagree with the threads.
fn start_worker<Q: WorkQueue>(
    shared: &Arc<Shared<Q>>,
    state: &mut State<Q>,
) -> std::io::Result<()> {
    // Ended workers' handles: join them now, so the list holds at most one per live worker
    // plus those that ended since the last start.
    let (ended, live): (Vec<_>, Vec<_>) = std::mem::take(&mut state.threads)
        .into_iter()
        .partition(JoinHandle::is_finished);
    state.threads = live;
    for thread in ended {
        let _ = thread.join();
    }
    let number = state.stats.started + 1;
    let mut builder =
        std::thread::Builder::new().name(format!("{}-{number}", shared.settings.name));
    if let Some(size) = shared.settings.stack_size {
        builder = builder.stack_size(size);
    }
    let for_worker = Arc::clone(shared);
    let thread = builder.spawn(move || run_worker(&for_worker))?;
    state.threads.push(thread);
    state.stats.started = number;
    state.stats.workers += 1;
    state.stats.peak_workers = state.stats.peak_workers.max(state.stats.workers);
    shared.workers_changed.notify_all();
    Ok(())
}

fn run_worker<Q: WorkQueue>(shared: &Shared<Q>) {
    let mut state = shared.state();
    let mut idle_since = Instant::now();
    loop {
        if state.stopping {
            break;
        }
        if let Some((job, receipt)) = state.queue.take() {
            state.stats.busy += 1;
            state.stats.peak_busy = state.stats.peak_busy.max(state.stats.busy);
            drop(state);
            let outcome =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (shared.run)(job)));
            let panicked = outcome.err().map(|panic| panic_message(panic.as_ref()));
            if let Some(message) = &panicked {
                let thread = std::thread::current();
                let name = thread.name().unwrap_or("worker");
                log::error!("{name}: a job panicked: {message}");
            }
            state = shared.state();
            state.stats.busy -= 1;
            state.stats.completed += 1;
            if panicked.is_some() {
                state.stats.panicked += 1;
            }
            let frees_another = state.queue.finished(receipt);
            if let Some(message) = panicked {
                // Counted before the job's owner hears of it, so whoever sees the answer sees
                // the count; told without the lock, as it may send on channels.
                drop(state);
                let thread = std::thread::current();
                let name = thread.name().unwrap_or("worker").to_string();
                if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    (shared.on_panic)(&name, message)
                })) {
                    log::error!(
                        "{name}: reporting the panic failed too: {}",
                        panic_message(panic.as_ref())
                    );
                }
                state = shared.state();
            }
            if frees_another {
                shared.work_available.notify_one();
            }
            shared.workers_changed.notify_all();
            idle_since = Instant::now();
            continue;
        }
        let idle_until = idle_since + shared.settings.idle_timeout;
        let now = Instant::now();
        if now >= idle_until {
            state.stats.ended_idle += 1;
            break;
        }
        state.stats.waiting += 1;
        shared.workers_changed.notify_all();
        state = shared
            .work_available
            .wait_timeout(state, idle_until - now)
            .map(|(guard, _)| guard)
            .unwrap_or_else(|poison| poison.into_inner().0);
        state.stats.waiting -= 1;
    }
    state.stats.workers -= 1;
    drop(state);
    shared.workers_changed.notify_all();
}

#[cfg(test)]
mod tests;
