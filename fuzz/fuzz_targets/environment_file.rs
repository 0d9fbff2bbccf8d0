//! Fuzz target: an environment file (`environmentFiles`, from S3 or the local mirror) read with
//! ECS's line rules and merged under a container's environment (see
//! `deckhand::fuzzing::environment_file`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::environment_file(data));
