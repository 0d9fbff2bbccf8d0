//! The HTTP server under the local API, the ECS introspection endpoint and the task metadata
//! endpoint: one accept thread per server, waiting on all of its listeners at once (the task
//! metadata endpoint listens on two addresses), and a small pool of worker threads (at most 8
//! for the local API, 2 for introspection), each serving one connection (one request) at a time
//! with the framing of [`super::http`]. Workers start as connections come and end after a while
//! without one ([`crate::worker_threads`]): an idle agent holds only the accept threads.
//!
//! Why not a general-purpose server crate: the API must refuse a 2 MiB body without reading it,
//! must not allocate what a client announces, and must not grow a thread per connection. A
//! bounded pool with a bounded hand-off queue gives all three; a full queue closes the new
//! connection at once instead of piling up. Long polls are capped by the router (see `local.rs`)
//! so that they never hold every worker.
//!
//! Local socket rules: the socket file's directory is created if missing; a stale socket file is
//! removed, but if another agent answers on it deckhand refuses to start; the socket gets mode 0660
//! and, for an agent run by root, if the group exists, group `deckhand`; it is removed on shutdown
//! if it is still ours.

use super::http::{
    read_request, write_chunk, write_last_chunk, write_response, write_streaming_head, HttpRequest,
    HttpResponse, ResponseStream, StreamEvent, MAX_REQUEST_BODY_BYTES,
};
use crate::worker_threads::{BoundedFifo, Refused, WorkerSettings, WorkerThreads};
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Worker threads of the local API (long polls may hold all but two of them).
pub const WORKER_THREADS: usize = 8;
/// Worker threads of the read-only introspection endpoint (no long polls there).
pub const INTROSPECTION_WORKER_THREADS: usize = 2;
/// Connections accepted but not yet picked up by a worker; beyond this, new ones are closed.
const QUEUE_CAPACITY: usize = 64;
/// How long a stopping server waits for its workers to serve what was accepted and end.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
/// A client must send its whole request within this time.
const REQUEST_READ_DEADLINE: Duration = Duration::from_secs(10);
/// Writing a response may take at most this long.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// After refusing a request whose body was not read, bytes still arriving are discarded for at
/// most this long so that the client sees the answer instead of a reset connection.
const LINGER: Duration = Duration::from_millis(500);
/// A streamed body with nothing to send is checked this often for a client that went away or
/// a server that is stopping.
const STREAM_IDLE_CHECK: Duration = Duration::from_secs(1);

/// Answers one request. Handlers must not panic on any input; a panic is caught and answered 500.
pub type Handler = Arc<dyn Fn(&HttpRequest) -> HttpResponse + Send + Sync>;

/// Why a listener could not be set up.
#[derive(Debug)]
pub enum ListenError {
    /// Another process answers on the socket.
    InUse {
        path: PathBuf,
    },
    /// The path exists and is not a socket; deckhand does not remove it.
    NotASocket {
        path: PathBuf,
    },
    Io {
        what: String,
        source: io::Error,
    },
}

impl fmt::Display for ListenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenError::InUse { path } => write!(
                f,
                "another deckhand agent is already serving on {} (stop it first)",
                path.display()
            ),
            ListenError::NotASocket { path } => write!(
                f,
                "{} exists and is not a socket; refusing to replace it",
                path.display()
            ),
            ListenError::Io { what, source } => write!(f, "{what}: {source}"),
        }
    }
}

impl std::error::Error for ListenError {}

/// A connection of either kind.
enum Connection {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Connection {
    fn set_timeouts(&self, read: Option<Duration>, write: Option<Duration>) -> io::Result<()> {
        match self {
            Connection::Unix(stream) => {
                stream.set_read_timeout(read)?;
                stream.set_write_timeout(write)
            }
            Connection::Tcp(stream) => {
                stream.set_read_timeout(read)?;
                stream.set_write_timeout(write)
            }
        }
    }

    fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        match self {
            Connection::Unix(stream) => stream.set_nonblocking(nonblocking),
            Connection::Tcp(stream) => stream.set_nonblocking(nonblocking),
        }
    }

    /// Whether the client closed the connection: it sent its whole request, so a read that
    /// finds the end of the stream (or an error) means it has gone.
    fn client_gone(&mut self) -> bool {
        if self.set_nonblocking(true).is_err() {
            return true;
        }
        let mut probe = [0u8; 64];
        let gone = match self.read(&mut probe) {
            Ok(0) => true,
            Ok(_) => false,
            Err(error) => !matches!(
                error.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ),
        };
        gone || self.set_nonblocking(false).is_err()
    }

    fn shutdown_write(&self) {
        let _ = match self {
            Connection::Unix(stream) => stream.shutdown(Shutdown::Write),
            Connection::Tcp(stream) => stream.shutdown(Shutdown::Write),
        };
    }
}

impl Read for Connection {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Connection::Unix(stream) => stream.read(buf),
            Connection::Tcp(stream) => stream.read(buf),
        }
    }
}

impl Write for Connection {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Connection::Unix(stream) => stream.write(buf),
            Connection::Tcp(stream) => stream.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Connection::Unix(stream) => stream.flush(),
            Connection::Tcp(stream) => stream.flush(),
        }
    }
}

/// A read deadline over a whole request: each read gets the time left, so a client trickling
/// one byte a second cannot hold a worker forever.
struct Deadline<'a> {
    connection: &'a mut Connection,
    until: Instant,
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "request not received in time",
            ));
        }
        self.connection
            .set_timeouts(Some(left), Some(WRITE_TIMEOUT))?;
        self.connection.read(buf)
    }
}

impl Write for Deadline<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.connection.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.connection.flush()
    }
}

/// A bound socket, not served yet ([`bind_tcp`], [`HttpServer::serve_listeners`]).
pub enum Listener {
    Unix {
        listener: UnixListener,
        path: PathBuf,
        /// (device, inode) of the socket file we created, so we remove only our own.
        identity: (u64, u64),
    },
    Tcp {
        listener: TcpListener,
        address: SocketAddr,
    },
}

/// Where a server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddress {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl fmt::Display for ListenAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddress::Unix(path) => write!(f, "{}", path.display()),
            ListenAddress::Tcp(address) => write!(f, "{address}"),
        }
    }
}

impl Listener {
    fn address(&self) -> ListenAddress {
        match self {
            Listener::Unix { path, .. } => ListenAddress::Unix(path.clone()),
            Listener::Tcp { address, .. } => ListenAddress::Tcp(*address),
        }
    }

    fn raw_fd(&self) -> RawFd {
        match self {
            Listener::Unix { listener, .. } => listener.as_raw_fd(),
            Listener::Tcp { listener, .. } => listener.as_raw_fd(),
        }
    }

    fn set_nonblocking(&self) -> io::Result<()> {
        match self {
            Listener::Unix { listener, .. } => listener.set_nonblocking(true),
            Listener::Tcp { listener, .. } => listener.set_nonblocking(true),
        }
    }

    fn accept(&self) -> io::Result<Connection> {
        let connection = match self {
            Listener::Unix { listener, .. } => listener.accept().map(|(s, _)| Connection::Unix(s)),
            Listener::Tcp { listener, .. } => listener.accept().map(|(s, _)| Connection::Tcp(s)),
        }?;
        // The listener is non-blocking for the accept thread; the connection must not be.
        connection.set_nonblocking(false)?;
        Ok(connection)
    }
}

type ConnectionWorkers = WorkerThreads<BoundedFifo<Connection>>;

/// A running server; [`HttpServer::shutdown`] (or drop) stops it and joins its threads.
pub struct HttpServer {
    name: String,
    /// Where it listens: the first address, and every one.
    addresses: Vec<ListenAddress>,
    stopping: Arc<AtomicBool>,
    accept_thread: Option<JoinHandle<()>>,
    workers: Arc<ConnectionWorkers>,
    socket_identity: Option<(u64, u64)>,
}

/// Looks up the gid of group `name` in `/etc/group`.
fn group_id(name: &str) -> Option<u32> {
    let groups = std::fs::read_to_string("/etc/group").ok()?;
    groups.lines().find_map(|line| {
        let mut fields = line.split(':');
        if fields.next()? != name {
            return None;
        }
        fields.nth(1)?.parse().ok()
    })
}

/// Binds the local API socket at `path` following the rules in the module comment.
fn bind_unix(path: &Path) -> Result<Listener, ListenError> {
    if let Some(parent) = path.parent() {
        if !parent.as_os_str().is_empty() {
            std::fs::create_dir_all(parent).map_err(|source| ListenError::Io {
                what: format!("cannot create the socket directory {}", parent.display()),
                source,
            })?;
        }
    }
    match std::fs::symlink_metadata(path) {
        Ok(metadata) if metadata.file_type().is_socket() => {
            if UnixStream::connect(path).is_ok() {
                return Err(ListenError::InUse {
                    path: path.to_path_buf(),
                });
            }
            log::info!("removing stale API socket {}", path.display());
            std::fs::remove_file(path).map_err(|source| ListenError::Io {
                what: format!("cannot remove the stale socket {}", path.display()),
                source,
            })?;
        }
        Ok(_) => {
            return Err(ListenError::NotASocket {
                path: path.to_path_buf(),
            })
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(ListenError::Io {
                what: format!("cannot examine {}", path.display()),
                source,
            })
        }
    }
    let listener = UnixListener::bind(path).map_err(|source| ListenError::Io {
        what: format!("cannot listen on {}", path.display()),
        source,
    })?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660)).map_err(|source| {
        ListenError::Io {
            what: format!("cannot set mode 0660 on {}", path.display()),
            source,
        }
    })?;
    // Only a system agent shares its socket with group deckhand: a per-user agent's API is its
    // owner's alone (and a user may not give files to a group they are not in anyway).
    let system_agent = crate::config::Scope::of_current_process() == crate::config::Scope::System;
    if let Some(gid) = group_id("deckhand").filter(|_| system_agent) {
        if let Err(error) = std::os::unix::fs::chown(path, None, Some(gid)) {
            log::warn!(
                "cannot give {} to group deckhand: {error}; only its owner can use the API",
                path.display()
            );
        }
    }
    let metadata = std::fs::metadata(path).map_err(|source| ListenError::Io {
        what: format!("cannot examine {}", path.display()),
        source,
    })?;
    Ok(Listener::Unix {
        listener,
        path: path.to_path_buf(),
        identity: (metadata.dev(), metadata.ino()),
    })
}

/// Binds a TCP address for [`HttpServer::serve_listeners`].
pub fn bind_tcp(address: SocketAddr) -> Result<Listener, ListenError> {
    let listener = TcpListener::bind(address).map_err(|source| ListenError::Io {
        what: format!("cannot listen on {address}"),
        source,
    })?;
    let address = listener.local_addr().map_err(|source| ListenError::Io {
        what: format!("cannot read the address of {address}"),
        source,
    })?;
    Ok(Listener::Tcp { listener, address })
}

impl HttpServer {
    /// Serves `handler` on a Unix socket at `path` with `workers` threads.
    pub fn serve_unix(
        name: &str,
        path: &Path,
        workers: usize,
        handler: Handler,
    ) -> Result<HttpServer, ListenError> {
        HttpServer::serve_listeners(name, vec![bind_unix(path)?], workers, handler)
    }

    /// Serves `handler` on a TCP address (port 0 picks a free port; see [`HttpServer::address`])
    /// with `workers` threads.
    pub fn serve_tcp(
        name: &str,
        address: SocketAddr,
        workers: usize,
        handler: Handler,
    ) -> Result<HttpServer, ListenError> {
        HttpServer::serve_listeners(name, vec![bind_tcp(address)?], workers, handler)
    }

    /// Serves `handler` on every one of `listeners` (at least one) with one accept thread and
    /// at most `worker_count` workers.
    pub fn serve_listeners(
        name: &str,
        listeners: Vec<Listener>,
        worker_count: usize,
        handler: Handler,
    ) -> Result<HttpServer, ListenError> {
        let addresses: Vec<ListenAddress> = listeners.iter().map(Listener::address).collect();
        if addresses.is_empty() {
            return Err(ListenError::Io {
                what: format!("{name}: nothing to listen on"),
                source: io::Error::from(io::ErrorKind::InvalidInput),
            });
        }
        let socket_identity = listeners.iter().find_map(|listener| match listener {
            Listener::Unix { identity, .. } => Some(*identity),
            Listener::Tcp { .. } => None,
        });
        for listener in &listeners {
            listener
                .set_nonblocking()
                .map_err(|source| ListenError::Io {
                    what: format!("cannot make {} non-blocking", listener.address()),
                    source,
                })?;
        }
        let stopping = Arc::new(AtomicBool::new(false));
        let worker_stopping = stopping.clone();
        let workers = Arc::new(WorkerThreads::new(
            WorkerSettings::new(name, worker_count),
            BoundedFifo::new(QUEUE_CAPACITY),
            move |connection| serve_connection(connection, &handler, &worker_stopping),
            // serve_connection catches the handler's panics; anything else is logged.
            |_, _| {},
        ));
        let accept_stopping = stopping.clone();
        let accept_name = name.to_string();
        let accept_workers = Arc::clone(&workers);
        let accept_thread = thread::Builder::new()
            .name(format!("{name}-accept"))
            .spawn(move || accept_loop(&accept_name, &listeners, &accept_workers, &accept_stopping))
            .map_err(|source| ListenError::Io {
                what: format!("cannot start the {name} accept thread"),
                source,
            })?;
        for address in &addresses {
            log::info!("{name} listening on {address}");
        }
        Ok(HttpServer {
            name: name.to_string(),
            addresses,
            stopping,
            accept_thread: Some(accept_thread),
            workers,
            socket_identity,
        })
    }

    /// Where it listens (the first address when there are several).
    pub fn address(&self) -> &ListenAddress {
        // `serve_listeners` refuses to serve nothing.
        &self.addresses[0]
    }

    /// Its workers' counters (they start with connections and end when idle).
    pub fn worker_stats(&self) -> crate::worker_threads::WorkerStats {
        self.workers.stats()
    }

    /// Stops accepting, lets every worker finish the request it is serving, joins all threads,
    /// and removes the socket file if it is still the one this server created.
    pub fn shutdown(&mut self) {
        if self.stopping.swap(true, Ordering::SeqCst) {
            return;
        }
        // Wake the accept thread, waiting in poll(), with a connection of our own.
        let woken = match self.address() {
            ListenAddress::Unix(path) => UnixStream::connect(path).map(|_| ()),
            ListenAddress::Tcp(address) => {
                TcpStream::connect_timeout(address, Duration::from_secs(1)).map(|_| ())
            }
        };
        match woken {
            Ok(()) => {
                if let Some(accept_thread) = self.accept_thread.take() {
                    let _ = accept_thread.join();
                }
                // What was accepted is served (streams end as they see `stopping`), then the
                // workers end.
                self.workers
                    .wait_for(|stats| stats.queued == 0, SHUTDOWN_GRACE);
                self.workers.shutdown(SHUTDOWN_GRACE);
            }
            Err(error) => {
                // Someone removed the socket file (or the port is unreachable): the accept
                // thread cannot be woken, so it and the workers are left to end with the
                // process rather than hang the shutdown.
                log::warn!(
                    "{}: cannot wake the accept thread on {} ({error}); not waiting for it",
                    self.name,
                    self.address()
                );
                self.accept_thread.take();
                self.workers.shutdown(Duration::ZERO);
            }
        }
        if let (ListenAddress::Unix(path), Some(identity)) = (self.address(), self.socket_identity)
        {
            let ours = std::fs::symlink_metadata(path)
                .map(|metadata| (metadata.dev(), metadata.ino()) == identity)
                .unwrap_or(false);
            if ours {
                let _ = std::fs::remove_file(path);
            }
        }
        log::info!("{} on {} stopped", self.name, self.address());
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Waits in poll(2) until one of `listeners` has a connection, accepts every one waiting, and
/// hands each to a worker; until `stopping`.
fn accept_loop(
    name: &str,
    listeners: &[Listener],
    workers: &ConnectionWorkers,
    stopping: &AtomicBool,
) {
    let mut last_refusal_log: Option<Instant> = None;
    let mut poll_fds: Vec<libc::pollfd> = listeners
        .iter()
        .map(|listener| libc::pollfd {
            fd: listener.raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        // SAFETY: `poll_fds` is a live, exclusively borrowed array of `poll_fds.len()` pollfd
        // structs for the whole call, and the descriptors stay open (the listeners outlive it).
        let ready =
            unsafe { libc::poll(poll_fds.as_mut_ptr(), poll_fds.len() as libc::nfds_t, -1) };
        if stopping.load(Ordering::SeqCst) {
            break;
        }
        if ready < 0 {
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::Interrupted {
                log::warn!("{name}: waiting for connections failed: {error}");
                thread::sleep(Duration::from_millis(100));
            }
            continue;
        }
        for (listener, polled) in listeners.iter().zip(&poll_fds) {
            if polled.revents == 0 {
                continue;
            }
            loop {
                let connection = match listener.accept() {
                    Ok(connection) => connection,
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                    Err(error) => {
                        // EMFILE and friends: back off briefly rather than spin.
                        log::warn!("{name}: accept failed: {error}");
                        thread::sleep(Duration::from_millis(100));
                        break;
                    }
                };
                if stopping.load(Ordering::SeqCst) {
                    return;
                }
                match workers.submit(connection) {
                    Ok(()) => {}
                    Err(Refused::Stopping(_)) => return,
                    Err(Refused::Full(connection) | Refused::NoWorker(connection)) => {
                        // Every worker is busy and the queue is full: close at once
                        // (rate-limited log).
                        drop(connection);
                        let log_now = match last_refusal_log {
                            None => true,
                            Some(at) => at.elapsed() > Duration::from_secs(10),
                        };
                        if log_now {
                            log::warn!("{name}: too many connections, closing new ones");
                            last_refusal_log = Some(Instant::now());
                        }
                    }
                }
            }
        }
        for polled in &mut poll_fds {
            polled.revents = 0;
        }
    }
}

/// Writes a streamed body as it is produced, until it ends, the client goes away (a write
/// fails, or an idle check finds the connection closed) or the server stops. The stream is
/// dropped on return, which releases what it holds.
fn write_stream(
    connection: &mut Connection,
    response: &HttpResponse,
    mut stream: Box<dyn ResponseStream>,
    stopping: &AtomicBool,
) {
    if write_streaming_head(connection, response).is_err() {
        return;
    }
    loop {
        // Checked before every step, not only when idle: a chatty log must not keep a stopping
        // server waiting.
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        // A stream must not panic; if one does, the body ends here (the client sees it cut)
        // and the worker lives on.
        let next = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            stream.next_event(STREAM_IDLE_CHECK)
        }));
        let Ok(next) = next else {
            log::error!("an API response stream panicked");
            return;
        };
        match next {
            StreamEvent::Data(data) => {
                if write_chunk(connection, &data).is_err() {
                    return;
                }
            }
            StreamEvent::Idle => {
                if connection.client_gone() {
                    return;
                }
            }
            StreamEvent::End => {
                let _ = write_last_chunk(connection);
                return;
            }
        }
    }
}

fn serve_connection(mut connection: Connection, handler: &Handler, stopping: &AtomicBool) {
    let read = {
        let mut deadline = Deadline {
            until: Instant::now() + REQUEST_READ_DEADLINE,
            connection: &mut connection,
        };
        read_request(&mut deadline, MAX_REQUEST_BODY_BYTES)
    };
    let _ = connection.set_timeouts(None, Some(WRITE_TIMEOUT));
    match read {
        Ok(request) => {
            let response =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(&request)))
                    .unwrap_or_else(|_| {
                        log::error!(
                            "API handler panicked on {} {}",
                            request.method,
                            request.path
                        );
                        HttpResponse::error(500, "internal error")
                    });
            match response.stream.as_ref().and_then(|body| body.take()) {
                Some(stream) => write_stream(&mut connection, &response, stream, stopping),
                None => {
                    let _ = write_response(&mut connection, &response);
                }
            }
        }
        Err(error) => {
            if let Some(status) = error.response_status() {
                let response = HttpResponse::error(status, error.to_string());
                let _ = write_response(&mut connection, &response);
                linger(&mut connection);
            }
        }
    }
}

/// After answering without reading the whole request: close our side for writing, then discard
/// what the client still sends for a short while, so it reads our answer rather than a reset.
fn linger(connection: &mut Connection) {
    connection.shutdown_write();
    let until = Instant::now() + LINGER;
    let mut discard = [0u8; 16 * 1024];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || connection.set_timeouts(Some(left), None).is_err() {
            return;
        }
        match connection.read(&mut discard) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}
