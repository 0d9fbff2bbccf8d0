//! Cutting text that came from outside (Docker, the disk, the API, `tasks.d`, the config file,
//! ids and names users chose) without panicking: Rust panics when a `&str` is sliced inside a
//! multi-byte character, and any byte offset picked without looking at the text (`&s[..200]`)
//! can land there. Every prefix of outside text is taken here, on a character boundary.
//! Also the one reading of a caught panic's payload as text, for the threads that survive one.

/// At most `max_chars` characters from the start of `text`, never splitting one.
pub fn truncate_chars(text: &str, max_chars: usize) -> &str {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

/// The text of a caught panic.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| text.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_between_characters_only() {
        let table: [(&str, usize, &str); 8] = [
            ("", 3, ""),
            ("abc", 0, ""),
            ("abc", 2, "ab"),
            ("abc", 3, "abc"),
            ("abc", 10, "abc"),
            // A U+FFFD (3 bytes, what lossy decoding inserts) where a byte cut would split it.
            ("a\u{FFFD}b", 2, "a\u{FFFD}"),
            ("\u{FFFD}\u{FFFD}", 1, "\u{FFFD}"),
            ("ééé", 2, "éé"),
        ];
        for (text, max_chars, expected) in table {
            assert_eq!(
                truncate_chars(text, max_chars),
                expected,
                "{text:?} {max_chars}"
            );
        }
    }
}
