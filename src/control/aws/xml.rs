//! The little XML STS answers in: [`xml_texts`] reads the text of a few element paths out of
//! an answer, as much of XML as those answers use (elements, attributes, namespace prefixes,
//! the five predefined entities and character references, CDATA, comments, the `<?xml …?>`
//! declaration) and no more: a `DOCTYPE` (and so any entity it could declare) is refused, an
//! end tag must close the element open, nesting is bounded. Written over `str`'s searches
//! (`split_once`, `strip_prefix`, `char_indices`), never an index into the text it did not
//! find there; pure, fuzzed (`fuzzing::aws_answers`).

/// An element nested deeper than this ends the reading: STS's answers are 4 deep.
pub const MAX_XML_DEPTH: usize = 32;

/// The text of each element `paths` names (local names joined by `/` from the root, namespace
/// prefixes ignored), entity and character references resolved, CDATA kept; the first
/// occurrence of each (an empty element `<a/>` is not one). An error when the bytes are not
/// UTF-8 or not well-formed XML as far as read, hold a `DOCTYPE`, or nest deeper than
/// [`MAX_XML_DEPTH`]. Pure.
pub fn xml_texts<const N: usize>(
    body: &[u8],
    paths: &[&str; N],
) -> Result<[Option<String>; N], String> {
    let text = std::str::from_utf8(body).map_err(|_| "it is not UTF-8".to_string())?;
    let bad = |what: &str| format!("it is not well-formed XML: {what}");
    let mut found: [Option<String>; N] = std::array::from_fn(|_| None);
    // The names of the open elements, as written (with their prefixes).
    let mut open: Vec<&str> = Vec::new();
    let mut seen_root = false;
    // The index in `paths` of the element being read, and its text so far.
    let mut current: Option<(usize, String)> = None;
    let mut rest = text;
    while let Some((before, markup)) = rest.split_once('<') {
        if let Some((_, value)) = current.as_mut() {
            push_text(value, before).map_err(|what| bad(&what))?;
        } else if open.is_empty() && !before.trim().is_empty() {
            return Err(bad("text outside the root element"));
        }
        if let Some(after) = markup.strip_prefix("!--") {
            rest = after
                .split_once("-->")
                .ok_or_else(|| bad("an unclosed comment"))?
                .1;
            continue;
        }
        if let Some(after) = markup.strip_prefix("![CDATA[") {
            let (data, after) = after
                .split_once("]]>")
                .ok_or_else(|| bad("an unclosed CDATA section"))?;
            if let Some((_, value)) = current.as_mut() {
                value.push_str(data);
            }
            rest = after;
            continue;
        }
        if let Some(after) = markup.strip_prefix('?') {
            rest = after
                .split_once("?>")
                .ok_or_else(|| bad("an unclosed declaration"))?
                .1;
            continue;
        }
        if markup.starts_with('!') {
            return Err("it has a DOCTYPE or another declaration, which STS never sends".into());
        }
        let (tag, after) = split_tag(markup).ok_or_else(|| bad("an unclosed tag"))?;
        rest = after;
        if let Some(name) = tag.strip_prefix('/') {
            match open.pop() {
                Some(qualified) if qualified == name.trim_end() => {}
                _ => return Err(bad("an end tag that closes no open element")),
            }
            if let Some((index, value)) = current.take() {
                found[index] = Some(value);
            }
            continue;
        }
        let (tag, empty) = match tag.strip_suffix('/') {
            Some(tag) => (tag, true),
            None => (tag, false),
        };
        let qualified = tag
            .split(|character: char| character.is_ascii_whitespace())
            .next()
            .unwrap_or("");
        if !is_name(qualified) {
            return Err(bad("a tag without a name"));
        }
        if open.is_empty() && seen_root {
            return Err(bad("a second root element"));
        }
        seen_root = true;
        // The text of an element that holds elements is not its text.
        current = None;
        if empty {
            continue;
        }
        if open.len() >= MAX_XML_DEPTH {
            return Err(format!("it nests deeper than {MAX_XML_DEPTH}"));
        }
        open.push(qualified);
        current = paths
            .iter()
            .position(|wanted| {
                wanted.split('/').count() == open.len()
                    && wanted.split('/').zip(&open).all(|(part, qualified)| {
                        part == qualified.rsplit(':').next().unwrap_or(qualified)
                    })
            })
            .filter(|index| found[*index].is_none())
            .map(|index| (index, String::new()));
    }
    if !open.is_empty() {
        return Err("it ends inside an element".to_string());
    }
    if !rest.trim().is_empty() {
        return Err(bad("text outside the root element"));
    }
    Ok(found)
}

/// The tag at the start of `markup` (after its `<`, before its `>`, a `>` in a quoted
/// attribute value skipped) and what follows it.
fn split_tag(markup: &str) -> Option<(&str, &str)> {
    let mut quote: Option<char> = None;
    for (at, character) in markup.char_indices() {
        match (quote, character) {
            (None, '"' | '\'') => quote = Some(character),
            (Some(open), _) if open == character => quote = None,
            (None, '>') => {
                let (tag, after) = markup.split_at(at);
                return Some((tag, after.strip_prefix('>')?));
            }
            _ => {}
        }
    }
    None
}

/// Whether `name` can be an element's name: a letter, `_` or `:` first, then letters, digits,
/// `-`, `.`, `_`, `:` (any non-ASCII character allowed, as XML allows most).
fn is_name(name: &str) -> bool {
    let mut characters = name.chars();
    characters
        .next()
        .is_some_and(|first| first.is_alphabetic() || first == '_' || first == ':')
        && characters.all(|character| {
            character.is_alphanumeric() || "-._:".contains(character) || !character.is_ascii()
        })
}

/// Appends `text` to `value` with its references resolved: the five predefined entities and
/// character references; any other is an error.
fn push_text(value: &mut String, text: &str) -> Result<(), String> {
    let mut rest = text;
    while let Some((before, after)) = rest.split_once('&') {
        value.push_str(before);
        let (name, after) = after
            .split_once(';')
            .ok_or_else(|| "an unterminated reference".to_string())?;
        let resolved = match name {
            "lt" => '<',
            "gt" => '>',
            "amp" => '&',
            "quot" => '"',
            "apos" => '\'',
            _ => {
                let number = name
                    .strip_prefix('#')
                    .ok_or_else(|| "an unknown entity".to_string())?;
                let code = match number.strip_prefix('x') {
                    Some(hex) => u32::from_str_radix(hex, 16),
                    None => number.parse::<u32>(),
                }
                .map_err(|_| "a bad character reference".to_string())?;
                char::from_u32(code)
                    .filter(|character| *character != '\0')
                    .ok_or_else(|| "a character reference to no character".to_string())?
            }
        };
        value.push(resolved);
        rest = after;
    }
    value.push_str(rest);
    Ok(())
}
