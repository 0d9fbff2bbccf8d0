//! deckhand's clients of STS, SSM, Secrets Manager and ECR (`control::aws`) against the fake of
//! `tests/support/fake_aws.rs` on 127.0.0.1, reached through `AWS_ENDPOINT_URL` and
//! `AWS_ENDPOINT_URL_<SERVICE>` as a user points them: every request's SigV4 signature is
//! checked by the fake for the right service and region, and every client is driven through
//! its answers, its refusals (named by service, operation and code), its retries (throttling,
//! 5xx, an expired token, a dropped connection: tried again with back-off, then given up), a
//! skewed clock (corrected and signed again), and a `CONNECT` proxy.

#[path = "support/fake_aws.rs"]
mod fake_aws;
#[path = "support/fake_ecs.rs"]
mod fake_ecs;
#[path = "support/proxy.rs"]
mod proxy;

use std::time::Duration;

use deckhand::control::aws::ecr::{parse_ecr_image, EcrRegistry};
use deckhand::control::aws::secrets_manager::{self, SecretValue};
use deckhand::control::aws::ssm;
use deckhand::control::aws::sts::{session_name, AssumeRoleRequest};
use deckhand::control::aws::{AwsClient, AwsError, RetryPolicy, Service};
use deckhand::control::ecs::clock_skew::SigningClock;
use deckhand::control::ecs::credentials::Credentials;
use deckhand::net::proxy::ProxySettings;
use fake_aws::{assumed_credentials, FakeAws, Fault, SecretVersion};

const REGION: &str = "us-west-2";
const ROLE: &str = "arn:aws:iam::123456789012:role/app";

fn host_credentials() -> Credentials {
    let test = fake_ecs::Credentials::test();
    Credentials {
        access_key_id: test.access_key,
        secret_access_key: test.secret_key,
        session_token: test.session_token,
    }
}

fn quick_retries() -> RetryPolicy {
    RetryPolicy {
        attempts: 4,
        first_wait: Duration::from_millis(5),
        max_wait: Duration::from_millis(20),
    }
}

/// A client of `fake` through `AWS_ENDPOINT_URL`, with its own signing clock.
fn client_of(fake: &FakeAws) -> AwsClient {
    client_with(
        &[("AWS_ENDPOINT_URL", fake.endpoint())],
        ProxySettings::direct(),
    )
}

fn client_with(variables: &[(&str, String)], proxies: ProxySettings) -> AwsClient {
    let variables: Vec<(String, String)> = variables
        .iter()
        .map(|(name, value)| (name.to_string(), value.clone()))
        .collect();
    let lookup = move |name: &str| {
        variables
            .iter()
            .find(|(known, _)| known == name)
            .map(|(_, value)| value.clone())
    };
    let clock: &'static SigningClock = Box::leak(Box::new(SigningClock::new()));
    AwsClient::new(&lookup, proxies)
        .with_retry_policy(quick_retries())
        .with_signing_clock(clock)
        .with_timeout(Duration::from_secs(10))
}

fn assume(client: &AwsClient) -> Result<deckhand::control::aws::sts::AssumedRole, AwsError> {
    client.assume_role(
        REGION,
        &AssumeRoleRequest {
            role_arn: ROLE.to_string(),
            session_name: session_name("0123abcd"),
            duration_seconds: Some(900),
        },
        &host_credentials(),
    )
}

#[test]
fn assume_role_gives_the_roles_credentials_and_expiry() {
    let fake = FakeAws::start();
    fake.add_role(ROLE);
    let before = deckhand::clock::now_millis();
    let role = assume(&client_of(&fake)).expect("assumed");
    let expected = assumed_credentials(1);
    assert_eq!(role.credentials.access_key_id, expected.access_key);
    assert_eq!(role.credentials.secret_access_key, expected.secret_key);
    assert_eq!(role.credentials.session_token, expected.session_token);
    let lifetime = role.expiration_millis.saturating_sub(before);
    assert!(
        (890_000..=910_000).contains(&lifetime),
        "expires {lifetime} ms after the call"
    );
    assert_eq!(
        role.assumed_role_arn.as_deref(),
        Some("arn:aws:sts::123456789012:assumed-role/app/deckhand-0123abcd")
    );
    let debug = format!("{role:?}");
    assert!(
        !debug.contains(&expected.secret_key) && !debug.contains("token-1"),
        "{debug}"
    );
    let calls = fake.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].service, "sts");
    assert_eq!(calls[0].region, REGION);
    assert_eq!(calls[0].request["RoleArn"], ROLE);
    assert_eq!(calls[0].request["RoleSessionName"], "deckhand-0123abcd");
    assert_eq!(calls[0].request["DurationSeconds"], "900");

    // The role's credentials sign a call in turn.
    fake.accept_credentials(expected);
    fake.put_parameter("plain", "value");
    let values = client_of(&fake)
        .parameter_values(
            REGION,
            &[ssm::parse_value_from("plain").expect("a name")],
            &role.credentials,
        )
        .expect("read with the role's credentials");
    assert_eq!(values, ["value"]);
    assert_eq!(fake.calls()[1].access_key, "ASIAFAKE00000001");
}

#[test]
fn a_refused_assume_role_names_service_operation_and_code() {
    let fake = FakeAws::start();
    let error = assume(&client_of(&fake)).expect_err("not allowed");
    assert_eq!(error.code(), Some("AccessDenied"));
    assert!(!error.is_retryable());
    let message = error.to_string();
    assert!(
        message.contains("STS")
            && message.contains("AssumeRole")
            && message.contains("AccessDenied"),
        "{message}"
    );
    // A final refusal is not tried again.
    assert_eq!(fake.statuses("AssumeRole"), [403]);
}

#[test]
fn throttling_server_errors_and_expired_tokens_are_tried_again() {
    let fake = FakeAws::start();
    fake.add_role(ROLE);
    fake.fail_next(
        "AssumeRole",
        1,
        Fault::answer(400, "Throttling", "Rate exceeded"),
    );
    fake.fail_next(
        "AssumeRole",
        1,
        Fault::answer(500, "InternalFailure", "oops"),
    );
    fake.fail_next(
        "AssumeRole",
        1,
        Fault::answer(400, "ExpiredToken", "expired"),
    );
    assume(&client_of(&fake)).expect("assumed at the fourth attempt");
    assert_eq!(fake.statuses("AssumeRole"), [400, 500, 400, 200]);

    fake.put_parameter("p", "v");
    fake.fail_next("GetParameters", 1, Fault::Close);
    fake.fail_next(
        "GetParameters",
        1,
        Fault::answer(400, "ThrottlingException", "Rate exceeded"),
    );
    fake.fail_next(
        "GetParameters",
        1,
        Fault::answer(503, "ServiceUnavailable", "later"),
    );
    let values = client_of(&fake)
        .parameter_values(
            REGION,
            &[ssm::parse_value_from("p").expect("a name")],
            &host_credentials(),
        )
        .expect("read at the fourth attempt");
    assert_eq!(values, ["v"]);
    assert_eq!(fake.statuses("GetParameters"), [0, 400, 503, 200]);
}

#[test]
fn retries_end_after_the_policys_attempts_naming_the_last_failure() {
    let fake = FakeAws::start();
    fake.fail_next(
        "GetAuthorizationToken",
        10,
        Fault::answer(500, "ServerException", "down"),
    );
    let error = client_of(&fake)
        .get_authorization_token(REGION, &[], &host_credentials())
        .expect_err("always failing");
    assert!(error.is_retryable(), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("ECR")
            && message.contains("GetAuthorizationToken")
            && message.contains("ServerException")
            && message.contains("4 attempt"),
        "{message}"
    );
    assert_eq!(fake.statuses("GetAuthorizationToken"), [500; 4]);
}

#[test]
fn a_skewed_clock_is_corrected_and_the_call_signed_again() {
    let fake = FakeAws::start();
    fake.put_parameter("p", "v");
    fake.set_clock_ahead(20 * 60);
    let clock: &'static SigningClock = Box::leak(Box::new(SigningClock::new()));
    let lookup = |name: &str| (name == "AWS_ENDPOINT_URL").then(|| fake.endpoint());
    let client = AwsClient::new(&lookup, ProxySettings::direct())
        .with_retry_policy(RetryPolicy {
            attempts: 1,
            ..quick_retries()
        })
        .with_signing_clock(clock);
    let values = client
        .parameter_values(
            REGION,
            &[ssm::parse_value_from("p").expect("a name")],
            &host_credentials(),
        )
        .expect("signed again with the fake's time");
    assert_eq!(values, ["v"]);
    assert_eq!(fake.statuses("GetParameters"), [403, 200]);
    let offset = clock.offset_millis();
    assert!(
        (19 * 60_000..=21 * 60_000).contains(&offset),
        "offset {offset} ms"
    );
}

#[test]
fn ssm_parameters_by_name_path_and_arn_and_invalid_ones() {
    let fake = FakeAws::start();
    fake.accept_region("eu-west-1");
    fake.put_parameter("/app/db/password", "hunter2");
    fake.put_parameter("plain", "one");
    let client = client_of(&fake);
    let references: Vec<ssm::SsmReference> = [
        "/app/db/password".to_string(),
        "plain".to_string(),
        FakeAws::parameter_arn("eu-west-1", "/app/db/password"),
    ]
    .iter()
    .map(|text| ssm::parse_value_from(text).expect("a reference"))
    .collect();
    let values = client
        .parameter_values(REGION, &references, &host_credentials())
        .expect("all found");
    assert_eq!(values, ["hunter2", "one", "hunter2"]);
    let calls = fake.calls();
    assert_eq!(calls.len(), 2, "one call per region: {calls:?}");
    let regions: Vec<&str> = calls.iter().map(|call| call.region.as_str()).collect();
    assert_eq!(regions, ["eu-west-1", REGION]);
    assert!(calls
        .iter()
        .all(|call| call.request["WithDecryption"] == true));

    // Eleven names go in two calls.
    let names: Vec<String> = (0..11).map(|n| format!("n{n}")).collect();
    for name in &names {
        fake.put_parameter(name, name);
    }
    let answer = client
        .get_parameters(REGION, &names, &host_credentials())
        .expect("two calls");
    assert_eq!(answer.parameters.len(), 11);
    assert_eq!(fake.statuses("GetParameters").len(), 4);

    let error = client
        .parameter_values(
            REGION,
            &[
                ssm::parse_value_from("plain").expect("a name"),
                ssm::parse_value_from("/missing").expect("a name"),
            ],
            &host_credentials(),
        )
        .expect_err("one is invalid");
    assert_eq!(error.code(), Some("InvalidParameters"));
    assert!(error.to_string().contains("/missing"), "{error}");
    assert!(!error.to_string().contains("one"), "no value in {error}");
}

#[test]
fn secrets_by_arn_json_key_stage_and_version() {
    let fake = FakeAws::start();
    fake.put_secret(
        "db",
        vec![
            SecretVersion {
                version_id: "v2".into(),
                stages: vec!["AWSCURRENT".into()],
                value: Ok(r#"{"username":"admin","password":"new","port":5432}"#.into()),
            },
            SecretVersion {
                version_id: "v1".into(),
                stages: vec!["AWSPREVIOUS".into()],
                value: Ok(r#"{"username":"admin","password":"old"}"#.into()),
            },
        ],
    );
    fake.put_secret(
        "blob",
        vec![SecretVersion {
            version_id: "b1".into(),
            stages: vec!["AWSCURRENT".into()],
            value: Err(vec![0, 1, 2, 255]),
        }],
    );
    let client = client_of(&fake);
    let arn = FakeAws::secret_arn(REGION, "db");
    let text = |value_from: &str| {
        let reference = secrets_manager::parse_value_from(value_from).expect("a reference");
        client.secret_text(REGION, &reference, &host_credentials())
    };
    assert_eq!(
        text(&arn).expect("whole"),
        r#"{"username":"admin","password":"new","port":5432}"#
    );
    assert_eq!(text(&format!("{arn}:password::")).expect("key"), "new");
    assert_eq!(text(&format!("{arn}:port::")).expect("number"), "5432");
    assert_eq!(
        text(&format!("{arn}:password:AWSPREVIOUS:")).expect("stage"),
        "old"
    );
    assert_eq!(
        text(&format!("{arn}:password::v1")).expect("version"),
        "old"
    );
    assert_eq!(
        text("db").expect("by name"),
        r#"{"username":"admin","password":"new","port":5432}"#
    );
    let requests: Vec<serde_json::Value> =
        fake.calls().into_iter().map(|call| call.request).collect();
    assert_eq!(requests[1], serde_json::json!({"SecretId": arn}));
    assert_eq!(
        requests[3],
        serde_json::json!({"SecretId": arn, "VersionStage": "AWSPREVIOUS"})
    );
    assert_eq!(
        requests[4],
        serde_json::json!({"SecretId": arn, "VersionId": "v1"})
    );

    let missing_key = text(&format!("{arn}:nope::")).expect_err("no such key");
    assert!(
        missing_key.to_string().contains("json key nope"),
        "{missing_key}"
    );
    assert!(!missing_key.to_string().contains("new"), "{missing_key}");
    let missing = text("nothing").expect_err("no such secret");
    assert_eq!(missing.code(), Some("ResourceNotFoundException"));
    assert!(missing.to_string().contains("Secrets Manager"), "{missing}");

    let reference = secrets_manager::parse_value_from("blob").expect("a name");
    let value = client
        .get_secret_value(REGION, &reference, &host_credentials())
        .expect("binary");
    assert_eq!(value, SecretValue::Binary(vec![0, 1, 2, 255]));
    assert!(!format!("{value:?}").contains('2'));
}

#[test]
fn ecr_logins_are_decoded_with_their_expiry_and_endpoint() {
    let fake = FakeAws::start();
    let client = client_of(&fake);
    let registry: EcrRegistry =
        parse_ecr_image("123456789012.dkr.ecr.us-west-2.amazonaws.com/app:latest")
            .expect("an ECR image");
    let before = deckhand::clock::now_millis();
    let login = client
        .registry_login(&registry, &host_credentials())
        .expect("a login");
    assert_eq!(login.username, "AWS");
    assert_eq!(login.password, FakeAws::ecr_password(1));
    let lifetime = login.expires_at_millis.saturating_sub(before);
    assert!(
        (12 * 3_600_000 - 10_000..=12 * 3_600_000 + 10_000).contains(&lifetime),
        "{lifetime}"
    );
    assert_eq!(
        login.proxy_endpoint.as_deref(),
        Some("https://123456789012.dkr.ecr.us-west-2.amazonaws.com")
    );
    assert!(!format!("{login:?}").contains("ecr-password"));
    let calls = fake.calls();
    assert_eq!(calls[0].service, "ecr");
    assert_eq!(
        calls[0].request,
        serde_json::json!({"registryIds": ["123456789012"]})
    );
}

#[test]
fn a_service_variable_wins_over_the_shared_one() {
    let ssm_fake = FakeAws::start();
    let other = FakeAws::start();
    ssm_fake.put_parameter("p", "from the SSM variable");
    other.put_parameter("p", "from AWS_ENDPOINT_URL");
    let client = client_with(
        &[
            ("AWS_ENDPOINT_URL", other.endpoint()),
            ("AWS_ENDPOINT_URL_SSM", ssm_fake.endpoint()),
        ],
        ProxySettings::direct(),
    );
    let reference = ssm::parse_value_from("p").expect("a name");
    let values = client
        .parameter_values(REGION, &[reference], &host_credentials())
        .expect("found");
    assert_eq!(values, ["from the SSM variable"]);
    assert!(other.calls().is_empty());
    let endpoint = client.endpoint(Service::Ecr, REGION).expect("an endpoint");
    assert_eq!(endpoint.to_string(), format!("{}/", other.endpoint()));
}

#[test]
fn calls_go_through_the_proxy_the_settings_name() {
    let fake = FakeAws::start();
    fake.add_role(ROLE);
    let tunnel = proxy::TestProxy::start();
    let proxies = ProxySettings::from_lookup(&|name| (name == "HTTP_PROXY").then(|| tunnel.url()))
        .expect("proxy settings");
    let client = client_with(&[("AWS_ENDPOINT_URL", fake.endpoint())], proxies);
    assume(&client).expect("assumed through the proxy");
    assert_eq!(tunnel.connects(), 1);
    assert_eq!(tunnel.targets(), [format!("127.0.0.1:{}", fake.port())]);
}

#[test]
fn a_service_that_never_answers_is_retried_then_reported() {
    let fake = FakeAws::start();
    fake.fail_next("GetAuthorizationToken", 10, Fault::Close);
    let error = client_of(&fake)
        .get_authorization_token(REGION, &[], &host_credentials())
        .expect_err("the connection always closes");
    assert!(error.is_retryable(), "{error:?}");
    assert!(error.to_string().contains("ECR unreachable"), "{error}");
    assert_eq!(fake.statuses("GetAuthorizationToken"), [0; 4]);
}
