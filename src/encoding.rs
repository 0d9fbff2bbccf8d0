//! Small encoders: percent-encoding for URL paths and query strings (the Docker client's and the
//! local API client's), the base64url form of Docker's `X-Registry-Auth`, and the standard
//! base64 decoding of a `.dockercfg` `auth` value (registry credentials, `crate::registry`), and
//! the standard base64 of a proxy's `Basic` credentials.
//! Written here to avoid two dependencies for sixty lines; a leaf module, so its users share it
//! without importing one another.

/// Percent-encodes everything but RFC 3986 unreserved characters (and `/`, `:` and `@` when
/// `keep_path_separators`, for image references used as a path).
pub fn percent_encode(value: &str, keep_path_separators: bool) -> String {
    let mut encoded = String::with_capacity(value.len());
    for byte in value.bytes() {
        let unreserved = byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~');
        let separator = keep_path_separators && matches!(byte, b'/' | b':' | b'@');
        if unreserved || separator {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// `?key=value&…`, each value percent-encoded; empty when there are no parameters.
pub fn query_string(parameters: &[(&str, String)]) -> String {
    if parameters.is_empty() {
        return String::new();
    }
    let joined: Vec<String> = parameters
        .iter()
        .map(|(key, value)| format!("{key}={}", percent_encode(value, false)))
        .collect();
    format!("?{}", joined.join("&"))
}

/// Base64 with the URL-safe alphabet and `=` padding, as Docker decodes `X-Registry-Auth`.
pub fn base64_url(bytes: &[u8]) -> String {
    base64_with(
        bytes,
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
    )
}

/// Standard base64 (RFC 4648 §4) with `=` padding, as `Proxy-Authorization: Basic` carries it.
pub fn base64(bytes: &[u8]) -> String {
    base64_with(
        bytes,
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
    )
}

fn base64_with(bytes: &[u8], alphabet: &[u8; 64]) -> String {
    let mut encoded = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let first = group[0] as u32;
        let second = group.get(1).copied().unwrap_or(0) as u32;
        let third = group.get(2).copied().unwrap_or(0) as u32;
        let joined = (first << 16) | (second << 8) | third;
        encoded.push(alphabet[(joined >> 18) as usize & 63] as char);
        encoded.push(alphabet[(joined >> 12) as usize & 63] as char);
        if group.len() > 1 {
            encoded.push(alphabet[(joined >> 6) as usize & 63] as char);
        } else {
            encoded.push('=');
        }
        if group.len() > 2 {
            encoded.push(alphabet[joined as usize & 63] as char);
        } else {
            encoded.push('=');
        }
    }
    encoded
}

/// Decodes standard base64 (RFC 4648 §4, `+` and `/`), as `docker login` writes the `auth` of a
/// `.dockercfg`. The `=` padding may be left out; anything else that is not of the alphabet
/// (whitespace included) is refused. The error says what is wrong without quoting the input,
/// which is usually a secret.
pub fn base64_standard_decode(text: &str) -> Result<Vec<u8>, String> {
    fn value_of(byte: u8) -> Option<u32> {
        match byte {
            b'A'..=b'Z' => Some((byte - b'A') as u32),
            b'a'..=b'z' => Some((byte - b'a') as u32 + 26),
            b'0'..=b'9' => Some((byte - b'0') as u32 + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    }
    let unpadded = text.trim_end_matches('=');
    let padding = text.len() - unpadded.len();
    if padding > 2 || (padding > 0 && !text.len().is_multiple_of(4)) {
        return Err("misplaced '=' padding".to_string());
    }
    if unpadded.len() % 4 == 1 {
        return Err("its length is not that of base64 text".to_string());
    }
    let mut decoded = Vec::with_capacity(unpadded.len() / 4 * 3 + 2);
    for group in unpadded.as_bytes().chunks(4) {
        let mut joined = 0u32;
        for (index, byte) in group.iter().enumerate() {
            let value =
                value_of(*byte).ok_or_else(|| format!("character {} is not base64", index + 1))?;
            joined |= value << (18 - 6 * index as u32);
        }
        let bytes = [(joined >> 16) as u8, (joined >> 8) as u8, joined as u8];
        // 2 characters carry 1 byte, 3 carry 2, 4 carry 3.
        decoded.extend_from_slice(&bytes[..group.len() - 1]);
    }
    Ok(decoded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_url_matches_rfc_4648_vectors() {
        let cases: &[(&[u8], &str)] = &[
            (b"", ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg=="),
            (b"fooba", "Zm9vYmE="),
            (b"foobar", "Zm9vYmFy"),
            (&[0xfb, 0xff, 0xfe], "-__-"),
        ];
        for (input, expected) in cases {
            assert_eq!(base64_url(input), *expected, "{input:?}");
        }
    }

    #[test]
    fn percent_encoding_of_queries_and_paths() {
        assert_eq!(
            query_string(&[
                ("filters", r#"{"label":["a=b"]}"#.into()),
                ("all", "1".into())
            ]),
            "?filters=%7B%22label%22%3A%5B%22a%3Db%22%5D%7D&all=1"
        );
        assert_eq!(query_string(&[]), "");
        assert_eq!(
            percent_encode("127.0.0.1:5000/busy box:v1", true),
            "127.0.0.1:5000/busy%20box:v1"
        );
        assert_eq!(percent_encode("a/b", false), "a%2Fb");
    }

    #[test]
    fn base64_standard_decodes_rfc_4648_vectors_and_refuses_the_rest() {
        let good: &[(&str, &[u8])] = &[
            ("", b""),
            ("Zg==", b"f"),
            ("Zg", b"f"),
            ("Zm8=", b"fo"),
            ("Zm9v", b"foo"),
            ("Zm9vYg==", b"foob"),
            ("Zm9vYmE=", b"fooba"),
            ("Zm9vYmFy", b"foobar"),
            ("+/+/", &[0xfb, 0xff, 0xbf]),
            ("dXNlcjpzd29yZGZpc2g=", b"user:swordfish"),
        ];
        for (input, expected) in good {
            assert_eq!(
                base64_standard_decode(input).as_deref(),
                Ok(*expected),
                "{input}"
            );
        }
        for bad in [
            "Z",
            "Zg===",
            "Z===",
            "=Zg=",
            "Zm9v YmFy",
            "-__-",
            "Zm9vé",
            "Zg=a",
        ] {
            assert!(base64_standard_decode(bad).is_err(), "{bad}");
        }
    }
}
