//! Fuzz target: task-definition parsing and validation must never panic, whatever the bytes, and
//! what they accept must be self-consistent (a start order naming every container once, a FireLens
//! router's configuration that can be generated, every error carrying a path).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match deckhand::task::parse_task_definition(data) {
        Ok(parsed) => {
            let order = deckhand::task::start_order(&parsed.definition);
            assert_eq!(order.len(), parsed.definition.containers.len());
            let mut sorted = order.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(
                sorted.len(),
                order.len(),
                "start order names a container twice"
            );
            let task = deckhand::task::Task::new("0".repeat(32), "fuzz", parsed.definition, 1, 0);
            if let Err(error) = deckhand::task::firelens::render::render_config(&task, "fuzz") {
                panic!("accepted, but its FireLens configuration fails: {error}");
            }
        }
        Err(errors) => {
            assert!(!errors.is_empty());
            assert!(errors.iter().all(|error| !error.path.is_empty()));
        }
    }
});
