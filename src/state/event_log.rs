//! The state log: `ECS_DATADIR/events.log`. One line per entry: the state-change events
//! ([`crate::event::Event`], numbered gap-free) and, between them, the state store's own
//! records — a task's checkpoint, a task forgotten, the agent record ([`RecordKind`]).
//!
//! Why one file for both: a task's change and the events it causes become durable with one
//! fdatasync, and so do the changes of every task that wrote meanwhile (group commit). On the
//! SD cards and eMMC deckhand runs on, one sync costs 10–50 ms and wears the flash; a task's life
//! needs one on submit, one for its RUNNING events, one on stop and one for its STOPPED events.
//!
//! - **Records** are written (write(2)) as they come, without a sync: they survive `kill -9` (the
//!   kernel holds them), and the next sync — an acknowledged command's, or the next event's —
//!   makes them durable together with everything before them. What a power cut can lose is what
//!   no one was told is durable, and restore reconciles that with Docker.
//! - **Sync** ([`EventLogFile::sync`]) makes everything written so far durable. The log's mutex
//!   is held across the fdatasync, so callers that wait for it meanwhile find their bytes synced
//!   and return at once: that is the group commit.
//! - **Events** are appended and synced in one call ([`EventLogFile::append_batch`]); the
//!   reporter's writer appends every event queued meanwhile with that one sync.
//! - **Failures**: a failed write cuts its own bytes; a failed sync cuts the file back to its
//!   durable length and writes the records that were waiting for it again (their writers were
//!   told they are written), so the log never holds a half line or an event its caller was told
//!   failed, and never drops a record whose writer was told it was written.
//! - **Replay at open** keeps the longest valid prefix. A torn last line (a crash mid-append) is
//!   cut silently; garbage followed by valid lines (the disk damaged the middle) is copied to
//!   `quarantine/` before the cut and reported. The next number continues after the highest one
//!   ever seen, so no number is reused even then.
//! - **Compaction** keeps the file bounded: once it holds `2 × retain` events, or
//!   [`RECORD_COMPACT_BYTES`] of records, the records of its durable part are folded into the
//!   store's own files (one file per task, `agent.json`; the store's *folder*), and the file is
//!   rewritten atomically with the last `retain` events and whatever was appended meanwhile.
//!   With a folder this runs on a thread of its own, so no task waits for the files it writes.
//! - **Reads** use an in-memory table of event line offsets (8 bytes per event), so `read_since`
//!   costs a seek and the bytes read, whatever the file size.

use crate::event::Event;
use crate::state::fsio::{self, FaultInjector, FsError, FsStep};
pub(crate) use crate::state::log_format::{is_record_line, parse_log, record_line};
pub use crate::state::log_format::{LogRecord, RecordKind};
use crate::state::{QuarantinedFile, StateError};
use crate::worker_threads::{BoundedFifo, Refused, WorkerSettings, WorkerThreads};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// The pool of (at most) one thread that compacts the log off the writing thread.
type Compactor = WorkerThreads<BoundedFifo<()>>;

/// How many events compaction keeps by default.
pub const DEFAULT_RETAIN_EVENTS: usize = 10_000;

/// Bytes of records after which the log is compacted (with a folder): about a thousand task
/// checkpoints, so a restart replays little and the file stays small.
pub const RECORD_COMPACT_BYTES: u64 = 4 << 20;

/// Records written but not yet synced, past which the writer syncs itself: bounds what a failed
/// sync must write again (and what a power cut can lose) when no one syncs for a long time.
const MAX_UNSYNCED_RECORD_BYTES: usize = 1 << 20;

/// What replaying the log at open found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventLogReplay {
    /// Events kept in the log.
    pub events: usize,
    /// Sequence number of the last event kept; 0 when the log is empty.
    pub last_seq: u64,
    /// The number the next appended event must carry.
    pub next_seq: u64,
    /// Bytes cut from the end of the file (a torn last line, or everything after corruption).
    pub cut_bytes: u64,
    /// Set when the cut removed valid entries after damaged bytes (not just a torn tail): a copy
    /// of the whole file before the cut.
    pub quarantined: Option<QuarantinedFile>,
}

/// Folds the records of the log's durable part into the store's own files before compaction
/// drops them: given the records in log order and the number the next event will carry.
pub type RecordFolder = Box<dyn Fn(&[LogRecord], u64) -> Result<(), StateError> + Send + Sync>;

struct Inner {
    file: File,
    /// Byte offset of each event line: index `i` holds the event numbered `first_seq + i`.
    offsets: Vec<u64>,
    first_seq: u64,
    next_seq: u64,
    /// Length of the valid content written (records past `synced_len` are not durable yet).
    len: u64,
    /// Length of the content known to be durable.
    synced_len: u64,
    /// The record lines between `synced_len` and `len`, written again if a failed sync cuts them.
    unsynced_records: Vec<u8>,
    /// Bytes of record lines in the file.
    record_bytes: u64,
    /// Compact once the log holds this many events…
    compact_at: usize,
    /// …or this many bytes of records (with a folder).
    record_compact_at: u64,
    /// A compaction was asked of the compaction thread and has not started yet.
    compaction_requested: bool,
    /// The file past `synced_len` is not what `unsynced_records` says (a failed write or sync
    /// whose cut failed too): put right before the next write or sync.
    damaged_tail: bool,
}

/// The state log. Shared between threads (`Arc<EventLogFile>`); writes are serialised on one
/// mutex, which is held across each fdatasync (every write goes to the same file).
pub struct EventLogFile {
    path: PathBuf,
    faults: Arc<FaultInjector>,
    retain: usize,
    inner: Mutex<Inner>,
    /// Where compaction puts the records it drops; `None`: records are kept in the file.
    folder: Option<RecordFolder>,
    /// Runs compaction off the writing thread; `None`: it runs on the writing thread.
    compactor: Mutex<Option<Arc<Compactor>>>,
    /// Held across a compaction: one at a time.
    compacting: Mutex<()>,
}

impl std::fmt::Debug for EventLogFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLogFile")
            .field("path", &self.path)
            .finish()
    }
}

/// What [`EventLogFile::open`] hands back: the log, what replay found, and the records it holds.
pub(crate) type OpenedLog = (EventLogFile, EventLogReplay, Vec<LogRecord>);

impl EventLogFile {
    /// Open (creating if needed) the log at `path` and replay it. `next_seq_floor` is the lowest
    /// number the next event may carry (from the agent record, in case the log was lost);
    /// damaged content is copied into `quarantine_dir`. With a `folder`, compaction folds records
    /// into the store's files; without one it keeps them in the file.
    pub(crate) fn open(
        path: &Path,
        quarantine_dir: &Path,
        faults: Arc<FaultInjector>,
        next_seq_floor: u64,
        retain: usize,
        folder: Option<RecordFolder>,
    ) -> Result<OpenedLog, StateError> {
        let retain = retain.max(1);
        let existed = path.exists();
        let file = fsio::open_append(&faults, path)?;
        if !existed {
            fsio::sync_parent_dir(&faults, path)?;
        }
        let mut bytes = Vec::new();
        {
            use std::io::Read;
            let mut reader = &file;
            reader
                .read_to_end(&mut bytes)
                .map_err(|source| StateError::io(path, "read", source))?;
        }
        let parsed = parse_log(&bytes);
        let cut_bytes = bytes.len() as u64 - parsed.valid_len;
        let mut quarantined = None;
        if cut_bytes > 0 {
            if parsed.events_after_damage > 0 {
                let copy = crate::state::quarantine_path(quarantine_dir, path);
                fsio::write_atomic(&faults, &copy, &bytes)?;
                quarantined = Some(QuarantinedFile {
                    original: path.to_path_buf(),
                    moved_to: copy,
                    error: format!(
                        "event log damaged at byte {}: {} valid event(s) or record(s) after the \
                         damage were dropped",
                        parsed.valid_len, parsed.events_after_damage
                    ),
                });
            }
            fsio::set_len(&faults, &file, path, parsed.valid_len)?;
        }
        if parsed.valid_len > 0 {
            // Records written before a crash may not be durable yet: they are now, before
            // anything is built on them.
            fsio::sync_data(&faults, &file, path)?;
        }
        let (first_seq, last_seq, next_seq) = parsed.numbering(next_seq_floor);
        let replay = EventLogReplay {
            events: parsed.offsets.len(),
            last_seq,
            next_seq,
            cut_bytes,
            quarantined,
        };
        let records = parsed.records(&bytes);
        let log = EventLogFile {
            path: path.to_path_buf(),
            faults,
            retain,
            inner: Mutex::new(Inner {
                file,
                offsets: parsed.offsets,
                first_seq,
                next_seq,
                len: parsed.valid_len,
                synced_len: parsed.valid_len,
                unsynced_records: Vec::new(),
                record_bytes: parsed.record_bytes,
                compact_at: retain * 2,
                record_compact_at: RECORD_COMPACT_BYTES,
                compaction_requested: false,
                damaged_tail: false,
            }),
            folder,
            compactor: Mutex::new(None),
            compacting: Mutex::new(()),
        };
        Ok((log, replay, records))
    }

    /// Runs compaction on a thread of its own from now on (the store does this for its log),
    /// so that the thread whose write crossed the bound does not wait for it. The thread starts
    /// when a compaction is asked for and ends a while after the last one (compactions are
    /// rare: an idle agent holds no thread for them).
    pub(crate) fn start_compaction_thread(log: &Arc<EventLogFile>) -> std::io::Result<()> {
        let weak: Weak<EventLogFile> = Arc::downgrade(log);
        let settings = WorkerSettings {
            stack_size: Some(256 * 1024),
            ..WorkerSettings::new("state-compaction", 1)
        };
        // One waiting request is enough: the compaction it asks for covers every later one.
        let compactor = WorkerThreads::new(
            settings,
            BoundedFifo::new(1),
            move |()| {
                if let Some(log) = weak.upgrade() {
                    log.compact_or_postpone();
                }
            },
            |_, _| {},
        );
        *log.compactor
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Arc::new(compactor));
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every mutation of Inner happens after the I/O it describes succeeded (or records what
        // is left to put right), so a panic elsewhere while holding the lock cannot leave it
        // inconsistent.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The number the next appended event must carry.
    pub fn next_seq(&self) -> u64 {
        self.lock().next_seq
    }

    /// The oldest number still in the log (older ones were compacted away); equals
    /// `next_seq()` when the log is empty.
    pub fn first_seq(&self) -> u64 {
        self.lock().first_seq
    }

    /// Events currently held in the file.
    pub fn len(&self) -> usize {
        self.lock().offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The length of the file's durable part: what a power cut leaves at the least.
    pub fn durable_len(&self) -> u64 {
        self.lock().synced_len
    }

    /// Bytes of store records currently in the file (0 once compaction folded them away).
    pub fn record_bytes(&self) -> u64 {
        self.lock().record_bytes
    }

    /// Puts the file right after a failure left its tail in doubt: cut back to the durable
    /// length, then write the records that were waiting for a sync again.
    fn repair(&self, inner: &mut Inner) -> Result<(), StateError> {
        if !inner.damaged_tail {
            return Ok(());
        }
        fsio::set_len(&self.faults, &inner.file, &self.path, inner.synced_len)?;
        inner.len = inner.synced_len;
        let records = std::mem::take(&mut inner.unsynced_records);
        let written = fsio::write_all(&self.faults, &mut inner.file, &self.path, &records);
        if let Err(error) = written {
            // Stays damaged: the records are kept to be written at the next attempt.
            let _ = fsio::set_len(&self.faults, &inner.file, &self.path, inner.synced_len);
            inner.unsynced_records = records;
            return Err(error.into());
        }
        inner.len += records.len() as u64;
        inner.unsynced_records = records;
        inner.damaged_tail = false;
        Ok(())
    }

    /// Writes `bytes` at the end of the file; on failure cuts what part of them got there (or,
    /// if the cut fails too, marks the tail for repair).
    fn write_end(&self, inner: &mut Inner, bytes: &[u8]) -> Result<(), StateError> {
        self.repair(inner)?;
        let before = inner.len;
        if let Err(error) = fsio::write_all(&self.faults, &mut inner.file, &self.path, bytes) {
            if fsio::set_len(&self.faults, &inner.file, &self.path, before).is_err() {
                inner.damaged_tail = true;
            }
            return Err(error.into());
        }
        inner.len += bytes.len() as u64;
        Ok(())
    }

    fn sync_locked(&self, inner: &mut Inner) -> Result<(), StateError> {
        self.repair(inner)?;
        if inner.synced_len == inner.len {
            return Ok(());
        }
        if let Err(error) = fsio::sync_data(&self.faults, &inner.file, &self.path) {
            // What the failed sync covered may or may not be on the disk: cut it and write the
            // records again (now, or before the next write if that fails as well).
            inner.damaged_tail = true;
            let _ = self.repair(inner);
            return Err(error.into());
        }
        inner.synced_len = inner.len;
        inner.unsynced_records.clear();
        Ok(())
    }

    /// Makes everything written so far durable (one fdatasync, shared by every caller waiting
    /// meanwhile; none when everything is durable already).
    pub fn sync(&self) -> Result<(), StateError> {
        let mut inner = self.lock();
        self.sync_locked(&mut inner)
    }

    /// Writes one store record (`line` from [`record_line`]) without a sync: it survives the
    /// process being killed at once, and a power cut once the next [`EventLogFile::sync`] or
    /// event append returned.
    pub(crate) fn append_record(&self, line: &[u8]) -> Result<(), StateError> {
        let mut inner = self.lock();
        self.write_end(&mut inner, line)?;
        inner.unsynced_records.extend_from_slice(line);
        inner.record_bytes += line.len() as u64;
        if inner.unsynced_records.len() > MAX_UNSYNCED_RECORD_BYTES {
            self.sync_locked(&mut inner)?;
        }
        self.compact_if_due(inner);
        Ok(())
    }

    /// Writes one store record and syncs it with everything before it. On error the record is
    /// not in the log (a refused submit leaves nothing that a restart would bring back), while
    /// the records of other writers waiting for a sync are kept.
    pub(crate) fn append_record_durably(&self, line: &[u8]) -> Result<(), StateError> {
        let mut inner = self.lock();
        self.write_end(&mut inner, line)?;
        inner.record_bytes += line.len() as u64;
        if let Err(error) = fsio::sync_data(&self.faults, &inner.file, &self.path) {
            // Cut this record (its writer hears it failed) and write the others again.
            inner.record_bytes -= line.len() as u64;
            inner.damaged_tail = true;
            let _ = self.repair(&mut inner);
            return Err(error.into());
        }
        inner.synced_len = inner.len;
        inner.unsynced_records.clear();
        self.compact_if_due(inner);
        Ok(())
    }

    /// Append one event durably. Its `seq` must be [`EventLogFile::next_seq`].
    pub fn append(&self, event: &Event) -> Result<(), StateError> {
        self.append_batch(std::slice::from_ref(event))
    }

    /// Append events durably with one write and one fsync (group commit), which also makes
    /// every record written before them durable. They must be numbered `next_seq()`,
    /// `next_seq() + 1`, …; on error none of them is in the log.
    pub fn append_batch(&self, events: &[Event]) -> Result<(), StateError> {
        if events.is_empty() {
            return Ok(());
        }
        let mut inner = self.lock();
        let mut buffer = Vec::with_capacity(events.len() * 160);
        let mut line_starts = Vec::with_capacity(events.len());
        for (index, event) in events.iter().enumerate() {
            let expected = inner.next_seq + index as u64;
            if event.seq != expected {
                return Err(StateError::EventSequence {
                    expected,
                    found: event.seq,
                });
            }
            line_starts.push(buffer.len() as u64);
            serde_json::to_writer(&mut buffer, event).map_err(|e| StateError::Encode {
                what: format!("event {}", event.seq),
                message: e.to_string(),
            })?;
            buffer.push(b'\n');
        }
        self.write_end(&mut inner, &buffer)?;
        let start = inner.len - buffer.len() as u64;
        if let Err(error) = fsio::sync_data(&self.faults, &inner.file, &self.path) {
            // Cut the events (their writers are told they failed) and write the records that
            // were waiting for this sync again.
            inner.damaged_tail = true;
            let _ = self.repair(&mut inner);
            return Err(error.into());
        }
        inner.synced_len = inner.len;
        inner.unsynced_records.clear();
        inner
            .offsets
            .extend(line_starts.iter().map(|offset| start + offset));
        inner.next_seq += events.len() as u64;
        self.compact_if_due(inner);
        Ok(())
    }

    /// Starts a compaction if the file has grown past its bounds: on the compaction thread if
    /// there is one, else here, after the lock is released (the caller's write is done).
    fn compact_if_due(&self, mut inner: MutexGuard<'_, Inner>) {
        let due = !inner.compaction_requested
            && (inner.offsets.len() >= inner.compact_at
                || (self.folder.is_some() && inner.record_bytes >= inner.record_compact_at));
        if !due {
            return;
        }
        let compactor = self
            .compactor
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        match compactor {
            Some(compactor) => {
                inner.compaction_requested = true;
                drop(inner);
                match compactor.submit(()) {
                    // Full: one is already waiting, and covers this request.
                    Ok(()) | Err(Refused::Full(())) | Err(Refused::Stopping(())) => {}
                    // No thread to be had: compact here rather than never.
                    Err(Refused::NoWorker(())) => self.compact_or_postpone(),
                }
            }
            None => {
                drop(inner);
                self.compact_or_postpone();
            }
        }
    }

    /// Compacts; a failure only postpones the bound (every entry is durable already).
    fn compact_or_postpone(&self) {
        if let Err(error) = self.compact() {
            log::warn!("state log compaction failed, will retry later: {error}");
            let mut inner = self.lock();
            inner.compact_at = inner.offsets.len() + self.retain / 2 + 1;
            inner.record_compact_at = inner.record_bytes + RECORD_COMPACT_BYTES / 2;
        }
    }

    /// Folds the records of the durable part into the store's files (outside the lock: writers
    /// go on meanwhile), then rewrites the file with the last `retain` events and everything
    /// written after that part (temp file, fsync, rename, fsync directory) and reopens it.
    pub fn compact(&self) -> Result<(), StateError> {
        let _one_at_a_time = self
            .compacting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let (reader, cut) = {
            let mut inner = self.lock();
            inner.compaction_requested = false;
            let reader = inner
                .file
                .try_clone()
                .map_err(|source| StateError::io(&self.path, "open", source))?;
            (reader, inner.synced_len)
        };
        // Nothing below `synced_len` changes until this compaction replaces the file.
        let mut head = vec![0u8; cut as usize];
        reader
            .read_exact_at(&mut head, 0)
            .map_err(|source| StateError::io(&self.path, "read", source))?;
        let parsed = parse_log(&head);
        if parsed.valid_len != cut {
            return Err(StateError::Corrupt {
                path: self.path.clone(),
                message: format!(
                    "its durable part does not read back whole (valid up to byte {} of {cut})",
                    parsed.valid_len
                ),
            });
        }
        let folding = self.folder.as_ref().filter(|_| !parsed.records.is_empty());
        if let Some(folder) = folding {
            let (_, _, next_seq) = parsed.numbering(0);
            folder(&parsed.records(&head), next_seq)?;
        }

        let mut inner = self.lock();
        if inner.damaged_tail {
            return Ok(()); // the next write repairs it; compaction comes back later
        }
        let drop_count = inner.offsets.len().saturating_sub(self.retain);
        let keep_records = self.folder.is_none();
        let mut content = Vec::with_capacity(head.len());
        let mut event_index = 0usize;
        for line in head.split_inclusive(|&b| b == b'\n') {
            let keep = if is_record_line(line) {
                keep_records
            } else {
                event_index += 1;
                event_index > drop_count
            };
            if keep {
                content.extend_from_slice(line);
            }
        }
        if content.len() == head.len() {
            // Nothing to drop: the file stays as it is.
            inner.compact_at = self.retain * 2;
            inner.record_compact_at = inner.record_bytes + RECORD_COMPACT_BYTES;
            return Ok(());
        }
        let mut tail = vec![0u8; (inner.len - cut) as usize];
        inner
            .file
            .read_exact_at(&mut tail, cut)
            .map_err(|source| StateError::io(&self.path, "read", source))?;
        content.extend_from_slice(&tail);
        let renamed = match fsio::write_atomic(&self.faults, &self.path, &content) {
            Ok(()) => Ok(()),
            // The rename happened; only its durability is in doubt. The old handle now points at
            // the replaced file, so carry on with the new one and report the doubt.
            Err(error) if error.step == FsStep::SyncDir => Err(error),
            Err(error) => return Err(error.into()),
        };
        inner.file = fsio::open_append(&self.faults, &self.path)?;
        let reparsed = parse_log(&content);
        inner.first_seq = if reparsed.offsets.is_empty() {
            inner.next_seq
        } else {
            reparsed.first_seq
        };
        inner.offsets = reparsed.offsets;
        inner.len = content.len() as u64;
        inner.synced_len = inner.len;
        inner.unsynced_records.clear();
        inner.record_bytes = reparsed.record_bytes;
        inner.compact_at = self.retain * 2;
        inner.record_compact_at = inner.record_bytes + RECORD_COMPACT_BYTES;
        renamed.map_err(StateError::from)
    }

    /// Up to `limit` events numbered after `after`, oldest first. Events compacted away are
    /// skipped: a reader can tell by comparing the first number returned with `after + 1`.
    pub fn read_since(&self, after: u64, limit: usize) -> Result<Vec<Event>, StateError> {
        let inner = self.lock();
        let wanted_first = after.saturating_add(1).max(inner.first_seq);
        let start = (wanted_first - inner.first_seq) as usize;
        if start >= inner.offsets.len() || limit == 0 {
            return Ok(Vec::new());
        }
        let end = start.saturating_add(limit).min(inner.offsets.len());
        let from = inner.offsets[start];
        let to = inner.offsets.get(end).copied().unwrap_or(inner.len);
        let mut bytes = vec![0u8; (to - from) as usize];
        inner
            .file
            .read_exact_at(&mut bytes, from)
            .map_err(|source| StateError::io(&self.path, "read", source))?;
        drop(inner);
        bytes
            .split(|&b| b == b'\n')
            .filter(|line| !line.is_empty() && !is_record_line(line))
            .map(|line| {
                serde_json::from_slice::<Event>(line).map_err(|e| StateError::Corrupt {
                    path: self.path.clone(),
                    message: format!("unreadable event line: {e}"),
                })
            })
            .collect()
    }
}

impl From<FsError> for StateError {
    fn from(error: FsError) -> StateError {
        StateError::Io {
            path: error.path,
            step: error.step.as_str(),
            source: error.source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::scratch::ScratchDir;
    use std::io::Write;

    /// A directory with an event log and its quarantine, removed when dropped.
    struct Scratch {
        directory: ScratchDir,
    }

    impl Scratch {
        fn new() -> Scratch {
            let directory = ScratchDir::new("deckhand-eventlog");
            std::fs::create_dir_all(directory.path.join("quarantine"))
                .expect("temp dir is writable");
            Scratch { directory }
        }
        fn log_path(&self) -> PathBuf {
            self.directory.path.join("events.log")
        }
        fn open(&self, retain: usize) -> (EventLogFile, EventLogReplay) {
            self.open_with(Arc::new(FaultInjector::new()), retain)
        }
        fn open_with(
            &self,
            faults: Arc<FaultInjector>,
            retain: usize,
        ) -> (EventLogFile, EventLogReplay) {
            let (log, replay, _) = EventLogFile::open(
                &self.log_path(),
                &self.directory.path.join("quarantine"),
                faults,
                0,
                retain,
                None,
            )
            .expect("event log opens");
            (log, replay)
        }
        /// The log opened again (no faults, no folder), with the records it holds.
        fn reopen_with_records(&self) -> (EventLogFile, EventLogReplay, Vec<LogRecord>) {
            EventLogFile::open(
                &self.log_path(),
                &self.directory.path.join("quarantine"),
                Arc::new(FaultInjector::new()),
                0,
                100,
                None,
            )
            .expect("reopen")
        }
        fn quarantined(&self) -> usize {
            std::fs::read_dir(self.directory.path.join("quarantine"))
                .expect("quarantine dir")
                .count()
        }
    }

    fn event(seq: u64) -> Event {
        Event {
            seq,
            time: 1_000 + seq,
            task: "0123456789abcdef0123456789abcdef".to_string(),
            container: Some("web".to_string()),
            status: "RUNNING".to_string(),
            exit_code: None,
            reason: None,
        }
    }

    fn seqs(events: &[Event]) -> Vec<u64> {
        events.iter().map(|e| e.seq).collect()
    }

    #[test]
    fn appends_read_back_in_order_and_survive_reopen() {
        let scratch = Scratch::new();
        let (log, replay) = scratch.open(100);
        assert_eq!((replay.events, replay.last_seq, replay.next_seq), (0, 0, 1));
        log.append(&event(1)).expect("append 1");
        log.append_batch(&[event(2), event(3), event(4)])
            .expect("batch");
        assert_eq!(
            seqs(&log.read_since(0, 10).expect("read")),
            vec![1, 2, 3, 4]
        );
        assert_eq!(seqs(&log.read_since(2, 1).expect("read")), vec![3]);
        assert!(log.read_since(4, 10).expect("read").is_empty());
        assert_eq!(log.read_since(0, 10).expect("read")[0], event(1));
        drop(log);
        let (log, replay) = scratch.open(100);
        assert_eq!((replay.events, replay.last_seq, replay.next_seq), (4, 4, 5));
        assert_eq!(replay.cut_bytes, 0);
        assert_eq!(seqs(&log.read_since(1, 10).expect("read")), vec![2, 3, 4]);
    }

    #[test]
    fn out_of_order_events_are_refused_and_nothing_is_written() {
        let scratch = Scratch::new();
        let (log, _) = scratch.open(100);
        log.append(&event(1)).expect("append");
        let error = log.append_batch(&[event(2), event(4)]).expect_err("gap");
        assert!(
            matches!(
                error,
                StateError::EventSequence {
                    expected: 3,
                    found: 4
                }
            ),
            "{error}"
        );
        let error = log.append(&event(1)).expect_err("reuse");
        assert!(
            matches!(
                error,
                StateError::EventSequence {
                    expected: 2,
                    found: 1
                }
            ),
            "{error}"
        );
        assert_eq!(log.next_seq(), 2);
        assert_eq!(seqs(&log.read_since(0, 10).expect("read")), vec![1]);
    }

    #[test]
    fn replay_cuts_a_torn_last_line_and_reports_the_last_number() {
        // Row by row: what a crash left after three good lines.
        let table: [(&str, &[u8]); 3] = [
            ("half a line", b"{\"seq\":4,\"time\":1,\"ta"),
            ("zeros from a crash after the size grew", &[0u8; 64]),
            (
                "a complete but unreadable last line",
                b"{\"seq\":4,garbage}\n",
            ),
        ];
        for (row, tail) in table {
            let scratch = Scratch::new();
            let (log, _) = scratch.open(100);
            log.append_batch(&[event(1), event(2), event(3)])
                .expect("append");
            let good_len = std::fs::metadata(scratch.log_path()).expect("meta").len();
            drop(log);
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(scratch.log_path())
                .expect("open");
            file.write_all(tail).expect("write tail");
            drop(file);
            let (log, replay) = scratch.open(100);
            assert_eq!(replay.last_seq, 3, "{row}");
            assert_eq!(replay.next_seq, 4, "{row}");
            assert_eq!(replay.cut_bytes, tail.len() as u64, "{row}");
            assert_eq!(replay.quarantined, None, "{row}: a torn tail is not damage");
            assert_eq!(
                std::fs::metadata(scratch.log_path()).expect("meta").len(),
                good_len,
                "{row}"
            );
            log.append(&event(4)).expect("append after the cut");
            assert_eq!(
                seqs(&log.read_since(0, 10).expect("read")),
                vec![1, 2, 3, 4],
                "{row}"
            );
        }
    }

    #[test]
    fn damage_in_the_middle_is_quarantined_and_numbers_are_not_reused() {
        let scratch = Scratch::new();
        let mut content = Vec::new();
        for seq in 1..=2 {
            serde_json::to_writer(&mut content, &event(seq)).expect("encode");
            content.push(b'\n');
        }
        content.extend_from_slice(b"\x00\x00 bit rot \x00\n");
        for seq in 4..=5 {
            serde_json::to_writer(&mut content, &event(seq)).expect("encode");
            content.push(b'\n');
        }
        std::fs::write(scratch.log_path(), &content).expect("write");
        let (log, replay) = scratch.open(100);
        assert_eq!(replay.last_seq, 2);
        assert_eq!(
            replay.next_seq, 6,
            "continues after the highest number ever written"
        );
        let quarantined = replay.quarantined.expect("damage is quarantined");
        assert!(
            quarantined.error.contains("2 valid event(s)"),
            "{}",
            quarantined.error
        );
        assert_eq!(std::fs::read(&quarantined.moved_to).expect("copy"), content);
        assert_eq!(scratch.quarantined(), 1);
        log.append(&event(6)).expect("append");
        assert_eq!(seqs(&log.read_since(0, 10).expect("read")), vec![1, 2, 6]);
    }

    #[test]
    fn a_gap_in_the_file_counts_as_damage() {
        let scratch = Scratch::new();
        let mut content = Vec::new();
        for seq in [1, 2, 5] {
            serde_json::to_writer(&mut content, &event(seq)).expect("encode");
            content.push(b'\n');
        }
        std::fs::write(scratch.log_path(), &content).expect("write");
        let (_log, replay) = scratch.open(100);
        assert_eq!((replay.last_seq, replay.next_seq), (2, 6));
        assert!(replay.quarantined.is_some());
    }

    #[test]
    fn compaction_keeps_the_last_events_and_bounds_the_file() {
        let scratch = Scratch::new();
        let (log, _) = scratch.open(10);
        for seq in 1..=55 {
            log.append(&event(seq)).expect("append");
            assert!(
                log.len() < 20,
                "never more than 2 x retain events, at {seq}"
            );
        }
        let first = log.first_seq();
        assert!(first > 1 && first <= 46, "first kept {first}");
        let all = log.read_since(0, 1000).expect("read");
        assert_eq!(all.first().map(|e| e.seq), Some(first));
        assert_eq!(all.last().map(|e| e.seq), Some(55));
        assert_eq!(seqs(&all), (first..=55).collect::<Vec<_>>());
        assert_eq!(seqs(&log.read_since(50, 2).expect("read")), vec![51, 52]);
        drop(log);
        let (log, replay) = scratch.open(10);
        assert_eq!((replay.last_seq, replay.next_seq), (55, 56));
        assert_eq!(log.first_seq(), first);
        let leftovers: Vec<_> = std::fs::read_dir(&scratch.directory.path)
            .expect("dir")
            .map(|e| e.expect("entry").file_name())
            .filter(|n| n.to_string_lossy().contains(fsio::TEMP_MARKER))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn a_failed_append_leaves_no_trace_and_the_next_one_works() {
        for step in [FsStep::Write, FsStep::SyncFile] {
            let scratch = Scratch::new();
            let faults = Arc::new(FaultInjector::new());
            let (log, _) = scratch.open_with(Arc::clone(&faults), 100);
            log.append(&event(1)).expect("append");
            let len = std::fs::metadata(scratch.log_path()).expect("meta").len();
            faults.fail_times(step, "events.log", 28, 1);
            let error = log
                .append_batch(&[event(2), event(3)])
                .expect_err("injected");
            assert_eq!(faults.fired(), 1, "{step:?}");
            let text = error.to_string();
            assert!(
                text.contains("events.log") && text.contains("No space left"),
                "{text}"
            );
            assert_eq!(
                std::fs::metadata(scratch.log_path()).expect("meta").len(),
                len,
                "{step:?}"
            );
            assert_eq!(log.next_seq(), 2, "{step:?}");
            log.append(&event(2)).expect("append after the failure");
            drop(log);
            let (log, replay) = scratch.open(100);
            assert_eq!(replay.cut_bytes, 0, "{step:?}");
            assert_eq!(
                seqs(&log.read_since(0, 10).expect("read")),
                vec![1, 2],
                "{step:?}"
            );
        }
    }

    #[test]
    fn bytes_that_could_not_be_cut_are_cut_before_the_next_append() {
        let scratch = Scratch::new();
        let faults = Arc::new(FaultInjector::new());
        let (log, _) = scratch.open_with(Arc::clone(&faults), 100);
        log.append(&event(1)).expect("append");
        faults.fail_times(FsStep::Write, "events.log", 28, 1);
        faults.fail_times(FsStep::Truncate, "events.log", 5, 1);
        log.append(&event(2))
            .expect_err("write fails, and so does the cut");
        assert_eq!(faults.fired(), 2);
        let len_with_half_line = std::fs::metadata(scratch.log_path()).expect("meta").len();
        log.append(&event(2)).expect("the next append cuts first");
        log.append(&event(3)).expect("append");
        assert!(std::fs::metadata(scratch.log_path()).expect("meta").len() > len_with_half_line);
        drop(log);
        let (log, replay) = scratch.open(100);
        assert_eq!((replay.cut_bytes, replay.quarantined), (0, None));
        assert_eq!(seqs(&log.read_since(0, 10).expect("read")), vec![1, 2, 3]);
    }

    #[test]
    fn a_failed_compaction_keeps_every_event_and_is_retried() {
        let scratch = Scratch::new();
        let faults = Arc::new(FaultInjector::new());
        let (log, _) = scratch.open_with(Arc::clone(&faults), 4);
        faults.fail_times(FsStep::Rename, "events.log", 30, 1);
        for seq in 1..=8 {
            log.append(&event(seq))
                .expect("appends succeed even when compaction fails");
        }
        assert_eq!(faults.fired(), 1);
        assert_eq!(log.first_seq(), 1, "compaction did not happen");
        for seq in 9..=12 {
            log.append(&event(seq)).expect("append");
        }
        assert!(log.first_seq() > 1, "compaction retried later");
        drop(log);
        let (log, replay) = scratch.open(4);
        assert_eq!(replay.last_seq, 12);
        let all = log.read_since(0, 100).expect("read");
        assert_eq!(all.last().map(|e| e.seq), Some(12));
    }

    fn checkpoint_line(id: &str, version: u64) -> Vec<u8> {
        let body = format!(r#"{{"schema":1,"task":{{"id":"{id}","version":{version}}}}}"#);
        record_line(RecordKind::Checkpoint, body.as_bytes())
    }

    fn kinds_and_bodies(records: &[LogRecord]) -> Vec<(RecordKind, String)> {
        records
            .iter()
            .map(|record| {
                (
                    record.kind,
                    String::from_utf8_lossy(&record.body).into_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn records_between_events_replay_in_order_and_readers_see_only_events() {
        let scratch = Scratch::new();
        let (log, _) = scratch.open(100);
        log.append_record(&checkpoint_line("a", 1)).expect("record");
        log.append(&event(1)).expect("append");
        log.append_record(&record_line(RecordKind::Forget, br#""a""#))
            .expect("record");
        log.append_record(&record_line(
            RecordKind::Agent,
            br#"{"schema":1,"agent":{}}"#,
        ))
        .expect("record");
        log.append(&event(2)).expect("append");
        log.append_record(&checkpoint_line("b", 1))
            .expect("unsynced record");
        assert_eq!(seqs(&log.read_since(0, 10).expect("read")), vec![1, 2]);
        assert_eq!(seqs(&log.read_since(1, 10).expect("read")), vec![2]);
        assert!(log.record_bytes() > 0);
        drop(log);
        let (log, replay, records) = scratch.reopen_with_records();
        assert_eq!((replay.last_seq, replay.cut_bytes), (2, 0));
        assert_eq!(
            kinds_and_bodies(&records),
            vec![
                (
                    RecordKind::Checkpoint,
                    r#"{"schema":1,"task":{"id":"a","version":1}}"#.to_string()
                ),
                (RecordKind::Forget, r#""a""#.to_string()),
                (RecordKind::Agent, r#"{"schema":1,"agent":{}}"#.to_string()),
                (
                    RecordKind::Checkpoint,
                    r#"{"schema":1,"task":{"id":"b","version":1}}"#.to_string()
                ),
            ],
            "a record written without a sync survives the process"
        );
        assert_eq!(seqs(&log.read_since(0, 10).expect("read")), vec![1, 2]);
    }

    #[test]
    fn a_failed_sync_cuts_the_events_and_writes_the_waiting_records_again() {
        let scratch = Scratch::new();
        let faults = Arc::new(FaultInjector::new());
        let (log, _) = scratch.open_with(Arc::clone(&faults), 100);
        log.append(&event(1)).expect("append");
        log.append_record(&checkpoint_line("a", 2)).expect("record");
        faults.fail_times(FsStep::SyncFile, "events.log", 5, 1);
        log.append_batch(&[event(2), event(3)])
            .expect_err("the sync fails");
        assert_eq!(log.next_seq(), 2, "the events took no number");
        faults.fail_times(FsStep::SyncFile, "events.log", 5, 1);
        log.sync().expect_err("a plain sync fails too");
        log.sync().expect("and works once the disk does");
        drop(log);
        let (_, replay, records) = scratch.reopen_with_records();
        assert_eq!((replay.last_seq, replay.cut_bytes), (1, 0));
        assert_eq!(
            kinds_and_bodies(&records),
            vec![(
                RecordKind::Checkpoint,
                r#"{"schema":1,"task":{"id":"a","version":2}}"#.to_string()
            )],
            "the record whose writer was told it was written is there, once"
        );
    }

    #[test]
    fn a_durable_record_that_fails_leaves_only_the_others() {
        let scratch = Scratch::new();
        let faults = Arc::new(FaultInjector::new());
        let (log, _) = scratch.open_with(Arc::clone(&faults), 100);
        log.append_record(&checkpoint_line("other", 1))
            .expect("record");
        faults.fail_times(FsStep::SyncFile, "events.log", 28, 1);
        log.append_record_durably(&checkpoint_line("refused", 1))
            .expect_err("the sync fails");
        log.sync().expect("sync");
        drop(log);
        let (_, _, records) = scratch.reopen_with_records();
        assert_eq!(
            kinds_and_bodies(&records),
            vec![(
                RecordKind::Checkpoint,
                r#"{"schema":1,"task":{"id":"other","version":1}}"#.to_string()
            )]
        );
    }

    #[test]
    fn compaction_folds_the_records_and_keeps_the_events() {
        let scratch = Scratch::new();
        type Folded = Vec<(Vec<LogRecord>, u64)>;
        let folded: Arc<Mutex<Folded>> = Arc::default();
        let folder: RecordFolder = {
            let folded = Arc::clone(&folded);
            Box::new(move |records, next_seq| {
                folded
                    .lock()
                    .expect("not poisoned")
                    .push((records.to_vec(), next_seq));
                Ok(())
            })
        };
        let (log, _, _) = EventLogFile::open(
            &scratch.log_path(),
            &scratch.directory.path.join("quarantine"),
            Arc::new(FaultInjector::new()),
            0,
            100,
            Some(folder),
        )
        .expect("open");
        log.append_record(&checkpoint_line("a", 1)).expect("record");
        log.append(&event(1)).expect("append");
        log.append_record(&checkpoint_line("a", 2)).expect("record");
        log.append(&event(2)).expect("append");
        log.compact().expect("compaction");
        let calls = folded.lock().expect("not poisoned").clone();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].0.len(), 2, "both records, in order");
        assert_eq!(calls[0].1, 3, "the next event number");
        assert_eq!(log.record_bytes(), 0);
        let text = std::fs::read_to_string(scratch.log_path()).expect("read");
        assert!(!text.contains("checkpoint"), "{text}");
        assert_eq!(seqs(&log.read_since(0, 10).expect("read")), vec![1, 2]);
        log.append(&event(3)).expect("append after compaction");
        assert_eq!(seqs(&log.read_since(0, 10).expect("read")), vec![1, 2, 3]);
    }

    #[test]
    fn a_torn_record_is_cut_and_a_damaged_one_is_damage() {
        let scratch = Scratch::new();
        let (log, _) = scratch.open(100);
        log.append(&event(1)).expect("append");
        drop(log);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(scratch.log_path())
            .expect("open");
        file.write_all(br#"{"checkpoint":{"schema":1,"ta"#)
            .expect("torn record");
        drop(file);
        let (log, replay) = scratch.open(100);
        assert_eq!((replay.last_seq, replay.quarantined.is_none()), (1, true));
        assert!(replay.cut_bytes > 0);
        drop(log);
        let mut content = std::fs::read(scratch.log_path()).expect("read");
        content.extend_from_slice(b"{\"checkpoint\":not json}\n");
        serde_json::to_writer(&mut content, &event(2)).expect("encode");
        content.push(b'\n');
        std::fs::write(scratch.log_path(), &content).expect("write");
        let (_, replay) = scratch.open(100);
        assert_eq!(replay.last_seq, 1);
        assert!(replay.quarantined.is_some(), "valid lines after the damage");
    }
}
