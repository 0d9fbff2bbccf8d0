//! Fuzz target: a shared AWS credentials file (INI). Whatever the bytes, no panic (see
//! `deckhand::fuzzing::ecs_credentials`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::ecs_credentials(data));
