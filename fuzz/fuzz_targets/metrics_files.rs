//! Fuzz target: the files the `/metrics` page and `GET /v1/stats` read (`/proc/self/stat`,
//! `status`, `/proc/stat`, `/proc/meminfo`, `/proc/<pid>/net/dev`, cgroup memory, CPU and block
//! I/O files) and label values written on a sample line. Whatever the bytes,
//! no panic, and a label value reads back unchanged (see `deckhand::fuzzing::metrics_files`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::metrics_files(data));
