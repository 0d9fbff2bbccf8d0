//! A container's `resourceRequirements[]`: the host resources ECS assigns to one container by
//! name rather than by size. Type `GPU` (`{"type": "GPU", "value": "2"}`) asks for that many of
//! the host's GPUs, which the engine assigns by id when the task is admitted; type
//! `InferenceAccelerator` names an Elastic Inference accelerator, which deckhand has none of.

use super::json::{join, Parser};
use super::keys::RESOURCE_REQUIREMENT_KEYS;
use serde_json::{Map, Value};

/// The most GPUs one container may ask for: more than any one host has; the host's own count
/// is checked when the task is submitted.
pub const MAX_GPUS_PER_CONTAINER: u32 = 1024;

impl Parser {
    /// The GPUs `resourceRequirements` asks for (0 when it asks for none).
    pub(super) fn resource_requirements(&mut self, object: &Map<String, Value>, path: &str) -> u32 {
        let mut gpus: Option<u32> = None;
        for (item_path, map) in self.objects(object, path, "resourceRequirements") {
            self.check_keys(&item_path, map, &RESOURCE_REQUIREMENT_KEYS);
            let kind = self.required_string(map, &item_path, "type");
            let value = self.required_string(map, &item_path, "value");
            match kind.as_deref() {
                Some("GPU") => {
                    let Some(value) = value else { continue };
                    let value_path = join(&item_path, "value");
                    if gpus.is_some() {
                        self.error(
                            &join(&item_path, "type"),
                            "GPU is given twice; give the container's GPUs in one requirement",
                        );
                        continue;
                    }
                    match parse_gpu_count(&value) {
                        Ok(count) => gpus = Some(count),
                        Err(message) => self.error(&value_path, message),
                    }
                }
                Some("InferenceAccelerator") => self.error(
                    &join(&item_path, "type"),
                    "InferenceAccelerator is not supported by deckhand: it has no Elastic \
                     Inference accelerators",
                ),
                Some(other) => self.error(
                    &join(&item_path, "type"),
                    format!("unknown type {other:?}: expected GPU or InferenceAccelerator"),
                ),
                None => {}
            }
        }
        gpus.unwrap_or(0)
    }
}

/// A GPU requirement's `value`: a whole number of GPUs, 1 to [`MAX_GPUS_PER_CONTAINER`],
/// written as a string as ECS writes it (`"2"`).
pub fn parse_gpu_count(value: &str) -> Result<u32, String> {
    let expected = format!("a whole number of GPUs in 1–{MAX_GPUS_PER_CONTAINER}");
    let digits = value.trim();
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(format!("{value:?} is not {expected}"));
    }
    match digits.parse::<u32>() {
        Ok(count) if (1..=MAX_GPUS_PER_CONTAINER).contains(&count) => Ok(count),
        _ => Err(format!("{value:?} is out of range: {expected}")),
    }
}
