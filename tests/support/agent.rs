//! Runs the real `deckhand run` for whole-agent tests: its own temp directories, API socket,
//! free introspection port, empty config file and unique cluster name (so its containers are
//! told apart), its log captured line by line; the agent is killed and every container of its
//! cluster removed when the test ends. Needs `support/docker.rs` as `docker_support`.
#![allow(dead_code)]

pub use super::docker_support::free_port;
use super::docker_support::{ensure_busybox_image, unique_id, TempDir, TEST_IMAGE};
use deckhand::cli::client::{ApiClient, ApiResponse};
use deckhand::docker::DockerClient;
use deckhand::report::Event;
use deckhand::runtime::ContainerRuntime;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

pub const DEADLINE: Duration = Duration::from_secs(60);

/// The lock file that serializes, across test processes, the tests whose agents install the
/// host's one redirect of 169.254.170.2:80 (`DECKHAND_CREDENTIALS_ENDPOINT=true`).
pub const CREDENTIALS_REDIRECT_LOCK_FILE: &str = "/tmp/deckhand-test-credentials-redirect.lock";

/// Takes the lock of [`CREDENTIALS_REDIRECT_LOCK_FILE`] (waiting for another test process that
/// holds it); held until the returned file is dropped. Take it before starting an agent with
/// `DECKHAND_CREDENTIALS_ENDPOINT=true` and drop it after that agent is gone.
pub fn lock_credentials_redirect() -> std::fs::File {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(CREDENTIALS_REDIRECT_LOCK_FILE)
        .unwrap_or_else(|error| panic!("{CREDENTIALS_REDIRECT_LOCK_FILE}: {error}"));
    file.lock()
        .unwrap_or_else(|error| panic!("lock {CREDENTIALS_REDIRECT_LOCK_FILE}: {error}"));
    file
}

/// A test's turn with the host's one redirect of 169.254.170.2:80: the lock of
/// [`lock_credentials_redirect`] taken, a redirect an earlier run left removed; at the drop the
/// redirect is removed again, pass or fail, and then the lock is let go. Take it before the
/// agent starts and declare it before the agent, so it is dropped after the agent is gone.
pub struct RedirectTurn {
    _lock: std::fs::File,
}

impl RedirectTurn {
    pub fn take() -> RedirectTurn {
        super::docker_support::ensure_program("iptables", "iptables");
        let lock = lock_credentials_redirect();
        deckhand::host::credentials_redirect::remove(
            &mut deckhand::host::credentials_redirect::SystemIptables,
        )
        .expect("remove a redirect left by an earlier run");
        RedirectTurn { _lock: lock }
    }
}

impl Drop for RedirectTurn {
    fn drop(&mut self) {
        use deckhand::host::credentials_redirect::{remove, SystemIptables};
        if let Err(error) = remove(&mut SystemIptables) {
            eprintln!("cannot remove the test's redirect: {error}");
        }
    }
}

/// The lines of `iptables -w -t nat -S` that are deckhand's redirect: its chain, its rules, and
/// the jumps to it.
pub fn redirect_rules() -> Vec<String> {
    let output = Command::new("iptables")
        .args(["-w", "-t", "nat", "-S"])
        .output()
        .expect("run iptables");
    assert!(
        output.status.success(),
        "iptables -t nat -S failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| line.contains(deckhand::host::credentials_redirect::REDIRECT_CHAIN))
        .map(str::to_string)
        .collect()
}

/// Every file under `directory`, read whole, with its path: where a test looks for what must
/// never be written down.
pub fn files_under(directory: &Path, found: &mut Vec<(String, Vec<u8>)>) {
    let Ok(entries) = std::fs::read_dir(directory) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, found);
        } else if let Ok(bytes) = std::fs::read(&path) {
            found.push((path.display().to_string(), bytes));
        }
    }
}

/// Whether `needle` is anywhere in `haystack`.
pub fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

/// A one-container task: busybox httpd answering `hello from <family>` on `host_port`.
pub fn web_definition(family: &str, host_port: u16, marker: &str) -> String {
    format!(
        r#"{{
  "family": "{family}",
  "containerDefinitions": [{{
    "name": "web",
    "image": "{TEST_IMAGE}",
    "command": ["sh", "-c", "mkdir -p /www && echo 'hello from {marker}' > /www/index.html && exec httpd -f -p 80 -h /www"],
    "portMappings": [{{"containerPort": 80, "hostPort": {host_port}}}],
    "stopTimeout": 2,
    "dockerLabels": {{"test-marker": "{marker}"}}
  }}]
}}"#
    )
}

pub struct Agent {
    pub child: Option<Child>,
    pub directory: TempDir,
    pub socket: PathBuf,
    pub tasks_dir: PathBuf,
    pub introspection: Option<SocketAddr>,
    pub cluster: String,
    pub docker: DockerClient,
    /// Environment of the agent process, kept so that [`Agent::restart`] starts it the same way.
    env: Vec<(String, String)>,
    /// The command that runs deckhand, kept for [`Agent::restart`] too.
    command: Vec<String>,
    config: PathBuf,
    log: Arc<Mutex<Vec<String>>>,
    log_lines: Receiver<String>,
}

/// How a test agent starts. Its environment always has `DECKHAND_CREDENTIALS_ENDPOINT=false`
/// before `extra_env`: the redirect of 169.254.170.2:80 is one per host, and parallel test agents
/// would replace each other's. The tests of the redirect (`tests/agent_credentials_redirect.rs`)
/// set it to `true` in `extra_env`, one test process at a time.
pub struct AgentOptions {
    pub introspection: bool,
    pub extra_env: Vec<(String, String)>,
}

impl Default for AgentOptions {
    fn default() -> AgentOptions {
        AgentOptions {
            introspection: true,
            extra_env: Vec::new(),
        }
    }
}

impl Agent {
    /// Starts an agent and waits until it logs that it is ready.
    pub fn start(docker: DockerClient, options: AgentOptions) -> Agent {
        Agent::start_with_command(docker, options, Vec::new())
    }

    /// Like [`Agent::start`], with `command` running deckhand (an emulator and its arguments
    /// before another architecture's binary; empty: this build's binary).
    pub fn start_with_command(
        docker: DockerClient,
        options: AgentOptions,
        command: Vec<String>,
    ) -> Agent {
        ensure_busybox_image(&docker);
        let directory = TempDir::new("dh-agent");
        let socket = directory.path.join("run").join("api.sock");
        let tasks_dir = directory.path.join("tasks.d");
        std::fs::create_dir_all(&tasks_dir).expect("tasks.d");
        let config = directory.path.join("deckhand.conf");
        std::fs::write(&config, "# empty: every value comes from the environment\n")
            .expect("config file");
        let cluster = format!("dh-test-{}", unique_id());
        let introspection = if options.introspection {
            Some(SocketAddr::from(([127, 0, 0, 1], free_port())))
        } else {
            None
        };
        let mut env: Vec<(String, String)> = vec![
            (
                "DECKHAND_API_SOCKET".into(),
                socket.to_string_lossy().into_owned(),
            ),
            (
                "DECKHAND_TASKS_DIR".into(),
                tasks_dir.to_string_lossy().into_owned(),
            ),
            (
                "ECS_DATADIR".into(),
                directory.path.join("data").to_string_lossy().into_owned(),
            ),
            ("ECS_CLUSTER".into(), cluster.clone()),
            (
                "DECKHAND_INTROSPECTION_ADDR".into(),
                introspection.map(|a| a.to_string()).unwrap_or_default(),
            ),
            // The test image exists only locally: never try a registry.
            ("ECS_IMAGE_PULL_BEHAVIOR".into(), "prefer-cached".into()),
            ("ECS_CONTAINER_STOP_TIMEOUT".into(), "2s".into()),
            ("ECS_LOGLEVEL".into(), "info".into()),
            // Never the well-known port: several agents run at once.
            (
                "DECKHAND_TASK_METADATA_PORT".into(),
                free_port().to_string(),
            ),
            // The host's one redirect of 169.254.170.2:80: off unless a test asks for it.
            ("DECKHAND_CREDENTIALS_ENDPOINT".into(), "false".into()),
        ];
        env.extend(options.extra_env.iter().cloned());
        // A test's own ECS_CLUSTER (the last one given wins, as in the agent) is whose
        // containers the drop removes.
        let cluster = env
            .iter()
            .rev()
            .find(|(key, _)| key == "ECS_CLUSTER")
            .map_or(cluster, |(_, value)| value.clone());
        let (child, log, log_lines) = spawn_agent(&command, &config, &env);
        let agent = Agent {
            child: Some(child),
            directory,
            socket,
            tasks_dir,
            introspection,
            cluster,
            docker,
            env,
            command,
            config,
            log,
            log_lines,
        };
        agent.wait_for_log(" ready: ");
        agent
    }

    /// SIGKILLs the agent (no clean-up of any kind) and waits until it is gone.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the agent again over the same data directory, cluster, socket and port (after
    /// [`Agent::kill9`] or an exit) and waits until it is ready. The log starts afresh.
    pub fn restart(&mut self) {
        self.restart_without_waiting();
        self.wait_for_log(" ready: ");
    }

    /// Sets `key` for the next [`Agent::restart`] (the last value given wins).
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.push((key.to_string(), value.to_string()));
    }

    /// Like [`Agent::restart`] without waiting for readiness.
    pub fn restart_without_waiting(&mut self) {
        assert!(self.child.is_none(), "the agent is still running");
        let (child, log, log_lines) = spawn_agent(&self.command, &self.config, &self.env);
        self.child = Some(child);
        self.log = log;
        self.log_lines = log_lines;
    }

    /// Waits for a log line containing `text` (lines already logged count).
    pub fn wait_for_log(&self, text: &str) -> String {
        if let Some(line) = self.log().into_iter().find(|line| line.contains(text)) {
            return line;
        }
        let deadline = Instant::now() + DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.log_lines.recv_timeout(left) {
                Ok(line) if line.contains(text) => return line,
                Ok(_) => {}
                Err(_) => panic!(
                    "the agent never logged {text:?}; log:\n{}",
                    self.log().join("\n")
                ),
            }
        }
    }

    pub fn log(&self) -> Vec<String> {
        self.log.lock().expect("log").clone()
    }

    pub fn client(&self) -> ApiClient {
        ApiClient::new(&self.socket)
    }

    pub fn request(&self, method: &str, target: &str, body: Option<&[u8]>) -> ApiResponse {
        self.client()
            .request(method, target, body, Duration::from_secs(70))
            .unwrap_or_else(|error| panic!("{method} {target}: {error}"))
    }

    /// Runs the CLI against this agent.
    pub fn cli(&self, args: &[&str]) -> Output {
        let child = Command::new(env!("CARGO_BIN_EXE_deckhand"))
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the CLI");
        let (sender, receiver) = mpsc::channel();
        thread::spawn(move || {
            let _ = sender.send(child.wait_with_output());
        });
        receiver
            .recv_timeout(DEADLINE)
            .unwrap_or_else(|_| panic!("deckhand {args:?} did not finish"))
            .expect("wait")
    }

    /// Submits through the CLI; returns the task id.
    pub fn submit(&self, definition: &str) -> String {
        let path = self
            .directory
            .path
            .join(format!("submit-{}.json", unique_id()));
        std::fs::write(&path, definition).expect("write definition");
        let output = self.cli(&["submit", &path.to_string_lossy()]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "submit failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    }

    /// Waits (in event long polls) until `predicate` holds for an event; returns it.
    pub fn wait_for_event(&self, predicate: impl Fn(&Event) -> bool) -> Event {
        let deadline = Instant::now() + DEADLINE;
        let mut cursor = 0;
        loop {
            assert!(Instant::now() < deadline, "the awaited event never came");
            let response = self.request("GET", &format!("/v1/events?since={cursor}&wait=5"), None);
            assert_eq!(response.status, 200, "{:?}", response.body);
            let events: Vec<Event> =
                serde_json::from_value(response.body["events"].clone()).expect("events");
            for event in events {
                cursor = cursor.max(event.seq);
                if predicate(&event) {
                    return event;
                }
            }
        }
    }

    /// Waits for the task-level event `status` of `task`.
    pub fn wait_for_task_status(&self, task: &str, status: &str) -> Event {
        self.wait_for_event(|event| {
            event.task == task && event.container.is_none() && event.status == status
        })
    }

    /// The inspect object of a task.
    pub fn inspect(&self, task: &str) -> serde_json::Value {
        let response = self.request("GET", &format!("/v1/tasks/{task}"), None);
        assert_eq!(response.status, 200, "{:?}", response.body);
        response.body
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Sends a signal with the shell's built-in `kill` (no extra package needed).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("sh")
            .arg("-c")
            .arg(format!("kill -{signal} {}", self.pid()))
            .status()
            .expect("sh");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Waits for the agent to exit; returns its status and how long it took.
    pub fn wait_exit(&mut self, timeout: Duration) -> (ExitStatus, Duration) {
        let started = Instant::now();
        let mut child = self.child.take().expect("running");
        let (sender, receiver) = mpsc::channel();
        let pid = child.id();
        thread::spawn(move || {
            let _ = sender.send(child.wait());
        });
        match receiver.recv_timeout(timeout) {
            Ok(status) => (status.expect("wait"), started.elapsed()),
            Err(_) => {
                let _ = Command::new("sh")
                    .arg("-c")
                    .arg(format!("kill -KILL {pid}"))
                    .status();
                panic!("the agent did not exit within {timeout:?}")
            }
        }
    }

    /// Containers of this agent's cluster, as Docker lists them.
    pub fn containers(&self) -> Vec<deckhand::runtime::ContainerSummary> {
        self.docker
            .list_containers(&[format!("com.amazonaws.ecs.cluster={}", self.cluster)])
            .expect("list containers")
    }

    pub fn socket_path(&self) -> &Path {
        &self.socket
    }
}

type SpawnedAgent = (Child, Arc<Mutex<Vec<String>>>, Receiver<String>);

/// The agent binary: `DECKHAND_TEST_AGENT_BINARY` (a release build, to measure it), else this
/// build's.
fn agent_binary() -> PathBuf {
    std::env::var_os("DECKHAND_TEST_AGENT_BINARY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_deckhand")))
}

/// Spawns `program` (a command line that runs deckhand, e.g. under a wrapper), or the agent
/// binary when it is empty.
fn spawn_agent(program: &[String], config: &Path, env: &[(String, String)]) -> SpawnedAgent {
    let mut command = match program.split_first() {
        Some((first, rest)) => {
            let mut command = Command::new(first);
            command.args(rest);
            command
        }
        None => Command::new(agent_binary()),
    };
    command
        .arg("run")
        .arg("--config")
        .arg(config)
        .env_remove("RUST_LOG")
        .env_remove("NOTIFY_SOCKET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("spawn deckhand run");
    let stderr = child.stderr.take().expect("stderr");
    let log = Arc::new(Mutex::new(Vec::new()));
    let (sender, log_lines) = mpsc::channel();
    {
        let log = log.clone();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[agent] {line}");
                log.lock().expect("log").push(line.clone());
                let _ = sender.send(line);
            }
        });
    }
    (child, log, log_lines)
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        for container in self.containers() {
            let _ = self.docker.remove_container(&container.id, true);
        }
    }
}

/// Fetches `http://127.0.0.1:<port>/` and returns the whole answer (what busybox httpd serves).
pub fn http_get(port: u16) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer)
}

/// Fetches the page until it contains `expected`, for at most 20 s: Docker reports RUNNING
/// before the server inside the container has bound its port, and nothing signals that moment.
pub fn http_get_eventually(port: u16, expected: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let answer = http_get(port).unwrap_or_default();
        if answer.contains(expected) || Instant::now() >= deadline {
            return answer;
        }
        thread::sleep(Duration::from_millis(100));
    }
}
