//! Fuzz target: a proxy's answer to `CONNECT` and the proxy variables (`NO_PROXY`,
//! `HTTPS_PROXY`). Whatever the bytes, no panic, and the tunnel opener reads no further than
//! the answer's head (see `deckhand::fuzzing::proxy_answers`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::proxy_answers(data));
