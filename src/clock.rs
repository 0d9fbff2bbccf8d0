//! The wall clock, read in one place: milliseconds since the epoch, as deckhand records times
//! (task and container times, events, pulled images). Everything else about time is pure
//! (`task::time`); only this function looks at the system clock, so a clock set before 1970
//! gives 0 here rather than a panic anywhere.

use crate::task::Millis;

/// Milliseconds since the epoch, now (0 if the system clock is before the epoch).
pub fn now_millis() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
