//! Fuzz target: the configuration file (and environment lines after a NUL byte), for the system and
//! the per-user scope. Whatever the bytes, no panic (see `deckhand::fuzzing::config_file`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::config_file(data));
