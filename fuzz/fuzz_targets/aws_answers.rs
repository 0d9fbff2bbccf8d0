//! Fuzz target: the answers of STS (XML), SSM, Secrets Manager and ECR (JSON) and their error
//! bodies (see `deckhand::fuzzing::aws_answers`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::aws_answers(data));
