//! Judging a progress stream (image pull, image import): Docker answers 200 before it knows
//! whether the pull will work, then reports failure as a JSON line with `errorDetail`. A pull
//! succeeded only if no line carried an error and a final `Status: …` line arrived; a stream that
//! simply stops (the daemon died, the connection dropped) is a failed pull, and so is one that
//! cannot be read (a line that is not JSON): Docker answered, so it is not "Docker is away", and
//! ECS names the failure `CannotPullContainerError` whatever broke the stream.
//!
//! Pure: the client feeds it lines and asks for the verdict.

use serde_json::Value;

use crate::runtime::RuntimeError;

/// What kind of stream is being judged; decides the final line looked for and the error type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressKind {
    /// `POST /images/create?fromImage=…`: ends with `Status: Downloaded newer image for …` or
    /// `Status: Image is up to date for …`.
    Pull,
    /// `POST /images/create?fromSrc=-`: ends with the new image's id as the status.
    Import,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressJudge {
    kind: ProgressKind,
    image: String,
    final_status: Option<String>,
    last_status: Option<String>,
}

impl ProgressJudge {
    pub fn new(kind: ProgressKind, image: &str) -> ProgressJudge {
        ProgressJudge {
            kind,
            image: image.to_string(),
            final_status: None,
            last_status: None,
        }
    }

    fn failure(&self, message: String) -> RuntimeError {
        match self.kind {
            ProgressKind::Pull => RuntimeError::CannotPull { message },
            ProgressKind::Import => RuntimeError::Api {
                status: 200,
                message,
            },
        }
    }

    /// A stream that cannot be read. A pull fails as any failed pull (the pull behaviour then
    /// decides, as for a registry's refusal); an import keeps the protocol error its callers
    /// report.
    fn unreadable(&self, message: String) -> RuntimeError {
        match self.kind {
            ProgressKind::Pull => RuntimeError::CannotPull { message },
            ProgressKind::Import => RuntimeError::Protocol { message },
        }
    }

    /// Takes one line of the stream. An error line ends the stream with that error.
    pub fn observe_line(&mut self, line: &[u8]) -> Result<(), RuntimeError> {
        let text = String::from_utf8_lossy(line);
        let text = text.trim();
        if text.is_empty() {
            return Ok(());
        }
        let value: Value = serde_json::from_str(text).map_err(|error| {
            self.unreadable(format!(
                "Docker sent an invalid progress line for {} ({error}): {}",
                self.image,
                crate::text::truncate_chars(text, 200)
            ))
        })?;
        let error_text = value
            .get("errorDetail")
            .and_then(|detail| detail.get("message"))
            .and_then(Value::as_str)
            .or_else(|| value.get("error").and_then(Value::as_str));
        if let Some(error_text) = error_text {
            return Err(self.failure(error_text.to_string()));
        }
        if value.get("errorDetail").is_some() {
            return Err(self.failure(format!("Docker reported an error: {text}")));
        }
        if let Some(status) = value.get("status").and_then(Value::as_str) {
            let is_final = match self.kind {
                ProgressKind::Pull => status.starts_with("Status:"),
                ProgressKind::Import => status.starts_with("sha256:"),
            };
            if is_final {
                self.final_status = Some(status.to_string());
            }
            self.last_status = Some(status.to_string());
        }
        Ok(())
    }

    /// The verdict once the stream ended cleanly: the final status (for an import, the image
    /// id), or an error naming the last thing Docker said.
    pub fn finish(self) -> Result<String, RuntimeError> {
        match self.final_status {
            Some(final_status) => Ok(final_status),
            None => Err(self.failure(format!(
                "the progress stream for {} ended without a final status (last: {})",
                self.image,
                self.last_status.as_deref().unwrap_or("nothing")
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(kind: ProgressKind, lines: &[&str]) -> Result<String, RuntimeError> {
        let mut judge = ProgressJudge::new(kind, "app:v1");
        for line in lines {
            judge.observe_line(line.as_bytes())?;
        }
        judge.finish()
    }

    #[test]
    fn pull_streams() {
        let ok = [
            r#"{"status":"Pulling from app","id":"v1"}"#,
            r#"{"status":"Downloading","progressDetail":{"current":1,"total":2},"id":"abc"}"#,
            "",
            r#"{"status":"Digest: sha256:0"}"#,
            r#"{"status":"Status: Downloaded newer image for app:v1"}"#,
        ];
        assert_eq!(
            judge(ProgressKind::Pull, &ok).expect("complete pull"),
            "Status: Downloaded newer image for app:v1"
        );
        let cases: &[(&[&str], &str)] = &[
            (
                &[
                    r#"{"status":"Pulling from app","id":"v1"}"#,
                    r#"{"errorDetail":{"message":"manifest unknown"},"error":"manifest unknown"}"#,
                    r#"{"status":"Status: Downloaded newer image for app:v1"}"#,
                ],
                "manifest unknown",
            ),
            (&[r#"{"error":"short form"}"#], "short form"),
            (
                &[r#"{"status":"Pulling from app","id":"v1"}"#],
                "ended without a final status (last: Pulling from app)",
            ),
            (&[], "ended without a final status (last: nothing)"),
        ];
        for (lines, expected) in cases {
            match judge(ProgressKind::Pull, lines) {
                Err(RuntimeError::CannotPull { message }) => {
                    assert!(message.contains(expected), "{lines:?}: {message}")
                }
                other => panic!("{lines:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn a_malformed_line_fails_a_pull_and_is_a_protocol_error_for_an_import() {
        match judge(ProgressKind::Pull, &[r#"{"status":"Pulling"#]) {
            Err(RuntimeError::CannotPull { message }) => {
                assert!(
                    message.contains("invalid progress line for app:v1"),
                    "{message}"
                )
            }
            other => panic!("expected CannotPull, got {other:?}"),
        }
        match judge(ProgressKind::Import, &[r#"{"status":"sha256"#]) {
            Err(RuntimeError::Protocol { message }) => {
                assert!(message.contains("invalid progress line"), "{message}")
            }
            other => panic!("expected Protocol, got {other:?}"),
        }
    }

    /// A malformed line is quoted in the error, cut at 200 characters: a byte cut panicked when a
    /// multi-byte character (or the U+FFFD lossy decoding puts for a bad byte) straddled byte 200.
    #[test]
    fn malformed_long_lines_are_cut_between_characters() {
        let mut with_e_acute = format!("{{\"status\":\"{}", "a".repeat(188)).into_bytes();
        with_e_acute.extend_from_slice("\u{e9}\u{e9}\u{e9}".as_bytes());
        assert_eq!(with_e_acute.len() - 6, 199, "the é must straddle byte 200");
        let mut with_bad_byte = format!("{{\"status\":\"{}", "a".repeat(188)).into_bytes();
        with_bad_byte.extend_from_slice(&[0xff, 0xfe, b'x']);
        for line in [with_e_acute, with_bad_byte] {
            let mut judge = ProgressJudge::new(ProgressKind::Pull, "app:v1");
            match judge.observe_line(&line) {
                Err(RuntimeError::CannotPull { message }) => {
                    assert!(message.contains("invalid progress line"), "{message}");
                    assert!(message.contains(&"a".repeat(188)), "{message}");
                }
                other => panic!("expected CannotPull, got {other:?}"),
            }
        }
    }

    #[test]
    fn import_streams_end_with_the_image_id() {
        assert_eq!(
            judge(ProgressKind::Import, &[r#"{"status":"sha256:1234"}"#]).expect("imported"),
            "sha256:1234"
        );
        assert!(matches!(
            judge(ProgressKind::Import, &[r#"{"errorDetail":{"message":"bad tar"}}"#]),
            Err(RuntimeError::Api { message, .. }) if message == "bad tar"
        ));
    }
}
