//! Helpers for tests that need the real Docker Engine. Include with
//! `#[path = "support/docker.rs"] mod docker_support;`.
//!
//! - [`docker_client_or_skip`]: a connected client, or `None` (test skipped, with a message) when
//!   Docker is unreachable — unless `DECKHAND_REQUIRE_DOCKER=1`, which makes the test FAIL instead.
//! - [`ensure_busybox_image`]: the test image [`TEST_IMAGE`], imported once from Debian's static
//!   busybox through the client's own import endpoint (no registry needed).
//! - [`ensure_program`]: installs a Debian package a test needs when it is missing (as root with
//!   `apt-get`), or fails with the command that installs it.
//! - [`TestContainers`]: a unique label and names for one test's containers, and removal of every
//!   container carrying that label when dropped.
//! - [`LocalRegistry`]: a `docker-registry` on a free 127.0.0.1 port (optionally with htpasswd
//!   auth) over a storage directory, stopped when dropped; [`push_to_registry`] fills it.
//! - [`TempDir`], [`unique_id`]: scratch directories and names that are unique across parallel
//!   test processes.
//!
//! Not every test file uses every helper.
#![allow(dead_code)]

#[path = "scratch.rs"]
mod scratch;
pub use scratch::{unique_id, TempDir};
#[path = "packages.rs"]
mod packages;
pub use packages::ensure_program;

use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use deckhand::docker::DockerClient;
use deckhand::runtime::{ContainerRuntime, RuntimeError, Timeouts};

/// The image every real-Docker test runs: a root filesystem holding only static busybox and its
/// applet links (`sh`, `sleep`, `true`, …).
pub const TEST_IMAGE: &str = "deckhand-test/busybox:latest";
const TEST_IMAGE_REPOSITORY: &str = "deckhand-test/busybox";
const TEST_IMAGE_TAG: &str = "latest";
/// Where Debian's `busybox-static` puts the binary.
const BUSYBOX_PATH: &str = "/bin/busybox";
/// The label every test container carries (value `1`), next to its test's unique label.
pub const TEST_LABEL: &str = "deckhand-test";

/// Whether a test that needs Docker must fail (not skip) without it.
pub fn docker_required() -> bool {
    std::env::var("DECKHAND_REQUIRE_DOCKER").is_ok_and(|value| value == "1")
}

/// A client for `DOCKER_HOST` (default socket), or `None` after printing why the test is
/// skipped. Panics instead when `DECKHAND_REQUIRE_DOCKER=1`.
pub fn docker_client_or_skip(test_name: &str) -> Option<DockerClient> {
    match DockerClient::from_env(Timeouts::default()) {
        Ok(client) => Some(client),
        Err(error) if docker_required() => {
            panic!("{test_name}: Docker is required (DECKHAND_REQUIRE_DOCKER=1) but: {error}")
        }
        Err(error) => {
            eprintln!("SKIPPED {test_name}: Docker unreachable ({error}); set DECKHAND_REQUIRE_DOCKER=1 to fail instead");
            None
        }
    }
}

/// Makes sure [`TEST_IMAGE`] exists and returns its id. Imports it at most once per process;
/// parallel test processes may both import, which is harmless (the tag ends on one of two
/// identical images, and a container keeps the image it was created from).
pub fn ensure_busybox_image(client: &DockerClient) -> String {
    static IMAGE_ID: OnceLock<String> = OnceLock::new();
    IMAGE_ID
        .get_or_init(|| match client.inspect_image(TEST_IMAGE) {
            Ok(image) => image.id,
            Err(RuntimeError::NoSuchImage { .. }) => {
                let tarball = busybox_rootfs_tarball();
                client
                    .import_image(&tarball, TEST_IMAGE_REPOSITORY, TEST_IMAGE_TAG)
                    .unwrap_or_else(|error| panic!("importing {TEST_IMAGE} failed: {error}"))
            }
            Err(error) => panic!("inspecting {TEST_IMAGE} failed: {error}"),
        })
        .clone()
}

/// A tar of `/bin/busybox` plus a `/bin/<applet>` link for each applet, and empty `/tmp`, `/etc`.
fn busybox_rootfs_tarball() -> Vec<u8> {
    ensure_program(BUSYBOX_PATH, "busybox-static");
    let root = TempDir::new("deckhand-busybox-rootfs");
    let bin = root.path.join("bin");
    for directory in [&bin, &root.path.join("tmp"), &root.path.join("etc")] {
        std::fs::create_dir_all(directory).expect("creating a directory in a fresh temp dir");
    }
    std::fs::copy(BUSYBOX_PATH, bin.join("busybox"))
        .unwrap_or_else(|error| panic!("copying {BUSYBOX_PATH}: {error}"));
    let applets = Command::new(BUSYBOX_PATH)
        .arg("--list")
        .output()
        .unwrap_or_else(|error| panic!("running {BUSYBOX_PATH} --list: {error}"));
    for applet in String::from_utf8_lossy(&applets.stdout).lines() {
        let applet = applet.trim();
        if applet.is_empty() || applet == "busybox" || applet.contains('/') {
            continue;
        }
        std::os::unix::fs::symlink("busybox", bin.join(applet))
            .unwrap_or_else(|error| panic!("linking applet {applet}: {error}"));
    }
    let output = Command::new("tar")
        .args(["--numeric-owner", "--owner=0", "--group=0", "-C"])
        .arg(&root.path)
        .args(["-cf", "-", "."])
        .output()
        .unwrap_or_else(|error| panic!("running tar: {error}"));
    assert!(
        output.status.success(),
        "tar failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// One test's containers: a unique label value and unique names. Dropping it force-removes
/// every container carrying the label, even when the test failed halfway.
pub struct TestContainers {
    client: DockerClient,
    /// Value of the `deckhand-test-run` label on this test's containers.
    pub run_id: String,
}

impl TestContainers {
    pub fn new(client: &DockerClient) -> TestContainers {
        TestContainers {
            client: client.clone(),
            run_id: unique_id(),
        }
    }

    /// `deckhand-test=1` and `deckhand-test-run=<run id>`.
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (TEST_LABEL.to_string(), "1".to_string()),
            ("deckhand-test-run".to_string(), self.run_id.clone()),
        ])
    }

    /// The label filter that selects exactly this test's containers.
    pub fn label_filter(&self) -> String {
        format!("deckhand-test-run={}", self.run_id)
    }

    /// A container name unique to this test run.
    pub fn name(&self, role: &str) -> String {
        format!("deckhand-test-{role}-{}", self.run_id)
    }
}

impl Drop for TestContainers {
    fn drop(&mut self) {
        if let Ok(containers) = self.client.list_containers(&[self.label_filter()]) {
            for container in containers {
                let _ = self.client.remove_container(&container.id, true);
            }
        }
    }
}

/// A free TCP port for something a test will bind later (a host port of a task, an agent's
/// listener): below the kernel's ephemeral range (`ip_local_port_range`), so no outgoing
/// connection of this or any other process can take it in between, free on every address
/// right now (probed on `0.0.0.0`, as Docker binds host ports), and never one this test process
/// handed out before. A port from `bind(":0")` is an ephemeral one: under load a connection to
/// Docker or a fake server was given it first, and a task's port binding failed.
pub fn free_port() -> u16 {
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut handed_out = HANDED_OUT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    // Test binaries run one after another, their tests in parallel: start each process at its
    // own place in the range so two processes rarely probe the same ports.
    let low = 10_000u16;
    let high = ephemeral_low.max(low + 1000);
    let span = u32::from(high - low);
    let mut candidate = u32::from(low) + (std::process::id().wrapping_mul(7919) % span);
    for _ in 0..span {
        candidate = if candidate + 1 >= u32::from(high) {
            u32::from(low)
        } else {
            candidate + 1
        };
        let port = candidate as u16;
        if handed_out.contains(&port) {
            continue;
        }
        let free = TcpListener::bind(("0.0.0.0", port)).is_ok()
            && TcpListener::bind(("127.0.0.1", port)).is_ok();
        if free {
            handed_out.push(port);
            return port;
        }
    }
    panic!("no free TCP port between {low} and {high}");
}

/// A `docker-registry` process serving on 127.0.0.1, stopped when dropped.
pub struct LocalRegistry {
    child: Child,
    /// `127.0.0.1:<port>`, the registry part of image references.
    pub address: String,
    _config_dir: TempDir,
}

impl LocalRegistry {
    /// Starts a registry over `storage`, requiring the users of `htpasswd_file` when given.
    /// Returns once it accepts connections (10 s at most).
    pub fn start(storage: &Path, htpasswd_file: Option<&Path>) -> LocalRegistry {
        let port = free_port();
        let address = format!("127.0.0.1:{port}");
        let config_dir = TempDir::new("deckhand-registry-config");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
             http:\n  addr: {address}\n",
            storage.display()
        );
        if let Some(htpasswd_file) = htpasswd_file {
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: deckhand-test\n    path: {}\n",
                htpasswd_file.display()
            ));
        }
        let config_path = config_dir.path.join("config.yml");
        std::fs::write(&config_path, config).expect("writing the registry config");
        ensure_program("docker-registry", "docker-registry");
        let mut child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!("cannot run docker-registry ({error}): install Debian's docker-registry")
            });
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if TcpStream::connect(&address).is_ok() {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("docker-registry on {address} exited with {status}");
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("docker-registry did not listen on {address} within 10 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        LocalRegistry {
            child,
            address,
            _config_dir: config_dir,
        }
    }
}

impl Drop for LocalRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An htpasswd file (bcrypt, as the registry requires) holding one user.
pub fn write_htpasswd(directory: &Path, user: &str, password: &str) -> PathBuf {
    ensure_program("htpasswd", "apache2-utils");
    let output = Command::new("htpasswd")
        .args(["-Bbn", user, password])
        .output()
        .unwrap_or_else(|error| panic!("cannot run htpasswd ({error}): install apache2-utils"));
    assert!(output.status.success(), "htpasswd failed");
    let path = directory.join("htpasswd");
    std::fs::write(&path, output.stdout).expect("writing the htpasswd file");
    path
}

/// Pushes local `image` to `registry_address` as `<registry_address>/<repository_and_tag>` with
/// the `docker` CLI (test set-up only), then drops that local tag so a pull really pulls.
/// Returns the pushed reference.
pub fn push_to_registry(image: &str, registry_address: &str, repository_and_tag: &str) -> String {
    let reference = format!("{registry_address}/{repository_and_tag}");
    for args in [
        vec!["tag", image, reference.as_str()],
        vec!["push", reference.as_str()],
        vec!["rmi", reference.as_str()],
    ] {
        let output = Command::new("docker")
            .args(&args)
            .output()
            .unwrap_or_else(|error| panic!("cannot run docker {args:?}: {error}"));
        assert!(
            output.status.success(),
            "docker {args:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    reference
}

/// Removes a local image tag, ignoring "no such image" (test clean-up).
pub fn remove_image_tag(reference: &str) {
    let _ = Command::new("docker")
        .args(["rmi", reference])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Reads an event stream on its own thread so a test can wait for an event with a deadline.
/// Dropping it cancels the stream and joins the thread.
pub struct EventCollector {
    receiver: std::sync::mpsc::Receiver<Result<deckhand::runtime::RuntimeEvent, RuntimeError>>,
    canceller: deckhand::runtime::StreamCanceller,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EventCollector {
    /// Subscribes with `filter`; events that happen after this returns are seen.
    pub fn subscribe(
        client: &DockerClient,
        filter: &deckhand::runtime::EventFilter,
    ) -> EventCollector {
        let mut stream = client
            .events(filter)
            .unwrap_or_else(|error| panic!("subscribing to Docker events failed: {error}"));
        let canceller = stream.canceller();
        let (sender, receiver) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("test-docker-events".into())
            .spawn(move || loop {
                match stream.next_event() {
                    Ok(Some(event)) => {
                        if sender.send(Ok(event)).is_err() {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(error) => {
                        let _ = sender.send(Err(error));
                        return;
                    }
                }
            })
            .expect("spawning the event reader thread");
        EventCollector {
            receiver,
            canceller,
            thread: Some(thread),
        }
    }

    /// The first event matching `wanted` within `within`; panics (naming what was seen instead)
    /// when none comes. Events that do not match are returned in `skipped` order in the panic.
    pub fn wait_for(
        &self,
        what: &str,
        within: Duration,
        wanted: impl Fn(&deckhand::runtime::RuntimeEvent) -> bool,
    ) -> deckhand::runtime::RuntimeEvent {
        let deadline = Instant::now() + within;
        let mut skipped = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.receiver.recv_timeout(left) {
                Ok(Ok(event)) if wanted(&event) => return event,
                Ok(Ok(event)) => skipped.push(format!("{} {}", event.action, event.id)),
                Ok(Err(error)) => panic!("event stream failed while waiting for {what}: {error}"),
                Err(_) => panic!("no {what} event within {within:?}; saw {skipped:?}"),
            }
        }
    }

    /// The next event, waiting at most `within`; `None` when none came (or the stream ended).
    pub fn next_within(&self, within: Duration) -> Option<deckhand::runtime::RuntimeEvent> {
        match self.receiver.recv_timeout(within) {
            Ok(Ok(event)) => Some(event),
            _ => None,
        }
    }

    /// Every event that arrived so far, without waiting.
    pub fn drain(&self) -> Vec<deckhand::runtime::RuntimeEvent> {
        self.receiver.try_iter().filter_map(Result::ok).collect()
    }
}

impl Drop for EventCollector {
    fn drop(&mut self) {
        self.canceller.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
