//! The rule set for each bridge situation, the `iptables -S` reader, and installing and removing
//! against a `nat` table kept in memory that answers as iptables does.

use super::*;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

fn words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_string).collect()
}

fn docker0() -> Option<Bridge> {
    Some(Bridge {
        interface: "docker0".into(),
        gateway: Ipv4Addr::new(172, 17, 0, 1),
    })
}

/// A row of [`table_of_rule_sets`]: the bridge, the chain's rules, the PREROUTING jump and the
/// OUTPUT jump.
type RuleSetRow = (
    Option<Bridge>,
    Vec<&'static str>,
    Option<&'static str>,
    Option<&'static str>,
);

#[test]
fn table_of_rule_sets() {
    let table: Vec<RuleSetRow> = vec![
        (
            docker0(),
            vec!["-p tcp -j DNAT --to-destination 172.17.0.1:51679"],
            Some("-d 169.254.170.2/32 -i docker0 -p tcp -m tcp --dport 80 -j DECKHAND-CREDENTIALS"),
            Some("-d 169.254.170.2/32 -p tcp -m tcp --dport 80 -j DECKHAND-CREDENTIALS"),
        ),
        (
            Some(Bridge {
                interface: "br-lan.7".into(),
                gateway: Ipv4Addr::new(10, 9, 0, 1),
            }),
            vec!["-p tcp -j DNAT --to-destination 10.9.0.1:51679"],
            Some(
                "-d 169.254.170.2/32 -i br-lan.7 -p tcp -m tcp --dport 80 -j DECKHAND-CREDENTIALS",
            ),
            Some("-d 169.254.170.2/32 -p tcp -m tcp --dport 80 -j DECKHAND-CREDENTIALS"),
        ),
        // No bridge: only this host's traffic, to 127.0.0.1 (no route_localnet needed for it).
        (
            None,
            vec!["-p tcp -j REDIRECT --to-ports 51679"],
            None,
            Some("-d 169.254.170.2/32 -p tcp -m tcp --dport 80 -j DECKHAND-CREDENTIALS"),
        ),
        // A device name iptables would read as something else is no bridge.
        (
            Some(Bridge {
                interface: "docker+".into(),
                gateway: Ipv4Addr::new(172, 17, 0, 1),
            }),
            vec!["-p tcp -j REDIRECT --to-ports 51679"],
            None,
            Some("-d 169.254.170.2/32 -p tcp -m tcp --dport 80 -j DECKHAND-CREDENTIALS"),
        ),
    ];
    for (bridge, chain_rules, prerouting, output) in table {
        let rules = rule_set(&RedirectTarget {
            bridge: bridge.clone(),
            port: 51679,
        });
        let chain: Vec<Vec<String>> = chain_rules.iter().map(|rule| words(rule)).collect();
        assert_eq!(rules.chain_rules, chain, "{bridge:?}");
        assert_eq!(rules.jump_of("PREROUTING"), prerouting.map(words).as_ref());
        assert_eq!(rules.jump_of("OUTPUT"), output.map(words).as_ref());
    }
}

#[test]
fn table_of_interface_names() {
    let table = [
        ("docker0", true),
        ("br-0123456789ab", true),
        ("eth0.100", true),
        ("a_b", true),
        ("", false),
        ("br-0123456789abc", false),
        ("docker+", false),
        ("-i", false),
        ("!", false),
        (".", false),
        ("..", false),
        ("dock er", false),
        ("dock/er", false),
        ("dockér", false),
    ];
    for (name, valid) in table {
        assert_eq!(is_interface_name(name), valid, "{name:?}");
    }
}

#[test]
fn table_of_listings() {
    let listing = "-P PREROUTING ACCEPT\n\
        -A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER\n\
        -A PREROUTING -d 169.254.170.2/32 -i docker0 -p tcp -m tcp --dport 80 -j DECKHAND-CREDENTIALS\n\
        -A OUTPUT -d 169.254.170.2/32 -p tcp -m tcp --dport 80 -j DECKHAND-CREDENTIALS\n\
        -A PREROUTING -i br1 -g DECKHAND-CREDENTIALS\n\
        -A PREROUTING -j DECKHAND-CREDENTIALS-OLD\n\
        -A PREROUTING -j\n\
        -A PREROUTING\n\
        -A\n\
        garbage -j DECKHAND-CREDENTIALS\n";
    assert_eq!(
        jumps_in_listing(listing, "PREROUTING", REDIRECT_CHAIN),
        vec![
            words(
                "-d 169.254.170.2/32 -i docker0 -p tcp -m tcp --dport 80 -j DECKHAND-CREDENTIALS"
            ),
            words("-i br1 -g DECKHAND-CREDENTIALS"),
        ]
    );
    assert_eq!(
        jumps_in_listing(listing, "OUTPUT", REDIRECT_CHAIN),
        vec![words(
            "-d 169.254.170.2/32 -p tcp -m tcp --dport 80 -j DECKHAND-CREDENTIALS"
        )]
    );
    assert!(jumps_in_listing("", "OUTPUT", REDIRECT_CHAIN).is_empty());
    assert!(jumps_in_listing("\u{0}\u{ffff}-A OUTPUT", "OUTPUT", REDIRECT_CHAIN).is_empty());
}

/// A `nat` table as iptables keeps it: chains of rules, each rule its words as `-S` prints them.
#[derive(Debug, Clone, Default)]
struct NatTable {
    chains: BTreeMap<String, Vec<String>>,
    /// Every call, as its arguments.
    calls: Vec<String>,
    /// A call whose arguments start so fails as iptables fails without the right to.
    refuse: Option<String>,
    /// Whether the program is missing.
    missing: bool,
}

impl NatTable {
    fn with_builtins() -> NatTable {
        let mut table = NatTable::default();
        for chain in ["PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"] {
            table.chains.insert(chain.into(), Vec::new());
        }
        table
    }

    fn rules(&self, chain: &str) -> Vec<String> {
        self.chains.get(chain).cloned().unwrap_or_default()
    }
}

#[derive(Clone)]
struct FakeIptables(Arc<Mutex<NatTable>>);

impl FakeIptables {
    fn new(table: NatTable) -> FakeIptables {
        FakeIptables(Arc::new(Mutex::new(table)))
    }

    fn table(&self) -> NatTable {
        self.0.lock().expect("table").clone()
    }
}

fn failed(message: &str) -> IptablesError {
    IptablesError::Failed {
        status: "exit status: 1".into(),
        stderr: message.into(),
    }
}

impl IptablesRunner for FakeIptables {
    fn run_nat(&mut self, args: &[&str]) -> Result<String, IptablesError> {
        let mut table = self.0.lock().expect("table");
        let joined = args.join(" ");
        table.calls.push(joined.clone());
        if table.missing {
            return Err(IptablesError::Missing);
        }
        if table
            .refuse
            .as_ref()
            .is_some_and(|prefix| joined.starts_with(prefix.as_str()))
        {
            return Err(failed("Permission denied (you must be root)"));
        }
        let (action, rest) = args.split_first().expect("an action");
        let (chain, rule) = rest.split_first().expect("a chain");
        let chain = chain.to_string();
        let exists = table.chains.contains_key(&chain);
        let no_chain = || failed("No chain/target/match by that name.");
        let rule_text = || {
            let skip = usize::from(*action == "-I");
            rule[skip..].join(" ")
        };
        match *action {
            "-N" if exists => Err(failed("Chain already exists.")),
            "-N" => {
                table.chains.insert(chain, Vec::new());
                Ok(String::new())
            }
            "-S" if exists => {
                let mut listing = format!("-N {chain}\n");
                for rule in table.rules(&chain) {
                    listing.push_str(&format!("-A {chain} {rule}\n"));
                }
                Ok(listing)
            }
            "-F" if exists => {
                table.chains.insert(chain, Vec::new());
                Ok(String::new())
            }
            "-X" if exists => {
                let referenced = table
                    .chains
                    .values()
                    .flatten()
                    .any(|rule| rule.ends_with(&format!(" {chain}")));
                if referenced || !table.rules(&chain).is_empty() {
                    return Err(failed("Directory not empty."));
                }
                table.chains.remove(&chain);
                Ok(String::new())
            }
            "-A" | "-I" if exists => {
                let text = rule_text();
                if text.ends_with(&format!("-j {REDIRECT_CHAIN}"))
                    && !table.chains.contains_key(REDIRECT_CHAIN)
                {
                    return Err(no_chain());
                }
                let rules = table.chains.get_mut(&chain).expect("exists");
                if *action == "-A" {
                    rules.push(text);
                } else {
                    rules.insert(0, text);
                }
                Ok(String::new())
            }
            "-D" if exists && rule.len() == 1 => {
                let rules = table.chains.get_mut(&chain).expect("exists");
                match rule[0].parse::<usize>() {
                    Ok(number) if (1..=rules.len()).contains(&number) => {
                        rules.remove(number - 1);
                        Ok(String::new())
                    }
                    _ => Err(failed("Index of deletion too big.")),
                }
            }
            "-C" | "-D" if exists => {
                let text = rule_text();
                let rules = table.chains.get_mut(&chain).expect("exists");
                match rules.iter().position(|rule| *rule == text) {
                    Some(index) => {
                        if *action == "-D" {
                            rules.remove(index);
                        }
                        Ok(String::new())
                    }
                    None => Err(failed(
                        "Bad rule (does a matching rule exist in that chain?).",
                    )),
                }
            }
            _ => Err(no_chain()),
        }
    }
}

fn target(bridge: Option<Bridge>) -> RedirectTarget {
    RedirectTarget {
        bridge,
        port: 51679,
    }
}

/// The table holds exactly the rule set for `target`: the chain with its rules, one jump per
/// hook that has one, no other jump to the chain, and the other rules untouched.
fn assert_exactly_one_set(table: &NatTable, target: &RedirectTarget, others: &[(&str, &str)]) {
    let rules = rule_set(target);
    let chain: Vec<String> = rules
        .chain_rules
        .iter()
        .map(|rule| rule.join(" "))
        .collect();
    assert_eq!(table.rules(REDIRECT_CHAIN), chain, "{table:?}");
    for hook in HOOKS {
        let mut expected: Vec<String> = rules
            .jump_of(hook)
            .map(|rule| rule.join(" "))
            .into_iter()
            .collect();
        expected.extend(
            others
                .iter()
                .filter(|(other_hook, _)| *other_hook == hook)
                .map(|(_, rule)| rule.to_string()),
        );
        assert_eq!(table.rules(hook), expected, "{hook}: {table:?}");
    }
}

#[test]
fn installing_twice_or_after_a_kill_leaves_one_set() {
    let mut table = NatTable::with_builtins();
    let docker_rule = "-m addrtype --dst-type LOCAL -j DOCKER";
    table
        .chains
        .insert("PREROUTING".into(), vec![docker_rule.into()]);
    table.chains.insert("DOCKER".into(), Vec::new());
    let iptables = FakeIptables::new(table);
    let wanted = target(docker0());
    let others = [("PREROUTING", docker_rule)];
    install(&mut iptables.clone(), &rule_set(&wanted)).expect("installs");
    assert_exactly_one_set(&iptables.table(), &wanted, &others);
    // A second start over the rules of a first one killed with -9.
    install(&mut iptables.clone(), &rule_set(&wanted)).expect("installs again");
    assert_exactly_one_set(&iptables.table(), &wanted, &others);
    // Removal takes only deckhand's.
    remove(&mut iptables.clone()).expect("removes");
    let table = iptables.table();
    assert!(!table.chains.contains_key(REDIRECT_CHAIN), "{table:?}");
    assert_eq!(table.rules("PREROUTING"), vec![docker_rule.to_string()]);
    assert!(table.rules("OUTPUT").is_empty());
    // Nothing left: removing again does nothing and succeeds.
    remove(&mut iptables.clone()).expect("removes nothing");
}

#[test]
fn stale_and_duplicate_jumps_are_taken_away() {
    let mut table = NatTable::with_builtins();
    table.chains.insert(
        REDIRECT_CHAIN.into(),
        vec!["-p tcp -j DNAT --to-destination 172.18.0.1:51679".into()],
    );
    let old_jump = "-d 169.254.170.2/32 -i br-old -p tcp -m tcp --dport 80 -j DECKHAND-CREDENTIALS";
    let output_jump = "-d 169.254.170.2/32 -p tcp -m tcp --dport 80 -j DECKHAND-CREDENTIALS";
    table
        .chains
        .insert("PREROUTING".into(), vec![old_jump.into()]);
    table.chains.insert(
        "OUTPUT".into(),
        vec![output_jump.into(), output_jump.into()],
    );
    let iptables = FakeIptables::new(table);
    let wanted = target(docker0());
    install(&mut iptables.clone(), &rule_set(&wanted)).expect("installs");
    assert_exactly_one_set(&iptables.table(), &wanted, &[]);
    // The bridge is gone at the next start: its jump goes too.
    let without_bridge = target(None);
    install(&mut iptables.clone(), &rule_set(&without_bridge)).expect("installs");
    assert_exactly_one_set(&iptables.table(), &without_bridge, &[]);
}

#[test]
fn the_jump_is_never_missing_while_a_restart_installs() {
    // The old set stays in place until the new one is: -C finds the jump, no delete happens
    // before an insert (a packet in between would otherwise leave the host).
    let iptables = FakeIptables::new(NatTable::with_builtins());
    let wanted = target(docker0());
    install(&mut iptables.clone(), &rule_set(&wanted)).expect("installs");
    iptables.0.lock().expect("table").calls.clear();
    install(&mut iptables.clone(), &rule_set(&wanted)).expect("installs again");
    let calls = iptables.table().calls;
    assert!(
        calls.iter().all(|call| ["-D", "-I", "-A", "-F"]
            .iter()
            .all(|action| !call.starts_with(action))),
        "{calls:?}"
    );
}

#[test]
fn a_changed_target_replaces_the_chain_rules_without_ever_emptying_the_chain() {
    let iptables = FakeIptables::new(NatTable::with_builtins());
    install(&mut iptables.clone(), &rule_set(&target(docker0()))).expect("installs");
    iptables.0.lock().expect("table").calls.clear();
    // The next start: another port (and a bridge on another address).
    let moved = RedirectTarget {
        bridge: Some(Bridge {
            interface: "docker0".into(),
            gateway: Ipv4Addr::new(172, 18, 0, 1),
        }),
        port: 9179,
    };
    install(&mut iptables.clone(), &rule_set(&moved)).expect("installs");
    assert_exactly_one_set(&iptables.table(), &moved, &[]);
    let chain_calls: Vec<String> = iptables
        .table()
        .calls
        .into_iter()
        .filter(|call| {
            call.contains(&format!("-A {REDIRECT_CHAIN}"))
                || call.starts_with(&format!("-D {REDIRECT_CHAIN}"))
                || call.starts_with("-F")
        })
        .collect();
    assert_eq!(
        chain_calls,
        vec![
            format!("-A {REDIRECT_CHAIN} -p tcp -j DNAT --to-destination 172.18.0.1:9179"),
            format!("-D {REDIRECT_CHAIN} 1"),
        ]
    );
}

#[test]
fn table_of_chain_listings() {
    let listing = "-N DECKHAND-CREDENTIALS\n\
        -A DECKHAND-CREDENTIALS -p tcp -j DNAT --to-destination 172.17.0.1:51679\n\
        -A DECKHAND-CREDENTIALS-OLD -p tcp -j RETURN\n\
        -A DECKHAND-CREDENTIALS\n\
        -A OUTPUT -j DECKHAND-CREDENTIALS\n\
        garbage\n";
    assert_eq!(
        rules_in_listing(listing, REDIRECT_CHAIN),
        vec![
            words("-p tcp -j DNAT --to-destination 172.17.0.1:51679"),
            Vec::new(),
        ]
    );
    assert!(rules_in_listing("", REDIRECT_CHAIN).is_empty());
}

#[test]
fn a_refused_or_missing_iptables_is_named_and_leaves_nothing() {
    let wanted = target(docker0());
    // (refused call prefix or missing, words of the message)
    let table: [(Option<&str>, bool, &str); 4] = [
        (
            Some("-S DECKHAND"),
            false,
            "`iptables -w -t nat -N DECKHAND-CREDENTIALS` failed (exit status: 1): Permission denied",
        ),
        (
            Some("-I OUTPUT"),
            false,
            "`iptables -w -t nat -I OUTPUT 1 -d 169.254.170.2/32 -p tcp",
        ),
        (
            None,
            true,
            "the iptables program is not installed (not found in PATH)",
        ),
        (
            Some("-A DECKHAND"),
            false,
            "`iptables -w -t nat -A DECKHAND-CREDENTIALS -p tcp -j DNAT --to-destination 172.17.0.1:51679` failed",
        ),
    ];
    for (refuse, missing, message) in table {
        let mut nat = NatTable::with_builtins();
        nat.refuse = refuse.map(|prefix| {
            // -S of the chain is how install asks whether it exists; refusing it means -N is
            // refused as well (the same missing right).
            if prefix == "-S DECKHAND" {
                "-N".to_string()
            } else {
                prefix.to_string()
            }
        });
        nat.missing = missing;
        let iptables = FakeIptables::new(nat);
        let error = CredentialsRedirect::install(Box::new(iptables.clone()), &wanted)
            .err()
            .expect("fails");
        assert!(error.to_string().contains(message), "{error} / {message}");
        let left = iptables.table();
        assert!(!left.chains.contains_key(REDIRECT_CHAIN), "{left:?}");
        assert!(left.rules("PREROUTING").is_empty(), "{left:?}");
        assert!(left.rules("OUTPUT").is_empty(), "{left:?}");
    }
}

#[test]
fn the_handle_removes_at_stop_or_drop_and_only_once() {
    let iptables = FakeIptables::new(NatTable::with_builtins());
    let wanted = target(docker0());
    let mut redirect =
        CredentialsRedirect::install(Box::new(iptables.clone()), &wanted).expect("installs");
    assert_exactly_one_set(&iptables.table(), &wanted, &[]);
    redirect.remove().expect("removes");
    assert!(!iptables.table().chains.contains_key(REDIRECT_CHAIN));
    let calls = iptables.table().calls.len();
    drop(redirect);
    assert_eq!(iptables.table().calls.len(), calls, "removed once");

    let redirect =
        CredentialsRedirect::install(Box::new(iptables.clone()), &wanted).expect("installs");
    drop(redirect);
    assert!(!iptables.table().chains.contains_key(REDIRECT_CHAIN));
}

#[test]
fn destinations_for_log_lines() {
    assert_eq!(target(docker0()).destination(), "172.17.0.1:51679");
    assert_eq!(target(None).destination(), "127.0.0.1:51679");
}
