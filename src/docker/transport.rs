//! The Unix-socket transport under the Docker client: where the socket is (`DOCKER_HOST`), how a
//! failed connect is explained to a person, and a stream that enforces a call's deadlines.
//!
//! Deadlines live here, not in the framing code: before every read the stream sets the socket's
//! read timeout to what is left of the call's total deadline, capped by the "no progress" limit
//! (the longest silence allowed between two reads). A read that hits either limit fails with
//! `io::ErrorKind::TimedOut`, and [`TimedStream::timeout_cause`] says which one it was.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::runtime::RuntimeError;

/// The socket used when `DOCKER_HOST` is unset or empty.
pub const DEFAULT_DOCKER_HOST: &str = "unix:///var/run/docker.sock";

/// Where the Docker Engine listens. Only Unix sockets are supported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerHost {
    pub socket_path: PathBuf,
    /// The `DOCKER_HOST` value this came from, for messages.
    pub source: String,
}

impl DockerHost {
    /// Parses a `DOCKER_HOST` value (`unix:///path`); empty means the default socket.
    pub fn parse(value: &str) -> Result<DockerHost, RuntimeError> {
        let value = value.trim();
        let value = if value.is_empty() {
            DEFAULT_DOCKER_HOST
        } else {
            value
        };
        let Some(path) = value.strip_prefix("unix://") else {
            return Err(RuntimeError::Unreachable {
                message: format!(
                    "DOCKER_HOST={value:?} is not supported: deckhand talks to Docker over a Unix \
                     socket only (for example unix:///var/run/docker.sock)"
                ),
            });
        };
        if !path.starts_with('/') {
            return Err(RuntimeError::Unreachable {
                message: format!(
                    "DOCKER_HOST={value:?} must name an absolute socket path \
                     (unix:///path/to/docker.sock)"
                ),
            });
        }
        Ok(DockerHost {
            socket_path: PathBuf::from(path),
            source: value.to_string(),
        })
    }

    /// `DOCKER_HOST` from the environment, or the default socket.
    pub fn from_env() -> Result<DockerHost, RuntimeError> {
        DockerHost::parse(&std::env::var("DOCKER_HOST").unwrap_or_default())
    }

    /// A host for a socket path (tests, configuration).
    pub fn unix(socket_path: impl AsRef<Path>) -> DockerHost {
        let socket_path = socket_path.as_ref().to_path_buf();
        DockerHost {
            source: format!("unix://{}", socket_path.display()),
            socket_path,
        }
    }

    /// Connects, explaining a failure in terms of what the person should check.
    pub fn connect(&self) -> Result<UnixStream, RuntimeError> {
        UnixStream::connect(&self.socket_path).map_err(|error| RuntimeError::Unreachable {
            message: explain_connect_error(&self.socket_path, &error),
        })
    }
}

/// A message that names the socket and what to check for the usual connect failures.
pub fn explain_connect_error(socket_path: &Path, error: &io::Error) -> String {
    let socket = socket_path.display();
    match error.kind() {
        io::ErrorKind::NotFound => format!(
            "no Docker socket at {socket}: is the Docker Engine installed and running \
             (systemctl status docker)? Set DOCKER_HOST=unix:///path if it listens elsewhere"
        ),
        io::ErrorKind::ConnectionRefused => format!(
            "connection refused on {socket}: the socket exists but no Docker Engine is \
             listening on it; start Docker (systemctl start docker)"
        ),
        io::ErrorKind::PermissionDenied => format!(
            "permission denied on {socket}: run deckhand as root or as a member of the \
             socket's group (usually `docker`)"
        ),
        _ => format!("cannot connect to the Docker socket {socket}: {error}"),
    }
}

/// Which limit a timed-out read hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutCause {
    /// The call's total deadline passed.
    Total,
    /// Nothing arrived for the "no progress" duration.
    NoProgress,
}

/// A Unix stream whose reads and writes respect a call's deadline and "no progress" limit.
#[derive(Debug)]
pub struct TimedStream {
    stream: UnixStream,
    deadline: Option<Instant>,
    no_progress: Option<Duration>,
    timeout_cause: Option<TimeoutCause>,
}

impl TimedStream {
    /// `total`: the whole call's limit from now; `no_progress`: the longest silence allowed.
    pub fn new(
        stream: UnixStream,
        total: Option<Duration>,
        no_progress: Option<Duration>,
    ) -> TimedStream {
        TimedStream {
            stream,
            deadline: total.map(|total| Instant::now() + total),
            no_progress,
            timeout_cause: None,
        }
    }

    /// Replaces the limits from now on (an event stream has a deadline for its head, none after).
    pub fn set_limits(&mut self, total: Option<Duration>, no_progress: Option<Duration>) {
        self.deadline = total.map(|total| Instant::now() + total);
        self.no_progress = no_progress;
    }

    /// Which limit the last timed-out read or write hit.
    pub fn timeout_cause(&self) -> Option<TimeoutCause> {
        self.timeout_cause
    }

    pub fn socket(&self) -> &UnixStream {
        &self.stream
    }

    /// How long the next blocking operation may wait, or an error if the deadline passed.
    fn next_wait(&mut self) -> io::Result<Option<Duration>> {
        let until_deadline = match self.deadline {
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    self.timeout_cause = Some(TimeoutCause::Total);
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "deadline passed"));
                }
                Some(left)
            }
            None => None,
        };
        let wait = match (until_deadline, self.no_progress) {
            (Some(left), Some(idle)) if idle < left => Some(idle),
            (Some(left), _) => Some(left),
            (None, idle) => idle,
        };
        // A zero timeout means "block forever" to the OS (and is refused by std): wait 1 ms.
        Ok(wait.map(|wait| wait.max(Duration::from_millis(1))))
    }

    fn cause_of_timeout(&self) -> TimeoutCause {
        match self.deadline {
            Some(deadline) if Instant::now() + Duration::from_millis(1) >= deadline => {
                TimeoutCause::Total
            }
            _ if self.no_progress.is_some() => TimeoutCause::NoProgress,
            _ => TimeoutCause::Total,
        }
    }

    fn timed_out(&mut self, error: io::Error) -> io::Error {
        if matches!(
            error.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ) {
            self.timeout_cause = Some(self.cause_of_timeout());
            io::Error::new(io::ErrorKind::TimedOut, "no answer from Docker in time")
        } else {
            error
        }
    }
}

impl Read for TimedStream {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let wait = self.next_wait()?;
        self.stream.set_read_timeout(wait)?;
        match self.stream.read(buffer) {
            Ok(read) => Ok(read),
            Err(error) => Err(self.timed_out(error)),
        }
    }
}

impl Write for TimedStream {
    fn write(&mut self, buffer: &[u8]) -> io::Result<usize> {
        let wait = self.next_wait()?;
        self.stream.set_write_timeout(wait)?;
        match self.stream.write(buffer) {
            Ok(written) => Ok(written),
            Err(error) => Err(self.timed_out(error)),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_host_values() {
        let cases: &[(&str, Option<&str>)] = &[
            ("", Some("/var/run/docker.sock")),
            ("  ", Some("/var/run/docker.sock")),
            (
                "unix:///run/user/1000/docker.sock",
                Some("/run/user/1000/docker.sock"),
            ),
            ("tcp://127.0.0.1:2375", None),
            ("unix://relative.sock", None),
            ("/var/run/docker.sock", None),
        ];
        for (value, expected) in cases {
            match (DockerHost::parse(value), expected) {
                (Ok(host), Some(path)) => assert_eq!(host.socket_path, Path::new(path), "{value}"),
                (Err(RuntimeError::Unreachable { message }), None) => {
                    assert!(message.contains("DOCKER_HOST"), "{value}: {message}")
                }
                (other, _) => panic!("{value:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn connect_errors_name_the_socket_and_what_to_check() {
        let missing = Path::new("/nonexistent/deckhand-test.sock");
        let cases = [
            (io::ErrorKind::NotFound, "installed and running"),
            (
                io::ErrorKind::ConnectionRefused,
                "no Docker Engine is listening",
            ),
            (io::ErrorKind::PermissionDenied, "docker"),
        ];
        for (kind, hint) in cases {
            let message = explain_connect_error(missing, &io::Error::from(kind));
            assert!(
                message.contains("/nonexistent/deckhand-test.sock"),
                "{message}"
            );
            assert!(message.contains(hint), "{message}");
        }
        match DockerHost::unix(missing).connect() {
            Err(RuntimeError::Unreachable { message }) => {
                assert!(message.contains("no Docker socket at /nonexistent/deckhand-test.sock"))
            }
            other => panic!("expected Unreachable, got {other:?}"),
        }
    }

    #[test]
    fn a_silent_peer_times_out_with_the_no_progress_cause() {
        let (client, _server) = UnixStream::pair().expect("socket pair");
        let mut stream = TimedStream::new(
            client,
            Some(Duration::from_secs(30)),
            Some(Duration::from_millis(50)),
        );
        let started = Instant::now();
        let error = stream.read(&mut [0u8; 8]).expect_err("nothing was sent");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(stream.timeout_cause(), Some(TimeoutCause::NoProgress));
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_silent_peer_times_out_with_the_total_cause() {
        let (client, _server) = UnixStream::pair().expect("socket pair");
        let mut stream = TimedStream::new(client, Some(Duration::from_millis(50)), None);
        let error = stream.read(&mut [0u8; 8]).expect_err("nothing was sent");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(stream.timeout_cause(), Some(TimeoutCause::Total));
    }
}
