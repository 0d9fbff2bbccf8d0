//! Fuzz target: the files the state store reads at start: task checkpoints, the agent record and
//! the event log. Whatever the bytes, no panic (see `deckhand::fuzzing::state_files`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::state_files(data));
