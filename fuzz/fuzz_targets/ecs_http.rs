//! Fuzz target: the ECS API's answers as the ECS client reads them, and error bodies. Whatever
//! the bytes, no panic (see `deckhand::fuzzing::ecs_http`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::ecs_http(data));
