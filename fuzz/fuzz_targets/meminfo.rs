//! Fuzz target: `/proc/meminfo` as the agent reads it for the host's memory. Whatever the bytes,
//! no panic (see `deckhand::fuzzing::meminfo`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::meminfo(data));
