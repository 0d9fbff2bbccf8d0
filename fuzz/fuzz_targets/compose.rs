//! Fuzz target: Compose files (YAML, interpolation, `.env`, ports, durations, shell words) as
//! `deckhand convert` reads them. Whatever the bytes, no panic, and what converts validates (see
//! `deckhand::fuzzing::compose`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::compose(data));
