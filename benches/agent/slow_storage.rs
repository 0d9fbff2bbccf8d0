//! Slow storage for one agent process: the bench compiles `slow_sync.c` (an LD_PRELOAD shim that
//! sleeps before every fsync and fdatasync, then makes the real call) with the system's C
//! compiler, and starts a third `deckhand run` with it preloaded and its state on this disk.
//! The P1 column and the P2 rows "slow storage" come from that agent: what deckhand's start and
//! exit paths cost where a sync takes as long as on an SD card or eMMC, measured rather than
//! estimated from a count.
//!
//! The shim keeps the number of syncs it delayed in a file ([`SyncCounter`]); the bench reads it
//! around each start and each exit, so the report shows how many syncs each path really made
//! through the shim — and a count of zero would show the shim did not apply.

use crate::agent_process::AgentProcess;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What each sync costs on the slow storage unless `DECKHAND_BENCH_SYNC_DELAY_MS` says otherwise
/// (an SD card's or eMMC's fsync of one block, order of magnitude).
pub const DEFAULT_SYNC_DELAY_MS: u64 = 20;

/// The delay the shim adds to each sync in this run.
pub fn sync_delay_ms() -> Result<u64, String> {
    match std::env::var("DECKHAND_BENCH_SYNC_DELAY_MS") {
        Ok(value) => value
            .trim()
            .parse()
            .map_err(|error| format!("DECKHAND_BENCH_SYNC_DELAY_MS={value:?}: {error}")),
        Err(_) => Ok(DEFAULT_SYNC_DELAY_MS),
    }
}

/// Compiles the shim next to the bench's own build (`<target>/release/libslowsync.so`): one
/// `cc` call, under a second, every run, so the library always matches the source.
fn build_shim() -> Result<PathBuf, String> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("benches")
        .join("agent")
        .join("slow_sync.c");
    let executable = std::env::current_exe()
        .map_err(|error| format!("cannot find the bench executable: {error}"))?;
    // The bench runs from <target>/release/deps/; the library goes to <target>/release/.
    let directory = executable
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| format!("{} has no grandparent directory", executable.display()))?;
    let library = directory.join("libslowsync.so");
    let output = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&library)
        .arg(&source)
        .arg("-ldl")
        .output()
        .map_err(|error| {
            format!(
                "cannot run cc to build the slow-storage shim (bench/run.sh installs gcc): {error}"
            )
        })?;
    if !output.status.success() {
        return Err(format!(
            "cc could not build {}: {}",
            source.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(library)
}

/// The file where the shim keeps its count of delayed syncs.
pub struct SyncCounter {
    path: PathBuf,
}

impl SyncCounter {
    /// The syncs the agent made through the shim so far.
    pub fn read(&self) -> Result<u64, String> {
        let text = std::fs::read_to_string(&self.path)
            .map_err(|error| format!("cannot read {}: {error}", self.path.display()))?;
        let text = text.trim();
        if text.is_empty() {
            return Ok(0);
        }
        text.parse()
            .map_err(|error| format!("{} holds {text:?}: {error}", self.path.display()))
    }
}

/// Starts `deckhand run` with its state under `directory` (on this disk) and the shim preloaded,
/// each sync delayed by `delay_ms`. Fails when the shim did not load: the loader only warns
/// about a preload it cannot find, and the column would then be the normal disk's.
pub fn start_agent(
    directory: &Path,
    cluster: &str,
    delay_ms: u64,
) -> Result<(AgentProcess, SyncCounter), String> {
    let library = build_shim()?;
    std::fs::create_dir_all(directory)
        .map_err(|error| format!("cannot create {}: {error}", directory.display()))?;
    let counter = SyncCounter {
        path: directory.join("syncs-delayed.count"),
    };
    let library = library.to_string_lossy().into_owned();
    let delay = delay_ms.to_string();
    let count_file = counter.path.to_string_lossy().into_owned();
    let agent = AgentProcess::start(
        directory,
        cluster,
        &[
            ("LD_PRELOAD", library.as_str()),
            ("DECKHAND_BENCH_SYNC_DELAY_MS", delay.as_str()),
            ("DECKHAND_BENCH_SYNC_COUNT_FILE", count_file.as_str()),
        ],
    )?;
    // The shim's constructor creates the file when it loads; opening the state store syncs.
    let synced_at_start = counter.read().map_err(|error| {
        format!("the slow-storage shim did not load into deckhand run ({error})")
    })?;
    eprintln!(
        "  slow storage: {library} preloaded, each sync +{delay_ms} ms; {synced_at_start} syncs delayed during start-up"
    );
    Ok((agent, counter))
}
