//! Table-driven tests of registry credentials: both data formats and every refusal (none of
//! which may quote a password), registry keys, image references → registry, and which key an
//! image is matched to.

use super::*;

/// A password no message may contain.
const SECRET: &str = "pa55-Secret:with:colons";

fn docker_data(registry: &str) -> String {
    format!(
        r#"{{"{registry}": {{"username": "deck", "password": "{SECRET}", "email": "ops@example.com"}}}}"#
    )
}

fn base64_standard(text: &str) -> String {
    // base64url differs from the standard alphabet only in `-`/`_`; the test inputs avoid both.
    let encoded = crate::encoding::base64_url(text.as_bytes());
    assert!(!encoded.contains(['-', '_']), "pick another test input");
    encoded
}

#[test]
fn auth_types_are_docker_and_dockercfg() {
    assert_eq!("docker".parse(), Ok(AuthDataFormat::Docker));
    assert_eq!("dockercfg".parse(), Ok(AuthDataFormat::Dockercfg));
    for bad in ["", "Docker", "ecr", "dockerconfigjson"] {
        let error = bad.parse::<AuthDataFormat>().expect_err(bad);
        assert!(error.contains("docker or dockercfg"), "{error}");
    }
}

#[test]
fn docker_format_reads_username_and_password_of_each_registry() {
    let cases: &[(&str, &str, &str, &str)] = &[
        // (data, registry as given, user, password)
        (
            &docker_data("registry.example.com"),
            "registry.example.com",
            "deck",
            SECRET,
        ),
        (
            r#"{"https://index.docker.io/v1/": {"username": "hub", "password": "x"}}"#,
            "https://index.docker.io/v1/",
            "hub",
            "x",
        ),
        // ECS's JSON reader matches field names in any case.
        (
            r#"{"localhost:5000": {"Username": "u", "PASSWORD": "p", "Email": ""}}"#,
            "localhost:5000",
            "u",
            "p",
        ),
    ];
    for (data, registry, username, password) in cases {
        let credentials = parse_auth_data(AuthDataFormat::Docker, data).expect(data);
        assert_eq!(
            credentials.registries().collect::<Vec<_>>(),
            vec![*registry]
        );
        let matched = credentials
            .entries
            .first()
            .map(|entry| &entry.credential)
            .expect("one entry");
        assert_eq!(
            (matched.username.as_str(), matched.password.as_str()),
            (*username, *password)
        );
    }
    let empty = parse_auth_data(AuthDataFormat::Docker, "{}").expect("empty object");
    assert!(empty.is_empty());
}

#[test]
fn dockercfg_format_decodes_auth_into_user_and_password() {
    let auth = base64_standard(&format!("deck:{SECRET}"));
    let cases: Vec<(String, &str, &str)> = vec![
        (
            format!(r#"{{"http://myregistry.com/v1/": {{"auth": "{auth}", "email": "e"}}}}"#),
            "deck",
            SECRET,
        ),
        // Only the first ':' splits: the password keeps the others.
        (
            format!(
                r#"{{"r.example": {{"auth": "{}"}}}}"#,
                base64_standard("a:b:c")
            ),
            "a",
            "b:c",
        ),
        // Padding may be left out.
        (
            format!(r#"{{"r.example": {{"auth": "{}"}}}}"#, "dTpwdw"),
            "u",
            "pw",
        ),
    ];
    for (data, username, password) in &cases {
        let credentials = parse_auth_data(AuthDataFormat::Dockercfg, data).expect(data);
        let credential = &credentials.entries[0].credential;
        assert_eq!(
            (credential.username.as_str(), credential.password.as_str()),
            (*username, *password),
            "{data}"
        );
    }
}

#[test]
fn bad_data_is_refused_with_the_registry_and_field_named_and_no_secret_quoted() {
    let good_auth = base64_standard(&format!("deck:{SECRET}"));
    let no_colon = base64_standard(SECRET.replace(':', "").as_str());
    let cases: Vec<(AuthDataFormat, String, &str)> = vec![
        (AuthDataFormat::Docker, String::new(), "not valid JSON"),
        (
            AuthDataFormat::Docker,
            format!(r#"{{"r.example": {{"username": "u", "password": "{SECRET}""#),
            "not valid JSON",
        ),
        (
            AuthDataFormat::Docker,
            format!(r#"["{SECRET}"]"#),
            "found an array",
        ),
        (
            AuthDataFormat::Docker,
            format!(r#"{{"r.example": "{SECRET}"}}"#),
            "registry \"r.example\": expected an object, found a string",
        ),
        (
            AuthDataFormat::Docker,
            r#"{"r.example": {"username": "u"}}"#.to_string(),
            "password is missing",
        ),
        (
            AuthDataFormat::Docker,
            format!(r#"{{"r.example": {{"password": "{SECRET}"}}}}"#),
            "username is missing",
        ),
        (
            AuthDataFormat::Docker,
            r#"{"r.example": {"username": "u", "password": ""}}"#.to_string(),
            "password is empty",
        ),
        (
            AuthDataFormat::Docker,
            format!(
                r#"{{"r.example": {{"username": "u", "password": "{SECRET}", "passwrod": "{SECRET}"}}}}"#
            ),
            "unknown field \"passwrod\"",
        ),
        (
            AuthDataFormat::Docker,
            r#"{"r.example": {"username": "u", "password": 12345678}}"#.to_string(),
            "\"password\" must be a string, found a number",
        ),
        (
            AuthDataFormat::Docker,
            format!(r#"{{"r.example": {{"auth": "{good_auth}"}}}}"#),
            "dockercfg",
        ),
        (
            AuthDataFormat::Docker,
            format!(
                r#"{{"https://r.example": {{"username": "u", "password": "{SECRET}"}}, "r.example": {{"username": "v", "password": "{SECRET}"}}}}"#
            ),
            "are the same registry",
        ),
        (
            AuthDataFormat::Docker,
            format!(r#"{{"ftp://r.example": {{"username": "u", "password": "{SECRET}"}}}}"#),
            "only https:// or http://",
        ),
        (
            AuthDataFormat::Docker,
            format!(r#"{{"": {{"username": "u", "password": "{SECRET}"}}}}"#),
            "the registry is empty",
        ),
        (
            AuthDataFormat::Dockercfg,
            format!(r#"{{"auths": {{"r.example": {{"auth": "{good_auth}"}}}}}}"#),
            "inside \"auths\"",
        ),
        (
            AuthDataFormat::Dockercfg,
            format!(r#"{{"r.example": {{"email": "{SECRET}"}}}}"#),
            "auth is missing",
        ),
        (
            AuthDataFormat::Dockercfg,
            format!(r#"{{"r.example": {{"auth": "{SECRET}"}}}}"#),
            "auth is not base64",
        ),
        (
            AuthDataFormat::Dockercfg,
            format!(r#"{{"r.example": {{"auth": "{no_colon}"}}}}"#),
            "user:password",
        ),
        (
            AuthDataFormat::Dockercfg,
            format!(
                r#"{{"r.example": {{"auth": "{}"}}}}"#,
                base64_standard(":pw")
            ),
            "user name is empty",
        ),
        (
            AuthDataFormat::Dockercfg,
            format!(r#"{{"r.example": {{"username": "u", "password": "{SECRET}"}}}}"#),
            "ECS_ENGINE_AUTH_TYPE=docker",
        ),
    ];
    for (format, data, expected) in &cases {
        let error = parse_auth_data(*format, data).expect_err(data);
        assert!(error.contains(expected), "{data}: {error}");
        assert!(
            !error.contains(SECRET),
            "{data}: the error quotes the secret: {error}"
        );
        assert!(!error.contains(&good_auth), "{data}: {error}");
        assert!(!error.contains(&no_colon), "{data}: {error}");
    }
}

#[test]
fn registry_keys_lose_scheme_and_api_version_and_hub_has_one_name() {
    let cases: &[(&str, (&str, &str))] = &[
        ("registry.example.com", ("registry.example.com", "")),
        ("https://registry.example.com", ("registry.example.com", "")),
        ("HTTP://Registry.Example.com/", ("registry.example.com", "")),
        ("http://myregistry.com/v1/", ("myregistry.com", "")),
        ("https://index.docker.io/v1/", ("docker.io", "")),
        ("index.docker.io/v1/", ("docker.io", "")),
        ("docker.io", ("docker.io", "")),
        ("registry-1.docker.io", ("docker.io", "")),
        ("https://index.docker.io/v1/user", ("docker.io", "user")),
        ("localhost:5000", ("localhost:5000", "")),
        ("127.0.0.1:5000/v2/team/sub", ("127.0.0.1:5000", "team/sub")),
        ("registry.tld/username", ("registry.tld", "username")),
    ];
    for (key, (host, namespace)) in cases {
        assert_eq!(
            parse_registry_key(key),
            Ok((host.to_string(), namespace.to_string())),
            "{key}"
        );
    }
    for bad in ["", "https://", "/path", "ftp://r.example", "r.example/a b"] {
        assert!(parse_registry_key(bad).is_err(), "{bad}");
    }
}

#[test]
fn an_image_reference_names_its_registry_and_repository() {
    let cases: &[(&str, (&str, &str))] = &[
        ("busybox", ("docker.io", "library/busybox")),
        ("busybox:1.36", ("docker.io", "library/busybox")),
        ("team/app:v1", ("docker.io", "team/app")),
        (
            "docker.io/library/busybox",
            ("docker.io", "library/busybox"),
        ),
        ("docker.io/busybox", ("docker.io", "library/busybox")),
        ("index.docker.io/team/app", ("docker.io", "team/app")),
        (
            "registry-1.docker.io/team/app:v2",
            ("docker.io", "team/app"),
        ),
        (
            "registry.example.com/team/app:v1",
            ("registry.example.com", "team/app"),
        ),
        ("Registry.Example.com/app", ("registry.example.com", "app")),
        (
            "registry.example.com:8443/app:v1",
            ("registry.example.com:8443", "app"),
        ),
        ("localhost:5000/app:latest", ("localhost:5000", "app")),
        ("localhost/app", ("localhost", "app")),
        (
            "127.0.0.1:5000/deep/path/app",
            ("127.0.0.1:5000", "deep/path/app"),
        ),
        (
            "registry.example.com/app@sha256:0123456789abcdef",
            ("registry.example.com", "app"),
        ),
        (
            "registry.example.com:5000/app:v1@sha256:0123",
            ("registry.example.com:5000", "app"),
        ),
        ("busybox@sha256:abc", ("docker.io", "library/busybox")),
        // A first part with a capital letter is a host, as Docker reads it.
        ("MyHost/app", ("myhost", "app")),
        ("", ("docker.io", "library/")),
    ];
    for (image, (host, repository)) in cases {
        assert_eq!(
            registry_of_image(image),
            (host.to_string(), repository.to_string()),
            "{image}"
        );
    }
}

#[test]
fn an_image_gets_the_credential_of_its_registry_host_and_port() {
    let data = r#"{
        "https://index.docker.io/v1/": {"username": "hub", "password": "p"},
        "registry.example.com": {"username": "example", "password": "p"},
        "registry.example.com/team-b": {"username": "team-b", "password": "p"},
        "registry.example.com/team-b/special": {"username": "special", "password": "p"},
        "localhost:5000": {"username": "local", "password": "p"},
        "http://127.0.0.1:5001/v2/": {"username": "loopback", "password": "p"},
        "namespaced.example/team-a": {"username": "ns-a", "password": "p"},
        "namespaced.example/team-c": {"username": "ns-c", "password": "p"}
    }"#;
    let credentials = parse_auth_data(AuthDataFormat::Docker, data).expect("valid data");
    let cases: &[(&str, Option<(&str, &str)>)] = &[
        // (image, (user, server address))
        ("busybox", Some(("hub", DOCKER_HUB_SERVER_ADDRESS))),
        ("team/app:v1", Some(("hub", DOCKER_HUB_SERVER_ADDRESS))),
        (
            "docker.io/library/busybox@sha256:00",
            Some(("hub", DOCKER_HUB_SERVER_ADDRESS)),
        ),
        (
            "registry.example.com/app:v1",
            Some(("example", "registry.example.com")),
        ),
        (
            "registry.example.com/team-b/app",
            Some(("team-b", "registry.example.com")),
        ),
        (
            "registry.example.com/team-b",
            Some(("team-b", "registry.example.com")),
        ),
        (
            "registry.example.com/team-bee/app",
            Some(("example", "registry.example.com")),
        ),
        (
            "registry.example.com/team-b/special/app:v9",
            Some(("special", "registry.example.com")),
        ),
        // Another port is another registry.
        ("registry.example.com:5000/app", None),
        (
            "localhost:5000/app:latest",
            Some(("local", "localhost:5000")),
        ),
        ("localhost:5001/app", None),
        ("localhost/app", None),
        (
            "127.0.0.1:5001/app@sha256:ff",
            Some(("loopback", "127.0.0.1:5001")),
        ),
        ("127.0.0.1:5000/app", None),
        // No key covers the repository: the host's first key, as ECS sends a host match.
        (
            "namespaced.example/team-c/app",
            Some(("ns-c", "namespaced.example")),
        ),
        (
            "namespaced.example/team-z/app",
            Some(("ns-a", "namespaced.example")),
        ),
        ("other.example/app", None),
    ];
    for (image, expected) in cases {
        let matched = credentials
            .for_image(image)
            .map(|matched| (matched.credential.username.as_str(), matched.server_address));
        assert_eq!(matched, *expected, "{image}");
    }
    assert_eq!(RegistryCredentials::default().for_image("busybox"), None);
}

#[test]
fn debug_output_never_shows_a_password() {
    let credentials =
        parse_auth_data(AuthDataFormat::Docker, &docker_data("r.example")).expect("valid");
    for text in [
        format!("{credentials:?}"),
        format!("{credentials:#?}"),
        format!("{:?}", credentials.for_image("r.example/app")),
    ] {
        assert!(!text.contains(SECRET), "{text}");
        assert!(
            text.contains("<redacted>") && text.contains("deck"),
            "{text}"
        );
    }
}
