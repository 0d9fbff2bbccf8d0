//! Command-line parsing, by hand (no argument crate): the verbs and the help texts. Which flags
//! a verb takes, and which take a value, come from `super::command_table`, which the shell
//! completions and the man page are also written from. Pure: takes the arguments, returns what
//! to do or a usage error (exit code 2).

use super::command_table::{self, spellings};

use std::fmt;
use std::path::PathBuf;

/// What the user asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Run the agent in the foreground.
    Run {
        config: Option<PathBuf>,
    },
    /// Submit a task definition (`-` = stdin).
    Submit {
        file: String,
    },
    Stop {
        task: String,
        wait: bool,
    },
    Ps {
        all: bool,
        json: bool,
    },
    /// The live view (`once`: one frame; `json`: one reading as JSON).
    Top {
        once: bool,
        json: bool,
    },
    Inspect {
        task: String,
    },
    Events {
        follow: bool,
        since: u64,
    },
    /// A task's container output.
    Logs {
        task: String,
        /// One container's name; `None`: every container's lines, prefixed.
        container: Option<String>,
        follow: bool,
        /// Only the last this many lines of each container.
        tail: Option<u64>,
        /// A duration back from now, an RFC 3339 time or Unix seconds (checked here, turned
        /// into a time by the agent).
        since: Option<String>,
        timestamps: bool,
    },
    /// Validate a task definition offline (`-` = stdin).
    Validate {
        file: String,
    },
    /// Print the ECS task definition a Compose file becomes (`-` = stdin).
    Convert {
        file: String,
    },
    Version,
    /// General help, or one verb's.
    Help {
        verb: Option<String>,
    },
}

/// A parsed command line: the command plus the global `--socket`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub socket: Option<PathBuf>,
    pub command: Command,
}

/// A command line that cannot be understood; the message says what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

pub const VERBS: [&str; 11] = [
    "run", "submit", "stop", "ps", "top", "inspect", "events", "logs", "validate", "convert",
    "help",
];

pub const USAGE: &str = "\
deckhand — runs Amazon ECS task definitions on this host through Docker

Usage: deckhand [--socket PATH] <command> [arguments]

Commands:
  run [--config PATH]        run the agent in the foreground
  submit FILE                start the task in FILE (- = stdin); prints its id
  stop TASK [--wait]         stop a task; --wait returns once it is STOPPED
  ps [--all] [--json]        list the tasks not stopped (--all: stopped ones too)
  top [--once] [--json]      a live view of the tasks and their resource use
  inspect TASK               show a task as JSON (ECS task metadata v4 shape)
  events [--follow] [--since N]
                             print state changes, one JSON object per line
  logs TASK [CONTAINER] [--follow] [--tail N] [--since DURATION|TIME] [--timestamps]
                             print a task's container output (NAME | line)
  validate FILE              check a task definition offline (- = stdin)
  convert FILE               print the ECS task definition a Compose file becomes
  help [COMMAND]             show help for a command

TASK is a task id, a unique prefix of it, or its ARN.
--socket PATH (or DECKHAND_API_SOCKET) chooses the agent's API socket. Without it, root uses
/run/deckhand/api.sock; other users use their own agent's $XDG_RUNTIME_DIR/deckhand/api.sock
(or ~/.local/state/deckhand/api.sock without XDG_RUNTIME_DIR) and, if no agent answers there,
the system agent's /run/deckhand/api.sock (members of group deckhand may use it).

Exit codes: 0 ok, 1 runtime failure (e.g. the agent is unreachable), 2 usage or invalid
input, 78 configuration error.
Options: -h, --help  this text;  -V, --version  print the version";

/// The help text of one verb.
pub fn verb_help(verb: &str) -> Option<&'static str> {
    Some(match verb {
        "run" => {
            "\
Usage: deckhand run [--config PATH]

Runs the agent in the foreground (logs on stderr). It reads /etc/deckhand/deckhand.conf (or
PATH), then the environment, serves the local API on its socket and the ECS introspection
endpoint (127.0.0.1:51678), and keeps the tasks of DECKHAND_TASKS_DIR (/etc/deckhand/tasks.d)
running: one task per *.json file (and per Compose file: *.yaml, *.yml, or a directory holding
compose.yaml), started again (after a pause of 10 s doubling to 5 min) when it stops by itself. Run by a user other than root, it uses per-user places:
$XDG_CONFIG_HOME/deckhand/deckhand.conf and tasks.d, $XDG_STATE_HOME/deckhand for its state,
$XDG_RUNTIME_DIR/deckhand/api.sock. SIGTERM or SIGINT ends it within seconds and leaves the
containers running (the next start adopts them); SIGHUP rescans tasks.d.
Exit code 78: the configuration is invalid (the message names the key)."
        }
        "submit" => {
            "\
Usage: deckhand submit FILE

Validates the ECS task definition in FILE (- reads stdin), submits it to the agent and prints
the new task's id. An invalid definition prints every error on stderr, creates nothing and
exits 2. FILE may be a Compose file (named *.yaml or *.yml, or not starting with {): it is
converted first, as `deckhand convert` does."
        }
        "stop" => {
            "\
Usage: deckhand stop TASK [--wait]

Asks the agent to stop TASK (id, unique id prefix or ARN), prints its full id and exits 0 once
the stop is accepted. With --wait it returns only when the task is STOPPED. The containers stop
in reverse dependency order. An unknown TASK, or a prefix of several tasks (they are listed),
exits 2."
        }
        "ps" => {
            "\
Usage: deckhand ps [--all] [--json]

Lists the tasks that are not stopped, newest first: TASK ID, FAMILY:REVISION, DESIRED, KNOWN,
CONTAINERS (running/total), HEALTH (HEALTHY, UNHEALTHY or UNKNOWN from the essential
containers' health checks; - without one), RESTARTS (of its containers, by their restart
policy), AGE (since the agent accepted the task: 45s, 3m20s, 5h12m, 3d4h).
--all also lists the stopped tasks the agent still holds (until their cleanup, 3 h after they
stopped by default); --json prints the inspect objects as a JSON array instead."
        }
        "top" => {
            "\
Usage: deckhand top [--once] [--json]

Shows, live (every 2 s, q quits), the tasks that are not stopped and, indented, their
containers: STATUS, HEALTH, RST (restarts), CPU% (of one core, as docker stats counts it),
MEM/LIMIT (used, as docker stats counts it, and the limit), NET RX/TX and BLOCK R/W (bytes
since the container started) and UP (since it started), the busiest task first; above them
the host's CPUs, CPU (of all cores) and memory, and the agent's own RSS and CPU. The figures
come from the agent (GET /v1/stats), which reads the containers' cgroups, not Docker.
  --once    print one frame (two readings a second apart) and exit, for scripts
  --json    print one such reading as a JSON object and exit
No colours when NO_COLOR is set or the output is not a terminal. Without --once or --json the
output must be a terminal (exit 2 otherwise)."
        }
        "inspect" => {
            "\
Usage: deckhand inspect TASK

Prints TASK (id, unique id prefix or ARN) as one JSON object in the shape of the ECS task
metadata v4 response, with deckhand's statuses (NONE, PULLED, CREATED, RUNNING, STOPPED) and
RFC 3339 UTC times. An unknown TASK, or a prefix of several tasks (they are listed), exits 2."
        }
        "events" => {
            "\
Usage: deckhand events [--follow] [--since N]

Prints the container and task state changes the agent recorded after event number N
(default 0: all it still holds), one JSON object per line:
{\"seq\", \"time\", \"task\", \"container\", \"status\", \"exitCode\", \"reason\"}
with \"time\" in RFC 3339 UTC; \"container\" is absent for task events. --follow keeps
printing new events until interrupted."
        }
        "logs" => {
            "\
Usage: deckhand logs TASK [CONTAINER] [--follow] [--tail N] [--since DURATION|TIME] [--timestamps]

Prints what the containers of TASK (id, unique id prefix or ARN) wrote, read from Docker by
the agent, so a member of group deckhand needs no access to Docker. Without CONTAINER, every
container's lines, each after `NAME | ` (as docker compose does); with it, that container's
lines as they are. Lines a container wrote to stderr go to stderr. A stopped task's logs can be
read until the agent cleans the task up (3 h after it stopped by default). A TTY container
(pseudoTerminal) has one stream only: all of it goes to stdout.
  -f, --follow        keep printing new lines until every container has stopped
  -n, --tail N        only the last N lines of each container (or all)
  --since WHEN        only lines written since WHEN: a duration back from now (10m, 1h30m),
                      an RFC 3339 time (2024-05-01T12:00:00Z) or Unix seconds
  -t, --timestamps    put the time Docker received each line before it (RFC 3339)
An unknown CONTAINER exits 2 and lists the task's containers."
        }
        "validate" => {
            "\
Usage: deckhand validate FILE

Checks the ECS task definition in FILE (- reads stdin) without an agent: exit 0 with a
summary, or exit 2 with every error and its JSON path. FILE may be a Compose file (named
*.yaml or *.yml, or not starting with {): it is converted first, and errors name its YAML path
and line."
        }
        "convert" => {
            "\
Usage: deckhand convert FILE

Converts the Compose file FILE (- reads stdin) into the ECS task definition deckhand runs for
it and prints that JSON on stdout (warnings on stderr). Variables come from the environment and
the .env beside FILE. Exit 2 with every error, each with its YAML path and line."
        }
        "help" => {
            "\
Usage: deckhand help [COMMAND]

Shows the general help, or the help of COMMAND."
        }
        _ => return None,
    })
}

fn usage(message: impl Into<String>) -> UsageError {
    UsageError(message.into())
}

/// Takes the value of a flag given as `--flag VALUE` or `--flag=VALUE`.
fn flag_value(
    flag: &str,
    inline: Option<&str>,
    rest: &mut std::slice::Iter<'_, String>,
) -> Result<String, UsageError> {
    match inline {
        Some(value) if !value.is_empty() => Ok(value.to_string()),
        Some(_) => Err(usage(format!("{flag} needs a value"))),
        None => rest
            .next()
            .cloned()
            .ok_or_else(|| usage(format!("{flag} needs a value"))),
    }
}

/// Parses the arguments after the program name.
pub fn parse_args(args: &[String]) -> Result<Invocation, UsageError> {
    let mut socket: Option<PathBuf> = None;
    let mut verb: Option<String> = None;
    let mut positionals: Vec<String> = Vec::new();
    let mut flags: Vec<(String, Option<String>)> = Vec::new();
    let mut help = false;
    let mut version = false;
    let mut only_positionals = false;
    let mut rest = args.iter();
    while let Some(argument) = rest.next() {
        if only_positionals || argument == "-" || !argument.starts_with('-') {
            if verb.is_none() {
                verb = Some(argument.clone());
            } else {
                positionals.push(argument.clone());
            }
            continue;
        }
        let (name, inline) = match argument.split_once('=') {
            Some((name, value)) if name.starts_with("--") => (name, Some(value)),
            _ => (argument.as_str(), None),
        };
        match name {
            "--" => only_positionals = true,
            "-h" | "--help" => help = true,
            "-V" | "--version" => version = true,
            "--socket" => socket = Some(PathBuf::from(flag_value(name, inline, &mut rest)?)),
            _ => match command_table::any_flag(name) {
                Some(flag) if flag.value.is_some() => {
                    let value = flag_value(name, inline, &mut rest)?;
                    flags.push((name.to_string(), Some(value)));
                }
                Some(_) => {
                    if inline.is_some() {
                        return Err(usage(format!("{name} takes no value")));
                    }
                    flags.push((name.to_string(), None));
                }
                None => return Err(usage(format!("unknown option {argument}"))),
            },
        }
    }
    if help {
        let verb = verb
            .filter(|verb| verb != "help")
            .or(positionals.first().cloned());
        return Ok(Invocation {
            socket,
            command: Command::Help { verb },
        });
    }
    let Some(verb) = verb else {
        if version {
            return Ok(Invocation {
                socket,
                command: Command::Version,
            });
        }
        return Err(usage("no command given"));
    };
    if version {
        return Err(usage("--version takes no command"));
    }
    let allowed: Vec<&str> = command_table::verb(&verb)
        .map(|verb| verb.flags.iter().flat_map(spellings).collect())
        .unwrap_or_default();
    if let Some((flag, _)) = flags
        .iter()
        .find(|(flag, _)| !allowed.contains(&flag.as_str()))
    {
        return Err(usage(format!("{verb} does not take {flag}")));
    }
    let has = |names: &[&str]| flags.iter().any(|(flag, _)| names.contains(&flag.as_str()));
    let value_of = |name: &str| {
        flags
            .iter()
            .find(|(flag, _)| flag == name)
            .and_then(|(_, value)| value.clone())
    };
    let exactly_one = |what: &str| -> Result<String, UsageError> {
        match positionals.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(usage(format!("{verb} needs {what}"))),
            [_, extra, ..] => Err(usage(format!("{verb}: unexpected argument {extra}"))),
        }
    };
    let none = || -> Result<(), UsageError> {
        match positionals.first() {
            None => Ok(()),
            Some(extra) => Err(usage(format!("{verb}: unexpected argument {extra}"))),
        }
    };
    let command = match verb.as_str() {
        "run" => {
            none()?;
            Command::Run {
                config: value_of("--config").map(PathBuf::from),
            }
        }
        "submit" => Command::Submit {
            file: exactly_one("a FILE (- for stdin)")?,
        },
        "validate" => Command::Validate {
            file: exactly_one("a FILE (- for stdin)")?,
        },
        "convert" => Command::Convert {
            file: exactly_one("a FILE (- for stdin)")?,
        },
        "stop" => Command::Stop {
            task: exactly_one("a TASK (id, unique prefix or ARN)")?,
            wait: has(&["--wait"]),
        },
        "inspect" => Command::Inspect {
            task: exactly_one("a TASK (id, unique prefix or ARN)")?,
        },
        "ps" => {
            none()?;
            Command::Ps {
                all: has(&["--all", "-a"]),
                json: has(&["--json"]),
            }
        }
        "top" => {
            none()?;
            let (once, json) = (has(&["--once"]), has(&["--json"]));
            if once && json {
                return Err(usage("top takes --once or --json, not both"));
            }
            Command::Top { once, json }
        }
        "events" => {
            none()?;
            let since = match value_of("--since") {
                None => 0,
                Some(text) => text.parse::<u64>().map_err(|_| {
                    usage(format!(
                        "--since needs an event number (0 or more), not {text:?}"
                    ))
                })?,
            };
            Command::Events {
                follow: has(&["--follow", "-f"]),
                since,
            }
        }
        "logs" => {
            let (task, container) = match positionals.as_slice() {
                [] => return Err(usage("logs needs a TASK (id, unique prefix or ARN)")),
                [task] => (task.clone(), None),
                [task, container] => (task.clone(), Some(container.clone())),
                [_, _, extra, ..] => {
                    return Err(usage(format!("logs: unexpected argument {extra}")))
                }
            };
            let tail_text = value_of("--tail").or_else(|| value_of("-n"));
            let tail = match tail_text.as_deref() {
                None | Some("all") => None,
                Some(text) => Some(text.parse::<u64>().map_err(|_| {
                    usage(format!(
                        "--tail needs a number of lines (or all), not {text:?}"
                    ))
                })?),
            };
            let since = value_of("--since");
            if let Some(text) = &since {
                crate::api::local::docker_since(text, 0).map_err(|message| {
                    usage(format!("--since: {}", message.trim_start_matches("since ")))
                })?;
            }
            Command::Logs {
                task,
                container,
                follow: has(&["--follow", "-f"]),
                tail,
                since,
                timestamps: has(&["--timestamps", "-t"]),
            }
        }
        "help" => {
            if positionals.len() > 1 {
                return Err(usage("help takes at most one command"));
            }
            Command::Help {
                verb: positionals.first().cloned(),
            }
        }
        other => {
            return Err(usage(format!(
                "unknown command {other:?} (commands: {})",
                VERBS.join(", ")
            )))
        }
    };
    Ok(Invocation { socket, command })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Invocation, UsageError> {
        let args: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        parse_args(&args)
    }

    fn command(line: &str) -> Command {
        parse(line)
            .unwrap_or_else(|error| panic!("{line}: {error}"))
            .command
    }

    #[test]
    fn every_verb_and_flag() {
        let table = [
            ("run", Command::Run { config: None }),
            (
                "run --config /etc/x.conf",
                Command::Run {
                    config: Some("/etc/x.conf".into()),
                },
            ),
            (
                "run --config=/etc/x.conf",
                Command::Run {
                    config: Some("/etc/x.conf".into()),
                },
            ),
            (
                "submit web.json",
                Command::Submit {
                    file: "web.json".into(),
                },
            ),
            ("submit -", Command::Submit { file: "-".into() }),
            ("validate -", Command::Validate { file: "-".into() }),
            (
                "stop abc",
                Command::Stop {
                    task: "abc".into(),
                    wait: false,
                },
            ),
            (
                "stop --wait abc",
                Command::Stop {
                    task: "abc".into(),
                    wait: true,
                },
            ),
            (
                "ps",
                Command::Ps {
                    all: false,
                    json: false,
                },
            ),
            (
                "ps --all --json",
                Command::Ps {
                    all: true,
                    json: true,
                },
            ),
            (
                "ps -a",
                Command::Ps {
                    all: true,
                    json: false,
                },
            ),
            (
                "top",
                Command::Top {
                    once: false,
                    json: false,
                },
            ),
            (
                "top --once",
                Command::Top {
                    once: true,
                    json: false,
                },
            ),
            (
                "top --json",
                Command::Top {
                    once: false,
                    json: true,
                },
            ),
            ("inspect abc", Command::Inspect { task: "abc".into() }),
            (
                "events",
                Command::Events {
                    follow: false,
                    since: 0,
                },
            ),
            (
                "events --follow --since 42",
                Command::Events {
                    follow: true,
                    since: 42,
                },
            ),
            (
                "events -f --since=7",
                Command::Events {
                    follow: true,
                    since: 7,
                },
            ),
            (
                "logs abc",
                Command::Logs {
                    task: "abc".into(),
                    container: None,
                    follow: false,
                    tail: None,
                    since: None,
                    timestamps: false,
                },
            ),
            (
                "logs abc web -f --tail 5 --since 10m -t",
                Command::Logs {
                    task: "abc".into(),
                    container: Some("web".into()),
                    follow: true,
                    tail: Some(5),
                    since: Some("10m".into()),
                    timestamps: true,
                },
            ),
            (
                "logs --follow --timestamps -n all abc --since=2024-05-01T12:00:00Z",
                Command::Logs {
                    task: "abc".into(),
                    container: None,
                    follow: true,
                    tail: None,
                    since: Some("2024-05-01T12:00:00Z".into()),
                    timestamps: true,
                },
            ),
            ("--version", Command::Version),
            ("-V", Command::Version),
            ("--help", Command::Help { verb: None }),
            ("help", Command::Help { verb: None }),
            (
                "help stop",
                Command::Help {
                    verb: Some("stop".into()),
                },
            ),
            (
                "stop --help",
                Command::Help {
                    verb: Some("stop".into()),
                },
            ),
            ("-- submit -", Command::Submit { file: "-".into() }),
        ];
        for (line, expected) in table {
            assert_eq!(command(line), expected, "{line}");
        }
    }

    #[test]
    fn socket_is_global_and_may_come_anywhere() {
        for line in [
            "--socket /tmp/a.sock ps",
            "ps --socket /tmp/a.sock",
            "ps --socket=/tmp/a.sock",
        ] {
            let invocation = parse(line).expect(line);
            assert_eq!(
                invocation.socket,
                Some(PathBuf::from("/tmp/a.sock")),
                "{line}"
            );
            assert_eq!(
                invocation.command,
                Command::Ps {
                    all: false,
                    json: false
                }
            );
        }
    }

    #[test]
    fn usage_errors_say_what_is_wrong() {
        let table = [
            ("", "no command"),
            ("frobnicate", "unknown command \"frobnicate\""),
            ("submit", "submit needs a FILE"),
            ("submit a.json b.json", "unexpected argument b.json"),
            ("stop", "stop needs a TASK"),
            ("ps --wait", "ps does not take --wait"),
            ("ps extra", "unexpected argument extra"),
            ("events --since", "--since needs a value"),
            ("events --since x", "--since needs an event number"),
            ("ps --bogus", "unknown option --bogus"),
            ("stop --wait=yes abc", "--wait takes no value"),
            ("ps --version", "--version takes no command"),
            ("--socket", "--socket needs a value"),
            ("logs", "logs needs a TASK"),
            ("logs a b c", "unexpected argument c"),
            ("logs a --tail x", "--tail needs a number"),
            ("logs a --since yesterday", "--since: must be a duration"),
            ("logs a --wait", "logs does not take --wait"),
            ("ps -t", "ps does not take -t"),
            ("top --once --json", "not both"),
            ("top --all", "top does not take --all"),
            ("top x", "top: unexpected argument x"),
            ("top --once=1", "--once takes no value"),
        ];
        for (line, expected) in table {
            let error = parse(line).expect_err(line);
            assert!(error.0.contains(expected), "{line}: {error}");
        }
    }

    #[test]
    fn every_verb_has_help() {
        for verb in VERBS {
            let help = verb_help(verb).unwrap_or_else(|| panic!("no help for {verb}"));
            assert!(
                help.starts_with(&format!("Usage: deckhand {verb}")),
                "{verb}"
            );
            assert!(USAGE.contains(verb), "{verb} missing from the usage text");
        }
        assert_eq!(verb_help("nope"), None);
        let table: Vec<&str> = command_table::COMMANDS
            .iter()
            .map(|verb| verb.name)
            .collect();
        assert_eq!(table, VERBS, "the command table and the verbs agree");
        // Every flag of the table is in its verb's help, and its help names no other.
        for verb in command_table::COMMANDS {
            let help = verb_help(verb.name).unwrap_or_default();
            for flag in verb.flags {
                assert!(help.contains(flag.long), "{} {}", verb.name, flag.long);
            }
        }
    }
}
