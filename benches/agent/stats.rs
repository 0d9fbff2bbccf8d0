//! Order statistics over samples and the few formats the bench prints. Medians and percentiles
//! use the nearest-rank rule on sorted samples, so every figure is a value that was measured.

use std::time::Duration;

/// Nearest-rank percentile (`percent` in 0..=100) of `samples`; `None` when there are none.
pub fn percentile(samples: &[Duration], percent: f64) -> Option<Duration> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = ((percent / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

pub fn median(samples: &[Duration]) -> Option<Duration> {
    percentile(samples, 50.0)
}

pub fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// `123.4 ms`, or `-` when nothing was measured.
pub fn format_millis(duration: Option<Duration>) -> String {
    match duration {
        Some(duration) => format!("{:.1} ms", millis(duration)),
        None => "-".to_string(),
    }
}

/// `a / b` as `1.23×`, or `-` when either is missing or `b` is zero.
pub fn format_ratio(numerator: Option<Duration>, denominator: Option<Duration>) -> String {
    match (numerator, denominator) {
        (Some(numerator), Some(denominator)) if !denominator.is_zero() => {
            format!(
                "{:.2}×",
                numerator.as_secs_f64() / denominator.as_secs_f64()
            )
        }
        _ => "-".to_string(),
    }
}

/// Bytes as MiB with two decimals.
pub fn format_mib(bytes: u64) -> String {
    format!("{:.2} MiB", bytes as f64 / (1024.0 * 1024.0))
}
