//! The durable event log: `ECS_DATADIR/events.log`, one JSON line per state-change event
//! ([`crate::event::Event`]), sequence numbers gap-free.
//!
//! Why durable: subscribers (the API's long-poll, `deckhand events`, later a remote sink) read
//! events by sequence number, and a restart must neither lose an event that was reported as
//! recorded nor reuse a number a subscriber has already seen.
//!
//! - **Append** writes the lines and fdatasyncs once per call. [`EventLogFile::append_batch`] is
//!   the group commit: the reporter drains its inbox and appends everything pending with one fsync.
//!   A failed write or fsync cuts the file back to its last durable length, so the log never
//!   holds a half line or an event its caller was told failed.
//! - **Replay at open** keeps the longest valid prefix. A torn last line (a crash mid-append) is
//!   cut silently; garbage followed by valid lines (the disk damaged the middle) is copied to
//!   `quarantine/` before the cut and reported. The next number continues after the highest one
//!   ever seen, so no number is reused even then.
//! - **Bounded size**: once the file holds `2 × retain` events it is compacted to the last
//!   `retain` events, written atomically (temp file, fsync, rename, fsync directory).
//! - **Reads** use an in-memory table of line offsets (8 bytes per event), so `read_since` costs a
//!   seek and the bytes read, whatever the file size.

use crate::event::Event;
use crate::state::fsio::{self, FaultInjector, FsError, FsStep};
use crate::state::{QuarantinedFile, StateError, MAX_STORED_NUMBER};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// How many events compaction keeps by default.
pub const DEFAULT_RETAIN_EVENTS: usize = 10_000;

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
    /// Set when the cut removed valid events after damaged bytes (not just a torn tail): a copy
    /// of the whole file before the cut.
    pub quarantined: Option<QuarantinedFile>,
}

struct Inner {
    file: File,
    /// Byte offset of each event line: index `i` holds the event numbered `first_seq + i`.
    offsets: Vec<u64>,
    first_seq: u64,
    next_seq: u64,
    /// Length of the durable, valid content.
    len: u64,
    /// Do not retry a failed compaction before the log holds this many events.
    compact_at: usize,
    /// A failed append left bytes past `len` that could not be cut yet: cut them before the
    /// next append, or a later replay would take them for damage and drop what follows.
    needs_cut: bool,
}

/// The durable event log. Shared between threads (`Arc<EventLogFile>`); appends are serialised on
/// one mutex, which is held across the fsync because every append goes to the same file.
pub struct EventLogFile {
    path: PathBuf,
    faults: Arc<FaultInjector>,
    retain: usize,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for EventLogFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLogFile")
            .field("path", &self.path)
            .finish()
    }
}

pub(crate) struct ParsedLog {
    offsets: Vec<u64>,
    first_seq: u64,
    valid_len: u64,
    /// Highest sequence number on any parseable line, valid prefix or not.
    highest_seq_seen: u64,
    /// Valid event lines after the first bad one (damage, not a torn tail).
    events_after_damage: usize,
}

impl ParsedLog {
    /// (first, last, next) event numbers after replay; the next is above every number seen and
    /// at least `next_seq_floor`.
    pub(crate) fn numbering(&self, next_seq_floor: u64) -> (u64, u64, u64) {
        let last_seq = if self.offsets.is_empty() {
            0
        } else {
            self.first_seq + self.offsets.len() as u64 - 1
        };
        let next_seq = (last_seq + 1)
            .max(self.highest_seq_seen + 1)
            .max(next_seq_floor.min(MAX_STORED_NUMBER))
            .max(1);
        let first_seq = if self.offsets.is_empty() {
            next_seq
        } else {
            self.first_seq
        };
        (first_seq, last_seq, next_seq)
    }
}

/// The longest prefix of `bytes` that is a gap-free run of complete event lines.
pub(crate) fn parse_log(bytes: &[u8]) -> ParsedLog {
    let mut parsed = ParsedLog {
        offsets: Vec::new(),
        first_seq: 0,
        valid_len: 0,
        highest_seq_seen: 0,
        events_after_damage: 0,
    };
    let mut damaged = false;
    let mut position = 0usize;
    while position < bytes.len() {
        let Some(newline) = bytes[position..].iter().position(|&b| b == b'\n') else {
            // A last line without its newline: the append that wrote it never finished.
            break;
        };
        let line = &bytes[position..position + newline];
        // A number past what deckhand could have written is damage, like unreadable JSON.
        let event = serde_json::from_slice::<Event>(line)
            .ok()
            .filter(|event| event.seq <= MAX_STORED_NUMBER);
        if let Some(event) = &event {
            parsed.highest_seq_seen = parsed.highest_seq_seen.max(event.seq);
        }
        if damaged {
            if event.is_some() {
                parsed.events_after_damage += 1;
            }
        } else {
            let expected = if parsed.offsets.is_empty() {
                None
            } else {
                Some(parsed.first_seq + parsed.offsets.len() as u64)
            };
            match event {
                Some(event) if event.seq >= 1 && expected.unwrap_or(event.seq) == event.seq => {
                    if parsed.offsets.is_empty() {
                        parsed.first_seq = event.seq;
                    }
                    parsed.offsets.push(position as u64);
                    parsed.valid_len = (position + newline + 1) as u64;
                }
                Some(_) => {
                    // A readable event out of sequence: what follows the gap is real content.
                    damaged = true;
                    parsed.events_after_damage += 1;
                }
                None => damaged = true,
            }
        }
        position += newline + 1;
    }
    parsed
}

impl EventLogFile {
    /// Open (creating if needed) the log at `path` and replay it. `next_seq_floor` is the lowest
    /// number the next event may carry (from the agent record, in case the log was lost);
    /// damaged content is copied into `quarantine_dir`.
    pub(crate) fn open(
        path: &Path,
        quarantine_dir: &Path,
        faults: Arc<FaultInjector>,
        next_seq_floor: u64,
        retain: usize,
    ) -> Result<(EventLogFile, EventLogReplay), StateError> {
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
                        "event log damaged at byte {}: {} valid event(s) after the damage were dropped",
                        parsed.valid_len, parsed.events_after_damage
                    ),
                });
            }
            fsio::set_len(&faults, &file, path, parsed.valid_len)?;
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
                compact_at: retain * 2,
                needs_cut: false,
            }),
        };
        Ok((log, replay))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every mutation of Inner happens after the I/O it describes succeeded, so a panic
        // elsewhere while holding the lock cannot leave it inconsistent.
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

    /// Append one event durably. Its `seq` must be [`EventLogFile::next_seq`].
    pub fn append(&self, event: &Event) -> Result<(), StateError> {
        self.append_batch(std::slice::from_ref(event))
    }

    /// Append events durably with one write and one fsync (group commit). They must be numbered
    /// `next_seq()`, `next_seq() + 1`, …; on error none of them is in the log.
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
            line_starts.push(inner.len + buffer.len() as u64);
            serde_json::to_writer(&mut buffer, event).map_err(|e| StateError::Encode {
                what: format!("event {}", event.seq),
                message: e.to_string(),
            })?;
            buffer.push(b'\n');
        }
        let durable_len = inner.len;
        if inner.needs_cut {
            fsio::set_len(&self.faults, &inner.file, &self.path, durable_len)?;
            inner.needs_cut = false;
        }
        let written = fsio::write_all(&self.faults, &mut inner.file, &self.path, &buffer)
            .and_then(|()| fsio::sync_data(&self.faults, &inner.file, &self.path));
        if let Err(error) = written {
            // Cut what part of the batch reached the file, so that the next append does not
            // follow a half line and a restart does not replay events reported as failed.
            if fsio::set_len(&self.faults, &inner.file, &self.path, durable_len).is_err() {
                inner.needs_cut = true;
            }
            return Err(error.into());
        }
        inner.len += buffer.len() as u64;
        inner.offsets.extend(line_starts);
        inner.next_seq += events.len() as u64;
        if inner.offsets.len() >= inner.compact_at {
            // The events are durable already; a failed compaction only postpones the bound.
            if let Err(error) = self.compact(&mut inner) {
                log::warn!("event log compaction failed, will retry later: {error}");
                inner.compact_at = inner.offsets.len() + self.retain / 2 + 1;
            }
        }
        Ok(())
    }

    /// Rewrite the file with only the last `retain` events (temp file, fsync, rename, fsync
    /// directory) and reopen it for appending.
    fn compact(&self, inner: &mut Inner) -> Result<(), StateError> {
        let drop_count = inner.offsets.len().saturating_sub(self.retain);
        if drop_count == 0 {
            return Ok(());
        }
        let keep_from = inner.offsets[drop_count];
        let mut kept = vec![0u8; (inner.len - keep_from) as usize];
        inner
            .file
            .read_exact_at(&mut kept, keep_from)
            .map_err(|source| StateError::io(&self.path, "read", source))?;
        let renamed = match fsio::write_atomic(&self.faults, &self.path, &kept) {
            Ok(()) => Ok(()),
            // The rename happened; only its durability is in doubt. The old handle now points at
            // the replaced file, so carry on with the new one and report the doubt.
            Err(error) if error.step == FsStep::SyncDir => Err(error),
            Err(error) => return Err(error.into()),
        };
        inner.file = fsio::open_append(&self.faults, &self.path)?;
        inner.offsets.drain(..drop_count);
        for offset in inner.offsets.iter_mut() {
            *offset -= keep_from;
        }
        inner.first_seq += drop_count as u64;
        inner.len -= keep_from;
        inner.compact_at = self.retain * 2;
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
            .filter(|line| !line.is_empty())
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
            EventLogFile::open(
                &self.log_path(),
                &self.directory.path.join("quarantine"),
                faults,
                0,
                retain,
            )
            .expect("event log opens")
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
}
