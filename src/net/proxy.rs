//! Which proxy a connection to a host goes through, read from the environment as curl reads it:
//! `HTTPS_PROXY`/`https_proxy` for `https`/`wss` targets, `HTTP_PROXY`/`http_proxy` for
//! `http`/`ws` ones (the lowercase name wins where both are set, as in curl), and
//! `NO_PROXY`/`no_proxy` for the hosts reached directly. The rules are pure
//! ([`ProxySettings::proxy_for`], [`NoProxy::matches`]) and table-tested.
//!
//! `NO_PROXY` follows curl (`lib/noproxy.c`): entries separated by commas or spaces; `*` alone
//! matches every host; a name matches itself and every name under it (`example.com` and
//! `.example.com` both match `example.com` and `api.example.com`, never `badexample.com`),
//! without regard to case or a trailing dot; an IP address matches that address, and
//! `10.0.0.0/8` or `fd00::/8` a range (an IPv6 entry may be in brackets). A name entry never
//! matches a host given as an address, nor the other way round.
//!
//! Never proxied, whatever the environment says: the ECS credentials endpoint `169.254.170.2`
//! (the Docker socket is a Unix socket and never passes here). Loopback is proxied unless
//! `NO_PROXY` names it, as curl does.
//!
//! Every proxied connection is a `CONNECT` tunnel (the ECS API through ureq, the websockets
//! through [`connect_tunnel`]); the proxy's answer is read by [`parse_connect_answer`] (pure,
//! bounded, fuzzed).

use std::io::{self, Read, Write};
use std::net::IpAddr;

/// The longest proxy answer head read before giving up on the proxy.
pub const MAX_CONNECT_ANSWER_BYTES: usize = 16 * 1024;
/// The ECS task credentials endpoint: never proxied (the Go agent's rule).
pub const CREDENTIALS_ENDPOINT_ADDRESS: &str = "169.254.170.2";

/// An HTTP proxy: where it is and, when its URL carried them, the credentials for
/// `Proxy-Authorization: Basic`.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyUrl {
    /// The URL as given (credentials and all): ureq takes it as it is.
    pub url: String,
    pub host: String,
    pub port: u16,
    /// `user:password`, percent-decoded.
    pub credentials: Option<String>,
}

impl std::fmt::Debug for ProxyUrl {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}", self.display())
    }
}

impl ProxyUrl {
    /// Parses `http://[user:password@]host[:port][/]`, or `host[:port]` (curl takes a bare host
    /// as `http://`). The port defaults to 1080, as curl's does. An `https://` or SOCKS proxy
    /// is refused: deckhand speaks plain HTTP to its proxy.
    pub fn parse(text: &str) -> Result<ProxyUrl, String> {
        let text = text.trim();
        let bad = |why: &str| format!("proxy URL {:?} {why}", redact(text));
        let rest = match text.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
            Some((scheme, _)) => {
                return Err(bad(&format!(
                    "has the scheme {scheme:?}; only http:// proxies are supported"
                )))
            }
            None => text,
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let (credentials, host_port) = match authority.rsplit_once('@') {
            Some((userinfo, host_port)) => {
                let decoded = percent_decode(userinfo)
                    .ok_or_else(|| bad("has credentials with bad %-escapes"))?;
                (Some(decoded), host_port)
            }
            None => (None, authority),
        };
        let (host, port) = split_host_port(host_port).map_err(|why| bad(&why))?;
        if host.is_empty() {
            return Err(bad("has no host"));
        }
        let url = if text.contains("://") {
            text.to_string()
        } else {
            format!("http://{text}")
        };
        Ok(ProxyUrl {
            url,
            host,
            port: port.unwrap_or(1080),
            credentials,
        })
    }

    /// The proxy for messages: its URL without credentials.
    pub fn display(&self) -> String {
        format!("http://{}", host_port(&self.host, self.port))
    }
}

/// The URL with any `user:password@` replaced, for messages.
fn redact(text: &str) -> String {
    match (text.find("://"), text.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}://***@{}", &text[..scheme_end], &text[at + 1..])
        }
        (None, Some(at)) => format!("***@{}", &text[at + 1..]),
        _ => text.to_string(),
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`; the host without brackets, lowercase.
fn split_host_port(text: &str) -> Result<(String, Option<u16>), String> {
    let port_of = |port: &str| {
        port.parse::<u16>()
            .ok()
            .filter(|port| *port != 0)
            .ok_or_else(|| format!("has the port {port:?}, not a number from 1 to 65535"))
    };
    if let Some(literal) = text.strip_prefix('[') {
        let (address, after) = literal
            .split_once(']')
            .ok_or("has an IPv6 address without its closing ']'")?;
        let port = match after {
            "" => None,
            _ => Some(port_of(
                after.strip_prefix(':').ok_or("has text after ']'")?,
            )?),
        };
        return Ok((address.to_ascii_lowercase(), port));
    }
    match text.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => {
            Ok((host.to_ascii_lowercase(), Some(port_of(port)?)))
        }
        _ => Ok((text.to_ascii_lowercase(), None)),
    }
}

fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn percent_decode(text: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&byte, after)) = rest.split_first() {
        if byte == b'%' {
            let high = char::from(*after.first()?).to_digit(16)?;
            let low = char::from(*after.get(1)?).to_digit(16)?;
            bytes.push((high * 16 + low) as u8);
            rest = after.get(2..)?;
        } else {
            bytes.push(byte);
            rest = after;
        }
    }
    String::from_utf8(bytes).ok()
}

/// One `NO_PROXY` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NoProxyEntry {
    /// `*`.
    Everything,
    /// A name, lowercase, without leading or trailing dots.
    Name(String),
    /// An address and how many leading bits must match.
    Range(IpAddr, u8),
}

/// A parsed `NO_PROXY`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NoProxy {
    entries: Vec<NoProxyEntry>,
}

impl NoProxy {
    /// Parses the list as curl reads it. Entries that are neither a name nor an address nor a
    /// range are skipped, as curl skips them. Pure.
    pub fn parse(text: &str) -> NoProxy {
        let mut entries = Vec::new();
        for token in text
            .split([',', ' ', '\t'])
            .filter(|token| !token.is_empty())
        {
            if token == "*" {
                entries.push(NoProxyEntry::Everything);
                continue;
            }
            let (address_text, bits_text) = match token.split_once('/') {
                Some((address, bits)) => (address, Some(bits)),
                None => (token, None),
            };
            let bare = address_text
                .strip_prefix('[')
                .and_then(|inner| inner.strip_suffix(']'))
                .unwrap_or(address_text);
            if let Ok(address) = bare.parse::<IpAddr>() {
                let full = if address.is_ipv4() { 32 } else { 128 };
                let bits = match bits_text {
                    None => full,
                    Some(bits) => match bits.parse::<u8>() {
                        Ok(bits) if bits <= full => bits,
                        _ => continue,
                    },
                };
                entries.push(NoProxyEntry::Range(address, bits));
                continue;
            }
            if bits_text.is_some() {
                continue;
            }
            let name = token.trim_matches('.').to_ascii_lowercase();
            if !name.is_empty() {
                entries.push(NoProxyEntry::Name(name));
            }
        }
        NoProxy { entries }
    }

    /// Whether `host` (a name, or an address with or without IPv6 brackets) is to be reached
    /// directly. Pure.
    pub fn matches(&self, host: &str) -> bool {
        let bare = host
            .strip_prefix('[')
            .and_then(|inner| inner.strip_suffix(']'))
            .unwrap_or(host);
        let address = bare.parse::<IpAddr>().ok();
        let name = bare.trim_end_matches('.').to_ascii_lowercase();
        self.entries.iter().any(|entry| match (entry, address) {
            (NoProxyEntry::Everything, _) => true,
            (NoProxyEntry::Range(network, bits), Some(address)) => {
                in_range(address, *network, *bits)
            }
            (NoProxyEntry::Name(suffix), None) => {
                name == *suffix
                    || name
                        .strip_suffix(suffix.as_str())
                        .is_some_and(|head| head.ends_with('.'))
            }
            _ => false,
        })
    }
}

/// Whether the first `bits` bits of `address` are `network`'s (same family only).
fn in_range(address: IpAddr, network: IpAddr, bits: u8) -> bool {
    let (address, network, width) = match (address, network) {
        (IpAddr::V4(a), IpAddr::V4(n)) => (u128::from(u32::from(a)), u128::from(u32::from(n)), 32),
        (IpAddr::V6(a), IpAddr::V6(n)) => (u128::from(a), u128::from(n), 128),
        _ => return false,
    };
    if bits == 0 {
        return true;
    }
    let shift = width - u32::from(bits);
    (address >> shift) == (network >> shift)
}

/// The proxy settings of the process: the proxies for each kind of target, and the exceptions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxySettings {
    pub https: Option<ProxyUrl>,
    pub http: Option<ProxyUrl>,
    pub no_proxy: NoProxy,
}

impl ProxySettings {
    /// No proxy at all.
    pub fn direct() -> ProxySettings {
        ProxySettings::default()
    }

    /// From this process's environment.
    pub fn from_env() -> Result<ProxySettings, String> {
        ProxySettings::from_lookup(&|name| std::env::var(name).ok())
    }

    /// From the variables `lookup` gives (lowercase names over uppercase ones, empty values as
    /// unset). A proxy URL that cannot be used is an error naming the variable. Pure.
    pub fn from_lookup(lookup: &dyn Fn(&str) -> Option<String>) -> Result<ProxySettings, String> {
        let value = |lower: &str, upper: &str| -> Option<(String, String)> {
            [lower, upper].into_iter().find_map(|name| {
                lookup(name)
                    .filter(|value| !value.trim().is_empty())
                    .map(|value| (name.to_string(), value))
            })
        };
        let proxy = |lower: &str, upper: &str| -> Result<Option<ProxyUrl>, String> {
            match value(lower, upper) {
                None => Ok(None),
                Some((name, text)) => ProxyUrl::parse(&text)
                    .map(Some)
                    .map_err(|error| format!("{name}: {error}")),
            }
        };
        Ok(ProxySettings {
            https: proxy("https_proxy", "HTTPS_PROXY")?,
            http: proxy("http_proxy", "HTTP_PROXY")?,
            no_proxy: value("no_proxy", "NO_PROXY")
                .map(|(_, text)| NoProxy::parse(&text))
                .unwrap_or_default(),
        })
    }

    /// The proxy a connection to `host` goes through (`tls`: an `https`/`wss` target), `None`
    /// to connect directly. Pure.
    pub fn proxy_for(&self, tls: bool, host: &str) -> Option<&ProxyUrl> {
        let proxy = if tls { &self.https } else { &self.http };
        let proxy = proxy.as_ref()?;
        if never_proxied(host) || self.no_proxy.matches(host) {
            return None;
        }
        Some(proxy)
    }
}

/// The ECS credentials endpoint is reached directly whatever the settings say (the Go agent's
/// rule: it is link-local, a proxy cannot reach it).
fn never_proxied(host: &str) -> bool {
    host == CREDENTIALS_ENDPOINT_ADDRESS
}

/// What the proxy answered to `CONNECT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectAnswer {
    pub status: u16,
    pub reason: String,
    /// The bytes of the head, blank line included: what follows belongs to the tunnel.
    pub head_len: usize,
}

/// Reads the proxy's answer head at the start of `bytes`: `Ok(None)` while it is incomplete
/// (and under [`MAX_CONNECT_ANSWER_BYTES`]), an error for bytes that are not an HTTP answer or
/// a head over the limit. Pure.
pub fn parse_connect_answer(bytes: &[u8]) -> Result<Option<ConnectAnswer>, String> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(bytes) {
        Ok(httparse::Status::Complete(head_len)) => Ok(Some(ConnectAnswer {
            status: response.code.unwrap_or(0),
            reason: response.reason.unwrap_or("").to_string(),
            head_len,
        })),
        Ok(httparse::Status::Partial) if bytes.len() < MAX_CONNECT_ANSWER_BYTES => Ok(None),
        Ok(httparse::Status::Partial) => Err(format!(
            "the proxy's answer to CONNECT is over {MAX_CONNECT_ANSWER_BYTES} bytes"
        )),
        Err(error) => Err(format!(
            "the proxy's answer to CONNECT is not HTTP: {error}"
        )),
    }
}

/// Asks the proxy at the other end of `stream` for a tunnel to `host:port` and reads its
/// answer. Reads one byte at a time, so nothing past the answer's head (the target's first
/// bytes) is taken from the stream. A 2xx answer opens the tunnel; anything else is an error
/// with the proxy's status (a 407 asks for credentials).
pub fn connect_tunnel<S: Read + Write>(
    stream: &mut S,
    proxy: &ProxyUrl,
    host: &str,
    port: u16,
) -> io::Result<()> {
    let target = host_port(host, port);
    let mut request = format!(
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nUser-Agent: deckhand/{}\r\n",
        crate::VERSION
    );
    if let Some(credentials) = &proxy.credentials {
        request.push_str(&format!(
            "Proxy-Authorization: Basic {}\r\n",
            crate::encoding::base64(credentials.as_bytes())
        ));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes())?;
    stream.flush()?;
    let mut answer = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    loop {
        if stream.read(&mut byte)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "the proxy {} closed the connection before answering CONNECT",
                    proxy.display()
                ),
            ));
        }
        answer.push(byte[0]);
        if !answer.ends_with(b"\n") {
            continue;
        }
        let parsed = parse_connect_answer(&answer)
            .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))?;
        if let Some(parsed) = parsed {
            if (200..300).contains(&parsed.status) {
                return Ok(());
            }
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!(
                    "the proxy {} answered CONNECT {target} with {} {}",
                    proxy.display(),
                    parsed.status,
                    parsed.reason
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_proxy_matches_as_curl_reads_it() {
        let table: &[(&str, &str, bool)] = &[
            ("", "example.com", false),
            ("*", "example.com", true),
            ("*", "10.1.2.3", true),
            ("example.com", "example.com", true),
            ("example.com", "api.example.com", true),
            ("example.com", "badexample.com", false),
            (".example.com", "example.com", true),
            (".example.com", "a.b.example.com", true),
            ("Example.COM.", "api.example.com.", true),
            ("example.com", "example.org", false),
            ("amazonaws.com", "ecs.us-west-2.amazonaws.com", true),
            ("ecs.us-west-2.amazonaws.com", "amazonaws.com", false),
            ("foo, example.com bar", "example.com", true),
            ("10.0.0.0/8", "10.200.3.4", true),
            ("10.0.0.0/8", "11.0.0.1", false),
            ("192.168.1.5", "192.168.1.5", true),
            ("192.168.1.5", "192.168.1.6", false),
            ("192.168.1.0/24", "192.168.1.77", true),
            ("0.0.0.0/0", "8.8.8.8", true),
            ("10.0.0.0/33", "10.0.0.1", false),
            ("10.0.0.0/x", "10.0.0.1", false),
            ("fd00::/8", "fd12::1", true),
            ("fd00::/8", "[fd12::1]", true),
            ("[::1]", "::1", true),
            ("fd00::/8", "10.0.0.1", false),
            ("10.0.0.0/8", "fd00::1", false),
            // A name entry never matches an address, nor an address entry a name.
            ("10.0.0.1", "ten.example.com", false),
            ("example.com", "10.0.0.1", false),
            ("/8", "10.0.0.1", false),
        ];
        for (list, host, expected) in table {
            assert_eq!(
                NoProxy::parse(list).matches(host),
                *expected,
                "NO_PROXY={list:?} host {host:?}"
            );
        }
    }

    #[test]
    fn proxy_urls_parse_with_defaults_and_refuse_what_cannot_work() {
        let proxy = ProxyUrl::parse("http://proxy.corp:3128").expect("plain");
        assert_eq!((proxy.host.as_str(), proxy.port), ("proxy.corp", 3128));
        assert_eq!(proxy.credentials, None);
        let bare = ProxyUrl::parse("proxy.corp").expect("bare");
        assert_eq!((bare.port, bare.url.as_str()), (1080, "http://proxy.corp"));
        let with_user = ProxyUrl::parse("http://us%40er:p%3Ass@[::1]:8080/").expect("user");
        assert_eq!(with_user.credentials.as_deref(), Some("us@er:p:ss"));
        assert_eq!((with_user.host.as_str(), with_user.port), ("::1", 8080));
        assert_eq!(with_user.display(), "http://[::1]:8080");
        assert!(!format!("{with_user:?}").contains("p%3Ass"));
        for bad in [
            "https://proxy:443",
            "socks5://proxy:1080",
            "http://:3128",
            "http://proxy:0",
            "http://proxy:99999",
            "http://[::1:3128",
            "http://us%zzer:x@proxy",
        ] {
            let error = ProxyUrl::parse(bad).expect_err(bad);
            assert!(error.contains("proxy URL"), "{error}");
        }
        let error = ProxyUrl::parse("https://user:secret@proxy").expect_err("https");
        assert!(!error.contains("secret"), "{error}");
    }

    fn lookup(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| value.to_string())
        }
    }

    #[test]
    fn settings_pick_the_proxy_by_scheme_and_keep_exceptions_direct() {
        let settings = ProxySettings::from_lookup(&lookup(&[
            ("HTTPS_PROXY", "http://upper:1"),
            ("https_proxy", "http://lower:2"),
            ("HTTP_PROXY", "http://plain:3"),
            ("NO_PROXY", "internal.example, 10.0.0.0/8"),
        ]))
        .expect("settings");
        let host_of = |tls: bool, host: &str| {
            settings
                .proxy_for(tls, host)
                .map(|proxy| proxy.host.clone())
        };
        assert_eq!(
            host_of(true, "ecs.us-west-2.amazonaws.com").as_deref(),
            Some("lower")
        );
        assert_eq!(host_of(false, "ecs.example").as_deref(), Some("plain"));
        assert_eq!(host_of(true, "api.internal.example"), None);
        assert_eq!(host_of(true, "10.9.9.9"), None);
        assert_eq!(host_of(true, "169.254.170.2"), None);
        assert_eq!(host_of(false, "169.254.170.2"), None);
        // Loopback is proxied unless NO_PROXY says otherwise, as curl does.
        assert_eq!(host_of(true, "127.0.0.1").as_deref(), Some("lower"));
        let none = ProxySettings::from_lookup(&lookup(&[("HTTPS_PROXY", " ")])).expect("empty");
        assert_eq!(none, ProxySettings::direct());
        let error = ProxySettings::from_lookup(&lookup(&[("HTTPS_PROXY", "socks5://p")]))
            .expect_err("socks");
        assert!(error.starts_with("HTTPS_PROXY: "), "{error}");
    }

    #[test]
    fn connect_answers_are_read_whole_and_bounded() {
        assert_eq!(parse_connect_answer(b"HTTP/1.1 200 Connec"), Ok(None));
        let answer = parse_connect_answer(b"HTTP/1.1 200 Connection established\r\n\r\nTLS")
            .expect("valid")
            .expect("complete");
        assert_eq!((answer.status, answer.head_len), (200, 39));
        assert_eq!(answer.reason, "Connection established");
        let refused = parse_connect_answer(
            b"HTTP/1.0 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\n",
        )
        .expect("valid")
        .expect("complete");
        assert_eq!(refused.status, 407);
        assert!(parse_connect_answer(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
        let endless = [
            b"HTTP/1.1 200 OK\r\n".as_slice(),
            &[b'a'; MAX_CONNECT_ANSWER_BYTES],
        ]
        .concat();
        assert!(parse_connect_answer(&endless).is_err());
    }

    #[test]
    fn a_tunnel_is_asked_for_with_credentials_and_refusals_name_the_status() {
        struct Pipe {
            input: io::Cursor<Vec<u8>>,
            output: Vec<u8>,
        }
        impl Read for Pipe {
            fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
                self.input.read(buffer)
            }
        }
        impl Write for Pipe {
            fn write(&mut self, buffer: &[u8]) -> io::Result<usize> {
                self.output.extend_from_slice(buffer);
                Ok(buffer.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let proxy = ProxyUrl::parse("http://user:pw@proxy:3128").expect("proxy");
        let mut pipe = Pipe {
            input: io::Cursor::new(b"HTTP/1.1 200 OK\r\n\r\nafter".to_vec()),
            output: Vec::new(),
        };
        connect_tunnel(&mut pipe, &proxy, "ecs.example", 443).expect("tunnel");
        let request = String::from_utf8(pipe.output).expect("text");
        assert!(
            request.starts_with("CONNECT ecs.example:443 HTTP/1.1\r\nHost: ecs.example:443\r\n")
        );
        assert!(
            request.contains("Proxy-Authorization: Basic dXNlcjpwdw==\r\n"),
            "{request}"
        );
        let mut rest = String::new();
        pipe.input.read_to_string(&mut rest).expect("rest");
        assert_eq!(rest, "after", "nothing past the head is read");
        let mut refused = Pipe {
            input: io::Cursor::new(b"HTTP/1.1 403 Forbidden\r\n\r\n".to_vec()),
            output: Vec::new(),
        };
        let error = connect_tunnel(&mut refused, &proxy, "::1", 443).expect_err("403");
        assert!(error.to_string().contains("403 Forbidden"), "{error}");
        assert!(String::from_utf8_lossy(&refused.output).starts_with("CONNECT [::1]:443 "));
        let mut silent = Pipe {
            input: io::Cursor::new(b"HTTP/1.1 200".to_vec()),
            output: Vec::new(),
        };
        assert!(connect_tunnel(&mut silent, &proxy, "h", 1).is_err());
    }
}
