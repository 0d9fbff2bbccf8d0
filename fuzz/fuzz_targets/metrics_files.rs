//! Fuzz target: the files the `/metrics` page reads (`/proc/self/stat`, `status`, `/proc/stat`,
//! cgroup memory and CPU files) and label values written on a sample line. Whatever the bytes,
//! no panic, and a label value reads back unchanged (see `deckhand::fuzzing::metrics_files`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::metrics_files(data));
