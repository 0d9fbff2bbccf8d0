//! The `deckhand` binary: argument parsing, dispatch to a command, error → exit code.

use std::process::ExitCode;

use deckhand::docker::DockerClient;
use deckhand::runtime::Timeouts;

/// `deckhand run` (placeholder until the agent is wired): connects to Docker, honouring
/// `DOCKER_HOST`, and reports the engine version and the API version negotiated.
fn run() -> ExitCode {
    let client = match DockerClient::from_env(Timeouts::default()) {
        Ok(client) => client,
        Err(error) => {
            eprintln!("deckhand: {error}");
            return ExitCode::from(1);
        }
    };
    match client.version() {
        Ok(version) => {
            println!(
                "Docker Engine {} at {}, API {} (negotiated; daemon supports up to {})",
                version.version,
                client.host().source,
                client.api_version(),
                version.api_version
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("deckhand: {error}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--version") | Some("-V") => {
            println!("deckhand {}", deckhand::VERSION);
            ExitCode::SUCCESS
        }
        Some("run") => run(),
        Some("validate") => deckhand::cli::validate::run(&args[1..]),
        _ => {
            eprintln!("usage: deckhand --version | deckhand run | deckhand validate FILE");
            ExitCode::from(2)
        }
    }
}
