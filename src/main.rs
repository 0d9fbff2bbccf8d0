//! The `deckhand` binary: argument parsing, dispatch to a command, error → exit code.
//! Keep this a dispatch table: each command lives in `deckhand::cli` or `deckhand::agent`.

use deckhand::cli::args::{parse_args, verb_help, Command, USAGE};
use deckhand::cli::client::ApiClient;
use deckhand::cli::commands::{self, CliFailure, EXIT_USAGE};
use std::process::ExitCode;

/// glibc's malloc settings for `deckhand run`, applied by the program itself rather than left to
/// the unit file: with one managed-task thread per task, glibc's per-thread cache of freed
/// blocks (up to seven per size class, kept by every thread that ever freed one) costs about
/// 20 KiB per task, and each further malloc arena keeps freed memory of its own. Both are set
/// through `GLIBC_TUNABLES`, which glibc reads only when a program starts, so `run` starts itself
/// again (same process id, arguments and environment, plus the tunables) before doing anything.
/// A value the operator put in `GLIBC_TUNABLES` for either setting is kept as it is;
/// `DECKHAND_MALLOC_TUNING=off` leaves glibc's defaults.
mod allocator {
    /// The settings: no per-thread cache, one arena.
    const TUNABLES: [(&str, &str); 2] = [
        ("glibc.malloc.tcache_count", "0"),
        ("glibc.malloc.arena_max", "1"),
    ];
    /// Set in the restarted program, so that it does not start itself again.
    const APPLIED: &str = "DECKHAND_MALLOC_TUNING";

    /// `current` (the operator's `GLIBC_TUNABLES`) with deckhand's settings added where it has
    /// none of its own for them.
    pub(crate) fn merged_tunables(current: &str) -> String {
        let mut tunables: Vec<String> = current
            .split(':')
            .filter(|setting| !setting.is_empty())
            .map(str::to_string)
            .collect();
        for (name, value) in TUNABLES {
            let prefix = format!("{name}=");
            if !tunables.iter().any(|setting| setting.starts_with(&prefix)) {
                tunables.push(format!("{prefix}{value}"));
            }
        }
        tunables.join(":")
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    pub fn apply_settings() {
        use std::os::unix::process::CommandExt;
        if std::env::var_os(APPLIED).is_some() {
            return;
        }
        let current = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
        let mut args = std::env::args_os();
        let argv0 = args.next().unwrap_or_else(|| "deckhand".into());
        let error = std::process::Command::new("/proc/self/exe")
            .arg0(argv0)
            .args(args)
            .env("GLIBC_TUNABLES", merged_tunables(&current))
            .env(APPLIED, "applied")
            .exec();
        // Only reached when the program could not start itself again: run with the defaults.
        eprintln!("deckhand: running with glibc's default malloc settings ({error})");
    }

    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    pub fn apply_settings() {}
}

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
        Command::Run { config } => {
            allocator::apply_settings();
            return deckhand::agent::run(config.as_deref());
        }
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
        Command::Top { once, json } => client()
            .and_then(|client| deckhand::cli::terminal::top(&client, *once, *json, &mut stdout)),
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

#[cfg(test)]
mod tests {
    use super::allocator::merged_tunables;

    #[test]
    fn malloc_tunables_are_added_where_the_operator_set_none() {
        let table = [
            ("", "glibc.malloc.tcache_count=0:glibc.malloc.arena_max=1"),
            (
                "glibc.malloc.arena_max=4",
                "glibc.malloc.arena_max=4:glibc.malloc.tcache_count=0",
            ),
            (
                "glibc.malloc.tcache_count=7:glibc.malloc.arena_max=2",
                "glibc.malloc.tcache_count=7:glibc.malloc.arena_max=2",
            ),
            (
                "glibc.malloc.check=3:",
                "glibc.malloc.check=3:glibc.malloc.tcache_count=0:glibc.malloc.arena_max=1",
            ),
        ];
        for (operator, expected) in table {
            assert_eq!(merged_tunables(operator), expected, "{operator:?}");
        }
    }
}
