//! TLS client streams over the system's OpenSSL, loaded at run time with `dlopen` the first time
//! an `https://` (or `wss://`) endpoint is used.
//!
//! Why not a crate: a Rust TLS stack (rustls with its crypto and root handling) adds more than a
//! megabyte to the binary, far past deckhand's size budget, and linking OpenSSL at build time
//! would need its headers on every build machine and its library on every host, also those that
//! never talk to ECS. `dlopen` costs neither: a host without OpenSSL runs deckhand as before and
//! gets a clear error only when it asks for TLS.
//!
//! Only functions present in both OpenSSL 1.1.1 and 3.x are used (`libssl.so.3` is tried first,
//! then `libssl.so.1.1`). The client verifies the peer (`SSL_VERIFY_PEER`) against the system's
//! default roots (`SSL_CERT_FILE` and `SSL_CERT_DIR` override them, which is how tests add their
//! CA) or a given CA file, checks the host name (or IP address) against the certificate, sends
//! SNI for names, and speaks TLS 1.2 at least.
//!
//! Every `unsafe` block of the crate's FFI lives here, each with its reason. [`TlsStream`] owns
//! the `TcpStream` and the `SSL*`: it implements `Read` and `Write`, its timeouts are the
//! socket's (a timed-out read is `io::ErrorKind::TimedOut`), and it frees the `SSL*` on drop.
//! A server side ([`TlsAcceptor`]) exists for tests only, so they can run TLS fakes with the
//! fixture certificates of `tests/fixtures/tls/` and no extra crate.

use std::ffi::{c_char, c_int, c_long, c_ulong, c_void, CStr, CString};
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{IpAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::OnceLock;

/// The library names tried, in order.
const LIBRARY_NAMES: &[&str] = &["libssl.so.3", "libssl.so.1.1"];

const SSL_VERIFY_PEER: c_int = 1;
const SSL_CTRL_SET_TLSEXT_HOSTNAME: c_int = 55;
const TLSEXT_NAMETYPE_HOST_NAME: c_long = 0;
const SSL_CTRL_SET_MIN_PROTO_VERSION: c_int = 123;
const TLS1_2_VERSION: c_long = 0x0303;
const X509_V_OK: c_long = 0;

const SSL_ERROR_SSL: c_int = 1;
const SSL_ERROR_WANT_READ: c_int = 2;
const SSL_ERROR_WANT_WRITE: c_int = 3;
const SSL_ERROR_SYSCALL: c_int = 5;
const SSL_ERROR_ZERO_RETURN: c_int = 6;

/// Declares the OpenSSL functions deckhand calls and their loader: one field per function,
/// looked up by its own name with `dlsym`.
macro_rules! openssl_functions {
    ($($name:ident: fn($($argument:ty),*) -> $result:ty;)*) => {
        /// The OpenSSL functions, resolved once (the server side's only called by tests).
        #[allow(non_snake_case)]
        #[cfg_attr(not(any(test, feature = "test-support")), allow(dead_code))]
        struct Api {
            $($name: unsafe extern "C" fn($($argument),*) -> $result,)*
        }

        impl Api {
            /// Resolves every function in `handle` (and the libraries it depends on, where
            /// `libcrypto`'s `ERR_*` and `X509_*` live).
            ///
            /// # Safety
            /// `handle` is a live `dlopen` handle of an OpenSSL 1.1.1 or 3.x `libssl`, whose
            /// functions have the C signatures declared here.
            unsafe fn load(handle: *mut c_void, library: &str) -> Result<Api, String> {
                Ok(Api {
                    $($name: {
                        let name = concat!(stringify!($name), "\0");
                        // SAFETY: `name` ends in NUL; `handle` is live (the caller's promise).
                        let symbol = unsafe { libc::dlsym(handle, name.as_ptr().cast()) };
                        if symbol.is_null() {
                            return Err(format!(
                                "{library} has no function {}: it is not OpenSSL 1.1.1 or 3.x",
                                stringify!($name)
                            ));
                        }
                        // SAFETY: the symbol is that OpenSSL function, whose C signature is
                        // the declared one (the caller's promise); a function pointer and a
                        // data pointer have the same size on every platform deckhand builds for.
                        unsafe {
                            std::mem::transmute::<
                                *mut c_void,
                                unsafe extern "C" fn($($argument),*) -> $result,
                            >(symbol)
                        }
                    },)*
                })
            }
        }
    };
}

openssl_functions! {
    TLS_client_method: fn() -> *const c_void;
    TLS_server_method: fn() -> *const c_void;
    SSL_CTX_new: fn(*const c_void) -> *mut c_void;
    SSL_CTX_free: fn(*mut c_void) -> ();
    SSL_CTX_set_default_verify_paths: fn(*mut c_void) -> c_int;
    SSL_CTX_load_verify_locations: fn(*mut c_void, *const c_char, *const c_char) -> c_int;
    SSL_CTX_set_verify: fn(*mut c_void, c_int, *const c_void) -> ();
    SSL_CTX_ctrl: fn(*mut c_void, c_int, c_long, *mut c_void) -> c_long;
    SSL_CTX_use_certificate_file: fn(*mut c_void, *const c_char, c_int) -> c_int;
    SSL_CTX_use_PrivateKey_file: fn(*mut c_void, *const c_char, c_int) -> c_int;
    SSL_new: fn(*mut c_void) -> *mut c_void;
    SSL_free: fn(*mut c_void) -> ();
    SSL_set_fd: fn(*mut c_void, c_int) -> c_int;
    SSL_ctrl: fn(*mut c_void, c_int, c_long, *mut c_void) -> c_long;
    SSL_set1_host: fn(*mut c_void, *const c_char) -> c_int;
    SSL_get0_param: fn(*mut c_void) -> *mut c_void;
    X509_VERIFY_PARAM_set1_ip_asc: fn(*mut c_void, *const c_char) -> c_int;
    SSL_connect: fn(*mut c_void) -> c_int;
    SSL_accept: fn(*mut c_void) -> c_int;
    SSL_read: fn(*mut c_void, *mut c_void, c_int) -> c_int;
    SSL_write: fn(*mut c_void, *const c_void, c_int) -> c_int;
    SSL_get_error: fn(*const c_void, c_int) -> c_int;
    SSL_shutdown: fn(*mut c_void) -> c_int;
    SSL_get_verify_result: fn(*const c_void) -> c_long;
    X509_verify_cert_error_string: fn(c_long) -> *const c_char;
    ERR_get_error: fn() -> c_ulong;
    ERR_clear_error: fn() -> ();
    ERR_error_string_n: fn(c_ulong, *mut c_char, usize) -> ();
}

/// A TLS failure: the library is missing, the handshake or the peer's certificate failed, or
/// the connection broke. The message names what happened in OpenSSL's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsError {
    /// No usable OpenSSL on this host.
    Unavailable(String),
    /// The peer's certificate was refused (untrusted, expired, or for another name).
    Verification(String),
    /// Anything else: a handshake failure, a broken or timed-out connection, bad setup.
    Handshake(String),
    /// The handshake timed out (the socket's read or write timeout).
    TimedOut,
}

impl fmt::Display for TlsError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::Unavailable(message) => write!(formatter, "{message}"),
            TlsError::Verification(message) => {
                write!(formatter, "TLS certificate verification failed: {message}")
            }
            TlsError::Handshake(message) => write!(formatter, "TLS handshake failed: {message}"),
            TlsError::TimedOut => write!(formatter, "TLS handshake timed out"),
        }
    }
}

impl std::error::Error for TlsError {}

/// The loaded library, or why it could not be loaded; tried once per process.
fn api() -> Result<&'static Api, TlsError> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(load_library)
        .as_ref()
        .map_err(|message| TlsError::Unavailable(message.clone()))
}

fn load_library() -> Result<Api, String> {
    let mut failures = Vec::new();
    for library in LIBRARY_NAMES {
        let name = CString::new(*library).map_err(|_| "library name".to_string())?;
        // SAFETY: `name` is a NUL-terminated string. The handle is never closed, so the
        // function pointers resolved from it stay valid for the life of the process.
        let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            failures.push(dl_error().unwrap_or_else(|| format!("{library}: not found")));
            continue;
        }
        // SAFETY: `handle` is a live handle of a library called libssl.so.3 or .1.1, both of
        // which export these functions with these signatures.
        return unsafe { Api::load(handle, library) };
    }
    Err(format!(
        "TLS needs the system's OpenSSL (libssl.so.3 or libssl.so.1.1), which could not be \
         loaded ({}): install libssl3 (Debian, Ubuntu) or openssl-libs (Fedora, RHEL, Amazon \
         Linux)",
        failures.join("; ")
    ))
}

/// The text of the last `dlopen` failure, if any.
fn dl_error() -> Option<String> {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl call on
    // this thread; it is copied out at once.
    unsafe {
        let text = libc::dlerror();
        (!text.is_null()).then(|| CStr::from_ptr(text).to_string_lossy().into_owned())
    }
}

/// Drains this thread's OpenSSL error queue into one line (empty when it holds nothing).
fn error_queue(api: &Api) -> String {
    let mut messages = Vec::new();
    for _ in 0..16 {
        // SAFETY: ERR_get_error takes no argument and only reads this thread's error queue.
        let code = unsafe { (api.ERR_get_error)() };
        if code == 0 {
            break;
        }
        let mut buffer = [0 as c_char; 256];
        // SAFETY: the buffer is writable for its length; OpenSSL writes at most that many
        // bytes, NUL included.
        let text = unsafe {
            (api.ERR_error_string_n)(code, buffer.as_mut_ptr(), buffer.len());
            CStr::from_ptr(buffer.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        messages.push(text);
    }
    messages.join("; ")
}

/// An `SSL_CTX*`, freed on drop.
struct Context {
    api: &'static Api,
    pointer: *mut c_void,
}

impl Context {
    fn new(api: &'static Api, server: bool) -> Result<Context, TlsError> {
        // SAFETY: the method functions take no argument and return a static table;
        // SSL_CTX_new returns NULL or a new context that this value owns.
        let pointer = unsafe {
            (api.ERR_clear_error)();
            let method = if server {
                (api.TLS_server_method)()
            } else {
                (api.TLS_client_method)()
            };
            (api.SSL_CTX_new)(method)
        };
        if pointer.is_null() {
            return Err(TlsError::Handshake(format!(
                "creating a TLS context: {}",
                error_queue(api)
            )));
        }
        let context = Context { api, pointer };
        // SAFETY: `pointer` is a live context; the control call only sets an integer.
        let minimum = unsafe {
            (api.SSL_CTX_ctrl)(
                pointer,
                SSL_CTRL_SET_MIN_PROTO_VERSION,
                TLS1_2_VERSION,
                std::ptr::null_mut(),
            )
        };
        if minimum != 1 {
            return Err(context.failure("setting TLS 1.2 as the minimum version"));
        }
        Ok(context)
    }

    fn failure(&self, what: &str) -> TlsError {
        TlsError::Handshake(format!("{what}: {}", error_queue(self.api)))
    }

    /// A new `SSL*` on `socket`'s descriptor, owned by the caller; it holds its own reference
    /// to this context.
    fn new_session(&self, socket: &TcpStream) -> Result<Session, TlsError> {
        // SAFETY: the context is live; SSL_new returns NULL or a new SSL that `Session` owns.
        let pointer = unsafe { (self.api.SSL_new)(self.pointer) };
        if pointer.is_null() {
            return Err(self.failure("creating a TLS session"));
        }
        let session = Session {
            api: self.api,
            pointer,
        };
        // SAFETY: both are live; the descriptor outlives the SSL because `TlsStream` drops
        // the SSL first.
        if unsafe { (self.api.SSL_set_fd)(pointer, socket.as_raw_fd()) } != 1 {
            return Err(self.failure("attaching the TLS session to its socket"));
        }
        Ok(session)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: the context is live and owned; sessions made from it hold their own
        // reference, so freeing it here never frees it under them.
        unsafe { (self.api.SSL_CTX_free)(self.pointer) }
    }
}

/// An `SSL*`, freed on drop.
struct Session {
    api: &'static Api,
    pointer: *mut c_void,
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: the session is live and owned.
        unsafe { (self.api.SSL_free)(self.pointer) }
    }
}

/// What one failed `SSL_*` call means.
enum Failure {
    /// The socket's timeout ran out (`EAGAIN` on a blocking socket with a timeout).
    TimedOut,
    /// The peer sent close_notify: a clean end of the stream.
    Closed,
    /// The peer closed the connection without close_notify.
    ClosedEarly,
    /// An I/O error from the socket.
    Io(io::Error),
    /// A protocol or verification error, in OpenSSL's words.
    Protocol(String),
}

impl Session {
    /// Classifies the failure of a call that returned `result`. Reads errno and the error
    /// queue, so it must run right after the call, on the same thread.
    fn failure(&self, result: c_int) -> Failure {
        let os_error = io::Error::last_os_error();
        // SAFETY: the session is live; SSL_get_error only reads its state and the queue.
        let code = unsafe { (self.api.SSL_get_error)(self.pointer, result) };
        match code {
            SSL_ERROR_WANT_READ | SSL_ERROR_WANT_WRITE => Failure::TimedOut,
            SSL_ERROR_ZERO_RETURN => Failure::Closed,
            SSL_ERROR_SYSCALL => {
                let queue = error_queue(self.api);
                if !queue.is_empty() {
                    Failure::Protocol(queue)
                } else if result == 0 || os_error.raw_os_error() == Some(0) {
                    Failure::ClosedEarly
                } else if matches!(
                    os_error.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) {
                    Failure::TimedOut
                } else {
                    Failure::Io(os_error)
                }
            }
            SSL_ERROR_SSL => {
                let queue = error_queue(self.api);
                // OpenSSL 3 reports a peer that closed without close_notify as an SSL error.
                if queue.contains("unexpected eof") {
                    Failure::ClosedEarly
                } else {
                    Failure::Protocol(queue)
                }
            }
            other => Failure::Protocol(format!("OpenSSL error {other}: {}", error_queue(self.api))),
        }
    }

    /// Why the peer's certificate was refused, if it was.
    fn verification_failure(&self) -> Option<String> {
        // SAFETY: the session is live; the result is a plain integer.
        let result = unsafe { (self.api.SSL_get_verify_result)(self.pointer) };
        if result == X509_V_OK {
            return None;
        }
        // SAFETY: X509_verify_cert_error_string returns a static NUL-terminated string.
        let text = unsafe {
            let text = (self.api.X509_verify_cert_error_string)(result);
            if text.is_null() {
                format!("error {result}")
            } else {
                CStr::from_ptr(text).to_string_lossy().into_owned()
            }
        };
        Some(text)
    }

    /// Runs the handshake (`SSL_connect` or `SSL_accept`).
    fn handshake(&self, client: bool) -> Result<(), TlsError> {
        // SAFETY: the session is live and attached to a connected socket.
        let result = unsafe {
            (self.api.ERR_clear_error)();
            if client {
                (self.api.SSL_connect)(self.pointer)
            } else {
                (self.api.SSL_accept)(self.pointer)
            }
        };
        if result == 1 {
            return Ok(());
        }
        let failure = self.failure(result);
        if client {
            if let Some(reason) = self.verification_failure() {
                return Err(TlsError::Verification(reason));
            }
        }
        Err(match failure {
            Failure::TimedOut => TlsError::TimedOut,
            Failure::Closed | Failure::ClosedEarly => {
                TlsError::Handshake("the peer closed the connection during the handshake".into())
            }
            Failure::Io(error) => TlsError::Handshake(error.to_string()),
            Failure::Protocol(message) => TlsError::Handshake(message),
        })
    }
}

/// A TLS connection over a TCP stream. Its timeouts are the socket's: set them on the
/// `TcpStream` (before or after the handshake, through [`TlsStream::get_ref`]).
pub struct TlsStream {
    // Declared first: dropped (and freed) before the socket it reads from is closed.
    session: Session,
    socket: TcpStream,
    /// Set after a fatal error, when OpenSSL forbids a close_notify.
    broken: bool,
}

// SAFETY: the SSL* is owned by this value alone and OpenSSL allows an SSL object to be used
// from any thread as long as only one uses it at a time, which `&mut self` guarantees. It is
// not `Sync`.
unsafe impl Send for TlsStream {}

impl fmt::Debug for TlsStream {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("TlsStream")
            .field("socket", &self.socket)
            .finish_non_exhaustive()
    }
}

/// Connects TLS over `socket` to `host` (a DNS name, or an IP address literal without
/// brackets), verifying the peer's certificate against the system's roots (`SSL_CERT_FILE`,
/// `SSL_CERT_DIR`) and `extra_ca_file` when given. The socket's timeouts bound the handshake.
pub fn connect(
    socket: TcpStream,
    host: &str,
    extra_ca_file: Option<&Path>,
) -> Result<TlsStream, TlsError> {
    let api = api()?;
    let context = Context::new(api, false)?;
    let name = CString::new(host)
        .map_err(|_| TlsError::Handshake(format!("host name {host:?} contains a NUL")))?;
    // SAFETY: the context is live; the strings are NUL-terminated and outlive the calls.
    unsafe {
        (api.SSL_CTX_set_verify)(context.pointer, SSL_VERIFY_PEER, std::ptr::null());
        if (api.SSL_CTX_set_default_verify_paths)(context.pointer) != 1 {
            return Err(context.failure("loading the system's CA certificates"));
        }
    }
    if let Some(file) = extra_ca_file {
        let path = path_string(file)?;
        // SAFETY: as above.
        let loaded = unsafe {
            (api.SSL_CTX_load_verify_locations)(context.pointer, path.as_ptr(), std::ptr::null())
        };
        if loaded != 1 {
            return Err(
                context.failure(&format!("loading CA certificates from {}", file.display()))
            );
        }
    }
    let session = context.new_session(&socket)?;
    let is_address = host.parse::<IpAddr>().is_ok();
    // SAFETY: the session is live; `name` is NUL-terminated and outlives the calls, which copy
    // it.
    unsafe {
        if is_address {
            // SNI carries names only (RFC 6066 §3); an address is checked against IP SANs.
            let parameters = (api.SSL_get0_param)(session.pointer);
            if parameters.is_null()
                || (api.X509_VERIFY_PARAM_set1_ip_asc)(parameters, name.as_ptr()) != 1
            {
                return Err(context.failure(&format!("setting {host} as the expected address")));
            }
        } else {
            let sni = (api.SSL_ctrl)(
                session.pointer,
                SSL_CTRL_SET_TLSEXT_HOSTNAME,
                TLSEXT_NAMETYPE_HOST_NAME,
                name.as_ptr() as *mut c_void,
            );
            if sni != 1 || (api.SSL_set1_host)(session.pointer, name.as_ptr()) != 1 {
                return Err(context.failure(&format!("setting {host} as the expected name")));
            }
        }
    }
    drop(context);
    session.handshake(true)?;
    Ok(TlsStream {
        session,
        socket,
        broken: false,
    })
}

fn path_string(path: &Path) -> Result<CString, TlsError> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| TlsError::Handshake(format!("{} contains a NUL", path.display())))
}

impl TlsStream {
    /// The TCP stream underneath: for its timeouts and addresses. Reading or writing it
    /// directly would corrupt the TLS stream.
    pub fn get_ref(&self) -> &TcpStream {
        &self.socket
    }

    fn io_error(&mut self, failure: Failure) -> io::Error {
        match failure {
            Failure::TimedOut => {
                io::Error::new(io::ErrorKind::TimedOut, "TLS read or write timed out")
            }
            Failure::Closed => io::Error::new(io::ErrorKind::UnexpectedEof, "TLS peer closed"),
            Failure::ClosedEarly => {
                self.broken = true;
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the TLS peer closed the connection without close_notify",
                )
            }
            Failure::Io(error) => {
                self.broken = true;
                error
            }
            Failure::Protocol(message) => {
                self.broken = true;
                io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {message}"))
            }
        }
    }
}

impl Read for TlsStream {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        if buffer.is_empty() {
            return Ok(0);
        }
        let length = c_int::try_from(buffer.len()).unwrap_or(c_int::MAX);
        let api = self.session.api;
        // SAFETY: the session is live; the buffer is writable for `length` bytes.
        let result = unsafe {
            (api.ERR_clear_error)();
            (api.SSL_read)(self.session.pointer, buffer.as_mut_ptr().cast(), length)
        };
        if result > 0 {
            return Ok(result as usize);
        }
        match self.session.failure(result) {
            // close_notify: the stream's clean end.
            Failure::Closed => Ok(0),
            failure => Err(self.io_error(failure)),
        }
    }
}

impl Write for TlsStream {
    fn write(&mut self, buffer: &[u8]) -> io::Result<usize> {
        if buffer.is_empty() {
            return Ok(0);
        }
        let length = c_int::try_from(buffer.len()).unwrap_or(c_int::MAX);
        let api = self.session.api;
        // SAFETY: the session is live; the buffer is readable for `length` bytes.
        let result = unsafe {
            (api.ERR_clear_error)();
            (api.SSL_write)(self.session.pointer, buffer.as_ptr().cast(), length)
        };
        if result > 0 {
            return Ok(result as usize);
        }
        let failure = self.session.failure(result);
        Err(self.io_error(failure))
    }

    fn flush(&mut self) -> io::Result<()> {
        // SSL_write hands every record to the socket before it returns.
        Ok(())
    }
}

impl Drop for TlsStream {
    fn drop(&mut self) {
        if !self.broken {
            // Sends close_notify without waiting for the peer's; a failure changes nothing,
            // the socket closes next either way.
            // SAFETY: the session is live and its handshake completed.
            unsafe {
                (self.session.api.ERR_clear_error)();
                (self.session.api.SSL_shutdown)(self.session.pointer);
                (self.session.api.ERR_clear_error)();
            }
        }
    }
}

/// The server side, for tests' TLS fakes only: a certificate chain and key from PEM files.
#[cfg(any(test, feature = "test-support"))]
pub struct TlsAcceptor {
    context: Context,
}

// SAFETY: an SSL_CTX is safe to share between threads once set up: SSL_new only takes a
// reference under OpenSSL's own lock.
#[cfg(any(test, feature = "test-support"))]
unsafe impl Send for TlsAcceptor {}
#[cfg(any(test, feature = "test-support"))]
unsafe impl Sync for TlsAcceptor {}

#[cfg(any(test, feature = "test-support"))]
impl TlsAcceptor {
    /// A server context with the PEM certificate chain `certificate` and key `key`.
    pub fn new(certificate: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
        const SSL_FILETYPE_PEM: c_int = 1;
        let api = api()?;
        let context = Context::new(api, true)?;
        let certificate_path = path_string(certificate)?;
        let key_path = path_string(key)?;
        // SAFETY: the context is live; the paths are NUL-terminated and outlive the calls.
        unsafe {
            if (api.SSL_CTX_use_certificate_file)(
                context.pointer,
                certificate_path.as_ptr(),
                SSL_FILETYPE_PEM,
            ) != 1
            {
                return Err(context.failure(&format!("loading {}", certificate.display())));
            }
            if (api.SSL_CTX_use_PrivateKey_file)(
                context.pointer,
                key_path.as_ptr(),
                SSL_FILETYPE_PEM,
            ) != 1
            {
                return Err(context.failure(&format!("loading {}", key.display())));
            }
        }
        Ok(TlsAcceptor { context })
    }

    /// Runs the server handshake on an accepted connection.
    pub fn accept(&self, socket: TcpStream) -> Result<TlsStream, TlsError> {
        let session = self.context.new_session(&socket)?;
        session.handshake(false)?;
        Ok(TlsStream {
            session,
            socket,
            broken: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::path::PathBuf;
    use std::thread;
    use std::time::Duration;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/tls")
            .join(name)
    }

    /// A one-connection TLS server on 127.0.0.1 running `serve` on the accepted stream (or
    /// on the handshake's failure), and the client's socket with 5 s timeouts.
    fn serve_once<F>(serve: F) -> (TcpStream, thread::JoinHandle<()>)
    where
        F: FnOnce(Result<TlsStream, TlsError>) + Send + 'static,
    {
        let acceptor = TlsAcceptor::new(&fixture("server.pem"), &fixture("server.key"))
            .expect("the fixture certificate and key load");
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address");
        let server = thread::spawn(move || {
            let (socket, _) = listener.accept().expect("accept");
            socket
                .set_read_timeout(Some(Duration::from_secs(5)))
                .expect("timeout");
            serve(acceptor.accept(socket));
        });
        let client = TcpStream::connect(address).expect("connect");
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        client
            .set_write_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        (client, server)
    }

    fn echo(stream: Result<TlsStream, TlsError>) {
        let mut stream = stream.expect("server handshake");
        let mut buffer = [0u8; 5];
        stream.read_exact(&mut buffer).expect("read");
        stream.write_all(&buffer).expect("write");
    }

    fn ca() -> Option<PathBuf> {
        Some(fixture("ca.pem"))
    }

    #[test]
    fn handshake_with_the_fixture_ca_reads_and_writes_by_name_and_by_address() {
        for host in ["localhost", "127.0.0.1"] {
            let (client, server) = serve_once(echo);
            let mut stream = connect(client, host, ca().as_deref()).expect("client handshake");
            stream.write_all(b"hello").expect("write");
            let mut answer = [0u8; 5];
            stream.read_exact(&mut answer).expect("read");
            assert_eq!(&answer, b"hello");
            // The server wrote and closed with close_notify: a clean end.
            let mut rest = Vec::new();
            assert_eq!(stream.read_to_end(&mut rest).expect("clean end"), 0);
            server.join().expect("server");
        }
    }

    #[test]
    fn a_certificate_for_another_name_is_refused_naming_verification() {
        let (client, server) = serve_once(|_| {});
        let error = connect(client, "ecs.example.com", ca().as_deref()).expect_err("wrong name");
        assert!(matches!(error, TlsError::Verification(_)), "{error}");
        let message = error.to_string();
        assert!(message.contains("verification"), "{message}");
        assert!(message.contains("mismatch"), "{message}");
        server.join().expect("server");
    }

    #[test]
    fn an_untrusted_certificate_is_refused() {
        // Without the fixture CA, and with the system's roots pointed at nothing, the server's
        // certificate chains to nothing trusted. (SSL_CERT_FILE is not changed here: other
        // tests run in parallel; the system's roots never include the fixture CA.)
        let (client, server) = serve_once(|_| {});
        let error = connect(client, "localhost", None).expect_err("untrusted");
        assert!(matches!(error, TlsError::Verification(_)), "{error}");
        assert!(error.to_string().contains("certificate"), "{error}");
        server.join().expect("server");
    }

    #[test]
    fn a_peer_that_closes_mid_stream_is_an_error_not_a_clean_end() {
        let (client, server) = serve_once(|stream| {
            let stream = stream.expect("server handshake");
            let mut stream = std::mem::ManuallyDrop::new(stream);
            stream.write_all(b"half").expect("write");
            // Close the socket without close_notify.
            stream
                .get_ref()
                .shutdown(std::net::Shutdown::Both)
                .expect("shutdown");
        });
        let mut stream = connect(client, "localhost", ca().as_deref()).expect("handshake");
        let mut buffer = [0u8; 4];
        stream
            .read_exact(&mut buffer)
            .expect("the bytes before the close");
        server.join().expect("server");
        let error = stream
            .read(&mut buffer)
            .expect_err("closed without close_notify");
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof, "{error}");
    }

    #[test]
    fn a_read_that_outlasts_the_socket_timeout_is_timed_out() {
        let (release, released) = crossbeam_channel::bounded::<()>(1);
        let (client, server) = serve_once(move |stream| {
            let _stream = stream.expect("server handshake");
            let _ = released.recv_timeout(Duration::from_secs(10));
        });
        let mut stream = connect(client, "localhost", ca().as_deref()).expect("handshake");
        stream
            .get_ref()
            .set_read_timeout(Some(Duration::from_millis(100)))
            .expect("timeout");
        let mut buffer = [0u8; 4];
        let error = stream.read(&mut buffer).expect_err("nothing comes");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut, "{error}");
        release.send(()).expect("server waits");
        server.join().expect("server");
    }

    #[test]
    fn a_server_that_speaks_no_tls_fails_the_handshake() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address");
        let server = thread::spawn(move || {
            let (mut socket, _) = listener.accept().expect("accept");
            let _ = socket.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        });
        let client = TcpStream::connect(address).expect("connect");
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let error = connect(client, "localhost", ca().as_deref()).expect_err("not TLS");
        assert!(matches!(error, TlsError::Handshake(_)), "{error}");
        server.join().expect("server");
    }
}
