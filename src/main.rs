//! The `deckhand` binary: argument parsing, dispatch to a command, error → exit code.
//! Keep this a dispatch table: each command lives in `deckhand::cli` or `deckhand::agent`.

use deckhand::cli::args::{parse_args, verb_help, Command, USAGE};
use deckhand::cli::client::ApiClient;
use deckhand::cli::commands::{self, CliFailure, EXIT_USAGE};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `validate` checks its own arguments (and prints its own usage); help still goes below.
    if args.first().is_some_and(|verb| verb == "validate")
        && !args.iter().any(|arg| arg == "-h" || arg == "--help")
    {
        return deckhand::cli::validate::run(&args[1..]);
    }
    let invocation = match parse_args(&args) {
        Ok(invocation) => invocation,
        Err(error) => {
            eprintln!("deckhand: {error}\nRun `deckhand --help` for usage.");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let mut stdout = std::io::stdout();
    let client = || -> Result<ApiClient, CliFailure> {
        let socket = commands::resolve_socket(invocation.socket.as_deref())?;
        Ok(ApiClient::new(&socket))
    };
    let result = match &invocation.command {
        Command::Version => {
            println!("deckhand {}", deckhand::VERSION);
            Ok(())
        }
        Command::Help { verb: None } => {
            println!("{USAGE}");
            Ok(())
        }
        Command::Help { verb: Some(verb) } => match verb_help(verb) {
            Some(help) => {
                println!("{help}");
                Ok(())
            }
            None => Err(CliFailure::Invalid(vec![format!(
                "no command {verb:?}; run `deckhand --help` for the list"
            )])),
        },
        Command::Run { config } => return deckhand::agent::run(config.as_deref()),
        Command::Validate { file } => {
            return deckhand::cli::validate::run(std::slice::from_ref(file));
        }
        Command::Convert { file } => return deckhand::cli::validate::convert(file),
        Command::Submit { file } => {
            client().and_then(|client| commands::submit(&client, file, &mut stdout))
        }
        Command::Stop { task, wait } => {
            client().and_then(|client| commands::stop(&client, task, *wait, &mut stdout))
        }
        Command::Ps { all, json } => {
            client().and_then(|client| commands::ps(&client, *all, *json, &mut stdout))
        }
        Command::Inspect { task } => {
            client().and_then(|client| commands::inspect(&client, task, &mut stdout))
        }
        Command::Events { follow, since } => {
            client().and_then(|client| commands::events(&client, *follow, *since, &mut stdout))
        }
        Command::Logs {
            task,
            container,
            follow,
            tail,
            since,
            timestamps,
        } => client().and_then(|client| {
            let request = commands::LogsRequest {
                task,
                container: container.as_deref(),
                follow: *follow,
                tail: *tail,
                since: since.as_deref(),
                timestamps: *timestamps,
            };
            commands::logs(&client, &request, &mut stdout, &mut std::io::stderr())
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            for message in failure.messages() {
                if failure.is_bare() {
                    eprintln!("{message}");
                } else {
                    eprintln!("deckhand: {message}");
                }
            }
            ExitCode::from(failure.exit_code())
        }
    }
}
