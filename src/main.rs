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

    /// Starts the program again with the settings. Through `execve(2)` itself rather than
    /// `Command::exec`: that goes through glibc's `execvp`, which hands a file the kernel cannot
    /// run (ENOEXEC) to `/bin/sh` as a script, and under a user-mode emulator without
    /// `binfmt_misc` (`qemu-arm -L … deckhand run`) the kernel cannot run deckhand's own file,
    /// so the shell would take the process's place and end it ("Syntax error", exit 2). A failed
    /// `execve` returns, and the agent goes on with glibc's defaults after a warning.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    pub fn apply_settings() {
        use std::ffi::{CString, OsString};
        use std::os::unix::ffi::OsStringExt;
        match std::env::var_os(APPLIED) {
            Some(value) if value == "applied" => {
                keep_the_program_name();
                return;
            }
            Some(_) => return,
            None => {}
        }
        let current = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
        let c_string = |bytes: Vec<u8>| CString::new(bytes).ok();
        // Arguments and the environment cannot hold a NUL byte (they came through the kernel as
        // C strings), so `None` here does not happen; if it did, the defaults are kept.
        let arguments: Option<Vec<CString>> = std::env::args_os()
            .map(|argument| c_string(argument.into_vec()))
            .collect();
        let mut environment: Option<Vec<CString>> = std::env::vars_os()
            .filter(|(name, _)| name != "GLIBC_TUNABLES" && name != APPLIED)
            .map(|(name, value)| {
                let mut entry = name;
                entry.push("=");
                entry.push(value);
                c_string(entry.into_vec())
            })
            .collect();
        if let Some(environment) = environment.as_mut() {
            for (name, value) in [
                ("GLIBC_TUNABLES", merged_tunables(&current)),
                (APPLIED, "applied".to_string()),
            ] {
                let entry = OsString::from(format!("{name}={value}"));
                environment.extend(c_string(entry.into_vec()));
            }
        }
        let (Some(arguments), Some(environment)) = (arguments, environment) else {
            eprintln!(
                "deckhand: warning: running with glibc's default malloc settings (an argument \
                 or environment variable holds a NUL byte)"
            );
            return;
        };
        let pointers = |strings: &[CString]| -> Vec<*const libc::c_char> {
            strings
                .iter()
                .map(|string| string.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        };
        let argv = pointers(&arguments);
        let envp = pointers(&environment);
        // SAFETY: the path is a C string literal, and `argv` and `envp` are NULL-terminated
        // arrays of pointers into `arguments` and `environment`, which outlive the call. On
        // success the call does not return; on failure nothing was changed.
        unsafe {
            libc::execve(c"/proc/self/exe".as_ptr(), argv.as_ptr(), envp.as_ptr());
        }
        // Only reached when the program could not start itself again: run with the defaults.
        let error = std::io::Error::last_os_error();
        eprintln!(
            "deckhand: warning: running with glibc's default malloc settings: starting \
             /proc/self/exe again with them failed ({error})"
        );
    }

    /// Started again through `/proc/self/exe`, the kernel names the process `exe` (the file's
    /// name), which is what `ps`, `top` and `pgrep deckhand` would show; the name is set back to
    /// the program's own (the file name of `argv[0]`).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn keep_the_program_name() {
        use std::os::unix::ffi::OsStrExt;
        let Some(program) = std::env::args_os().next() else {
            return;
        };
        let Some(name) = std::path::Path::new(&program).file_name() else {
            return;
        };
        let Ok(name) = std::ffi::CString::new(name.as_bytes()) else {
            return;
        };
        // SAFETY: PR_SET_NAME reads a NUL-terminated string from the pointer (the kernel keeps
        // its first 15 bytes); `name` outlives the call. A failure leaves the name as it was.
        unsafe {
            libc::prctl(libc::PR_SET_NAME, name.as_ptr(), 0, 0, 0);
        }
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
