//! Name and reference rules that do not depend on the rest of the document: container names,
//! family and volume names, and Docker image references.

use super::json::Parser;

impl Parser {
    /// Family and volume names: 1–255 letters, digits, hyphens and underscores (ECS's rule).
    pub(super) fn check_identifier(&mut self, path: &str, value: &str, what: &str) {
        if value.is_empty() {
            self.error(path, format!("{what} must not be empty"));
        } else if value.len() > 255 {
            self.error(path, format!("{what} is longer than 255 characters"));
        } else if !value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            self.error(
                path,
                format!(
                    "{what} {value:?} may contain only letters, digits, hyphens and underscores"
                ),
            );
        }
    }
}

/// Container names: 1–255 characters, a letter or digit first, then letters, digits, `_`, `.`
/// and `-` (what Docker and link aliases accept).
pub fn check_container_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("container name must not be empty".to_string());
    }
    if name.len() > 255 {
        return Err("container name is longer than 255 characters".to_string());
    }
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if first_ok && rest_ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a valid container name (a letter or digit, then letters, digits, '_', '.' or '-')"
        ))
    }
}

/// The first unfilled template placeholder in `text`, as written: `<IMAGE1_NAME>` (CodePipeline's
/// image definitions), `{{image}}` (Jinja, Helm, Go templates), `${TAG}` or `$TAG` (shell,
/// envsubst, Compose) and `%IMAGE%` (Windows batch, some CI tools). A file that still holds one
/// was published before its pipeline filled it in, which no other message would say.
pub fn template_placeholder(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let collect = |from: usize, to: usize| chars[from..to].iter().collect::<String>();
    let find = |from: usize, wanted: &[char]| {
        (from..chars.len()).find(|&index| chars[index..].starts_with(wanted))
    };
    for (index, &character) in chars.iter().enumerate() {
        let next = chars.get(index + 1).copied();
        match (character, next) {
            ('{', Some('{')) => {
                if let Some(end) = find(index + 2, &['}', '}']) {
                    return Some(collect(index, end + 2));
                }
            }
            ('$', Some('{')) => {
                if let Some(end) = find(index + 2, &['}']) {
                    return Some(collect(index, end + 1));
                }
            }
            ('$', Some(first)) if first.is_ascii_alphabetic() || first == '_' => {
                let end = (index + 1..chars.len())
                    .find(|&at| !is_name(chars[at]))
                    .unwrap_or(chars.len());
                return Some(collect(index, end));
            }
            ('<', Some(_)) => {
                if let Some(end) = find(index + 1, &['>']) {
                    if end > index + 1 {
                        return Some(collect(index, end + 1));
                    }
                }
            }
            ('%', Some(first)) if is_name(first) => {
                let end = (index + 1..chars.len()).find(|&at| !is_name(chars[at]));
                if let Some(end) = end.filter(|&end| chars[end] == '%') {
                    return Some(collect(index, end + 1));
                }
            }
            _ => {}
        }
    }
    None
}

/// The message for a value that still holds a template placeholder; `what` is what belongs there
/// ("the image to run").
pub fn placeholder_message(placeholder: &str, what: &str) -> String {
    format!(
        "looks like an unfilled template placeholder {placeholder:?}; replace it with {what} \
         (the pipeline or script that renders this file fills it in) before running the task"
    )
}

/// A Docker image reference: `[host[:port]/]path[:tag][@algorithm:hex]`.
pub fn check_image_reference(reference: &str) -> Result<(), String> {
    let invalid = |why: &str| {
        Err(format!(
            "{reference:?} is not a valid image reference: {why}"
        ))
    };
    if reference.is_empty() {
        return Err("image must not be empty".to_string());
    }
    if reference.len() > 4096 {
        return invalid("too long");
    }
    let (name_and_tag, digest) = match reference.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (reference, None),
    };
    if let Some(digest) = digest {
        let Some((algorithm, hex)) = digest.split_once(':') else {
            return invalid("a digest is algorithm:hex");
        };
        let algorithm_ok = !algorithm.is_empty()
            && algorithm.split(['+', '.', '_', '-']).all(|part| {
                !part.is_empty()
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            });
        if !algorithm_ok || hex.len() < 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return invalid("a digest is algorithm:hex with at least 32 hex digits");
        }
    }
    let last_slash = name_and_tag.rfind('/');
    let (name, tag) = match name_and_tag.rfind(':') {
        Some(colon) if last_slash.is_none_or(|slash| colon > slash) => {
            (&name_and_tag[..colon], Some(&name_and_tag[colon + 1..]))
        }
        _ => (name_and_tag, None),
    };
    if let Some(tag) = tag {
        let mut chars = tag.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !first_ok || !rest_ok || tag.len() > 128 {
            return invalid(
                "a tag is 1–128 letters, digits, '_', '.' or '-', not starting with '.' or '-'",
            );
        }
    }
    if name.is_empty() {
        return invalid("the repository name is empty");
    }
    if name.len() > 255 {
        return invalid("the repository name is longer than 255 characters");
    }
    let mut components: Vec<&str> = name.split('/').collect();
    let first = components[0];
    let has_domain = components.len() > 1
        && (first.contains('.')
            || first.contains(':')
            || first == "localhost"
            || first.chars().any(|c| c.is_ascii_uppercase()));
    if has_domain {
        let (host, port) = match first.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (first, None),
        };
        let host_ok = !host.is_empty()
            && host.split('.').all(|label| {
                !label.is_empty()
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            });
        let port_ok = port.is_none_or(|port| {
            !port.is_empty() && port.len() <= 5 && port.chars().all(|c| c.is_ascii_digit())
        });
        if !host_ok || !port_ok {
            return invalid("the registry is not a valid host[:port]");
        }
        components.remove(0);
    }
    for component in components {
        if !path_component_ok(component) {
            if component.chars().any(|c| c.is_ascii_uppercase()) {
                return invalid("repository names must be lowercase");
            }
            return invalid("each path component is lowercase letters and digits, separated by '.', '_', '__' or dashes");
        }
    }
    Ok(())
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`
fn path_component_ok(component: &str) -> bool {
    let bytes = component.as_bytes();
    if bytes.is_empty() {
        return false;
    }
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut index = 0;
    while index < bytes.len() {
        if alnum(bytes[index]) {
            index += 1;
            continue;
        }
        let start = index;
        while index < bytes.len() && !alnum(bytes[index]) {
            index += 1;
        }
        let separator = &component[start..index];
        let ok = separator == "."
            || separator == "_"
            || separator == "__"
            || separator.bytes().all(|b| b == b'-');
        if !ok {
            return false;
        }
    }
    true
}
