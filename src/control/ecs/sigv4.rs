//! AWS Signature Version 4, as ECS checks it on every API call and on the ACS websocket's
//! upgrade request: the canonical request (path segments and query URI-encoded, the query
//! sorted, header names lowercased and sorted with their values trimmed, the signed headers,
//! the payload's SHA-256), the string to sign, the signing key derived from the secret, the
//! date, the region and the service, and the `Authorization` header. Temporary credentials add
//! `X-Amz-Security-Token`, which is signed too.
//!
//! Pure functions over `hmac` and `sha2`, checked against AWS's published SigV4 test suite.
//! The path and query are given decoded; [`request_target`] encodes them exactly as the
//! canonical request does, so what is sent is what was signed. Dot segments are not
//! normalised: deckhand's paths have none.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use super::credentials::Credentials;

const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// What is signed of one request.
#[derive(Debug, Clone, Copy)]
pub struct SignInput<'a> {
    pub method: &'a str,
    /// The path, decoded (`/example space/`).
    pub path: &'a str,
    /// The query's parameters, decoded, in any order.
    pub query: &'a [(&'a str, &'a str)],
    /// The request's headers to sign, `Host` among them; `X-Amz-Date` and
    /// `X-Amz-Security-Token` are added by [`sign`].
    pub headers: &'a [(&'a str, &'a str)],
    pub payload: &'a [u8],
}

/// A signature and the steps that led to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    pub canonical_request: String,
    pub string_to_sign: String,
    pub authorization: String,
    /// The headers to add to the request: `X-Amz-Date`, `X-Amz-Security-Token` when there is
    /// a session token, and `Authorization`.
    pub headers: Vec<(&'static str, String)>,
}

/// Signs `input` at `amz_date` (`YYYYMMDDTHHMMSSZ`, see [`amz_date`]).
pub fn sign(
    input: &SignInput<'_>,
    credentials: &Credentials,
    region: &str,
    service: &str,
    amz_date: &str,
) -> Signed {
    let mut headers: Vec<(String, String)> = input
        .headers
        .iter()
        .map(|(name, value)| (name.to_ascii_lowercase(), canonical_header_value(value)))
        .collect();
    headers.push(("x-amz-date".into(), amz_date.to_string()));
    if let Some(token) = &credentials.session_token {
        headers.push(("x-amz-security-token".into(), canonical_header_value(token)));
    }
    // By name only: a name given twice keeps its values' order, joined by commas.
    sort_pairs(&mut headers, false);
    let mut canonical_headers = String::new();
    let mut signed_headers: Vec<&str> = Vec::new();
    for (name, value) in &headers {
        if signed_headers.last() == Some(&name.as_str()) {
            // Same name again: continue the previous line.
            canonical_headers.pop();
            canonical_headers.push(',');
        } else {
            signed_headers.push(name);
            canonical_headers.push_str(name);
            canonical_headers.push(':');
        }
        canonical_headers.push_str(value);
        canonical_headers.push('\n');
    }
    let signed_headers = signed_headers.join(";");
    let canonical_request = format!(
        "{}\n{}\n{}\n{canonical_headers}\n{signed_headers}\n{}",
        input.method,
        canonical_path(input.path),
        canonical_query(input.query),
        sha256_hex(input.payload)
    );
    let date = amz_date.get(..8).unwrap_or(amz_date);
    let scope = format!("{date}/{region}/{service}/aws4_request");
    let string_to_sign = format!(
        "{ALGORITHM}\n{amz_date}\n{scope}\n{}",
        sha256_hex(canonical_request.as_bytes())
    );
    let secret = format!("AWS4{}", credentials.secret_access_key);
    let key = [date, region, service, "aws4_request"]
        .iter()
        .fold(secret.into_bytes(), |key, part| hmac(&key, part.as_bytes()));
    let signature = hex(&hmac(&key, string_to_sign.as_bytes()));
    let authorization = format!(
        "{ALGORITHM} Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
        credentials.access_key_id
    );
    let mut added = vec![("X-Amz-Date", amz_date.to_string())];
    if let Some(token) = &credentials.session_token {
        added.push(("X-Amz-Security-Token", token.clone()));
    }
    added.push(("Authorization", authorization.clone()));
    Signed {
        canonical_request,
        string_to_sign,
        authorization,
        headers: added,
    }
}

/// The request target (`/path?query`) encoded as the canonical request encodes it.
pub fn request_target(path: &str, query: &[(&str, &str)]) -> String {
    let query = canonical_query(query);
    let path = canonical_path(path);
    if query.is_empty() {
        path
    } else {
        format!("{path}?{query}")
    }
}

/// `1440938160000` → `20150830T123600Z`.
pub fn amz_date(unix_millis: u64) -> String {
    // `2015-08-30T12:36:00.000Z` without its separators and fraction.
    let text = crate::task::time::rfc3339_from_millis(unix_millis);
    let mut date: String = text
        .chars()
        .take(19)
        .filter(|character| *character != '-' && *character != ':')
        .collect();
    date.push('Z');
    date
}

/// The hexadecimal SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(DIGITS[usize::from(byte >> 4)] as char);
        text.push(DIGITS[usize::from(byte & 15)] as char);
    }
    text
}

/// Percent-encodes all but RFC 3986's unreserved characters (and `/` when `keep_slash`).
pub fn uri_encode(text: &str, keep_slash: bool) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric()
            || matches!(byte, b'-' | b'.' | b'_' | b'~')
            || (keep_slash && byte == b'/')
        {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

fn canonical_path(path: &str) -> String {
    if path.is_empty() {
        return "/".into();
    }
    uri_encode(path, true)
}

/// Stable sort by name, then (with `by_value`) by value. One function for the headers and the
/// query, so that the binary holds one sort of these pairs.
fn sort_pairs(pairs: &mut [(String, String)], by_value: bool) {
    crate::sorting::sort_by(pairs, |left, right| {
        let order = left.0.cmp(&right.0);
        if by_value {
            order.then_with(|| left.1.cmp(&right.1))
        } else {
            order
        }
    });
}

fn canonical_query(query: &[(&str, &str)]) -> String {
    let mut pairs: Vec<(String, String)> = query
        .iter()
        .map(|(key, value)| (uri_encode(key, false), uri_encode(value, false)))
        .collect();
    sort_pairs(&mut pairs, true);
    pairs
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// Trimmed, with runs of spaces inside made one.
fn canonical_header_value(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One case of AWS's Signature Version 4 test suite (as kept in aws-c-auth's
    /// `tests/aws-signing-test-suite/v4`): the request, then the expected canonical request,
    /// the string to sign's last line (the canonical request's hash) and the signature.
    struct Vector {
        name: &'static str,
        method: &'static str,
        path: &'static str,
        query: &'static [(&'static str, &'static str)],
        headers: &'static [(&'static str, &'static str)],
        payload: &'static str,
        token: Option<&'static str>,
        canonical_request: &'static str,
        canonical_request_hash: &'static str,
        signature: &'static str,
    }

    const EMPTY: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    const HOST: (&str, &str) = ("Host", "example.amazonaws.com");
    const STS_TOKEN: &str = "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==";

    const VECTORS: &[Vector] = &[
        Vector {
            name: "get-vanilla",
            method: "GET",
            path: "/",
            query: &[],
            headers: &[HOST],
            payload: "",
            token: None,
            canonical_request: "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n",
            canonical_request_hash: "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
            signature: "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
        },
        Vector {
            name: "get-vanilla-query-order-key-case",
            method: "GET",
            path: "/",
            query: &[("Param2", "value2"), ("Param1", "value1")],
            headers: &[HOST],
            payload: "",
            token: None,
            canonical_request: "GET\n/\nParam1=value1&Param2=value2\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n",
            canonical_request_hash: "816cd5b414d056048ba4f7c5386d6e0533120fb1fcfa93762cf0fc39e2cf19e0",
            signature: "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
        },
        Vector {
            name: "get-vanilla-query-unreserved",
            method: "GET",
            path: "/",
            query: &[(
                "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
                "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
            )],
            headers: &[HOST],
            payload: "",
            token: None,
            canonical_request: "GET\n/\n-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz=-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n",
            canonical_request_hash: "c30d4703d9f799439be92736156d47ccfb2d879ddf56f5befa6d1d6aab979177",
            signature: "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197",
        },
        Vector {
            name: "get-vanilla-utf8-query",
            method: "GET",
            path: "/",
            query: &[("\u{1234}", "bar")],
            headers: &[HOST],
            payload: "",
            token: None,
            canonical_request: "GET\n/\n%E1%88%B4=bar\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n",
            canonical_request_hash: "eb30c5bed55734080471a834cc727ae56beb50e5f39d1bff6d0d38cb192a7073",
            signature: "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04",
        },
        Vector {
            name: "get-utf8",
            method: "GET",
            path: "/\u{1234}",
            query: &[],
            headers: &[HOST],
            payload: "",
            token: None,
            canonical_request: "GET\n/%E1%88%B4\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n",
            canonical_request_hash: "2a0a97d02205e45ce2e994789806b19270cfbbb0921b278ccf58f5249ac42102",
            signature: "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85",
        },
        Vector {
            name: "get-space",
            method: "GET",
            path: "/example space/",
            query: &[],
            headers: &[HOST],
            payload: "",
            token: None,
            canonical_request: "GET\n/example%20space/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n",
            canonical_request_hash: "63ee75631ed7234ae61b5f736dfc7754cdccfedbff4b5128a915706ee9390d86",
            signature: "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741",
        },
        Vector {
            name: "get-header-value-trim",
            method: "GET",
            path: "/",
            query: &[],
            headers: &[HOST, ("My-Header1", " value1"), ("My-Header2", " \"a   b   c\"")],
            payload: "",
            token: None,
            canonical_request: "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\nmy-header2:\"a b c\"\nx-amz-date:20150830T123600Z\n\nhost;my-header1;my-header2;x-amz-date\n",
            canonical_request_hash: "a726db9b0df21c14f559d0a978e563112acb1b9e05476f0a6a1c7d68f28605c7",
            signature: "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736",
        },
        Vector {
            name: "get-vanilla-with-session-token",
            method: "GET",
            path: "/",
            query: &[],
            headers: &[HOST],
            payload: "",
            token: Some("6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267"),
            canonical_request: "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\nx-amz-security-token:6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267\n\nhost;x-amz-date;x-amz-security-token\n",
            canonical_request_hash: "067b36aa60031588cea4a4cde1f21215227a047690c72247f1d70b32fbbfad2b",
            signature: "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8",
        },
        Vector {
            name: "post-vanilla",
            method: "POST",
            path: "/",
            query: &[],
            headers: &[HOST],
            payload: "",
            token: None,
            canonical_request: "POST\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n",
            canonical_request_hash: "553f88c9e4d10fc9e109e2aeb65f030801b70c2f6468faca261d401ae622fc87",
            signature: "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
        },
        Vector {
            name: "post-header-key-sort",
            method: "POST",
            path: "/",
            query: &[],
            headers: &[HOST, ("My-Header1", "value1")],
            payload: "",
            token: None,
            canonical_request: "POST\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\nx-amz-date:20150830T123600Z\n\nhost;my-header1;x-amz-date\n",
            canonical_request_hash: "9368318c2967cf6de74404b30c65a91e8f6253e0a8659d6d5319f1a812f87d65",
            signature: "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c",
        },
        Vector {
            name: "post-x-www-form-urlencoded",
            method: "POST",
            path: "/",
            query: &[],
            headers: &[
                ("Content-Type", "application/x-www-form-urlencoded"),
                HOST,
                ("Content-Length", "13"),
                (
                    "X-Amz-Content-Sha256",
                    "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
                ),
            ],
            payload: "Param1=value1",
            token: None,
            canonical_request: "POST\n/\n\ncontent-length:13\ncontent-type:application/x-www-form-urlencoded\nhost:example.amazonaws.com\nx-amz-content-sha256:9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e\nx-amz-date:20150830T123600Z\n\ncontent-length;content-type;host;x-amz-content-sha256;x-amz-date\n9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
            canonical_request_hash: "b1edd1d03544c25390e32085d55b57acc9a3961bb59415ff86c45c3d89d16cfb",
            signature: "d3875051da38690788ef43de4db0d8f280229d82040bfac253562e56c3f20e0b",
        },
        Vector {
            name: "post-sts-header-before",
            method: "POST",
            path: "/",
            query: &[],
            headers: &[HOST],
            payload: "",
            token: Some(STS_TOKEN),
            canonical_request: "",
            canonical_request_hash: "c237e1b440d4c63c32ca95b5b99481081cb7b13c7e40434868e71567c1a882f6",
            signature: "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead",
        },
    ];

    #[test]
    fn the_aws_signature_v4_test_suite_passes() {
        for vector in VECTORS {
            let credentials = Credentials {
                access_key_id: "AKIDEXAMPLE".into(),
                secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
                session_token: vector.token.map(str::to_string),
            };
            let input = SignInput {
                method: vector.method,
                path: vector.path,
                query: vector.query,
                headers: vector.headers,
                payload: vector.payload.as_bytes(),
            };
            let signed = sign(
                &input,
                &credentials,
                "us-east-1",
                "service",
                "20150830T123600Z",
            );
            let expected_request = if vector.canonical_request.is_empty() {
                format!(
                    "POST\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\
                     x-amz-security-token:{STS_TOKEN}\n\nhost;x-amz-date;x-amz-security-token\n{EMPTY}"
                )
            } else if vector.canonical_request.ends_with('\n') {
                format!("{}{EMPTY}", vector.canonical_request)
            } else {
                vector.canonical_request.to_string()
            };
            assert_eq!(
                signed.canonical_request, expected_request,
                "{}",
                vector.name
            );
            assert_eq!(
                signed.string_to_sign,
                format!(
                    "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n{}",
                    vector.canonical_request_hash
                ),
                "{}",
                vector.name
            );
            let signed_headers = expected_request
                .lines()
                .rev()
                .nth(1)
                .expect("the signed headers line");
            assert_eq!(
                signed.authorization,
                format!(
                    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
                     SignedHeaders={signed_headers}, Signature={}",
                    vector.signature
                ),
                "{}",
                vector.name
            );
            let names: Vec<&str> = signed.headers.iter().map(|(name, _)| *name).collect();
            if vector.token.is_some() {
                assert_eq!(
                    names,
                    ["X-Amz-Date", "X-Amz-Security-Token", "Authorization"]
                );
            } else {
                assert_eq!(names, ["X-Amz-Date", "Authorization"]);
            }
        }
    }

    #[test]
    fn the_request_target_is_encoded_as_it_was_signed() {
        assert_eq!(request_target("", &[]), "/");
        assert_eq!(
            request_target(
                "/ws",
                &[("seqNum", "1"), ("dockerVersion", "DockerVersion: 20.10")]
            ),
            "/ws?dockerVersion=DockerVersion%3A%2020.10&seqNum=1"
        );
        assert_eq!(request_target("/a b/ሴ", &[]), "/a%20b/%E1%88%B4");
    }

    #[test]
    fn amz_dates_are_utc_basic_format() {
        assert_eq!(amz_date(1_440_938_160_000), "20150830T123600Z");
        assert_eq!(amz_date(0), "19700101T000000Z");
        assert_eq!(amz_date(1_440_938_160_999), "20150830T123600Z");
    }

    #[test]
    fn a_header_given_twice_is_one_line_with_both_values() {
        let credentials = Credentials {
            access_key_id: "A".into(),
            secret_access_key: "S".into(),
            session_token: None,
        };
        let input = SignInput {
            method: "GET",
            path: "/",
            query: &[],
            headers: &[HOST, ("My-Header1", "value2"), ("my-header1", "value1")],
            payload: b"",
        };
        let signed = sign(
            &input,
            &credentials,
            "us-east-1",
            "service",
            "20150830T123600Z",
        );
        assert!(
            signed
                .canonical_request
                .contains("\nmy-header1:value2,value1\n"),
            "{}",
            signed.canonical_request
        );
        assert!(signed
            .canonical_request
            .contains("\nhost;my-header1;x-amz-date\n"));
    }
}
