//! What this host offers tasks, read from the kernel: its total memory (`MemTotal` of
//! `/proc/meminfo`, in MiB rounded down, as the ECS agent reads it) and its CPU cores. The agent
//! turns these, less `ECS_RESERVED_MEMORY`, into the engine's host capacity (docs/ENGINE.md
//! §9a). The parser is pure; `/proc/meminfo` is outside bytes, so it never panics on them (a
//! fuzz target checks it). Besides: the host's GPUs (`gpus`) and the redirect of
//! `169.254.170.2:80` to the task metadata endpoint (`credentials_redirect`).

pub mod credentials_redirect;
pub mod gpus;

/// `/proc/meminfo`'s `MemTotal` in MiB, rounded down; `None` when the text has no readable line.
/// The kernel writes `MemTotal:       16318480 kB` (kB meaning KiB).
pub fn mem_total_mib(meminfo: &str) -> Option<u64> {
    let line = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))?;
    let mut words = line.split_whitespace();
    let amount: u64 = words.next()?.parse().ok()?;
    let per_unit: u64 = match words.next() {
        Some("kB") | Some("KiB") | Some("kiB") => 1024,
        Some("B") | None => 1,
        Some("MB") | Some("MiB") => 1024 * 1024,
        Some(_) => return None,
    };
    if words.next().is_some() {
        return None;
    }
    Some(amount.checked_mul(per_unit)? / (1024 * 1024))
}

/// This host's `MemTotal` in MiB, or why it could not be read.
pub fn read_mem_total_mib() -> Result<u64, String> {
    let text = std::fs::read_to_string("/proc/meminfo")
        .map_err(|error| format!("cannot read /proc/meminfo: {error}"))?;
    mem_total_mib(&text).ok_or_else(|| "no MemTotal line in /proc/meminfo".to_string())
}

/// The CPU cores deckhand may use (the process's affinity, as Go's `runtime.NumCPU`, which the
/// ECS agent reads); 1 when the system does not say.
pub fn cpu_cores() -> u64 {
    std::thread::available_parallelism()
        .map(|cores| cores.get() as u64)
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_of_meminfo_texts() {
        let table: &[(&str, Option<u64>)] = &[
            (
                "MemTotal:       16318480 kB\nMemFree:         1234 kB\n",
                Some(15936),
            ),
            ("MemFree: 1 kB\nMemTotal: 2097152 kB\n", Some(2048)),
            // Rounded down.
            ("MemTotal: 2097151 kB\n", Some(2047)),
            ("MemTotal: 1023 kB\n", Some(0)),
            ("MemTotal:\n", None),
            ("MemTotal: many kB\n", None),
            ("MemTotal: 12 parsecs\n", None),
            ("MemTotal: 12 kB extra\n", None),
            ("MemTotal: 99999999999999999999 kB\n", None),
            ("MemTotal: 18446744073709551615 kB\n", None),
            ("", None),
            ("Memtotal: 1024 kB", None),
        ];
        for (text, expected) in table {
            assert_eq!(mem_total_mib(text), *expected, "{text:?}");
        }
    }

    #[test]
    fn this_host_has_memory_and_cores() {
        assert!(read_mem_total_mib().is_ok_and(|mib| mib > 0));
        assert!(cpu_cores() >= 1);
    }
}
