//! Image cleanup (docs/ENGINE.md §15): the record of the images deckhand's tasks used
//! ([`ImageTracker`]), and the cleaner thread that removes the ones nobody needs any more, on a
//! timer and, at once, when the disk holding Docker's root directory fills up.
//!
//! Tracking: a worker records, after a container's pull step succeeded (pulled, or the image
//! found locally), that the task uses the image (its id from an image inspection) — see
//! `managed_task/calls.rs`; the engine releases every image of a task once its containers are
//! cleaned up (`shared.rs`, `forget`). Each release is written to `images.json` at once; a use is
//! written with the next save, off the task's way to its create ([`ImageTracker::record_use`]).
//!
//! A cycle lists Docker's images, chooses with the pure [`select::select_removable`], and removes
//! one image at a time (`DELETE /images/{name}` per name, never forced: Docker keeps an image a
//! container uses, 409, and prunes shared layers itself). Right before each removal, under the
//! tracker's lock, it looks again at what protects the image (the holders, the engine's live
//! tasks, `tasks.d`); a pull waits on that lock before it starts ([`ImageTracker::before_pull`]),
//! so a task's pull never overlaps the removal of its image unseen. An interval cycle removes at
//! most `ECS_NUM_IMAGES_DELETE_PER_CYCLE` images; a disk cycle (usage at or above the high mark,
//! sampled every 10 s) goes on until usage is below the low mark or nothing more may go, and
//! says so when it cannot get there.
//!
//! With cleanup off (`ECS_DISABLE_IMAGE_CLEANUP`, pull behaviour `prefer-cached`) the same
//! thread still samples the disk every 10 s for `deckhand_image_disk_used_ratio`, and removes
//! nothing ([`ImageCleanupSettings::remove_images`]).

mod disk;
pub mod select;

pub use disk::used_ratio_of;
pub use select::{normalize_image_name, select_removable, Removal, Selection, SelectionInput};

use crate::clock::now_millis;
use crate::runtime::{ContainerRuntime, RuntimeError};
use crate::state::{ImagesRecord, StateStore};

/// The [`ForgetPulled`] of an engine: names matched in Docker's spelling, taken out of this
/// run's set of pulled images and out of the durable record in `agent.json`.
pub fn forget_pulled_images(
    pulled_this_run: Arc<Mutex<std::collections::HashSet<String>>>,
    store: Option<Arc<StateStore>>,
) -> ForgetPulled {
    Arc::new(move |removed: &[String]| {
        let removed: Vec<String> = removed.iter().map(|n| normalize_image_name(n)).collect();
        let matches = |name: &String| removed.contains(&normalize_image_name(name));
        pulled_this_run
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .retain(|name| !matches(name));
        if let Some(store) = &store {
            let names: Vec<String> = store
                .agent()
                .images_pulled
                .keys()
                .filter(|name| matches(name))
                .cloned()
                .collect();
            if let Err(error) = store.forget_images_pulled(&names) {
                log::warn!("image cleanup: cannot forget that {names:?} were pulled: {error}");
            }
        }
    })
}
use crate::task::Millis;
use crossbeam_channel::{select, tick, Receiver};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How often the disk usage is sampled.
pub const DISK_SAMPLE_INTERVAL: Duration = Duration::from_secs(10);

/// The images deckhand's tasks used, in memory and in `images.json`.
pub struct ImageTracker {
    record: Mutex<ImagesRecord>,
    store: Option<Arc<StateStore>>,
    /// A use recorded in memory that `images.json` does not hold yet (see [`Self::record_use`]).
    unsaved_use: AtomicBool,
}

impl std::fmt::Debug for ImageTracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ImageTracker")
    }
}

impl ImageTracker {
    /// Starts from what the store loaded (`record`), writing each change there when `store` is
    /// set.
    pub fn new(record: ImagesRecord, store: Option<Arc<StateStore>>) -> ImageTracker {
        ImageTracker {
            record: Mutex::new(record),
            store,
            unsaved_use: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, ImagesRecord> {
        // Changed in memory only after the decision; a poisoned lock holds a consistent record.
        self.record
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn save(&self, record: &ImagesRecord) {
        // Called under the record's lock: what is written holds every use recorded so far.
        self.unsaved_use.store(false, Ordering::Relaxed);
        if let Some(store) = &self.store {
            // Not fatal: the image is protected while its task exists anyway, and a lost
            // release only keeps an image longer.
            if let Err(error) = store.save_images(record) {
                log::warn!("cannot record the images tasks use: {error}");
            }
        }
    }

    /// A copy of the record.
    pub fn record(&self) -> ImagesRecord {
        self.lock().clone()
    }

    /// Waits while a removal is under way, so that a pull starts either before the cleaner
    /// looked at who needs the image, or after the image is gone.
    pub fn before_pull(&self) {
        drop(self.lock());
    }

    /// Task `task_id` uses image `image_id` by `name`. Recorded in memory only: this runs on the
    /// task's way to its create, and the use is written with the next save (a release, a
    /// cleanup cycle, the start-up's holder check, the engine's shutdown, or [`Self::flush`]),
    /// not with a synchronous write of its own. A crash before then loses only the use: the image
    /// stays protected while its task exists (cleanup checks the live tasks), and an image
    /// without a record is untracked, which cleanup keeps unless untracked cleanup is on.
    pub fn record_use(&self, task_id: &str, name: &str, image_id: &str, now: Millis) {
        let mut record = self.lock();
        if record.record_use(image_id, name, task_id, now) {
            self.unsaved_use.store(true, Ordering::Relaxed);
        }
    }

    /// Writes `images.json` if a use is recorded only in memory.
    pub fn flush(&self) {
        if self.unsaved_use.load(Ordering::Relaxed) {
            let record = self.lock();
            self.save(&record);
        }
    }

    /// Task `task_id` is cleaned up: its images are free (and were last used now).
    pub fn release_task(&self, task_id: &str, now: Millis) {
        let mut record = self.lock();
        if record.release_task(task_id, now) {
            self.save(&record);
        }
    }

    /// Drops holders that are no task the engine has (released before a crash was written).
    pub fn keep_holders(&self, live_tasks: &BTreeSet<String>) {
        let mut record = self.lock();
        if record.keep_holders(live_tasks) {
            self.save(&record);
        }
    }
}

/// Image cleanup's settings (the agent maps `ECS_*` keys onto them).
#[derive(Debug, Clone, PartialEq)]
pub struct ImageCleanupSettings {
    /// `ECS_IMAGE_CLEANUP_INTERVAL`.
    pub interval: Duration,
    /// `ECS_IMAGE_MINIMUM_CLEANUP_AGE`.
    pub minimum_age: Duration,
    /// `ECS_NUM_IMAGES_DELETE_PER_CYCLE`.
    pub images_per_cycle: u32,
    /// `ECS_ENABLE_UNTRACKED_IMAGE_CLEANUP`.
    pub untracked_cleanup: bool,
    /// `NON_ECS_IMAGE_MINIMUM_CLEANUP_AGE`.
    pub untracked_minimum_age: Duration,
    /// `ECS_EXCLUDE_UNTRACKED_IMAGE`.
    pub excluded_images: Vec<String>,
    /// `DECKHAND_IMAGE_CLEANUP_DISK_HIGH`, percent.
    pub disk_high_percent: u8,
    /// `DECKHAND_IMAGE_CLEANUP_DISK_LOW`, percent.
    pub disk_low_percent: u8,
    /// How often the disk is sampled ([`DISK_SAMPLE_INTERVAL`]).
    pub disk_sample_interval: Duration,
    /// `false`: cleanup is off, and the thread only samples the disk for the metrics.
    pub remove_images: bool,
}

impl Default for ImageCleanupSettings {
    /// ECS's defaults.
    fn default() -> ImageCleanupSettings {
        ImageCleanupSettings {
            interval: Duration::from_secs(30 * 60),
            minimum_age: Duration::from_secs(3600),
            images_per_cycle: 5,
            untracked_cleanup: false,
            untracked_minimum_age: Duration::from_secs(3600),
            excluded_images: Vec::new(),
            disk_high_percent: 85,
            disk_low_percent: 80,
            disk_sample_interval: DISK_SAMPLE_INTERVAL,
            remove_images: true,
        }
    }
}

/// Image names a cycle must keep, asked afresh before each cycle and each removal. An error
/// (the `tasks.d` directory unreadable) skips the cycle: what it protects is unknown.
pub type ProtectedImages = Arc<dyn Fn() -> Result<Vec<String>, String> + Send + Sync>;

/// Forgets that images of these names (as Docker lists them) were pulled, so pull behaviour
/// `once` pulls them again after a removal.
pub type ForgetPulled = Arc<dyn Fn(&[String]) + Send + Sync>;

/// What image cleanup counts, for metrics: lock-free, read from any thread.
#[derive(Debug, Default)]
pub struct ImageCleanupCounters {
    images_removed: AtomicU64,
    /// The last disk usage sampled, as `f64` bits; 0 until the first sample.
    disk_used_ratio_bits: AtomicU64,
}

impl ImageCleanupCounters {
    /// Images removed since the agent started (`deckhand_images_removed_total`).
    pub fn images_removed_total(&self) -> u64 {
        self.images_removed.load(Ordering::Relaxed)
    }

    /// The last sampled share of Docker's file system in use, 0–1
    /// (`deckhand_image_disk_used_ratio`).
    pub fn disk_used_ratio(&self) -> f64 {
        f64::from_bits(self.disk_used_ratio_bits.load(Ordering::Relaxed))
    }

    fn set_disk_used_ratio(&self, ratio: f64, high_percent: u8) {
        self.disk_used_ratio_bits
            .store(ratio.clamp(0.0, 1.0).to_bits(), Ordering::Relaxed);
        let metrics = crate::metrics::global();
        metrics.set_image_disk_used_ratio(ratio);
        metrics.set_image_disk_high_ratio(f64::from(high_percent) / 100.0);
    }

    fn count_removal(&self) {
        self.images_removed.fetch_add(1, Ordering::Relaxed);
        crate::metrics::global().images_removed(1);
    }
}

/// Why a cycle runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CycleKind {
    /// The interval: at most `images_per_cycle` images.
    Interval,
    /// The disk reached the high mark: until below the low mark.
    Disk,
}

/// One image a cycle removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemovedImage {
    pub image_id: String,
    pub names: Vec<String>,
    pub size: i64,
    pub reason: String,
}

/// What a cycle did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CycleReport {
    pub removed: Vec<RemovedImage>,
    /// A disk cycle that ended with usage still at or above the low mark.
    pub disk_still_full: bool,
    /// Why the cycle did nothing (Docker away, `tasks.d` unreadable).
    pub skipped: Option<String>,
}

/// The cleaner: one cycle at a time, on its own thread ([`ImageCleaner::spawn`]) or called
/// directly by tests.
pub struct ImageCleaner {
    runtime: Arc<dyn ContainerRuntime>,
    tracker: Arc<ImageTracker>,
    settings: ImageCleanupSettings,
    /// `tasks.d`'s images (wired by the agent).
    declared: ProtectedImages,
    /// The images of every task the engine has (not cleaned up yet).
    live: ProtectedImages,
    forget_pulled: ForgetPulled,
    counters: Arc<ImageCleanupCounters>,
    /// Docker's root directory, once read.
    docker_root: Mutex<Option<PathBuf>>,
    /// Whether the last disk cycle could not reach the low mark (said once per episode).
    disk_full_reported: Mutex<bool>,
}

impl ImageCleaner {
    pub fn new(
        runtime: Arc<dyn ContainerRuntime>,
        tracker: Arc<ImageTracker>,
        settings: ImageCleanupSettings,
        declared: ProtectedImages,
        live: ProtectedImages,
        forget_pulled: ForgetPulled,
    ) -> ImageCleaner {
        ImageCleaner {
            runtime,
            tracker,
            settings,
            declared,
            live,
            forget_pulled,
            counters: Arc::new(ImageCleanupCounters::default()),
            docker_root: Mutex::new(None),
            disk_full_reported: Mutex::new(false),
        }
    }

    pub fn counters(&self) -> Arc<ImageCleanupCounters> {
        Arc::clone(&self.counters)
    }

    /// Every protected name now: `tasks.d`'s, the live tasks', and the excluded ones.
    fn protected_names(&self) -> Result<Vec<String>, String> {
        let mut names = (self.declared)().map_err(|error| format!("tasks.d: {error}"))?;
        names.extend((self.live)()?);
        Ok(names)
    }

    /// Samples the disk usage of Docker's root directory; `None` when it cannot be known.
    pub fn sample_disk(&self) -> Option<f64> {
        let mut root = self
            .docker_root
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if root.is_none() {
            match self.runtime.docker_root_dir() {
                Ok(Some(dir)) => *root = Some(PathBuf::from(dir)),
                Ok(None) => return None,
                Err(error) => {
                    log::debug!("image cleanup: cannot read Docker's root directory: {error}");
                    return None;
                }
            }
        }
        let path = root.clone()?;
        drop(root);
        match used_ratio_of(&path) {
            Ok(ratio) => {
                self.counters
                    .set_disk_used_ratio(ratio, self.settings.disk_high_percent);
                Some(ratio)
            }
            Err(error) => {
                log::debug!("image cleanup: {error}");
                None
            }
        }
    }

    /// Whether the disk is at or above the high mark now (sampling it).
    pub fn disk_at_high_mark(&self) -> bool {
        self.sample_disk()
            .is_some_and(|ratio| select::at_or_above(ratio, self.settings.disk_high_percent))
    }

    /// One cycle. `stop` ends it between two removals (shutdown).
    pub fn run_cycle(&self, kind: CycleKind, stop: &dyn Fn() -> bool) -> CycleReport {
        // Every cycle also writes the uses recorded since the last save.
        self.tracker.flush();
        let mut report = CycleReport::default();
        let images = match self.runtime.list_images() {
            Ok(images) => images,
            Err(error) => {
                report.skipped = Some(format!("cannot list Docker's images: {error}"));
                return report;
            }
        };
        let protected = match self.protected_names() {
            Ok(names) => names,
            Err(error) => {
                report.skipped = Some(format!("cannot tell which images to keep: {error}"));
                return report;
            }
        };
        let now = now_millis();
        let selection = {
            let mut record = self.tracker.lock();
            let selection = select_removable(&SelectionInput {
                now,
                images: &images,
                tracked: &record,
                protected_names: &protected,
                excluded_names: &self.settings.excluded_images,
                minimum_age: self.settings.minimum_age,
                untracked_cleanup: self.settings.untracked_cleanup,
                untracked_minimum_age: self.settings.untracked_minimum_age,
            });
            let mut changed = false;
            for gone in &selection.gone {
                changed |= record.forget(gone);
            }
            if changed {
                self.tracker.save(&record);
            }
            selection
        };
        let limit = match kind {
            CycleKind::Interval => self.settings.images_per_cycle as usize,
            CycleKind::Disk => usize::MAX,
        };
        let below_low = |cleaner: &ImageCleaner| {
            cleaner
                .sample_disk()
                .is_some_and(|ratio| !select::at_or_above(ratio, cleaner.settings.disk_low_percent))
        };
        for candidate in selection.removable {
            if report.removed.len() >= limit || stop() {
                break;
            }
            if kind == CycleKind::Disk && below_low(self) {
                break;
            }
            if let Some(removed) = self.remove_one(&candidate, kind) {
                report.removed.push(removed);
            }
        }
        if kind == CycleKind::Disk {
            report.disk_still_full = !below_low(self) && !stop();
            let mut reported = self
                .disk_full_reported
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            if report.disk_still_full && (!*reported || !report.removed.is_empty()) {
                log::warn!(
                    "image cleanup: Docker's file system is still {:.0}% used, not below \
                     DECKHAND_IMAGE_CLEANUP_DISK_LOW ({}%), and no more images may be removed \
                     (the rest are in use, declared in tasks.d, excluded, untracked or too young)",
                    self.counters.disk_used_ratio() * 100.0,
                    self.settings.disk_low_percent
                );
            }
            *reported = report.disk_still_full;
        }
        report
    }

    /// Removes one image, looking again under the tracker's lock at what protects it.
    fn remove_one(&self, candidate: &Removal, kind: CycleKind) -> Option<RemovedImage> {
        let protected = match self.protected_names() {
            Ok(names) => names,
            Err(error) => {
                log::warn!("image cleanup: cannot tell which images to keep ({error}); stopping");
                return None;
            }
        };
        let mut record = self.tracker.lock();
        if let Some(entry) = record.get(&candidate.image_id) {
            if !entry.holders.is_empty() {
                return None;
            }
        } else if candidate.tracked {
            return None;
        }
        let normalized: Vec<String> = protected.iter().map(|n| normalize_image_name(n)).collect();
        if normalized.contains(&candidate.image_id)
            || candidate
                .names
                .iter()
                .chain(
                    record
                        .get(&candidate.image_id)
                        .into_iter()
                        .flat_map(|e| &e.names),
                )
                .any(|name| normalized.contains(&normalize_image_name(name)))
        {
            return None;
        }
        let mut removed_names = Vec::new();
        let mut changed = false;
        for name in &candidate.names {
            match self.runtime.remove_image(name) {
                Ok(()) | Err(RuntimeError::NoSuchImage { .. }) => {
                    changed |= record.remove_name(&candidate.image_id, name);
                    removed_names.push(name.clone());
                }
                Err(RuntimeError::Conflict { message }) => {
                    log::info!(
                        "image cleanup: Docker keeps image {name} ({}): {message}",
                        candidate.image_id
                    );
                }
                Err(error) => {
                    log::warn!("image cleanup: cannot remove image {name}: {error}");
                }
            }
        }
        if removed_names.len() == candidate.names.len() {
            changed |= record.forget(&candidate.image_id);
        }
        if changed {
            self.tracker.save(&record);
        }
        drop(record);
        if removed_names.is_empty() {
            return None;
        }
        // Pull behaviour `once` must pull a removed image again.
        (self.forget_pulled)(&removed_names);
        self.counters.count_removal();
        log::info!(
            "image cleanup: removed image {} ({}, {} bytes){}: {}",
            removed_names.join(", "),
            candidate.image_id,
            candidate.size,
            match kind {
                CycleKind::Interval => "",
                CycleKind::Disk => " to free disk space",
            },
            candidate.reason
        );
        Some(RemovedImage {
            image_id: candidate.image_id.clone(),
            names: removed_names,
            size: candidate.size,
            reason: candidate.reason.clone(),
        })
    }

    /// Runs the cleaner on a thread named `image-cleanup` until `shutdown` fires or is dropped:
    /// a cycle every interval, and a disk cycle whenever a sample (every 10 s, and at start) is
    /// at or above the high mark. A panic in a cycle is logged and the thread goes on.
    pub fn spawn(
        self: Arc<Self>,
        shutdown: Receiver<()>,
    ) -> std::io::Result<std::thread::JoinHandle<()>> {
        std::thread::Builder::new()
            .name("image-cleanup".to_string())
            .spawn(move || self.run(shutdown))
    }

    fn run(&self, shutdown: Receiver<()>) {
        if !self.settings.remove_images {
            self.sample_only(&shutdown);
            return;
        }
        let interval = tick(self.settings.interval);
        let disk = tick(self.settings.disk_sample_interval);
        // A shutdown seen between two removals ends the cycle and then the thread.
        let stop_seen = std::cell::Cell::new(false);
        let stopping = || {
            if !stop_seen.get() {
                stop_seen.set(!matches!(
                    shutdown.try_recv(),
                    Err(crossbeam_channel::TryRecvError::Empty)
                ));
            }
            stop_seen.get()
        };
        let cycle = |kind: CycleKind| {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.run_cycle(kind, &stopping)
            }));
            match outcome {
                Ok(report) => {
                    if let Some(reason) = report.skipped {
                        log::warn!("image cleanup: cycle skipped: {reason}");
                    }
                }
                Err(panic) => log::error!(
                    "image cleanup: a cycle panicked: {}",
                    crate::text::panic_message(panic.as_ref())
                ),
            }
        };
        if self.disk_at_high_mark() {
            cycle(CycleKind::Disk);
        }
        loop {
            if stop_seen.get() {
                return;
            }
            select! {
                recv(shutdown) -> _ => return,
                recv(interval) -> _ => cycle(CycleKind::Interval),
                recv(disk) -> _ => {
                    if self.disk_at_high_mark() {
                        cycle(CycleKind::Disk);
                    }
                }
            }
        }
    }
}

impl ImageCleaner {
    /// Cleanup is off: samples the disk at start and every sample interval, for the metrics,
    /// until `shutdown`.
    fn sample_only(&self, shutdown: &Receiver<()>) {
        let disk = tick(self.settings.disk_sample_interval);
        loop {
            self.sample_disk();
            select! {
                recv(shutdown) -> _ => return,
                recv(disk) -> _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tracker_tests {
    use super::*;
    use crate::state::scratch::ScratchDir;

    /// What `images.json` holds now, as a fresh open of the store loads it.
    fn on_disk(dir: &ScratchDir) -> ImagesRecord {
        let (_, loaded) = StateStore::open(&dir.path).expect("the store opens");
        loaded.images
    }

    #[test]
    fn a_use_waits_for_the_next_save_and_a_release_is_written_at_once() {
        let dir = ScratchDir::new("deckhand-image-tracker");
        let (store, _) = StateStore::open(&dir.path).expect("the store opens");
        let tracker = ImageTracker::new(ImagesRecord::default(), Some(Arc::new(store)));

        tracker.record_use("t1", "app:v1", "sha256:a", 100);
        assert!(
            on_disk(&dir).images.is_empty(),
            "no synchronous write for a use"
        );
        assert_eq!(tracker.record().images.len(), 1, "but it is in memory");
        tracker.flush();
        let saved = on_disk(&dir);
        assert_eq!(saved.images.len(), 1);
        assert!(saved.images[0].holders.contains("t1"));

        // A second use held only in memory goes out with the release that follows it.
        tracker.record_use("t2", "app:v1", "sha256:a", 200);
        tracker.release_task("t1", 300);
        let saved = on_disk(&dir);
        let holders: Vec<&String> = saved.images[0].holders.iter().collect();
        assert_eq!(holders, ["t2"], "{saved:?}");
        // Nothing left to write: a flush changes nothing.
        tracker.flush();
        assert_eq!(on_disk(&dir), saved);
    }
}
