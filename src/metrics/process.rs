//! The standard `process_*` metrics every Prometheus client exposes, read from the kernel's
//! files about this process at scrape time: `process_resident_memory_bytes` (`VmRSS` of
//! `/proc/self/status`), `process_cpu_seconds_total` (user + system time of `/proc/self/stat`),
//! `process_open_fds` (entries of `/proc/self/fd`) and `process_start_time_seconds` (the start
//! time of `/proc/self/stat` after the boot time, `btime` of `/proc/stat`).
//!
//! The parsers are pure and never panic: the files are the kernel's, but a parser of bytes read
//! from outside gets a fuzz target all the same. A value that cannot be read leaves its sample
//! out (the family's HELP and TYPE stay).

use super::exposition::{Exposition, MetricType};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Clock ticks per second in `/proc/…/stat` (`USER_HZ`): 100 on every Linux architecture
/// deckhand builds for (the kernel fixes it for user space whatever its internal `HZ`).
pub const CLOCK_TICKS_PER_SECOND: u64 = 100;

/// The most bytes read from one of these files; `/proc/stat` on a host with hundreds of CPUs
/// is the largest, at tens of KiB.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Reads at most `limit` bytes of a file as text (invalid UTF-8 replaced); `None` when it
/// cannot be opened or read.
pub fn read_small_file(path: &Path, limit: u64) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes).ok()?;
    Some(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
    })
}

/// The times of `/proc/<pid>/stat` the metrics use, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatTimes {
    pub user_ticks: u64,
    pub system_ticks: u64,
    /// When the process started, after boot.
    pub start_ticks: u64,
}

/// Fields 14 (`utime`), 15 (`stime`) and 22 (`starttime`) of `/proc/<pid>/stat`. The second
/// field, the command name in parentheses, may itself hold spaces and parentheses, so the
/// fields are counted from its last `)`.
pub fn parse_stat(text: &str) -> Option<StatTimes> {
    let (_, after_name) = text.rsplit_once(')')?;
    // After the name: field 3 (state) is word 0, so field n is word n - 3.
    let words: Vec<&str> = after_name.split_whitespace().collect();
    let field = |number: usize| -> Option<u64> { words.get(number - 3)?.parse().ok() };
    Some(StatTimes {
        user_ticks: field(14)?,
        system_ticks: field(15)?,
        start_ticks: field(22)?,
    })
}

/// `VmRSS` of `/proc/<pid>/status` in bytes (the kernel writes `VmRSS:     1234 kB`).
pub fn parse_resident_bytes(status: &str) -> Option<u64> {
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))?;
    let mut words = line.split_whitespace();
    let amount: u64 = words.next()?.parse().ok()?;
    let per_unit: u64 = match words.next() {
        Some("kB") => 1024,
        Some("B") | None => 1,
        Some(_) => return None,
    };
    amount.checked_mul(per_unit)
}

/// `btime` of `/proc/stat`: when the host booted, in seconds since the epoch.
pub fn parse_boot_time(stat: &str) -> Option<u64> {
    let line = stat.lines().find_map(|line| line.strip_prefix("btime "))?;
    line.trim().parse().ok()
}

/// What one scrape read about this process; `None` where a file could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ProcessSample {
    pub resident_bytes: Option<u64>,
    pub cpu_seconds: Option<f64>,
    pub open_fds: Option<u64>,
    pub start_time_seconds: Option<f64>,
}

/// Where the process files are: `/proc/self` and `/proc/stat` for the agent, a directory of
/// made-up files in tests. The boot time is read once (it does not change while deckhand runs,
/// and `/proc/stat` is the largest of these files).
#[derive(Debug)]
pub struct ProcessFiles {
    pub process_directory: PathBuf,
    pub system_stat: PathBuf,
    boot_time: OnceLock<Option<u64>>,
}

impl Default for ProcessFiles {
    fn default() -> ProcessFiles {
        ProcessFiles::new("/proc/self", "/proc/stat")
    }
}

impl ProcessFiles {
    pub fn new(process_directory: impl Into<PathBuf>, system_stat: impl Into<PathBuf>) -> Self {
        ProcessFiles {
            process_directory: process_directory.into(),
            system_stat: system_stat.into(),
            boot_time: OnceLock::new(),
        }
    }

    pub fn sample(&self) -> ProcessSample {
        let stat = read_small_file(&self.process_directory.join("stat"), MAX_FILE_BYTES)
            .as_deref()
            .and_then(parse_stat);
        let resident_bytes =
            read_small_file(&self.process_directory.join("status"), MAX_FILE_BYTES)
                .as_deref()
                .and_then(parse_resident_bytes);
        let open_fds = std::fs::read_dir(self.process_directory.join("fd"))
            .ok()
            .map(|entries| entries.count() as u64);
        let boot_time = *self.boot_time.get_or_init(|| {
            read_small_file(&self.system_stat, MAX_FILE_BYTES)
                .as_deref()
                .and_then(parse_boot_time)
        });
        let ticks = CLOCK_TICKS_PER_SECOND as f64;
        ProcessSample {
            resident_bytes,
            cpu_seconds: stat
                .map(|times| times.user_ticks.saturating_add(times.system_ticks) as f64 / ticks),
            open_fds,
            start_time_seconds: match (stat, boot_time) {
                (Some(times), Some(boot)) => Some(boot as f64 + times.start_ticks as f64 / ticks),
                _ => None,
            },
        }
    }
}

/// The four `process_*` families onto `page`.
pub fn write_process_metrics(page: &mut Exposition, sample: &ProcessSample) {
    page.family(
        "process_resident_memory_bytes",
        "Resident memory size in bytes.",
        MetricType::Gauge,
    );
    if let Some(bytes) = sample.resident_bytes {
        page.sample_integer("process_resident_memory_bytes", &[], bytes);
    }
    page.family(
        "process_cpu_seconds_total",
        "Total user and system CPU time spent in seconds.",
        MetricType::Counter,
    );
    if let Some(seconds) = sample.cpu_seconds {
        page.sample("process_cpu_seconds_total", &[], seconds);
    }
    page.family(
        "process_open_fds",
        "Number of open file descriptors.",
        MetricType::Gauge,
    );
    if let Some(count) = sample.open_fds {
        page.sample_integer("process_open_fds", &[], count);
    }
    page.family(
        "process_start_time_seconds",
        "Start time of the process since unix epoch in seconds.",
        MetricType::Gauge,
    );
    if let Some(seconds) = sample.start_time_seconds {
        page.sample("process_start_time_seconds", &[], seconds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "4242 (deckhand) S 1 4242 4242 0 -1 4194560 2406 0 0 0 \
                        150 25 0 0 20 0 12 0 987654 123456789 1234 18446744073709551615 \
                        1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n";

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let times = StatTimes {
            user_ticks: 150,
            system_ticks: 25,
            start_ticks: 987654,
        };
        assert_eq!(parse_stat(STAT), Some(times));
        // A command name with spaces and parentheses does not shift the fields.
        let odd_name = STAT.replace("(deckhand)", "(a) b (c))");
        assert_eq!(parse_stat(&odd_name), Some(times));
        for broken in [
            "",
            "4242 deckhand S 1",
            "4242 (deckhand) S 1 2 3",
            "4242 (deckhand)",
            &STAT.replace(" 150 ", " x "),
        ] {
            assert_eq!(parse_stat(broken), None, "{broken:?}");
        }
    }

    #[test]
    fn resident_memory_and_boot_time_are_read_from_their_lines() {
        let status = "Name:\tdeckhand\nVmPeak:\t 9999 kB\nVmRSS:\t    2048 kB\nThreads:\t12\n";
        assert_eq!(parse_resident_bytes(status), Some(2048 * 1024));
        assert_eq!(parse_resident_bytes("VmRSS: 12\n"), Some(12));
        assert_eq!(parse_resident_bytes("VmRSS: 12 parsecs\n"), None);
        assert_eq!(parse_resident_bytes("VmRSS: lots kB\n"), None);
        assert_eq!(parse_resident_bytes("Name: x\n"), None);
        assert_eq!(
            parse_resident_bytes("VmRSS: 18446744073709551615 kB\n"),
            None
        );
        let stat = "cpu  1 2 3\nintr 1 2 3\nbtime 1764633600\nprocesses 5\n";
        assert_eq!(parse_boot_time(stat), Some(1764633600));
        assert_eq!(parse_boot_time("btime soon\n"), None);
        assert_eq!(parse_boot_time("cpu 1\n"), None);
    }

    #[test]
    fn a_sample_of_made_up_files_and_of_this_process() {
        let directory = std::env::temp_dir().join(format!(
            "deckhand-process-metrics-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let process = directory.join("self");
        std::fs::create_dir_all(process.join("fd")).unwrap();
        for fd in ["0", "1", "2"] {
            std::fs::write(process.join("fd").join(fd), "").unwrap();
        }
        std::fs::write(process.join("stat"), STAT).unwrap();
        std::fs::write(process.join("status"), "VmRSS: 10 kB\n").unwrap();
        std::fs::write(directory.join("stat"), "btime 1000\n").unwrap();
        let files = ProcessFiles::new(&process, directory.join("stat"));
        assert_eq!(
            files.sample(),
            ProcessSample {
                resident_bytes: Some(10240),
                cpu_seconds: Some(1.75),
                open_fds: Some(3),
                start_time_seconds: Some(1000.0 + 9876.54),
            }
        );
        std::fs::remove_dir_all(&directory).unwrap();

        // Nothing there: every value is missing, and the page keeps the families.
        let missing = ProcessFiles::new(directory.join("nowhere"), directory.join("nothing"));
        assert_eq!(missing.sample(), ProcessSample::default());
        let mut page = Exposition::new();
        write_process_metrics(&mut page, &missing.sample());
        assert_eq!(page.as_str().lines().count(), 8);

        // This process, on Linux.
        let real = ProcessFiles::default().sample();
        assert!(real.resident_bytes.unwrap() > 0, "{real:?}");
        assert!(real.open_fds.unwrap() >= 3, "{real:?}");
        assert!(real.cpu_seconds.is_some(), "{real:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = real.start_time_seconds.unwrap();
        assert!(
            started <= now + 1.0 && started > now - 86_400.0,
            "{started} vs {now}"
        );
    }
}
