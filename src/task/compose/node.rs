//! The YAML document as a tree of nodes, each with the line it came from, so that every problem
//! in a Compose file names its YAML path and line. serde-saphyr does the YAML (anchors, aliases,
//! merge keys, budgets against alias bombs and deep nesting); this file only keeps its answer in
//! a shape the mapping can walk.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;
use std::fmt;

/// One YAML node and the line (1-based) it starts on; 0 when unknown.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Node {
    pub line: u64,
    pub value: Value,
}

/// A YAML value as YAML 1.2's core schema reads it (as Compose does).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Value {
    Null,
    Bool(bool),
    Integer(i128),
    Float(f64),
    String(String),
    Sequence(Vec<Node>),
    /// Keys in document order, each with its own line.
    Mapping(Vec<(String, u64, Node)>),
}

impl Node {
    /// The value of `key` in a mapping, with the key's line.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Mapping(entries) => entries
                .iter()
                .find(|(name, _, _)| name == key)
                .map(|(_, _, node)| node),
            _ => None,
        }
    }

    /// A scalar as the text Compose would see (numbers and booleans as written in YAML 1.2).
    pub fn scalar_text(&self) -> Option<String> {
        match &self.value {
            Value::String(text) => Some(text.clone()),
            Value::Integer(number) => Some(number.to_string()),
            Value::Float(number) => Some(number.to_string()),
            Value::Bool(flag) => Some(flag.to_string()),
            _ => None,
        }
    }
}

/// Parses one YAML document. The error is serde-saphyr's message and the line it names.
pub(super) fn parse_document(text: &str) -> Result<Node, (String, u64)> {
    let mut options = serde_saphyr::Options::default();
    options.with_snippet = false;
    // YAML 1.2's core schema, as Compose reads it: `restart: no` and `DEBUG: yes` are strings.
    options.strict_booleans = true;
    // `MODE: 0755` and `ZIP: 01234` keep their leading zero.
    options.leading_zero_numbers_as_strings = true;
    // Compose's `!reset` and `!override`, and any tag of an application's own, would otherwise
    // be dropped and the value read as if untagged (`ports: !reset []` keeping the ports it
    // means to remove): refuse them.
    options.reject_unsupported_tags = true;
    match serde_saphyr::from_str_with_options::<Node>(text, options) {
        Ok(node) => Ok(node),
        Err(error) => {
            let line = error.location().map_or(0, |location| location.line());
            let message = error.to_string();
            // Keep the first line only: the rest repeats the position.
            let first = message.lines().next().unwrap_or("").to_string();
            Err((first, line))
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<Value>::deserialize(deserializer)?;
        Ok(Node {
            line: spanned.referenced.line(),
            value: spanned.value,
        })
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_bool<E: de::Error>(self, flag: bool) -> Result<Value, E> {
        Ok(Value::Bool(flag))
    }
    fn visit_i64<E: de::Error>(self, number: i64) -> Result<Value, E> {
        Ok(Value::Integer(i128::from(number)))
    }
    fn visit_u64<E: de::Error>(self, number: u64) -> Result<Value, E> {
        Ok(Value::Integer(i128::from(number)))
    }
    fn visit_i128<E: de::Error>(self, number: i128) -> Result<Value, E> {
        Ok(Value::Integer(number))
    }
    fn visit_u128<E: de::Error>(self, number: u128) -> Result<Value, E> {
        Ok(i128::try_from(number).map_or(Value::Float(number as f64), Value::Integer))
    }
    fn visit_f64<E: de::Error>(self, number: f64) -> Result<Value, E> {
        Ok(Value::Float(number))
    }
    fn visit_str<E: de::Error>(self, text: &str) -> Result<Value, E> {
        Ok(Value::String(text.to_string()))
    }
    fn visit_string<E: de::Error>(self, text: String) -> Result<Value, E> {
        Ok(Value::String(text))
    }
    fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Value, E> {
        Ok(Value::String(String::from_utf8_lossy(bytes).into_owned()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Value::deserialize(deserializer)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut sequence: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = sequence.next_element::<Node>()? {
            items.push(item);
        }
        Ok(Value::Sequence(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Node>()? {
            let name = match key.value {
                Value::Null => "null".to_string(),
                ref other => match (Node {
                    line: 0,
                    value: other.clone(),
                })
                .scalar_text()
                {
                    Some(text) => text,
                    None => return Err(de::Error::custom("a mapping key must be a scalar")),
                },
            };
            let value = map.next_value::<Node>()?;
            entries.push((name, key.line, value));
        }
        Ok(Value::Mapping(entries))
    }
}
