//! A live `GET /events` subscription, read a line at a time, cancellable from another thread.

use super::*;

/// A live `GET /events` subscription.
pub(super) struct DockerEventStream {
    pub(super) lines: BufReader<BodyReader<BufReader<TimedStream>>>,
    pub(super) socket: Arc<UnixStream>,
    pub(super) cancelled: Arc<AtomicBool>,
    pub(super) line: Vec<u8>,
    pub(super) ended: bool,
}

impl EventStream for DockerEventStream {
    fn next_event(&mut self) -> Result<Option<RuntimeEvent>, RuntimeError> {
        loop {
            if self.ended || self.cancelled.load(Ordering::SeqCst) {
                self.ended = true;
                return Ok(None);
            }
            match read_line_limited(&mut self.lines, MAX_STREAM_LINE_BYTES, &mut self.line) {
                Ok(false) => {
                    self.ended = true;
                    return Ok(None);
                }
                Ok(true) => {
                    if self.line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    if let Some(event) = wire::parse_event(&self.line)? {
                        return Ok(Some(event));
                    }
                }
                // Cancelled, or Docker went away (restart): the stream ended. The owner
                // reconnects and re-lists.
                Err(_) if self.cancelled.load(Ordering::SeqCst) => {
                    self.ended = true;
                    return Ok(None);
                }
                Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => {
                    self.ended = true;
                    return Ok(None);
                }
                Err(error) => {
                    self.ended = true;
                    return Err(RuntimeError::Protocol {
                        message: format!("Docker event stream: {error}"),
                    });
                }
            }
        }
    }

    fn canceller(&self) -> StreamCanceller {
        let socket = Arc::clone(&self.socket);
        let cancelled = Arc::clone(&self.cancelled);
        StreamCanceller::new(move || {
            cancelled.store(true, Ordering::SeqCst);
            // Wakes a read blocked in another thread; an error means it is already closed.
            let _ = socket.shutdown(Shutdown::Both);
        })
    }
}
