//! What `deckhand top` shows of the host and of each running container, read from the kernel's
//! files as the `/metrics` page reads them — never from Docker's `stats` call, which takes a
//! second or two per container and answers nothing while Docker is busy or away.
//!
//! Per container, from its cgroup (found as [`super::cgroup`] finds it): memory and CPU as
//! `/metrics` has them; the memory limit (`memory.max`; v1 `memory.limit_in_bytes`); the memory
//! `docker stats` calls used, the usage less the inactive page cache (`inactive_file` of
//! `memory.stat`; v1 `total_inactive_file`); the bytes read and written on block devices (v2
//! `io.stat`; v1 `blkio.throttle.io_service_bytes_recursive`); and, through the first process
//! in it (`cgroup.procs`), its network namespace's bytes received and sent on every interface but
//! `lo` (`/proc/<pid>/net/dev`), as `docker stats` counts them. For the host: its CPU time
//! (the `cpu` line of `/proc/stat`) and memory (`MemTotal`, `MemAvailable` of `/proc/meminfo`).
//!
//! Counters are totals since the container started; the client turns two readings into rates.
//! A file that cannot be read leaves its value out. The parsers are pure, never panic, and are
//! fuzzed (`metrics_files`).

use super::cgroup::{CgroupLayout, CgroupRoot};
use super::process::{read_small_file, CLOCK_TICKS_PER_SECOND, MAX_FILE_BYTES};
use std::path::PathBuf;

/// A v1 memory limit at or above this is no limit (the kernel writes `PAGE_COUNTER_MAX` pages,
/// about 2^63 bytes rounded down to a page).
const NO_LIMIT_AT_OR_ABOVE: u64 = 1 << 60;

/// Everything read of one running container; `None` where a file could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ContainerReading {
    pub cpu_seconds: Option<f64>,
    /// Usage less the inactive page cache, as `docker stats` shows it.
    pub memory_used_bytes: Option<u64>,
    /// `None` also when the container has no limit.
    pub memory_limit_bytes: Option<u64>,
    pub network_rx_bytes: Option<u64>,
    pub network_tx_bytes: Option<u64>,
    pub block_read_bytes: Option<u64>,
    pub block_write_bytes: Option<u64>,
}

/// The host's CPU and memory; `None` where a file could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct HostReading {
    /// CPUs listed in `/proc/stat`.
    pub cpus: Option<u64>,
    /// CPU time spent on anything but idling and waiting for I/O, summed over the CPUs.
    pub cpu_busy_seconds: Option<f64>,
    /// All CPU time, summed over the CPUs.
    pub cpu_total_seconds: Option<f64>,
    pub memory_total_bytes: Option<u64>,
    pub memory_available_bytes: Option<u64>,
}

/// The host's CPU times from `/proc/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostCpuTicks {
    pub busy: u64,
    pub total: u64,
    pub cpus: u64,
}

/// The `key value` line of a cgroup `memory.stat`.
pub fn parse_memory_stat_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        if words.next()? != key {
            return None;
        }
        let value = words.next()?.parse().ok()?;
        words.next().is_none().then_some(value)
    })
}

/// A memory limit file: v2 `max` (no limit) or a number; a v1 number near 2^63 is no limit.
pub fn parse_memory_limit(text: &str) -> Option<u64> {
    let limit: u64 = text.trim().parse().ok()?;
    (limit < NO_LIMIT_AT_OR_ABOVE).then_some(limit)
}

/// Bytes read and written over every device of a v2 `io.stat`
/// (`8:0 rbytes=1 wbytes=2 rios=3 …` per line).
pub fn parse_io_stat(text: &str) -> Option<(u64, u64)> {
    let mut read = 0u64;
    let mut written = 0u64;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if words.next().is_none() {
            continue;
        }
        for word in words {
            let (key, value) = word.split_once('=')?;
            match key {
                "rbytes" => read = read.saturating_add(value.parse().ok()?),
                "wbytes" => written = written.saturating_add(value.parse().ok()?),
                _ => {}
            }
        }
    }
    Some((read, written))
}

/// Bytes read and written over every device of a v1 `blkio…io_service_bytes…` file
/// (`8:0 Read 4096` per device and operation, then `Total N`).
pub fn parse_blkio_service_bytes(text: &str) -> Option<(u64, u64)> {
    let mut read = 0u64;
    let mut written = 0u64;
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [] | ["Total", _] => {}
            [_device, operation, value] => {
                let value: u64 = value.parse().ok()?;
                if operation.eq_ignore_ascii_case("read") {
                    read = read.saturating_add(value);
                } else if operation.eq_ignore_ascii_case("write") {
                    written = written.saturating_add(value);
                }
            }
            _ => return None,
        }
    }
    Some((read, written))
}

/// The first process id of a `cgroup.procs` file.
pub fn parse_first_pid(text: &str) -> Option<u32> {
    text.lines()
        .next()?
        .trim()
        .parse()
        .ok()
        .filter(|pid| *pid > 0)
}

/// Bytes received and sent over every interface but `lo` of a `/proc/<pid>/net/dev`
/// (two heading lines, then `name: rx_bytes rx_packets … tx_bytes …`, 16 numbers).
pub fn parse_net_dev(text: &str) -> Option<(u64, u64)> {
    let mut received = 0u64;
    let mut sent = 0u64;
    let mut interfaces = 0;
    for line in text.lines() {
        let Some((name, numbers)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim();
        if name.contains('|') {
            continue;
        }
        let numbers: Vec<&str> = numbers.split_whitespace().collect();
        if numbers.len() < 16 {
            return None;
        }
        interfaces += 1;
        if name == "lo" {
            continue;
        }
        received = received.saturating_add(numbers[0].parse().ok()?);
        sent = sent.saturating_add(numbers[8].parse().ok()?);
    }
    (interfaces > 0).then_some((received, sent))
}

/// The `cpu` line of `/proc/stat` (user nice system idle iowait irq softirq steal …, in
/// ticks) and the number of `cpuN` lines. Guest time is inside user time, so it is not added.
pub fn parse_host_cpu(stat: &str) -> Option<HostCpuTicks> {
    let mut totals: Option<(u64, u64)> = None;
    let mut cpus = 0u64;
    for line in stat.lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("cpu") => {
                let values: Vec<u64> = words
                    .take(8)
                    .map(|word| word.parse().ok())
                    .collect::<Option<Vec<u64>>>()?;
                if values.len() < 4 {
                    return None;
                }
                let total = values
                    .iter()
                    .try_fold(0u64, |sum, value| sum.checked_add(*value))?;
                let idle = values[3].saturating_add(values.get(4).copied().unwrap_or(0));
                totals = Some((total.saturating_sub(idle), total));
            }
            Some(word) if word.len() > 3 && word.starts_with("cpu") => cpus += 1,
            _ => {}
        }
    }
    let (busy, total) = totals?;
    Some(HostCpuTicks { busy, total, cpus })
}

/// A `Key:  N kB` line of `/proc/meminfo`, in bytes.
pub fn parse_meminfo_bytes(meminfo: &str, key: &str) -> Option<u64> {
    let line = meminfo.lines().find_map(|line| {
        let (name, rest) = line.split_once(':')?;
        (name == key).then_some(rest)
    })?;
    let mut words = line.split_whitespace();
    let amount: u64 = words.next()?.parse().ok()?;
    let per_unit = match words.next() {
        Some("kB") => 1024,
        None => 1,
        Some(_) => return None,
    };
    amount.checked_mul(per_unit)
}

/// Where the readings come from: the cgroup root, and `/proc` (made-up directories in tests).
#[derive(Debug)]
pub struct UsageSources {
    pub cgroups: CgroupRoot,
    pub proc_root: PathBuf,
}

impl Default for UsageSources {
    fn default() -> UsageSources {
        UsageSources {
            cgroups: CgroupRoot::default(),
            proc_root: PathBuf::from("/proc"),
        }
    }
}

impl UsageSources {
    /// Reads one running container. `own_network`: the container has a network namespace of
    /// its own or its task's (not the host's, whose traffic is not the container's).
    pub fn read_container(
        &self,
        layouts: &[CgroupLayout],
        docker_id: &str,
        own_network: bool,
    ) -> ContainerReading {
        let (usage, layout) = self.cgroups.container_usage_and_layout(layouts, docker_id);
        let Some(layout) = layout else {
            return ContainerReading::default();
        };
        let root = &self.cgroups.root;
        let read = |controller: &str, v1_name: &str, v2_name: &str| {
            read_small_file(
                &layout.container_file(root, docker_id, controller, v1_name, v2_name),
                MAX_FILE_BYTES,
            )
        };
        let inactive_key = if layout.is_v2() {
            "inactive_file"
        } else {
            "total_inactive_file"
        };
        let inactive = read("memory", "memory.stat", "memory.stat")
            .and_then(|text| parse_memory_stat_value(&text, inactive_key));
        let memory_used_bytes = usage.memory_bytes.map(|bytes| match inactive {
            Some(inactive) if inactive < bytes => bytes - inactive,
            _ => bytes,
        });
        let memory_limit_bytes = read("memory", "memory.limit_in_bytes", "memory.max")
            .as_deref()
            .and_then(parse_memory_limit);
        let block = if layout.is_v2() {
            read("", "", "io.stat").as_deref().and_then(parse_io_stat)
        } else {
            read("blkio", "blkio.throttle.io_service_bytes_recursive", "")
                .or_else(|| read("blkio", "blkio.throttle.io_service_bytes", ""))
                .as_deref()
                .and_then(parse_blkio_service_bytes)
        };
        let network = if own_network {
            read("memory", "cgroup.procs", "cgroup.procs")
                .as_deref()
                .and_then(parse_first_pid)
                .and_then(|pid| {
                    read_small_file(
                        &self.proc_root.join(pid.to_string()).join("net/dev"),
                        MAX_FILE_BYTES,
                    )
                })
                .as_deref()
                .and_then(parse_net_dev)
        } else {
            None
        };
        ContainerReading {
            cpu_seconds: usage.cpu_seconds,
            memory_used_bytes,
            memory_limit_bytes,
            network_rx_bytes: network.map(|(received, _)| received),
            network_tx_bytes: network.map(|(_, sent)| sent),
            block_read_bytes: block.map(|(read, _)| read),
            block_write_bytes: block.map(|(_, written)| written),
        }
    }

    /// Reads the host's CPU times and memory.
    pub fn read_host(&self) -> HostReading {
        let cpu = read_small_file(&self.proc_root.join("stat"), MAX_FILE_BYTES)
            .as_deref()
            .and_then(parse_host_cpu);
        let meminfo = read_small_file(&self.proc_root.join("meminfo"), MAX_FILE_BYTES);
        let meminfo = meminfo.as_deref().unwrap_or("");
        let ticks = CLOCK_TICKS_PER_SECOND as f64;
        HostReading {
            cpus: cpu.map(|cpu| cpu.cpus).filter(|cpus| *cpus > 0),
            cpu_busy_seconds: cpu.map(|cpu| cpu.busy as f64 / ticks),
            cpu_total_seconds: cpu.map(|cpu| cpu.total as f64 / ticks),
            memory_total_bytes: parse_meminfo_bytes(meminfo, "MemTotal"),
            memory_available_bytes: parse_meminfo_bytes(meminfo, "MemAvailable"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3e5b68f33a3bfaedcb28d466991f6efa79f5b83f256fdf8d307c8730dd3937e7";

    const NET_DEV: &str = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    3193      29    0    0    0     0          0         0     3193      29    0    0    0     0       0          0
  eth0: 5814      146    0    0    0     0          0         0   5792    74    0    0    0     0       0          0
  eth1:100 1 0 0 0 0 0 0 8 1 0 0 0 0 0 0
";

    #[test]
    fn the_files_parse_or_say_none() {
        let memory_stat = "cache 10\ninactive_file 4096\ntotal_inactive_file 8192\n";
        assert_eq!(
            parse_memory_stat_value(memory_stat, "inactive_file"),
            Some(4096)
        );
        assert_eq!(
            parse_memory_stat_value(memory_stat, "total_inactive_file"),
            Some(8192)
        );
        assert_eq!(parse_memory_stat_value(memory_stat, "active_file"), None);
        assert_eq!(
            parse_memory_stat_value("inactive_file x\n", "inactive_file"),
            None
        );

        assert_eq!(parse_memory_limit("max\n"), None);
        assert_eq!(parse_memory_limit("67108864\n"), Some(67108864));
        assert_eq!(parse_memory_limit("9223372036854771712\n"), None);
        assert_eq!(parse_memory_limit(""), None);

        let io_stat = "8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n\
                       8:16 rbytes=1 wbytes=2 rios=1 wios=1 dbytes=0 dios=0\n";
        assert_eq!(parse_io_stat(io_stat), Some((4097, 8194)));
        assert_eq!(parse_io_stat(""), Some((0, 0)));
        assert_eq!(parse_io_stat("8:0 rbytes=x\n"), None);
        assert_eq!(parse_io_stat("8:0 rbytes\n"), None);

        let blkio = "8:0 Read 4096\n8:0 Write 512\n8:0 Sync 0\n8:0 Async 4608\n\
                     8:0 Total 4608\n8:16 Read 4\n8:16 Write 1\nTotal 4613\n";
        assert_eq!(parse_blkio_service_bytes(blkio), Some((4100, 513)));
        assert_eq!(parse_blkio_service_bytes("Total 0\n"), Some((0, 0)));
        assert_eq!(parse_blkio_service_bytes("8:0 Read x\n"), None);
        assert_eq!(parse_blkio_service_bytes("8:0 Read 1 2\n"), None);

        assert_eq!(parse_first_pid("4242\n4243\n"), Some(4242));
        assert_eq!(parse_first_pid(""), None);
        assert_eq!(parse_first_pid("0\n"), None);
        assert_eq!(parse_first_pid("self\n"), None);

        assert_eq!(parse_net_dev(NET_DEV), Some((5914, 5800)));
        assert_eq!(parse_net_dev("Inter-| Receive\n face |bytes\n"), None);
        assert_eq!(parse_net_dev("eth0: 1 2 3\n"), None);

        let stat = "cpu  100 5 50 1000 20 1 2 3 0 0\ncpu0 50 2 25 500 10 0 1 1 0 0\n\
                    cpu1 50 3 25 500 10 1 1 2 0 0\nintr 1\nbtime 5\n";
        assert_eq!(
            parse_host_cpu(stat),
            Some(HostCpuTicks {
                busy: 161,
                total: 1181,
                cpus: 2
            })
        );
        assert_eq!(parse_host_cpu("cpu 1 2\n"), None);
        assert_eq!(parse_host_cpu("cpu 1 2 x 4\n"), None);
        assert_eq!(parse_host_cpu("intr 1\n"), None);

        let meminfo = "MemTotal:       16318480 kB\nMemFree: 1 kB\nMemAvailable:    1024 kB\n";
        assert_eq!(
            parse_meminfo_bytes(meminfo, "MemTotal"),
            Some(16318480 * 1024)
        );
        assert_eq!(
            parse_meminfo_bytes(meminfo, "MemAvailable"),
            Some(1024 * 1024)
        );
        assert_eq!(parse_meminfo_bytes(meminfo, "Mem"), None);
        assert_eq!(parse_meminfo_bytes("MemTotal: 1 MB\n", "MemTotal"), None);
    }

    #[test]
    fn a_container_and_the_host_from_made_up_files() {
        for layout in [CgroupLayout::V2Systemd, CgroupLayout::V1Cgroupfs] {
            let root = std::env::temp_dir()
                .join(format!("deckhand-usage-{}-{layout:?}", std::process::id()));
            let cgroups = root.join("cgroup");
            let proc_root = root.join("proc");
            let write = |path: PathBuf, text: &str| {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, text).unwrap();
            };
            write(layout.memory_file(&cgroups, ID), "1048576\n");
            write(
                layout.cpu_files(&cgroups, ID).remove(0),
                if layout.is_v2() {
                    "usage_usec 2500000\n"
                } else {
                    "2500000000\n"
                },
            );
            let file = |controller: &str, v1: &str, v2: &str| {
                layout.container_file(&cgroups, ID, controller, v1, v2)
            };
            write(
                file("memory", "memory.stat", "memory.stat"),
                "inactive_file 4096\ntotal_inactive_file 4096\n",
            );
            write(
                file("memory", "memory.limit_in_bytes", "memory.max"),
                "67108864\n",
            );
            write(file("memory", "cgroup.procs", "cgroup.procs"), "77\n");
            if layout.is_v2() {
                write(file("", "", "io.stat"), "8:0 rbytes=10 wbytes=20\n");
            } else {
                write(
                    file("blkio", "blkio.throttle.io_service_bytes_recursive", ""),
                    "8:0 Read 10\n8:0 Write 20\nTotal 30\n",
                );
            }
            write(proc_root.join("77/net/dev"), NET_DEV);
            write(
                proc_root.join("stat"),
                "cpu 100 0 100 800 0 0 0 0\ncpu0 100 0 100 800 0 0 0 0\n",
            );
            write(
                proc_root.join("meminfo"),
                "MemTotal: 2048 kB\nMemAvailable: 1024 kB\n",
            );
            let sources = UsageSources {
                cgroups: CgroupRoot::new(&cgroups),
                proc_root: proc_root.clone(),
            };
            let layouts = sources.cgroups.present_layouts();
            let reading = sources.read_container(&layouts, ID, true);
            assert_eq!(
                reading,
                ContainerReading {
                    cpu_seconds: Some(2.5),
                    memory_used_bytes: Some(1048576 - 4096),
                    memory_limit_bytes: Some(67108864),
                    network_rx_bytes: Some(5914),
                    network_tx_bytes: Some(5800),
                    block_read_bytes: Some(10),
                    block_write_bytes: Some(20),
                },
                "{layout:?}"
            );
            // The host's network namespace is not the container's.
            let host_mode = sources.read_container(&layouts, ID, false);
            assert_eq!(host_mode.network_rx_bytes, None);
            // Another container: nothing at all.
            assert_eq!(
                sources.read_container(&layouts, "abcdef", true),
                ContainerReading::default()
            );
            assert_eq!(
                sources.read_host(),
                HostReading {
                    cpus: Some(1),
                    cpu_busy_seconds: Some(2.0),
                    cpu_total_seconds: Some(10.0),
                    memory_total_bytes: Some(2048 * 1024),
                    memory_available_bytes: Some(1024 * 1024),
                }
            );
            std::fs::remove_dir_all(&root).unwrap();
        }
    }

    #[test]
    fn this_host_reads() {
        let host = UsageSources::default().read_host();
        assert!(host.cpus.unwrap() >= 1, "{host:?}");
        assert!(host.cpu_total_seconds.unwrap() > 0.0, "{host:?}");
        assert!(host.memory_total_bytes.unwrap() > 0, "{host:?}");
    }
}
