//! The query of a logs request (`GET /v1/tasks/{task}/logs?container=&follow=&tail=&since=&timestamps=`),
//! checked, and the `since` a user writes turned into the one Docker takes (also for the CLI's
//! `deckhand logs --since`, which checks it before asking the agent).

use crate::engine::handle::LogOptions;
use crate::task::Millis;

/// A logs request's query, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogsQuery {
    /// One container's name; `None`: every container, prefixed.
    pub container: Option<String>,
    pub options: LogOptions,
}

fn parse_flag(key: &str, value: &str) -> Result<bool, String> {
    match value {
        "" | "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        _ => Err(format!("{key} must be 1, true, 0 or false, not {value:?}")),
    }
}

/// `since` as Docker takes it (Unix seconds, perhaps with a fraction) from what a user writes:
/// a duration back from `now` (`10m`, `1h30m`), an RFC 3339 time, or Unix seconds.
pub fn docker_since(text: &str, now: Millis) -> Result<String, String> {
    let text = text.trim();
    let is_unix_seconds = {
        let (whole, fraction) = text.split_once('.').unwrap_or((text, "0"));
        !whole.is_empty()
            && whole.bytes().all(|byte| byte.is_ascii_digit())
            && !fraction.is_empty()
            && fraction.bytes().all(|byte| byte.is_ascii_digit())
    };
    if is_unix_seconds {
        return Ok(text.to_string());
    }
    let millis = match crate::task::time::millis_from_rfc3339(text) {
        Some(millis) => millis,
        None => match crate::config::parse_duration(text) {
            Ok(duration) => {
                now.saturating_sub(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
            }
            Err(_) => {
                return Err(format!(
                    "since must be a duration back from now (10m, 1h30m), an RFC 3339 time \
                     (2024-05-01T12:00:00Z) or Unix seconds, not {text:?}"
                ))
            }
        },
    };
    Ok(format!("{}.{:03}", millis / 1000, millis % 1000))
}

/// Checks a logs request's query parameters (`now` turns a `since` duration into a time).
pub fn parse_logs_query(pairs: &[(String, String)], now: Millis) -> Result<LogsQuery, String> {
    let mut query = LogsQuery {
        container: None,
        options: LogOptions::default(),
    };
    for (key, value) in pairs {
        match key.as_str() {
            "container" if value.is_empty() => {}
            "container" => query.container = Some(value.clone()),
            "follow" => query.options.follow = parse_flag(key, value)?,
            "timestamps" => query.options.timestamps = parse_flag(key, value)?,
            "tail" => {
                query.options.tail = match value.as_str() {
                    "" | "all" => None,
                    number => Some(number.parse::<u64>().map_err(|_| {
                        format!("tail must be a number of lines or \"all\", not {value:?}")
                    })?),
                }
            }
            "since" if value.is_empty() => {}
            "since" => query.options.since = Some(docker_since(value, now)?),
            other => {
                return Err(format!(
                    "unknown query parameter {other:?} (expected container, follow, tail, \
                     since, timestamps)"
                ))
            }
        }
    }
    Ok(query)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(query: &str) -> Vec<(String, String)> {
        crate::api::http::parse_query(query)
    }

    #[test]
    fn since_takes_a_duration_a_time_or_unix_seconds() {
        let now: Millis = 1_700_000_000_000;
        // (text, expected)
        let table = [
            ("10m", Ok("1699999400.000".to_string())),
            ("1h30m", Ok("1699994600.000".to_string())),
            ("500ms", Ok("1699999999.500".to_string())),
            ("2023-11-14T22:13:20Z", Ok("1700000000.000".to_string())),
            ("2023-11-14T22:13:20.25Z", Ok("1700000000.250".to_string())),
            ("1700000000", Ok("1700000000".to_string())),
            ("1700000000.5", Ok("1700000000.5".to_string())),
            ("99999999h", Ok("0.000".to_string())),
        ];
        for (text, expected) in table {
            assert_eq!(docker_since(text, now), expected, "{text}");
        }
        for bad in ["yesterday", "10x", ".5", "1.", "-5m", "1e9", ""] {
            let error = docker_since(bad, now).expect_err(bad);
            assert!(error.contains("RFC 3339"), "{bad}: {error}");
        }
    }

    #[test]
    fn logs_query_parameters_are_checked() {
        let parsed = parse_logs_query(
            &pairs("container=web&follow=1&tail=5&since=10m&timestamps=true"),
            10_000_000,
        )
        .expect("valid");
        assert_eq!(parsed.container.as_deref(), Some("web"));
        assert_eq!(
            parsed.options,
            LogOptions {
                follow: true,
                tail: Some(5),
                since: Some("9400.000".into()),
                timestamps: true,
            }
        );
        let defaults = parse_logs_query(&pairs("container=&tail=all&follow=0"), 0).expect("ok");
        assert_eq!(defaults.container, None);
        assert_eq!(defaults.options, LogOptions::default());
        // (query, what the message names)
        let table = [
            ("tail=-1", "tail must be"),
            ("follow=yes", "follow must be"),
            ("timestamps=2", "timestamps must be"),
            ("since=soon", "since must be"),
            ("lines=4", "unknown query parameter \"lines\""),
        ];
        for (query, expected) in table {
            let error = parse_logs_query(&pairs(query), 0).expect_err(query);
            assert!(error.contains(expected), "{query}: {error}");
        }
    }
}
