//! `DiscoverPollEndpoint`'s answer — the ACS endpoint (`endpoint`) and the telemetry endpoint
//! (`telemetryEndpoint`) — kept as the Go agent keeps it: reused for
//! [`POLL_ENDPOINT_CACHE_TTL`] (its `defaultPollEndpointCacheTTL`), and forgotten as soon as
//! connecting to it fails, so a reconnect after a close does not ask ECS again, and a moved
//! endpoint is asked for again. Pure: the caller passes the time.

use std::time::{Duration, Instant};

use super::EcsError;

/// How long an answer is reused.
pub const POLL_ENDPOINT_CACHE_TTL: Duration = Duration::from_secs(12 * 3600);

/// The endpoints of one `DiscoverPollEndpoint` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollEndpoints {
    /// The ACS endpoint.
    pub acs: String,
    /// The telemetry (TCS) endpoint, when the answer had one.
    pub telemetry: Option<String>,
}

impl PollEndpoints {
    /// Reads an answer: its `endpoint` is required, its `telemetryEndpoint` is optional.
    pub fn from_answer(answer: &serde_json::Value) -> Result<PollEndpoints, EcsError> {
        let text = |key: &str| {
            answer
                .get(key)
                .and_then(serde_json::Value::as_str)
                .filter(|value| !value.trim().is_empty())
                .map(str::to_string)
        };
        let acs = text("endpoint").ok_or_else(|| {
            EcsError::Protocol("DiscoverPollEndpoint answered without an endpoint".into())
        })?;
        Ok(PollEndpoints {
            acs,
            telemetry: text("telemetryEndpoint"),
        })
    }
}

/// The last answer and when it came.
#[derive(Debug, Default)]
pub struct PollEndpointCache {
    kept: Option<(PollEndpoints, Instant)>,
}

impl PollEndpointCache {
    /// The kept answer, unless it is older than the TTL.
    pub fn get(&self, now: Instant) -> Option<&PollEndpoints> {
        self.kept
            .as_ref()
            .filter(|(_, at)| now.saturating_duration_since(*at) < POLL_ENDPOINT_CACHE_TTL)
            .map(|(endpoints, _)| endpoints)
    }

    pub fn store(&mut self, endpoints: PollEndpoints, now: Instant) {
        self.kept = Some((endpoints, now));
    }

    /// Connecting failed: the next connect asks ECS again.
    pub fn forget(&mut self) {
        self.kept = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_are_read_kept_for_the_ttl_and_forgotten_on_failure() {
        let answer = json!({"endpoint": "https://ecs-a-1.us-west-2.amazonaws.com/", "telemetryEndpoint": "https://ecs-t-1.us-west-2.amazonaws.com/"});
        let endpoints = PollEndpoints::from_answer(&answer).expect("endpoints");
        assert_eq!(endpoints.acs, "https://ecs-a-1.us-west-2.amazonaws.com/");
        assert_eq!(
            endpoints.telemetry.as_deref(),
            Some("https://ecs-t-1.us-west-2.amazonaws.com/")
        );
        let acs_only = PollEndpoints::from_answer(&json!({"endpoint": "https://a/"})).expect("acs");
        assert_eq!(acs_only.telemetry, None);
        for bad in [json!({}), json!({"endpoint": ""}), json!({"endpoint": 3})] {
            assert!(matches!(
                PollEndpoints::from_answer(&bad),
                Err(EcsError::Protocol(_))
            ));
        }
        let start = Instant::now();
        let mut cache = PollEndpointCache::default();
        assert_eq!(cache.get(start), None);
        cache.store(endpoints.clone(), start);
        assert_eq!(
            cache.get(start + Duration::from_secs(3600)),
            Some(&endpoints)
        );
        assert_eq!(cache.get(start + POLL_ENDPOINT_CACHE_TTL), None);
        cache.forget();
        assert_eq!(cache.get(start), None);
    }
}
