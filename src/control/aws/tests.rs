//! Tests of the AWS service clients' pure parts: endpoints, the retry decision, the STS XML
//! reader, the JSON answers and the `valueFrom`, image and token readers.

use std::time::Duration;

use super::call::{is_retryable_refusal, RetryPolicy};
use super::ecr::{self, EcrRegistry};
use super::secrets_manager::{self, SecretReference, SecretValue};
use super::ssm::{self, SsmReference};
use super::sts;
use super::{service_endpoint, Service};

fn lookup(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name| {
        pairs
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, value)| value.to_string())
    }
}

#[test]
fn endpoints_follow_the_sdks_convention() {
    type Case = (
        Service,
        &'static str,
        &'static [(&'static str, &'static str)],
        &'static str,
    );
    let cases: &[Case] = &[
        (
            Service::Sts,
            "us-west-2",
            &[],
            "https://sts.us-west-2.amazonaws.com/",
        ),
        (
            Service::Ssm,
            "eu-west-1",
            &[],
            "https://ssm.eu-west-1.amazonaws.com/",
        ),
        (
            Service::SecretsManager,
            "ap-south-1",
            &[],
            "https://secretsmanager.ap-south-1.amazonaws.com/",
        ),
        (
            Service::Ecr,
            "us-east-1",
            &[],
            "https://api.ecr.us-east-1.amazonaws.com/",
        ),
        (
            Service::Ecr,
            "cn-north-1",
            &[],
            "https://api.ecr.cn-north-1.amazonaws.com.cn/",
        ),
        (
            Service::Sts,
            "us-iso-east-1",
            &[],
            "https://sts.us-iso-east-1.c2s.ic.gov/",
        ),
        (
            Service::Sts,
            "us-isob-east-1",
            &[],
            "https://sts.us-isob-east-1.sc2s.sgov.gov/",
        ),
        // The service's own variable wins over the general one.
        (
            Service::Ssm,
            "us-west-2",
            &[
                ("AWS_ENDPOINT_URL_SSM", "http://127.0.0.1:4000"),
                ("AWS_ENDPOINT_URL", "http://127.0.0.1:5000"),
            ],
            "http://127.0.0.1:4000/",
        ),
        (
            Service::SecretsManager,
            "us-west-2",
            &[
                ("AWS_ENDPOINT_URL_SSM", "http://127.0.0.1:4000"),
                ("AWS_ENDPOINT_URL", "http://127.0.0.1:5000/base"),
            ],
            "http://127.0.0.1:5000/base",
        ),
        (
            Service::SecretsManager,
            "us-west-2",
            &[(
                "AWS_ENDPOINT_URL_SECRETS_MANAGER",
                " https://vpce.example:8443 ",
            )],
            "https://vpce.example:8443/",
        ),
        (
            Service::Ecr,
            "us-west-2",
            &[("AWS_ENDPOINT_URL_ECR", "http://[::1]:9000")],
            "http://[::1]:9000/",
        ),
        // An empty value is not set.
        (
            Service::Sts,
            "us-west-2",
            &[("AWS_ENDPOINT_URL_STS", " "), ("AWS_ENDPOINT_URL", "")],
            "https://sts.us-west-2.amazonaws.com/",
        ),
    ];
    for (service, region, values, expected) in cases {
        let endpoint = service_endpoint(*service, region, &lookup(values))
            .unwrap_or_else(|error| panic!("{service:?} {region}: {error}"));
        assert_eq!(endpoint.url(), *expected, "{service:?} {region} {values:?}");
    }
}

#[test]
fn bad_endpoints_and_regions_are_errors_naming_the_variable() {
    let error = service_endpoint(
        Service::Sts,
        "us-west-2",
        &lookup(&[("AWS_ENDPOINT_URL_STS", "ftp://x")]),
    )
    .expect_err("a scheme other than http(s)");
    assert!(error.starts_with("AWS_ENDPOINT_URL_STS: "), "{error}");
    for region in ["", "US-WEST-2", "us west", "evil.com/x", "a:b", "-x"] {
        assert!(
            service_endpoint(Service::Ssm, region, &lookup(&[])).is_err(),
            "{region:?}"
        );
    }
    // With an endpoint configured, the region is only signed.
    assert!(service_endpoint(
        Service::Ssm,
        "local",
        &lookup(&[("AWS_ENDPOINT_URL", "http://127.0.0.1:1")])
    )
    .is_ok());
}

#[test]
fn signing_names_and_variables_are_the_sdks() {
    let cases = [
        (Service::Sts, "sts", "AWS_ENDPOINT_URL_STS"),
        (Service::Ssm, "ssm", "AWS_ENDPOINT_URL_SSM"),
        (
            Service::SecretsManager,
            "secretsmanager",
            "AWS_ENDPOINT_URL_SECRETS_MANAGER",
        ),
        (Service::Ecr, "ecr", "AWS_ENDPOINT_URL_ECR"),
    ];
    for (service, signing, variable) in cases {
        assert_eq!(service.signing_name(), signing);
        assert_eq!(service.endpoint_variable(), variable);
    }
}

#[test]
fn only_throttling_failures_and_expired_tokens_are_tried_again() {
    let cases: &[(u16, &str, bool)] = &[
        (500, "InternalServerError", true),
        (503, "ServiceUnavailable", true),
        (502, "", true),
        (429, "", true),
        (400, "ThrottlingException", true),
        (400, "Throttling", true),
        (400, "TooManyRequestsException", true),
        (400, "ExpiredTokenException", true),
        (403, "ExpiredToken", true),
        (400, "RequestExpired", true),
        (400, "InternalFailure", true),
        (403, "AccessDenied", false),
        (400, "AccessDeniedException", false),
        (400, "ResourceNotFoundException", false),
        (400, "ParameterNotFound", false),
        (400, "ValidationException", false),
        (400, "InvalidParameterException", false),
        (400, "RepositoryNotFoundException", false),
        (400, "DecryptionFailure", false),
        (403, "UnrecognizedClientException", false),
        (403, "InvalidSignatureException", false),
        (404, "", false),
    ];
    for (status, code, retry) in cases {
        assert_eq!(
            is_retryable_refusal(*status, code),
            *retry,
            "{status} {code}"
        );
    }
}

#[test]
fn back_off_doubles_up_to_its_bound() {
    let policy = RetryPolicy {
        attempts: 6,
        first_wait: Duration::from_millis(100),
        max_wait: Duration::from_millis(500),
    };
    let waits: Vec<u128> = (1..=6)
        .map(|attempt| policy.wait_after(attempt).as_millis())
        .collect();
    assert_eq!(waits, [100, 200, 400, 500, 500, 500]);
    assert_eq!(
        RetryPolicy::default().wait_after(u32::MAX),
        Duration::from_secs(4)
    );
}

const ASSUME_ROLE_ANSWER: &str = r#"<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleResult>
    <SourceIdentity>Alice</SourceIdentity>
    <AssumedRoleUser>
      <Arn>arn:aws:sts::123456789012:assumed-role/demo/deckhand-0f3c</Arn>
      <AssumedRoleId>ARO123EXAMPLE123:deckhand-0f3c</AssumedRoleId>
    </AssumedRoleUser>
    <Credentials>
      <AccessKeyId>ASIAIOSFODNN7EXAMPLE</AccessKeyId>
      <SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY</SecretAccessKey>
      <SessionToken>AQoDYXdzEPT//////////wEXAMPLEtc764+bNrR=</SessionToken>
      <Expiration>2026-12-05T01:34:41Z</Expiration>
    </Credentials>
    <PackedPolicySize>6</PackedPolicySize>
  </AssumeRoleResult>
  <ResponseMetadata>
    <RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId>
  </ResponseMetadata>
</AssumeRoleResponse>"#;

#[test]
fn an_assume_role_answer_gives_credentials_expiry_and_arn() {
    let role = sts::parse_assume_role_answer(ASSUME_ROLE_ANSWER.as_bytes()).expect("parses");
    assert_eq!(role.credentials.access_key_id, "ASIAIOSFODNN7EXAMPLE");
    assert_eq!(
        role.credentials.secret_access_key,
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"
    );
    assert_eq!(
        role.credentials.session_token.as_deref(),
        Some("AQoDYXdzEPT//////////wEXAMPLEtc764+bNrR=")
    );
    assert_eq!(
        Some(role.expiration_millis),
        crate::task::time::millis_from_rfc3339("2026-12-05T01:34:41Z")
    );
    assert_eq!(
        role.assumed_role_arn.as_deref(),
        Some("arn:aws:sts::123456789012:assumed-role/demo/deckhand-0f3c")
    );
    let debug = format!("{role:?}");
    assert!(
        !debug.contains("wJalr") && !debug.contains("AQoD"),
        "{debug}"
    );
}

#[test]
fn assume_role_answers_that_lack_something_are_errors() {
    let without = |element: &str| {
        let start = ASSUME_ROLE_ANSWER
            .find(&format!("<{element}>"))
            .expect("in");
        let end_tag = format!("</{element}>");
        let end = ASSUME_ROLE_ANSWER.find(&end_tag).expect("in") + end_tag.len();
        format!(
            "{}{}",
            &ASSUME_ROLE_ANSWER[..start],
            &ASSUME_ROLE_ANSWER[end..]
        )
    };
    for element in [
        "AccessKeyId",
        "SecretAccessKey",
        "SessionToken",
        "Expiration",
    ] {
        let error =
            sts::parse_assume_role_answer(without(element).as_bytes()).expect_err("incomplete");
        assert!(error.contains(element), "{element}: {error}");
        assert!(!error.contains("wJalr"), "{error}");
    }
    let bad_time = ASSUME_ROLE_ANSWER.replace("2026-12-05T01:34:41Z", "tomorrow");
    assert!(sts::parse_assume_role_answer(bad_time.as_bytes()).is_err());
    // The ARN is kept when present only.
    let role = sts::parse_assume_role_answer(without("AssumedRoleUser").as_bytes()).expect("ok");
    assert_eq!(role.assumed_role_arn, None);
    for broken in [
        &b""[..],
        b"not xml",
        b"<AssumeRoleResponse><AssumeRoleResult>",
        b"<a></b>",
        b"\xff\xfe",
    ] {
        assert!(sts::parse_assume_role_answer(broken).is_err(), "{broken:?}");
    }
}

#[test]
fn the_xml_reader_resolves_references_cdata_and_prefixes() {
    let body = br#"<?xml version="1.0"?><!-- c --><s:R xmlns:s="urn:x"><s:A>a&amp;b&#x41;&lt;</s:A><B><![CDATA[<raw>]]></B><A>second</A><C/></s:R>"#;
    let [a, b, c, d] = sts::xml_texts(body, &["R/A", "R/B", "R/C", "R/D"]).expect("well-formed");
    assert_eq!(a.as_deref(), Some("a&bA<"));
    assert_eq!(b.as_deref(), Some("<raw>"));
    assert_eq!(c, None, "an empty element has no text read");
    assert_eq!(d, None);
    let deep = "<a>".repeat(40) + &"</a>".repeat(40);
    let error = sts::xml_texts(deep.as_bytes(), &["a"]).expect_err("too deep");
    assert!(error.contains("deeper"), "{error}");
    assert!(sts::xml_texts(b"<a>&bogus;</a>", &["a"]).is_err());
}

#[test]
fn the_xml_reader_refuses_what_sts_never_sends() {
    // (body, the text of `r/a`, or an error).
    type Case = (&'static [u8], Result<Option<&'static str>, ()>);
    let cases: &[Case] = &[
        (b"<r><a>x</a></r>", Ok(Some("x"))),
        (b"  <r>\n <a  >x</a\n></r>\n", Ok(Some("x"))),
        (br#"<r k="1>2" j='3'><a>x</a></r>"#, Ok(Some("x"))),
        (b"<r><a>x<b>y</b>z</a></r>", Ok(None)),
        (b"<r><a>x</a><a>y</a></r>", Ok(Some("x"))),
        (b"<r><a>x</a></r><!-- after --><?pi?>", Ok(Some("x"))),
        (
            b"<r><a>&#65;&#x42;&quot;&apos;&gt;</a></r>",
            Ok(Some("AB\"'>")),
        ),
        (b"<r><a>x</b></r>", Err(())),
        (b"<r><a>x</a>", Err(())),
        (b"<r><a>x</a></r></r>", Err(())),
        (b"<r/><r/>", Err(())),
        (b"text<r/>", Err(())),
        (b"<r/>text", Err(())),
        (
            b"<!DOCTYPE r [<!ENTITY e \"x\">]><r><a>&e;</a></r>",
            Err(()),
        ),
        (b"<r><!-- open <a>x</a></r>", Err(())),
        (b"<r><a><![CDATA[x</a></r>", Err(())),
        (b"<r><a>&#0;</a></r>", Err(())),
        (b"<r><a>&#xD800;</a></r>", Err(())),
        (b"<r><a>&#99999999999;</a></r>", Err(())),
        (b"<r><a>&amp</a></r>", Err(())),
        (b"<r><a k=\">x</a></r>", Err(())),
        (b"<r>< a>x</a></r>", Err(())),
        (b"<r><1a>x</1a></r>", Err(())),
        (b"<r><a>\xff</a></r>", Err(())),
        (b"", Ok(None)),
    ];
    for (body, expected) in cases {
        let read = sts::xml_texts(body, &["r/a"]).map(|[a]| a).map_err(|_| ());
        let expected = expected.map(|text| text.map(str::to_string));
        assert_eq!(read, expected, "{:?}", String::from_utf8_lossy(body));
    }
}

#[test]
fn sts_errors_give_their_code_and_message() {
    let body = br#"<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <Error><Type>Sender</Type><Code>AccessDenied</Code><Message>User: arn:aws:iam::123456789012:user/x is not authorized to perform: sts:AssumeRole</Message></Error>
  <RequestId>4d5e</RequestId></ErrorResponse>"#;
    let (code, message) = sts::parse_error_answer(body).expect("an error");
    assert_eq!(code, "AccessDenied");
    assert!(message.starts_with("User: arn:aws:iam"), "{message}");
    assert_eq!(
        sts::parse_error_answer(b"<Error><Code>Throttling</Code></Error>"),
        Some(("Throttling".to_string(), String::new()))
    );
    assert_eq!(sts::parse_error_answer(b"<html>503</html>"), None);
    assert_eq!(sts::parse_error_answer(b"{}"), None);
}

#[test]
fn the_assume_role_form_is_encoded_and_session_names_are_valid() {
    let form = sts::assume_role_form(&sts::AssumeRoleRequest {
        role_arn: "arn:aws:iam::123456789012:role/app role".into(),
        session_name: sts::session_name("0f3c/9"),
        duration_seconds: Some(900),
    });
    assert_eq!(
        form,
        "Action=AssumeRole&Version=2011-06-15&RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fapp%20role&RoleSessionName=deckhand-0f3c-9&DurationSeconds=900"
    );
    let long = sts::session_name(&"x".repeat(100));
    assert_eq!(long.len(), 64);
    assert!(sts::assume_role_form(&sts::AssumeRoleRequest {
        role_arn: "r".into(),
        session_name: "s1".into(),
        duration_seconds: None,
    })
    .ends_with("DurationSeconds=3600"));
}

#[test]
fn ssm_value_from_names_and_arns() {
    let reference = |asked: &str, name: &str, region: Option<&str>| SsmReference {
        asked: asked.to_string(),
        name: name.to_string(),
        region: region.map(str::to_string),
    };
    let cases: &[(&str, Result<SsmReference, ()>)] = &[
        (
            "db_password",
            Ok(reference("db_password", "db_password", None)),
        ),
        (
            "/prod/db/password",
            Ok(reference("/prod/db/password", "/prod/db/password", None)),
        ),
        ("name:3", Ok(reference("name:3", "name:3", None))),
        (
            "arn:aws:ssm:eu-west-1:123456789012:parameter/db_password",
            Ok(reference(
                "arn:aws:ssm:eu-west-1:123456789012:parameter/db_password",
                "db_password",
                Some("eu-west-1"),
            )),
        ),
        (
            "arn:aws:ssm:us-east-1:123456789012:parameter/prod/db/password",
            Ok(reference(
                "arn:aws:ssm:us-east-1:123456789012:parameter/prod/db/password",
                "/prod/db/password",
                Some("us-east-1"),
            )),
        ),
        (
            "arn:aws-cn:ssm:cn-north-1:123456789012:parameter/x",
            Ok(reference(
                "arn:aws-cn:ssm:cn-north-1:123456789012:parameter/x",
                "x",
                Some("cn-north-1"),
            )),
        ),
        ("", Err(())),
        ("with space", Err(())),
        ("arn:aws:ssm:eu-west-1:123456789012:parameter/", Err(())),
        ("arn:aws:ssm:eu-west-1:123456789012:param/x", Err(())),
        (
            "arn:aws:secretsmanager:eu-west-1:123456789012:parameter/x",
            Err(()),
        ),
        ("arn:aws:ssm::123456789012:parameter/x", Err(())),
        ("arn:aws:ssm:eu-west-1:acct:parameter/x", Err(())),
        ("arn:aws:ssm:eu-west-1:123456789012:parameter//x", Err(())),
        ("arn:aws:ssm:eu-west-1", Err(())),
    ];
    for (text, expected) in cases {
        let parsed = ssm::parse_value_from(text).map_err(|_| ());
        assert_eq!(&parsed, expected, "{text:?}");
    }
    assert!(ssm::parse_value_from(&"a".repeat(2049)).is_err());
}

#[test]
fn get_parameters_answers_are_read_and_matched_to_what_was_asked() {
    let body = br#"{"Parameters":[
        {"Name":"db_password","Type":"SecureString","Value":"s3cret","Version":1,"ARN":"arn:aws:ssm:us-west-2:123456789012:parameter/db_password"},
        {"Name":"/prod/key","Type":"String","Value":"v2","Version":4}],
        "InvalidParameters":["missing"]}"#;
    let answer = ssm::parse_get_parameters_answer(body).expect("parses");
    assert_eq!(answer.invalid, ["missing"]);
    assert_eq!(answer.value_of("db_password"), Some("s3cret"));
    assert_eq!(
        answer.value_of("arn:aws:ssm:us-west-2:123456789012:parameter/db_password"),
        Some("s3cret")
    );
    assert_eq!(
        answer.value_of("arn:aws:ssm:us-west-2:123456789012:parameter/prod/key"),
        Some("v2")
    );
    assert_eq!(answer.value_of("missing"), None);
    let debug = format!("{answer:?}");
    assert!(!debug.contains("s3cret"), "{debug}");
    assert_eq!(
        ssm::parse_get_parameters_answer(b"{}").expect("empty"),
        ssm::SsmParameters::default()
    );
    for bad in [
        &br#"{"Parameters":[{"Name":"x"}]}"#[..],
        br#"{"Parameters":{}}"#,
        b"s3cret",
    ] {
        let error = ssm::parse_get_parameters_answer(bad).expect_err("bad");
        assert!(!error.contains("s3cret"), "{error}");
    }
    assert_eq!(
        ssm::get_parameters_request(&["a".to_string()]),
        serde_json::json!({"Names": ["a"], "WithDecryption": true})
    );
}

#[test]
fn secrets_manager_value_from_as_ecs_reads_it() {
    const ARN: &str = "arn:aws:secretsmanager:us-west-2:123456789012:secret:db-AbCdEf";
    let reference = |key: Option<&str>, stage: Option<&str>, version: Option<&str>| {
        Ok(SecretReference {
            secret_id: ARN.to_string(),
            region: Some("us-west-2".to_string()),
            json_key: key.map(str::to_string),
            version_stage: stage.map(str::to_string),
            version_id: version.map(str::to_string),
        })
    };
    let cases: Vec<(String, Result<SecretReference, ()>)> = vec![
        (ARN.to_string(), reference(None, None, None)),
        (
            format!("{ARN}:password::"),
            reference(Some("password"), None, None),
        ),
        (
            format!("{ARN}:password:AWSPREVIOUS:"),
            reference(Some("password"), Some("AWSPREVIOUS"), None),
        ),
        (
            format!("{ARN}::AWSCURRENT:"),
            reference(None, Some("AWSCURRENT"), None),
        ),
        (
            format!("{ARN}:::0f3c-9a"),
            reference(None, None, Some("0f3c-9a")),
        ),
        (format!("{ARN}::::"), Err(())),
        (
            "db-name".to_string(),
            Ok(SecretReference {
                secret_id: "db-name".to_string(),
                region: None,
                json_key: None,
                version_stage: None,
                version_id: None,
            }),
        ),
        (format!("{ARN}:password"), Err(())),
        (format!("{ARN}:password:stage"), Err(())),
        (format!("{ARN}:a:b:c:d"), Err(())),
        (
            "arn:aws:secretsmanager:us-west-2:123456789012:secret:".to_string(),
            Err(()),
        ),
        (
            "arn:aws:secretsmanager:us-west-2:123456789012:db".to_string(),
            Err(()),
        ),
        (
            "arn:aws:ssm:us-west-2:123456789012:secret:db".to_string(),
            Err(()),
        ),
        (
            "arn:aws:secretsmanager:Bad:123456789012:secret:db".to_string(),
            Err(()),
        ),
        ("".to_string(), Err(())),
        ("a b".to_string(), Err(())),
    ];
    for (text, expected) in cases {
        let parsed = secrets_manager::parse_value_from(&text).map_err(|_| ());
        assert_eq!(parsed, expected, "{text:?}");
    }
    let error = secrets_manager::parse_value_from(&format!("{ARN}:x")).expect_err("2 fields");
    assert!(error.starts_with("an invalid ARN format for the AWS Secrets Manager secret"));
}

#[test]
fn get_secret_value_requests_answers_and_json_keys() {
    let reference = secrets_manager::parse_value_from(
        "arn:aws:secretsmanager:us-west-2:123456789012:secret:db-AbCdEf:password:AWSPREVIOUS:v1",
    )
    .expect("valid");
    assert_eq!(
        secrets_manager::get_secret_value_request(&reference),
        serde_json::json!({
            "SecretId": "arn:aws:secretsmanager:us-west-2:123456789012:secret:db-AbCdEf",
            "VersionStage": "AWSPREVIOUS",
            "VersionId": "v1",
        })
    );
    assert_eq!(
        secrets_manager::parse_get_secret_value_answer(
            br#"{"ARN":"a","Name":"db","SecretString":"{\"password\":\"pw\",\"port\":5432}","VersionId":"v1"}"#
        ),
        Ok(SecretValue::String(r#"{"password":"pw","port":5432}"#.to_string()))
    );
    assert_eq!(
        secrets_manager::parse_get_secret_value_answer(br#"{"SecretBinary":"AAEC"}"#),
        Ok(SecretValue::Binary(vec![0, 1, 2]))
    );
    assert!(secrets_manager::parse_get_secret_value_answer(br#"{"Name":"db"}"#).is_err());
    assert!(secrets_manager::parse_get_secret_value_answer(br#"{"SecretBinary":"*"}"#).is_err());
    let secret = r#"{"password":"pw","port":5432,"on":true}"#;
    assert_eq!(
        secrets_manager::json_key_value(secret, "password").as_deref(),
        Ok("pw")
    );
    assert_eq!(
        secrets_manager::json_key_value(secret, "port").as_deref(),
        Ok("5432")
    );
    assert_eq!(
        secrets_manager::json_key_value(secret, "missing"),
        Err("retrieved secret from Secrets Manager did not contain json key missing".to_string())
    );
    let error = secrets_manager::json_key_value("pw-not-json", "k").expect_err("not JSON");
    assert!(!error.contains("pw-not-json"), "{error}");
    let debug = format!("{:?}", SecretValue::String("pw".into()));
    assert!(!debug.contains("pw"), "{debug}");
}

#[test]
fn ecr_images_are_recognised_by_their_registry_host() {
    let registry = |host: &str, region: &str, fips: bool| {
        Some(EcrRegistry {
            host: host.to_string(),
            account: "123456789012".to_string(),
            region: region.to_string(),
            fips,
        })
    };
    let cases: &[(&str, Option<EcrRegistry>)] = &[
        (
            "123456789012.dkr.ecr.us-west-2.amazonaws.com/app:v1",
            registry(
                "123456789012.dkr.ecr.us-west-2.amazonaws.com",
                "us-west-2",
                false,
            ),
        ),
        (
            "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn/team/app@sha256:abc",
            registry(
                "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn",
                "cn-north-1",
                false,
            ),
        ),
        (
            "123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com/app",
            registry(
                "123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com",
                "us-gov-west-1",
                true,
            ),
        ),
        (
            "123456789012.dkr-ecr.eu-west-1.on.aws/app",
            registry("123456789012.dkr-ecr.eu-west-1.on.aws", "eu-west-1", false),
        ),
        (
            "123456789012.dkr.ecr.us-iso-east-1.c2s.ic.gov/app",
            registry(
                "123456789012.dkr.ecr.us-iso-east-1.c2s.ic.gov",
                "us-iso-east-1",
                false,
            ),
        ),
        ("busybox:latest", None),
        ("library/busybox", None),
        ("123456789012.dkr.ecr.us-west-2.amazonaws.com", None),
        ("12345678901.dkr.ecr.us-west-2.amazonaws.com/app", None),
        (
            "123456789012.dkr.ecr.us-west-2.amazonaws.com.evil.example/app",
            None,
        ),
        // A port is the registry's (Amazon's credential helper reads the host name alone).
        (
            "123456789012.dkr.ecr.us-west-2.amazonaws.com:5443/app",
            registry(
                "123456789012.dkr.ecr.us-west-2.amazonaws.com:5443",
                "us-west-2",
                false,
            ),
        ),
        ("123456789012.dkr.ecr.us-west-2.amazonaws.com:/app", None),
        ("123456789012.dkr.ecr.us-west-2.amazonaws.com:44x/app", None),
        ("123456789012.dkr.ecr..amazonaws.com/app", None),
        ("public.ecr.aws/nginx/nginx:latest", None),
        ("localhost:5000/app", None),
    ];
    for (image, expected) in cases {
        assert_eq!(&ecr::parse_ecr_image(image), expected, "{image}");
    }
}

#[test]
fn ecr_tokens_and_answers_decode() {
    // base64("AWS:pass:word")
    assert_eq!(
        ecr::decode_token("QVdTOnBhc3M6d29yZA=="),
        Ok(("AWS".to_string(), "pass:word".to_string()))
    );
    for bad in ["", "*", "QVdT", "OnBhc3M="] {
        let error = ecr::decode_token(bad).expect_err("bad token");
        assert!(!error.contains(bad) || bad.is_empty(), "{error}");
    }
    let body = br#"{"authorizationData":[{"authorizationToken":"QVdTOnBhc3M6d29yZA==","expiresAt":1.7965E9,"proxyEndpoint":"https://123456789012.dkr.ecr.us-west-2.amazonaws.com"}]}"#;
    let logins = ecr::parse_authorization_answer(body).expect("parses");
    assert_eq!(logins.len(), 1);
    assert_eq!(logins[0].username, "AWS");
    assert_eq!(logins[0].password, "pass:word");
    assert_eq!(logins[0].expires_at_millis, 1_796_500_000_000);
    assert_eq!(
        logins[0].proxy_endpoint.as_deref(),
        Some("https://123456789012.dkr.ecr.us-west-2.amazonaws.com")
    );
    assert!(!format!("{logins:?}").contains("pass:word"));
    assert_eq!(ecr::parse_authorization_answer(b"{}"), Ok(Vec::new()));
    for bad in [
        &br#"{"authorizationData":[{"expiresAt":1}]}"#[..],
        br#"{"authorizationData":[{"authorizationToken":"QVdTOnA=","expiresAt":-1}]}"#,
        br#"{"authorizationData":[{"authorizationToken":"QVdTOnA="}]}"#,
        br#"{"authorizationData":[{"authorizationToken":"QVdTOnA=","expiresAt":"soon"}]}"#,
        b"[]",
    ] {
        assert!(ecr::parse_authorization_answer(bad).is_err(), "{bad:?}");
    }
    assert_eq!(
        ecr::get_authorization_token_request(&[]),
        serde_json::json!({})
    );
    assert_eq!(
        ecr::get_authorization_token_request(&["123456789012".to_string()]),
        serde_json::json!({"registryIds": ["123456789012"]})
    );
}

#[test]
fn the_fuzz_entry_points_take_the_seeds_and_noise() {
    let seeds: [&[u8]; 4] = [
        ASSUME_ROLE_ANSWER.as_bytes(),
        br#"{"Parameters":[{"Name":"a","Value":"b"}]}"#,
        b"arn:aws:secretsmanager:us-west-2:123456789012:secret:db:k::",
        b"\xff<a>&#0;</a>",
    ];
    for seed in seeds {
        crate::fuzzing::aws_answers(seed);
        crate::fuzzing::aws_references(seed);
    }
}

/// Without a fuzzing toolchain: every seed of both corpora, cut at every byte and mutated five
/// hundred ways (deterministically: flips, insertions of the bytes these parsers branch on,
/// deletions, duplicated spans), goes through both entry points without a panic.
#[test]
fn mutated_seeds_never_panic() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let mut seeds = Vec::new();
    for target in ["aws_answers", "aws_references"] {
        for entry in std::fs::read_dir(root.join(target)).expect("the corpus") {
            seeds.push(std::fs::read(entry.expect("an entry").path()).expect("a seed"));
        }
    }
    const SPECIAL: &[u8] = b"<>/&;#:{}[]\",=\\ \x00\xff\xc3x9AaZ-.";
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound.max(1) as u64) as usize
    };
    let run = |bytes: &[u8]| {
        crate::fuzzing::aws_answers(bytes);
        crate::fuzzing::aws_references(bytes);
    };
    for seed in &seeds {
        for cut in 0..=seed.len() {
            run(&seed[..cut]);
        }
        for _ in 0..500 {
            let mut bytes = seed.clone();
            for _ in 0..=next(4) {
                let at = next(bytes.len() + 1);
                match next(4) {
                    0 if at < bytes.len() => bytes[at] ^= 1 << next(8),
                    1 => bytes.insert(at, SPECIAL[next(SPECIAL.len())]),
                    2 if at < bytes.len() => {
                        bytes.remove(at);
                    }
                    _ => {
                        let end = (at + next(16)).min(bytes.len());
                        let span = bytes[at.min(end)..end].to_vec();
                        bytes.splice(at..at, span);
                    }
                }
            }
            run(&bytes);
        }
    }
}
