//! Local tasks' roles (`DECKHAND_TASK_ROLES=assume|host`): what the engine hands the agent's
//! role refresher ([`LocalRole`], through [`LocalRoles::track`]) when it accepts or restores a
//! local task with a `taskRoleArn` or `executionRoleArn`, and the refresher's pure timing rules:
//! when to refresh credentials ([`refresh_delay`]) and how long to wait after a failure
//! ([`retry_delay`]). The refresher itself is `control::task_roles`.

use super::RoleType;
use std::time::Duration;

/// The latest a refresh happens before the credentials expire.
pub const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(5 * 60);
/// The shortest wait between two refreshes, however short-lived the credentials are.
pub const MIN_REFRESH_DELAY: Duration = Duration::from_secs(5);
/// The first wait after a failure; it doubles with each failure in a row.
pub const FIRST_RETRY_DELAY: Duration = Duration::from_secs(2);
/// The longest wait after failures.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(5 * 60);

/// One role of one local task, to be given credentials under `credentials_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalRole {
    pub task_arn: String,
    pub task_id: String,
    pub role: RoleType,
    pub credentials_id: String,
    pub role_arn: String,
}

/// Who gives local tasks' roles their credentials (the agent's refresher): told of each role
/// when its task is accepted or restored; it stops by itself once the store forgets the id.
pub trait LocalRoles: Send + Sync + std::fmt::Debug {
    fn track(&self, role: LocalRole);
}

/// How long after getting credentials that expire in `remaining` to get new ones: halfway to
/// expiry, and at least [`REFRESH_BEFORE_EXPIRY`] before it, never sooner than
/// [`MIN_REFRESH_DELAY`] (so credentials handed out nearly expired do not make a tight loop).
/// Pure.
pub fn refresh_delay(remaining: Duration) -> Duration {
    let before_expiry = remaining.saturating_sub(REFRESH_BEFORE_EXPIRY);
    (remaining / 2).min(before_expiry).max(MIN_REFRESH_DELAY)
}

/// How long to wait after `failures` failures in a row (1 or more): [`FIRST_RETRY_DELAY`],
/// doubled each time, at most [`MAX_RETRY_DELAY`]. Pure.
pub fn retry_delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST_RETRY_DELAY
        .saturating_mul(1 << doublings)
        .min(MAX_RETRY_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_refreshed_halfway_and_at_least_five_minutes_before_expiry() {
        let minutes = |m: u64| Duration::from_secs(m * 60);
        let cases: &[(Duration, Duration)] = &[
            // STS's default hour: halfway.
            (minutes(60), minutes(30)),
            // Six hours (ECS's): halfway.
            (minutes(360), minutes(180)),
            // STS's shortest, 15 minutes: 5 minutes before expiry wins over halfway (7.5).
            (minutes(15), minutes(7) + Duration::from_secs(30)),
            (minutes(8), minutes(3)),
            // 5 minutes and 20 seconds: 20 seconds, not 2m40s.
            (Duration::from_secs(320), Duration::from_secs(20)),
            // Nearly expired, expired, none left: the floor, not a tight loop.
            (minutes(5), MIN_REFRESH_DELAY),
            (Duration::from_secs(1), MIN_REFRESH_DELAY),
            (Duration::ZERO, MIN_REFRESH_DELAY),
        ];
        for (remaining, expected) in cases {
            assert_eq!(
                refresh_delay(*remaining),
                *expected,
                "remaining {remaining:?}"
            );
            if *remaining > REFRESH_BEFORE_EXPIRY + MIN_REFRESH_DELAY {
                assert!(*remaining - refresh_delay(*remaining) >= REFRESH_BEFORE_EXPIRY);
            }
        }
    }

    #[test]
    fn failures_wait_longer_each_time_up_to_five_minutes() {
        let cases: &[(u32, u64)] = &[
            (0, 2),
            (1, 2),
            (2, 4),
            (3, 8),
            (4, 16),
            (7, 128),
            (8, 256),
            (9, 300),
            (40, 300),
            (u32::MAX, 300),
        ];
        for (failures, seconds) in cases {
            assert_eq!(
                retry_delay(*failures),
                Duration::from_secs(*seconds),
                "{failures}"
            );
        }
    }
}
