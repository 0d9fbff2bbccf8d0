//! Fuzz target: tasks.d: the watcher's state file, file names and contents, the diff and the source
//! marks. Whatever the bytes, no panic (see `deckhand::fuzzing::tasks_d`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::tasks_d(data));
