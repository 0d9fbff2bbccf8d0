//! Fuzz target: container log streams, Docker's multiplexed framing and the lines cut from it,
//! and the CLI's reading of a streamed response. Whatever the bytes, no panic, and the bytes
//! of each stream come out the same however they were split (see
//! `deckhand::fuzzing::log_frames`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::log_frames(data));
