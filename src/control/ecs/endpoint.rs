//! Where the ECS backend is and how to reach it: an `http://` or `https://` URL
//! (`ECS_BACKEND_HOST`, default `https://ecs.<region>.amazonaws.com`; the ACS poll endpoint
//! too, and its `ws://`/`wss://` forms), parsed by [`Endpoint::parse`] (pure, IPv6 literals in
//! brackets, errors naming the URL). The API client (`client`) and the websockets
//! (`websocket`) connect to it.

use std::fmt;

use super::EcsError;

/// A parsed backend URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub tls: bool,
    /// The host, without the brackets of an IPv6 literal.
    pub host: String,
    pub port: u16,
    /// The path, decoded; `/` when the URL has none.
    pub path: String,
}

impl Endpoint {
    /// `ECS_BACKEND_HOST` when set (and not empty), else ECS's endpoint for `region`.
    pub fn from_config(backend_host: Option<&str>, region: &str) -> Result<Endpoint, EcsError> {
        match backend_host.map(str::trim).filter(|host| !host.is_empty()) {
            Some(url) => Endpoint::parse(url).map_err(EcsError::Config),
            None => Endpoint::parse(&format!("https://ecs.{region}.amazonaws.com"))
                .map_err(EcsError::Config),
        }
    }

    /// Parses `scheme://host[:port][/path]` with scheme `http`, `https`, `ws` or `wss`.
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let bad = |why: &str| format!("endpoint URL {url:?} {why}");
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("needs a scheme: http:// or https://"))?;
        let tls = match scheme.to_ascii_lowercase().as_str() {
            "https" | "wss" => true,
            "http" | "ws" => false,
            _ => return Err(bad("has a scheme other than http or https")),
        };
        if rest.contains(['?', '#']) {
            return Err(bad("has a query or a fragment"));
        }
        let (authority, path) = match rest.find('/') {
            Some(at) => (rest.get(..at).unwrap_or(""), rest.get(at..).unwrap_or("/")),
            None => (rest, "/"),
        };
        if authority.contains('@') {
            return Err(bad(
                "has user information; credentials come from the AWS chain",
            ));
        }
        let (host, port_text) = if let Some(literal) = authority.strip_prefix('[') {
            let (address, after) = literal
                .split_once(']')
                .ok_or_else(|| bad("has an IPv6 literal without its closing ']'"))?;
            if address.parse::<std::net::Ipv6Addr>().is_err() {
                return Err(bad("has an IPv6 literal that is not an IPv6 address"));
            }
            let port = match after {
                "" => None,
                _ => Some(
                    after
                        .strip_prefix(':')
                        .ok_or_else(|| bad("has text after ']'"))?,
                ),
            };
            (address, port)
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(bad("has no host"));
        }
        if !authority.starts_with('[')
            && !host
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_'))
        {
            return Err(bad("has a host that is not a name or an address"));
        }
        let port = match port_text {
            None => {
                if tls {
                    443
                } else {
                    80
                }
            }
            Some(text) => text
                .parse::<u16>()
                .ok()
                .filter(|port| *port != 0)
                .ok_or_else(|| bad("has a port that is not a number from 1 to 65535"))?,
        };
        let path = percent_decode(path).ok_or_else(|| bad("has a path with bad %-escapes"))?;
        Ok(Endpoint {
            tls,
            host: host.to_ascii_lowercase(),
            port,
            path,
        })
    }

    /// The `Host` header: the host (IPv6 in brackets) and the port unless it is the scheme's.
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let default_port = if self.tls { 443 } else { 80 };
        if self.port == default_port {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// The URL, for messages.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{}", self.host_header(), self.path)
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.url())
    }
}

/// `%41` → `A`; `None` for a bad escape or bytes that are not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let high = (*bytes.get(index + 1)? as char).to_digit(16)?;
            let low = (*bytes.get(index + 2)? as char).to_digit(16)?;
            decoded.push((high * 16 + low) as u8);
            index += 3;
        } else {
            decoded.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(decoded).ok()
}
