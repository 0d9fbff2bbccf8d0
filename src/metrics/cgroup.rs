//! A running container's memory and CPU, read from its cgroup files at scrape time — no Docker
//! call, so a scrape stays cheap and works while Docker is slow or away.
//!
//! Where Docker puts a container's cgroup depends on the cgroup version and Docker's cgroup
//! driver; the four layouts in use (under `/sys/fs/cgroup`):
//!
//! | layout | memory | CPU |
//! |---|---|---|
//! | v2, systemd driver | `system.slice/docker-<id>.scope/memory.current` | `…/cpu.stat` `usage_usec` |
//! | v2, cgroupfs driver | `docker/<id>/memory.current` | `docker/<id>/cpu.stat` |
//! | v1, cgroupfs driver | `memory/docker/<id>/memory.usage_in_bytes` | `cpuacct/docker/<id>/cpuacct.usage` (ns) |
//! | v1, systemd driver | `memory/system.slice/docker-<id>.scope/…` | `cpuacct/system.slice/docker-<id>.scope/…` |
//!
//! (v1's `cpuacct` is also mounted as `cpu,cpuacct`; both names are tried.) A scrape first
//! looks which layouts' parent directories exist, then tries only those, the one that last
//! worked first, so it costs two or three file reads per container. A
//! container whose files are not there (an agent in a private cgroup namespace, a container
//! that just stopped) has no series. The Docker id is checked to be hex before it goes into a
//! path. The parsers are pure, never panic, and have a fuzz target.

use super::process::read_small_file;
use super::usage::parse_memory_stat_value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The most bytes read from one cgroup file (`cpu.stat` is a few lines).
const MAX_CGROUP_FILE_BYTES: u64 = 64 * 1024;

/// Where Docker keeps a container's cgroup, see the module's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupLayout {
    V2Systemd,
    V2Cgroupfs,
    V1Cgroupfs,
    V1Systemd,
}

impl CgroupLayout {
    pub const ALL: [CgroupLayout; 4] = [
        CgroupLayout::V2Systemd,
        CgroupLayout::V2Cgroupfs,
        CgroupLayout::V1Cgroupfs,
        CgroupLayout::V1Systemd,
    ];

    pub fn is_v2(self) -> bool {
        matches!(self, CgroupLayout::V2Systemd | CgroupLayout::V2Cgroupfs)
    }

    /// The container's directory under a controller (v1) or the unified root (v2).
    fn container_directory(self, docker_id: &str) -> String {
        match self {
            CgroupLayout::V2Systemd | CgroupLayout::V1Systemd => {
                format!("system.slice/docker-{docker_id}.scope")
            }
            CgroupLayout::V2Cgroupfs | CgroupLayout::V1Cgroupfs => format!("docker/{docker_id}"),
        }
    }

    /// The directories whose presence says Docker may put containers in this layout here: the
    /// parent of a container's directory (under a v1 controller: any of them).
    fn parent_directories(self, root: &Path) -> Vec<PathBuf> {
        let parent = match self {
            CgroupLayout::V2Systemd | CgroupLayout::V1Systemd => "system.slice",
            CgroupLayout::V2Cgroupfs | CgroupLayout::V1Cgroupfs => "docker",
        };
        if self.is_v2() {
            vec![root.join(parent)]
        } else {
            ["memory", "cpuacct", "cpu,cpuacct"]
                .iter()
                .map(|controller| root.join(controller).join(parent))
                .collect()
        }
    }

    /// The memory file of a container in this layout.
    pub fn memory_file(self, root: &Path, docker_id: &str) -> PathBuf {
        let directory = self.container_directory(docker_id);
        if self.is_v2() {
            root.join(directory).join("memory.current")
        } else {
            root.join("memory")
                .join(directory)
                .join("memory.usage_in_bytes")
        }
    }

    /// A file of a container's cgroup in this layout: `v2_name` under its unified directory,
    /// or `v1_name` under the v1 `controller`.
    pub fn container_file(
        self,
        root: &Path,
        docker_id: &str,
        controller: &str,
        v1_name: &str,
        v2_name: &str,
    ) -> PathBuf {
        let directory = self.container_directory(docker_id);
        if self.is_v2() {
            root.join(directory).join(v2_name)
        } else {
            root.join(controller).join(directory).join(v1_name)
        }
    }

    /// The `memory.stat` of a container in this layout.
    pub fn memory_stat_file(self, root: &Path, docker_id: &str) -> PathBuf {
        self.container_file(root, docker_id, "memory", "memory.stat", "memory.stat")
    }

    /// The `memory.stat` line Docker's stats subtract from the usage for the memory ECS
    /// reports (the ECS agent's `getMemUsage`): the page cache that can be dropped.
    pub fn reclaimable_memory_key(self) -> &'static str {
        if self.is_v2() {
            "inactive_file"
        } else {
            "cache"
        }
    }

    /// The CPU files of a container in this layout, in the order to try them.
    pub fn cpu_files(self, root: &Path, docker_id: &str) -> Vec<PathBuf> {
        let directory = self.container_directory(docker_id);
        if self.is_v2() {
            vec![root.join(directory).join("cpu.stat")]
        } else {
            ["cpuacct", "cpu,cpuacct"]
                .iter()
                .map(|controller| root.join(controller).join(&directory).join("cpuacct.usage"))
                .collect()
        }
    }
}

/// A Docker id fit to go into a path: hex digits only, at most 64 of them.
pub fn is_docker_id(text: &str) -> bool {
    !text.is_empty() && text.len() <= 64 && text.bytes().all(|byte| byte.is_ascii_hexdigit())
}

/// A file that holds one unsigned number (`memory.current`, `memory.usage_in_bytes`,
/// `cpuacct.usage`), with its line feed.
pub fn parse_single_number(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// `usage_usec` of a cgroup v2 `cpu.stat` (`usage_usec 123456` among other lines).
pub fn parse_cpu_stat_usage_usec(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        if words.next()? != "usage_usec" {
            return None;
        }
        let value = words.next()?.parse().ok()?;
        words.next().is_none().then_some(value)
    })
}

/// One container's usage as read; `None` where its file was not found or not readable.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ContainerUsage {
    pub memory_bytes: Option<u64>,
    pub cpu_seconds: Option<f64>,
}

/// The cgroup file system's root (`/sys/fs/cgroup`, or a directory of made-up files in tests),
/// and the layout that last worked.
#[derive(Debug)]
pub struct CgroupRoot {
    pub root: PathBuf,
    last_layout: AtomicUsize,
}

impl Default for CgroupRoot {
    fn default() -> CgroupRoot {
        CgroupRoot::new("/sys/fs/cgroup")
    }
}

impl CgroupRoot {
    pub fn new(root: impl Into<PathBuf>) -> CgroupRoot {
        CgroupRoot {
            root: root.into(),
            last_layout: AtomicUsize::new(0),
        }
    }

    /// The layouts this host can have containers in (their parent directories exist), looked
    /// up once per scrape so that a host where deckhand sees no container cgroups (a private
    /// cgroup namespace) costs a few `stat` calls, not four tries per container.
    pub fn present_layouts(&self) -> Vec<CgroupLayout> {
        CgroupLayout::ALL
            .into_iter()
            .filter(|layout| {
                layout
                    .parent_directories(&self.root)
                    .iter()
                    .any(|directory| directory.is_dir())
            })
            .collect()
    }

    /// Memory and CPU of the container with `docker_id` ([`CgroupRoot::container_usage_in`]
    /// over the layouts present now).
    pub fn container_usage(&self, docker_id: &str) -> ContainerUsage {
        self.container_usage_in(&self.present_layouts(), docker_id)
    }

    /// Memory and CPU of the container with `docker_id`, from the first of `layouts` (the
    /// last one that worked first) whose memory or CPU file can be read.
    pub fn container_usage_in(&self, layouts: &[CgroupLayout], docker_id: &str) -> ContainerUsage {
        self.container_usage_and_layout(layouts, docker_id).0
    }

    /// [`CgroupRoot::container_usage_in`], and the layout it was read in (`None`: nothing read).
    pub fn container_usage_and_layout(
        &self,
        layouts: &[CgroupLayout],
        docker_id: &str,
    ) -> (ContainerUsage, Option<CgroupLayout>) {
        if !is_docker_id(docker_id) || layouts.is_empty() {
            return (ContainerUsage::default(), None);
        }
        let last =
            CgroupLayout::ALL[self.last_layout.load(Ordering::Relaxed) % CgroupLayout::ALL.len()];
        let remembered = layouts.iter().copied().filter(|layout| *layout == last);
        let others = layouts.iter().copied().filter(|layout| *layout != last);
        for layout in remembered.chain(others) {
            let usage = self.usage_in_layout(layout, docker_id);
            if usage != ContainerUsage::default() {
                if layout != last {
                    let index = CgroupLayout::ALL
                        .iter()
                        .position(|candidate| *candidate == layout)
                        .unwrap_or(0);
                    self.last_layout.store(index, Ordering::Relaxed);
                }
                return (usage, Some(layout));
            }
        }
        (ContainerUsage::default(), None)
    }

    /// [`CgroupRoot::container_usage_in`] with the memory as ECS counts it: the usage less
    /// the reclaimable page cache of `memory.stat` ([`CgroupLayout::reclaimable_memory_key`])
    /// when that is below the usage, as the ECS agent computes it from Docker's stats.
    pub fn container_usage_for_ecs(
        &self,
        layouts: &[CgroupLayout],
        docker_id: &str,
    ) -> ContainerUsage {
        let (mut usage, layout) = self.container_usage_and_layout(layouts, docker_id);
        let (Some(memory), Some(layout)) = (usage.memory_bytes, layout) else {
            return usage;
        };
        let reclaimable = read_small_file(
            &layout.memory_stat_file(&self.root, docker_id),
            MAX_CGROUP_FILE_BYTES,
        )
        .and_then(|text| parse_memory_stat_value(&text, layout.reclaimable_memory_key()));
        if let Some(reclaimable) = reclaimable.filter(|value| *value < memory) {
            usage.memory_bytes = Some(memory - reclaimable);
        }
        usage
    }

    fn usage_in_layout(&self, layout: CgroupLayout, docker_id: &str) -> ContainerUsage {
        let memory_bytes = read_small_file(
            &layout.memory_file(&self.root, docker_id),
            MAX_CGROUP_FILE_BYTES,
        )
        .as_deref()
        .and_then(parse_single_number);
        let cpu_seconds = layout
            .cpu_files(&self.root, docker_id)
            .iter()
            .find_map(|path| read_small_file(path, MAX_CGROUP_FILE_BYTES))
            .and_then(|text| {
                if layout.is_v2() {
                    parse_cpu_stat_usage_usec(&text).map(|micros| micros as f64 / 1e6)
                } else {
                    parse_single_number(&text).map(|nanos| nanos as f64 / 1e9)
                }
            });
        ContainerUsage {
            memory_bytes,
            cpu_seconds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3e5b68f33a3bfaedcb28d466991f6efa79f5b83f256fdf8d307c8730dd3937e7";

    #[test]
    fn only_hex_ids_go_into_paths() {
        assert!(is_docker_id(ID));
        assert!(is_docker_id("3e5b68f33a3b"));
        for bad in ["", "../../etc", "3e5b/68", "g1", &format!("{ID}0")] {
            assert!(!is_docker_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn cgroup_files_parse_or_say_none() {
        assert_eq!(parse_single_number("1884160\n"), Some(1884160));
        assert_eq!(parse_single_number("max\n"), None);
        assert_eq!(parse_single_number("-1\n"), None);
        assert_eq!(parse_single_number(""), None);
        let cpu_stat = "usage_usec 38254\nuser_usec 30000\nsystem_usec 8254\nnr_periods 0\n";
        assert_eq!(parse_cpu_stat_usage_usec(cpu_stat), Some(38254));
        assert_eq!(parse_cpu_stat_usage_usec("user_usec 5\n"), None);
        assert_eq!(parse_cpu_stat_usage_usec("usage_usec\n"), None);
        assert_eq!(parse_cpu_stat_usage_usec("usage_usec 5 6\n"), None);
        assert_eq!(parse_cpu_stat_usage_usec("usage_usec_x 5\n"), None);
        let memory_stat = "anon 8192\nfile 12288\ninactive_file 4096\nactive_file 8192\n";
        assert_eq!(
            parse_memory_stat_value(memory_stat, "inactive_file"),
            Some(4096)
        );
        assert_eq!(parse_memory_stat_value(memory_stat, "cache"), None);
        assert_eq!(parse_memory_stat_value("cache x\n", "cache"), None);
        assert_eq!(parse_memory_stat_value("cache 1 2\n", "cache"), None);
    }

    #[test]
    fn a_root_without_docker_directories_has_no_layout_and_reads_nothing() {
        let root =
            std::env::temp_dir().join(format!("deckhand-cgroup-none-{}", std::process::id()));
        std::fs::create_dir_all(root.join("memory")).unwrap();
        let cgroups = CgroupRoot::new(&root);
        assert!(cgroups.present_layouts().is_empty());
        assert_eq!(cgroups.container_usage(ID), ContainerUsage::default());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn every_layout_is_found_and_a_missing_file_omits_only_its_value() {
        for layout in CgroupLayout::ALL {
            let root = std::env::temp_dir()
                .join(format!("deckhand-cgroup-{}-{layout:?}", std::process::id()));
            let memory = layout.memory_file(&root, ID);
            std::fs::create_dir_all(memory.parent().unwrap()).unwrap();
            std::fs::write(&memory, "1048576\n").unwrap();
            // v1: the last CPU path (`cpu,cpuacct`), to show both controller names are tried.
            let cpu = layout.cpu_files(&root, ID).pop().unwrap();
            std::fs::create_dir_all(cpu.parent().unwrap()).unwrap();
            let cpu_text = if layout.is_v2() {
                "usage_usec 2500000\nuser_usec 1\n"
            } else {
                "2500000000\n"
            };
            std::fs::write(&cpu, cpu_text).unwrap();

            let cgroups = CgroupRoot::new(&root);
            assert_eq!(cgroups.present_layouts(), [layout]);
            assert_eq!(
                cgroups.container_usage(ID),
                ContainerUsage {
                    memory_bytes: Some(1048576),
                    cpu_seconds: Some(2.5),
                },
                "{layout:?}"
            );
            // Found again from the remembered layout.
            assert_eq!(cgroups.container_usage(ID).memory_bytes, Some(1048576));
            // Another container, or a bad id: nothing.
            assert_eq!(cgroups.container_usage("abcdef"), ContainerUsage::default());
            assert_eq!(cgroups.container_usage("../x"), ContainerUsage::default());
            // The memory ECS gets: less the reclaimable cache, when memory.stat has it.
            assert_eq!(
                cgroups.container_usage_for_ecs(&[layout], ID).memory_bytes,
                Some(1048576),
                "{layout:?}: no memory.stat, the usage as it is"
            );
            let stat = format!("{} 48576\nother 1\n", layout.reclaimable_memory_key());
            std::fs::write(layout.memory_stat_file(&root, ID), stat).unwrap();
            assert_eq!(
                cgroups.container_usage_for_ecs(&[layout], ID).memory_bytes,
                Some(1000000),
                "{layout:?}"
            );
            std::fs::remove_file(&cpu).unwrap();
            assert_eq!(
                cgroups.container_usage(ID),
                ContainerUsage {
                    memory_bytes: Some(1048576),
                    cpu_seconds: None,
                },
                "{layout:?}"
            );
            std::fs::remove_dir_all(&root).unwrap();
        }
    }
}
