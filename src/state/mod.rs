//! The durable state store under `ECS_DATADIR` (docs/ENGINE.md §11): what survives `kill -9`,
//! a power cut or an upgrade.
//!
//! Layout:
//!
//! ```text
//! ECS_DATADIR/
//!   events.log        the state log (event_log.rs): the events, one JSON line each, and between
//!                     them the store's records (task checkpoints, tasks forgotten, the agent
//!                     record) not yet folded into the files below
//!   agent.json        {"schema": 1, "agent": {next_sequence, next_event_seq, images_pulled}}
//!   images.json       {"schema": 1, "images": {"images": [...]}}: images tasks used (images.rs)
//!   tasks/<id>.json   {"schema": 1, "task": {...}}, one file per task, as of the last compaction
//!   quarantine/       files that could not be loaded, kept for a human to look at
//! ```
//!
//! Why a log in front of the files: every change a task makes is one line appended to the
//! state log without a sync, and one fdatasync makes it durable together with the events it
//! caused and with every other task's changes written meanwhile (group commit). A checkpoint
//! no longer costs a file, its fsync, a rename and a directory fsync. Syncs happen where a
//! promise needs them: a submitted task and an owner's stop are durable before they are
//! acknowledged ([`StateStore::save_task`], [`StateStore::sync`]), an event before a reader
//! sees it (the event append), and a container's name, fixed at submit, before its create.
//! The log's compaction folds its records into the per-task files and `agent.json` on a thread
//! of its own (event_log.rs); loading reads the files, then replays the log's records over them.
//! Every file write is atomic (fsio.rs): a crash leaves the old file or the new one, and a failed
//! write (disk full, read-only) returns an error naming the file and the OS error while what
//! was on disk stays intact.
//!
//! Loading refuses a file (or a record) from a newer schema ([`StateError::FutureSchema`],
//! which the agent maps to exit 78: an older binary must not silently drop what a newer one
//! wrote) and moves a corrupt file to `quarantine/`, reporting it, so that one bad file does not
//! keep every other task from being restored.

mod error;
pub mod event_log;
mod file_format;
pub mod fsio;
pub mod images;
mod load;
mod log_format;
mod records;
#[cfg(test)]
pub(crate) mod scratch;

pub use error::StateError;
pub use event_log::{
    EventLogFile, EventLogReplay, LogRecord, RecordKind, DEFAULT_RETAIN_EVENTS,
    RECORD_COMPACT_BYTES,
};
pub use file_format::{
    decode_task_file, encode_task_file, load_record, save_record, validate_task_id, SCHEMA_VERSION,
};
pub(crate) use file_format::{encode_agent_file, parse_versioned, read_versioned, LoadProblem};
pub use fsio::{io_counts, FaultInjector, FsStep, IoCounts};
pub use images::{ImagesRecord, TrackedImage};
pub(crate) use load::quarantine_path;
pub use load::{LoadedState, QuarantinedFile};
pub use records::read_saved_tasks;
pub(crate) use records::replay_records;

use crate::task::{Millis, Task};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// The largest sequence or event number accepted from disk: more than an agent hands out in
/// centuries, and far enough below `u64::MAX` that counting on from it cannot overflow. A file
/// holding a larger one is damaged, not trusted.
pub const MAX_STORED_NUMBER: u64 = 1 << 53;

/// How many sequence numbers one agent record reserves.
///
/// Why blocks: a sequence number must be durable before the command that carries it is
/// acknowledged, and must never be handed out twice, even across a crash. Recording the
/// high-water mark of a reserved block (rather than every number) makes most `next_sequence`
/// calls free; a restart continues after the whole block, so it may skip up to 63 numbers but
/// never reuses one. Gaps are harmless: the numbers only order stops before later starts (§9).
/// The reservation is a record in the state log, written before the number is handed out: the
/// command's own sync, which comes after it in the log, makes both durable.
pub const SEQUENCE_BLOCK: u64 = 64;

/// The agent's own durable record (`agent.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct AgentRecord {
    /// Every sequence number below this may have been handed out; numbering resumes here.
    #[serde(default)]
    pub next_sequence: u64,
    /// The lowest number the next event may carry (a floor in case the event log is lost).
    #[serde(default)]
    pub next_event_seq: u64,
    /// Images this agent pulled successfully, with the time (for pull behaviour `once`).
    #[serde(default)]
    pub images_pulled: BTreeMap<String, Millis>,
}

struct AgentState {
    /// As last written to `agent.json`.
    record: AgentRecord,
    /// The next sequence number to hand out; `< record.next_sequence` while a block lasts.
    next_to_hand_out: u64,
}

/// The durable state store. Share it between threads behind an `Arc`.
pub struct StateStore {
    datadir: PathBuf,
    tasks_dir: PathBuf,
    quarantine_dir: PathBuf,
    images_path: PathBuf,
    faults: Arc<FaultInjector>,
    agent: Mutex<AgentState>,
    /// `images.json` as loaded or last written.
    images: Mutex<ImagesRecord>,
    event_log: Arc<EventLogFile>,
}

impl fmt::Debug for StateStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateStore")
            .field("datadir", &self.datadir)
            .finish()
    }
}

/// The state-log line of a task's checkpoint: its checkpoint file's bytes as a record.
fn checkpoint_line(task: &Task) -> Result<Vec<u8>, StateError> {
    validate_task_id(&task.id)?;
    let body = encode_task_file(task)?;
    Ok(event_log::record_line(RecordKind::Checkpoint, &body))
}

impl StateStore {
    pub fn datadir(&self) -> &Path {
        &self.datadir
    }

    pub fn quarantine_dir(&self) -> &Path {
        &self.quarantine_dir
    }

    /// The durable event log (the reporter thread appends to it; subscribers read it).
    pub fn event_log(&self) -> Arc<EventLogFile> {
        Arc::clone(&self.event_log)
    }

    /// The path of a task's checkpoint file.
    pub fn task_path(&self, task_id: &str) -> Result<PathBuf, StateError> {
        validate_task_id(task_id)?;
        Ok(self.tasks_dir.join(format!("{task_id}.json")))
    }

    /// Writes a task's checkpoint durably: the record, then one sync of the state log (shared
    /// with every other writer waiting meanwhile). For what must be on disk before it is
    /// acknowledged: a submitted task. How long it took goes to
    /// `deckhand_checkpoint_duration_seconds`, failed writes included.
    pub fn save_task(&self, task: &Task) -> Result<(), StateError> {
        let started = Instant::now();
        let written =
            checkpoint_line(task).and_then(|line| self.event_log.append_record_durably(&line));
        crate::metrics::global().observe_checkpoint(started.elapsed());
        written
    }

    /// Writes a task's checkpoint as a record of the state log without a sync: it survives the
    /// process being killed, and becomes durable with the next sync or event (the managed
    /// task's checkpoint after each change).
    pub fn record_task(&self, task: &Task) -> Result<(), StateError> {
        let started = Instant::now();
        let written = checkpoint_line(task).and_then(|line| self.event_log.append_record(&line));
        crate::metrics::global().observe_checkpoint(started.elapsed());
        written
    }

    /// Makes every record written so far durable (one fdatasync of the state log at most).
    pub fn sync(&self) -> Result<(), StateError> {
        self.event_log.sync()
    }

    /// Forgets a task (after its cleanup): a record in the state log; compaction removes its
    /// file. Forgetting a task that has no checkpoint is not an error. Not synced: a forget that
    /// a power cut loses restores a task whose containers are gone, which cleans up again.
    pub fn delete_task(&self, task_id: &str) -> Result<(), StateError> {
        validate_task_id(task_id)?;
        let body = serde_json::to_vec(task_id).map_err(|e| StateError::Encode {
            what: format!("task {task_id}"),
            message: e.to_string(),
        })?;
        self.event_log
            .append_record(&event_log::record_line(RecordKind::Forget, &body))
    }

    /// Folds the state log's records into the task files and `agent.json` now (a clean shutdown
    /// does this, so the files alone hold the whole state afterwards).
    pub fn compact(&self) -> Result<(), StateError> {
        self.event_log.sync()?;
        self.event_log.compact()
    }

    fn lock_agent(&self) -> MutexGuard<'_, AgentState> {
        // `record` changes only after its write succeeded, so a poisoned lock is consistent.
        self.agent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes the agent record as a record of the state log (no sync of its own: what depends
    /// on it is synced after it).
    fn write_agent(&self, record: &AgentRecord) -> Result<(), StateError> {
        let body = encode_agent_file(record)?;
        self.event_log
            .append_record(&event_log::record_line(RecordKind::Agent, &body))
    }

    /// The next command sequence number, durable before it is returned: no later start of
    /// deckhand hands it out again. Starts at 1 (0 means "none").
    pub fn next_sequence(&self) -> Result<u64, StateError> {
        let mut agent = self.lock_agent();
        if agent.next_to_hand_out >= agent.record.next_sequence {
            let mut record = agent.record.clone();
            record.next_sequence = agent.next_to_hand_out + SEQUENCE_BLOCK;
            self.write_agent(&record)?;
            agent.record = record;
        }
        let number = agent.next_to_hand_out;
        agent.next_to_hand_out += 1;
        Ok(number)
    }

    /// The agent record as last written.
    pub fn agent(&self) -> AgentRecord {
        self.lock_agent().record.clone()
    }

    /// Write the agent record. `next_sequence` and `next_event_seq` only ever rise: a value
    /// below what the store already reserved is raised to it, so a caller holding an old copy
    /// cannot make numbers be reused. `images_pulled` is replaced.
    pub fn save_agent(&self, record: &AgentRecord) -> Result<(), StateError> {
        let mut agent = self.lock_agent();
        self.save_agent_locked(&mut agent, record)
    }

    fn save_agent_locked(
        &self,
        agent: &mut AgentState,
        record: &AgentRecord,
    ) -> Result<(), StateError> {
        let next_to_hand_out = agent.next_to_hand_out.max(record.next_sequence);
        let merged = AgentRecord {
            next_sequence: agent.record.next_sequence.max(next_to_hand_out),
            next_event_seq: agent
                .record
                .next_event_seq
                .max(record.next_event_seq)
                .max(self.event_log.next_seq()),
            images_pulled: record.images_pulled.clone(),
        };
        self.write_agent(&merged)?;
        agent.record = merged;
        agent.next_to_hand_out = next_to_hand_out;
        Ok(())
    }

    /// Record that `image` was pulled successfully at `at` (pull behaviour `once`), as a record
    /// of the state log, durable with the next sync (a power cut before it makes `once` pull
    /// the image one more time).
    pub fn record_image_pulled(&self, image: &str, at: Millis) -> Result<(), StateError> {
        let mut agent = self.lock_agent();
        let mut record = agent.record.clone();
        record.images_pulled.insert(image.to_string(), at);
        self.save_images_pulled_locked(&mut agent, record)
    }

    /// Writes the agent record with new `images_pulled` and the counters as they are: the
    /// numbers left in the reserved block stay available (going through
    /// [`StateStore::save_agent`] would treat the block's end as handed out and spend it).
    fn save_images_pulled_locked(
        &self,
        agent: &mut AgentState,
        mut record: AgentRecord,
    ) -> Result<(), StateError> {
        record.next_event_seq = record.next_event_seq.max(self.event_log.next_seq());
        self.write_agent(&record)?;
        agent.record = record;
        Ok(())
    }

    /// Whether this agent ever pulled `image` successfully.
    pub fn image_pulled(&self, image: &str) -> bool {
        self.lock_agent().record.images_pulled.contains_key(image)
    }

    /// Forgets that `images` were pulled (image cleanup removed them), durably, so pull
    /// behaviour `once` pulls them again. Nothing is written when none was recorded.
    pub fn forget_images_pulled(&self, images: &[String]) -> Result<(), StateError> {
        let mut agent = self.lock_agent();
        if !images
            .iter()
            .any(|image| agent.record.images_pulled.contains_key(image))
        {
            return Ok(());
        }
        let mut record = agent.record.clone();
        for image in images {
            record.images_pulled.remove(image);
        }
        self.save_images_pulled_locked(&mut agent, record)
    }

    /// Writes `images.json` atomically. The caller orders its writes (image tracking holds its
    /// own lock across this call).
    pub fn save_images(&self, record: &ImagesRecord) -> Result<(), StateError> {
        let bytes = file_format::encode_images_file(record)?;
        fsio::write_atomic(&self.faults, &self.images_path, &bytes)?;
        *self
            .images
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = record.clone();
        Ok(())
    }

    /// `images.json` as loaded at open or last written.
    pub fn images(&self) -> ImagesRecord {
        self.images
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}
