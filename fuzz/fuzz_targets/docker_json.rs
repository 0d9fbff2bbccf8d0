//! Fuzz target: Docker's JSON answers: container inspect (and what the engine and restore read from
//! it), lists, image inspect, version, create/wait answers, events, progress lines and error
//! bodies. Whatever the bytes, no panic (see `deckhand::fuzzing::docker_json`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::docker_json(data));
