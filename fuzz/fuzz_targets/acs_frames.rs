//! Fuzz target: the ACS websocket's frames as the client reads them. Whatever the bytes, no
//! panic, and the client's own frames stay well formed (see `deckhand::fuzzing::acs_frames`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::acs_frames(data));
