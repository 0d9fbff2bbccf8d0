//! The clock deckhand signs its ECS requests with: the host's clock plus an offset learnt from
//! ECS's answers. An edge box without a real-time clock can boot with a time hours off, and
//! AWS refuses a signature more than 5 minutes from its own time; the AWS SDKs correct from the
//! answer's `Date` header and sign again, and so does deckhand.
//!
//! [`skew_correction`] decides (pure, table-tested): an answer that refuses the signature
//! (`InvalidSignatureException`, `SignatureDoesNotMatch` "Signature expired", `AuthFailure`)
//! or says the request time is off (`RequestExpired`, `RequestInTheFuture`,
//! `RequestTimeTooSkewed`), with a `Date` at least a minute from the signing time, or any
//! 401/403 with a `Date` more than 4 minutes off (the SDKs' threshold), gives the offset
//! `Date − local clock`. [`SigningClock`] holds that offset for the whole process: every later
//! API call, the ACS and telemetry websockets' upgrades and each telemetry message are signed
//! with it. The offset is logged each time it changes, and the refused call is signed again
//! once ([`signed_again_if_skewed`]).

use super::{sigv4, EcsError};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::UNIX_EPOCH;

/// An auth failure with a `Date` further than this from the signing time is a skewed clock
/// whatever the error says (the AWS SDKs' `skewThreshold`).
pub const SKEW_THRESHOLD_MILLIS: i64 = 4 * 60 * 1000;
/// A difference smaller than this is not corrected: AWS accepts 5 minutes either way, and a
/// `Date` has whole seconds and arrives after some transit.
pub const MIN_CORRECTION_MILLIS: i64 = 60 * 1000;

/// Error types that say the request's time is off.
const TIME_REFUSALS: &[&str] = &[
    "RequestExpired",
    "RequestInTheFuture",
    "RequestTimeTooSkewed",
];
/// Error types that refuse the signature, which a skewed clock causes ("Signature expired").
const SIGNATURE_REFUSALS: &[&str] = &[
    "InvalidSignatureException",
    "SignatureDoesNotMatch",
    "AuthFailure",
];

/// The offset to sign with from now on, when `error` (an answer of ECS) and its `Date`
/// (`server_millis`) say the signing time (`local_millis + offset_millis`) is off; `None` to
/// keep the offset. Pure.
pub fn skew_correction(
    error: &EcsError,
    server_millis: Option<u64>,
    local_millis: u64,
    offset_millis: i64,
) -> Option<i64> {
    let EcsError::Service {
        status, error_type, ..
    } = error
    else {
        return None;
    };
    let server = i64::try_from(server_millis?).ok()?;
    let local = i64::try_from(local_millis).ok()?;
    let skew = server.checked_sub(local.checked_add(offset_millis)?)?;
    let names_the_time = TIME_REFUSALS.contains(&error_type.as_str())
        || SIGNATURE_REFUSALS.contains(&error_type.as_str());
    let auth_failure = matches!(status, 401 | 403) || names_the_time;
    let corrects = (names_the_time && skew.abs() >= MIN_CORRECTION_MILLIS)
        || (auth_failure && skew.abs() > SKEW_THRESHOLD_MILLIS);
    corrects.then(|| server - local)
}

/// A `Date` header's time in epoch milliseconds; `None` when it is not an HTTP date.
pub fn date_millis(header: &str) -> Option<u64> {
    let time = httpdate::parse_http_date(header.trim()).ok()?;
    let since = time.duration_since(UNIX_EPOCH).ok()?;
    u64::try_from(since.as_millis()).ok()
}

/// `local_millis` moved by `offset_millis`, within `u64`.
fn shifted(local_millis: u64, offset_millis: i64) -> u64 {
    if offset_millis >= 0 {
        local_millis.saturating_add(offset_millis.unsigned_abs())
    } else {
        local_millis.saturating_sub(offset_millis.unsigned_abs())
    }
}

/// The signing clock: the host's clock and the offset ECS's answers taught.
#[derive(Debug, Default)]
pub struct SigningClock {
    offset_millis: AtomicI64,
}

/// The process's signing clock: one host clock, one offset for every ECS call.
static SIGNING_CLOCK: SigningClock = SigningClock::new();

/// The signing clock every ECS request is signed with.
pub fn signing_clock() -> &'static SigningClock {
    &SIGNING_CLOCK
}

impl SigningClock {
    pub const fn new() -> SigningClock {
        SigningClock {
            offset_millis: AtomicI64::new(0),
        }
    }

    /// How far ECS's time is ahead of the host's (negative: behind), in milliseconds.
    pub fn offset_millis(&self) -> i64 {
        self.offset_millis.load(Ordering::Relaxed)
    }

    /// The time to sign with, in epoch milliseconds.
    pub fn now_millis(&self) -> u64 {
        shifted(crate::clock::now_millis(), self.offset_millis())
    }

    /// The time to sign with as SigV4's `X-Amz-Date`.
    pub fn amz_date(&self) -> String {
        sigv4::amz_date(self.now_millis())
    }

    /// Reads a failed call's error and its answer's `Date` (`service` answered it: `ECS`,
    /// `STS`, …): when they say the signing time is off, takes the new offset (logged, naming
    /// `service`) and answers `true` — sign the call again.
    pub fn correct(&self, service: &str, error: &EcsError, date: Option<&str>) -> bool {
        let offset = self.offset_millis();
        let server = date.and_then(date_millis);
        let Some(corrected) = skew_correction(error, server, crate::clock::now_millis(), offset)
        else {
            return false;
        };
        self.offset_millis.store(corrected, Ordering::Relaxed);
        log::warn!("{}", skew_message(service, corrected, error));
        true
    }
}

/// The line logged when `service`'s answer (`error`) set the offset to `offset_millis`.
fn skew_message(service: &str, offset_millis: i64, error: &EcsError) -> String {
    let seconds = offset_millis / 1000;
    let (amount, direction) = if seconds >= 0 {
        (seconds, "behind")
    } else {
        (-seconds, "ahead of")
    };
    format!(
        "{service}: this host's clock is {amount} s {direction} {service}'s (its answer's Date; \
         it refused the signature: {error}); signing with {service}'s time from now on — set the \
         host's clock (NTP) to end this"
    )
}

/// A failed call: the error, and the `Date` of the answer that said it (if one did).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    pub error: EcsError,
    pub date: Option<String>,
}

impl From<EcsError> for Failed {
    fn from(error: EcsError) -> Failed {
        Failed { error, date: None }
    }
}

/// Makes a signed call with `attempt` and, when its answer says the signing time was off,
/// once more, signed with the corrected `clock`.
pub fn signed_again_if_skewed<T>(
    clock: &SigningClock,
    mut attempt: impl FnMut() -> Result<T, Failed>,
) -> Result<T, EcsError> {
    match attempt() {
        Ok(answer) => Ok(answer),
        Err(failed) if clock.correct("ECS", &failed.error, failed.date.as_deref()) => {
            attempt().map_err(|failed| failed.error)
        }
        Err(failed) => Err(failed.error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_796_500_000_000;
    const MINUTE: i64 = 60_000;

    fn refused(status: u16, error_type: &str, message: &str) -> EcsError {
        EcsError::Service {
            status,
            error_type: error_type.to_string(),
            message: message.to_string(),
        }
    }

    fn at(offset: i64) -> Option<u64> {
        Some(shifted(NOW, offset))
    }

    #[test]
    fn the_skew_line_names_the_service_that_answered() {
        let error = refused(403, "SignatureDoesNotMatch", "Signature expired");
        // (service, offset, the line starts with)
        let cases = [
            (
                "ECS",
                3_600_000,
                "ECS: this host's clock is 3600 s behind ECS's",
            ),
            (
                "STS",
                -120_500,
                "STS: this host's clock is 120 s ahead of STS's",
            ),
            (
                "Secrets Manager",
                61_000,
                "Secrets Manager: this host's clock is 61 s behind Secrets Manager's",
            ),
        ];
        for (service, offset, start) in cases {
            let line = skew_message(service, offset, &error);
            assert!(line.starts_with(start), "{line}");
            assert!(
                line.contains(&format!("signing with {service}'s time")),
                "{line}"
            );
        }
    }

    #[test]
    fn the_offset_comes_from_date_when_the_answer_says_the_time_is_off() {
        let expired = refused(
            400,
            "InvalidSignatureException",
            "Signature expired: 20261204T215200Z is now earlier than 20261204T224700Z (20261204T225200Z - 5 min.)",
        );
        // What, the answer, its Date, the offset held, the offset to take.
        type Case = (&'static str, EcsError, Option<u64>, i64, Option<i64>);
        let cases: &[Case] = &[
            (
                "an hour ahead, signature expired",
                expired.clone(),
                at(60 * MINUTE),
                0,
                Some(60 * MINUTE),
            ),
            (
                "an hour behind",
                expired.clone(),
                at(-60 * MINUTE),
                0,
                Some(-60 * MINUTE),
            ),
            (
                "no Date: nothing to correct from",
                expired.clone(),
                None,
                0,
                None,
            ),
            (
                "Date agrees within a minute",
                expired.clone(),
                at(30_000),
                0,
                None,
            ),
            (
                "already corrected: no change",
                expired.clone(),
                at(60 * MINUTE),
                60 * MINUTE - 2_000,
                None,
            ),
            (
                "a stale offset is replaced",
                expired.clone(),
                at(2 * MINUTE),
                60 * MINUTE,
                Some(2 * MINUTE),
            ),
            (
                "SignatureDoesNotMatch",
                refused(403, "SignatureDoesNotMatch", "Signature expired"),
                at(10 * MINUTE),
                0,
                Some(10 * MINUTE),
            ),
            (
                "RequestTimeTooSkewed",
                refused(403, "RequestTimeTooSkewed", "skewed"),
                at(-7 * MINUTE),
                0,
                Some(-7 * MINUTE),
            ),
            (
                "RequestExpired",
                refused(400, "RequestExpired", "expired"),
                at(2 * MINUTE),
                0,
                Some(2 * MINUTE),
            ),
            (
                "a 403 of another kind, Date 5 min off",
                refused(403, "AccessDeniedException", "denied"),
                at(5 * MINUTE),
                0,
                Some(5 * MINUTE),
            ),
            (
                "a 403 of another kind, Date 3 min off",
                refused(403, "AccessDeniedException", "denied"),
                at(3 * MINUTE),
                0,
                None,
            ),
            (
                "not an auth failure",
                refused(400, "ClientException", "bad"),
                at(60 * MINUTE),
                0,
                None,
            ),
            (
                "an expired token is not the clock",
                refused(400, "ExpiredTokenException", "expired"),
                at(3 * MINUTE),
                0,
                None,
            ),
            (
                "unreachable",
                EcsError::Unreachable("503".into()),
                at(60 * MINUTE),
                0,
                None,
            ),
            (
                "a Date before the epoch's reach",
                expired.clone(),
                Some(u64::MAX),
                0,
                None,
            ),
        ];
        for (what, error, server, offset, expected) in cases {
            assert_eq!(
                skew_correction(error, *server, NOW, *offset),
                *expected,
                "{what}"
            );
        }
    }

    #[test]
    fn http_dates_are_read_in_their_three_forms_and_anything_else_is_none() {
        let cases: &[(&str, Option<u64>)] = &[
            ("Sun, 06 Nov 1994 08:49:37 GMT", Some(784_111_777_000)),
            ("Sunday, 06-Nov-94 08:49:37 GMT", Some(784_111_777_000)),
            ("Sun Nov  6 08:49:37 1994", Some(784_111_777_000)),
            (" Fri, 04 Dec 2026 21:52:00 GMT ", Some(1_796_421_120_000)),
            ("", None),
            ("yesterday", None),
            ("Fri, 32 Dec 2026 21:52:00 GMT", None),
            ("Fri, 04 Dec 2026 25:52:00 GMT", None),
            ("Ω, 04 Dec 2026 21:52:00 GMT", None),
        ];
        for (text, expected) in cases {
            assert_eq!(date_millis(text), *expected, "{text:?}");
        }
    }

    #[test]
    fn a_correction_is_taken_once_and_the_call_is_signed_again_once() {
        let clock = SigningClock::new();
        let ahead = httpdate::fmt_http_date(
            std::time::SystemTime::now() + std::time::Duration::from_secs(3600),
        );
        let expired = refused(400, "InvalidSignatureException", "Signature expired");
        let mut attempts = Vec::new();
        let answer: Result<u32, EcsError> = signed_again_if_skewed(&clock, || {
            attempts.push(clock.offset_millis());
            if clock.offset_millis() == 0 {
                Err(Failed {
                    error: expired.clone(),
                    date: Some(ahead.clone()),
                })
            } else {
                Ok(7)
            }
        });
        assert_eq!(answer, Ok(7));
        assert_eq!(attempts.len(), 2, "{attempts:?}");
        let offset = clock.offset_millis();
        assert!((offset - 3_600_000).abs() < 5_000, "{offset}");
        assert!(
            clock
                .now_millis()
                .abs_diff(crate::clock::now_millis() + 3_600_000)
                < 5_000
        );

        // Refused again with the same Date: no second correction, no third attempt.
        let mut count = 0;
        let answer: Result<u32, EcsError> = signed_again_if_skewed(&clock, || {
            count += 1;
            Err(Failed {
                error: expired.clone(),
                date: Some(ahead.clone()),
            })
        });
        assert_eq!(answer, Err(expired.clone()));
        assert_eq!(count, 1);
        // A failure that is not about the clock is returned as it is.
        let unreachable = EcsError::Unreachable("refused".into());
        let answer: Result<u32, EcsError> =
            signed_again_if_skewed(&clock, || Err(Failed::from(unreachable.clone())));
        assert_eq!(answer, Err(unreachable));
    }
}
