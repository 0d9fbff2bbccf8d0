//! Time as deckhand writes and reads it: milliseconds since the epoch ([`Millis`]) to and from
//! RFC 3339 UTC text, and Docker's own RFC 3339 times (nanoseconds, offsets, a zero time for
//! "never") to milliseconds. One calendar conversion serves all three, so the API, the CLI and
//! restore-time reconciliation cannot disagree about a date. Pure functions, table-tested.

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

/// Parses the RFC 3339 UTC form [`rfc3339_from_millis`] writes (`YYYY-MM-DDTHH:MM:SS[.fff]Z`);
/// `None` for anything else.
pub fn millis_from_rfc3339(text: &str) -> Option<Millis> {
    let text = text.strip_suffix('Z')?;
    let (date, time) = text.split_once('T')?;
    let mut date_parts = date.splitn(3, '-');
    let year: i64 = date_parts.next()?.parse().ok()?;
    let month: u32 = date_parts.next()?.parse().ok()?;
    let day: u32 = date_parts.next()?.parse().ok()?;
    let (clock, fraction) = match time.split_once('.') {
        Some((clock, fraction)) => (clock, Some(fraction)),
        None => (time, None),
    };
    let mut clock_parts = clock.splitn(3, ':');
    let hour: u32 = clock_parts.next()?.parse().ok()?;
    let minute: u32 = clock_parts.next()?.parse().ok()?;
    let second: u32 = clock_parts.next()?.parse().ok()?;
    let [month, day, hour, minute, second] = [month, day, hour, minute, second].map(i64::from);
    if !fields_in_range(month, day, hour, minute, second) {
        return None;
    }
    let millis: u64 = match fraction {
        None => 0,
        Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
            let padded = format!("{:0<3}", &digits[..digits.len().min(3)]);
            padded.parse().ok()?
        }
        Some(_) => return None,
    };
    let days = days_from_civil(year, month, day);
    if days < 0 {
        // A date before 1970 is not a time deckhand writes.
        return None;
    }
    let seconds = u64::try_from(days * 86_400 + hour * 3600 + minute * 60 + second).ok()?;
    Some(seconds * 1000 + millis)
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
    let bytes = text.as_bytes();
    if bytes.len() < 20 || bytes[4] != b'-' || bytes[7] != b'-' || bytes[13] != b':' {
        return None;
    }
    if !matches!(bytes[10], b'T' | b't' | b' ') || bytes[16] != b':' {
        return None;
    }
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        if part.bytes().all(|b| b.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !fields_in_range(month, day, hour, minute, second) {
        return None;
    }
    let mut rest = &text[19..];
    let mut millis_fraction = 0i64;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let first_three = &fraction[..digits.min(3)];
        millis_fraction =
            first_three.parse::<i64>().ok()? * 10i64.pow(3 - first_three.len() as u32);
        rest = &fraction[digits..];
    }
    let offset_seconds = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6
            && (rest.starts_with('+') || rest.starts_with('-'))
            && &rest[3..4] == ":" =>
        {
            let hours: i64 = rest.get(1..3)?.parse().ok()?;
            let minutes: i64 = rest.get(4..6)?.parse().ok()?;
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            sign * (hours * 3600 + minutes * 60)
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_seconds;
    if seconds < 0 {
        return None;
    }
    Some((seconds * 1000 + millis_fraction) as Millis)
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
        ];
        for (text, expected) in table {
            assert_eq!(parse_docker_time(text), expected, "{text}");
        }
    }
}
