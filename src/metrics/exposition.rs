//! The Prometheus text exposition format, version 0.0.4, written by hand: a `# HELP` and a
//! `# TYPE` line per metric family, then its samples, `name{label="value",…} number`.
//!
//! Why by hand: the format is a few rules (escaping, number spelling, histogram series) and
//! deckhand exposes a fixed set of families; a metrics framework would bring a registry, locks
//! and dependencies for what a `String` and these functions do.
//!
//! The rules kept here: label values escape `\`, `"` and a line feed (`\\`, `\"`, `\n`); help
//! text escapes `\` and a line feed; numbers are written as Go's `strconv.ParseFloat` reads them,
//! with `+Inf`, `-Inf` and `NaN` spelled as the format wants; a histogram's buckets are
//! cumulative, end with `le="+Inf"` equal to `_count`, and come with `_sum` and `_count`.
//! Label values come from task definitions (family and container names), so they are outside
//! text: escaping must hold for any string (a fuzz target checks it).

use std::fmt::Write as _;

/// The `Content-Type` of a page in this format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A metric family's type, as its `# TYPE` line spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
}

impl MetricType {
    pub fn as_str(self) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
        }
    }
}

/// One histogram's state as read for a page: per-bucket counts (not cumulative) for each upper
/// bound, the count above the last bound, and the sum of what was observed.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot<'a> {
    pub bounds: &'a [f64],
    /// `counts[i]` observations fell in `(bounds[i-1], bounds[i]]`; same length as `bounds`.
    pub counts: Vec<u64>,
    /// Observations above the last bound.
    pub overflow: u64,
    pub sum: f64,
}

/// A page being written. Families are written one after another; the caller writes a family's
/// header once, then its samples.
#[derive(Debug, Default)]
pub struct Exposition {
    text: String,
}

impl Exposition {
    pub fn new() -> Exposition {
        Exposition::default()
    }

    pub fn with_capacity(bytes: usize) -> Exposition {
        Exposition {
            text: String::with_capacity(bytes),
        }
    }

    pub fn into_string(self) -> String {
        self.text
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The `# HELP` and `# TYPE` lines of a family.
    pub fn family(&mut self, name: &str, help: &str, kind: MetricType) {
        self.text.push_str("# HELP ");
        self.text.push_str(name);
        self.text.push(' ');
        escape_help_into(&mut self.text, help);
        self.text.push_str("\n# TYPE ");
        self.text.push_str(name);
        self.text.push(' ');
        self.text.push_str(kind.as_str());
        self.text.push('\n');
    }

    /// One sample line with a floating-point value.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.sample_head(name, labels);
        write_number_into(&mut self.text, value);
        self.text.push('\n');
    }

    /// One sample line with an integer value (counters and counts: written exactly).
    pub fn sample_integer(&mut self, name: &str, labels: &[(&str, &str)], value: u64) {
        self.sample_head(name, labels);
        let _ = write!(self.text, "{value}");
        self.text.push('\n');
    }

    fn sample_head(&mut self, name: &str, labels: &[(&str, &str)]) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (index, (label, value)) in labels.iter().enumerate() {
                if index > 0 {
                    self.text.push(',');
                }
                self.text.push_str(label);
                self.text.push_str("=\"");
                escape_label_value_into(&mut self.text, value);
                self.text.push('"');
            }
            self.text.push('}');
        }
        self.text.push(' ');
    }

    /// A histogram's series under `name` with `labels`: `name_bucket{…,le="…"}` for each bound,
    /// cumulative, then `le="+Inf"`, `name_sum` and `name_count`. (The family header is the
    /// caller's, once for all label sets.)
    pub fn histogram(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        histogram: &HistogramSnapshot,
    ) {
        let bucket_name = format!("{name}_bucket");
        let mut with_le: Vec<(&str, &str)> = Vec::with_capacity(labels.len() + 1);
        with_le.extend_from_slice(labels);
        let bound_texts: Vec<String> = histogram
            .bounds
            .iter()
            .map(|bound| {
                let mut text = String::new();
                write_number_into(&mut text, *bound);
                text
            })
            .collect();
        let mut cumulative: u64 = 0;
        for (bound_text, count) in bound_texts.iter().zip(&histogram.counts) {
            cumulative = cumulative.saturating_add(*count);
            with_le.push(("le", bound_text));
            self.sample_integer(&bucket_name, &with_le, cumulative);
            with_le.pop();
        }
        let total = cumulative.saturating_add(histogram.overflow);
        with_le.push(("le", "+Inf"));
        self.sample_integer(&bucket_name, &with_le, total);
        self.sample(&format!("{name}_sum"), labels, histogram.sum);
        self.sample_integer(&format!("{name}_count"), labels, total);
    }
}

/// Appends `value` escaped for a label value: `\` → `\\`, `"` → `\"`, line feed → `\n`.
pub fn escape_label_value_into(out: &mut String, value: &str) {
    for character in value.chars() {
        match character {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            other => out.push(other),
        }
    }
}

/// `value` escaped for a label value.
pub fn escape_label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    escape_label_value_into(&mut out, value);
    out
}

/// The label value an escaped one stands for (the reader's side, for tests and the fuzz
/// target); `None` for a lone or unknown escape, or an unescaped `"` or line feed.
pub fn unescape_label_value(escaped: &str) -> Option<String> {
    let mut out = String::with_capacity(escaped.len());
    let mut characters = escaped.chars();
    while let Some(character) = characters.next() {
        match character {
            '\\' => match characters.next()? {
                '\\' => out.push('\\'),
                '"' => out.push('"'),
                'n' => out.push('\n'),
                _ => return None,
            },
            '"' | '\n' => return None,
            other => out.push(other),
        }
    }
    Some(out)
}

/// A sample line read back: metric name, labels (unescaped) and the value as written.
pub type SampleLine = (String, Vec<(String, String)>, String);

/// Reads a sample line as a Prometheus parser does (the reader's side, for the tests and the
/// fuzz target; the agent never reads pages). `None` for a comment or a malformed line.
pub fn read_sample_line(line: &str) -> Option<SampleLine> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let (name, mut rest) = line.split_at(name_end);
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let mut labels = Vec::new();
    if let Some(after_brace) = rest.strip_prefix('{') {
        rest = after_brace;
        loop {
            if let Some(after_close) = rest.strip_prefix('}') {
                rest = after_close;
                break;
            }
            let (label, after_label) = rest.split_once("=\"")?;
            let label = label.strip_prefix(',').unwrap_or(label);
            if label.is_empty() || !label.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return None;
            }
            // The value ends at the first `"` not escaped by a `\`.
            let mut escaped = false;
            let mut end = None;
            for (index, character) in after_label.char_indices() {
                match character {
                    '\\' if !escaped => escaped = true,
                    '"' if !escaped => {
                        end = Some(index);
                        break;
                    }
                    _ => escaped = false,
                }
            }
            let end = end?;
            labels.push((
                label.to_string(),
                unescape_label_value(&after_label[..end])?,
            ));
            rest = &after_label[end + 1..];
        }
    }
    let value = rest.strip_prefix(' ')?;
    if value.is_empty() || value.contains(' ') {
        return None;
    }
    Some((name.to_string(), labels, value.to_string()))
}

/// Appends help text escaped: `\` → `\\`, line feed → `\n`.
fn escape_help_into(out: &mut String, help: &str) {
    for character in help.chars() {
        match character {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            other => out.push(other),
        }
    }
}

/// Appends a sample value as the format spells it: `+Inf`, `-Inf`, `NaN`, else Rust's shortest
/// decimal that reads back to the same `f64` (never an exponent, which Go reads too).
pub fn write_number_into(out: &mut String, value: f64) {
    if value.is_nan() {
        out.push_str("NaN");
    } else if value == f64::INFINITY {
        out.push_str("+Inf");
    } else if value == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else {
        let _ = write!(out, "{value}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped_and_read_back() {
        // (value, escaped)
        let table = [
            ("web", "web"),
            ("a\"b", "a\\\"b"),
            ("back\\slash", "back\\\\slash"),
            ("two\nlines", "two\\nlines"),
            ("\\n", "\\\\n"),
            ("tab\there", "tab\there"),
            ("ünïcode ✓", "ünïcode ✓"),
            ("", ""),
        ];
        for (value, escaped) in table {
            assert_eq!(escape_label_value(value), escaped, "{value:?}");
            assert_eq!(
                unescape_label_value(escaped).as_deref(),
                Some(value),
                "{escaped:?}"
            );
        }
        for broken in ["\\", "\\t", "a\"b", "a\nb"] {
            assert_eq!(unescape_label_value(broken), None, "{broken:?}");
        }
    }

    #[test]
    fn sample_lines_read_back() {
        let mut page = Exposition::new();
        let awkward = "a\"b\\c\nd},e=\"f";
        page.sample_integer("m_total", &[("task", "t"), ("container", awkward)], 3);
        page.sample("m", &[], f64::INFINITY);
        let lines: Vec<&str> = page.as_str().lines().collect();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(
            read_sample_line(lines[0]),
            Some((
                "m_total".to_string(),
                vec![
                    ("task".to_string(), "t".to_string()),
                    ("container".to_string(), awkward.to_string())
                ],
                "3".to_string()
            ))
        );
        assert_eq!(
            read_sample_line(lines[1]),
            Some(("m".to_string(), vec![], "+Inf".to_string()))
        );
        for broken in [
            "",
            "# HELP m x",
            "m",
            "m{a=\"b\" 1",
            "m{a=\"b\\\"} 1",
            "m{=\"b\"} 1",
            "1m 2",
            "m 1 2 3",
        ] {
            assert_eq!(read_sample_line(broken), None, "{broken:?}");
        }
    }

    #[test]
    fn numbers_are_spelled_as_the_format_reads_them() {
        let table = [
            (0.0, "0"),
            (1.0, "1"),
            (0.005, "0.005"),
            (2.5, "2.5"),
            (1e-7, "0.0000001"),
            (123456789.0, "123456789"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (f64::NAN, "NaN"),
            (-3.25, "-3.25"),
        ];
        for (value, spelled) in table {
            let mut out = String::new();
            write_number_into(&mut out, value);
            assert_eq!(out, spelled, "{value}");
        }
    }

    #[test]
    fn a_family_has_help_and_type_and_samples_carry_escaped_labels() {
        let mut page = Exposition::new();
        page.family(
            "deckhand_example",
            "An example.\nWith a \\ in it.",
            MetricType::Gauge,
        );
        page.sample("deckhand_example", &[], 1.5);
        page.sample_integer(
            "deckhand_example",
            &[("task", "t1"), ("container", "say \"hi\"\n")],
            7,
        );
        assert_eq!(
            page.as_str(),
            "# HELP deckhand_example An example.\\nWith a \\\\ in it.\n\
             # TYPE deckhand_example gauge\n\
             deckhand_example 1.5\n\
             deckhand_example{task=\"t1\",container=\"say \\\"hi\\\"\\n\"} 7\n"
        );
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_end_with_inf_sum_and_count() {
        let mut page = Exposition::new();
        let histogram = HistogramSnapshot {
            bounds: &[0.1, 1.0, 10.0],
            counts: vec![2, 0, 3],
            overflow: 1,
            sum: 42.25,
        };
        page.histogram("d_seconds", &[("operation", "pull")], &histogram);
        assert_eq!(
            page.as_str(),
            "d_seconds_bucket{operation=\"pull\",le=\"0.1\"} 2\n\
             d_seconds_bucket{operation=\"pull\",le=\"1\"} 2\n\
             d_seconds_bucket{operation=\"pull\",le=\"10\"} 5\n\
             d_seconds_bucket{operation=\"pull\",le=\"+Inf\"} 6\n\
             d_seconds_sum{operation=\"pull\"} 42.25\n\
             d_seconds_count{operation=\"pull\"} 6\n"
        );
        // Without labels the bucket still carries `le`, and sum and count carry none.
        let mut page = Exposition::new();
        let empty = HistogramSnapshot {
            bounds: &[0.5],
            counts: vec![0],
            overflow: 0,
            sum: 0.0,
        };
        page.histogram("c_seconds", &[], &empty);
        assert_eq!(
            page.as_str(),
            "c_seconds_bucket{le=\"0.5\"} 0\n\
             c_seconds_bucket{le=\"+Inf\"} 0\n\
             c_seconds_sum 0\n\
             c_seconds_count 0\n"
        );
    }
}
