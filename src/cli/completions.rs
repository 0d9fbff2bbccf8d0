//! The shell completions (bash, zsh, fish) and the `deckhand(1)` man page, written from the
//! command table (`super::command_table`) and the help texts (`super::args`), so they say what
//! the parser accepts. The packages install the copies kept in `packaging/completions/` and
//! `packaging/man/`; a test fails when a copy differs from what this writes (run it with
//! `DECKHAND_WRITE_GENERATED=1` to write them again).
//!
//! A `TASK` operand completes with the ids `deckhand ps --all` prints, a `FILE` with file
//! names, `help`'s operand with the commands.

use super::args::{verb_help, USAGE};
use super::command_table::{Flag, OperandKind, Verb, COMMANDS, GLOBAL_FLAGS};

const GENERATED: &str = "generated from deckhand's command table (src/cli/command_table.rs)";

/// The shell command that lists task ids, one a line.
const LIST_TASKS: &str = "deckhand ps --all 2>/dev/null | awk 'NR > 1 { print $1 }'";

fn verb_names() -> String {
    COMMANDS
        .iter()
        .map(|verb| verb.name)
        .collect::<Vec<_>>()
        .join(" ")
}

fn spellings_of(flags: &[Flag]) -> Vec<&'static str> {
    flags
        .iter()
        .flat_map(|flag| std::iter::once(flag.long).chain(flag.short))
        .collect()
}

fn first_operand(verb: &Verb) -> OperandKind {
    verb.operands
        .first()
        .map(|operand| operand.kind)
        .unwrap_or(OperandKind::Other)
}

/// `/usr/share/bash-completion/completions/deckhand`.
pub fn bash() -> String {
    let mut value_flags: Vec<&str> = Vec::new();
    for flag in GLOBAL_FLAGS
        .iter()
        .chain(COMMANDS.iter().flat_map(|verb| verb.flags.iter()))
    {
        if flag.value.is_some() {
            for spelling in std::iter::once(flag.long).chain(flag.short) {
                if !value_flags.contains(&spelling) {
                    value_flags.push(spelling);
                }
            }
        }
    }
    let value_flags = value_flags.join("|");
    let mut out = format!(
        "# bash completion for deckhand, {GENERATED}.\n\
         _deckhand_tasks() {{\n    {LIST_TASKS}\n}}\n\n\
         _deckhand() {{\n\
         \x20   local cur=\"${{COMP_WORDS[COMP_CWORD]}}\" prev=\"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
         \x20   local verb=\"\" operands=0 i\n\
         \x20   COMPREPLY=()\n\
         \x20   for ((i = 1; i < COMP_CWORD; i++)); do\n\
         \x20       case \"${{COMP_WORDS[i]}}\" in\n\
         \x20           {value_flags}) ((i++)) ;;\n\
         \x20           -*) ;;\n\
         \x20           *) if [[ -z \"$verb\" ]]; then verb=\"${{COMP_WORDS[i]}}\"; else ((operands++)); fi ;;\n\
         \x20       esac\n\
         \x20   done\n\
         \x20   case \"$prev\" in\n\
         \x20       --socket|--config) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n\
         \x20       {value_flags}) return ;;\n\
         \x20   esac\n\
         \x20   if [[ -z \"$verb\" ]]; then\n\
         \x20       COMPREPLY=($(compgen -W \"{verbs} {globals}\" -- \"$cur\"))\n\
         \x20       return\n\
         \x20   fi\n\
         \x20   local flags=\"\" kind=\"\"\n\
         \x20   case \"$verb\" in\n",
        verbs = verb_names(),
        globals = spellings_of(GLOBAL_FLAGS).join(" "),
    );
    for verb in COMMANDS {
        let kind = match first_operand(verb) {
            OperandKind::File => "file",
            OperandKind::Task => "task",
            OperandKind::Command => "command",
            OperandKind::Other => "",
        };
        out.push_str(&format!(
            "        {}) flags=\"{}\" kind=\"{kind}\" ;;\n",
            verb.name,
            spellings_of(verb.flags).join(" ")
        ));
    }
    out.push_str(&format!(
        "    esac\n\
         \x20   if [[ \"$cur\" == -* ]]; then\n\
         \x20       COMPREPLY=($(compgen -W \"$flags --socket --help\" -- \"$cur\"))\n\
         \x20       return\n\
         \x20   fi\n\
         \x20   ((operands > 0)) && return\n\
         \x20   case \"$kind\" in\n\
         \x20       file) COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n\
         \x20       task) COMPREPLY=($(compgen -W \"$(_deckhand_tasks)\" -- \"$cur\")) ;;\n\
         \x20       command) COMPREPLY=($(compgen -W \"{verbs}\" -- \"$cur\")) ;;\n\
         \x20   esac\n\
         }}\n\
         complete -F _deckhand deckhand\n",
        verbs = verb_names()
    ));
    out
}

/// Text inside a zsh single-quoted `_arguments` description: `'` and the brackets escaped.
fn zsh_text(text: &str) -> String {
    text.replace('\'', "'\\''")
        .replace('[', "\\[")
        .replace(']', "\\]")
        .replace(':', "\\:")
}

fn zsh_flag(flag: &Flag) -> String {
    let value = match flag.value {
        Some(name @ "PATH") => format!(":{name}:_files"),
        Some(name) => format!(":{name}: "),
        None => String::new(),
    };
    let help = zsh_text(flag.help);
    match flag.short {
        Some(short) => format!(
            "'({short} {long})'{{{short},{long}}}'[{help}]{value}'",
            long = flag.long
        ),
        None => format!("'{}[{help}]{value}'", flag.long),
    }
}

/// `_deckhand`, for a directory on zsh's `fpath`.
pub fn zsh() -> String {
    let mut out = format!(
        "#compdef deckhand\n# zsh completion for deckhand, {GENERATED}.\n\n\
         _deckhand_tasks() {{\n\
         \x20 local -a tasks\n\
         \x20 tasks=(${{(f)\"$({LIST_TASKS})\"}})\n\
         \x20 _describe -t tasks 'task' tasks\n\
         }}\n\n\
         _deckhand() {{\n\
         \x20 local curcontext=\"$curcontext\" state line\n\
         \x20 local -a commands\n\
         \x20 commands=(\n"
    );
    for verb in COMMANDS {
        out.push_str(&format!(
            "    '{}:{}'\n",
            verb.name,
            verb.summary.replace('\'', "'\\''")
        ));
    }
    out.push_str("  )\n  _arguments -C \\\n");
    for flag in GLOBAL_FLAGS {
        out.push_str(&format!("    {} \\\n", zsh_flag(flag)));
    }
    out.push_str(
        "    '1:command:->command' \\\n\
         \x20   '*::argument:->argument'\n\
         \x20 case $state in\n\
         \x20   command) _describe -t commands 'deckhand command' commands ;;\n\
         \x20   argument)\n\
         \x20     case $words[1] in\n",
    );
    for verb in COMMANDS {
        let mut specs: Vec<String> = verb.flags.iter().map(zsh_flag).collect();
        for (index, operand) in verb.operands.iter().enumerate() {
            let action = match operand.kind {
                OperandKind::File => "_files".to_string(),
                OperandKind::Task => "_deckhand_tasks".to_string(),
                OperandKind::Command => format!("({})", verb_names()),
                OperandKind::Other => " ".to_string(),
            };
            let colons = if operand.optional { "::" } else { ":" };
            specs.push(format!(
                "'{}{colons}{}:{action}'",
                index + 1,
                operand.name.to_lowercase()
            ));
        }
        if specs.is_empty() {
            out.push_str(&format!("        {}) ;;\n", verb.name));
        } else {
            out.push_str(&format!(
                "        {}) _arguments {} ;;\n",
                verb.name,
                specs.join(" ")
            ));
        }
    }
    out.push_str("      esac ;;\n  esac\n}\n\n_deckhand \"$@\"\n");
    out
}

fn fish_text(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

fn fish_flag(condition: &str, flag: &Flag) -> String {
    let mut line = format!("complete -c deckhand{condition} -l {}", &flag.long[2..]);
    if let Some(short) = flag.short {
        line.push_str(&format!(" -s {}", &short[1..]));
    }
    match flag.value {
        Some("PATH") => line.push_str(" -r -F"),
        Some(_) => line.push_str(" -r"),
        None => {}
    }
    line.push_str(&format!(" -d {}\n", fish_text(flag.help)));
    line
}

/// `deckhand.fish`, for fish's `vendor_completions.d`.
pub fn fish() -> String {
    let mut out = format!(
        "# fish completion for deckhand, {GENERATED}.\n\n\
         function __deckhand_tasks\n    {LIST_TASKS}\nend\n\n\
         complete -c deckhand -f\n"
    );
    for flag in GLOBAL_FLAGS {
        out.push_str(&fish_flag("", flag));
    }
    let verbs = verb_names();
    for verb in COMMANDS {
        out.push_str(&format!(
            "complete -c deckhand -n 'not __fish_seen_subcommand_from {verbs}' -a {} -d {}\n",
            verb.name,
            fish_text(verb.summary)
        ));
    }
    for verb in COMMANDS {
        let condition = format!(" -n '__fish_seen_subcommand_from {}'", verb.name);
        for flag in verb.flags {
            out.push_str(&fish_flag(&condition, flag));
        }
        match first_operand(verb) {
            OperandKind::File => out.push_str(&format!("complete -c deckhand{condition} -F\n")),
            OperandKind::Task => out.push_str(&format!(
                "complete -c deckhand{condition} -a '(__deckhand_tasks)'\n"
            )),
            OperandKind::Command => {
                out.push_str(&format!("complete -c deckhand{condition} -a '{verbs}'\n"))
            }
            OperandKind::Other => {}
        }
    }
    out
}

/// Text for roff: backslashes and hyphens escaped, a leading `.` or `'` made literal.
fn roff(text: &str) -> String {
    let escaped = text
        .replace('\\', "\\e")
        .replace('-', "\\-")
        .replace('—', "\\(em")
        .replace('…', "...");
    if escaped.starts_with('.') || escaped.starts_with('\'') {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

/// Help text as roff: its paragraphs filled, its indented lines (flag lists) kept as they are.
fn roff_body(text: &str) -> String {
    let mut out = String::new();
    let mut verbatim = false;
    for line in text.lines() {
        let indented = line.starts_with("  ");
        if indented != verbatim {
            out.push_str(if indented { ".nf\n" } else { ".fi\n" });
            verbatim = indented;
        }
        if line.trim().is_empty() {
            out.push_str(".PP\n");
        } else {
            out.push_str(&roff(line));
            out.push('\n');
        }
    }
    if verbatim {
        out.push_str(".fi\n");
    }
    out
}

/// `deckhand.1`, the man page.
pub fn man_page() -> String {
    let mut out = format!(
        ".\\\" deckhand(1), {GENERATED}.\n\
         .TH DECKHAND 1 \"\" \"deckhand\" \"User Commands\"\n\
         .SH NAME\n\
         deckhand \\- runs Amazon ECS task definitions on this host through Docker\n\
         .SH SYNOPSIS\n\
         .B deckhand\n\
         [\\fB\\-\\-socket\\fR \\fIPATH\\fR] \\fIcommand\\fR [\\fIarguments\\fR]\n\
         .SH DESCRIPTION\n\
         deckhand is a host agent that runs tasks (groups of containers described in the \
         Amazon ECS task\\-definition JSON format, or Compose files) on one host through the \
         Docker Engine, and keeps them at the status their owner asked for.\n\
         .B deckhand run\n\
         is the agent; the other commands are its client, over its local API socket.\n\
         .SH COMMANDS\n"
    );
    for verb in COMMANDS {
        let help = verb_help(verb.name).unwrap_or(verb.summary);
        let mut lines = help.lines();
        let synopsis = lines
            .next()
            .and_then(|line| line.strip_prefix("Usage: "))
            .unwrap_or(verb.name);
        out.push_str(&format!(".SS {}\n", roff(synopsis)));
        let body: Vec<&str> = lines.skip_while(|line| line.trim().is_empty()).collect();
        out.push_str(&roff_body(&body.join("\n")));
    }
    out.push_str(".SH OPTIONS\n");
    for flag in GLOBAL_FLAGS {
        let mut names = flag.long.to_string();
        if let Some(short) = flag.short {
            names = format!("{short}, {names}");
        }
        if let Some(value) = flag.value {
            names = format!("{names} {value}");
        }
        out.push_str(&format!(".TP\n.B {}\n{}\n", roff(&names), roff(flag.help)));
    }
    // The general help's closing paragraphs: TASK and the socket, then the exit codes (its
    // last line, the options, is the OPTIONS section above).
    let closing: Vec<&str> = USAGE
        .lines()
        .skip_while(|line| !line.starts_with("TASK is"))
        .filter(|line| !line.starts_with("Options:"))
        .collect();
    let exit_codes = closing
        .iter()
        .position(|line| line.starts_with("Exit codes:"))
        .unwrap_or(closing.len());
    out.push_str(".SH NOTES\n");
    out.push_str(&roff_body(closing[..exit_codes].join("\n").trim_end()));
    out.push_str(".SH EXIT STATUS\n");
    out.push_str(&roff_body(&closing[exit_codes..].join("\n")));
    out.push_str(
        ".SH ENVIRONMENT\n\
         .TP\n.B DECKHAND_API_SOCKET\nthe agent's API socket, as \\fB\\-\\-socket\\fR\n\
         .TP\n.B NO_COLOR\nwhen set (not empty), \\fBdeckhand top\\fR uses no colours\n\
         .SH FILES\n\
         .TP\n.I /etc/deckhand/deckhand.conf\nthe agent's configuration\n\
         .TP\n.I /etc/deckhand/tasks.d/\nthe tasks that should run, one file each\n\
         .TP\n.I /var/lib/deckhand/\nthe agent's state\n\
         .TP\n.I /run/deckhand/api.sock\nthe system agent's API socket\n\
         .SH SEE ALSO\n\
         .BR docker (1),\n\
         /usr/share/doc/deckhand/README.md\n",
    );
    out
}

/// Each generated file and its place in the repository.
pub fn generated_files() -> [(&'static str, String); 4] {
    [
        ("packaging/completions/deckhand.bash", bash()),
        ("packaging/completions/_deckhand", zsh()),
        ("packaging/completions/deckhand.fish", fish()),
        ("packaging/man/deckhand.1", man_page()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_packaged_completions_and_man_page_are_the_generated_ones() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let write = std::env::var_os("DECKHAND_WRITE_GENERATED").is_some();
        for (path, text) in generated_files() {
            let path = root.join(path);
            if write {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, &text).unwrap();
            }
            let kept = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                kept == text,
                "{} is not what the command table gives; run \
                 DECKHAND_WRITE_GENERATED=1 cargo test --lib cli::completions",
                path.display()
            );
        }
    }

    #[test]
    fn every_command_and_flag_is_in_every_completion_and_the_man_page() {
        let (bash, zsh, fish, man) = (bash(), zsh(), fish(), man_page());
        for verb in COMMANDS {
            for text in [&bash, &zsh, &fish] {
                assert!(text.contains(verb.name), "{}", verb.name);
            }
            assert!(
                man.contains(&format!(".SS deckhand {}", verb.name)),
                "{}",
                verb.name
            );
            for flag in verb.flags.iter().chain(GLOBAL_FLAGS) {
                assert!(bash.contains(flag.long), "{}", flag.long);
                assert!(zsh.contains(flag.long), "{}", flag.long);
                assert!(
                    fish.contains(&format!("-l {}", &flag.long[2..])),
                    "{}",
                    flag.long
                );
                assert!(man.contains(&roff(flag.long)), "{}", flag.long);
            }
        }
        assert_eq!(roff(".x - \\"), "\\&.x \\- \\e");
        assert_eq!(zsh_text("agent's [x]"), "agent'\\''s \\[x\\]");
        assert_eq!(fish_text("agent's"), "'agent\\'s'");
    }
}
