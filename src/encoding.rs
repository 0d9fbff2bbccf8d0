//! Small encoders: percent-encoding for URL paths and query strings (the Docker client's and the
//! local API client's), and the base64url form of Docker's `X-Registry-Auth`. Written here to
//! avoid two dependencies for forty lines; a leaf module, so both clients use it without one
//! importing the other.

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
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut encoded = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let first = group[0] as u32;
        let second = group.get(1).copied().unwrap_or(0) as u32;
        let third = group.get(2).copied().unwrap_or(0) as u32;
        let joined = (first << 16) | (second << 8) | third;
        encoded.push(ALPHABET[(joined >> 18) as usize & 63] as char);
        encoded.push(ALPHABET[(joined >> 12) as usize & 63] as char);
        if group.len() > 1 {
            encoded.push(ALPHABET[(joined >> 6) as usize & 63] as char);
        } else {
            encoded.push('=');
        }
        if group.len() > 2 {
            encoded.push(ALPHABET[joined as usize & 63] as char);
        } else {
            encoded.push('=');
        }
    }
    encoded
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
}
