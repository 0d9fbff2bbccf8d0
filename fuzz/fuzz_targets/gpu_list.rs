//! Fuzz target: the host's GPU discovery (`nvidia-smi -L`, the driver's `/proc` files, the
//! `DECKHAND_GPU_IDS` list). Whatever the bytes, no panic (see `deckhand::fuzzing::gpu_list`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::gpu_list(data));
