//! The fuzz entry point for what deckhand reads from S3 or its local mirror: environment files.

/// An environment file (S3 or the mirror): never a panic; every variable kept has a name and a
/// value, no `=` in its name, no NUL, and is named once; merged under an `environment`, the
/// environment's own values stay.
pub fn environment_file(data: &[u8]) {
    use crate::task::environment_files::{merge_environment_files, parse_environment_file};
    match parse_environment_file(data) {
        Ok(variables) => {
            let mut names = std::collections::HashSet::new();
            for (name, value) in &variables {
                assert!(!name.is_empty() && !value.is_empty(), "{name:?}={value:?}");
                assert!(!name.contains('=') && !name.contains('\0') && !value.contains('\0'));
                assert!(names.insert(name.clone()), "{name:?} twice");
            }
            let mut environment = vec!["KEEP=mine".to_string()];
            merge_environment_files(&mut environment, &[variables.clone(), variables]);
            assert_eq!(environment.first().map(String::as_str), Some("KEEP=mine"));
            assert_eq!(
                environment.len(),
                1 + names.len() - usize::from(names.contains("KEEP"))
            );
        }
        Err(message) => assert!(!message.is_empty()),
    }
}
