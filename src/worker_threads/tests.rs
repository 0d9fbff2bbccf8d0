//! Tests of [`WorkerThreads`]: workers start with the jobs, a burst gets one worker per job up
//! to the maximum, an idle worker ends after the (injected) idle timeout and a later job starts
//! a new one, a panicking job is reported and its worker goes on, a full queue and a stopping
//! pool give the job back. No sleeps: every wait is on the pool's own events, with a deadline.

use super::*;
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};

const DEADLINE: Duration = Duration::from_secs(10);
/// An idle timeout no test waits for.
const NEVER_IDLE: Duration = Duration::from_secs(3600);

type Job = Box<dyn FnOnce() + Send>;

fn pool(max_workers: usize, idle_timeout: Duration) -> WorkerThreads<BoundedFifo<Job>> {
    pool_reporting(max_workers, idle_timeout, unbounded().0)
}

fn pool_reporting(
    max_workers: usize,
    idle_timeout: Duration,
    panics: Sender<String>,
) -> WorkerThreads<BoundedFifo<Job>> {
    let settings = WorkerSettings {
        idle_timeout,
        ..WorkerSettings::new("test-worker", max_workers)
    };
    WorkerThreads::new(
        settings,
        BoundedFifo::new(4),
        |job: Job| job(),
        move |_, message| {
            let _ = panics.send(message);
        },
    )
}

/// A job that says it started, then holds its worker until `release` is dropped.
fn held_job(started: &Sender<usize>, number: usize, release: &Receiver<()>) -> Job {
    let started = started.clone();
    let release = release.clone();
    Box::new(move || {
        let _ = started.send(number);
        let _ = release.recv();
    })
}

#[test]
fn workers_start_with_the_jobs_up_to_the_maximum() {
    let pool = pool(3, NEVER_IDLE);
    assert_eq!(pool.stats().workers, 0, "no worker before the first job");
    let (started, starts) = unbounded();
    let (release, released) = bounded::<()>(0);
    for number in 0..4 {
        pool.submit(held_job(&started, number, &released))
            .unwrap_or_else(|_| panic!("job {number} refused"));
    }
    // Three run at once, each on a worker of its own; the fourth waits for one.
    for _ in 0..3 {
        starts.recv_timeout(DEADLINE).expect("a job starts");
    }
    let stats = pool.wait_for(|stats| stats.busy == 3, DEADLINE);
    assert_eq!(
        (stats.workers, stats.busy, stats.queued, stats.started),
        (3, 3, 1, 3),
        "{stats:?}"
    );
    assert!(
        starts.try_recv().is_err(),
        "a fourth job ran beyond the maximum"
    );
    drop(release);
    starts.recv_timeout(DEADLINE).expect("the fourth job runs");
    let stats = pool.wait_for(|stats| stats.completed == 4, DEADLINE);
    assert_eq!((stats.completed, stats.peak_workers), (4, 3), "{stats:?}");
    assert_eq!(pool.shutdown(DEADLINE).joined, 3);
}

#[test]
fn a_burst_gets_a_worker_per_job_even_when_one_was_waiting() {
    let pool = pool(4, NEVER_IDLE);
    let (done, finished) = unbounded();
    pool.submit(Box::new(move || {
        let _ = done.send(());
    }))
    .unwrap_or_else(|_| panic!("refused"));
    finished.recv_timeout(DEADLINE).expect("the first job ran");
    let stats = pool.wait_for(|stats| stats.waiting == 1, DEADLINE);
    assert_eq!((stats.workers, stats.waiting), (1, 1), "{stats:?}");

    // Two jobs at once while one worker waits: both run together, so a second worker starts.
    let (started, starts) = unbounded();
    let (release, released) = bounded::<()>(0);
    for number in 0..2 {
        pool.submit(held_job(&started, number, &released))
            .unwrap_or_else(|_| panic!("refused"));
    }
    for _ in 0..2 {
        starts
            .recv_timeout(DEADLINE)
            .unwrap_or_else(|_| panic!("both jobs run at once: {:?}", pool.stats()));
    }
    assert_eq!(
        pool.stats().started,
        2,
        "the waiting worker took one of them"
    );
    drop(release);
    assert_eq!(pool.shutdown(DEADLINE).joined, 2);
}

#[test]
fn an_idle_worker_ends_after_the_idle_timeout_and_a_later_job_starts_another() {
    let pool = pool(2, Duration::from_millis(20));
    let (done, finished) = unbounded();
    let job = |done: &Sender<()>| -> Job {
        let done = done.clone();
        Box::new(move || {
            let _ = done.send(());
        })
    };
    pool.submit(job(&done))
        .unwrap_or_else(|_| panic!("refused"));
    finished.recv_timeout(DEADLINE).expect("the job ran");
    let stats = pool.wait_for_workers(0, DEADLINE);
    assert_eq!(
        (stats.workers, stats.ended_idle, stats.started),
        (0, 1, 1),
        "{stats:?}"
    );

    pool.submit(job(&done))
        .unwrap_or_else(|_| panic!("refused"));
    finished
        .recv_timeout(DEADLINE)
        .expect("a new worker ran it");
    let stats = pool.wait_for_workers(0, DEADLINE);
    assert_eq!((stats.ended_idle, stats.started), (2, 2), "{stats:?}");
    // The first worker was joined when the second started (or, if its thread was not quite
    // finished then, now); the second is joined now.
    let shutdown = pool.shutdown(DEADLINE);
    assert!(
        (1..=2).contains(&shutdown.joined) && shutdown.still_busy == 0,
        "{shutdown:?}"
    );
}

#[test]
fn a_panicking_job_is_reported_and_its_worker_goes_on() {
    let (panics, reported) = unbounded();
    let pool = pool_reporting(1, NEVER_IDLE, panics);
    pool.submit(Box::new(|| panic!("the daemon said something odd")))
        .unwrap_or_else(|_| panic!("refused"));
    assert_eq!(
        reported.recv_timeout(DEADLINE).as_deref(),
        Ok("the daemon said something odd")
    );
    let (done, finished) = bounded(1);
    pool.submit(Box::new(move || {
        let _ = done.send(());
    }))
    .unwrap_or_else(|_| panic!("refused"));
    finished
        .recv_timeout(DEADLINE)
        .expect("the worker survived");
    let stats = pool.wait_for(|stats| stats.completed == 2, DEADLINE);
    assert_eq!(
        (stats.panicked, stats.workers, stats.started),
        (1, 1, 1),
        "{stats:?}"
    );
    assert_eq!(pool.shutdown(DEADLINE).joined, 1);
    assert_eq!(pool.stats().workers, 0);
}

#[test]
fn a_full_queue_and_a_stopping_pool_give_the_job_back() {
    let pool = pool(1, NEVER_IDLE);
    let (started, starts) = unbounded();
    let (release, released) = bounded::<()>(0);
    pool.submit(held_job(&started, 0, &released))
        .unwrap_or_else(|_| panic!("refused"));
    starts
        .recv_timeout(DEADLINE)
        .expect("the first job holds the worker");
    for number in 1..=4 {
        pool.submit(held_job(&started, number, &released))
            .unwrap_or_else(|_| panic!("job {number} refused"));
    }
    assert!(matches!(
        pool.submit(held_job(&started, 5, &released)),
        Err(Refused::Full(_))
    ));
    let shutdown = pool.shutdown(Duration::from_millis(50));
    assert_eq!(
        (shutdown.dropped, shutdown.still_busy),
        (4, 1),
        "{shutdown:?}"
    );
    assert!(matches!(
        pool.submit(held_job(&started, 6, &released)),
        Err(Refused::Stopping(_))
    ));
    drop(release);
}
