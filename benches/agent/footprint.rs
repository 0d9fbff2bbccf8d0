//! P3 footprint and P5 idle CPU of a real `deckhand run`, read from `/proc`: resident set (RSS)
//! and proportional set (PSS, shared pages divided among their users) idle, with 10 and with 100
//! running one-container tasks; thread count; CPU seconds over an idle window with 100 tasks;
//! and the size of the stripped release binary.

use crate::agent_process::AgentProcess;
use crate::workload::{task_definition_json, Shape};
use std::process::Command;
use std::time::{Duration, Instant};

const TASK_DEADLINE: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    pub rss_bytes: u64,
    pub pss_bytes: u64,
    pub threads: u64,
    /// Resident anonymous memory (heap, stacks) and file pages (the binary's and libc's code).
    pub rss_anon_bytes: u64,
    pub rss_file_bytes: u64,
    /// Resident bytes of thread stacks: anonymous mappings of exactly Rust's default 2 MiB
    /// thread stack (glibc keeps a few stacks of exited threads for reuse; they count too).
    pub stack_rss_bytes: u64,
    pub stacks: u64,
}

const DEFAULT_THREAD_STACK: u64 = 2 * 1024 * 1024;

/// (count, resident bytes) of the thread stacks in `/proc/<pid>/smaps`.
fn thread_stacks(smaps: &str) -> (u64, u64) {
    let mut stacks = 0;
    let mut resident = 0;
    let mut in_stack = false;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or("");
        if let Some((start, end)) = first.split_once('-') {
            if let (Ok(start), Ok(end)) =
                (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16))
            {
                let permissions = fields.next().unwrap_or("");
                // address perms offset device inode [path]: no path means anonymous.
                let anonymous = line.split_whitespace().count() == 5;
                in_stack =
                    anonymous && permissions == "rw-p" && end - start == DEFAULT_THREAD_STACK;
                stacks += u64::from(in_stack);
                continue;
            }
        }
        if in_stack && first == "Rss:" {
            resident += kib_field(line, "Rss").unwrap_or(0);
        }
    }
    (stacks, resident)
}

/// A `Key:   123 kB` line of a `/proc` status-like file, in bytes.
fn kib_field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse::<u64>().ok())
        .map(|kib| kib * 1024)
}

pub fn memory_of(pid: u32) -> Result<Memory, String> {
    let read = |file: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/{file}"))
            .map_err(|error| format!("cannot read /proc/{pid}/{file}: {error}"))
    };
    let status = read("status")?;
    let rollup = read("smaps_rollup")?;
    let (stacks, stack_rss_bytes) = thread_stacks(&read("smaps")?);
    let field = |text: &str, key: &str| {
        kib_field(text, key).ok_or_else(|| format!("/proc/{pid} lacks {key}"))
    };
    Ok(Memory {
        rss_bytes: field(&status, "VmRSS")?,
        pss_bytes: field(&rollup, "Pss")?,
        threads: status
            .lines()
            .find_map(|line| line.strip_prefix("Threads:"))
            .and_then(|count| count.trim().parse().ok())
            .ok_or_else(|| format!("/proc/{pid}/status lacks Threads"))?,
        rss_anon_bytes: field(&status, "RssAnon")?,
        rss_file_bytes: field(&status, "RssFile")?,
        stack_rss_bytes,
        stacks,
    })
}

/// Peak resident set of a process (`VmHWM`).
pub fn peak_rss_of(pid: u32) -> Result<u64, String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|error| format!("cannot read /proc/{pid}/status: {error}"))?;
    kib_field(&status, "VmHWM").ok_or_else(|| format!("/proc/{pid}/status lacks VmHWM"))
}

fn clock_ticks_per_second() -> Result<f64, String> {
    let output = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .map_err(|error| format!("cannot run getconf: {error}"))?;
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .map_err(|error| format!("getconf CLK_TCK: {error}"))
}

/// User + system CPU time of every thread of a process so far.
pub fn cpu_time_of(pid: u32) -> Result<Duration, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|error| format!("cannot read /proc/{pid}/stat: {error}"))?;
    // The command name is in parentheses and may hold spaces: count fields after the last ')'.
    let after_name = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| format!("/proc/{pid}/stat has no command name"))?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let ticks = |index: usize| -> Result<f64, String> {
        fields
            .get(index)
            .and_then(|value| value.parse::<f64>().ok())
            .ok_or_else(|| format!("/proc/{pid}/stat field {} is unreadable", index + 3))
    };
    let per_second = clock_ticks_per_second()?;
    Ok(Duration::from_secs_f64(
        (ticks(11)? + ticks(12)?) / per_second,
    ))
}

#[derive(Debug, Clone, Default)]
pub struct FootprintFigures {
    pub idle: Memory,
    pub with_10: Memory,
    pub with_100: Memory,
    pub peak_rss_bytes: u64,
    /// Time to get 100 tasks RUNNING (submitted 90 at once after the first 10).
    pub submit_100: Duration,
    pub idle_cpu: Duration,
    pub idle_window: Duration,
    pub binary_bytes: u64,
    pub shutdown: Duration,
}

/// Submits `count` one-container tasks at once and waits until each reports RUNNING.
fn run_tasks(
    agent: &mut AgentProcess,
    image: &str,
    run_id: &str,
    first: usize,
    count: usize,
) -> Result<Vec<String>, String> {
    let shape = Shape {
        containers: 1,
        chain: false,
    };
    let mut ids = Vec::new();
    for index in first..first + count {
        let definition = task_definition_json(&format!("bench-idle-{index}"), image, shape, run_id);
        ids.push(agent.submit(&definition)?.0);
    }
    for id in &ids {
        agent.wait_task_status(id, "RUNNING", TASK_DEADLINE)?;
    }
    Ok(ids)
}

/// P3 and P5 on a fresh agent; stops every task it started before returning.
pub fn measure_footprint(
    agent: &mut AgentProcess,
    image: &str,
    run_id: &str,
    idle_window: Duration,
) -> Result<FootprintFigures, String> {
    let pid = agent.pid();
    let mut figures = FootprintFigures {
        idle_window,
        binary_bytes: std::fs::metadata(env!("CARGO_BIN_EXE_deckhand"))
            .map_err(|error| format!("cannot stat the deckhand binary: {error}"))?
            .len(),
        ..FootprintFigures::default()
    };
    figures.idle = memory_of(pid)?;
    let mut ids = run_tasks(agent, image, run_id, 0, 10)?;
    figures.with_10 = memory_of(pid)?;
    let started = Instant::now();
    ids.extend(run_tasks(agent, image, run_id, 10, 90)?);
    figures.submit_100 = started.elapsed();
    figures.with_100 = memory_of(pid)?;
    if !idle_window.is_zero() {
        let cpu_before = cpu_time_of(pid)?;
        // The idle window itself is what is measured: nothing is waited for, the agent runs.
        std::thread::sleep(idle_window);
        figures.idle_cpu = cpu_time_of(pid)?.saturating_sub(cpu_before);
    }
    figures.peak_rss_bytes = peak_rss_of(pid)?;
    for id in &ids {
        agent.stop(id)?;
    }
    for id in &ids {
        agent.wait_task_status(id, "STOPPED", TASK_DEADLINE)?;
    }
    figures.shutdown = agent.terminate(Duration::from_secs(10))?;
    Ok(figures)
}
