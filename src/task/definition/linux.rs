//! The container keys that set how Docker runs a container on a Linux host — `ulimits`,
//! `linuxParameters`, `hostname`, `extraHosts`, `dnsServers`, `dnsSearchDomains`,
//! `systemControls`, `dockerSecurityOptions` — with the value rules ECS documents for them, and
//! the rules that need the task's network and IPC modes (which `systemControls` a container may
//! set). Docker would refuse most bad values only at create or start, as a failed task; here they
//! are refused at acceptance with their JSON path.

use super::json::{indexed, join, ContainerPaths, Parser};
use super::keys::{
    CAPABILITIES_KEYS, DEVICE_KEYS, EXTRA_HOST_KEYS, LINUX_PARAMETERS_KEYS, SYSTEM_CONTROL_KEYS,
    TMPFS_KEYS, ULIMIT_KEYS,
};
use crate::task::{
    ContainerDefinition, Device, DevicePermission, ExtraHost, IpcMode, KernelCapabilities,
    LinuxParameters, NetworkMode, SystemControl, Tmpfs, Ulimit,
};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::net::IpAddr;

/// The `ulimits[].name` values ECS accepts.
pub const ULIMIT_NAMES: [&str; 15] = [
    "core",
    "cpu",
    "data",
    "fsize",
    "locks",
    "memlock",
    "msgqueue",
    "nice",
    "nofile",
    "nproc",
    "rss",
    "rtprio",
    "rttime",
    "sigpending",
    "stack",
];

/// The `linuxParameters.capabilities` names ECS accepts (without `CAP_`).
pub const CAPABILITY_NAMES: [&str; 38] = [
    "ALL",
    "AUDIT_CONTROL",
    "AUDIT_WRITE",
    "BLOCK_SUSPEND",
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "IPC_LOCK",
    "IPC_OWNER",
    "KILL",
    "LEASE",
    "LINUX_IMMUTABLE",
    "MAC_ADMIN",
    "MAC_OVERRIDE",
    "MKNOD",
    "NET_ADMIN",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_RAW",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_CHROOT",
    "SYS_MODULE",
    "SYS_NICE",
    "SYS_PACCT",
    "SYS_PTRACE",
    "SYS_RAWIO",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "SYSLOG",
    "WAKE_ALARM",
];

/// The `linuxParameters.tmpfs[].mountOptions` ECS accepts (the part before any `=`).
pub const TMPFS_MOUNT_OPTIONS: [&str; 39] = [
    "defaults",
    "ro",
    "rw",
    "suid",
    "nosuid",
    "dev",
    "nodev",
    "exec",
    "noexec",
    "sync",
    "async",
    "dirsync",
    "remount",
    "mand",
    "nomand",
    "atime",
    "noatime",
    "diratime",
    "nodiratime",
    "bind",
    "rbind",
    "unbindable",
    "runbindable",
    "private",
    "rprivate",
    "shared",
    "rshared",
    "slave",
    "rslave",
    "relatime",
    "norelatime",
    "strictatime",
    "nostrictatime",
    "mode",
    "uid",
    "gid",
    "nr_inodes",
    "nr_blocks",
    "mpol",
];

/// The kernel parameters of the IPC namespace Docker sets per container (`fs.mqueue.*` too).
const IPC_SYSCTLS: [&str; 8] = [
    "kernel.msgmax",
    "kernel.msgmnb",
    "kernel.msgmni",
    "kernel.sem",
    "kernel.shmall",
    "kernel.shmmax",
    "kernel.shmmni",
    "kernel.shm_rmid_forced",
];

/// The kernel's limit on a host name, in bytes (`HOST_NAME_MAX`).
const HOSTNAME_MAX_BYTES: usize = 64;

/// Sizes in MiB must come to bytes that fit Docker's i64.
const MIB_LIMIT: u64 = (i64::MAX as u64) >> 20;

/// Which namespace a kernel parameter belongs to, `None` when Docker cannot set it per container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SysctlNamespace {
    Ipc,
    Network,
}

pub(super) fn sysctl_namespace(name: &str) -> Option<SysctlNamespace> {
    if IPC_SYSCTLS.contains(&name) || name.starts_with("fs.mqueue.") {
        Some(SysctlNamespace::Ipc)
    } else if name.starts_with("net.") {
        Some(SysctlNamespace::Network)
    } else {
        None
    }
}

/// A `systemControls` namespace as Docker sets it per container: a network (`net.*`) or IPC
/// (`fs.mqueue.*`, `kernel.msg*`, `kernel.sem`, `kernel.shm*`) kernel parameter; the error says
/// which are. The Compose mapping applies the same rule to `sysctls`.
pub fn check_system_control(name: &str) -> Result<(), String> {
    match sysctl_namespace(name) {
        Some(_) => Ok(()),
        None => Err(format!(
            "{name:?} is not a namespaced kernel parameter Docker sets per container (net.*, \
             fs.mqueue.*, kernel.msg*, kernel.sem, kernel.shm*)"
        )),
    }
}

/// `name`, `CAP_name` (any case) → ECS's spelling, `None` when not a capability ECS accepts.
pub(super) fn capability_name(text: &str) -> Option<&'static str> {
    let upper = text.to_ascii_uppercase();
    let bare = match upper.strip_prefix("CAP_") {
        Some(rest) if rest != "ALL" => rest,
        Some(_) => return None,
        None => upper.as_str(),
    };
    CAPABILITY_NAMES.iter().copied().find(|name| *name == bare)
}

/// A DNS search domain as Docker accepts it: `.`, or dot-separated labels of letters, digits and
/// inner `-`, with an optional final dot; at most 255 characters.
pub(super) fn is_search_domain(domain: &str) -> bool {
    if domain == "." {
        return true;
    }
    if domain.is_empty() || domain.len() > 255 {
        return false;
    }
    let trimmed = domain.strip_suffix('.').unwrap_or(domain);
    trimmed.split('.').all(|label| {
        !label.is_empty()
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    })
}

fn is_absolute(path: &str) -> bool {
    path.starts_with('/')
}

/// A `dockerSecurityOptions` entry as ECS accepts it on Linux: `no-new-privileges`,
/// `apparmor:PROFILE` or `label:VALUE`; the error says what is expected. The Compose mapping
/// applies the same rule to `security_opt`.
pub fn check_security_option(option: &str) -> Result<(), String> {
    let (kind, argument) = match option.split_once(':') {
        Some((kind, argument)) => (kind, Some(argument)),
        None => (option, None),
    };
    match (kind, argument) {
        ("no-new-privileges", None) => Ok(()),
        ("apparmor" | "label", Some(argument)) if !argument.is_empty() => Ok(()),
        ("credentialspec", _) => Err(
            "credentialspec is for Windows containers and Active Directory; not supported on \
             this host"
                .to_string(),
        ),
        _ => Err(format!(
            "{option:?} is not a security option ECS accepts: expected no-new-privileges, \
             apparmor:PROFILE or label:VALUE"
        )),
    }
}

impl Parser {
    pub(super) fn ulimits(&mut self, object: &Map<String, Value>, path: &str) -> Vec<Ulimit> {
        let mut ulimits: Vec<Ulimit> = Vec::new();
        let mut first_path: HashMap<String, String> = HashMap::new();
        for (item_path, map) in self.objects(object, path, "ulimits") {
            self.check_keys(&item_path, map, &ULIMIT_KEYS);
            let name = self.required_string(map, &item_path, "name");
            for key in ["softLimit", "hardLimit"] {
                if Self::field(map, key).is_none() {
                    self.error(&join(&item_path, key), "required");
                }
            }
            // ECS's limits are 32-bit; -1 is "unlimited".
            let max = i64::from(i32::MAX);
            let soft = self.signed_integer(map, &item_path, "softLimit", -1, max);
            let hard = self.signed_integer(map, &item_path, "hardLimit", -1, max);
            let Some(name) = name else { continue };
            if !ULIMIT_NAMES.contains(&name.as_str()) {
                self.error(
                    &join(&item_path, "name"),
                    format!(
                        "unknown ulimit {name:?}: expected one of {}",
                        ULIMIT_NAMES.join(", ")
                    ),
                );
                continue;
            }
            if let Some(first) = first_path.get(&name) {
                self.error(
                    &join(&item_path, "name"),
                    format!("duplicate ulimit {name:?} (also {first})"),
                );
                continue;
            }
            first_path.insert(name.clone(), item_path.clone());
            let (Some(soft), Some(hard)) = (soft, hard) else {
                continue;
            };
            let unlimited = |limit: i64| if limit == -1 { i64::MAX } else { limit };
            if unlimited(soft) > unlimited(hard) {
                self.error(
                    &join(&item_path, "softLimit"),
                    format!("soft limit {soft} is above the hard limit {hard}"),
                );
            }
            ulimits.push(Ulimit {
                name,
                soft_limit: soft,
                hard_limit: hard,
            });
        }
        ulimits
    }

    pub(super) fn linux_parameters(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
        memory_mib: Option<u64>,
    ) -> LinuxParameters {
        let Some(value) = Self::field(object, "linuxParameters") else {
            return LinuxParameters::default();
        };
        let linux_path = join(path, "linuxParameters");
        let Some(map) = self.object(&linux_path, value) else {
            return LinuxParameters::default();
        };
        self.check_keys(&linux_path, map, &LINUX_PARAMETERS_KEYS);
        let init_process_enabled = self
            .bool(map, &linux_path, "initProcessEnabled")
            .unwrap_or(false);
        let capabilities = self.capabilities(map, &linux_path);
        let devices = self.devices(map, &linux_path);
        let tmpfs = self.tmpfs(map, &linux_path);
        let shared_memory_size_mib =
            self.integer(map, &linux_path, "sharedMemorySize", 1, MIB_LIMIT);
        let max_swap_mib = self.integer(map, &linux_path, "maxSwap", 0, MIB_LIMIT);
        if let Some(swap) = max_swap_mib {
            match memory_mib {
                None => self.error(
                    &join(&linux_path, "maxSwap"),
                    "needs the container's memory (hard limit) to be set: the swap limit is \
                     memory plus maxSwap",
                ),
                Some(memory) if memory.saturating_add(swap) > MIB_LIMIT => self.error(
                    &join(&linux_path, "maxSwap"),
                    format!("memory plus maxSwap is more than {MIB_LIMIT} MiB"),
                ),
                Some(_) => {}
            }
        }
        let swappiness = self.integer(map, &linux_path, "swappiness", 0, 100);
        if swappiness.is_some() && Self::field(map, "maxSwap").is_none() {
            self.warn(
                &join(&linux_path, "swappiness"),
                "ignored: swappiness applies only together with maxSwap",
            );
        }
        LinuxParameters {
            init_process_enabled,
            capabilities,
            devices,
            tmpfs,
            shared_memory_size_mib,
            max_swap_mib,
            swappiness,
        }
    }

    fn capabilities(&mut self, object: &Map<String, Value>, path: &str) -> KernelCapabilities {
        let Some(value) = Self::field(object, "capabilities") else {
            return KernelCapabilities::default();
        };
        let capabilities_path = join(path, "capabilities");
        let Some(map) = self.object(&capabilities_path, value) else {
            return KernelCapabilities::default();
        };
        self.check_keys(&capabilities_path, map, &CAPABILITIES_KEYS);
        let mut lists = [Vec::new(), Vec::new()];
        for (key, list) in ["add", "drop"].into_iter().zip(lists.iter_mut()) {
            let names = self
                .string_list(map, &capabilities_path, key)
                .unwrap_or_default();
            for (index, name) in names.iter().enumerate() {
                match capability_name(name) {
                    Some(known) => list.push(known.to_string()),
                    None => self.error(
                        &indexed(&join(&capabilities_path, key), index),
                        format!(
                            "{name:?} is not a Linux capability ECS accepts (for example \
                             NET_ADMIN, SYS_PTRACE or ALL, with or without CAP_)"
                        ),
                    ),
                }
            }
        }
        let [add, drop] = lists;
        KernelCapabilities { add, drop }
    }

    fn devices(&mut self, object: &Map<String, Value>, path: &str) -> Vec<Device> {
        let mut devices = Vec::new();
        for (item_path, map) in self.objects(object, path, "devices") {
            self.check_keys(&item_path, map, &DEVICE_KEYS);
            let host_path = self.required_string(map, &item_path, "hostPath");
            let container_path = self
                .string(map, &item_path, "containerPath")
                .filter(|text| !text.is_empty());
            for (key, value) in [("hostPath", &host_path), ("containerPath", &container_path)] {
                if let Some(text) = value {
                    if !is_absolute(text) {
                        self.error(
                            &join(&item_path, key),
                            format!("{text:?} must be an absolute path"),
                        );
                    }
                }
            }
            let mut permissions = Vec::new();
            let names = self
                .string_list(map, &item_path, "permissions")
                .unwrap_or_default();
            for (index, name) in names.iter().enumerate() {
                let permission = match name.as_str() {
                    "read" => DevicePermission::Read,
                    "write" => DevicePermission::Write,
                    "mknod" => DevicePermission::Mknod,
                    other => {
                        self.error(
                            &indexed(&join(&item_path, "permissions"), index),
                            format!("unknown permission {other:?}: expected read, write or mknod"),
                        );
                        continue;
                    }
                };
                if !permissions.contains(&permission) {
                    permissions.push(permission);
                }
            }
            if let Some(host_path) = host_path {
                devices.push(Device {
                    host_path,
                    container_path,
                    permissions,
                });
            }
        }
        devices
    }

    fn tmpfs(&mut self, object: &Map<String, Value>, path: &str) -> Vec<Tmpfs> {
        let mut mounts: Vec<Tmpfs> = Vec::new();
        let mut first_path: HashMap<String, String> = HashMap::new();
        for (item_path, map) in self.objects(object, path, "tmpfs") {
            self.check_keys(&item_path, map, &TMPFS_KEYS);
            let container_path = self.required_string(map, &item_path, "containerPath");
            if Self::field(map, "size").is_none() {
                self.error(&join(&item_path, "size"), "required");
            }
            let size_mib = self.integer(map, &item_path, "size", 1, MIB_LIMIT);
            let mount_options = self
                .string_list(map, &item_path, "mountOptions")
                .unwrap_or_default();
            for (index, option) in mount_options.iter().enumerate() {
                let name = option.split('=').next().unwrap_or_default();
                if !TMPFS_MOUNT_OPTIONS.contains(&name) || option.contains(',') {
                    self.error(
                        &indexed(&join(&item_path, "mountOptions"), index),
                        format!(
                            "{option:?} is not a tmpfs mount option ECS accepts (for example \
                             noexec, nosuid or mode=1777)"
                        ),
                    );
                }
            }
            let Some(container_path) = container_path else {
                continue;
            };
            if !is_absolute(&container_path) {
                self.error(
                    &join(&item_path, "containerPath"),
                    format!("{container_path:?} must be an absolute path"),
                );
            }
            if let Some(first) = first_path.get(&container_path) {
                self.error(
                    &join(&item_path, "containerPath"),
                    format!("{container_path:?} is already a tmpfs mount ({first})"),
                );
                continue;
            }
            first_path.insert(container_path.clone(), item_path.clone());
            if let Some(size_mib) = size_mib {
                mounts.push(Tmpfs {
                    container_path,
                    size_mib,
                    mount_options,
                });
            }
        }
        mounts
    }

    /// `hostname`; an empty one asks for nothing.
    pub(super) fn hostname(&mut self, object: &Map<String, Value>, path: &str) -> Option<String> {
        let hostname = self
            .string(object, path, "hostname")
            .filter(|text| !text.is_empty())?;
        let valid = hostname.len() <= HOSTNAME_MAX_BYTES
            && hostname
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
        if !valid {
            self.error(
                &join(path, "hostname"),
                format!(
                    "{hostname:?} is not a valid host name (at most {HOSTNAME_MAX_BYTES} letters, \
                     digits, '-', '_' or '.')"
                ),
            );
        }
        Some(hostname)
    }

    pub(super) fn extra_hosts(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
    ) -> Vec<ExtraHost> {
        let mut hosts = Vec::new();
        for (item_path, map) in self.objects(object, path, "extraHosts") {
            self.check_keys(&item_path, map, &EXTRA_HOST_KEYS);
            let hostname = self.required_string(map, &item_path, "hostname");
            let ip_address = self.required_string(map, &item_path, "ipAddress");
            if let Some(name) = &hostname {
                let valid = !name.is_empty()
                    && !name
                        .chars()
                        .any(|c| c == ':' || c.is_whitespace() || c.is_control());
                if !valid {
                    self.error(
                        &join(&item_path, "hostname"),
                        format!("{name:?} is not a valid host name"),
                    );
                }
            }
            if let Some(address) = &ip_address {
                if address.parse::<IpAddr>().is_err() {
                    self.error(
                        &join(&item_path, "ipAddress"),
                        format!("{address:?} is not an IPv4 or IPv6 address"),
                    );
                }
            }
            if let (Some(hostname), Some(ip_address)) = (hostname, ip_address) {
                hosts.push(ExtraHost {
                    hostname,
                    ip_address,
                });
            }
        }
        hosts
    }

    pub(super) fn dns_servers(&mut self, object: &Map<String, Value>, path: &str) -> Vec<String> {
        let servers = self
            .string_list(object, path, "dnsServers")
            .unwrap_or_default();
        for (index, server) in servers.iter().enumerate() {
            if server.parse::<IpAddr>().is_err() {
                self.error(
                    &indexed(&join(path, "dnsServers"), index),
                    format!("{server:?} is not an IPv4 or IPv6 address"),
                );
            }
        }
        servers
    }

    pub(super) fn dns_search_domains(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
    ) -> Vec<String> {
        let domains = self
            .string_list(object, path, "dnsSearchDomains")
            .unwrap_or_default();
        for (index, domain) in domains.iter().enumerate() {
            if !is_search_domain(domain) {
                self.error(
                    &indexed(&join(path, "dnsSearchDomains"), index),
                    format!("{domain:?} is not a valid DNS search domain"),
                );
            }
        }
        domains
    }

    pub(super) fn system_controls(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
    ) -> Vec<SystemControl> {
        let mut controls: Vec<SystemControl> = Vec::new();
        let mut first_path: HashMap<String, String> = HashMap::new();
        for (item_path, map) in self.objects(object, path, "systemControls") {
            self.check_keys(&item_path, map, &SYSTEM_CONTROL_KEYS);
            let namespace = self.required_string(map, &item_path, "namespace");
            let value = self.required_string(map, &item_path, "value");
            let Some(namespace) = namespace else { continue };
            if let Err(message) = check_system_control(&namespace) {
                self.error(&join(&item_path, "namespace"), message);
                continue;
            }
            if let Some(first) = first_path.get(&namespace) {
                self.error(
                    &join(&item_path, "namespace"),
                    format!("{namespace:?} is already set ({first})"),
                );
                continue;
            }
            first_path.insert(namespace.clone(), item_path.clone());
            if let Some(value) = value {
                controls.push(SystemControl { namespace, value });
            }
        }
        controls
    }

    pub(super) fn docker_security_options(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
    ) -> Vec<String> {
        let options = self
            .string_list(object, path, "dockerSecurityOptions")
            .unwrap_or_default();
        for (index, option) in options.iter().enumerate() {
            if let Err(message) = check_security_option(option) {
                self.error(
                    &indexed(&join(path, "dockerSecurityOptions"), index),
                    message,
                );
            }
        }
        options
    }

    /// Rules between the containers' Linux settings and the task's network and IPC modes.
    pub(super) fn namespace_checks(
        &mut self,
        containers: &[ContainerDefinition],
        paths: &[ContainerPaths],
        network_mode: NetworkMode,
        ipc_mode: Option<IpcMode>,
    ) {
        for (container, at) in containers.iter().zip(paths) {
            for (index, control) in container.system_controls.iter().enumerate() {
                let control_path = join(&indexed(&at.at("systemControls"), index), "namespace");
                match sysctl_namespace(&control.namespace) {
                    Some(SysctlNamespace::Network) if network_mode == NetworkMode::Host => self
                        .error(
                            &control_path,
                            format!(
                                "{:?} is a network parameter: with networkMode host it would \
                                 change the host's own network stack, which ECS does not allow",
                                control.namespace
                            ),
                        ),
                    Some(SysctlNamespace::Ipc) if ipc_mode == Some(IpcMode::Host) => self.error(
                        &control_path,
                        format!(
                            "{:?} is an IPC parameter: with ipcMode host it would change the \
                             host's own IPC namespace, which ECS does not allow",
                            control.namespace
                        ),
                    ),
                    _ => {}
                }
            }
            if container.linux_parameters.shared_memory_size_mib.is_some() {
                let shm_path = at.at("linuxParameters.sharedMemorySize");
                match ipc_mode {
                    Some(IpcMode::Host) => self.warn(
                        &shm_path,
                        "ignored: with ipcMode host the container uses the host's /dev/shm",
                    ),
                    Some(IpcMode::None) => self.warn(
                        &shm_path,
                        "ignored: with ipcMode none the container has no /dev/shm",
                    ),
                    Some(IpcMode::Task) => self.warn(
                        &shm_path,
                        "ignored: with ipcMode task the containers share the sandbox's /dev/shm \
                         (Docker's default size)",
                    ),
                    None => {}
                }
            }
            let mounted: Vec<&str> = container
                .mount_points
                .iter()
                .map(|mount| mount.container_path.as_str())
                .collect();
            for (index, mount) in container.linux_parameters.tmpfs.iter().enumerate() {
                if mounted.contains(&mount.container_path.as_str()) {
                    self.error(
                        &join(
                            &indexed(&at.at("linuxParameters.tmpfs"), index),
                            "containerPath",
                        ),
                        format!(
                            "{:?} is also a mountPoints containerPath",
                            mount.container_path
                        ),
                    );
                }
            }
        }
    }
}
