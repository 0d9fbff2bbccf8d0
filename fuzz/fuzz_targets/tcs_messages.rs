//! Fuzz target: the telemetry session's messages from TCS as the session reads them, and the
//! health messages built around outside text (see `deckhand::fuzzing::tcs_messages`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::tcs_messages(data));
