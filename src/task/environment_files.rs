//! `environmentFiles`: the S3 ARNs a container's variables come from, and ECS's rules for them
//! (agent/taskresource/envFiles and the container's merge in the ECS agent): which ARN names
//! which bucket and key, how a file's lines are read, and how the files and `environment` are
//! merged. Pure: the bytes come from the engine's source (the local mirror or S3).
//!
//! A file's bytes are hostile input (fuzzed: `fuzz_targets/environment_file.rs`).

/// ECS takes at most ten environment files per container.
pub const MAX_ENVIRONMENT_FILES: usize = 10;
/// A file larger than this is refused (an S3 object can be anything; a container's whole
/// environment should fit well within it).
pub const MAX_ENVIRONMENT_FILE_BYTES: usize = 256 * 1024;
/// The longest line the ECS agent's reader takes (Go's `bufio.Scanner`): a longer one fails the
/// file.
pub const MAX_ENVIRONMENT_FILE_LINE_BYTES: usize = 64 * 1024;

/// An S3 object named by an ARN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Object {
    pub bucket: String,
    pub key: String,
}

impl S3Object {
    /// Where the object is in a mirror directory: `<mirror>/<bucket>/<key>`.
    pub fn mirror_path(&self, mirror: &std::path::Path) -> std::path::PathBuf {
        mirror.join(&self.bucket).join(&self.key)
    }
}

/// The bucket and key of an S3 object ARN: `arn:aws:s3:::bucket/key/with/slashes.env` (any
/// partition: `aws`, `aws-cn`, `aws-us-gov`, …). The one parser of S3 ARNs: `environmentFiles`
/// and FireLens's `config-file-type: s3` both name their objects so. The key is looked up as a
/// path under the mirror (`DECKHAND_ENVIRONMENT_FILES_DIR`), so a segment that would leave it
/// (`..`, `.`, empty) is refused.
pub fn parse_s3_arn(arn: &str) -> Result<S3Object, String> {
    let bad = |why: &str| {
        format!("{arn:?} is not an S3 object ARN ({why}; expected arn:aws:s3:::BUCKET/KEY)")
    };
    let mut parts = arn.splitn(6, ':');
    let (Some("arn"), Some(partition), Some("s3"), Some(""), Some(""), Some(resource)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err(bad("not arn:PARTITION:s3:::…"));
    };
    if partition.is_empty() {
        return Err(bad("no partition"));
    }
    let Some((bucket, key)) = resource.split_once('/') else {
        return Err(bad("no key after the bucket"));
    };
    let bucket_ok = (3..=63).contains(&bucket.len())
        && bucket.bytes().all(|byte| {
            byte.is_ascii_lowercase() || byte.is_ascii_digit() || b".-".contains(&byte)
        });
    if !bucket_ok {
        return Err(bad(
            "the bucket name is not 3-63 lowercase letters, digits, dots or hyphens",
        ));
    }
    if key.is_empty() || key.contains('\0') {
        return Err(bad("an empty key"));
    }
    if key
        .split('/')
        .any(|segment| segment.is_empty() || segment == "." || segment == "..")
    {
        return Err(bad(
            "a key with an empty, \".\" or \"..\" path segment cannot be looked up in \
             DECKHAND_ENVIRONMENT_FILES_DIR",
        ));
    }
    Ok(S3Object {
        bucket: bucket.to_string(),
        key: key.to_string(),
    })
}

/// The variables of one environment file, in the order they first appear, each with the value
/// of its last line (ECS reads a file into a map): lines are split at `\n` (a `\r` before it is
/// dropped); a line starting with `#` is a comment; a line without `=` is skipped; `NAME=VALUE`
/// splits at the first `=`, nothing is trimmed, and a line whose name or value is empty is
/// skipped. Refused: a file over [`MAX_ENVIRONMENT_FILE_BYTES`], a line over
/// [`MAX_ENVIRONMENT_FILE_LINE_BYTES`], bytes that are not UTF-8, a NUL (Docker cannot pass it).
pub fn parse_environment_file(bytes: &[u8]) -> Result<Vec<(String, String)>, String> {
    if bytes.len() > MAX_ENVIRONMENT_FILE_BYTES {
        return Err(format!(
            "{} bytes is more than the {MAX_ENVIRONMENT_FILE_BYTES} an environment file may have",
            bytes.len()
        ));
    }
    let mut variables: Vec<(String, String)> = Vec::new();
    for (index, line) in bytes.split(|byte| *byte == b'\n').enumerate() {
        let number = index + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.len() > MAX_ENVIRONMENT_FILE_LINE_BYTES {
            return Err(format!(
                "line {number} is longer than {MAX_ENVIRONMENT_FILE_LINE_BYTES} bytes"
            ));
        }
        let Ok(line) = std::str::from_utf8(line) else {
            return Err(format!("line {number} is not UTF-8 text"));
        };
        if line.contains('\0') {
            return Err(format!("line {number} holds a NUL byte"));
        }
        if line.starts_with('#') {
            continue;
        }
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        if name.is_empty() || value.is_empty() {
            continue;
        }
        match variables.iter_mut().find(|(known, _)| known == name) {
            Some(entry) => entry.1 = value.to_string(),
            None => variables.push((name.to_string(), value.to_string())),
        }
    }
    Ok(variables)
}

/// Merges the files' variables into a create's environment (`NAME=value` entries) as ECS does:
/// a variable already set (by `environment`) is kept, and among the files the first one (in the
/// definition's order) that names a variable gives its value. New variables follow the
/// existing ones, file by file.
pub fn merge_environment_files(environment: &mut Vec<String>, files: &[Vec<(String, String)>]) {
    let name_of = |entry: &String| entry.split('=').next().unwrap_or_default().to_string();
    let mut names: std::collections::HashSet<String> = environment.iter().map(name_of).collect();
    for file in files {
        for (name, value) in file {
            if names.insert(name.clone()) {
                environment.push(format!("{name}={value}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_arns_give_their_bucket_and_key_or_say_what_is_wrong() {
        // (ARN, Ok((bucket, key)) or Err(part of the message))
        type Case<'a> = (&'a str, Result<(&'a str, &'a str), &'a str>);
        let cases: &[Case] = &[
            (
                "arn:aws:s3:::my-bucket/app.env",
                Ok(("my-bucket", "app.env")),
            ),
            (
                "arn:aws-cn:s3:::b.cn/dir/sub/prod.env",
                Ok(("b.cn", "dir/sub/prod.env")),
            ),
            ("arn:aws:s3:::my-bucket", Err("no key after the bucket")),
            ("arn:aws:s3:::my-bucket/", Err("an empty key")),
            (
                "arn:aws:s3:eu-west-1::my-bucket/a.env",
                Err("not arn:PARTITION:s3:::"),
            ),
            (
                "arn:aws:sqs:::my-bucket/a.env",
                Err("not arn:PARTITION:s3:::"),
            ),
            ("s3://my-bucket/a.env", Err("not arn:PARTITION:s3:::")),
            ("arn::s3:::my-bucket/a.env", Err("no partition")),
            ("arn:aws:s3:::My_Bucket/a.env", Err("bucket name")),
            ("arn:aws:s3:::ab/a.env", Err("bucket name")),
            ("", Err("not arn:PARTITION:s3:::")),
        ];
        for (arn, expected) in cases {
            match (parse_s3_arn(arn), expected) {
                (Ok(object), Ok((want_bucket, want_key))) => {
                    assert_eq!(
                        (object.bucket.as_str(), object.key.as_str()),
                        (*want_bucket, *want_key),
                        "{arn}"
                    )
                }
                (Err(message), Err(want)) => assert!(message.contains(want), "{arn}: {message}"),
                (got, want) => panic!("{arn}: {got:?}, expected {want:?}"),
            }
        }
    }

    #[test]
    fn files_are_read_with_ecss_line_rules() {
        let text = "# a comment\nA=1\n  B=two words  \nno equals sign\n=empty-name\nEMPTY=\n\
                    C=x=y==\r\nA=again\n#D=commented\nLAST=no newline";
        let parsed = parse_environment_file(text.as_bytes()).expect("parses");
        let expected = [
            ("A", "again"),
            ("  B", "two words  "),
            ("C", "x=y=="),
            ("LAST", "no newline"),
        ];
        let got: Vec<(&str, &str)> = parsed
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        assert_eq!(got, expected);
        assert_eq!(parse_environment_file(b""), Ok(Vec::new()));
    }

    #[test]
    fn files_that_cannot_be_passed_on_are_refused_naming_why() {
        let long_line = format!("A={}", "x".repeat(MAX_ENVIRONMENT_FILE_LINE_BYTES));
        let too_big = "A=1\n".repeat(MAX_ENVIRONMENT_FILE_BYTES / 4 + 1);
        let cases: [(&[u8], &str); 4] = [
            (long_line.as_bytes(), "line 1 is longer than 65536 bytes"),
            (too_big.as_bytes(), "more than the 262144"),
            (b"A=1\nB=\xff\xfe\n", "line 2 is not UTF-8"),
            (b"A=1\0x\n", "line 1 holds a NUL"),
        ];
        for (bytes, expected) in cases {
            match parse_environment_file(bytes) {
                Err(message) => assert!(message.contains(expected), "{message}"),
                Ok(parsed) => panic!("{expected}: parsed {parsed:?}"),
            }
        }
    }

    #[test]
    fn environment_wins_then_the_first_file_naming_a_variable() {
        let mut environment = vec!["SHARED=from-environment".to_string(), "OWN=1".to_string()];
        let files = vec![
            vec![
                ("SHARED".into(), "file-1".into()),
                ("FIRST".into(), "file-1".into()),
            ],
            vec![
                ("FIRST".into(), "file-2".into()),
                ("SECOND".into(), "file-2".into()),
            ],
        ];
        merge_environment_files(&mut environment, &files);
        assert_eq!(
            environment,
            [
                "SHARED=from-environment",
                "OWN=1",
                "FIRST=file-1",
                "SECOND=file-2"
            ]
        );
    }
}
