//! `DockerClient`: the Docker Engine endpoints deckhand calls, each with the statuses it accepts,
//! its own deadline, and Docker's error message kept in a typed `RuntimeError`. It implements
//! `ContainerRuntime` for the engine; the calls the engine does not need (version, kill, wait,
//! volume list) are inherent methods, and so is the image import the runtime trait also offers.
//!
//! Every call opens its own connection (`Connection: close`): a Unix-socket connect costs
//! microseconds, and it means no shared connection state between threads, and a blocking stream
//! (events, pull) never holds up other calls.

mod call;
mod events;

use call::{read_error, Call, OpenResponse};
use events::DockerEventStream;
use std::io::{self, BufReader};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[cfg(any(test, feature = "test-support"))]
use serde::Deserialize;
use serde_json::json;

use super::negotiation::{negotiate, ApiVersion};
use super::progress::{ProgressJudge, ProgressKind};
use super::transport::{DockerHost, TimedStream, TimeoutCause};
use super::wire::{self, EngineVersion};
use crate::encoding::{percent_encode, query_string};
use crate::net::http1::{
    read_line_limited, read_response_head, write_request, BodyReader, Request, ResponseHead,
    MAX_BODY_BYTES, MAX_RESPONSE_HEAD_BYTES, MAX_STREAM_LINE_BYTES,
};
use crate::runtime::{
    ContainerInfo, ContainerRuntime, ContainerSummary, CreateContainer, CreateVolume, EventFilter,
    EventStream, ImageInfo, ImageSummary, LogOptions, LogStream, RegistryAuth, RuntimeError,
    RuntimeEvent, StreamCanceller, Timeouts, VolumeInfo,
};

/// Error bodies are short; more than this is not read.
const MAX_ERROR_BODY_BYTES: u64 = 64 * 1024;
/// A container's stats answer is a few kilobytes (more with many CPUs or networks); more than
/// this is not read.
const MAX_STATS_BODY_BYTES: u64 = 1024 * 1024;

/// What a 404 means for an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingMeans {
    Container,
    Image,
    Nothing,
}

/// A non-success status as the error the engine branches on, with Docker's message.
pub fn error_for_status(status: u16, message: String, missing: MissingMeans) -> RuntimeError {
    match (status, missing) {
        (404, MissingMeans::Container) => RuntimeError::NoSuchContainer { message },
        (404, MissingMeans::Image) => RuntimeError::NoSuchImage { message },
        (409, _) => RuntimeError::Conflict { message },
        _ => RuntimeError::Api { status, message },
    }
}

/// The blocking Docker Engine client. Cheap to share: it holds no connection.
#[derive(Debug, Clone)]
pub struct DockerClient {
    host: DockerHost,
    api_version: ApiVersion,
    timeouts: Timeouts,
}

impl DockerClient {
    /// Connects to the Docker Engine at `host`, negotiates the API version and returns a client
    /// that prefixes every path with it.
    pub fn connect(host: DockerHost, timeouts: Timeouts) -> Result<DockerClient, RuntimeError> {
        let mut client = DockerClient {
            host,
            api_version: super::negotiation::MIN_API_VERSION,
            timeouts,
        };
        let daemon_highest = client.daemon_api_version()?;
        client.api_version = negotiate(&daemon_highest)?;
        Ok(client)
    }

    /// [`DockerClient::connect`] to `DOCKER_HOST` (default `unix:///var/run/docker.sock`).
    pub fn from_env(timeouts: Timeouts) -> Result<DockerClient, RuntimeError> {
        DockerClient::connect(DockerHost::from_env()?, timeouts)
    }

    /// The API version this client speaks.
    pub fn api_version(&self) -> ApiVersion {
        self.api_version
    }

    pub fn host(&self) -> &DockerHost {
        &self.host
    }

    pub fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }

    /// The daemon's highest API version: `API-Version` of `/_ping`, else `/version`.
    fn daemon_api_version(&self) -> Result<String, RuntimeError> {
        let mut ping = Call::new(
            "ping Docker".into(),
            "GET",
            "/_ping".into(),
            self.timeouts.inspect,
        );
        ping.versioned = false;
        let mut response = self.open(ping)?.accept(&[200], MissingMeans::Nothing)?;
        if let Some(version) = response.head.header("API-Version") {
            return Ok(version.to_string());
        }
        response.read_body()?;
        let mut version = Call::new(
            "read the Docker version".into(),
            "GET",
            "/version".into(),
            self.timeouts.inspect,
        );
        version.versioned = false;
        let mut response = self.open(version)?.accept(&[200], MissingMeans::Nothing)?;
        let body = response.read_body()?;
        let version: EngineVersion = wire::parse_json(&body, "version answer")?;
        Ok(version.api_version)
    }

    /// Sends `call` and reads the response head.
    fn open(&self, call: Call<'_>) -> Result<OpenResponse, RuntimeError> {
        let socket = self.host.connect()?;
        let mut stream = TimedStream::new(socket, call.total, call.no_progress);
        let target = if call.versioned {
            format!(
                "/v{}{}{}",
                self.api_version,
                call.path,
                query_string(&call.query)
            )
        } else {
            format!("{}{}", call.path, query_string(&call.query))
        };
        let request = Request {
            method: call.method,
            host: "docker",
            target,
            headers: call.headers,
            body: call.body,
        };
        let write_result = write_request(&mut stream, &request);
        let mut reader = BufReader::new(stream);
        let head = match read_response_head(&mut reader, MAX_RESPONSE_HEAD_BYTES) {
            Ok(head) => head,
            Err(read_failure) => {
                let cause = reader.get_ref().timeout_cause();
                // Docker may answer and close before reading a whole request body; its answer
                // is then the better error. Without one, the failed write is.
                let failure = match write_result {
                    Err(write_failure) if read_failure.kind() != io::ErrorKind::TimedOut => {
                        write_failure
                    }
                    _ => read_failure,
                };
                return Err(read_error(
                    failure,
                    &call.operation,
                    cause,
                    call.total,
                    call.no_progress,
                ));
            }
        };
        let framing = head
            .body_framing(call.method)
            .map_err(|error| RuntimeError::Protocol {
                message: format!("{}: {error}", call.operation),
            })?;
        Ok(OpenResponse {
            head,
            body: BodyReader::new(reader, framing),
            operation: call.operation,
            total: call.total,
            no_progress: call.no_progress,
        })
    }

    /// Opens `call`, checks its status and returns its whole body.
    fn call_for_body(
        &self,
        call: Call<'_>,
        accepted: &[u16],
        missing: MissingMeans,
    ) -> Result<Vec<u8>, RuntimeError> {
        self.open(call)?.accept(accepted, missing)?.read_body()
    }

    /// `GET /networks/bridge`: the default bridge network's inspect body; `None` when the
    /// daemon has no such network (`--bridge=none` answers 404).
    fn bridge_network(&self) -> Result<Option<Vec<u8>>, RuntimeError> {
        let call = Call::new(
            "inspect the bridge network".into(),
            "GET",
            "/networks/bridge".into(),
            self.timeouts.inspect,
        );
        match self.call_for_body(call, &[200], MissingMeans::Nothing) {
            Ok(body) => Ok(Some(body)),
            Err(RuntimeError::Api { status: 404, .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// `GET /version`.
    pub fn version(&self) -> Result<EngineVersion, RuntimeError> {
        let call = Call::new(
            "read the Docker version".into(),
            "GET",
            "/version".into(),
            self.timeouts.inspect,
        );
        let body = self.call_for_body(call, &[200], MissingMeans::Nothing)?;
        wire::parse_json(&body, "version answer")
    }

    /// `POST /containers/{id}/kill?signal=…`. A container that is not running is a `Conflict`.
    #[cfg(any(test, feature = "test-support"))]
    pub fn kill_container(&self, id: &str, signal: &str) -> Result<(), RuntimeError> {
        let mut call = Call::new(
            format!("kill container {id} with {signal}"),
            "POST",
            format!("/containers/{}/kill", percent_encode(id, false)),
            self.timeouts.inspect,
        );
        call.query.push(("signal", signal.to_string()));
        self.call_for_body(call, &[204], MissingMeans::Container)?;
        Ok(())
    }

    /// `POST /containers/{id}/wait`: blocks until the container stops (or `timeout` passes) and
    /// returns its exit code.
    #[cfg(any(test, feature = "test-support"))]
    pub fn wait_container(&self, id: &str, timeout: Duration) -> Result<i64, RuntimeError> {
        #[derive(Deserialize)]
        struct WaitAnswer {
            #[serde(rename = "StatusCode")]
            status_code: i64,
            #[serde(rename = "Error", default)]
            error: Option<WaitError>,
        }
        #[derive(Deserialize)]
        struct WaitError {
            #[serde(rename = "Message", default)]
            message: String,
        }
        let call = Call::new(
            format!("wait for container {id}"),
            "POST",
            format!("/containers/{}/wait", percent_encode(id, false)),
            timeout,
        );
        let body = self.call_for_body(call, &[200], MissingMeans::Container)?;
        let answer: WaitAnswer = wire::parse_json(&body, "wait answer")?;
        match answer.error {
            Some(error) if !error.message.is_empty() => Err(RuntimeError::Api {
                status: 200,
                message: error.message,
            }),
            _ => Ok(answer.status_code),
        }
    }

    /// `POST /images/create?fromSrc=-`: makes an image `repository:tag` from a root-filesystem
    /// tarball and returns its id: the sandbox image of `awsvpc` tasks, and the images tests
    /// build without a registry.
    pub fn import_image(
        &self,
        tarball: &[u8],
        repository: &str,
        tag: &str,
    ) -> Result<String, RuntimeError> {
        let mut call = Call::new(
            format!("import image {repository}:{tag}"),
            "POST",
            "/images/create".into(),
            self.timeouts.pull_total,
        );
        call.query = vec![
            ("fromSrc", "-".into()),
            ("repo", repository.into()),
            ("tag", tag.into()),
        ];
        call.body = Some(("application/x-tar", tarball));
        let response = self.open(call)?.accept(&[200], MissingMeans::Nothing)?;
        let mut judge = ProgressJudge::new(ProgressKind::Import, &format!("{repository}:{tag}"));
        response.for_each_line(|line| judge.observe_line(line))?;
        judge.finish()
    }
}

/// Volume listing: deckhand's engine never lists volumes itself (it creates, inspects and
/// removes them by name, through `ContainerRuntime`); tests use it to check what was made.
#[cfg(any(test, feature = "test-support"))]
impl DockerClient {
    /// `GET /volumes`: the volumes carrying every label filter (`key` or `key=value`).
    pub fn list_volumes(
        &self,
        label_filters: &[String],
    ) -> Result<Vec<wire::VolumeSummary>, RuntimeError> {
        let mut call = Call::new(
            "list volumes".into(),
            "GET",
            "/volumes".into(),
            self.timeouts.list,
        );
        if !label_filters.is_empty() {
            call.query
                .push(("filters", json!({ "label": label_filters }).to_string()));
        }
        let body = self.call_for_body(call, &[200], MissingMeans::Nothing)?;
        wire::parse_volume_list(&body)
    }
}

impl ContainerRuntime for DockerClient {
    fn pull_image(&self, image: &str, auth: Option<&RegistryAuth>) -> Result<(), RuntimeError> {
        let (name, tag) = wire::split_image_reference(image)?;
        let mut call = Call::new(
            format!("pull image {name}:{tag}"),
            "POST",
            "/images/create".into(),
            self.timeouts.pull_total,
        );
        call.no_progress = Some(self.timeouts.pull_no_progress);
        call.query = vec![("fromImage", name.clone()), ("tag", tag.clone())];
        if let Some(auth) = auth {
            call.headers
                .push(("X-Registry-Auth", wire::registry_auth_header(auth)));
        }
        let response = self.open(call)?;
        if response.head.status != 200 {
            // Any refusal of a pull (unknown tag, no access, registry down) is a failed pull;
            // Docker's message says which.
            return Err(RuntimeError::CannotPull {
                message: response.error_message(),
            });
        }
        let mut judge = ProgressJudge::new(ProgressKind::Pull, &format!("{name}:{tag}"));
        match response.for_each_line(|line| judge.observe_line(line)) {
            // Docker answered and the stream then broke off (the daemon died, the connection
            // dropped, a chunk was malformed): a failed pull, which the pull behaviour decides
            // on, not "Docker is away" (an unreachable socket fails at the connect above).
            Err(RuntimeError::Protocol { message }) => Err(RuntimeError::CannotPull {
                message: format!("the progress stream was cut off: {message}"),
            }),
            Err(error) => Err(error),
            Ok(()) => judge.finish().map(|_| ()),
        }
    }

    fn inspect_image(&self, image: &str) -> Result<ImageInfo, RuntimeError> {
        let call = Call::new(
            format!("inspect image {image}"),
            "GET",
            format!("/images/{}/json", percent_encode(image, true)),
            self.timeouts.inspect,
        );
        let body = self.call_for_body(call, &[200], MissingMeans::Image)?;
        wire::parse_image_info(&body)
    }

    fn create_container(&self, spec: &CreateContainer) -> Result<String, RuntimeError> {
        let body = wire::create_body(spec).to_string();
        let mut call = Call::new(
            format!("create container {}", spec.name),
            "POST",
            "/containers/create".into(),
            self.timeouts.create,
        );
        if !spec.name.is_empty() {
            call.query.push(("name", spec.name.clone()));
        }
        call.body = Some(("application/json", body.as_bytes()));
        // 404 here is the image that is missing.
        let answer = self.call_for_body(call, &[201], MissingMeans::Image)?;
        wire::parse_created(&answer)
    }

    fn start_container(&self, id: &str) -> Result<(), RuntimeError> {
        let call = Call::new(
            format!("start container {id}"),
            "POST",
            format!("/containers/{}/start", percent_encode(id, false)),
            self.timeouts.start,
        );
        self.call_for_body(call, &[204, 304], MissingMeans::Container)?;
        Ok(())
    }

    fn stop_container(&self, id: &str, grace: Duration) -> Result<(), RuntimeError> {
        // Docker takes whole seconds; round up so the container gets at least its grace.
        let seconds = grace.as_secs() + u64::from(grace.subsec_nanos() > 0);
        let mut call = Call::new(
            format!("stop container {id}"),
            "POST",
            format!("/containers/{}/stop", percent_encode(id, false)),
            Duration::from_secs(seconds) + self.timeouts.stop_extra,
        );
        call.query.push(("t", seconds.to_string()));
        self.call_for_body(call, &[204, 304], MissingMeans::Container)?;
        Ok(())
    }

    fn inspect_container(&self, id_or_name: &str) -> Result<ContainerInfo, RuntimeError> {
        let call = Call::new(
            format!("inspect container {id_or_name}"),
            "GET",
            format!("/containers/{}/json", percent_encode(id_or_name, false)),
            self.timeouts.inspect,
        );
        let body = self.call_for_body(call, &[200], MissingMeans::Container)?;
        wire::parse_container_info(&body)
    }

    fn remove_container(&self, id: &str, volumes: bool) -> Result<(), RuntimeError> {
        let mut call = Call::new(
            format!("remove container {id}"),
            "DELETE",
            format!("/containers/{}", percent_encode(id, false)),
            self.timeouts.remove,
        );
        call.query = vec![("force", "true".into()), ("v", volumes.to_string())];
        self.call_for_body(call, &[204], MissingMeans::Container)?;
        Ok(())
    }

    fn list_containers(
        &self,
        label_filters: &[String],
    ) -> Result<Vec<ContainerSummary>, RuntimeError> {
        let mut call = Call::new(
            "list containers".into(),
            "GET",
            "/containers/json".into(),
            self.timeouts.list,
        );
        call.query.push(("all", "true".into()));
        if !label_filters.is_empty() {
            call.query
                .push(("filters", json!({ "label": label_filters }).to_string()));
        }
        let body = self.call_for_body(call, &[200], MissingMeans::Nothing)?;
        wire::parse_container_list(&body)
    }

    fn events(&self, filter: &EventFilter) -> Result<Box<dyn EventStream>, RuntimeError> {
        let mut filters = json!({ "type": ["container"] });
        if !filter.labels.is_empty() {
            filters["label"] = json!(filter.labels);
        }
        if !filter.actions.is_empty() {
            filters["event"] = json!(filter.actions);
        }
        // Only the head has a deadline: the stream itself is silent until something happens.
        let mut call = Call::new(
            "subscribe to Docker events".into(),
            "GET",
            "/events".into(),
            self.timeouts.inspect,
        );
        call.query.push(("filters", filters.to_string()));
        if let Some(since) = filter.since {
            call.query.push(("since", since.to_string()));
        }
        let mut response = self.open(call)?.accept(&[200], MissingMeans::Nothing)?;
        let socket =
            response
                .stream()
                .socket()
                .try_clone()
                .map_err(|error| RuntimeError::Protocol {
                    message: format!("cannot keep a handle on the event stream socket: {error}"),
                })?;
        response.body.get_mut().get_mut().set_limits(None, None);
        Ok(Box::new(DockerEventStream {
            lines: BufReader::new(response.body),
            socket: Arc::new(socket),
            cancelled: Arc::new(AtomicBool::new(false)),
            line: Vec::new(),
            ended: false,
        }))
    }

    /// `POST /volumes/create`. Docker answers 201 for a name that exists already with the same
    /// driver (and leaves that volume as it is).
    fn create_volume(&self, spec: &CreateVolume) -> Result<(), RuntimeError> {
        let body = wire::create_volume_body(spec).to_string();
        let mut call = Call::new(
            format!("create volume {}", spec.name),
            "POST",
            "/volumes/create".into(),
            self.timeouts.create,
        );
        call.body = Some(("application/json", body.as_bytes()));
        let answer = self.call_for_body(call, &[201], MissingMeans::Nothing)?;
        wire::parse_volume_created(&answer).map(|_| ())
    }

    /// `GET /volumes/{name}`; 404 is `Ok(None)`.
    fn inspect_volume(&self, name: &str) -> Result<Option<VolumeInfo>, RuntimeError> {
        let call = Call::new(
            format!("inspect volume {name}"),
            "GET",
            format!("/volumes/{}", percent_encode(name, false)),
            self.timeouts.inspect,
        );
        match self.call_for_body(call, &[200], MissingMeans::Nothing) {
            Ok(body) => wire::parse_volume_info(&body).map(Some),
            Err(RuntimeError::Api { status: 404, .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// `DELETE /volumes/{name}`. 404 means it is gone already: success. A volume a container
    /// still uses is a `Conflict` with Docker's message.
    fn remove_volume(&self, name: &str) -> Result<(), RuntimeError> {
        let call = Call::new(
            format!("remove volume {name}"),
            "DELETE",
            format!("/volumes/{}", percent_encode(name, false)),
            self.timeouts.remove,
        );
        match self.call_for_body(call, &[204], MissingMeans::Nothing) {
            Ok(_) => Ok(()),
            Err(RuntimeError::Api { status: 404, .. }) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// `GET /containers/{id}/stats?stream=false`: one sample (Docker takes about a second, to
    /// fill `precpu_stats`). The answer is a few kilobytes; more than [`MAX_STATS_BODY_BYTES`]
    /// is refused.
    fn container_stats(&self, id: &str) -> Result<serde_json::Value, RuntimeError> {
        let mut call = Call::new(
            format!("read the stats of container {id}"),
            "GET",
            format!("/containers/{}/stats", percent_encode(id, false)),
            self.timeouts.inspect,
        );
        call.query.push(("stream", "false".into()));
        let mut response = self.open(call)?.accept(&[200], MissingMeans::Container)?;
        let body = match response.body.read_to_end_limited(MAX_STATS_BODY_BYTES) {
            Ok(body) => body,
            Err(error) => return Err(response.read_error(error)),
        };
        wire::parse_stats(&body)
    }

    /// `GET /containers/{id}/logs?stdout=1&stderr=1&…`: the body as Docker sends it (framed,
    /// or raw for a TTY container). Only the head has a deadline: a followed log is silent
    /// until the container writes, and a whole log may take long to send. Closing shuts the
    /// socket down, which ends a read blocked on it.
    fn container_logs(&self, id: &str, options: &LogOptions) -> Result<LogStream, RuntimeError> {
        let mut call = Call::new(
            format!("read the logs of container {id}"),
            "GET",
            format!("/containers/{}/logs", percent_encode(id, false)),
            self.timeouts.inspect,
        );
        call.query.push(("stdout", "1".into()));
        call.query.push(("stderr", "1".into()));
        call.query
            .push(("follow", if options.follow { "1" } else { "0" }.into()));
        call.query.push((
            "tail",
            options
                .tail
                .map_or_else(|| "all".to_string(), |lines| lines.to_string()),
        ));
        if let Some(since) = &options.since {
            call.query.push(("since", since.clone()));
        }
        if options.timestamps {
            call.query.push(("timestamps", "1".into()));
        }
        let mut response = self.open(call)?.accept(&[200], MissingMeans::Container)?;
        let socket =
            response
                .stream()
                .socket()
                .try_clone()
                .map_err(|error| RuntimeError::Protocol {
                    message: format!("cannot keep a handle on the log stream socket: {error}"),
                })?;
        response.body.get_mut().get_mut().set_limits(None, None);
        Ok(LogStream {
            reader: Box::new(response.body),
            close: Box::new(move || {
                let _ = socket.shutdown(Shutdown::Both);
            }),
        })
    }

    /// The default bridge's IPv4 gateway (see [`DockerClient::bridge_network`]).
    fn bridge_gateway(&self) -> Result<Option<std::net::Ipv4Addr>, RuntimeError> {
        match self.bridge_network()? {
            Some(body) => wire::parse_network_gateway(&body),
            None => Ok(None),
        }
    }

    /// The default bridge's device name (see [`DockerClient::bridge_network`]).
    fn bridge_interface(&self) -> Result<Option<String>, RuntimeError> {
        match self.bridge_network()? {
            Some(body) => wire::parse_network_bridge_name(&body),
            None => Ok(None),
        }
    }

    fn list_images(&self) -> Result<Vec<ImageSummary>, RuntimeError> {
        let call = Call::new(
            "list images".into(),
            "GET",
            "/images/json".into(),
            self.timeouts.list,
        );
        let body = self.call_for_body(call, &[200], MissingMeans::Nothing)?;
        wire::parse_image_list(&body)
    }

    /// `DELETE /images/{name}`, never forced; 404 is `NoSuchImage`, 409 `Conflict`.
    fn remove_image(&self, name: &str) -> Result<(), RuntimeError> {
        let call = Call::new(
            format!("remove image {name}"),
            "DELETE",
            format!("/images/{}", percent_encode(name, true)),
            self.timeouts.remove,
        );
        self.call_for_body(call, &[200], MissingMeans::Image)?;
        Ok(())
    }

    fn import_image(
        &self,
        tarball: &[u8],
        repository: &str,
        tag: &str,
    ) -> Result<String, RuntimeError> {
        DockerClient::import_image(self, tarball, repository, tag)
    }

    fn docker_root_dir(&self) -> Result<Option<String>, RuntimeError> {
        let call = Call::new(
            "read Docker's info".into(),
            "GET",
            "/info".into(),
            self.timeouts.inspect,
        );
        let body = self.call_for_body(call, &[200], MissingMeans::Nothing)?;
        wire::parse_docker_root_dir(&body)
    }

    fn ping(&self) -> Result<(), RuntimeError> {
        let call = Call::new(
            "ping Docker".into(),
            "GET",
            "/_ping".into(),
            self.timeouts.inspect,
        );
        self.call_for_body(call, &[200], MissingMeans::Nothing)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_the_errors_the_engine_branches_on() {
        let cases = [
            (404, MissingMeans::Container, "NoSuchContainer"),
            (404, MissingMeans::Image, "NoSuchImage"),
            (404, MissingMeans::Nothing, "Api"),
            (409, MissingMeans::Container, "Conflict"),
            (500, MissingMeans::Container, "Api"),
            (400, MissingMeans::Image, "Api"),
        ];
        for (status, missing, expected) in cases {
            let error = error_for_status(status, "docker says".into(), missing);
            let name = format!("{error:?}");
            assert!(
                name.starts_with(expected),
                "{status} {missing:?} gave {name}"
            );
            assert!(error.to_string().contains("docker says"), "{error}");
        }
    }

    #[test]
    fn timeouts_name_the_limit_that_was_hit() {
        let timed_out = || io::Error::new(io::ErrorKind::TimedOut, "t");
        let idle = read_error(
            timed_out(),
            "pull image a:b",
            Some(TimeoutCause::NoProgress),
            Some(Duration::from_secs(7200)),
            Some(Duration::from_secs(60)),
        );
        assert_eq!(
            idle,
            RuntimeError::Timeout {
                operation: "pull image a:b (no progress)".into(),
                after: Duration::from_secs(60)
            }
        );
        let total = read_error(
            timed_out(),
            "start container x",
            Some(TimeoutCause::Total),
            Some(Duration::from_secs(180)),
            None,
        );
        assert_eq!(
            total,
            RuntimeError::Timeout {
                operation: "start container x".into(),
                after: Duration::from_secs(180)
            }
        );
        let closed = read_error(
            io::Error::new(io::ErrorKind::UnexpectedEof, "closed mid-body"),
            "inspect container x",
            None,
            Some(Duration::from_secs(30)),
            None,
        );
        assert!(
            matches!(closed, RuntimeError::Protocol { message } if message.contains("closed mid-body"))
        );
    }
}
