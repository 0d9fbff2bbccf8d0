//! Typed reads of YAML values that every key family shares: strings and lists of strings,
//! `KEY=VALUE` lists or mappings, commands as words, durations, sizes in MiB, and the check that
//! refuses keys a mapping should not have. Each reports its problem with the YAML path and line.

use super::super::node::{Node, Value};
use super::super::values;
use super::super::{join, Mapper};

/// Refuses the keys of a mapping that are not in `known` (`x-` keys aside): a key deckhand does
/// not read would otherwise be dropped without a word.
pub(super) fn check_keys(mapper: &mut Mapper, node: &Node, path: &str, known: &[&str]) {
    if let Value::Mapping(entries) = &node.value {
        for (key, line, _) in entries {
            if !key.starts_with("x-") && !known.contains(&key.as_str()) {
                mapper.error(
                    &join(path, key),
                    *line,
                    format!(
                        "unknown or unsupported key (known here: {})",
                        known.join(", ")
                    ),
                );
            }
        }
    }
}

/// A string or list of strings (scalars are taken as text).
pub(super) fn string_list(mapper: &mut Mapper, node: &Node, path: &str) -> Vec<String> {
    match &node.value {
        Value::Null => Vec::new(),
        Value::Sequence(items) => items
            .iter()
            .enumerate()
            .filter_map(|(index, item)| match item.scalar_text() {
                Some(text) => Some(text),
                None => {
                    mapper.error(&format!("{path}[{index}]"), item.line, "must be a string");
                    None
                }
            })
            .collect(),
        _ => match node.scalar_text() {
            Some(text) => vec![text],
            None => {
                mapper.error(path, node.line, "must be a string or a list of strings");
                Vec::new()
            }
        },
    }
}

/// A `KEY=VALUE` list or a mapping. `None` values: `- KEY` or `KEY:` with nothing after it.
pub(super) fn key_values(
    mapper: &mut Mapper,
    node: &Node,
    path: &str,
    split_list: bool,
) -> Vec<(String, Option<String>)> {
    let mut pairs = Vec::new();
    match &node.value {
        Value::Null => {}
        Value::Mapping(entries) => {
            for (key, line, value) in entries {
                match &value.value {
                    Value::Null => pairs.push((key.clone(), None)),
                    _ => match value.scalar_text() {
                        Some(text) => pairs.push((key.clone(), Some(text))),
                        None => mapper.error(
                            &join(path, key),
                            *line,
                            "must be a string, number or boolean",
                        ),
                    },
                }
            }
        }
        Value::Sequence(_) if split_list => {
            for entry in string_list(mapper, node, path) {
                match entry.split_once('=') {
                    Some((key, value)) => pairs.push((key.to_string(), Some(value.to_string()))),
                    None => pairs.push((entry, None)),
                }
            }
        }
        _ => mapper.error(path, node.line, "must be a mapping"),
    }
    pairs
}

pub(super) fn command_words(mapper: &mut Mapper, node: &Node, path: &str) -> Option<Vec<String>> {
    match &node.value {
        Value::Null => None,
        Value::Sequence(_) => Some(string_list(mapper, node, path)),
        _ => {
            let text = node.scalar_text()?;
            match values::shell_words(&text) {
                Ok(words) => Some(words),
                Err(message) => {
                    mapper.error(path, node.line, message);
                    None
                }
            }
        }
    }
}

pub(super) fn duration_ms(mapper: &mut Mapper, node: &Node, path: &str) -> Option<u64> {
    // A bare number is refused (its unit would be a guess), except 0.
    let text = node.scalar_text().unwrap_or_default();
    match values::parse_duration_ms(&text) {
        Ok(ms) => Some(ms),
        Err(message) => {
            mapper.error(path, node.line, message);
            None
        }
    }
}

pub(super) fn mebibytes(mapper: &mut Mapper, node: &Node, path: &str) -> Option<u64> {
    let text = node.scalar_text().unwrap_or_default();
    match values::parse_bytes(&text) {
        Ok(bytes) => Some(bytes.div_ceil(1024 * 1024)),
        Err(message) => {
            mapper.error(path, node.line, message);
            None
        }
    }
}
