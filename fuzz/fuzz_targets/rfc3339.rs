//! Fuzz target: RFC 3339 times as Docker and deckhand write them: the parsers agree and deckhand's
//! own times read back exactly. Whatever the bytes, no panic (see `deckhand::fuzzing::rfc3339`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::rfc3339(data));
