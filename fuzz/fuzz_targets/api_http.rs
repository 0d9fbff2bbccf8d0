//! Fuzz target: the local API's and the introspection endpoint's HTTP framing and request handling
//! (routes, queries, task-definition bodies), and the CLI's reading of answers. Whatever the bytes,
//! no panic (see `deckhand::fuzzing::api_http`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::api_http(data));
