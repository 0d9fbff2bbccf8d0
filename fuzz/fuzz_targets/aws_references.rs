//! Fuzz target: SSM and Secrets Manager `valueFrom`, ECR image references and tokens, regions
//! and session names (see `deckhand::fuzzing::aws_references`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::aws_references(data));
