//! Image cleanup (docs/ENGINE.md §15) on the real Docker Engine, with images made for each test
//! (`dh-imgclean-<unique>-<role>:v1`: tags of the busybox test image for tasks to run, tiny
//! imported images of their own where each must be a separate image) and short ages: a tracked image
//! is removed once its task is cleaned up; an image a running task uses, one `tasks.d`
//! declares, an untracked one (unless untracked cleanup is on) and an excluded one are kept;
//! a disk cycle (marks 1% and 0%) goes past the per-cycle count and reports that it cannot get
//! below the low mark.
//!
//! Other tests use this Docker at the same time, so the cleaner here never sees an image name
//! it did not make: its runtime lists only the test's own tags (other names of the same image
//! are left out of the list) and refuses to remove any other name. Removing a tag of an image
//! that has other tags only untags it, so the shared test image stays.
//!
//! Needs Docker: without it these tests skip with a message, or fail when
//! `DECKHAND_REQUIRE_DOCKER=1`.

#[path = "support/definitions.rs"]
mod definitions;
#[path = "support/docker.rs"]
mod docker_support;

use deckhand::docker::DockerClient;
use deckhand::engine::image_cleanup::{CycleKind, ImageCleanupSettings, ProtectedImages};
use deckhand::engine::{EngineConfig, EngineHandle, TaskEngine};
use deckhand::runtime::{
    ContainerInfo, ContainerRuntime, ContainerSummary, CreateContainer, CreateVolume, EventFilter,
    EventStream, ImageInfo, ImageSummary, RegistryAuth, RuntimeError, VolumeInfo,
};
use deckhand::task::{PullBehavior, TaskStatus};
use definitions::{container, task, with_command};
use docker_support::{
    docker_client_or_skip, ensure_busybox_image, remove_image_tag, unique_id, TempDir, TEST_IMAGE,
};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(60);
const SERVE: &[&str] = &["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"];

/// The Docker client, seeing only the images whose names start with `prefix`.
struct OnlyTestImages {
    client: DockerClient,
    prefix: String,
}

impl ContainerRuntime for OnlyTestImages {
    fn pull_image(&self, image: &str, auth: Option<&RegistryAuth>) -> Result<(), RuntimeError> {
        self.client.pull_image(image, auth)
    }
    fn inspect_image(&self, image: &str) -> Result<ImageInfo, RuntimeError> {
        self.client.inspect_image(image)
    }
    fn create_container(&self, spec: &CreateContainer) -> Result<String, RuntimeError> {
        self.client.create_container(spec)
    }
    fn start_container(&self, id: &str) -> Result<(), RuntimeError> {
        self.client.start_container(id)
    }
    fn stop_container(&self, id: &str, grace: Duration) -> Result<(), RuntimeError> {
        self.client.stop_container(id, grace)
    }
    fn inspect_container(&self, id_or_name: &str) -> Result<ContainerInfo, RuntimeError> {
        self.client.inspect_container(id_or_name)
    }
    fn remove_container(&self, id: &str, volumes: bool) -> Result<(), RuntimeError> {
        self.client.remove_container(id, volumes)
    }
    fn list_containers(&self, labels: &[String]) -> Result<Vec<ContainerSummary>, RuntimeError> {
        self.client.list_containers(labels)
    }
    fn events(&self, filter: &EventFilter) -> Result<Box<dyn EventStream>, RuntimeError> {
        self.client.events(filter)
    }
    fn ping(&self) -> Result<(), RuntimeError> {
        self.client.ping()
    }
    fn remove_volume(&self, name: &str) -> Result<(), RuntimeError> {
        self.client.remove_volume(name)
    }
    fn create_volume(&self, spec: &CreateVolume) -> Result<(), RuntimeError> {
        self.client.create_volume(spec)
    }
    fn inspect_volume(&self, name: &str) -> Result<Option<VolumeInfo>, RuntimeError> {
        self.client.inspect_volume(name)
    }
    fn docker_root_dir(&self) -> Result<Option<String>, RuntimeError> {
        self.client.docker_root_dir()
    }
    fn list_images(&self) -> Result<Vec<ImageSummary>, RuntimeError> {
        let images = self.client.list_images()?;
        Ok(images
            .into_iter()
            .filter_map(|mut image| {
                image.repo_tags.retain(|tag| tag.starts_with(&self.prefix));
                image.repo_digests.clear();
                (!image.repo_tags.is_empty()).then_some(image)
            })
            .collect())
    }
    fn remove_image(&self, name: &str) -> Result<(), RuntimeError> {
        assert!(
            name.starts_with(&self.prefix),
            "image cleanup tried to remove {name}, which this test did not make"
        );
        self.client.remove_image(name)
    }
}

/// One test: its image prefix, its tags (removed at the end), its engine.
struct Harness {
    client: DockerClient,
    engine: TaskEngine,
    prefix: String,
    tags: Vec<String>,
}

impl Harness {
    fn new(test_name: &str) -> Option<Harness> {
        let client = docker_client_or_skip(test_name)?;
        ensure_busybox_image(&client);
        let unique = unique_id();
        let prefix = format!("dh-imgclean-{unique}-");
        let runtime = OnlyTestImages {
            client: client.clone(),
            prefix: prefix.clone(),
        };
        let config = EngineConfig {
            cluster: format!("deckhand-test-{unique}"),
            pull_behavior: PullBehavior::PreferCached,
            stop_timeout: Duration::from_secs(5),
            cleanup_wait: Duration::from_millis(10),
            ..EngineConfig::default()
        };
        let engine = TaskEngine::start(Arc::new(runtime), config).expect("the engine starts");
        Some(Harness {
            client,
            engine,
            prefix,
            tags: Vec::new(),
        })
    }

    /// Tags the test image as `<prefix><role>:v1`.
    fn tag(&mut self, role: &str) -> String {
        let tag = format!("{}{role}:v1", self.prefix);
        let output = Command::new("docker")
            .args(["tag", TEST_IMAGE, &tag])
            .output()
            .unwrap_or_else(|error| panic!("cannot run docker tag: {error}"));
        assert!(
            output.status.success(),
            "docker tag failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        self.tags.push(tag.clone());
        tag
    }

    /// Imports an image of its own (a one-file root file system holding the tag, so the id is
    /// unique) as `<prefix><role>:v1`. It runs nothing; untracked and disk tests only list and
    /// remove it.
    fn import(&mut self, role: &str) -> String {
        let repository = format!("{}{role}", self.prefix);
        let root = TempDir::new("deckhand-imgclean-rootfs");
        std::fs::write(root.path.join("name"), &repository).expect("write the file");
        let output = Command::new("tar")
            .args(["--numeric-owner", "--owner=0", "--group=0", "-C"])
            .arg(&root.path)
            .args(["-cf", "-", "name"])
            .output()
            .unwrap_or_else(|error| panic!("running tar: {error}"));
        assert!(output.status.success(), "tar failed");
        self.client
            .import_image(&output.stdout, &repository, "v1")
            .unwrap_or_else(|error| panic!("importing {repository}: {error}"));
        let tag = format!("{repository}:v1");
        self.tags.push(tag.clone());
        tag
    }

    fn exists(&self, image: &str) -> bool {
        match self.client.inspect_image(image) {
            Ok(_) => true,
            Err(RuntimeError::NoSuchImage { .. }) => false,
            Err(error) => panic!("inspecting {image}: {error}"),
        }
    }

    fn run_task(&self, image: &str) -> String {
        let id = self
            .engine
            .submit(task(
                "imgclean",
                vec![with_command(container("app", image), SERVE)],
            ))
            .expect("accepted")
            .id;
        assert!(
            self.engine.wait_for_task(&id, DEADLINE, |task| {
                task.is_some_and(|task| task.known_status == TaskStatus::Running)
            }),
            "the task did not run: {:?}",
            self.engine.task(&id)
        );
        id
    }

    fn stop_and_forget(&self, id: &str) {
        self.engine.stop(id).expect("stop accepted");
        assert!(
            self.engine
                .wait_for_task(id, DEADLINE, |task| task.is_none()),
            "the task was not cleaned up"
        );
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.engine.shutdown();
        for tag in &self.tags {
            remove_image_tag(tag);
        }
    }
}

fn settings() -> ImageCleanupSettings {
    ImageCleanupSettings {
        minimum_age: Duration::ZERO,
        untracked_minimum_age: Duration::ZERO,
        ..ImageCleanupSettings::default()
    }
}

fn nothing_declared() -> ProtectedImages {
    Arc::new(|| Ok(Vec::new()))
}

fn never_stop() -> bool {
    false
}

#[test]
fn a_tracked_image_is_removed_once_its_task_is_cleaned_up_and_kept_while_it_runs() {
    let Some(mut harness) = Harness::new("a_tracked_image_is_removed_once_its_task_is_cleaned_up")
    else {
        return;
    };
    let image = harness.tag("tracked");
    let task_id = harness.run_task(&image);
    let cleaner = harness
        .engine
        .image_cleaner(settings(), nothing_declared())
        .expect("a cleaner");
    let report = cleaner.run_cycle(CycleKind::Disk, &never_stop);
    assert!(
        report.removed.is_empty(),
        "a running task's image: {report:?}"
    );
    assert!(harness.exists(&image));

    harness.stop_and_forget(&task_id);
    let report = cleaner.run_cycle(CycleKind::Interval, &never_stop);
    assert_eq!(report.removed.len(), 1, "{report:?}");
    assert_eq!(report.removed[0].names, vec![image.clone()]);
    assert!(report.removed[0].size > 0);
    assert!(!harness.exists(&image), "the tag is gone");
    assert!(
        harness.exists(TEST_IMAGE),
        "the image's other names keep it"
    );
}

#[test]
fn an_image_declared_in_tasks_d_is_kept_after_its_task_is_cleaned_up() {
    let Some(mut harness) = Harness::new("an_image_declared_in_tasks_d_is_kept") else {
        return;
    };
    let image = harness.tag("declared");
    let tasks_dir = TempDir::new("deckhand-imgclean-tasks-d");
    std::fs::write(
        tasks_dir.path.join("app.json"),
        format!(
            r#"{{"family": "app", "containerDefinitions": [{{"name": "app", "image": "{image}", "memory": 32}}]}}"#
        ),
    )
    .expect("write the task file");
    let directory = tasks_dir.path.clone();
    let declared: ProtectedImages =
        Arc::new(move || deckhand::control::tasks_d::declared_images(&directory));
    let task_id = harness.run_task(&image);
    harness.stop_and_forget(&task_id);
    let cleaner = harness
        .engine
        .image_cleaner(settings(), declared)
        .expect("a cleaner");
    let report = cleaner.run_cycle(CycleKind::Disk, &never_stop);
    assert!(report.removed.is_empty(), "{report:?}");
    assert!(harness.exists(&image));
}

#[test]
fn untracked_images_are_kept_unless_untracked_cleanup_is_on_and_excluded_ones_always() {
    let Some(mut harness) =
        Harness::new("untracked_images_are_kept_unless_untracked_cleanup_is_on")
    else {
        return;
    };
    let untracked = harness.import("untracked");
    let excluded = harness.import("excluded");
    let off = harness
        .engine
        .image_cleaner(settings(), nothing_declared())
        .expect("a cleaner");
    assert!(off
        .run_cycle(CycleKind::Disk, &never_stop)
        .removed
        .is_empty());
    assert!(harness.exists(&untracked) && harness.exists(&excluded));

    let on = ImageCleanupSettings {
        untracked_cleanup: true,
        excluded_images: vec![excluded.clone()],
        ..settings()
    };
    let cleaner = harness
        .engine
        .image_cleaner(on, nothing_declared())
        .expect("a cleaner");
    let report = cleaner.run_cycle(CycleKind::Interval, &never_stop);
    assert_eq!(report.removed.len(), 1, "{report:?}");
    assert_eq!(report.removed[0].names, vec![untracked.clone()]);
    assert!(!harness.exists(&untracked));
    assert!(harness.exists(&excluded), "in ECS_EXCLUDE_UNTRACKED_IMAGE");
    assert!(harness.exists(TEST_IMAGE));
}

#[test]
fn a_full_disk_cycle_goes_past_the_count_and_says_it_cannot_get_below_the_low_mark() {
    let Some(mut harness) = Harness::new("a_full_disk_cycle_goes_past_the_count") else {
        return;
    };
    let images: Vec<String> = (1..=3)
        .map(|n| harness.import(&format!("disk{n}")))
        .collect();
    let full = ImageCleanupSettings {
        untracked_cleanup: true,
        images_per_cycle: 1,
        disk_high_percent: 1,
        disk_low_percent: 0,
        // Only the disk samples run cycles here.
        interval: Duration::from_secs(3600),
        disk_sample_interval: Duration::from_millis(50),
        ..settings()
    };
    let cleaner = harness
        .engine
        .image_cleaner(full.clone(), nothing_declared())
        .expect("a cleaner");
    assert!(
        cleaner.disk_at_high_mark(),
        "Docker's file system is at least 1% used"
    );
    let ratio = cleaner.counters().disk_used_ratio();
    assert!(ratio > 0.0 && ratio < 1.0, "{ratio}");
    let report = cleaner.run_cycle(CycleKind::Disk, &never_stop);
    assert_eq!(
        report.removed.len(),
        3,
        "past the per-cycle count of 1: {report:?}"
    );
    assert!(report.disk_still_full, "0% is never reached");
    for image in &images {
        assert!(!harness.exists(image), "{image}");
    }

    // The thread does the same on its own, at its first disk sample.
    let again: Vec<String> = (4..=5)
        .map(|n| harness.import(&format!("disk{n}")))
        .collect();
    let counters = harness
        .engine
        .start_image_cleanup(full, nothing_declared())
        .expect("the thread starts");
    let deadline = std::time::Instant::now() + DEADLINE;
    while counters.images_removed_total() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the disk cycle did not remove both images"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for image in &again {
        assert!(!harness.exists(image), "{image}");
    }
    assert!(harness.exists(TEST_IMAGE));
}
