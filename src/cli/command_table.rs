//! The `deckhand` command line as data: every command, its operands and its flags, with one
//! line of help each. The parser (`super::args`) takes from it which flags a command accepts
//! and which take a value, and the shell completions and the man page (`super::completions`)
//! are written from it, so the three cannot drift apart.

/// A flag: `--long`, perhaps `-s`, perhaps with a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flag {
    pub long: &'static str,
    pub short: Option<&'static str>,
    /// The value's name (`PATH`, `N`); `None`: the flag takes no value.
    pub value: Option<&'static str>,
    pub help: &'static str,
}

/// What an operand is, for completion: a file, a task of the agent, a command name, or text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperandKind {
    File,
    Task,
    Command,
    Other,
}

/// One operand: its name in the synopsis and whether it may be left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operand {
    pub name: &'static str,
    pub kind: OperandKind,
    pub optional: bool,
}

/// One command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verb {
    pub name: &'static str,
    pub operands: &'static [Operand],
    pub flags: &'static [Flag],
    pub summary: &'static str,
}

const fn flag(long: &'static str, help: &'static str) -> Flag {
    Flag {
        long,
        short: None,
        value: None,
        help,
    }
}

const fn operand(name: &'static str, kind: OperandKind) -> Operand {
    Operand {
        name,
        kind,
        optional: false,
    }
}

const FILE: Operand = operand("FILE", OperandKind::File);
const TASK: Operand = operand("TASK", OperandKind::Task);

/// The flags every command takes.
pub const GLOBAL_FLAGS: &[Flag] = &[
    Flag {
        value: Some("PATH"),
        ..flag("--socket", "the agent's API socket")
    },
    Flag {
        short: Some("-h"),
        ..flag("--help", "show help")
    },
    Flag {
        short: Some("-V"),
        ..flag("--version", "print the version")
    },
];

/// Every command, in the order the help lists them.
pub const COMMANDS: &[Verb] = &[
    Verb {
        name: "run",
        operands: &[],
        flags: &[Flag {
            value: Some("PATH"),
            ..flag("--config", "the configuration file")
        }],
        summary: "run the agent in the foreground",
    },
    Verb {
        name: "submit",
        operands: &[FILE],
        flags: &[],
        summary: "start the task in FILE (- = stdin); prints its id",
    },
    Verb {
        name: "stop",
        operands: &[TASK],
        flags: &[flag("--wait", "return once the task is STOPPED")],
        summary: "stop a task",
    },
    Verb {
        name: "ps",
        operands: &[],
        flags: &[
            Flag {
                short: Some("-a"),
                ..flag("--all", "stopped tasks too")
            },
            flag("--json", "the inspect objects as a JSON array"),
        ],
        summary: "list the tasks not stopped",
    },
    Verb {
        name: "top",
        operands: &[],
        flags: &[
            flag("--once", "print one frame and exit"),
            flag("--json", "print one reading as JSON and exit"),
        ],
        summary: "a live view of the tasks and what they use",
    },
    Verb {
        name: "inspect",
        operands: &[TASK],
        flags: &[],
        summary: "show a task as JSON (ECS task metadata v4 shape)",
    },
    Verb {
        name: "events",
        operands: &[],
        flags: &[
            Flag {
                short: Some("-f"),
                ..flag("--follow", "keep printing new events")
            },
            Flag {
                value: Some("N"),
                ..flag("--since", "only events after number N")
            },
        ],
        summary: "print state changes, one JSON object per line",
    },
    Verb {
        name: "logs",
        operands: &[
            TASK,
            Operand {
                optional: true,
                ..operand("CONTAINER", OperandKind::Other)
            },
        ],
        flags: &[
            Flag {
                short: Some("-f"),
                ..flag("--follow", "keep printing new lines")
            },
            Flag {
                short: Some("-n"),
                value: Some("N"),
                ..flag("--tail", "only the last N lines of each container")
            },
            Flag {
                value: Some("WHEN"),
                ..flag(
                    "--since",
                    "only lines since a duration, time or Unix seconds",
                )
            },
            Flag {
                short: Some("-t"),
                ..flag("--timestamps", "put Docker's time before each line")
            },
        ],
        summary: "print a task's container output",
    },
    Verb {
        name: "validate",
        operands: &[FILE],
        flags: &[],
        summary: "check a task definition offline (- = stdin)",
    },
    Verb {
        name: "convert",
        operands: &[FILE],
        flags: &[],
        summary: "print the ECS task definition a Compose file becomes",
    },
    Verb {
        name: "help",
        operands: &[Operand {
            optional: true,
            ..operand("COMMAND", OperandKind::Command)
        }],
        flags: &[],
        summary: "show help for a command",
    },
];

/// The command named `name`.
pub fn verb(name: &str) -> Option<&'static Verb> {
    COMMANDS.iter().find(|verb| verb.name == name)
}

/// Every spelling of `flag`: its long name and its short one.
pub fn spellings(flag: &Flag) -> impl Iterator<Item = &'static str> {
    std::iter::once(flag.long).chain(flag.short)
}

/// The flag spelled `name` (long or short) in any command or among the global flags. A
/// spelling means the same in every command that has it (a test checks), so the parser can
/// tell whether it takes a value before it knows the command.
pub fn any_flag(name: &str) -> Option<&'static Flag> {
    GLOBAL_FLAGS
        .iter()
        .chain(COMMANDS.iter().flat_map(|verb| verb.flags.iter()))
        .find(|flag| spellings(flag).any(|spelling| spelling == name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spelling_takes_a_value_everywhere_or_nowhere() {
        let every: Vec<&Flag> = GLOBAL_FLAGS
            .iter()
            .chain(COMMANDS.iter().flat_map(|verb| verb.flags.iter()))
            .collect();
        for flag in &every {
            for other in &every {
                let shared = spellings(flag).any(|name| spellings(other).any(|o| o == name));
                if shared {
                    assert_eq!(
                        flag.value.is_some(),
                        other.value.is_some(),
                        "{flag:?} {other:?}"
                    );
                    assert_eq!(flag.long, other.long, "{flag:?} {other:?}");
                }
            }
        }
        let mut names: Vec<&str> = COMMANDS.iter().map(|verb| verb.name).collect();
        names.dedup();
        assert_eq!(names.len(), COMMANDS.len());
    }
}
