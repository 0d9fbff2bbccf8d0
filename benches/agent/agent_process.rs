//! One real `deckhand run` process for the bench (the release build cargo made for this bench),
//! with its own directories, API socket, introspection port and cluster; its log goes to a file.
//! The bench talks to it only through its local API, as a user's CLI would: submit, stop, and
//! the event long poll, whose arrival times are the bench's clock.

use deckhand::cli::client::ApiClient;
use deckhand::report::Event;
use std::collections::HashMap;
use std::fs::File;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

const READY_DEADLINE: Duration = Duration::from_secs(30);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(70);

/// When the bench received a task-level event through the long poll.
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    pub instant: Instant,
    pub wall: SystemTime,
    /// The event's own time (milliseconds since the epoch, recorded by the agent).
    pub event_millis: u64,
}

pub struct AgentProcess {
    child: Child,
    client: ApiClient,
    cursor: u64,
    /// Task-level events already read, by (task id, status).
    arrived: HashMap<(String, String), Arrival>,
}

impl AgentProcess {
    /// Starts `deckhand run` and waits until its API answers.
    pub fn start(
        directory: &Path,
        cluster: &str,
        extra_env: &[(&str, &str)],
    ) -> Result<AgentProcess, String> {
        std::fs::create_dir_all(directory)
            .map_err(|error| format!("cannot create {}: {error}", directory.display()))?;
        let config = directory.join("deckhand.conf");
        std::fs::write(&config, "# every value comes from the environment\n")
            .map_err(|error| format!("cannot write {}: {error}", config.display()))?;
        let socket = directory.join("api.sock");
        let introspection_port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map_err(|error| format!("no free loopback port: {error}"))?
            .port();
        let log_path = directory.join("agent.log");
        let log = File::create(&log_path)
            .map_err(|error| format!("cannot create {}: {error}", log_path.display()))?;
        let mut command = Command::new(env!("CARGO_BIN_EXE_deckhand"));
        command
            .arg("run")
            .arg("--config")
            .arg(&config)
            .env("DECKHAND_API_SOCKET", &socket)
            .env("DECKHAND_TASKS_DIR", directory.join("tasks.d"))
            .env("ECS_DATADIR", directory.join("data"))
            .env("ECS_CLUSTER", cluster)
            .env(
                "DECKHAND_INTROSPECTION_ADDR",
                format!("127.0.0.1:{introspection_port}"),
            )
            // The bench image exists only locally: never ask a registry.
            .env("ECS_IMAGE_PULL_BEHAVIOR", "prefer-cached")
            .env("ECS_CONTAINER_STOP_TIMEOUT", "2s")
            .env("ECS_LOGLEVEL", "info")
            .env_remove("RUST_LOG")
            .env_remove("NOTIFY_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        for (key, value) in extra_env {
            command.env(key, value);
        }
        let child = command
            .spawn()
            .map_err(|error| format!("cannot start deckhand run: {error}"))?;
        let mut agent = AgentProcess {
            child,
            client: ApiClient::new(&socket),
            cursor: 0,
            arrived: HashMap::new(),
        };
        let deadline = Instant::now() + READY_DEADLINE;
        loop {
            if let Ok(response) =
                agent
                    .client
                    .request("GET", "/v1/metadata", None, Duration::from_secs(2))
            {
                if response.status == 200 {
                    return Ok(agent);
                }
            }
            if let Ok(Some(status)) = agent.child.try_wait() {
                return Err(format!(
                    "deckhand run exited with {status} before its API answered; see {}",
                    log_path.display()
                ));
            }
            if Instant::now() >= deadline {
                agent.kill();
                return Err(format!(
                    "deckhand run did not answer on its API within {READY_DEADLINE:?}; see {}",
                    log_path.display()
                ));
            }
            // Start-up polling only: nothing measured depends on this interval.
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Submits a task-definition JSON; returns (task id, task ARN).
    pub fn submit(&self, definition_json: &str) -> Result<(String, String), String> {
        let response = self
            .client
            .request(
                "POST",
                "/v1/tasks",
                Some(definition_json.as_bytes()),
                REQUEST_TIMEOUT,
            )
            .map_err(|error| format!("submit: {error}"))?;
        if response.status != 201 {
            return Err(format!(
                "submit answered {}: {}",
                response.status, response.body
            ));
        }
        let field = |name: &str| response.body[name].as_str().map(str::to_string);
        match (field("id"), field("TaskARN")) {
            (Some(id), Some(arn)) => Ok((id, arn)),
            _ => Err(format!(
                "submit answer lacks id or TaskARN: {}",
                response.body
            )),
        }
    }

    pub fn stop(&self, task_id: &str) -> Result<(), String> {
        let response = self
            .client
            .request(
                "POST",
                &format!("/v1/tasks/{task_id}/stop"),
                None,
                REQUEST_TIMEOUT,
            )
            .map_err(|error| format!("stop: {error}"))?;
        if response.status != 202 {
            return Err(format!(
                "stop answered {}: {}",
                response.status, response.body
            ));
        }
        Ok(())
    }

    /// Reads one long poll (at most `wait`) and records every task-level event in it.
    fn poll_events(&mut self, wait: Duration) -> Result<(), String> {
        let response = self
            .client
            .request(
                "GET",
                &format!(
                    "/v1/events?since={}&wait={:.3}",
                    self.cursor,
                    wait.as_secs_f64()
                ),
                None,
                REQUEST_TIMEOUT,
            )
            .map_err(|error| format!("events: {error}"))?;
        let instant = Instant::now();
        let wall = SystemTime::now();
        if response.status != 200 {
            return Err(format!(
                "events answered {}: {}",
                response.status, response.body
            ));
        }
        let events: Vec<Event> = serde_json::from_value(response.body["events"].clone())
            .map_err(|error| format!("events answer is not a list of events: {error}"))?;
        for event in events {
            self.cursor = self.cursor.max(event.seq);
            if event.container.is_none() {
                self.arrived
                    .entry((event.task.clone(), event.status.clone()))
                    .or_insert(Arrival {
                        instant,
                        wall,
                        event_millis: event.time,
                    });
            }
        }
        Ok(())
    }

    /// Waits until the task-level event `status` of `task_id` has arrived.
    pub fn wait_task_status(
        &mut self,
        task_id: &str,
        status: &str,
        timeout: Duration,
    ) -> Result<Arrival, String> {
        let deadline = Instant::now() + timeout;
        let key = (task_id.to_string(), status.to_string());
        loop {
            if let Some(arrival) = self.arrived.get(&key) {
                return Ok(*arrival);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "task {task_id} did not report {status} within {timeout:?}"
                ));
            }
            self.poll_events(left.min(Duration::from_secs(10)))?;
        }
    }

    /// Forgets the events of a task the bench is done with.
    pub fn forget(&mut self, task_id: &str) {
        self.arrived.retain(|(task, _), _| task != task_id);
    }

    /// SIGTERM, then waits for the exit (SIGKILL after `timeout`). Returns how long it took.
    pub fn terminate(&mut self, timeout: Duration) -> Result<Duration, String> {
        let started = Instant::now();
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .map_err(|error| format!("cannot run kill: {error}"))?;
        if !sent.success() {
            return Err(format!("kill -TERM {pid} failed"));
        }
        while started.elapsed() < timeout {
            if let Ok(Some(_)) = self.child.try_wait() {
                return Ok(started.elapsed());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.kill();
        Err(format!(
            "deckhand run did not exit within {timeout:?} of SIGTERM"
        ))
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
        }
    }
}
