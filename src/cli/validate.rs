//! `deckhand validate FILE` (or `-` for stdin): check a task definition offline, exactly as the
//! agent would on submit, without needing a running agent or Docker.
//!
//! Exit 0 with a one-line summary on stdout and any warnings on stderr; exit 2 with every error on
//! stderr, one per line, each with its JSON path; exit 1 when the file cannot be read.

use crate::task::{parse_task_definition, start_order, ParsedDefinition};
use std::io::{Read, Write};
use std::process::ExitCode;

pub const USAGE: &str = "usage: deckhand validate FILE   (FILE may be - for standard input)";

/// Exit code for an invalid definition or a usage error.
pub const EXIT_INVALID: u8 = 2;
/// Exit code when the input cannot be read.
pub const EXIT_UNREADABLE: u8 = 1;

/// Runs the command; `args` are the arguments after `validate`.
pub fn run(args: &[String]) -> ExitCode {
    let [source] = args else {
        eprintln!("{USAGE}");
        return ExitCode::from(EXIT_INVALID);
    };
    let input = match read_input(source) {
        Ok(input) => input,
        Err(error) => {
            let name = if source == "-" {
                "standard input"
            } else {
                source
            };
            eprintln!("deckhand validate: cannot read {name}: {error}");
            return ExitCode::from(EXIT_UNREADABLE);
        }
    };
    // Write failures (a closed pipe) must not panic the way println! would.
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr().lock();
    match parse_task_definition(&input) {
        Ok(parsed) => {
            for warning in &parsed.warnings {
                let _ = writeln!(stderr, "warning: {warning}");
            }
            let _ = writeln!(stdout, "{}", summary(&parsed));
            ExitCode::SUCCESS
        }
        Err(errors) => {
            for error in &errors {
                let _ = writeln!(stderr, "error: {error}");
            }
            ExitCode::from(EXIT_INVALID)
        }
    }
}

fn read_input(source: &str) -> std::io::Result<Vec<u8>> {
    if source == "-" {
        let mut input = Vec::new();
        std::io::stdin().lock().read_to_end(&mut input)?;
        Ok(input)
    } else {
        std::fs::read(source)
    }
}

/// `valid: family "web" revision 3, 2 containers, start order: db, web`
pub fn summary(parsed: &ParsedDefinition) -> String {
    let definition = &parsed.definition;
    let revision = if definition.revision == 0 {
        String::new()
    } else {
        format!(" revision {}", definition.revision)
    };
    let count = definition.containers.len();
    let noun = if count == 1 {
        "container"
    } else {
        "containers"
    };
    format!(
        "valid: family {:?}{revision}, {count} {noun}, start order: {}",
        definition.family,
        start_order(definition).join(", ")
    )
}
