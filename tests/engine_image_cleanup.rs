//! Image cleanup (docs/ENGINE.md §15) on the scripted fake runtime: which images a cycle
//! removes and which it keeps (held by a task, declared in `tasks.d`, excluded, untracked,
//! too young), the per-cycle count, the disk cycle past it, the durable record, and the thread.
//! No sleeps: cycles are run directly, and the thread's work is waited for on the fake.

#[path = "support/definitions.rs"]
mod definitions;
#[path = "support/engine_events.rs"]
mod engine_events;
#[path = "support/fake_runtime.rs"]
mod fake_runtime;
#[path = "support/scratch.rs"]
mod scratch;

use deckhand::engine::image_cleanup::{CycleKind, ImageCleanupSettings, ProtectedImages};
use deckhand::engine::{EngineConfig, EngineHandle, TaskEngine};
use deckhand::task::TaskStatus;
use definitions::{container, task};
use engine_events::fast_engine_config;
use fake_runtime::{FakeRuntime, Op};
use std::sync::Arc;
use std::time::Duration;

const APP_IMAGE: &str = "test/app:1";
const DEADLINE: Duration = Duration::from_secs(20);

fn config() -> EngineConfig {
    EngineConfig {
        cleanup_wait: Duration::from_millis(10),
        ..fast_engine_config("image-cleanup")
    }
}

/// Settings that make every image old enough at once.
fn settings() -> ImageCleanupSettings {
    ImageCleanupSettings {
        minimum_age: Duration::ZERO,
        untracked_minimum_age: Duration::ZERO,
        ..ImageCleanupSettings::default()
    }
}

fn declared(names: &[&str]) -> ProtectedImages {
    let names: Vec<String> = names.iter().map(|name| name.to_string()).collect();
    Arc::new(move || Ok(names.clone()))
}

fn never_stop() -> bool {
    false
}

fn start() -> (Arc<FakeRuntime>, TaskEngine) {
    let fake = FakeRuntime::new();
    fake.add_image(APP_IMAGE);
    let engine = TaskEngine::start(fake.clone(), config()).expect("the engine starts");
    (fake, engine)
}

/// Runs a task of `image` to RUNNING and returns its id.
fn run_task(engine: &TaskEngine, image: &str) -> String {
    let id = engine
        .submit(task("imgclean", vec![container("app", image)]))
        .expect("accepted")
        .id;
    assert!(engine.wait_for_task(&id, DEADLINE, |task| {
        task.is_some_and(|task| task.known_status == TaskStatus::Running)
    }));
    id
}

fn stop_and_forget(engine: &TaskEngine, id: &str) {
    engine.stop(id).expect("stop accepted");
    assert!(
        engine.wait_for_task(id, DEADLINE, |task| task.is_none()),
        "the task was not cleaned up"
    );
}

#[test]
fn a_tracked_image_is_kept_while_its_task_exists_and_removed_once_it_is_cleaned_up() {
    let (fake, engine) = start();
    let id = run_task(&engine, APP_IMAGE);
    let record = engine.image_tracker().expect("tracked").record();
    let entry = record
        .get(&format!("sha256:{APP_IMAGE}"))
        .expect("recorded at the pull");
    assert!(entry.holders.contains(&id), "{entry:?}");
    assert!(entry.names.contains(APP_IMAGE));

    let cleaner = engine
        .image_cleaner(settings(), declared(&[]))
        .expect("a cleaner");
    let report = cleaner.run_cycle(CycleKind::Interval, &never_stop);
    assert!(report.removed.is_empty(), "{report:?}");
    assert!(fake.has_image(APP_IMAGE));

    stop_and_forget(&engine, &id);
    let record = engine.image_tracker().expect("tracked").record();
    assert!(
        record.images[0].holders.is_empty(),
        "released at cleanup: {record:?}"
    );
    let report = cleaner.run_cycle(CycleKind::Interval, &never_stop);
    assert_eq!(report.removed.len(), 1, "{report:?}");
    assert_eq!(report.removed[0].names, vec![APP_IMAGE.to_string()]);
    assert!(
        report.removed[0].reason.contains("none holds it"),
        "{report:?}"
    );
    assert!(!fake.has_image(APP_IMAGE));
    assert_eq!(cleaner.counters().images_removed_total(), 1);
    assert!(engine
        .image_tracker()
        .expect("tracked")
        .record()
        .images
        .is_empty());
    engine.shutdown();
}

#[test]
fn the_minimum_age_keeps_a_freshly_used_image() {
    let (fake, engine) = start();
    let id = run_task(&engine, APP_IMAGE);
    stop_and_forget(&engine, &id);
    let young = ImageCleanupSettings {
        minimum_age: Duration::from_secs(3600),
        ..settings()
    };
    let cleaner = engine
        .image_cleaner(young, declared(&[]))
        .expect("a cleaner");
    assert!(cleaner
        .run_cycle(CycleKind::Interval, &never_stop)
        .removed
        .is_empty());
    assert!(fake.has_image(APP_IMAGE));
    engine.shutdown();
}

#[test]
fn an_image_declared_in_tasks_d_or_excluded_is_never_removed() {
    let (fake, engine) = start();
    let id = run_task(&engine, APP_IMAGE);
    stop_and_forget(&engine, &id);
    let cleaner = engine
        .image_cleaner(settings(), declared(&[APP_IMAGE]))
        .expect("a cleaner");
    assert!(cleaner
        .run_cycle(CycleKind::Disk, &never_stop)
        .removed
        .is_empty());
    let excluded = ImageCleanupSettings {
        excluded_images: vec![APP_IMAGE.to_string()],
        ..settings()
    };
    let cleaner = engine
        .image_cleaner(excluded, declared(&[]))
        .expect("a cleaner");
    assert!(cleaner
        .run_cycle(CycleKind::Disk, &never_stop)
        .removed
        .is_empty());
    assert!(fake.has_image(APP_IMAGE));
    // A tasks.d that cannot be read skips the cycle.
    let unreadable: ProtectedImages = Arc::new(|| Err("permission denied".to_string()));
    let cleaner = engine
        .image_cleaner(settings(), unreadable)
        .expect("a cleaner");
    let report = cleaner.run_cycle(CycleKind::Interval, &never_stop);
    assert!(report
        .skipped
        .is_some_and(|reason| reason.contains("permission denied")));
    assert!(fake.has_image(APP_IMAGE));
    engine.shutdown();
}

#[test]
fn untracked_images_go_only_with_untracked_cleanup_oldest_first_up_to_the_count() {
    let (fake, engine) = start();
    for (image, created) in [("other/c:1", 300), ("other/a:1", 100), ("other/b:1", 200)] {
        fake.add_image(image);
        fake.set_image_created(image, created);
    }
    let off = engine
        .image_cleaner(settings(), declared(&[]))
        .expect("a cleaner");
    assert!(off
        .run_cycle(CycleKind::Interval, &never_stop)
        .removed
        .is_empty());

    let on = ImageCleanupSettings {
        untracked_cleanup: true,
        images_per_cycle: 2,
        excluded_images: vec![APP_IMAGE.to_string()],
        ..settings()
    };
    let cleaner = engine.image_cleaner(on, declared(&[])).expect("a cleaner");
    let report = cleaner.run_cycle(CycleKind::Interval, &never_stop);
    let removed: Vec<&str> = report.removed.iter().map(|r| r.names[0].as_str()).collect();
    assert_eq!(removed, ["other/a:1", "other/b:1"], "{report:?}");
    assert!(report.removed[0].reason.starts_with("untracked"));
    assert!(fake.has_image("other/c:1") && fake.has_image(APP_IMAGE));

    // Too young for NON_ECS_IMAGE_MINIMUM_CLEANUP_AGE (created now).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as i64;
    fake.set_image_created("other/c:1", now);
    let young = ImageCleanupSettings {
        untracked_cleanup: true,
        untracked_minimum_age: Duration::from_secs(3600),
        excluded_images: vec![APP_IMAGE.to_string()],
        ..settings()
    };
    let cleaner = engine
        .image_cleaner(young, declared(&[]))
        .expect("a cleaner");
    assert!(cleaner
        .run_cycle(CycleKind::Interval, &never_stop)
        .removed
        .is_empty());
    assert!(fake.has_image("other/c:1"));
    engine.shutdown();
}

#[test]
fn a_disk_cycle_goes_past_the_count_and_reports_when_it_cannot_get_below_the_low_mark() {
    let (fake, engine) = start();
    for image in ["other/a:1", "other/b:1", "other/c:1"] {
        fake.add_image(image);
    }
    fake.set_docker_root_dir(Some("/"));
    let full = ImageCleanupSettings {
        untracked_cleanup: true,
        images_per_cycle: 1,
        excluded_images: vec![APP_IMAGE.to_string()],
        disk_high_percent: 1,
        disk_low_percent: 0,
        ..settings()
    };
    let cleaner = engine
        .image_cleaner(full, declared(&[]))
        .expect("a cleaner");
    assert!(cleaner.disk_at_high_mark(), "1% of / is used");
    let ratio = cleaner.counters().disk_used_ratio();
    assert!(ratio > 0.0 && ratio <= 1.0, "{ratio}");
    let report = cleaner.run_cycle(CycleKind::Disk, &never_stop);
    assert_eq!(
        report.removed.len(),
        3,
        "past the per-cycle count: {report:?}"
    );
    assert!(report.disk_still_full, "a low mark of 0 is never reached");
    assert!(fake.has_image(APP_IMAGE), "excluded");
    // An interval cycle keeps to the count.
    for image in ["other/d:1", "other/e:1"] {
        fake.add_image(image);
    }
    assert_eq!(
        cleaner
            .run_cycle(CycleKind::Interval, &never_stop)
            .removed
            .len(),
        1
    );
    engine.shutdown();
}

#[test]
fn the_cleanup_thread_removes_on_its_interval_and_is_joined_at_shutdown() {
    let (fake, engine) = start();
    fake.add_image("other/a:1");
    let fast = ImageCleanupSettings {
        interval: Duration::from_millis(20),
        untracked_cleanup: true,
        excluded_images: vec![APP_IMAGE.to_string()],
        ..settings()
    };
    let counters = engine
        .start_image_cleanup(fast, declared(&[]))
        .expect("the thread starts");
    fake.wait_for(DEADLINE, |fake| !fake.has_image("other/a:1"))
        .unwrap_or_else(|message| panic!("{message}"));
    assert!(fake.count(Op::RemoveImage, "other/a:1") >= 1);
    assert!(fake
        .wait_for(DEADLINE, |_| counters.images_removed_total() == 1)
        .is_ok());
    engine.shutdown();
    assert!(fake.has_image(APP_IMAGE));
}

#[test]
fn a_removed_image_is_pulled_again_under_pull_behaviour_once() {
    let fake = FakeRuntime::new();
    let engine = TaskEngine::start(
        fake.clone(),
        EngineConfig {
            pull_behavior: deckhand::task::PullBehavior::Once,
            ..config()
        },
    )
    .expect("the engine starts");
    let first = run_task(&engine, APP_IMAGE);
    stop_and_forget(&engine, &first);
    let second = run_task(&engine, APP_IMAGE);
    stop_and_forget(&engine, &second);
    assert_eq!(
        fake.count(Op::Pull, APP_IMAGE),
        1,
        "once: pulled a single time"
    );

    let cleaner = engine
        .image_cleaner(settings(), declared(&[]))
        .expect("a cleaner");
    assert_eq!(
        cleaner
            .run_cycle(CycleKind::Interval, &never_stop)
            .removed
            .len(),
        1
    );
    assert!(!fake.has_image(APP_IMAGE));
    let third = run_task(&engine, APP_IMAGE);
    assert_eq!(
        fake.count(Op::Pull, APP_IMAGE),
        2,
        "pulled again after the removal"
    );
    stop_and_forget(&engine, &third);
    engine.shutdown();
}

#[test]
fn the_record_is_durable_and_a_restart_drops_holders_of_tasks_that_are_gone() {
    let directory = scratch::TempDir::new("deckhand-imgclean-durable");
    let fake = FakeRuntime::new();
    fake.add_image(APP_IMAGE);
    {
        let (store, loaded) =
            deckhand::state::StateStore::open(&directory.path).expect("the store opens");
        let engine =
            TaskEngine::start_durable(fake.clone(), config(), Arc::new(store), loaded.tasks)
                .expect("the engine starts");
        let id = run_task(&engine, APP_IMAGE);
        stop_and_forget(&engine, &id);
        let _running = run_task(&engine, APP_IMAGE);
        engine.shutdown();
    }
    let (store, loaded) = deckhand::state::StateStore::open(&directory.path).expect("reopens");
    let entry = loaded
        .images
        .get(&format!("sha256:{APP_IMAGE}"))
        .expect("recorded");
    assert_eq!(
        entry.holders.len(),
        1,
        "the running task holds it: {entry:?}"
    );
    // A holder whose task is gone (its release lost in a crash) is dropped at start.
    let mut images = loaded.images.clone();
    images.images[0]
        .holders
        .insert("task-that-is-gone".to_string());
    store.save_images(&images).expect("written");
    let engine = TaskEngine::start_durable(fake.clone(), config(), Arc::new(store), loaded.tasks)
        .expect("the engine restarts");
    let record = engine.image_tracker().expect("tracked").record();
    assert_eq!(record.images[0].holders.len(), 1, "{record:?}");
    assert!(!record.images[0].holders.contains("task-that-is-gone"));
    engine.shutdown();
}
