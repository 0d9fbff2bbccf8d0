//! Every file-system call the state store makes, in one place, each with a fault-injection point.
//!
//! Why a module of its own: the store's promise ("a failed write never corrupts what is on disk and
//! leaves no temp file") is only believable if tests can make each step fail — the temp-file
//! create, the write, the fsync, the rename, the directory fsync — and then check the disk. The
//! [`FaultInjector`] is that hook. In production it is empty and costs one relaxed atomic load per
//! call; tests arm it through [`crate::state::StateStore::open_with_faults`].
//!
//! The atomic write here is the one recipe every checkpoint file uses: write a temp file with a
//! name unique to this writer in the same directory, fsync it, rename it over the final name,
//! fsync the directory. A reader (or a restart after `kill -9`) sees the old file or the new one,
//! never a mix; on any error the temp file is removed and the old file is untouched.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// The file-system steps a fault can be injected into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsStep {
    /// Creating (opening for write) a temp file or the event log.
    Create,
    /// Writing bytes. An injected failure first writes half the bytes, as a full disk does.
    Write,
    /// fsync/fdatasync of a file.
    SyncFile,
    /// Renaming a temp file over its final name.
    Rename,
    /// fsync of a directory after a rename.
    SyncDir,
    /// Removing a file.
    Remove,
    /// Cutting a file back to a length (the event log after a failed append).
    Truncate,
}

impl FsStep {
    pub fn as_str(self) -> &'static str {
        match self {
            FsStep::Create => "create",
            FsStep::Write => "write",
            FsStep::SyncFile => "fsync",
            FsStep::Rename => "rename",
            FsStep::SyncDir => "fsync directory",
            FsStep::Remove => "remove",
            FsStep::Truncate => "truncate",
        }
    }
}

struct FaultRule {
    step: FsStep,
    /// The fault applies to paths whose text contains this.
    path_contains: String,
    /// `errno` to return (for example 28 = ENOSPC, 30 = EROFS).
    os_error: i32,
    /// How many more times it fires; `None` = until cleared.
    remaining: Option<u32>,
}

/// Makes chosen file-system steps fail with a chosen OS error. Empty by default.
#[derive(Default)]
pub struct FaultInjector {
    armed: AtomicBool,
    rules: Mutex<Vec<FaultRule>>,
    fired: AtomicU64,
}

impl FaultInjector {
    pub fn new() -> FaultInjector {
        FaultInjector::default()
    }

    /// The next `times` occurrences of `step` on a path containing `path_contains` fail with
    /// `os_error`.
    pub fn fail_times(&self, step: FsStep, path_contains: &str, os_error: i32, times: u32) {
        self.push(step, path_contains, os_error, Some(times));
    }

    /// Every occurrence of `step` on a path containing `path_contains` fails until [`clear`].
    ///
    /// [`clear`]: FaultInjector::clear
    pub fn fail_always(&self, step: FsStep, path_contains: &str, os_error: i32) {
        self.push(step, path_contains, os_error, None);
    }

    pub fn clear(&self) {
        self.lock_rules().clear();
        self.armed.store(false, Ordering::SeqCst);
    }

    /// How many faults fired so far (tests assert that the fault they armed really happened).
    pub fn fired(&self) -> u64 {
        self.fired.load(Ordering::SeqCst)
    }

    fn push(&self, step: FsStep, path_contains: &str, os_error: i32, remaining: Option<u32>) {
        self.lock_rules().push(FaultRule {
            step,
            path_contains: path_contains.to_string(),
            os_error,
            remaining,
        });
        self.armed.store(true, Ordering::SeqCst);
    }

    fn lock_rules(&self) -> std::sync::MutexGuard<'_, Vec<FaultRule>> {
        // A panic while holding this lock can only come from a test; the rules stay usable.
        self.rules
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The injected error for this step on this path, if a rule matches.
    pub(crate) fn check(&self, step: FsStep, path: &Path) -> io::Result<()> {
        if !self.armed.load(Ordering::Relaxed) {
            return Ok(());
        }
        let text = path.to_string_lossy();
        let mut rules = self.lock_rules();
        let matching = rules.iter_mut().position(|rule| {
            rule.step == step && text.contains(&rule.path_contains) && rule.remaining != Some(0)
        });
        match matching {
            None => Ok(()),
            Some(index) => {
                let rule = &mut rules[index];
                if let Some(remaining) = rule.remaining.as_mut() {
                    *remaining -= 1;
                }
                let os_error = rule.os_error;
                rules.retain(|rule| rule.remaining != Some(0));
                self.fired.fetch_add(1, Ordering::SeqCst);
                Err(io::Error::from_raw_os_error(os_error))
            }
        }
    }
}

/// An I/O error with the file it concerns and the step that failed.
#[derive(Debug)]
pub struct FsError {
    pub path: PathBuf,
    pub step: FsStep,
    pub source: io::Error,
}

impl FsError {
    fn new(path: &Path, step: FsStep, source: io::Error) -> FsError {
        FsError {
            path: path.to_path_buf(),
            step,
            source,
        }
    }
}

/// Temp files carry this marker, so that a start-up sweep can remove the ones a crash left.
pub const TEMP_MARKER: &str = ".tmp.";

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A temp-file path next to `final_path`, unique per process and per call, so that concurrent
/// writers (one managed-task thread per task) never share a temp file.
pub fn temp_path_for(final_path: &Path) -> PathBuf {
    let unique = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut name = final_path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(format!("{TEMP_MARKER}{}.{unique}", std::process::id()));
    final_path.with_file_name(name)
}

/// What this process's state files cost the disk: synchronous writes (file and directory fsyncs)
/// and bytes written, counted where they happen, for measurements of the sync budget
/// (docs/PERFORMANCE.md). Process-wide and monotonic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoCounts {
    pub file_syncs: u64,
    pub directory_syncs: u64,
    pub bytes_written: u64,
}

impl IoCounts {
    /// Every synchronous write: the file fsyncs and the directory fsyncs.
    pub fn syncs(&self) -> u64 {
        self.file_syncs + self.directory_syncs
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: IoCounts) -> IoCounts {
        IoCounts {
            file_syncs: self.file_syncs.saturating_sub(earlier.file_syncs),
            directory_syncs: self.directory_syncs.saturating_sub(earlier.directory_syncs),
            bytes_written: self.bytes_written.saturating_sub(earlier.bytes_written),
        }
    }
}

static FILE_SYNCS: AtomicU64 = AtomicU64::new(0);
static DIRECTORY_SYNCS: AtomicU64 = AtomicU64::new(0);
static BYTES_WRITTEN: AtomicU64 = AtomicU64::new(0);

/// The counts so far (see [`IoCounts`]).
pub fn io_counts() -> IoCounts {
    IoCounts {
        file_syncs: FILE_SYNCS.load(Ordering::Relaxed),
        directory_syncs: DIRECTORY_SYNCS.load(Ordering::Relaxed),
        bytes_written: BYTES_WRITTEN.load(Ordering::Relaxed),
    }
}

/// Write `bytes` to `final_path` atomically and durably (temp, fsync, rename, fsync directory).
/// On error the temp file is removed (best effort) and `final_path` is as it was.
pub fn write_atomic(
    faults: &FaultInjector,
    final_path: &Path,
    bytes: &[u8],
) -> Result<(), FsError> {
    let temp_path = temp_path_for(final_path);
    let result = write_temp_then_rename(faults, &temp_path, final_path, bytes);
    if let Err(mut error) = result {
        // The rename may have happened before a directory-fsync failure; then the temp name is
        // gone already and this removal is a harmless NotFound.
        let _ = fs::remove_file(&temp_path);
        // Name the checkpoint the caller asked for, not the temp file nobody knows about.
        error.path = final_path.to_path_buf();
        return Err(error);
    }
    Ok(())
}

/// [`write_atomic`] without the directory fsync: the caller replaces several files in one
/// directory and syncs the directory once after the last (the state log's compaction). Until
/// then a power cut may bring back the old file, never a torn one.
pub fn write_replacing(
    faults: &FaultInjector,
    final_path: &Path,
    bytes: &[u8],
) -> Result<(), FsError> {
    let temp_path = temp_path_for(final_path);
    let result =
        write_temp(faults, &temp_path, bytes).and_then(|()| rename(faults, &temp_path, final_path));
    if let Err(mut error) = result {
        let _ = fs::remove_file(&temp_path);
        error.path = final_path.to_path_buf();
        return Err(error);
    }
    Ok(())
}

fn write_temp(faults: &FaultInjector, temp_path: &Path, bytes: &[u8]) -> Result<(), FsError> {
    let mut file = create_new(faults, temp_path)?;
    write_all(faults, &mut file, temp_path, bytes)?;
    sync_data(faults, &file, temp_path)
}

fn write_temp_then_rename(
    faults: &FaultInjector,
    temp_path: &Path,
    final_path: &Path,
    bytes: &[u8],
) -> Result<(), FsError> {
    write_temp(faults, temp_path, bytes)?;
    rename(faults, temp_path, final_path)?;
    sync_parent_dir(faults, final_path)
}

pub fn create_new(faults: &FaultInjector, path: &Path) -> Result<File, FsError> {
    faults
        .check(FsStep::Create, path)
        .and_then(|()| OpenOptions::new().write(true).create_new(true).open(path))
        .map_err(|e| FsError::new(path, FsStep::Create, e))
}

/// Open (creating if needed) a file for appending.
pub fn open_append(faults: &FaultInjector, path: &Path) -> Result<File, FsError> {
    faults
        .check(FsStep::Create, path)
        .and_then(|()| {
            OpenOptions::new()
                .read(true)
                .append(true)
                .create(true)
                .open(path)
        })
        .map_err(|e| FsError::new(path, FsStep::Create, e))
}

pub fn write_all(
    faults: &FaultInjector,
    file: &mut File,
    path: &Path,
    bytes: &[u8],
) -> Result<(), FsError> {
    if let Err(injected) = faults.check(FsStep::Write, path) {
        // A full disk accepts part of a write before it refuses the rest.
        let _ = file.write_all(&bytes[..bytes.len() / 2]);
        return Err(FsError::new(path, FsStep::Write, injected));
    }
    file.write_all(bytes)
        .map_err(|e| FsError::new(path, FsStep::Write, e))?;
    BYTES_WRITTEN.fetch_add(bytes.len() as u64, Ordering::Relaxed);
    Ok(())
}

/// fdatasync: the data and the metadata needed to read it back (the size), not the times.
pub fn sync_data(faults: &FaultInjector, file: &File, path: &Path) -> Result<(), FsError> {
    faults
        .check(FsStep::SyncFile, path)
        .and_then(|()| file.sync_data())
        .map_err(|e| FsError::new(path, FsStep::SyncFile, e))?;
    FILE_SYNCS.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

pub fn rename(faults: &FaultInjector, from: &Path, to: &Path) -> Result<(), FsError> {
    faults
        .check(FsStep::Rename, to)
        .and_then(|()| fs::rename(from, to))
        .map_err(|e| FsError::new(to, FsStep::Rename, e))
}

/// fsync the directory holding `path`, so that a rename or removal in it survives power loss.
/// A fault rule matches on `path` (the file whose entry changed), not on the directory.
pub fn sync_parent_dir(faults: &FaultInjector, path: &Path) -> Result<(), FsError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    faults
        .check(FsStep::SyncDir, path)
        .and_then(|()| fsync_directory(dir))
        .map_err(|e| FsError::new(dir, FsStep::SyncDir, e))
}

pub fn sync_dir(faults: &FaultInjector, dir: &Path) -> Result<(), FsError> {
    faults
        .check(FsStep::SyncDir, dir)
        .and_then(|()| fsync_directory(dir))
        .map_err(|e| FsError::new(dir, FsStep::SyncDir, e))
}

fn fsync_directory(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()?;
    DIRECTORY_SYNCS.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

pub fn set_len(faults: &FaultInjector, file: &File, path: &Path, len: u64) -> Result<(), FsError> {
    faults
        .check(FsStep::Truncate, path)
        .and_then(|()| file.set_len(len))
        .map_err(|e| FsError::new(path, FsStep::Truncate, e))
}

pub fn remove_file(faults: &FaultInjector, path: &Path) -> Result<(), FsError> {
    faults
        .check(FsStep::Remove, path)
        .and_then(|()| fs::remove_file(path))
        .map_err(|e| FsError::new(path, FsStep::Remove, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::scratch::ScratchDir;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .expect("scratch dir exists")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn temp_paths_are_unique_per_call_and_marked() {
        let final_path = Path::new("/d/tasks/abc.json");
        let first = temp_path_for(final_path);
        let second = temp_path_for(final_path);
        assert_ne!(first, second);
        assert!(first.to_string_lossy().contains("abc.json.tmp."));
        assert_eq!(first.parent(), final_path.parent());
    }

    #[test]
    fn atomic_write_replaces_the_file() {
        let scratch = ScratchDir::new("deckhand-fsio-replace");
        let dir = scratch.path.clone();
        let path = dir.join("f.json");
        let faults = FaultInjector::new();
        write_atomic(&faults, &path, b"one").expect("first write");
        write_atomic(&faults, &path, b"two").expect("second write");
        assert_eq!(fs::read(&path).expect("read"), b"two");
        assert_eq!(entries(&dir), vec!["f.json".to_string()]);
    }

    #[test]
    fn every_failing_step_keeps_the_old_file_and_leaves_no_temp_file() {
        // Row by row: the step that fails, and whether the new content is in place afterwards
        // (a directory-fsync failure comes after the rename: the new file is visible, but the
        // caller is told it may not survive power loss).
        let table = [
            (FsStep::Create, false),
            (FsStep::Write, false),
            (FsStep::SyncFile, false),
            (FsStep::Rename, false),
            (FsStep::SyncDir, true),
        ];
        for (step, new_content_visible) in table {
            let scratch = ScratchDir::new("deckhand-fsio-fail");
            let dir = scratch.path.clone();
            let path = dir.join("f.json");
            let faults = FaultInjector::new();
            write_atomic(&faults, &path, b"old").expect("first write");
            faults.fail_times(step, "f.json", 28, 1);
            let error = write_atomic(&faults, &path, b"new content").expect_err("must fail");
            assert_eq!(faults.fired(), 1, "{step:?}");
            assert_eq!(error.step, step);
            assert_eq!(error.source.raw_os_error(), Some(28), "{step:?}");
            let expected: &[u8] = if new_content_visible {
                b"new content"
            } else {
                b"old"
            };
            assert_eq!(fs::read(&path).expect("read"), expected, "{step:?}");
            assert_eq!(entries(&dir), vec!["f.json".to_string()], "{step:?}");
        }
    }

    #[test]
    fn a_fault_for_another_path_does_not_fire() {
        let scratch = ScratchDir::new("deckhand-fsio-other");
        let dir = scratch.path.clone();
        let faults = FaultInjector::new();
        faults.fail_always(FsStep::Write, "other.json", 28);
        write_atomic(&faults, &dir.join("f.json"), b"x").expect("not the faulty path");
        assert_eq!(faults.fired(), 0);
    }
}
