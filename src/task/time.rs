//! Time as deckhand writes and reads it: milliseconds since the epoch ([`Millis`]) to and from
//! RFC 3339 UTC text, and Docker's own RFC 3339 times (nanoseconds, offsets, a zero time for
//! "never") to milliseconds or nanoseconds. One parser and one calendar conversion serve them
//! all, so the API, the CLI, the managed task and restore-time reconciliation cannot disagree
//! about a date, and none of them can be crashed by the bytes of one. Pure functions, table-tested.

use super::Millis;

/// `1_700_000_000_123` → `2023-11-14T22:13:20.123Z` (RFC 3339, UTC, millisecond precision).
pub fn rfc3339_from_millis(millis: Millis) -> String {
    let seconds = millis / 1000;
    let milliseconds = millis % 1000;
    let days = (seconds / 86_400) as i64;
    let second_of_day = seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{milliseconds:03}Z",
        second_of_day / 3600,
        (second_of_day / 60) % 60,
        second_of_day % 60
    )
}

/// Parses the RFC 3339 UTC form [`rfc3339_from_millis`] writes (`YYYY-MM-DDTHH:MM:SS[.fff]Z`,
/// any number of fraction digits); `None` for anything else, including an offset other than `Z`.
/// The same parser as Docker's times ([`parse_docker_time`]), restricted to UTC.
pub fn millis_from_rfc3339(text: &str) -> Option<Millis> {
    if !text.ends_with('Z') {
        return None;
    }
    parse_docker_time(text)
}

/// Whether date and clock fields can be a time at all (a leap second allowed); both parsers ask.
fn fields_in_range(month: i64, day: i64, hour: i64, minute: i64, second: i64) -> bool {
    (1..=12).contains(&month)
        && (1..=31).contains(&day)
        && (0..=23).contains(&hour)
        && (0..=59).contains(&minute)
        && (0..=60).contains(&second)
}

/// (year, month, day) → days since 1970-01-01 (the inverse of [`civil_from_days`]).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days` algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Parse an RFC 3339 time as Docker writes it (`2026-11-29T23:12:33.123456789Z`, or with a
/// `+hh:mm` offset) into milliseconds since the epoch. Docker's zero time, an empty string, a
/// time before 1970 and anything malformed give `None`.
pub fn parse_docker_time(text: &str) -> Option<Millis> {
    let (seconds, nanos) = parse_rfc3339(text)?;
    // `seconds` is at most year 9999's, so neither product nor sum can overflow.
    Some(seconds * 1000 + u64::from(nanos / 1_000_000))
}

/// [`parse_docker_time`] in nanoseconds (Docker's own precision, which orders a container's start
/// and finish even within one millisecond). `None` also past what an `i64` of nanoseconds holds
/// (year 2262).
pub fn parse_docker_time_nanos(text: &str) -> Option<i64> {
    let (seconds, nanos) = parse_rfc3339(text)?;
    i64::try_from(seconds)
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(i64::from(nanos))
}

/// The crate's one RFC 3339 parser: `YYYY-MM-DD(T|t| )HH:MM:SS[.digits](Z|z|±HH:MM)` → (seconds
/// since the epoch, nanoseconds within the second). Works on bytes and checks every position the
/// layout names before reading it, so no input (non-ASCII, truncated, U+FFFD from lossy decoding)
/// can make it slice inside a character; numbers have fixed widths, so none can overflow.
fn parse_rfc3339(text: &str) -> Option<(u64, u32)> {
    let bytes = text.as_bytes();
    if bytes.len() < 20 {
        return None;
    }
    let layout_ok = bytes[4] == b'-'
        && bytes[7] == b'-'
        && matches!(bytes[10], b'T' | b't' | b' ')
        && bytes[13] == b':'
        && bytes[16] == b':';
    if !layout_ok {
        return None;
    }
    let year = ascii_number(&bytes[0..4])?;
    let month = ascii_number(&bytes[5..7])?;
    let day = ascii_number(&bytes[8..10])?;
    let hour = ascii_number(&bytes[11..13])?;
    let minute = ascii_number(&bytes[14..16])?;
    let second = ascii_number(&bytes[17..19])?;
    if !fields_in_range(month, day, hour, minute, second) {
        return None;
    }
    let mut rest = &bytes[19..];
    let mut nanos = 0u32;
    if let Some(fraction) = rest.strip_prefix(b".") {
        let digits = fraction.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        // Digits past the ninth (below a nanosecond) are read and ignored; fewer are padded.
        let significant = &fraction[..digits.min(9)];
        nanos = significant
            .iter()
            .fold(0u32, |nanos, digit| nanos * 10 + u32::from(digit - b'0'))
            * 10u32.pow(9 - significant.len() as u32);
        rest = &fraction[digits..];
    }
    let offset_seconds = match rest {
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), hours @ .., b':', _, _] if hours.len() == 2 => {
            let hours = ascii_number(hours)?;
            let minutes = ascii_number(&rest[4..6])?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            let magnitude = hours * 3600 + minutes * 60;
            if *sign == b'-' {
                -magnitude
            } else {
                magnitude
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_seconds;
    // Before 1970 (Docker's zero time `0001-01-01T00:00:00Z` among them) is "never". Past the
    // end of year 9999 (reachable through a leap second or an offset) is no time deckhand could
    // write back with a four-digit year.
    if seconds > LAST_WRITABLE_SECOND {
        return None;
    }
    Some((u64::try_from(seconds).ok()?, nanos))
}

/// 9999-12-31T23:59:59Z, the last second a four-digit year can write.
const LAST_WRITABLE_SECOND: i64 = 253_402_300_799;

/// A fixed-width run of ASCII digits as a number; `None` if any byte is not a digit.
fn ascii_number(digits: &[u8]) -> Option<i64> {
    digits.iter().try_fold(0i64, |number, byte| {
        byte.is_ascii_digit()
            .then(|| number * 10 + i64::from(byte - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Docker's "never" (a container not started or not finished yet).
    const ZERO: &str = "0001-01-01T00:00:00Z";

    #[test]
    fn rfc3339_known_instants() {
        let table = [
            (0, "1970-01-01T00:00:00.000Z"),
            (1_700_000_000_123, "2023-11-14T22:13:20.123Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (4_107_542_399_999, "2100-02-28T23:59:59.999Z"),
            (1_798_761_600_000, "2027-01-01T00:00:00.000Z"),
        ];
        for (millis, expected) in table {
            assert_eq!(rfc3339_from_millis(millis), expected, "{millis}");
            assert_eq!(millis_from_rfc3339(expected), Some(millis), "{expected}");
        }
        assert_eq!(
            millis_from_rfc3339("2023-11-14T22:13:20Z"),
            Some(1_700_000_000_000)
        );
        assert_eq!(
            millis_from_rfc3339("2023-11-14T22:13:20.123456789Z"),
            Some(1_700_000_000_123)
        );
        for bad in [
            "",
            "2023-11-14",
            "2023-13-01T00:00:00Z",
            "2023-11-14T22:13:20+01:00",
            "x",
        ] {
            assert_eq!(millis_from_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn docker_times_parse_row_by_row() {
        // Expected values checked with `date -u -d <time> +%s%3N`.
        let table = [
            ("1970-01-01T00:00:00Z", Some(0)),
            ("1970-01-01T00:00:01.5Z", Some(1_500)),
            ("2000-03-01T00:00:00Z", Some(951_868_800_000)),
            ("2026-11-29T23:00:00.250000000Z", Some(1_795_993_200_250)),
            ("2026-11-29T23:00:00+01:00", Some(1_795_989_600_000)),
            ("2026-11-29T23:00:00.123456-00:30", Some(1_795_995_000_123)),
            (ZERO, None),
            ("", None),
            ("2026-13-01T00:00:00Z", None),
            ("2026-11-29 23:00:00", None),
            ("2026-11-29T23:00:00.Z", None),
            ("yesterday at noon, roughly", None),
            ("2026-11-29T23:00:00Zjunk", None),
            ("2026-11-29T23:00:00+1:000", None),
            ("2026-11-29T23:00:00+-1:00", None),
            ("2026-11-29T23:00:00+24:00", None),
            ("+026-11-29T23:00:00Z", None),
            ("1969-12-31T23:59:59.999Z", None),
            ("1970-01-01T01:00:00+01:00", Some(0)),
            ("9999-12-31T23:59:59.999999999Z", Some(253_402_300_799_999)),
            // Found by fuzzing: past year 9999, which `rfc3339_from_millis` cannot write back.
            ("9999-12-31T23:59:60.999999999Z", None),
            ("9999-12-31T23:00:00-01:00", None),
            ("2016-12-31T23:59:60Z", Some(1_483_228_800_000)),
        ];
        for (text, expected) in table {
            assert_eq!(parse_docker_time(text), expected, "{text}");
        }
    }

    #[test]
    fn docker_times_in_nanoseconds() {
        let table = [
            ("1970-01-01T00:00:00.000000001Z", Some(1)),
            ("1970-01-01T00:00:01.5Z", Some(1_500_000_000)),
            // Digits below a nanosecond are ignored, not rounded.
            ("1970-01-01T00:00:00.1234567891Z", Some(123_456_789)),
            (
                "2026-11-29T23:00:00.123456789+01:00",
                Some(1_795_989_600_123_456_789),
            ),
            // Past what an i64 of nanoseconds holds.
            ("2262-04-12T00:00:00Z", None),
            ("0001-01-01T00:00:00Z", None),
        ];
        for (text, expected) in table {
            assert_eq!(parse_docker_time_nanos(text), expected, "{text}");
        }
    }

    /// Non-ASCII bytes where the layout expects ASCII: the old parser sliced `&rest[3..4]` of an
    /// offset and panicked when a multi-byte character straddled it (restore reads these times on
    /// every start, so the agent crash-looped).
    #[test]
    fn non_ascii_bytes_anywhere_are_refused_without_panicking() {
        let table = [
            "2026-11-29T23:00:00+0\u{e9}00",
            "2026-11-29T23:00:00+\u{FFFD}:00",
            "2026-11-29T23:00:00-00\u{FFFD}",
            "2026-11-29T23:00:00.\u{FFFD}Z",
            "2026-11-29T23:00:0\u{e9}Z",
            "2026-11-29\u{e9}23:00:00Z",
            "\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}",
            "2026-11-29T23:00:00Z\u{e9}",
        ];
        for text in table {
            assert_eq!(parse_docker_time(text), None, "{text:?}");
            assert_eq!(parse_docker_time_nanos(text), None, "{text:?}");
            assert_eq!(millis_from_rfc3339(text), None, "{text:?}");
        }
    }

    /// The written form's parser used to read any number of year digits, so a long year
    /// overflowed the calendar arithmetic.
    #[test]
    fn written_times_refuse_other_layouts() {
        for bad in [
            "99999999999999999-01-01T00:00:00Z",
            "2023-1-1T00:00:00Z",
            "2023-11-14T22:13:20.Z",
            "2023-11-14T22:13:20.12aZ",
        ] {
            assert_eq!(millis_from_rfc3339(bad), None, "{bad}");
        }
    }
}
