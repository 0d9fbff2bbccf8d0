//! Fuzz target: task IAM role credentials from ACS — an `IAMRoleCredentials` object, a payload
//! task's `roleCredentials`/`executionRoleCredentials`, an `IAMRoleCredentialsMessage` through
//! the ACS session: no panic, no secret quoted (see `deckhand::fuzzing::role_credentials`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| deckhand::fuzzing::role_credentials(data));
