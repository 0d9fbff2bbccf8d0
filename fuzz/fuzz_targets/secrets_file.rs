//! Fuzz target: the local secret store (`DECKHAND_SECRETS_FILE`) as the agent reads it. Whatever
//! the bytes, no panic, and no value in an error or in `Debug` (see
//! `deckhand::fuzzing::secrets_file`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::secrets_file(data));
