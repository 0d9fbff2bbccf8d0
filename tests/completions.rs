//! The shell completions and the man page the packages install (`packaging/completions/`,
//! `packaging/man/`), loaded by the real programs: bash registers `_deckhand` and completes a
//! command, zsh's `compinit` finds `_deckhand` on its `fpath`, fish completes commands and
//! flags, and `man -l` renders the page without a warning. zsh, fish and man-db are Debian
//! packages this test installs when they are missing (tests/support/packages.rs).

#[path = "support/packages.rs"]
mod packages;

use std::path::{Path, PathBuf};
use std::process::Command;

fn repository() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn completion(name: &str) -> PathBuf {
    repository().join("packaging/completions").join(name)
}

/// Runs `program` with `args`; returns its stdout, failing on a non-zero exit.
fn output_of(program: &str, args: &[&str]) -> String {
    let output = Command::new(program)
        .args(args)
        .env("HOME", std::env::temp_dir())
        .output()
        .unwrap_or_else(|error| panic!("cannot run {program}: {error}"));
    assert!(
        output.status.success(),
        "{program} {args:?}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn bash_registers_the_completion_and_completes_commands_and_flags() {
    packages::ensure_program("bash", "bash");
    let script = completion("deckhand.bash");
    let script = script.to_string_lossy();
    let registered = output_of(
        "bash",
        &["-c", &format!("source '{script}' && complete -p deckhand")],
    );
    assert_eq!(registered.trim(), "complete -F _deckhand deckhand");
    // (the words typed, the word being completed: its index) → what is offered
    let table: [(&str, usize, &[&str]); 5] = [
        ("deckhand t", 1, &["top"]),
        (
            "deckhand top --",
            2,
            &["--once", "--json", "--socket", "--help"],
        ),
        ("deckhand ps -", 2, &["--all", "-a", "--json"]),
        ("deckhand --socket /tmp/x.sock lo", 3, &["logs"]),
        ("deckhand help i", 2, &["inspect"]),
    ];
    for (words, index, expected) in table {
        let offered = output_of(
            "bash",
            &[
                "-c",
                &format!(
                    "source '{script}'; COMP_WORDS=({words}); COMP_CWORD={index}; \
                     [[ $COMP_CWORD -ge ${{#COMP_WORDS[@]}} ]] && COMP_WORDS+=(''); \
                     _deckhand; printf '%s\\n' \"${{COMPREPLY[@]}}\""
                ),
            ],
        );
        let offered: Vec<&str> = offered.lines().collect();
        for word in expected {
            assert!(offered.contains(word), "{words}: {offered:?} lacks {word}");
        }
    }
}

#[test]
fn zsh_compinit_finds_the_completion() {
    packages::ensure_program("zsh", "zsh");
    let directory = completion("");
    let dump = std::env::temp_dir().join(format!("deckhand-zcompdump-{}", std::process::id()));
    let found = output_of(
        "zsh",
        &[
            "-fc",
            &format!(
                "fpath=('{}' $fpath); autoload -U compinit; compinit -u -d '{}'; \
                 print -r -- $_comps[deckhand]",
                directory.display(),
                dump.display()
            ),
        ],
    );
    let _ = std::fs::remove_file(&dump);
    assert_eq!(found.trim(), "_deckhand");
    // The file parses as zsh.
    output_of("zsh", &["-n", &completion("_deckhand").to_string_lossy()]);
}

#[test]
fn fish_loads_the_completion_and_offers_commands_and_flags() {
    packages::ensure_program("fish", "fish");
    let script = completion("deckhand.fish");
    let source = format!("source '{}'", script.display());
    let commands = output_of(
        "fish",
        &[
            "--no-config",
            "-c",
            &format!("{source}; complete -C 'deckhand '"),
        ],
    );
    for verb in ["run", "ps", "top", "logs", "help"] {
        assert!(
            commands
                .lines()
                .any(|line| line.split('\t').next() == Some(verb)),
            "{verb} not offered: {commands}"
        );
    }
    let flags = output_of(
        "fish",
        &[
            "--no-config",
            "-c",
            &format!("{source}; complete -C 'deckhand top --'"),
        ],
    );
    for flag in ["--once", "--json", "--socket"] {
        assert!(
            flags.lines().any(|line| line.starts_with(flag)),
            "{flag} not offered: {flags}"
        );
    }
}

#[test]
fn man_renders_the_page_without_a_warning() {
    packages::ensure_program("man", "man-db");
    let page = repository().join("packaging/man/deckhand.1");
    let output = Command::new("man")
        .args(["--warnings", "-l"])
        .arg(&page)
        .env("MANWIDTH", "80")
        .env("MANPAGER", "cat")
        .output()
        .expect("run man");
    assert!(output.status.success(), "{}", output.status);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.trim().is_empty(), "man warned: {stderr}");
    let text = String::from_utf8_lossy(&output.stdout);
    for expected in [
        "DECKHAND(1)",
        "deckhand top [--once] [--json]",
        "deckhand ps [--all] [--json]",
        "EXIT STATUS",
        "DECKHAND_API_SOCKET",
        "NO_COLOR",
    ] {
        let squeezed: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(squeezed.contains(expected), "{expected} not in:\n{text}");
    }
}
