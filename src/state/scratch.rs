//! Scratch directories for the crate's unit tests (compiled for tests only): unique per process
//! and per call, so tests may run in parallel and side by side with other test binaries, and
//! removed when dropped, so a failing test leaves nothing behind either.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) struct ScratchDir {
    pub(crate) path: PathBuf,
}

impl ScratchDir {
    /// A fresh, empty directory `<temp>/<label>-<pid>-<n>`.
    pub(crate) fn new(label: &str) -> ScratchDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "{label}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|error| panic!("cannot create {}: {error}", path.display()));
        ScratchDir { path }
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
