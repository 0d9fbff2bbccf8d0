//! The state log's line format (`events.log`): which lines are events and which are the store's
//! records, and the replay of a file's bytes into the longest valid prefix. Pure functions over
//! bytes, fed by the disk (and fuzzed: `fuzzing::state_files`); the file itself, its syncs and
//! its compaction are event_log.rs's.

use crate::event::Event;
use crate::state::MAX_STORED_NUMBER;

/// The kinds of store record the log carries. A record line is `{"<kind>":<body>}`, where the
/// body is the bytes of the file the record stands for (a task's checkpoint file, `agent.json`)
/// or, for `forget`, the task id as a JSON string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// A task's checkpoint: the body is its `tasks/<id>.json` content.
    Checkpoint,
    /// A task cleaned up: the body is its id.
    Forget,
    /// The agent record: the body is `agent.json`'s content.
    Agent,
}

impl RecordKind {
    const ALL: [RecordKind; 3] = [
        RecordKind::Checkpoint,
        RecordKind::Forget,
        RecordKind::Agent,
    ];

    fn prefix(self) -> &'static [u8] {
        match self {
            RecordKind::Checkpoint => b"{\"checkpoint\":",
            RecordKind::Forget => b"{\"forget\":",
            RecordKind::Agent => b"{\"agent\":",
        }
    }
}

/// A store record read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    pub kind: RecordKind,
    pub body: Vec<u8>,
}

/// The line that carries a record (`body` must be one JSON value without a newline, which
/// serde_json's compact output is).
pub(crate) fn record_line(kind: RecordKind, body: &[u8]) -> Vec<u8> {
    let prefix = kind.prefix();
    let mut line = Vec::with_capacity(prefix.len() + body.len() + 2);
    line.extend_from_slice(prefix);
    line.extend_from_slice(body);
    line.extend_from_slice(b"}\n");
    line
}

/// Whether a line is a record's (by its prefix alone: for lines already known to be valid).
pub(crate) fn is_record_line(line: &[u8]) -> bool {
    RecordKind::ALL
        .into_iter()
        .any(|kind| line.starts_with(kind.prefix()))
}

/// The record a line holds, if it is one: its kind and its body. A line with a record's prefix
/// whose body is not JSON is damage, like an unreadable event.
pub(crate) fn parse_record(line: &[u8]) -> Option<(RecordKind, &[u8])> {
    RecordKind::ALL.into_iter().find_map(|kind| {
        let body = line.strip_prefix(kind.prefix())?.strip_suffix(b"}")?;
        serde_json::from_slice::<serde::de::IgnoredAny>(body).ok()?;
        Some((kind, body))
    })
}

/// The bytes of the valid prefix of a log, as replay found them.
pub(crate) struct ParsedLog {
    pub(crate) offsets: Vec<u64>,
    pub(crate) first_seq: u64,
    pub(crate) valid_len: u64,
    /// Highest sequence number on any parseable line, valid prefix or not.
    pub(crate) highest_seq_seen: u64,
    /// Valid event and record lines after the first bad one (damage, not a torn tail).
    pub(crate) events_after_damage: usize,
    /// The records of the valid prefix, in order: their kind and the byte range of their body.
    pub(crate) records: Vec<(RecordKind, std::ops::Range<usize>)>,
    /// Bytes of record lines in the valid prefix.
    pub(crate) record_bytes: u64,
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

    /// The records of the valid prefix of `bytes` (the bytes this was parsed from), in order.
    pub(crate) fn records(&self, bytes: &[u8]) -> Vec<LogRecord> {
        self.records
            .iter()
            .filter_map(|(kind, range)| {
                bytes.get(range.clone()).map(|body| LogRecord {
                    kind: *kind,
                    body: body.to_vec(),
                })
            })
            .collect()
    }
}

/// The longest prefix of `bytes` that is a run of complete lines, each an event (numbered
/// gap-free) or a store record.
pub(crate) fn parse_log(bytes: &[u8]) -> ParsedLog {
    let mut parsed = ParsedLog {
        offsets: Vec::new(),
        first_seq: 0,
        valid_len: 0,
        highest_seq_seen: 0,
        events_after_damage: 0,
        records: Vec::new(),
        record_bytes: 0,
    };
    let mut damaged = false;
    let mut position = 0usize;
    while let Some(rest) = bytes.get(position..).filter(|rest| !rest.is_empty()) {
        let Some(newline) = rest.iter().position(|&b| b == b'\n') else {
            // A last line without its newline: the append that wrote it never finished.
            break;
        };
        let line = &rest[..newline];
        let line_end = position + newline + 1;
        if let Some((kind, body)) = parse_record(line) {
            if damaged {
                parsed.events_after_damage += 1;
            } else {
                let body_start = position + kind.prefix().len();
                parsed
                    .records
                    .push((kind, body_start..body_start + body.len()));
                parsed.record_bytes += (newline + 1) as u64;
                parsed.valid_len = line_end as u64;
            }
            position = line_end;
            continue;
        }
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
                    parsed.valid_len = line_end as u64;
                }
                Some(_) => {
                    // A readable event out of sequence: what follows the gap is real content.
                    damaged = true;
                    parsed.events_after_damage += 1;
                }
                None => damaged = true,
            }
        }
        position = line_end;
    }
    parsed
}
