//! The module map's arrows, checked: every `crate::…` path in `src/` must go from a module to
//! one its row of docs/ARCHITECTURE.md allows. A shared piece used sideways (one control source
//! borrowing another's constant, the API calling a Docker helper) belongs lower, in a module of
//! its own; this test fails the day such an import appears, naming the file and the line.
//!
//! Only `src/` of the library is read, without its test modules (`tests.rs` files and a
//! `#[cfg(test)] mod …` block at the end of a file) and without comments. `fuzzing.rs`, the hidden
//! entry points of the fuzz targets, and `agent.rs`, the wiring, may use everything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module and the top-level modules it may use. Leaves come last.
const ALLOWED: &[(&str, &[&str])] = &[
    ("agent", &["*"]),
    ("fuzzing", &["*"]),
    (
        "api",
        &[
            "engine",
            "task",
            "event",
            "report",
            "config",
            "encoding",
            "text",
            "clock",
            "metrics",
            "ports",
            "worker_threads",
            "role_credentials",
            "sorting",
        ],
    ),
    (
        "cli",
        &[
            "api", "task", "event", "report", "config", "encoding", "text", "clock", "sorting",
        ],
    ),
    (
        "control",
        &[
            "engine",
            "task",
            "event",
            "text",
            "clock",
            "net",
            "state",
            "metrics",
            "host",
            "role_credentials",
            "encoding",
            "registry",
            "sorting",
        ],
    ),
    (
        "engine",
        &[
            "task",
            "runtime",
            "state",
            "report",
            "event",
            "text",
            "clock",
            "ports",
            "registry",
            "metrics",
            "secrets",
            "worker_threads",
            "role_credentials",
            "sorting",
        ],
    ),
    ("report", &["task", "state", "event", "clock", "metrics"]),
    (
        "state",
        &[
            "task",
            "event",
            "text",
            "clock",
            "metrics",
            "worker_threads",
            "sorting",
        ],
    ),
    (
        "docker",
        &["runtime", "encoding", "text", "ports", "net", "sorting"],
    ),
    ("net", &["encoding"]),
    ("config", &["text", "registry", "host", "sorting"]),
    ("registry", &["encoding", "sorting"]),
    ("secrets", &[]),
    ("runtime", &["ports"]),
    ("task", &["text", "ports", "role_credentials", "sorting"]),
    ("event", &["task"]),
    ("text", &[]),
    ("encoding", &[]),
    ("clock", &["task"]),
    ("ports", &[]),
    ("role_credentials", &["sorting"]),
    ("host", &["sorting"]),
    ("metrics", &["task"]),
    ("worker_threads", &["text"]),
    ("sorting", &[]),
];

/// The modules that reach the engine only through its handle (its trait and error type), whose
/// reads return snapshots, never a task's lock.
const ENGINE_HANDLE_ONLY: &[&str] = &["api", "control"];
const ENGINE_HANDLE_ITEMS: &[&str] = &["EngineHandle", "EngineError", "handle", "SubmitError"];

/// The first name after `crate::engine::` in `line` that is not part of the engine's handle.
fn engine_item_beyond_the_handle(line: &str) -> Option<String> {
    let start = line.find("crate::engine::")? + "crate::engine::".len();
    let after = &line[start..];
    let names: Vec<String> = match after.strip_prefix('{') {
        Some(group) => group
            .split('}')
            .next()
            .unwrap_or("")
            .split(',')
            .map(|name| name.trim().split("::").next().unwrap_or("").to_string())
            .filter(|name| !name.is_empty())
            .collect(),
        None => vec![after
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()],
    };
    names
        .into_iter()
        .find(|name| !ENGINE_HANDLE_ITEMS.contains(&name.as_str()))
}

fn rust_files(directory: &Path, found: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(directory)
        .unwrap_or_else(|error| panic!("reading {}: {error}", directory.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            found.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`src/engine/restore.rs` → `engine`).
fn module_of(source: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(source).ok()?;
    let first = relative.components().next()?.as_os_str().to_str()?;
    match first {
        "lib.rs" | "main.rs" => None,
        name => Some(name.trim_end_matches(".rs").to_string()),
    }
}

/// The non-test, non-comment lines of a file, numbered from 1.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut code = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index].trim();
        if line == "#[cfg(test)]" {
            let next = lines.get(index + 1).map(|next| next.trim()).unwrap_or("");
            if next.starts_with("mod ") && next.ends_with('{') {
                // The test module closes the file.
                break;
            }
        }
        let without_comment = match line.find("//") {
            Some(start) => &line[..start],
            None => line,
        };
        if !without_comment.is_empty() {
            code.push((index + 1, without_comment.to_string()));
        }
        index += 1;
    }
    code
}

/// The top-level modules named by `crate::x` and `crate::{x::…, y, …}` paths in `line`.
fn crate_paths(line: &str) -> Vec<String> {
    let mut modules = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find("crate::") {
        let after = &rest[start + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            // Top-level names of the group: those at brace depth 0 right after `{` or `,`.
            let mut depth = 0;
            let mut expecting_name = true;
            let mut name = String::new();
            for character in group.chars() {
                match character {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => expecting_name = true,
                    c if depth == 0 && expecting_name && (c.is_alphanumeric() || c == '_') => {
                        name.push(c)
                    }
                    _ => {
                        if depth == 0 && expecting_name && !name.is_empty() {
                            modules.push(std::mem::take(&mut name));
                            expecting_name = false;
                        }
                    }
                }
            }
            if !name.is_empty() {
                modules.push(name);
            }
        } else {
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                modules.push(name);
            }
        }
        rest = after;
    }
    modules
}

#[test]
fn every_import_follows_an_arrow_of_the_module_map() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let allowed: BTreeMap<&str, BTreeSet<&str>> = ALLOWED
        .iter()
        .map(|(module, uses)| (*module, uses.iter().copied().collect()))
        .collect();
    let mut files = Vec::new();
    rust_files(&source, &mut files);
    files.sort();
    let mut violations = Vec::new();
    let mut checked_files = 0;
    for file in &files {
        let Some(module) = module_of(&source, file) else {
            continue;
        };
        if file.file_name().is_some_and(|name| name == "tests.rs") {
            continue;
        }
        let Some(uses) = allowed.get(module.as_str()) else {
            violations.push(format!(
                "{}: module `{module}` has no row in this test's ALLOWED table (add it, and its row to docs/ARCHITECTURE.md)",
                file.display()
            ));
            continue;
        };
        checked_files += 1;
        let text = std::fs::read_to_string(file)
            .unwrap_or_else(|error| panic!("reading {}: {error}", file.display()));
        for (number, line) in code_lines(&text) {
            for used in crate_paths(&line) {
                // Items of the crate root (`crate::VERSION`) belong to everyone.
                let root_item = used.starts_with(|c: char| c.is_ascii_uppercase());
                if used == module || root_item || uses.contains("*") || uses.contains(used.as_str())
                {
                    if used == "engine" && ENGINE_HANDLE_ONLY.contains(&module.as_str()) {
                        if let Some(item) = engine_item_beyond_the_handle(&line) {
                            violations.push(format!(
                                "{}:{number}: `{module}` reaches the engine only through \
                                 `EngineHandle`, not `{item}`: {line}",
                                file.strip_prefix(&source).unwrap_or(file).display()
                            ));
                        }
                    }
                    continue;
                }
                violations.push(format!(
                    "{}:{number}: `{module}` may not use `{used}`: {line}",
                    file.strip_prefix(&source).unwrap_or(file).display()
                ));
            }
        }
    }
    assert!(checked_files > 20, "only {checked_files} files checked");
    assert!(
        violations.is_empty(),
        "imports against the module map (docs/ARCHITECTURE.md):\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_path_reader_finds_plain_and_grouped_paths() {
    let table: [(&str, &[&str]); 5] = [
        ("use crate::task::Task;", &["task"]),
        (
            "use crate::{engine::x, task::{A, B}, text};",
            &["engine", "task", "text"],
        ),
        (
            "let x = crate::clock::now_millis() + crate::ports::f();",
            &["clock", "ports"],
        ),
        ("use super::something;", &[]),
        ("format!(\"crate\")", &[]),
    ];
    for (line, expected) in table {
        assert_eq!(crate_paths(line), expected, "{line}");
    }
}
