//! The `deckhand` binary: argument parsing, dispatch to a command, error → exit code.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--version") | Some("-V") => {
            println!("deckhand {}", deckhand::VERSION);
            ExitCode::SUCCESS
        }
        Some("validate") => deckhand::cli::validate::run(&args[1..]),
        _ => {
            eprintln!("usage: deckhand --version");
            ExitCode::from(2)
        }
    }
}
