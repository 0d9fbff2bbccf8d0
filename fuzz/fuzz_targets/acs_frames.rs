//! Fuzz target: the ACS websocket's frames as deckhand reads them (tungstenite's framing,
//! deckhand's reading of texts and closes). Whatever the bytes, no panic, and the client's own
//! frames stay masked (see `deckhand::fuzzing::acs_frames`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::acs_frames(data));
