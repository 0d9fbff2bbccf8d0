//! The redirect that makes `169.254.170.2:80` — where every AWS SDK in a container asks for its
//! task's credentials (`AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`), and where Docker's awslogs
//! driver is pointed — reach deckhand's task metadata endpoint, from bridge-mode containers
//! (awsvpc tasks too: their sandbox sits on the same bridge), host-network containers and the
//! host itself (the Docker daemon).
//!
//! It is a chain of deckhand's own in the `nat` table, [`REDIRECT_CHAIN`], holding one rule,
//! and two jumps to it: from `PREROUTING` for packets to `169.254.170.2:80` that arrive on the
//! Docker bridge device, and from `OUTPUT` for those this host sends. The chain's rule DNATs them
//! to the bridge gateway address, where the endpoint already listens; with no bridge (or no
//! listener on it) only the `OUTPUT` jump is made and the rule REDIRECTs to 127.0.0.1.
//!
//! Why the gateway and not `127.0.0.1` with `route_localnet` (what the ECS agent's `ecs-init`
//! does): a packet from a container DNATed to 127.0.0.1 is dropped as a martian unless
//! `net.ipv4.conf.<bridge>.route_localnet=1`, and that setting lets every container reach every
//! service bound to the host's 127.0.0.1 (the Docker API on a TCP port, databases, the
//! introspection endpoint), which is why `ecs-init` must add a filter rule dropping what else
//! arrives for 127.0.0.0/8. The gateway address is already where the endpoint listens for
//! bridge-mode containers, so no sysctl is changed, no filter rule is needed and nothing new is
//! exposed; the packaged unit can keep `/proc/sys` read-only.
//!
//! Installing is idempotent: the chain is created if missing, else reused (its old rules replaced
//! without ever leaving it empty); each hook gets
//! its jump if `-C` finds none, and every other jump to the chain (a duplicate, or one for a bridge
//! device that has since changed) is deleted, so a `kill -9` and a restart leave exactly one set.
//! A clean stop removes the jumps and the chain. The rule set is a pure function
//! ([`rule_set`]); the steps run through [`IptablesRunner`], which the agent backs with the
//! `iptables` program (always with `-w`, so it waits for Docker's own iptables calls) and the tests
//! with a table in memory. `iptables -S` output is outside bytes: its reader never panics (a fuzz
//! target checks it: `fuzzing::iptables_listing`).

use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

/// Where ECS tasks find their credentials (and the awslogs driver its endpoint).
pub const CREDENTIALS_ADDRESS: Ipv4Addr = Ipv4Addr::new(169, 254, 170, 2);
/// The port at that address.
pub const CREDENTIALS_PORT: u16 = 80;
/// deckhand's chain in the `nat` table (iptables allows at most 28 characters).
pub const REDIRECT_CHAIN: &str = "DECKHAND-CREDENTIALS";
/// The program run, looked up in `PATH`.
pub const IPTABLES_PROGRAM: &str = "iptables";
/// The built-in chains that jump to [`REDIRECT_CHAIN`]: packets routed in (from the bridge) and
/// packets this host sends.
pub const HOOKS: [&str; 2] = ["PREROUTING", "OUTPUT"];
/// The most of iptables' error output kept in a message.
const MAX_ERROR_CHARS: usize = 400;
/// Linux's interface names are at most 15 bytes (`IFNAMSIZ` less its NUL).
const MAX_INTERFACE_NAME_BYTES: usize = 15;

/// The Docker bridge as the redirect needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bridge {
    /// The Linux bridge device (`docker0`): only packets arriving on it are redirected.
    pub interface: String,
    /// Its gateway address, where the endpoint listens.
    pub gateway: Ipv4Addr,
}

/// What the redirect points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedirectTarget {
    /// `None` when the endpoint does not listen on a bridge gateway, or the bridge device is
    /// unknown: only this host's own traffic is redirected, to 127.0.0.1.
    pub bridge: Option<Bridge>,
    /// The endpoint's port (`DECKHAND_TASK_METADATA_PORT`).
    pub port: u16,
}

impl RedirectTarget {
    /// Where the redirected connections arrive, for log lines.
    pub fn destination(&self) -> String {
        match &self.bridge {
            Some(bridge) => format!("{}:{}", bridge.gateway, self.port),
            None => format!("127.0.0.1:{}", self.port),
        }
    }
}

/// The rules, as iptables' arguments after `-t nat -A <chain>`, written in the order
/// `iptables -S` prints them so a listed rule can be compared word for word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSet {
    /// The rules of [`REDIRECT_CHAIN`], in order.
    pub chain_rules: Vec<Vec<String>>,
    /// Each hook's jump to the chain: `(hook, rule)`, at most one per hook.
    pub jumps: Vec<(&'static str, Vec<String>)>,
}

impl RuleSet {
    /// The jump `hook` should have, if any.
    pub fn jump_of(&self, hook: &str) -> Option<&Vec<String>> {
        self.jumps
            .iter()
            .find(|(jump_hook, _)| *jump_hook == hook)
            .map(|(_, rule)| rule)
    }
}

/// Whether `name` may be used as the bridge device in a rule: what Linux accepts as an interface
/// name, less what iptables reads specially (`+` is its wildcard, `!` a negation, a leading `-`
/// an option).
pub fn is_interface_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_INTERFACE_NAME_BYTES
        && name != "."
        && name != ".."
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The rule set for `target`: with a bridge, its packets and this host's to
/// `169.254.170.2:80` DNATed to the gateway; without one, this host's REDIRECTed to 127.0.0.1.
/// A bridge device that is not an interface name counts as no bridge.
pub fn rule_set(target: &RedirectTarget) -> RuleSet {
    let jump = |interface: Option<&str>| {
        let mut rule = vec!["-d".to_string(), format!("{CREDENTIALS_ADDRESS}/32")];
        if let Some(interface) = interface {
            rule.extend(["-i".to_string(), interface.to_string()]);
        }
        rule.extend(
            [
                "-p",
                "tcp",
                "-m",
                "tcp",
                "--dport",
                &CREDENTIALS_PORT.to_string(),
                "-j",
                REDIRECT_CHAIN,
            ]
            .map(str::to_string),
        );
        rule
    };
    let bridge = target
        .bridge
        .as_ref()
        .filter(|bridge| is_interface_name(&bridge.interface));
    match bridge {
        Some(bridge) => RuleSet {
            chain_rules: vec![[
                "-p",
                "tcp",
                "-j",
                "DNAT",
                "--to-destination",
                &format!("{}:{}", bridge.gateway, target.port),
            ]
            .map(str::to_string)
            .to_vec()],
            jumps: vec![
                ("PREROUTING", jump(Some(&bridge.interface))),
                ("OUTPUT", jump(None)),
            ],
        },
        None => RuleSet {
            chain_rules: vec![[
                "-p",
                "tcp",
                "-j",
                "REDIRECT",
                "--to-ports",
                &target.port.to_string(),
            ]
            .map(str::to_string)
            .to_vec()],
            jumps: vec![("OUTPUT", jump(None))],
        },
    }
}

/// The rules of `hook` in `iptables -S <hook>` output that jump to `chain`, each as its words
/// after `-A <hook>`. Lines of other chains, policies (`-P`) and anything unreadable are skipped.
pub fn jumps_in_listing(listing: &str, hook: &str, chain: &str) -> Vec<Vec<String>> {
    listing
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            if words.next() != Some("-A") || words.next() != Some(hook) {
                return None;
            }
            let rule: Vec<String> = words.map(str::to_string).collect();
            let target = rule
                .windows(2)
                .find(|pair| pair[0] == "-j" || pair[0] == "-g")
                .map(|pair| pair[1].as_str());
            (target == Some(chain)).then_some(rule)
        })
        .collect()
}

/// The rules of `chain` in `iptables -S <chain>` output, in order, each as its words after
/// `-A <chain>`. The chain's own `-N` line and anything unreadable are skipped.
pub fn rules_in_listing(listing: &str, chain: &str) -> Vec<Vec<String>> {
    listing
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            if words.next() != Some("-A") || words.next() != Some(chain) {
                return None;
            }
            Some(words.map(str::to_string).collect())
        })
        .collect()
}

/// Why an iptables call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IptablesError {
    /// The program is not in `PATH`.
    Missing,
    /// It ran and failed: its exit status and what it wrote to stderr (shortened).
    Failed { status: String, stderr: String },
    /// It could not be run for another reason.
    Unrunnable(String),
}

/// One `iptables` call in the `nat` table, its output on success.
pub trait IptablesRunner {
    /// Runs `iptables -w -t nat <args>`.
    fn run_nat(&mut self, args: &[&str]) -> Result<String, IptablesError>;
}

/// A failed step: the command and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedirectError {
    pub command: String,
    pub error: IptablesError,
}

impl std::fmt::Display for RedirectError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.error {
            IptablesError::Missing => write!(
                formatter,
                "the {IPTABLES_PROGRAM} program is not installed (not found in PATH)"
            ),
            IptablesError::Failed { status, stderr } => {
                write!(formatter, "`{}` failed ({status})", self.command)?;
                if !stderr.is_empty() {
                    write!(formatter, ": {stderr}")?;
                }
                Ok(())
            }
            IptablesError::Unrunnable(reason) => {
                write!(formatter, "cannot run `{}`: {reason}", self.command)
            }
        }
    }
}

/// Runs one step, naming the command when it fails.
fn step(runner: &mut dyn IptablesRunner, args: &[&str]) -> Result<String, RedirectError> {
    runner.run_nat(args).map_err(|error| RedirectError {
        command: format!("{IPTABLES_PROGRAM} -w -t nat {}", args.join(" ")),
        error,
    })
}

/// Runs `action` (`-I <hook> 1`, `-C <hook>`, `-D <hook>`, `-A <chain>`) with `rule`.
fn rule_step(
    runner: &mut dyn IptablesRunner,
    action: &[&str],
    rule: &[String],
) -> Result<String, RedirectError> {
    let mut args: Vec<&str> = action.to_vec();
    args.extend(rule.iter().map(String::as_str));
    step(runner, &args)
}

/// Puts `rules` in place: the chain created if missing, else reused: left as it is when it holds
/// the rules already, else the new rules appended and the old ones deleted from the top (never
/// flushed: a jump to an empty chain would let a packet for `169.254.170.2` go on and leave the
/// host); each hook with exactly its one jump (inserted first in the hook, so it wins over a rule
/// for the same address made by another agent), every other jump to the chain deleted.
pub fn install(runner: &mut dyn IptablesRunner, rules: &RuleSet) -> Result<(), RedirectError> {
    let old_rules = match step(runner, &["-S", REDIRECT_CHAIN]) {
        Ok(listing) => rules_in_listing(&listing, REDIRECT_CHAIN),
        Err(_) => {
            step(runner, &["-N", REDIRECT_CHAIN])?;
            Vec::new()
        }
    };
    if old_rules != rules.chain_rules {
        for rule in &rules.chain_rules {
            rule_step(runner, &["-A", REDIRECT_CHAIN], rule)?;
        }
        for _ in &old_rules {
            step(runner, &["-D", REDIRECT_CHAIN, "1"])?;
        }
    }
    for hook in HOOKS {
        let wanted = rules.jump_of(hook);
        if let Some(rule) = wanted {
            if rule_step(runner, &["-C", hook], rule).is_err() {
                rule_step(runner, &["-I", hook, "1"], rule)?;
            }
        }
        let listing = step(runner, &["-S", hook])?;
        let mut kept = false;
        for listed in jumps_in_listing(&listing, hook, REDIRECT_CHAIN) {
            if !kept && wanted == Some(&listed) {
                kept = true;
                continue;
            }
            rule_step(runner, &["-D", hook], &listed)?;
        }
        // An iptables that lists the rule in other words than deckhand wrote it: the one
        // inserted above went with the rest; put it back.
        if let Some(rule) = wanted.filter(|_| !kept) {
            if rule_step(runner, &["-C", hook], rule).is_err() {
                rule_step(runner, &["-I", hook, "1"], rule)?;
            }
        }
    }
    Ok(())
}

/// Removes every jump to the chain and the chain itself; nothing to do when there is no chain.
/// Goes on past a failed step and returns the first failure.
pub fn remove(runner: &mut dyn IptablesRunner) -> Result<(), RedirectError> {
    let mut first_error = None;
    let mut note = |result: Result<String, RedirectError>| {
        if let Err(error) = result {
            first_error.get_or_insert(error);
        }
    };
    for hook in HOOKS {
        match step(runner, &["-S", hook]) {
            Ok(listing) => {
                for listed in jumps_in_listing(&listing, hook, REDIRECT_CHAIN) {
                    note(rule_step(runner, &["-D", hook], &listed));
                }
            }
            Err(error) => note(Err(error)),
        }
    }
    if step(runner, &["-S", REDIRECT_CHAIN]).is_ok() {
        note(step(runner, &["-F", REDIRECT_CHAIN]));
        note(step(runner, &["-X", REDIRECT_CHAIN]));
    }
    first_error.map_or(Ok(()), Err)
}

/// The `iptables` program, run with `-w` so that a call waits for the xtables lock Docker holds
/// while it changes its own rules instead of failing.
#[derive(Debug, Default)]
pub struct SystemIptables;

impl IptablesRunner for SystemIptables {
    fn run_nat(&mut self, args: &[&str]) -> Result<String, IptablesError> {
        let output = Command::new(IPTABLES_PROGRAM)
            .args(["-w", "-t", "nat"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|error| match error.kind() {
                std::io::ErrorKind::NotFound => IptablesError::Missing,
                _ => IptablesError::Unrunnable(error.to_string()),
            })?;
        if output.status.success() {
            return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stderr = stderr.split_whitespace().collect::<Vec<_>>().join(" ");
        Err(IptablesError::Failed {
            status: output.status.to_string(),
            stderr: stderr.chars().take(MAX_ERROR_CHARS).collect(),
        })
    }
}

/// The installed redirect: removed by [`CredentialsRedirect::remove`] at a clean stop, or when
/// dropped (an agent that gives up after installing it leaves nothing behind).
pub struct CredentialsRedirect {
    runner: Box<dyn IptablesRunner + Send>,
    installed: bool,
}

impl CredentialsRedirect {
    /// Installs the rules for `target` with `runner`. On failure whatever was made is taken away
    /// again, and the error says which command failed and why.
    pub fn install(
        mut runner: Box<dyn IptablesRunner + Send>,
        target: &RedirectTarget,
    ) -> Result<CredentialsRedirect, RedirectError> {
        if let Err(error) = install(runner.as_mut(), &rule_set(target)) {
            let _ = remove(runner.as_mut());
            return Err(error);
        }
        Ok(CredentialsRedirect {
            runner,
            installed: true,
        })
    }

    /// Removes the rules (once).
    pub fn remove(&mut self) -> Result<(), RedirectError> {
        if !std::mem::take(&mut self.installed) {
            return Ok(());
        }
        remove(self.runner.as_mut())
    }
}

impl Drop for CredentialsRedirect {
    fn drop(&mut self) {
        if let Err(error) = self.remove() {
            log::warn!(
                "cannot remove the redirect of {CREDENTIALS_ADDRESS}:{CREDENTIALS_PORT}: {error}"
            );
        }
    }
}

#[cfg(test)]
mod tests;
