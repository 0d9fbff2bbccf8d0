//! The readings the telemetry session publishes, kept between publications: per running
//! container, its CPU in percent and its memory in MiB at each sample, as the ECS agent's stats
//! queue computes them (`agent/stats/queue.go`): CPU is the cgroup's CPU time since the
//! previous reading over the time between them and the host's CPU count
//! (`100 × Δcpu / cores / Δt`), memory is the usage less the reclaimable page cache, in whole
//! MiB. Pure: the caller reads the cgroups and the clock.
//!
//! Memory is bounded: a container keeps at most [`MAX_SAMPLES`] samples (the newest), and a
//! container that is no longer running is forgotten at the next reading. So while ECS is out of
//! reach nothing piles up, and the first publication after it is back carries the latest
//! readings.

use super::messages::StatsSet;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

/// Samples kept per container: four publications' worth at one sample every 10 s (the ECS
/// agent sizes its queue for four publish intervals).
pub const MAX_SAMPLES: usize = 8;
const BYTES_PER_MIB: u64 = 1024 * 1024;

/// Which container: the task's ARN, the container's name, its Docker id (a restarted container
/// is a new one, with no CPU reading to compare with).
pub type ContainerKey = (String, String, String);

/// One reading of a container's cgroup.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    pub cpu_seconds: Option<f64>,
    pub memory_bytes: Option<u64>,
}

#[derive(Debug, Default)]
struct Window {
    /// The last CPU reading and when it was taken.
    last_cpu: Option<(Instant, f64)>,
    cpu_percent: VecDeque<f64>,
    memory_mib: VecDeque<f64>,
}

fn push_bounded(samples: &mut VecDeque<f64>, sample: f64) {
    if samples.len() == MAX_SAMPLES {
        samples.pop_front();
    }
    samples.push_back(sample);
}

/// The windows of every running container.
#[derive(Debug)]
pub struct UsageWindows {
    cores: f64,
    windows: BTreeMap<ContainerKey, Window>,
}

impl UsageWindows {
    /// For a host with `cores` CPUs (at least 1 is assumed).
    pub fn new(cores: usize) -> UsageWindows {
        UsageWindows {
            cores: cores.max(1) as f64,
            windows: BTreeMap::new(),
        }
    }

    /// One sampling round: `readings` of the containers running now, taken at `at`. The
    /// containers not among them are forgotten.
    pub fn record(&mut self, readings: Vec<(ContainerKey, Reading)>, at: Instant) {
        let running: BTreeSet<&ContainerKey> =
            crate::sorting::set_of(readings.iter().map(|(key, _)| key));
        self.windows.retain(|key, _| running.contains(key));
        for (key, reading) in readings {
            let window = self.windows.entry(key).or_default();
            if let Some(memory) = reading.memory_bytes {
                push_bounded(&mut window.memory_mib, (memory / BYTES_PER_MIB) as f64);
            }
            if let Some(cpu) = reading.cpu_seconds {
                if let Some((then, previous)) = window.last_cpu {
                    let elapsed = at.saturating_duration_since(then).as_secs_f64();
                    // A counter that went back (a reset cgroup) gives no sample.
                    if elapsed > 0.0 && cpu >= previous {
                        push_bounded(
                            &mut window.cpu_percent,
                            100.0 * (cpu - previous) / self.cores / elapsed,
                        );
                    }
                }
                window.last_cpu = Some((at, cpu));
            }
        }
    }

    /// The CPU and memory sets of a container since the last call, which empties them; `None`
    /// until it has both a CPU sample (two readings) and a memory one.
    pub fn take(&mut self, key: &ContainerKey) -> Option<(StatsSet, StatsSet)> {
        let window = self.windows.get_mut(key)?;
        let cpu = StatsSet::of(window.cpu_percent.iter().copied())?;
        let memory = StatsSet::of(window.memory_mib.iter().copied())?;
        window.cpu_percent.clear();
        window.memory_mib.clear();
        Some((cpu, memory))
    }

    /// The containers with a window.
    pub fn containers(&self) -> impl Iterator<Item = &ContainerKey> {
        self.windows.keys()
    }

    /// Samples held, all containers together (for tests of the bound).
    pub fn samples_held(&self) -> usize {
        self.windows
            .values()
            .map(|window| window.cpu_percent.len() + window.memory_mib.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn key(name: &str) -> ContainerKey {
        ("arn:t".into(), name.into(), format!("{name}-id"))
    }

    fn reading(cpu: f64, memory: u64) -> Reading {
        Reading {
            cpu_seconds: Some(cpu),
            memory_bytes: Some(memory),
        }
    }

    #[test]
    fn cpu_is_percent_of_the_host_and_memory_whole_mib() {
        let start = Instant::now();
        let mut windows = UsageWindows::new(2);
        let at = |seconds: u64| start + Duration::from_secs(seconds);
        // (seconds, cpu seconds, memory bytes)
        let table = [
            (0, 1.0, 10 * BYTES_PER_MIB + 5),
            (10, 6.0, 12 * BYTES_PER_MIB),
            (20, 6.0, 11 * BYTES_PER_MIB),
        ];
        for (seconds, cpu, memory) in table {
            windows.record(vec![(key("app"), reading(cpu, memory))], at(seconds));
        }
        let (cpu, memory) = windows.take(&key("app")).expect("two readings");
        // 5 s of CPU in 10 s on 2 cores: 25 %; then idle.
        assert_eq!(
            cpu,
            StatsSet {
                min: 0.0,
                max: 25.0,
                sample_count: 2,
                sum: 25.0
            }
        );
        assert_eq!(
            memory,
            StatsSet {
                min: 10.0,
                max: 12.0,
                sample_count: 3,
                sum: 33.0
            }
        );
        assert_eq!(windows.take(&key("app")), None, "taken once");
        windows.record(vec![(key("app"), reading(8.0, BYTES_PER_MIB))], at(30));
        let (cpu, _) = windows.take(&key("app")).expect("the next window");
        assert_eq!(cpu.sum, 10.0, "compared with the reading before the take");
    }

    #[test]
    fn one_reading_has_no_cpu_sample_and_no_set() {
        let mut windows = UsageWindows::new(1);
        windows.record(vec![(key("app"), reading(1.0, 1))], Instant::now());
        assert_eq!(windows.take(&key("app")), None);
        assert_eq!(windows.take(&key("missing")), None);
    }

    #[test]
    fn a_counter_that_goes_back_or_no_time_passing_gives_no_sample() {
        let start = Instant::now();
        let mut windows = UsageWindows::new(1);
        windows.record(vec![(key("app"), reading(5.0, 1))], start);
        windows.record(
            vec![(key("app"), reading(1.0, 1))],
            start + Duration::from_secs(10),
        );
        windows.record(
            vec![(key("app"), reading(2.0, 1))],
            start + Duration::from_secs(10),
        );
        assert_eq!(windows.take(&key("app")), None);
        windows.record(
            vec![(key("app"), reading(3.0, 1))],
            start + Duration::from_secs(20),
        );
        let (cpu, _) = windows.take(&key("app")).expect("a sample");
        assert_eq!(cpu.sum, 10.0);
    }

    #[test]
    fn memory_stays_bounded_and_stopped_containers_are_forgotten() {
        let start = Instant::now();
        let mut windows = UsageWindows::new(1);
        for round in 0..1000u64 {
            windows.record(
                vec![
                    (key("a"), reading(round as f64, 1)),
                    (key("b"), reading(round as f64, 1)),
                ],
                start + Duration::from_secs(round * 10),
            );
        }
        assert_eq!(windows.samples_held(), 2 * 2 * MAX_SAMPLES);
        let (cpu, memory) = windows.take(&key("a")).expect("samples");
        assert_eq!((cpu.sample_count, memory.sample_count), (8, 8));
        windows.record(
            vec![(key("b"), reading(2000.0, 1))],
            start + Duration::from_secs(20_000),
        );
        assert_eq!(windows.containers().collect::<Vec<_>>(), [&key("b")]);
    }
}
