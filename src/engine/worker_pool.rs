//! The Docker worker pool: up to `DECKHAND_DOCKER_CONCURRENCY` named threads that make the
//! Docker calls of every task, one call each at a time. Workers start as calls come and end
//! after a while without one ([`crate::worker_threads`]), so an idle agent holds none.
//!
//! Why a pool: a thread per call let a re-list after a reconnect (every task re-inspecting every
//! container) or a burst of submits put hundreds of concurrent calls on a daemon that serialises
//! much of its work anyway, and hundreds of threads on the host. With a pool the number of
//! concurrent Docker calls is `DECKHAND_DOCKER_CONCURRENCY`, whatever the number of tasks.
//!
//! Queue order: a priority per kind of call, FIFO within a kind — stops first (a stop is what
//! frees a host port or ends a task someone waits for), then inspections (they tell a task what
//! its containers are doing), then creates, starts, restarts and removals, then pulls. Pulls may
//! take minutes to hours, so they may occupy at most all workers but one (see [`pull_slots`]): a
//! stop always finds a worker that no pull can take.
//!
//! A job that panics does not take its worker down: the panic is caught, and the job's
//! `on_panic` half reports it (a task's Docker call comes back to the task as a failed call).
//!
//! The queue itself ([`PoolQueue`]) is a plain data structure with no threads, tested on its own.

use crate::text::panic_message;
use crate::worker_threads::{Refused, WorkQueue, WorkerSettings, WorkerThreads};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// `DECKHAND_DOCKER_CONCURRENCY` when not set (the config key table says the same; a test
/// checks it).
pub const DEFAULT_DOCKER_CONCURRENCY: usize = 8;

/// The kinds of call, in priority order (highest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CallClass {
    /// Stops (and kills).
    Stop,
    /// Inspections of containers.
    Inspect,
    /// Creates, starts, restarts, removals.
    Change,
    /// Image pulls (including the image check that decides whether to pull).
    Pull,
}

impl CallClass {
    const ALL: [CallClass; 4] = [
        CallClass::Stop,
        CallClass::Inspect,
        CallClass::Change,
        CallClass::Pull,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// How many workers pulls may occupy at once: all but one, so a stop or an inspection always
/// finds a worker no pull holds. A pool of one worker cannot keep one back: its pulls take the
/// only worker and every other call waits its turn (documented with the config key).
pub fn pull_slots(workers: usize) -> usize {
    workers.saturating_sub(1).max(1)
}

/// One unit of work: `work` runs on a worker; if it panics, `on_panic` runs with the panic's
/// message (both are dropped unrun when the pool shuts down first).
pub struct Job {
    pub class: CallClass,
    /// Says whose call this is, for the log (`task 1a2b3c4d: pull`).
    pub label: String,
    pub work: Box<dyn FnOnce() + Send>,
    pub on_panic: Box<dyn FnOnce(String) + Send>,
    /// Set by the job's owner when the call is no longer wanted (its task is stopping): the job
    /// is then taken out of turn, ahead of every class and whatever the pull slots, and its
    /// `work` answers without calling Docker. Pair setting it with [`DockerPool::wake`].
    pub unwanted: Option<Arc<AtomicBool>>,
}

impl Job {
    fn is_unwanted(&self) -> bool {
        self.unwanted
            .as_ref()
            .is_some_and(|unwanted| unwanted.load(Ordering::Relaxed))
    }
}

/// A job handed to a worker, and whether it holds a pull slot until it finishes.
#[derive(Debug)]
pub struct Taken {
    pub job: Job,
    pub holds_pull_slot: bool,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Job")
            .field("class", &self.class)
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

/// The waiting jobs, one FIFO per class, and how many pulls are running. No threads: the pool
/// keeps it under its lock.
#[derive(Debug)]
pub struct PoolQueue {
    queues: [VecDeque<Job>; 4],
    pulls_running: usize,
    pull_slots: usize,
}

impl PoolQueue {
    pub fn new(pull_slots: usize) -> PoolQueue {
        PoolQueue {
            queues: Default::default(),
            pulls_running: 0,
            pull_slots,
        }
    }

    pub fn push(&mut self, job: Job) {
        self.queues[job.class.index()].push_back(job);
    }

    /// The next job a free worker should run: an unwanted one first (it answers at once), else
    /// the oldest of the highest class that has one, skipping pulls while they already hold
    /// every pull slot. A pull taken holds its slot until [`PoolQueue::finished`].
    pub fn take(&mut self) -> Option<Taken> {
        for queue in &mut self.queues {
            if let Some(position) = queue.iter().position(Job::is_unwanted) {
                return queue.remove(position).map(|job| Taken {
                    job,
                    holds_pull_slot: false,
                });
            }
        }
        for class in CallClass::ALL {
            if class == CallClass::Pull && self.pulls_running >= self.pull_slots {
                continue;
            }
            if let Some(job) = self.queues[class.index()].pop_front() {
                let holds_pull_slot = class == CallClass::Pull;
                if holds_pull_slot {
                    self.pulls_running += 1;
                }
                return Some(Taken {
                    job,
                    holds_pull_slot,
                });
            }
        }
        None
    }

    /// A job that [`PoolQueue::take`] handed out has finished.
    pub fn finished(&mut self, held_pull_slot: bool) {
        if held_pull_slot {
            self.pulls_running = self.pulls_running.saturating_sub(1);
        }
    }

    pub fn len(&self) -> usize {
        self.queues.iter().map(VecDeque::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn clear(&mut self) -> usize {
        let dropped = self.len();
        for queue in &mut self.queues {
            queue.clear();
        }
        dropped
    }
}

/// Counters for diagnostics, tests and the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolStats {
    /// Worker threads alive now (started on demand, ended when idle or at shutdown).
    pub workers: usize,
    /// Jobs running now.
    pub busy: usize,
    /// The most jobs that ran at once since the pool started.
    pub peak_busy: usize,
    /// Jobs waiting for a worker.
    pub queued: usize,
    /// Jobs finished (including those that panicked).
    pub completed: u64,
    /// Jobs that panicked.
    pub panicked: u64,
    /// Worker threads started since the pool started.
    pub started: u64,
}

/// What [`DockerPool::shutdown`] saw.
pub type PoolShutdown = crate::worker_threads::Shutdown;

impl WorkQueue for PoolQueue {
    type Job = Job;
    /// Whether the job holds a pull slot until it finishes.
    type Receipt = bool;

    fn push(&mut self, job: Job) -> Result<(), Job> {
        PoolQueue::push(self, job);
        Ok(())
    }

    fn take(&mut self) -> Option<(Job, bool)> {
        PoolQueue::take(self).map(|taken| (taken.job, taken.holds_pull_slot))
    }

    fn finished(&mut self, held_pull_slot: bool) -> bool {
        PoolQueue::finished(self, held_pull_slot);
        // A pull slot freed: a worker waiting while only pulls are queued may take one now.
        held_pull_slot
    }

    fn len(&self) -> usize {
        PoolQueue::len(self)
    }

    fn clear(&mut self) -> usize {
        PoolQueue::clear(self)
    }
}

/// The pool: at most `DECKHAND_DOCKER_CONCURRENCY` workers, named `docker-worker-N`, started
/// as calls come and ended after [`crate::worker_threads::DEFAULT_IDLE_TIMEOUT`] without one.
pub struct DockerPool {
    workers: WorkerThreads<PoolQueue>,
    panicked: Arc<AtomicU64>,
}

impl DockerPool {
    /// A pool of at most `workers` threads (at least one), none started yet.
    pub fn start(workers: usize) -> std::io::Result<DockerPool> {
        Ok(DockerPool::with_idle_timeout(
            workers,
            crate::worker_threads::DEFAULT_IDLE_TIMEOUT,
        ))
    }

    /// The same, with workers that end after `idle_timeout` without a call (tests inject a
    /// short one).
    pub fn with_idle_timeout(workers: usize, idle_timeout: Duration) -> DockerPool {
        let workers = workers.max(1);
        let panicked = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&panicked);
        let settings = WorkerSettings {
            idle_timeout,
            ..WorkerSettings::new("docker-worker", workers)
        };
        let run = move |job: Job| {
            let Job {
                label,
                work,
                on_panic,
                ..
            } = job;
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
            if let Err(panic) = outcome {
                // Counted before the task hears of it, so whoever sees the answer sees the count.
                counted.fetch_add(1, Ordering::Relaxed);
                let message = panic_message(panic.as_ref());
                log::error!("{label}: the Docker call panicked: {message}");
                if let Err(panic) =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                        on_panic(message)
                    }))
                {
                    log::error!(
                        "{label}: reporting the panic failed too: {}",
                        panic_message(panic.as_ref())
                    );
                }
            }
        };
        DockerPool {
            workers: WorkerThreads::new(
                settings,
                PoolQueue::new(pull_slots(workers)),
                run,
                // The job's own guard above catches its panics; nothing reaches the pool's.
                |_, _| {},
            ),
            panicked,
        }
    }

    /// Queues a job. `Err` gives it back when the pool is shutting down (nobody will run it),
    /// or when no worker runs and none can be started.
    pub fn submit(&self, job: Job) -> Result<(), Job> {
        self.workers.submit(job).map_err(Refused::into_job)
    }

    /// Wakes the idle workers: a queued job was marked unwanted and can be answered now.
    pub fn wake(&self) {
        self.workers.with_queue(|_| ());
    }

    pub fn stats(&self) -> PoolStats {
        let stats = self.workers.stats();
        PoolStats {
            workers: stats.workers,
            busy: stats.busy,
            peak_busy: stats.peak_busy,
            queued: stats.queued,
            completed: stats.completed,
            panicked: self.panicked.load(Ordering::Relaxed),
            started: stats.started,
        }
    }

    /// Waits until exactly `count` workers are alive, or `deadline` passes.
    pub fn wait_for_workers(&self, count: usize, deadline: Duration) -> PoolStats {
        self.workers.wait_for_workers(count, deadline);
        self.stats()
    }

    /// Stops taking jobs, drops the queued ones, and joins every worker that ends within
    /// `deadline`. A worker still inside a Docker call then (a pull can take hours) is left to
    /// finish it on its own: nothing waits for its answer any more, and the process is about
    /// to exit. Idempotent.
    pub fn shutdown(&self, deadline: Duration) -> PoolShutdown {
        let shutdown = self.workers.shutdown(deadline);
        if shutdown.still_busy > 0 {
            log::info!(
                "{} Docker call(s) still running at shutdown; not waiting for them",
                shutdown.still_busy
            );
        }
        shutdown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::{bounded, unbounded};

    fn job(class: CallClass, label: &str) -> Job {
        Job {
            class,
            label: label.to_string(),
            work: Box::new(|| {}),
            on_panic: Box::new(|_| {}),
            unwanted: None,
        }
    }

    fn take_all(queue: &mut PoolQueue) -> Vec<String> {
        std::iter::from_fn(|| queue.take().map(|taken| taken.job.label)).collect()
    }

    #[test]
    fn a_free_worker_takes_stops_then_inspections_then_changes_then_pulls_fifo_within_each() {
        // (case, queued in this order, pull slots, taken in this order)
        type Case = (
            &'static str,
            Vec<(CallClass, &'static str)>,
            usize,
            Vec<&'static str>,
        );
        use CallClass::*;
        let cases: Vec<Case> = vec![
            (
                "priority over arrival",
                vec![(Pull, "p1"), (Change, "c1"), (Inspect, "i1"), (Stop, "s1")],
                7,
                vec!["s1", "i1", "c1", "p1"],
            ),
            (
                "FIFO within a class",
                vec![(Inspect, "i1"), (Stop, "s1"), (Inspect, "i2"), (Stop, "s2")],
                7,
                vec!["s1", "s2", "i1", "i2"],
            ),
            (
                "pulls only while a pull slot is free",
                vec![(Pull, "p1"), (Pull, "p2"), (Pull, "p3"), (Change, "c1")],
                2,
                vec!["c1", "p1", "p2"],
            ),
            (
                "a one-worker pool still pulls",
                vec![(Pull, "p1"), (Pull, "p2")],
                pull_slots(1),
                vec!["p1"],
            ),
        ];
        for (name, queued, slots, expected) in cases {
            let mut queue = PoolQueue::new(slots);
            for (class, label) in queued {
                queue.push(job(class, label));
            }
            assert_eq!(take_all(&mut queue), expected, "{name}");
        }
    }

    #[test]
    fn a_finished_pull_frees_its_slot() {
        let mut queue = PoolQueue::new(1);
        queue.push(job(CallClass::Pull, "p1"));
        queue.push(job(CallClass::Pull, "p2"));
        assert_eq!(take_all(&mut queue), vec!["p1"]);
        queue.finished(false);
        assert!(queue.take().is_none(), "only a pull frees a pull slot");
        queue.finished(true);
        assert_eq!(take_all(&mut queue), vec!["p2"]);
        assert!(queue.is_empty());
    }

    #[test]
    fn an_unwanted_job_is_taken_out_of_turn_without_a_pull_slot() {
        let mut queue = PoolQueue::new(1);
        let unwanted = Arc::new(AtomicBool::new(false));
        queue.push(job(CallClass::Pull, "p1"));
        queue.push(Job {
            unwanted: Some(Arc::clone(&unwanted)),
            ..job(CallClass::Pull, "p2 of a task that stops")
        });
        queue.push(job(CallClass::Pull, "p3"));
        queue.push(job(CallClass::Stop, "s1"));
        let first = queue.take().expect("a job");
        assert_eq!(first.job.label, "s1");
        let pull = queue.take().expect("a job");
        assert_eq!(
            (pull.job.label.as_str(), pull.holds_pull_slot),
            ("p1", true)
        );
        assert!(queue.take().is_none(), "the only pull slot is taken");
        unwanted.store(true, Ordering::Relaxed);
        let out_of_turn = queue.take().expect("the unwanted job");
        assert_eq!(
            (out_of_turn.job.label.as_str(), out_of_turn.holds_pull_slot),
            ("p2 of a task that stops", false)
        );
        queue.finished(false);
        assert!(queue.take().is_none(), "p1 still holds the slot");
        queue.finished(true);
        assert_eq!(take_all(&mut queue), vec!["p3"]);
    }

    #[test]
    fn pulls_keep_one_worker_free_from_two_workers_up() {
        let table = [(1, 1), (2, 1), (3, 2), (8, 7), (64, 63)];
        for (workers, slots) in table {
            assert_eq!(pull_slots(workers), slots, "{workers} workers");
        }
    }

    #[test]
    fn a_stop_runs_while_pulls_hold_every_pull_slot() {
        let pool = DockerPool::start(3).expect("the pool starts");
        let (release, released) = bounded::<()>(0);
        let (started, pulls_started) = unbounded();
        for number in 0..5 {
            let released = released.clone();
            let started = started.clone();
            pool.submit(Job {
                class: CallClass::Pull,
                label: format!("pull {number}"),
                work: Box::new(move || {
                    let _ = started.send(number);
                    // Held until the test ends (the channel disconnects).
                    let _ = released.recv();
                }),
                on_panic: Box::new(|_| {}),
                unwanted: None,
            })
            .expect("queued");
        }
        let deadline = Duration::from_secs(10);
        for _ in 0..2 {
            pulls_started
                .recv_timeout(deadline)
                .expect("two pulls start");
        }
        let (stopped, stop_done) = bounded(1);
        pool.submit(Job {
            class: CallClass::Stop,
            label: "stop".to_string(),
            work: Box::new(move || {
                let _ = stopped.send(());
            }),
            on_panic: Box::new(|_| {}),
            unwanted: None,
        })
        .expect("queued");
        assert!(
            stop_done.recv_timeout(deadline).is_ok(),
            "the stop waited behind pulls: {:?}",
            pool.stats()
        );
        assert!(
            pulls_started.try_recv().is_err(),
            "a third pull took the worker kept for other calls"
        );
        // The stop's worker is idle again once it has handed its answer over: wait for that
        // (it may not have happened yet when the answer arrives), then two pulls stay busy.
        let until = std::time::Instant::now() + deadline;
        while pool.stats().busy != 2 && std::time::Instant::now() < until {
            std::thread::yield_now();
        }
        assert_eq!(pool.stats().busy, 2, "{:?}", pool.stats());
        drop(release);
        let shutdown = pool.shutdown(deadline);
        assert_eq!(shutdown.joined, 3, "{shutdown:?}");
    }

    #[test]
    fn a_panicking_job_is_reported_and_its_worker_keeps_working() {
        let pool = DockerPool::start(1).expect("the pool starts");
        let (reported, panics) = unbounded();
        pool.submit(Job {
            class: CallClass::Change,
            label: "test job".to_string(),
            work: Box::new(|| panic!("the daemon said something odd")),
            on_panic: Box::new(move |message| {
                let _ = reported.send(message);
            }),
            unwanted: None,
        })
        .expect("queued");
        let deadline = Duration::from_secs(10);
        assert_eq!(
            panics.recv_timeout(deadline).as_deref(),
            Ok("the daemon said something odd")
        );
        let (ran, after) = bounded(1);
        pool.submit(Job {
            class: CallClass::Inspect,
            label: "next job".to_string(),
            work: Box::new(move || {
                let _ = ran.send(());
            }),
            on_panic: Box::new(|_| {}),
            unwanted: None,
        })
        .expect("queued");
        assert!(after.recv_timeout(deadline).is_ok(), "the worker survived");
        let stats = pool.stats();
        assert_eq!((stats.panicked, stats.workers), (1, 1), "{stats:?}");
        assert_eq!(pool.shutdown(deadline).joined, 1);
        assert_eq!(pool.stats().workers, 0, "the worker ended");
    }

    #[test]
    fn shutdown_joins_idle_workers_drops_queued_jobs_and_leaves_a_stuck_call() {
        let pool = DockerPool::start(2).expect("the pool starts");
        let (release, released) = bounded::<()>(0);
        let (started, running) = bounded(1);
        pool.submit(Job {
            class: CallClass::Pull,
            label: "endless pull".to_string(),
            work: Box::new(move || {
                let _ = started.send(());
                let _ = released.recv();
            }),
            on_panic: Box::new(|_| {}),
            unwanted: None,
        })
        .expect("queued");
        running
            .recv_timeout(Duration::from_secs(10))
            .expect("the pull runs");
        // Queued behind the pull (pull slots: 1 of 2 workers).
        pool.submit(job(CallClass::Pull, "queued pull"))
            .expect("queued");
        let shutdown = pool.shutdown(Duration::from_millis(200));
        assert_eq!(
            shutdown,
            PoolShutdown {
                joined: 1,
                still_busy: 1,
                dropped: 1
            }
        );
        assert!(
            pool.submit(job(CallClass::Stop, "late")).is_err(),
            "a stopped pool takes no job"
        );
        drop(release);
    }
}
