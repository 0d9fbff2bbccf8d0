//! The fuzz entry points for files read on the host: `/proc/meminfo`, what `/metrics` reads
//! (`/proc`, cgroup files), the local secret store, and `iptables -S` listings.

/// `/proc/meminfo` (the host's memory, §9a): the parser never panics, and a `MemTotal` it reads
/// is the number on its line scaled down to MiB.
pub fn meminfo(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Some(mib) = crate::host::mem_total_mib(&text) {
        let line = text
            .lines()
            .find(|line| line.starts_with("MemTotal:"))
            .expect("a MemTotal was read from some line");
        let number: u64 = line
            .split_whitespace()
            .nth(1)
            .and_then(|word| word.parse().ok())
            .expect("a MemTotal that was read has a number");
        assert!(mib <= number, "{mib} MiB from {line:?}");
    }
}

/// The files the `/metrics` page and `GET /v1/stats` read (`/proc/self/stat`,
/// `/proc/self/status`, `/proc/stat`, `/proc/meminfo`, `/proc/<pid>/net/dev`, a container's
/// cgroup `memory.current`, `memory.stat`, `memory.max`, `cpu.stat`, `cpuacct.usage`, `io.stat`,
/// `blkio.throttle.io_service_bytes_recursive`, `cgroup.procs`) and label values from
/// task definitions: the parsers never panic, and any text written as a label value on a
/// sample line reads back as that text, on one line.
pub fn metrics_files(data: &[u8]) {
    use crate::metrics::exposition::{read_sample_line, Exposition};
    use crate::metrics::{cgroup, process, usage};
    let text = String::from_utf8_lossy(data);
    let _ = process::parse_stat(&text);
    let _ = process::parse_resident_bytes(&text);
    let _ = process::parse_boot_time(&text);
    let _ = cgroup::parse_single_number(&text);
    let _ = cgroup::parse_cpu_stat_usage_usec(&text);
    let _ = cgroup::is_docker_id(&text);
    let _ = usage::parse_memory_stat_value(&text, "inactive_file");
    let _ = usage::parse_memory_limit(&text);
    let _ = usage::parse_io_stat(&text);
    let _ = usage::parse_blkio_service_bytes(&text);
    let _ = usage::parse_first_pid(&text);
    let _ = usage::parse_net_dev(&text);
    if let Some(cpu) = usage::parse_host_cpu(&text) {
        assert!(cpu.busy <= cpu.total, "{cpu:?} from {text:?}");
    }
    let _ = usage::parse_meminfo_bytes(&text, "MemAvailable");

    let mut page = Exposition::new();
    page.sample_integer(
        "deckhand_container_memory_usage_bytes",
        &[("task", "t"), ("family", &text), ("container", &text)],
        1,
    );
    let written = page.into_string();
    let line = written
        .strip_suffix('\n')
        .expect("a sample line ends with a line feed");
    assert!(
        !line.contains('\n'),
        "a label value broke the line: {line:?}"
    );
    let (name, labels, value) =
        read_sample_line(line).unwrap_or_else(|| panic!("the line does not read back: {line:?}"));
    assert_eq!(name, "deckhand_container_memory_usage_bytes");
    assert_eq!(value, "1");
    let expected: Vec<(String, String)> =
        [("task", "t"), ("family", &*text), ("container", &*text)]
            .iter()
            .map(|(label, value)| (label.to_string(), value.to_string()))
            .collect();
    assert_eq!(labels, expected, "labels changed on the way: {line:?}");
}

/// The secret store (`DECKHAND_SECRETS_FILE`): the parser never panics, every value it keeps
/// is found under its key, an error never quotes a value, and the store's `Debug` lists no
/// value that is not also a key.
pub fn secrets_file(data: &[u8]) {
    match crate::secrets::parse_secrets(data) {
        Ok(store) => {
            let document: serde_json::Value =
                serde_json::from_slice(data).expect("a parsed secrets file is JSON");
            let entries = document
                .as_object()
                .expect("a parsed secrets file is an object");
            for (key, value) in entries {
                let kept = store.value(key).expect("every key is kept");
                match value {
                    serde_json::Value::String(text) => assert_eq!(kept, text),
                    other => assert_eq!(kept, other.to_string()),
                }
                let _ = store.registry_credentials(key);
            }
            let debug = format!("{store:?}");
            for (key, value) in entries {
                if let Some(text) = value.as_str() {
                    if text.len() > 8 && !entries.keys().any(|key| key.contains(text)) {
                        assert!(!debug.contains(text), "{key}'s value in Debug");
                    }
                }
            }
        }
        Err(message) => assert!(!message.is_empty()),
    }
}

/// `iptables -t nat -S <chain>` as the credentials redirect reads it: never a panic; every rule
/// read (of a hook: jumping to the chain asked for) is made of words of the listing, and the rule
/// set for a bridge named by the text's first word reads back from its own listing.
pub fn iptables_listing(data: &[u8]) {
    use crate::host::credentials_redirect::{
        jumps_in_listing, rule_set, rules_in_listing, Bridge, RedirectTarget, HOOKS, REDIRECT_CHAIN,
    };
    let text = String::from_utf8_lossy(data);
    for rule in rules_in_listing(&text, REDIRECT_CHAIN) {
        assert!(rule.iter().all(|word| text.contains(word.as_str())));
    }
    for hook in HOOKS {
        for rule in jumps_in_listing(&text, hook, REDIRECT_CHAIN) {
            assert!(
                rule.windows(2)
                    .any(|pair| (pair[0] == "-j" || pair[0] == "-g") && pair[1] == REDIRECT_CHAIN),
                "{rule:?} from {text:?}"
            );
            assert!(rule.iter().all(|word| text.contains(word.as_str())));
        }
    }
    let interface = text.split_whitespace().next().unwrap_or_default();
    let rules = rule_set(&RedirectTarget {
        bridge: Some(Bridge {
            interface: interface.to_string(),
            gateway: std::net::Ipv4Addr::new(172, 17, 0, 1),
        }),
        port: 51679,
    });
    let mut chain_listing = format!("-N {REDIRECT_CHAIN}\n");
    for rule in &rules.chain_rules {
        chain_listing.push_str(&format!("-A {REDIRECT_CHAIN} {}\n", rule.join(" ")));
    }
    assert_eq!(
        rules_in_listing(&chain_listing, REDIRECT_CHAIN),
        rules.chain_rules,
        "{chain_listing:?}"
    );
    for (hook, rule) in &rules.jumps {
        let listing = format!("-P {hook} ACCEPT\n-A {hook} {}\n", rule.join(" "));
        assert_eq!(
            jumps_in_listing(&listing, hook, REDIRECT_CHAIN),
            vec![rule.clone()],
            "{listing:?}"
        );
    }
}
