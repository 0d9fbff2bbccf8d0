//! Fuzz target: `iptables -t nat -S` listings as the credentials redirect reads them. Whatever the
//! bytes, no panic (see `deckhand::fuzzing::iptables_listing`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::iptables_listing(data));
