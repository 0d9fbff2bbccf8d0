//! The alert rules deckhand ships (`packaging/prometheus/deckhand-rules.yml`), checked by
//! Prometheus's own tool: `promtool check rules` accepts the file, and `promtool test rules`
//! passes its unit tests (`tests/prometheus/deckhand-rules.test.yml`), which fire each alert
//! on a host in trouble and keep a healthy host quiet. `promtool` comes with Debian's
//! `prometheus` package, installed on first need (tests/support/packages.rs). No Docker needed.

#[path = "support/packages.rs"]
mod packages;

use std::path::{Path, PathBuf};
use std::process::Command;

fn repository_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

const RULES: &str = "packaging/prometheus/deckhand-rules.yml";
const RULE_TESTS: &str = "tests/prometheus/deckhand-rules.test.yml";

/// Runs `promtool` with `args`; panics with its output unless it succeeds.
fn promtool(args: &[&str]) -> String {
    packages::ensure_program("promtool", "prometheus");
    let output = Command::new("promtool")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run promtool");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "promtool {args:?}: {}\n{text}",
        output.status
    );
    text
}

/// The names after `- alert:` in the rules file.
fn alert_names(rules: &str) -> Vec<String> {
    rules
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- alert:"))
        .map(|name| name.trim().to_string())
        .collect()
}

#[test]
fn promtool_accepts_the_rules_and_their_unit_tests_pass() {
    let checked = promtool(&["check", "rules", RULES]);
    assert!(checked.contains("SUCCESS: 6 rules found"), "{checked}");
    let tested = promtool(&["test", "rules", RULE_TESTS]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}

#[test]
fn every_alert_is_tested_firing_and_quiet_on_a_healthy_host() {
    let rules = std::fs::read_to_string(repository_file(RULES)).expect("the rules file");
    let tests = std::fs::read_to_string(repository_file(RULE_TESTS)).expect("the rule tests");
    let names = alert_names(&rules);
    assert_eq!(
        names,
        [
            "DeckhandTaskStoppedUnrequested",
            "DeckhandContainerRestartLoop",
            "DeckhandImageDiskHigh",
            "DeckhandDockerUnreachable",
            "DeckhandEcsDisconnected",
            "DeckhandAgentRestarted",
        ]
    );
    // The test groups, split where each begins; the first is the healthy host.
    let groups: Vec<&str> = tests.split("\n  - interval:").skip(1).collect();
    let (healthy, troubled) = groups.split_first().expect("test groups");
    for name in &names {
        let quiet = format!("alertname: {name}\n        exp_alerts: []");
        assert!(
            healthy.contains(&quiet),
            "the healthy host's group does not check that {name} stays quiet"
        );
        let fires = troubled.iter().any(|group| {
            group.split("- eval_time:").any(|check| {
                check.contains(&format!("alertname: {name}\n")) && check.contains("exp_labels:")
            })
        });
        assert!(fires, "no test expects {name} to fire");
    }
}
