//! One call to the Docker Engine API described, and its response while the body is still on
//! the wire; I/O errors as runtime errors (timeouts named by the limit hit).

use super::*;

/// One call's description.
pub(super) struct Call<'a> {
    /// For messages: "start container web".
    pub(super) operation: String,
    pub(super) method: &'static str,
    /// Without the version prefix.
    pub(super) path: String,
    pub(super) query: Vec<(&'a str, String)>,
    pub(super) headers: Vec<(&'a str, String)>,
    pub(super) body: Option<(&'a str, &'a [u8])>,
    /// Deadline for the whole call; `None` for none.
    pub(super) total: Option<Duration>,
    /// Longest silence allowed between two reads.
    pub(super) no_progress: Option<Duration>,
    /// `false` only for the negotiation itself.
    pub(super) versioned: bool,
}

impl<'a> Call<'a> {
    pub(super) fn new(
        operation: String,
        method: &'static str,
        path: String,
        total: Duration,
    ) -> Call<'a> {
        Call {
            operation,
            method,
            path,
            query: Vec::new(),
            headers: Vec::new(),
            body: None,
            total: Some(total),
            no_progress: None,
            versioned: true,
        }
    }
}

/// A response whose head was read; the body is still on the wire.
pub(super) struct OpenResponse {
    pub(super) head: ResponseHead,
    pub(super) body: BodyReader<BufReader<TimedStream>>,
    pub(super) operation: String,
    pub(super) total: Option<Duration>,
    pub(super) no_progress: Option<Duration>,
}

impl OpenResponse {
    pub(super) fn stream(&self) -> &TimedStream {
        self.body.get_ref().get_ref()
    }

    /// An I/O error while reading this response, as a runtime error.
    pub(super) fn read_error(&self, error: io::Error) -> RuntimeError {
        read_error(
            error,
            &self.operation,
            self.stream().timeout_cause(),
            self.total,
            self.no_progress,
        )
    }

    pub(super) fn read_body(&mut self) -> Result<Vec<u8>, RuntimeError> {
        match self.body.read_to_end_limited(MAX_BODY_BYTES) {
            Ok(body) => Ok(body),
            Err(error) => Err(self.read_error(error)),
        }
    }

    /// Fails unless the status is one of `accepted`, reading Docker's message from the body.
    pub(super) fn accept(
        self,
        accepted: &[u16],
        missing: MissingMeans,
    ) -> Result<Self, RuntimeError> {
        if accepted.contains(&self.head.status) {
            return Ok(self);
        }
        let status = self.head.status;
        Err(error_for_status(status, self.error_message(), missing))
    }

    /// Docker's message from an error answer's body (the reason phrase if the body is unreadable).
    pub(super) fn error_message(mut self) -> String {
        let body = self
            .body
            .read_to_end_limited(MAX_ERROR_BODY_BYTES)
            .unwrap_or_default();
        wire::error_message(&body, &self.head.reason)
    }

    /// Feeds each non-empty line of a streamed body to `on_line` until the body ends.
    pub(super) fn for_each_line(
        self,
        mut on_line: impl FnMut(&[u8]) -> Result<(), RuntimeError>,
    ) -> Result<(), RuntimeError> {
        let OpenResponse {
            body,
            operation,
            total,
            no_progress,
            ..
        } = self;
        let mut lines = BufReader::new(body);
        let mut line = Vec::new();
        loop {
            match read_line_limited(&mut lines, MAX_STREAM_LINE_BYTES, &mut line) {
                Ok(false) => return Ok(()),
                Ok(true) => on_line(&line)?,
                Err(error) => {
                    let cause = lines.get_ref().get_ref().get_ref().timeout_cause();
                    return Err(read_error(error, &operation, cause, total, no_progress));
                }
            }
        }
    }
}

pub(super) fn read_error(
    error: io::Error,
    operation: &str,
    cause: Option<TimeoutCause>,
    total: Option<Duration>,
    no_progress: Option<Duration>,
) -> RuntimeError {
    if error.kind() == io::ErrorKind::TimedOut {
        return match (cause, no_progress) {
            (Some(TimeoutCause::NoProgress), Some(idle)) => RuntimeError::Timeout {
                operation: format!("{operation} (no progress)"),
                after: idle,
            },
            _ => RuntimeError::Timeout {
                operation: operation.to_string(),
                after: total.or(no_progress).unwrap_or_default(),
            },
        };
    }
    RuntimeError::Protocol {
        message: format!("{operation}: {error}"),
    }
}
