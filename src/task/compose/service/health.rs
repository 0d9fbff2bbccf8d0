//! How a service's container is watched, restarted and stopped: `healthcheck` (with Compose's
//! defaults written out and timings brought into ECS's ranges), `restart` (ECS's restart policy),
//! `stop_grace_period` (`stopTimeout`) and `stop_signal` (Docker's stop signal: ECS has no field,
//! so it is kept beside the task-definition JSON, on the parsed definition).

use super::super::node::{Node, Value};
use super::super::{join, Mapper};
use super::read::{duration_ms, string_list};
use crate::task::definition::{
    HEALTH_INTERVAL_RANGE, HEALTH_RETRIES_RANGE, HEALTH_START_PERIOD_RANGE, HEALTH_TIMEOUT_RANGE,
    RESTART_ATTEMPT_PERIOD_RANGE,
};
use crate::task::definition_model::parse_stop_signal;
use serde_json::{json, Map, Value as Json};

/// ECS's largest `stopTimeout`, in seconds.
const STOP_TIMEOUT_MAX_SECONDS: u64 = 120;
/// Compose's health-check defaults (Docker's): 30 s interval, 30 s timeout, 3 retries. ECS's
/// own timeout default (5 s) is shorter, so they are written out.
const COMPOSE_HEALTH_INTERVAL_SECONDS: u64 = 30;
const COMPOSE_HEALTH_TIMEOUT_SECONDS: u64 = 30;
const COMPOSE_HEALTH_RETRIES: u64 = 3;

/// `healthcheck`: `test` as a list (`CMD`, `CMD-SHELL`, `NONE`) or a string (`CMD-SHELL`);
/// durations raised to ECS's minimums (or lowered to its maximums) with a warning.
pub(super) fn health_check(mapper: &mut Mapper, node: &Node, path: &str) -> Option<Json> {
    if matches!(
        node.get("disable").map(|n| &n.value),
        Some(Value::Bool(true))
    ) {
        return Some(json!({"command": ["NONE"]}));
    }
    if let Value::Mapping(entries) = &node.value {
        for (key, line, _) in entries {
            if ![
                "test",
                "interval",
                "timeout",
                "retries",
                "start_period",
                "start_interval",
                "disable",
            ]
            .contains(&key.as_str())
            {
                mapper.error(&join(path, key), *line, "unknown healthcheck key");
            }
            if key == "start_interval" {
                mapper.warn(
                    &join(path, key),
                    *line,
                    "ignored: ECS health checks have no start interval",
                );
            }
        }
    }
    let command: Vec<String> = match node.get("test") {
        None => {
            // Only timings: they apply to the image's own HEALTHCHECK, which ECS cannot adjust.
            mapper.error(&join(path, "test"), node.line, "required: ECS health checks need the command (the image's HEALTHCHECK cannot be re-timed)");
            return None;
        }
        Some(test) => match &test.value {
            Value::Sequence(_) => string_list(mapper, test, &join(path, "test")),
            _ => match test.scalar_text() {
                Some(text) => vec!["CMD-SHELL".to_string(), text],
                None => {
                    mapper.error(&join(path, "test"), test.line, "must be a string or a list");
                    return None;
                }
            },
        },
    };
    match command.first().map(String::as_str) {
        Some("NONE") => return Some(json!({"command": ["NONE"]})),
        Some("CMD" | "CMD-SHELL") if command.len() > 1 => {}
        _ => {
            mapper.error(
                &join(path, "test"),
                node.line,
                "must start with CMD, CMD-SHELL or NONE and give a command",
            );
            return None;
        }
    }
    let mut seconds = |key: &str, default: u64, (low, high): (u64, u64)| -> u64 {
        let Some(value) = node.get(key) else {
            return default;
        };
        let key_path = join(path, key);
        let Some(ms) = duration_ms(mapper, value, &key_path) else {
            return default;
        };
        let wanted = ms.div_ceil(1000);
        let clamped = wanted.clamp(low, high);
        if clamped != wanted {
            mapper.warn(
                &key_path,
                value.line,
                format!("{wanted} s is outside ECS's {low}–{high} s; using {clamped} s"),
            );
        }
        clamped
    };
    let interval = seconds(
        "interval",
        COMPOSE_HEALTH_INTERVAL_SECONDS,
        HEALTH_INTERVAL_RANGE,
    );
    let timeout = seconds(
        "timeout",
        COMPOSE_HEALTH_TIMEOUT_SECONDS.min(HEALTH_TIMEOUT_RANGE.1),
        HEALTH_TIMEOUT_RANGE,
    );
    let start_period = seconds("start_period", 0, HEALTH_START_PERIOD_RANGE);
    let retries = match node.get("retries") {
        None => COMPOSE_HEALTH_RETRIES,
        Some(value) => match value.value {
            Value::Integer(number) if number >= 0 => {
                let wanted = u64::try_from(number).unwrap_or(u64::MAX);
                let (low, high) = HEALTH_RETRIES_RANGE;
                let clamped = wanted.clamp(low, high);
                if clamped != wanted {
                    mapper.warn(
                        &join(path, "retries"),
                        value.line,
                        format!("{wanted} is outside ECS's {low}–{high}; using {clamped}"),
                    );
                }
                clamped
            }
            _ => {
                mapper.error(&join(path, "retries"), value.line, "must be a whole number");
                COMPOSE_HEALTH_RETRIES
            }
        },
    };
    // ECS also wants the timeout below the interval.
    let timeout = if timeout >= interval {
        let lowered = interval.saturating_sub(1).max(HEALTH_TIMEOUT_RANGE.0);
        if node.get("timeout").is_some() {
            mapper.warn(
                &join(path, "timeout"),
                node.line,
                format!("{timeout} s is not below the interval ({interval} s); using {lowered} s"),
            );
        }
        lowered
    } else {
        timeout
    };
    Some(json!({
        "command": command,
        "interval": interval,
        "timeout": timeout,
        "retries": retries,
        "startPeriod": start_period,
    }))
}

/// `restart` → ECS's container restart policy. `no` is no policy; `always` and
/// `unless-stopped` restart on any exit; `on-failure` ignores exit code 0. ECS has no retry
/// count, so `on-failure:N` restarts without a limit (a warning says so).
pub(super) fn restart_policy(mapper: &mut Mapper, node: &Node, path: &str) -> Option<Json> {
    let text = node.scalar_text().unwrap_or_default();
    let (name, count) = match text.split_once(':') {
        Some((name, count)) => (name, Some(count)),
        None => (text.as_str(), None),
    };
    let period = RESTART_ATTEMPT_PERIOD_RANGE.0;
    match (name, count) {
        ("no", None) => None,
        ("always" | "unless-stopped", None) => {
            Some(json!({"enabled": true, "restartAttemptPeriod": period}))
        }
        ("on-failure", count) => {
            if let Some(count) = count {
                mapper.warn(path, node.line, format!("the retry count {count} is ignored: ECS restart policies have none (a container that keeps failing within {period} s of starting is not restarted)"));
            }
            Some(json!({"enabled": true, "ignoredExitCodes": [0], "restartAttemptPeriod": period}))
        }
        _ => {
            mapper.error(
                path,
                node.line,
                format!("{text:?}: expected no, always, on-failure[:N] or unless-stopped"),
            );
            None
        }
    }
}

/// `stop_grace_period` → `stopTimeout`; `stop_signal` → the container's stop signal (set on the
/// parsed definition by `convert_compose`: the task-definition JSON has no field for it).
pub(super) fn stopping(
    mapper: &mut Mapper,
    service: &Node,
    path: &str,
    container: &mut Map<String, Json>,
) {
    if let Some(node) = service.get("stop_grace_period") {
        let grace_path = join(path, "stop_grace_period");
        if let Some(ms) = duration_ms(mapper, node, &grace_path) {
            let mut seconds = ms.div_ceil(1000);
            if seconds > STOP_TIMEOUT_MAX_SECONDS {
                mapper.warn(&grace_path, node.line, format!("{seconds} s is more than ECS's {STOP_TIMEOUT_MAX_SECONDS} s stopTimeout; using {STOP_TIMEOUT_MAX_SECONDS} s"));
                seconds = STOP_TIMEOUT_MAX_SECONDS;
            }
            container.insert("stopTimeout".into(), json!(seconds));
        }
    }
    if let Some(node) = service.get("stop_signal") {
        let signal_path = join(path, "stop_signal");
        match parse_stop_signal(&node.scalar_text().unwrap_or_default()) {
            // SIGTERM is what Docker sends anyway; the image's STOPSIGNAL then still applies.
            Ok(signal) if signal == "SIGTERM" || signal == "15" => {}
            Ok(signal) => {
                let name = container
                    .get("name")
                    .and_then(Json::as_str)
                    .unwrap_or_default();
                mapper.stop_signals.push((name.to_string(), signal));
            }
            Err(reason) => mapper.error(&signal_path, node.line, reason),
        }
    }
}
