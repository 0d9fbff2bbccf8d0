//! Reading typed values out of the JSON document, each problem recorded with its JSON path:
//! the [`Parser`] that collects errors and warnings, its readers (`string`, `integer`,
//! `objects`, …) and the path helpers (`join`, `indexed`) every other part of the parser uses.

use super::ValidationError;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;

/// The JSON type of a value, for error messages.
pub(super) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `path.key`; a key that is empty or holds characters other than letters, digits, `_`, `-` and
/// `.` is quoted (`path["my key"]`) so the path stays unambiguous and never empty.
pub(super) fn join(path: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    match (path.is_empty(), plain) {
        (true, true) => key.to_string(),
        (false, true) => format!("{path}.{key}"),
        (true, false) => format!("${}", indexed_key(key)),
        (false, false) => format!("{path}{}", indexed_key(key)),
    }
}

fn indexed_key(key: &str) -> String {
    format!("[{}]", Value::String(key.to_string()))
}

pub(super) fn indexed(path: &str, index: usize) -> String {
    format!("{path}[{index}]")
}

/// The range of a whole number as the messages write it: an end at or beyond `u32`'s limits
/// (4294967295 seconds, 8796093022207 MiB, `i64::MAX` CPU units) is no limit at all for a
/// person, so it is left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct WholeNumberBounds {
    min: Option<i128>,
    max: Option<i128>,
}

impl WholeNumberBounds {
    pub(super) fn new(min: i128, max: i128) -> WholeNumberBounds {
        WholeNumberBounds {
            min: (min > -i128::from(u32::MAX)).then_some(min),
            max: (max < i128::from(u32::MAX)).then_some(max),
        }
    }

    /// `a whole number in 1–65535`, `a whole number ≥ 0`, `a whole number ≤ 10`, `a whole
    /// number`.
    pub(super) fn expected(self) -> String {
        match (self.min, self.max) {
            (Some(min), Some(max)) => format!("a whole number in {min}–{max}"),
            (Some(min), None) => format!("a whole number ≥ {min}"),
            (None, Some(max)) => format!("a whole number ≤ {max}"),
            (None, None) => "a whole number".to_string(),
        }
    }

    /// Why `number` (a whole number outside the range) is refused.
    pub(super) fn out_of_range(self, number: i128) -> String {
        match (self.min, self.max) {
            (Some(min), Some(max)) => format!("{number} is out of range {min}–{max}"),
            (Some(min), _) if number < min => format!("{number} is too small: at least {min}"),
            (_, Some(max)) if number > max => format!("{number} is too large: at most {max}"),
            (_, _) => format!("{number} is too large"),
        }
    }
}

/// Collects errors and warnings while walking the document.
#[derive(Default)]
pub(super) struct Parser {
    pub(super) errors: Vec<ValidationError>,
    pub(super) warnings: Vec<String>,
}

/// Where a container's fields sit in the document, for cross-container errors.
pub(super) struct ContainerPaths {
    pub(super) base: String,
}

impl ContainerPaths {
    pub(super) fn at(&self, key: &str) -> String {
        join(&self.base, key)
    }
}

impl Parser {
    pub(super) fn error(&mut self, path: &str, message: impl Into<String>) {
        self.errors.push(ValidationError {
            path: path.to_string(),
            message: message.into(),
        });
    }

    pub(super) fn warn(&mut self, path: &str, message: impl fmt::Display) {
        self.warnings.push(format!("{path}: {message}"));
    }

    /// The value at `key`, treating `null` as absent.
    pub(super) fn field<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
        object.get(key).filter(|value| !value.is_null())
    }

    pub(super) fn object<'a>(
        &mut self,
        path: &str,
        value: &'a Value,
    ) -> Option<&'a Map<String, Value>> {
        match value {
            Value::Object(map) => Some(map),
            other => {
                self.error(
                    path,
                    format!("expected an object, found {}", type_name(other)),
                );
                None
            }
        }
    }

    pub(super) fn array<'a>(&mut self, path: &str, value: &'a Value) -> Option<&'a Vec<Value>> {
        match value {
            Value::Array(items) => Some(items),
            other => {
                self.error(
                    path,
                    format!("expected an array, found {}", type_name(other)),
                );
                None
            }
        }
    }

    pub(super) fn string(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Option<String> {
        let value = Self::field(object, key)?;
        match value {
            Value::String(text) => Some(text.clone()),
            other => {
                self.error(
                    &join(path, key),
                    format!("expected a string, found {}", type_name(other)),
                );
                None
            }
        }
    }

    pub(super) fn required_string(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Option<String> {
        if Self::field(object, key).is_none() {
            self.error(&join(path, key), "required");
            return None;
        }
        self.string(object, path, key)
    }

    pub(super) fn bool(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Option<bool> {
        let value = Self::field(object, key)?;
        match value {
            Value::Bool(flag) => Some(*flag),
            other => {
                self.error(
                    &join(path, key),
                    format!("expected true or false, found {}", type_name(other)),
                );
                None
            }
        }
    }

    /// A whole number in `min..=max`.
    pub(super) fn integer(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
        min: u64,
        max: u64,
    ) -> Option<u64> {
        self.whole_number(object, path, key, min, max, Value::as_u64)
    }

    /// A whole number in `min..=max`, negative ones allowed.
    pub(super) fn signed_integer(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
        min: i64,
        max: i64,
    ) -> Option<i64> {
        self.whole_number(object, path, key, min, max, Value::as_i64)
    }

    /// A whole number in `min..=max`, read as `read` reads JSON numbers; the error names the
    /// range as people write it (an end at the type's limit is no limit: "≥ 0", not
    /// "0–9223372036854775807") and what was found instead.
    fn whole_number<T: Copy + PartialOrd + std::fmt::Display + Into<i128>>(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
        min: T,
        max: T,
        read: fn(&Value) -> Option<T>,
    ) -> Option<T> {
        let value = Self::field(object, key)?;
        let key_path = join(path, key);
        let bounds = WholeNumberBounds::new(min.into(), max.into());
        match read(value) {
            Some(number) if (min..=max).contains(&number) => Some(number),
            Some(number) => {
                self.error(&key_path, bounds.out_of_range(number.into()));
                None
            }
            None => {
                let found = match value {
                    Value::Number(number) => format!("{number}"),
                    other => type_name(other).to_string(),
                };
                self.error(
                    &key_path,
                    format!("expected {}, found {found}", bounds.expected()),
                );
                None
            }
        }
    }

    pub(super) fn string_list(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Option<Vec<String>> {
        let value = Self::field(object, key)?;
        let key_path = join(path, key);
        let items = self.array(&key_path, value)?;
        let mut strings = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            match item {
                Value::String(text) => strings.push(text.clone()),
                other => self.error(
                    &indexed(&key_path, index),
                    format!("expected a string, found {}", type_name(other)),
                ),
            }
        }
        Some(strings)
    }

    pub(super) fn string_map(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        key: &str,
    ) -> BTreeMap<String, String> {
        let mut map = BTreeMap::new();
        let Some(value) = Self::field(object, key) else {
            return map;
        };
        let key_path = join(path, key);
        let Some(entries) = self.object(&key_path, value) else {
            return map;
        };
        for (name, entry) in entries {
            match entry {
                Value::String(text) => {
                    map.insert(name.clone(), text.clone());
                }
                other => self.error(
                    &join(&key_path, name),
                    format!("expected a string, found {}", type_name(other)),
                ),
            }
        }
        map
    }

    /// Each object of the array at `key`, with its path; non-objects are reported.
    pub(super) fn objects<'a>(
        &mut self,
        object: &'a Map<String, Value>,
        path: &str,
        key: &str,
    ) -> Vec<(String, &'a Map<String, Value>)> {
        let Some(value) = Self::field(object, key) else {
            return Vec::new();
        };
        let key_path = join(path, key);
        let Some(items) = self.array(&key_path, value) else {
            return Vec::new();
        };
        let mut out = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            let item_path = indexed(&key_path, index);
            if let Some(map) = self.object(&item_path, item) {
                out.push((item_path, map));
            }
        }
        out
    }
}
