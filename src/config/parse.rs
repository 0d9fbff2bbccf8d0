//! Reading values: the `KEY=VALUE` file (comments, `export`, quotes, the last assignment wins),
//! the environment over the file, the duration rules (zero means unset, minimums), and one
//! parser per kind of value (durations, booleans, paths, addresses, port lists, levels).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use log::LevelFilter;

use super::keys::{default_of, is_secret_key, CONFIG_KEYS};
use super::{ConfigError, ValueOrigin};

/// What a [`ConfigError::BadValue`] holds instead of the value of a secret key.
pub(super) const REDACTED_VALUE: &str = "<redacted>";

/// A value found for a key, with where it came from.
#[derive(Debug, Clone)]
pub(super) struct RawValue {
    pub(super) key: &'static str,
    pub(super) value: String,
    pub(super) origin: ValueOrigin,
}

impl RawValue {
    pub(super) fn parse_with<T>(
        &self,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<T, ConfigError> {
        parse(&self.value).map_err(|reason| self.refused(reason))
    }

    /// The error refusing this value for `reason`.
    pub(super) fn refused(&self, reason: String) -> ConfigError {
        ConfigError::BadValue {
            key: self.key,
            // A secret stays out of the error, its `Debug` output included.
            value: if is_secret_key(self.key) {
                REDACTED_VALUE.to_string()
            } else {
                self.value.clone()
            },
            origin: self.origin.clone(),
            reason,
        }
    }
}

/// File values by key (the last assignment wins) and the environment, environment first.
pub(super) struct Sources<'a> {
    pub(super) file_values: &'a HashMap<&'static str, RawValue>,
    pub(super) env: &'a dyn Fn(&str) -> Option<String>,
}

/// What to do with a duration below a key's minimum.
#[derive(Debug, Clone, Copy)]
pub(super) enum MinimumRule {
    None,
    RaiseTo(Duration),
    ReplaceWithDefault(Duration),
    /// Kept as given, with a warning (ECS would replace it; small disks and tests need it).
    WarnBelow(Duration),
}

impl Sources<'_> {
    /// The effective raw value of `key`, treating an empty value as unset.
    pub(super) fn value(&self, key: &'static str) -> Option<RawValue> {
        self.value_keeping_empty(key)
            .filter(|raw| !raw.value.is_empty())
    }

    /// The effective raw value of `key`; an empty environment variable still counts as unset
    /// (shells export empty variables casually), but an empty file value is returned.
    pub(super) fn value_keeping_empty(&self, key: &'static str) -> Option<RawValue> {
        if let Some(value) = (self.env)(key) {
            let value = value.trim().to_string();
            if !value.is_empty() || key == "DECKHAND_INTROSPECTION_ADDR" {
                return Some(RawValue {
                    key,
                    value,
                    origin: ValueOrigin::Environment,
                });
            }
        }
        self.file_values.get(key).cloned()
    }

    pub(super) fn duration(
        &self,
        key: &'static str,
        minimum: MinimumRule,
        warnings: &mut Vec<String>,
    ) -> Result<Duration, ConfigError> {
        let default = parse_duration(default_of(key)).expect("built-in durations parse");
        let Some(raw) = self.value(key) else {
            return Ok(default);
        };
        let parsed = raw.parse_with(parse_duration)?;
        if parsed.is_zero() {
            warnings.push(format!(
                "{key}: a zero duration means not set; using the default {}",
                default_of(key)
            ));
            return Ok(default);
        }
        Ok(match minimum {
            MinimumRule::RaiseTo(floor) if parsed < floor => {
                warnings.push(format!(
                    "{key}: {} is below the minimum {}; using {}",
                    raw.value,
                    format_duration(floor),
                    format_duration(floor)
                ));
                floor
            }
            MinimumRule::ReplaceWithDefault(floor) if parsed < floor => {
                warnings.push(format!(
                    "{key}: {} is below the minimum {}; using the default {}",
                    raw.value,
                    format_duration(floor),
                    default_of(key)
                ));
                default
            }
            MinimumRule::WarnBelow(floor) if parsed < floor => {
                warnings.push(format!(
                    "{key}: {} is below the ECS agent's minimum {}; using it anyway",
                    raw.value,
                    format_duration(floor)
                ));
                parsed
            }
            _ => parsed,
        })
    }

    pub(super) fn boolean(&self, key: &'static str) -> Result<bool, ConfigError> {
        match self.value(key) {
            Some(raw) => raw.parse_with(parse_bool),
            None => Ok(parse_bool(default_of(key)).expect("built-in booleans parse")),
        }
    }
}

/// Parses the config file into values by key. Comments, blank lines, `export KEY=VALUE` and
/// quoted values are accepted; anything else that is not `KEY=VALUE` with a known key is an
/// error naming the file and line.
pub(super) fn parse_config_file(
    path: &Path,
    text: &str,
    warnings: &mut Vec<String>,
) -> Result<HashMap<&'static str, RawValue>, ConfigError> {
    let mut values: HashMap<&'static str, RawValue> = HashMap::new();
    for (index, raw_line) in text.lines().enumerate() {
        let line_number = index + 1;
        let line = raw_line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let assignment = line
            .strip_prefix("export")
            .filter(|rest| rest.starts_with(char::is_whitespace))
            .map(str::trim_start)
            .unwrap_or(line);
        let not_an_assignment = || ConfigError::Syntax {
            path: path.to_path_buf(),
            line: line_number,
            message: not_an_assignment_message(line),
        };
        let Some((key, value)) = assignment.split_once('=') else {
            return Err(not_an_assignment());
        };
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) || key.contains(['"', '{', '}']) {
            return Err(not_an_assignment());
        }
        let Some(known_key) = CONFIG_KEYS.iter().map(|doc| doc.key).find(|k| *k == key) else {
            return Err(ConfigError::UnknownKey {
                path: path.to_path_buf(),
                line: line_number,
                key: key.to_string(),
            });
        };
        let value = unquote(value.trim()).map_err(|message| ConfigError::Syntax {
            path: path.to_path_buf(),
            line: line_number,
            message: if is_secret_key(known_key) {
                format!("{known_key}: an opening quote is not closed on this line")
            } else {
                format!("{key}: {message}")
            },
        })?;
        let origin = ValueOrigin::File {
            path: path.to_path_buf(),
            line: line_number,
        };
        if let Some(previous) = values.get(known_key) {
            warnings.push(format!(
                "{known_key} is set twice ({} and line {line_number}); the later one wins",
                previous.origin
            ));
        }
        values.insert(
            known_key,
            RawValue {
                key: known_key,
                value: value.to_string(),
                origin,
            },
        );
    }
    Ok(values)
}

/// The message for a line that is not `KEY=VALUE`. A line that looks like the rest of a JSON
/// value spread over several lines is not quoted: it may hold a password of
/// `ECS_ENGINE_AUTH_DATA`.
fn not_an_assignment_message(line: &str) -> String {
    if line.starts_with(['"', '{', '}', '[', ']']) || line.contains("\":") {
        "expected KEY=VALUE; this line looks like part of a JSON value written over several \
         lines (not quoted here, it may hold a secret): write a JSON value on one line"
            .to_string()
    } else {
        format!("expected KEY=VALUE, found {line:?}")
    }
}

/// Strips one pair of matching surrounding quotes (`"…"` or `'…'`). An opening quote without its
/// closing twin is an error rather than a value with a stray quote in it.
fn unquote(value: &str) -> Result<&str, String> {
    for quote in ['"', '\''] {
        if let Some(rest) = value.strip_prefix(quote) {
            return rest
                .strip_suffix(quote)
                .ok_or_else(|| format!("unterminated {quote} quote in {value:?}"));
        }
    }
    Ok(value)
}

/// Parses a duration written as one or more `<integer><unit>` parts, units `ms`, `s`, `m`, `h`:
/// `90s`, `5m`, `1h30m`, `500ms`. `0` alone is zero (as ECS writes it). A bare number is an
/// error: seconds or milliseconds would both be a guess.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    const EXPECTED: &str = "expected a duration like 90s, 5m, 1h30m or 500ms";
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.is_empty() {
        return Err(format!("empty duration; {EXPECTED}"));
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits_end == 0 {
            return Err(format!("{text:?} is not a duration; {EXPECTED}"));
        }
        let number: u64 = rest[..digits_end]
            .parse()
            .map_err(|_| format!("{text:?}: number too large; {EXPECTED}"))?;
        rest = &rest[digits_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = &rest[unit_end..];
        let part = match unit {
            "ms" => Some(Duration::from_millis(number)),
            "s" => Some(Duration::from_secs(number)),
            "m" => number.checked_mul(60).map(Duration::from_secs),
            "h" => number.checked_mul(3600).map(Duration::from_secs),
            "" => return Err(format!("{text:?} has no unit; {EXPECTED}")),
            other => return Err(format!("{text:?} has unknown unit {other:?}; {EXPECTED}")),
        };
        total = part
            .and_then(|part| total.checked_add(part))
            .ok_or_else(|| format!("{text:?} is too long a duration"))?;
    }
    Ok(total)
}

/// Writes a duration in the shortest form [`parse_duration`] reads back (`1h30m`, `45s`, `500ms`).
pub fn format_duration(duration: Duration) -> String {
    if duration.is_zero() {
        return "0".to_string();
    }
    let mut text = String::new();
    let mut seconds = duration.as_secs();
    let millis = duration.subsec_millis();
    for (unit_seconds, unit) in [(3600, "h"), (60, "m"), (1, "s")] {
        if seconds >= unit_seconds {
            text.push_str(&format!("{}{unit}", seconds / unit_seconds));
            seconds %= unit_seconds;
        }
    }
    if millis > 0 {
        text.push_str(&format!("{millis}ms"));
    }
    text
}

fn parse_bool(text: &str) -> Result<bool, String> {
    match text {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("expected true or false".to_string()),
    }
}

/// `unix:///path` → `/path`. deckhand's Docker client speaks only over a Unix socket.
pub(super) fn parse_docker_host(text: &str) -> Result<PathBuf, String> {
    let Some(path) = text.strip_prefix("unix://") else {
        return Err(
            "expected unix:///path/to/docker.sock (only Unix sockets are supported)".into(),
        );
    };
    parse_absolute_path(path)
}

pub(super) fn parse_absolute_path(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    if path.is_absolute() {
        Ok(path)
    } else {
        Err("expected an absolute path".to_string())
    }
}

pub(super) fn parse_socket_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse::<SocketAddr>()
        .map_err(|_| "expected IP:PORT such as 127.0.0.1:51678, or empty to turn it off".into())
}

/// A TCP port to listen on, 1 to 65535.
pub(super) fn parse_listen_port(text: &str) -> Result<u16, String> {
    match text.trim().parse::<u16>() {
        Ok(port) if port > 0 => Ok(port),
        _ => Err("expected a port from 1 to 65535".into()),
    }
}

/// A JSON list of ports, as ECS writes `ECS_RESERVED_PORTS`: `[22, 2375]`.
pub(super) fn parse_port_list(text: &str) -> Result<Vec<u16>, String> {
    serde_json::from_str::<Vec<u16>>(text)
        .map_err(|error| format!("expected a JSON list of ports 0-65535 like [22, 2375]: {error}"))
}

/// A whole number of MiB, as ECS writes `ECS_RESERVED_MEMORY`: `256`.
pub(super) fn parse_memory_mib(text: &str) -> Result<u64, String> {
    text.trim()
        .parse::<u32>()
        .map(u64::from)
        .map_err(|_| "expected a whole number of MiB such as 256".to_string())
}

/// `DECKHAND_DOCKER_CONCURRENCY` above this is refused: more concurrent calls only queue inside
/// Docker, and each is a thread.
pub const MAXIMUM_DOCKER_CONCURRENCY: usize = 64;

/// A whole number of concurrent Docker calls, 1 to [`MAXIMUM_DOCKER_CONCURRENCY`].
pub(super) fn parse_docker_concurrency(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(count) if (1..=MAXIMUM_DOCKER_CONCURRENCY).contains(&count) => Ok(count),
        _ => Err(format!(
            "expected a whole number of concurrent Docker calls from 1 to {MAXIMUM_DOCKER_CONCURRENCY}"
        )),
    }
}

/// ECS levels; `crit` has no own level in `log`, so it maps to `error`.
pub(super) fn parse_log_level(text: &str) -> Result<LevelFilter, String> {
    match text.to_ascii_lowercase().as_str() {
        "debug" => Ok(LevelFilter::Debug),
        "info" => Ok(LevelFilter::Info),
        "warn" => Ok(LevelFilter::Warn),
        "error" | "crit" => Ok(LevelFilter::Error),
        _ => Err("expected debug, info, warn, error or crit".to_string()),
    }
}

/// `ECS_NUM_IMAGES_DELETE_PER_CYCLE`: a whole number of images, 0 to 1000.
pub(super) fn parse_images_per_cycle(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(count) if count <= 1000 => Ok(count),
        _ => Err("expected a whole number of images from 0 to 1000".to_string()),
    }
}

/// A whole percentage within `range`, for the disk marks of image cleanup.
pub(super) fn parse_percent(text: &str, range: std::ops::RangeInclusive<u8>) -> Result<u8, String> {
    match text.trim().parse::<u8>() {
        Ok(percent) if range.contains(&percent) => Ok(percent),
        _ => Err(format!(
            "expected a whole percentage from {} to {}",
            range.start(),
            range.end()
        )),
    }
}

/// `ECS_EXCLUDE_UNTRACKED_IMAGE`: image names separated by commas, as ECS splits them; blanks
/// around a name and empty entries are dropped.
pub(super) fn parse_image_list(text: &str) -> Result<Vec<String>, String> {
    let names: Vec<String> = text
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_string)
        .collect();
    match names.iter().find(|name| name.contains(char::is_whitespace)) {
        Some(name) => Err(format!(
            "image name {name:?} holds a blank; expected names separated by commas"
        )),
        None => Ok(names),
    }
}
