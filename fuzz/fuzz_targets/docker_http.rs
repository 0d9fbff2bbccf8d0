//! Fuzz target: Docker's HTTP framing: a response head, its body (length, chunked, until EOF) whole
//! and as an NDJSON stream of events and pull-progress lines, read in small pieces. Whatever the
//! bytes, no panic (see `deckhand::fuzzing::docker_http`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::docker_http(data));
