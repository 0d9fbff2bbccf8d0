//! The Fluent forward protocol as Docker's `fluentd` log driver sends it, decoded for the
//! FireLens tests: MessagePack values (a small reader of the formats that appear), each message
//! `[tag, time, record, option]`. Also builds the stand-in router program
//! (`support/fluent_sink.rs`) with `rustc`, statically linked so it runs in the busybox image.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A MessagePack value (what the tests need of it).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Nil,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Bin(Vec<u8>),
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
    Ext(i8, Vec<u8>),
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(text) => Some(text),
            _ => None,
        }
    }
}

/// One forward-protocol message: its tag and its record's string fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub tag: String,
    pub record: BTreeMap<String, String>,
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, count: usize) -> Option<&[u8]> {
        let end = self.at.checked_add(count)?;
        let slice = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(slice)
    }

    fn uint(&mut self, width: usize) -> Option<u64> {
        Some(
            self.take(width)?
                .iter()
                .fold(0u64, |value, byte| (value << 8) | u64::from(*byte)),
        )
    }

    fn int(&mut self, width: usize) -> Option<i128> {
        let raw = self.uint(width)?;
        let shift = 64 - 8 * width as u32;
        Some(i128::from(((raw << shift) as i64) >> shift))
    }

    fn text(&mut self, length: usize) -> Option<Value> {
        Some(Value::Str(
            String::from_utf8_lossy(self.take(length)?).into_owned(),
        ))
    }

    fn items(&mut self, count: usize) -> Option<Value> {
        (0..count)
            .map(|_| self.value())
            .collect::<Option<Vec<Value>>>()
            .map(Value::Array)
    }

    fn pairs(&mut self, count: usize) -> Option<Value> {
        (0..count)
            .map(|_| Some((self.value()?, self.value()?)))
            .collect::<Option<Vec<(Value, Value)>>>()
            .map(Value::Map)
    }

    fn ext(&mut self, length: usize) -> Option<Value> {
        let kind = self.take(1)?[0] as i8;
        Some(Value::Ext(kind, self.take(length)?.to_vec()))
    }

    /// The next value, or `None` when the bytes end inside it.
    fn value(&mut self) -> Option<Value> {
        let marker = self.take(1)?[0];
        match marker {
            0x00..=0x7f => Some(Value::Int(i128::from(marker))),
            0x80..=0x8f => self.pairs(usize::from(marker & 0x0f)),
            0x90..=0x9f => self.items(usize::from(marker & 0x0f)),
            0xa0..=0xbf => self.text(usize::from(marker & 0x1f)),
            0xc0 => Some(Value::Nil),
            0xc2 => Some(Value::Bool(false)),
            0xc3 => Some(Value::Bool(true)),
            0xc4..=0xc6 => {
                let length = self.uint(1 << (marker - 0xc4))? as usize;
                Some(Value::Bin(self.take(length)?.to_vec()))
            }
            0xc7..=0xc9 => {
                let length = self.uint(1 << (marker - 0xc7))? as usize;
                self.ext(length)
            }
            0xca => Some(Value::Float(f64::from(
                f32::from_bits(self.uint(4)? as u32),
            ))),
            0xcb => Some(Value::Float(f64::from_bits(self.uint(8)?))),
            0xcc..=0xcf => Some(Value::Int(i128::from(self.uint(1 << (marker - 0xcc))?))),
            0xd0..=0xd3 => self.int(1 << (marker - 0xd0)).map(Value::Int),
            0xd4..=0xd8 => self.ext(1 << (marker - 0xd4)),
            0xd9..=0xdb => {
                let length = self.uint(1 << (marker - 0xd9))? as usize;
                self.text(length)
            }
            0xdc | 0xdd => {
                let count = self.uint(if marker == 0xdc { 2 } else { 4 })? as usize;
                self.items(count)
            }
            0xde | 0xdf => {
                let count = self.uint(if marker == 0xde { 2 } else { 4 })? as usize;
                self.pairs(count)
            }
            0xe0..=0xff => Some(Value::Int(i128::from(marker as i8))),
            0xc1 => None,
        }
    }
}

/// Every complete value in `bytes` (a trailing partial one is left out: the sender may be
/// writing it).
pub fn decode_values(bytes: &[u8]) -> Vec<Value> {
    let mut reader = Reader { bytes, at: 0 };
    let mut values = Vec::new();
    while reader.at < bytes.len() {
        match reader.value() {
            Some(value) => values.push(value),
            None => break,
        }
    }
    values
}

/// The messages in `bytes`: forward mode `[tag, time, record(, option)]`, and the
/// `[tag, [[time, record], ...](, option)]` form of the forward mode a driver may batch in.
pub fn decode_messages(bytes: &[u8]) -> Vec<Message> {
    let record_of = |value: &Value| -> BTreeMap<String, String> {
        match value {
            Value::Map(pairs) => pairs
                .iter()
                .filter_map(|(key, value)| {
                    let text = match value {
                        Value::Str(text) => text.clone(),
                        Value::Bin(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                        _ => return None,
                    };
                    Some((key.as_str()?.to_string(), text))
                })
                .collect(),
            _ => BTreeMap::new(),
        }
    };
    let mut messages = Vec::new();
    for value in decode_values(bytes) {
        let Value::Array(items) = value else { continue };
        let Some(tag) = items.first().and_then(Value::as_str) else {
            continue;
        };
        match items.get(1) {
            Some(Value::Array(entries)) => {
                for entry in entries {
                    if let Value::Array(pair) = entry {
                        if let Some(record) = pair.get(1) {
                            messages.push(Message {
                                tag: tag.to_string(),
                                record: record_of(record),
                            });
                        }
                    }
                }
            }
            Some(_) => {
                if let Some(record) = items.get(2) {
                    messages.push(Message {
                        tag: tag.to_string(),
                        record: record_of(record),
                    });
                }
            }
            None => {}
        }
    }
    messages
}

/// Every message the stand-in router wrote into `directory` so far.
pub fn messages_in(directory: &Path) -> Vec<Message> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(directory)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|extension| extension == "bin"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
        .iter()
        .filter_map(|path| std::fs::read(path).ok())
        .flat_map(|bytes| decode_messages(&bytes))
        .collect()
}

/// Builds `support/fluent_sink.rs` into `directory/fluent-sink`, statically linked.
pub fn build_sink(directory: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/fluent_sink.rs");
    let program = directory.join("fluent-sink");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let output = Command::new(&rustc)
        .args([
            "--edition",
            "2021",
            "-O",
            "-C",
            "target-feature=+crt-static",
            "-o",
        ])
        .arg(&program)
        .arg(&source)
        .output()
        .unwrap_or_else(|error| panic!("running {rustc}: {error}"));
    assert!(
        output.status.success(),
        "building the stand-in router failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    program
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_docker_style_message_decodes() {
        // ["web-firelens-t", EventTime, {"log": "hi", "source": "stdout"}, nil]
        let mut bytes = vec![0x94, 0xae];
        bytes.extend_from_slice(b"web-firelens-t");
        bytes.extend_from_slice(&[0xd7, 0x00, 0, 0, 0, 1, 0, 0, 0, 2]);
        bytes.extend_from_slice(&[0x82, 0xa3]);
        bytes.extend_from_slice(b"log");
        bytes.extend_from_slice(&[0xa2]);
        bytes.extend_from_slice(b"hi");
        bytes.extend_from_slice(&[0xa6]);
        bytes.extend_from_slice(b"source");
        bytes.extend_from_slice(&[0xa6]);
        bytes.extend_from_slice(b"stdout");
        bytes.push(0xc0);
        let message = &decode_messages(&bytes)[0];
        assert_eq!(message.tag, "web-firelens-t");
        assert_eq!(message.record["log"], "hi");
        // A message cut short is not one yet.
        assert!(decode_messages(&bytes[..bytes.len() - 3]).is_empty());
    }
}
