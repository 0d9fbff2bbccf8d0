//! The small languages inside Compose values: `${VAR}` interpolation, `.env` files, Go-style
//! durations (`1m30s`), byte sizes (`512m`), shell words (`command: npm run start`) and the short
//! port syntax (`127.0.0.1:8080-8081:80-81/udp`). Pure functions over text, tested by tables.

use std::collections::BTreeMap;

/// The outcome of interpolating one string: its text, or the message of a `${VAR?error}`.
/// `unset` lists variables that were used with no value and no default (Compose warns of them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Interpolated {
    pub text: String,
    pub unset: Vec<String>,
}

/// Compose's interpolation: `$$` is a `$`; `$VAR` and `${VAR}`; `${VAR:-default}` (unset or
/// empty) and `${VAR-default}` (unset); `${VAR:?message}` and `${VAR?message}` (an error);
/// `${VAR:+other}` and `${VAR+other}`. Defaults may themselves hold `${...}`.
pub(super) fn interpolate(
    text: &str,
    variables: &BTreeMap<String, String>,
) -> Result<Interpolated, String> {
    let mut unset = Vec::new();
    let text = interpolate_inner(text, variables, &mut unset, 0)?;
    Ok(Interpolated { text, unset })
}

/// Nesting deeper than this in defaults is refused (it is hostile input, not a Compose file).
const MAX_NESTING: usize = 16;

fn interpolate_inner(
    text: &str,
    variables: &BTreeMap<String, String>,
    unset: &mut Vec<String>,
    depth: usize,
) -> Result<String, String> {
    if depth > MAX_NESTING {
        return Err("interpolation nested too deeply".to_string());
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut index = 0;
    while index < chars.len() {
        let current = chars[index];
        if current != '$' {
            out.push(current);
            index += 1;
            continue;
        }
        match chars.get(index + 1) {
            Some('$') => {
                out.push('$');
                index += 2;
            }
            Some('{') => {
                // Find the matching brace, counting nested `${`.
                let mut level = 1;
                let mut end = index + 2;
                while end < chars.len() {
                    match chars[end] {
                        '{' if chars.get(end.wrapping_sub(1)) == Some(&'$') => level += 1,
                        '}' => {
                            level -= 1;
                            if level == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    end += 1;
                }
                if end >= chars.len() {
                    return Err(format!("unterminated ${{ in {text:?}"));
                }
                let inside: String = chars[index + 2..end].iter().collect();
                out.push_str(&expand_braced(&inside, variables, unset, depth)?);
                index = end + 1;
            }
            Some(next) if next.is_ascii_alphabetic() || *next == '_' => {
                let mut end = index + 1;
                while end < chars.len() && (chars[end].is_ascii_alphanumeric() || chars[end] == '_')
                {
                    end += 1;
                }
                let name: String = chars[index + 1..end].iter().collect();
                match variables.get(&name) {
                    Some(value) => out.push_str(value),
                    None => unset.push(name),
                }
                index = end;
            }
            _ => {
                // A lone `$` stays as it is, as Compose leaves it.
                out.push('$');
                index += 1;
            }
        }
    }
    Ok(out)
}

fn expand_braced(
    inside: &str,
    variables: &BTreeMap<String, String>,
    unset: &mut Vec<String>,
    depth: usize,
) -> Result<String, String> {
    let name_end = inside
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
        .map_or(inside.len(), |(at, _)| at);
    let name = &inside[..name_end];
    let rest = &inside[name_end..];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!("invalid variable name in ${{{inside}}}"));
    }
    let value = variables.get(name);
    let set_and_nonempty = value.is_some_and(|value| !value.is_empty());
    let (operator, argument) = if let Some(argument) = rest.strip_prefix(":-") {
        (":-", argument)
    } else if let Some(argument) = rest.strip_prefix(":?") {
        (":?", argument)
    } else if let Some(argument) = rest.strip_prefix(":+") {
        (":+", argument)
    } else if let Some(argument) = rest.strip_prefix('-') {
        ("-", argument)
    } else if let Some(argument) = rest.strip_prefix('?') {
        ("?", argument)
    } else if let Some(argument) = rest.strip_prefix('+') {
        ("+", argument)
    } else if rest.is_empty() {
        ("", "")
    } else {
        return Err(format!("invalid interpolation ${{{inside}}}"));
    };
    let mut argument_text = || interpolate_inner(argument, variables, unset, depth + 1);
    Ok(match operator {
        ":-" if !set_and_nonempty => argument_text()?,
        "-" if value.is_none() => argument_text()?,
        ":?" | "?" if (operator == ":?" && !set_and_nonempty) || value.is_none() => {
            let message = argument_text()?;
            return Err(if message.is_empty() {
                format!("required variable {name} is not set")
            } else {
                format!("required variable {name} is not set: {message}")
            });
        }
        ":+" => {
            if set_and_nonempty {
                argument_text()?
            } else {
                String::new()
            }
        }
        "+" => {
            if value.is_some() {
                argument_text()?
            } else {
                String::new()
            }
        }
        _ => match value {
            Some(value) => value.clone(),
            None => {
                unset.push(name.to_string());
                String::new()
            }
        },
    })
}

/// An env file read: its entries in order (`None`: a `KEY` line with no value, which Compose takes
/// from the environment; the caller does that), and the variables its values used that had no
/// value (Compose warns of them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct EnvFile {
    pub entries: Vec<(String, Option<String>)>,
    pub unset: Vec<String>,
}

/// Reads a `.env` or `env_file` file as Compose does: `KEY=VALUE` or `KEY: VALUE` lines, `#`
/// comments, an optional `export `, single quotes (literal, `\'` for a quote), double quotes
/// (with `\n`, `\r`, `\t`, `\"` and `\\`), and a ` #` comment after an unquoted value.
/// Unquoted and double-quoted values are interpolated (`${VAR}` and the other forms of
/// [`interpolate`]) from `environment`, then from the lines above (the environment wins, as in
/// Compose). Errors name the 1-based line.
pub(super) fn parse_env_file(
    text: &str,
    environment: &BTreeMap<String, String>,
) -> Result<EnvFile, String> {
    let mut entries = Vec::new();
    let mut unset = Vec::new();
    // What a value may refer to: the environment, and the lines above that it does not set.
    let mut scope = environment.clone();
    for (number, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
        let (key, value) = match line.split_once(['=', ':']) {
            Some((key, value)) => (key.trim(), Some(value.trim())),
            None => (line, None),
        };
        if key.is_empty() || key.chars().any(char::is_whitespace) {
            return Err(format!("line {}: not KEY=VALUE", number + 1));
        }
        let value = match value {
            None => None,
            Some(value) => {
                let at_line = |error: String| format!("line {}: {error}", number + 1);
                let (value, literal) = env_value(value).map_err(at_line)?;
                if literal {
                    Some(value)
                } else {
                    let done = interpolate(&value, &scope).map_err(at_line)?;
                    unset.extend(done.unset);
                    Some(done.text)
                }
            }
        };
        if let Some(value) = &value {
            if !environment.contains_key(key) {
                scope.insert(key.to_string(), value.clone());
            }
        }
        entries.push((key.to_string(), value));
    }
    Ok(EnvFile { entries, unset })
}

/// One value of an env file, and whether it is literal (single-quoted: not interpolated).
fn env_value(value: &str) -> Result<(String, bool), String> {
    if let Some(rest) = value.strip_prefix('\'') {
        let mut out = String::new();
        let mut chars = rest.chars().peekable();
        while let Some(current) = chars.next() {
            match current {
                '\'' => return Ok((out, true)),
                '\\' if chars.peek() == Some(&'\'') => {
                    out.push('\'');
                    chars.next();
                }
                other => out.push(other),
            }
        }
        return Err("unterminated single quote".to_string());
    }
    if let Some(rest) = value.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = rest.chars();
        while let Some(current) = chars.next() {
            match current {
                '"' => return Ok((out, false)),
                '\\' => match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('r') => out.push('\r'),
                    Some('t') => out.push('\t'),
                    Some(other) => out.push(other),
                    None => break,
                },
                other => out.push(other),
            }
        }
        return Err("unterminated double quote".to_string());
    }
    let value = match value.split_once(" #") {
        Some((before, _)) => before,
        None => value,
    };
    Ok((value.trim_end().to_string(), false))
}

/// A Go duration (`1m30s`, `500ms`, `1.5h`, `2h45m`) in milliseconds. Compose writes durations
/// this way; a bare number is refused because its unit would be a guess.
pub(super) fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let bad = || format!("{text:?} is not a duration (like 30s, 1m30s or 500ms)");
    let text = text.trim();
    if text.is_empty() {
        return Err(bad());
    }
    if text == "0" {
        return Ok(0);
    }
    let mut total: f64 = 0.0;
    let mut rest = text;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if number_end == 0 {
            return Err(bad());
        }
        let number: f64 = rest[..number_end].parse().map_err(|_| bad())?;
        let after = &rest[number_end..];
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let factor = match &after[..unit_end] {
            "ns" => 1e-6,
            "us" | "µs" => 1e-3,
            "ms" => 1.0,
            "s" => 1e3,
            "m" => 60e3,
            "h" => 3600e3,
            _ => return Err(bad()),
        };
        total += number * factor;
        rest = &after[unit_end..];
    }
    if !total.is_finite() || total > 1e15 {
        return Err(bad());
    }
    Ok(total.ceil() as u64)
}

/// A byte size (`512m`, `1g`, `1.5gb`, `1024`, `300k`) in bytes; units are powers of 1024 as
/// Docker reads them.
pub(super) fn parse_bytes(text: &str) -> Result<u64, String> {
    let bad = || format!("{text:?} is not a size (like 512m, 1g or 1024)");
    let lower = text.trim().to_ascii_lowercase();
    let number_end = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(lower.len());
    let number: f64 = lower[..number_end].parse().map_err(|_| bad())?;
    let factor: f64 = match lower[number_end..].trim() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" | "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return Err(bad()),
    };
    let bytes = number * factor;
    if !bytes.is_finite() || bytes > 9.0e18 {
        return Err(bad());
    }
    Ok(bytes.ceil() as u64)
}

/// Splits a command string into words as a POSIX shell would without expanding anything:
/// whitespace separates, single quotes are literal, double quotes keep `\"`, `\\`, `\$` and
/// `` \` `` escapes, and a backslash outside quotes escapes the next character.
pub(super) fn shell_words(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(current) = chars.next() {
        match current {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("unterminated single quote".to_string()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some('\n') => {}
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("unterminated double quote".to_string()),
                        },
                        Some(c) => word.push(c),
                        None => return Err("unterminated double quote".to_string()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some('\n') => {}
                    Some(c) => word.push(c),
                    None => word.push('\\'),
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// One short-syntax port: `[[HOST_IP:]HOST:]CONTAINER[/PROTOCOL]`, where HOST and CONTAINER may
/// be ranges (`8000-8001`) and HOST_IP may be `[::1]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ShortPort {
    pub host_ip: Option<String>,
    pub host: Option<(u16, u16)>,
    pub container: (u16, u16),
    pub protocol: String,
}

pub(super) fn parse_port(text: &str) -> Result<ShortPort, String> {
    let bad = |why: &str| format!("{text:?} is not a port ({why})");
    let (rest, protocol) = match text.rsplit_once('/') {
        Some((rest, protocol)) => (rest, protocol.to_ascii_lowercase()),
        None => (text, "tcp".to_string()),
    };
    if protocol != "tcp" && protocol != "udp" {
        return Err(bad("the protocol must be tcp or udp"));
    }
    // An IPv6 host address is in brackets: `[::1]:8080:80`.
    let (host_ip, rest) = if let Some(after) = rest.strip_prefix('[') {
        let (address, after) = after.split_once(']').ok_or_else(|| bad("unclosed ["))?;
        let after = after
            .strip_prefix(':')
            .ok_or_else(|| bad("expected : after ]"))?;
        (Some(address.to_string()), after)
    } else {
        (None, rest)
    };
    let parts: Vec<&str> = rest.split(':').collect();
    let (host_ip, host, container) = match (host_ip, parts.as_slice()) {
        (None, [container]) => (None, None, *container),
        (None, [host, container]) => (None, Some(*host), *container),
        (None, [ip, host, container]) => (Some(ip.to_string()), Some(*host), *container),
        (Some(ip), [host, container]) => (Some(ip), Some(*host), *container),
        _ => return Err(bad("expected [[HOST_IP:]HOST:]CONTAINER[/PROTOCOL]")),
    };
    let container = parse_port_range(container).ok_or_else(|| bad("bad container port"))?;
    let host = match host {
        None | Some("") => None,
        Some(host) => Some(parse_port_range(host).ok_or_else(|| bad("bad host port"))?),
    };
    let host_ip = host_ip.filter(|ip| !ip.is_empty());
    Ok(ShortPort {
        host_ip,
        host,
        container,
        protocol,
    })
}

/// `80` or `8000-8010`, 1–65535 (host ports may be 0: "any").
pub(super) fn parse_port_range(text: &str) -> Option<(u16, u16)> {
    let number = |part: &str| -> Option<u16> {
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    match text.split_once('-') {
        Some((first, last)) => {
            let (first, last) = (number(first)?, number(last)?);
            (first <= last).then_some((first, last))
        }
        None => number(text).map(|port| (port, port)),
    }
}

/// Compose's project name rule: lower case, only `a-z`, `0-9`, `_` and `-`, starting with a
/// letter or digit.
pub(super) fn normalise_project_name(name: &str) -> String {
    let lowered: String = name
        .to_lowercase()
        .chars()
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_' || *c == '-')
        .collect();
    lowered.trim_start_matches(['_', '-']).to_string()
}
