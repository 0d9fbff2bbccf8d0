//! The Linux task-definition fields on the real Docker Engine: a task definition written as a
//! user would (JSON, through the parser) runs busybox containers that report, into a
//! bind-mounted scratch directory, what they see from inside — host name, `/etc/hosts`,
//! `/etc/resolv.conf`, ulimits, a read-only root, tmpfs and `/dev/shm` sizes, the init process,
//! capabilities, a sysctl, a device, a terminal, no network — and `docker inspect` confirms the
//! rest from outside (CapDrop, swap, OpenStdin, the PID and IPC modes, a published port range).
//!
//! Needs Docker: without it these tests skip with a message, or fail when
//! `DECKHAND_REQUIRE_DOCKER=1`.

#[path = "support/docker.rs"]
mod docker_support;
#[path = "support/engine_events.rs"]
mod engine_events;

use deckhand::docker::DockerClient;
use deckhand::engine::{EngineConfig, EngineHandle, TaskEngine};
use deckhand::runtime::{ContainerInfo, ContainerRuntime};
use deckhand::task::{parse_task_definition, PullBehavior, TaskDefinition};
use docker_support::{docker_client_or_skip, ensure_busybox_image, unique_id, TempDir, TEST_IMAGE};
use engine_events::wait_event;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(60);
const MIB: i64 = 1024 * 1024;

/// An engine on the real Docker Engine with a cluster of its own; on drop it shuts the engine
/// down and force-removes every container of that cluster.
struct DockerHarness {
    client: DockerClient,
    engine: TaskEngine,
    cluster: String,
}

impl DockerHarness {
    fn new(test_name: &str) -> Option<DockerHarness> {
        let client = docker_client_or_skip(test_name)?;
        ensure_busybox_image(&client);
        let cluster = format!("deckhand-test-{}", unique_id());
        let config = EngineConfig {
            cluster: cluster.clone(),
            // The test image exists only locally: no registry to pull from.
            pull_behavior: PullBehavior::PreferCached,
            stop_timeout: Duration::from_secs(5),
            ..EngineConfig::default()
        };
        let engine =
            TaskEngine::start(Arc::new(client.clone()), config).expect("the engine starts");
        Some(DockerHarness {
            client,
            engine,
            cluster,
        })
    }

    fn submit_json(&self, definition: &Value) -> String {
        let parsed = parse_task_definition(definition.to_string().as_bytes())
            .unwrap_or_else(|errors| panic!("the definition is valid: {errors:?}"));
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        self.submit(parsed.definition)
    }

    fn submit(&self, definition: TaskDefinition) -> String {
        self.engine.submit(definition).expect("task accepted").id
    }

    fn docker_id(&self, task_id: &str, container_name: &str) -> String {
        self.engine
            .task(task_id)
            .expect("the task is held until cleanup")
            .container(container_name)
            .and_then(|container| container.docker_id.clone())
            .unwrap_or_else(|| panic!("{container_name} has no Docker id"))
    }

    fn inspect(&self, task_id: &str, container_name: &str) -> ContainerInfo {
        let docker_id = self.docker_id(task_id, container_name);
        self.client
            .inspect_container(&docker_id)
            .unwrap_or_else(|error| panic!("inspecting {container_name}: {error}"))
    }

    /// Docker's whole inspect answer, for the `HostConfig` fields deckhand's client does not read.
    fn docker_inspect(&self, task_id: &str, container_name: &str) -> Value {
        let docker_id = self.docker_id(task_id, container_name);
        let output = Command::new("docker")
            .args(["inspect", &docker_id])
            .output()
            .expect("the docker CLI runs");
        assert!(output.status.success(), "docker inspect {docker_id} failed");
        let answer: Value = serde_json::from_slice(&output.stdout).expect("inspect JSON");
        answer[0].clone()
    }
}

impl Drop for DockerHarness {
    fn drop(&mut self) {
        self.engine.shutdown();
        let filter = format!("com.amazonaws.ecs.cluster={}", self.cluster);
        if let Ok(containers) = self.client.list_containers(&[filter]) {
            for container in containers {
                let _ = self.client.remove_container(&container.id, true);
            }
        }
    }
}

/// What the probe wrote into `name` of the scratch directory.
fn report(directory: &Path, name: &str) -> String {
    std::fs::read_to_string(directory.join(name))
        .unwrap_or_else(|error| panic!("the probe wrote no {name}: {error}"))
        .trim()
        .to_string()
}

/// The probe: each line records one thing the container sees into /out.
const PROBE: &str = r#"
hostname > /out/hostname
cat /etc/hosts > /out/hosts
cat /etc/resolv.conf > /out/resolv
ulimit -n > /out/nofile
ulimit -Hn > /out/nofile_hard
if touch /probe-write 2>/dev/null; then echo writable; else echo read-only; fi > /out/rootfs
grep ' /scratch ' /proc/mounts > /out/tmpfs
touch /scratch/file && echo yes > /out/tmpfs_writable
grep ' /dev/shm ' /proc/mounts > /out/shm
tr '\0' ' ' < /proc/1/cmdline > /out/pid1
grep -E '^(CapEff|NoNewPrivs):' /proc/self/status > /out/status
cat /proc/sys/net/core/somaxconn > /out/somaxconn
if [ -c /dev/nothing ]; then echo character; else echo missing; fi > /out/device
if [ -t 2 ]; then echo tty; else echo no-tty; fi > /out/tty
echo done > /out/done
"#;

/// Bit `capability` of a `CapEff:` line's hex mask.
fn has_capability(status: &str, capability: u32) -> bool {
    let mask = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .map(str::trim)
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .unwrap_or_else(|| panic!("no CapEff in {status:?}"));
    mask & (1 << capability) != 0
}

const CAP_NET_ADMIN: u32 = 12;
const CAP_MKNOD: u32 = 27;

#[test]
fn linux_fields_take_effect_inside_and_outside_the_container() {
    let Some(harness) = DockerHarness::new("linux_fields_take_effect") else {
        return;
    };
    let scratch = TempDir::new("task-fields");
    let family = format!("fields-{}", unique_id());
    let definition = json!({
        "family": family,
        "volumes": [{"name": "out", "host": {"sourcePath": scratch.path()}}],
        "containerDefinitions": [
            {
                "name": "probe",
                "image": TEST_IMAGE,
                "essential": false,
                "entryPoint": ["sh", "-c"],
                "command": [PROBE],
                "mountPoints": [{"sourceVolume": "out", "containerPath": "/out"}],
                "memory": 64,
                "ulimits": [{"name": "nofile", "softLimit": 1024, "hardLimit": 2048}],
                "linuxParameters": {
                    "initProcessEnabled": true,
                    "capabilities": {"add": ["CAP_NET_ADMIN"], "drop": ["MKNOD"]},
                    "devices": [{"hostPath": "/dev/null", "containerPath": "/dev/nothing", "permissions": ["read", "write"]}],
                    "tmpfs": [{"containerPath": "/scratch", "size": 16, "mountOptions": ["noexec", "mode=1770"]}],
                    "sharedMemorySize": 32,
                    "maxSwap": 32,
                    "swappiness": 10
                },
                "readonlyRootFilesystem": true,
                "hostname": "edge-box",
                "extraHosts": [{"hostname": "registry.deckhand.test", "ipAddress": "10.11.12.13"}],
                "dnsServers": ["10.0.0.2"],
                "dnsSearchDomains": ["corp.deckhand.test"],
                "systemControls": [{"namespace": "net.core.somaxconn", "value": "511"}],
                "dockerSecurityOptions": ["no-new-privileges"],
                "interactive": true,
                "pseudoTerminal": true
            },
            {
                "name": "offline",
                "image": TEST_IMAGE,
                "essential": false,
                "entryPoint": ["sh", "-c"],
                "command": ["wc -l < /proc/net/dev > /out/offline_interfaces"],
                "mountPoints": [{"sourceVolume": "out", "containerPath": "/out"}],
                "disableNetworking": true
            },
            {
                "name": "ranges",
                "image": TEST_IMAGE,
                "entryPoint": ["sh", "-c"],
                "command": ["trap 'exit 0' TERM; sleep 3600 & wait"],
                "portMappings": [{"containerPortRange": "9000-9002", "protocol": "udp"}]
            }
        ]
    });
    let id = harness.submit_json(&definition);
    let probe = wait_event(&harness.engine, &id, Some("probe"), "STOPPED", DEADLINE);
    assert_eq!(
        probe.exit_code,
        Some(0),
        "the probe ran to its end: {probe:?}"
    );
    let offline = wait_event(&harness.engine, &id, Some("offline"), "STOPPED", DEADLINE);
    assert_eq!(offline.exit_code, Some(0), "{offline:?}");
    wait_event(&harness.engine, &id, Some("ranges"), "RUNNING", DEADLINE);
    let out = scratch.path();
    assert_eq!(report(out, "done"), "done");

    // Inside the probe.
    assert_eq!(report(out, "hostname"), "edge-box");
    assert!(
        report(out, "hosts").contains("10.11.12.13\tregistry.deckhand.test"),
        "{}",
        report(out, "hosts")
    );
    let resolv = report(out, "resolv");
    assert!(resolv.contains("nameserver 10.0.0.2"), "{resolv}");
    assert!(resolv.contains("search corp.deckhand.test"), "{resolv}");
    assert_eq!(report(out, "nofile"), "1024");
    assert_eq!(report(out, "nofile_hard"), "2048");
    assert_eq!(report(out, "rootfs"), "read-only");
    let tmpfs = report(out, "tmpfs");
    assert!(tmpfs.starts_with("tmpfs /scratch tmpfs "), "{tmpfs}");
    assert!(
        tmpfs.contains("noexec") && tmpfs.contains("size=16384k"),
        "{tmpfs}"
    );
    // (The kernel lists a mode only when it is not tmpfs's default 1777.)
    assert!(tmpfs.contains("mode=1770"), "{tmpfs}");
    assert_eq!(report(out, "tmpfs_writable"), "yes");
    let shm = report(out, "shm");
    assert!(shm.contains("size=32768k"), "{shm}");
    assert!(
        report(out, "pid1").contains("docker-init"),
        "PID 1 is Docker's init: {}",
        report(out, "pid1")
    );
    let status = report(out, "status");
    assert!(
        has_capability(&status, CAP_NET_ADMIN),
        "NET_ADMIN added: {status}"
    );
    assert!(
        !has_capability(&status, CAP_MKNOD),
        "MKNOD dropped: {status}"
    );
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    assert_eq!(report(out, "somaxconn"), "511");
    assert_eq!(report(out, "device"), "character");
    assert_eq!(report(out, "tty"), "tty");
    // Two header lines and the loopback interface: no network but lo.
    assert_eq!(report(out, "offline_interfaces"), "3");

    // Outside, as Docker recorded the create request.
    let inspected = harness.docker_inspect(&id, "probe");
    let host = &inspected["HostConfig"];
    assert_eq!(host["CapDrop"], json!(["MKNOD"]));
    assert_eq!(host["CapAdd"], json!(["NET_ADMIN"]));
    assert_eq!(host["Init"], true);
    assert_eq!(host["ReadonlyRootfs"], true);
    assert_eq!(host["ShmSize"], 32 * MIB);
    assert_eq!(host["Memory"], 64 * MIB);
    assert_eq!(host["MemorySwap"], (64 + 32) * MIB, "memory plus maxSwap");
    assert_eq!(host["MemorySwappiness"], 10);
    assert_eq!(
        host["Ulimits"],
        json!([{"Name": "nofile", "Soft": 1024, "Hard": 2048}])
    );
    assert_eq!(host["SecurityOpt"], json!(["no-new-privileges"]));
    assert_eq!(inspected["Config"]["OpenStdin"], true);
    assert_eq!(inspected["Config"]["Tty"], true);
    assert_eq!(
        harness.docker_inspect(&id, "offline")["Config"]["NetworkDisabled"],
        true
    );

    // The range: every container port published, each on a host port Docker picked.
    let ranges = harness.inspect(&id, "ranges");
    let mut published: Vec<u16> = ranges
        .ports
        .iter()
        .filter(|binding| binding.protocol == "udp" && binding.host_port != 0)
        .map(|binding| binding.container_port)
        .collect();
    published.sort_unstable();
    published.dedup();
    assert_eq!(published, vec![9000, 9001, 9002], "{:?}", ranges.ports);

    harness.engine.stop(&id).expect("stop accepted");
    wait_event(&harness.engine, &id, None, "STOPPED", DEADLINE);
}

#[test]
fn pid_mode_host_and_ipc_mode_none_reach_docker() {
    let Some(harness) = DockerHarness::new("pid_mode_host_and_ipc_mode_none") else {
        return;
    };
    let scratch = TempDir::new("task-namespaces");
    let family = format!("namespaces-{}", unique_id());
    // With the host's process namespace this test's own process is visible in /proc; with
    // ipcMode none there is no /dev/shm mount.
    let script = format!(
        "if [ -d /proc/{} ]; then echo host; else echo private; fi > /out/pid; \
         grep -c ' /dev/shm ' /proc/mounts > /out/shm; echo done > /out/done",
        std::process::id()
    );
    let definition = json!({
        "family": family,
        "pidMode": "host",
        "ipcMode": "none",
        "volumes": [{"name": "out", "host": {"sourcePath": scratch.path()}}],
        "containerDefinitions": [{
            "name": "probe",
            "image": TEST_IMAGE,
            "entryPoint": ["sh", "-c"],
            "command": [script],
            "mountPoints": [{"sourceVolume": "out", "containerPath": "/out"}]
        }]
    });
    let id = harness.submit_json(&definition);
    let probe = wait_event(&harness.engine, &id, Some("probe"), "STOPPED", DEADLINE);
    assert_eq!(probe.exit_code, Some(0), "{probe:?}");
    let out = scratch.path();
    assert_eq!(report(out, "done"), "done");
    assert_eq!(report(out, "pid"), "host");
    assert_eq!(report(out, "shm"), "0");
    let host = harness.docker_inspect(&id, "probe")["HostConfig"].clone();
    assert_eq!(host["PidMode"], "host");
    assert_eq!(host["IpcMode"], "none");
}
