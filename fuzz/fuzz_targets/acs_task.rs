//! Fuzz target: ECS control-plane tasks (an ACS PayloadMessage's `tasks[]`) and ACS websocket
//! frames. Whatever the bytes, no panic, and what maps is a valid definition (see
//! `deckhand::fuzzing::acs_task`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::acs_task(data));
