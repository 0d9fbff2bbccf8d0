//! The credentials endpoint on the task metadata server: `GET /v2/credentials/<credentials id>`
//! (and the older `GET /v1/credentials?id=<credentials id>`), where the AWS SDKs in a container
//! read its task role's credentials (`AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`) and Docker's
//! awslogs driver the execution role's. The answers are the ECS agent's
//! (`ecs-agent/tmds/handlers/v1/credentials_handler.go`, which v2 shares): the credentials as
//! `{"RoleArn","AccessKeyId","SecretAccessKey","Token","Expiration"}`; else
//! `{"code","message","HTTPErrorCode"}` — no id 400 `NoIdInRequest`, an id no task holds 400
//! `InvalidIdInRequest`, an id whose credentials have not arrived (or, while the agent starts,
//! any id) 503 `CredentialsUninitialized`. Pure over the [`CredentialsStore`]; nothing here
//! logs a key, secret or token.

use super::http::{HttpRequest, HttpResponse};
use crate::role_credentials::{CredentialsLookup, CredentialsStore};
use serde_json::json;

/// Which of the two paths a request took: the error messages name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialsVersion {
    V1,
    V2,
}

impl CredentialsVersion {
    fn error_prefix(self) -> &'static str {
        match self {
            CredentialsVersion::V1 => "CredentialsV1Request: ",
            CredentialsVersion::V2 => "CredentialsV2Request: ",
        }
    }
}

/// The credentials id a request asks for, when its path is the credentials endpoint's: `Some`
/// of the version and the id (empty when it names none), `None` for any other path.
pub fn credentials_request(request: &HttpRequest) -> Option<(CredentialsVersion, String)> {
    let segments = request.path_segments();
    match segments.as_slice() {
        [version, credentials] if version == "v1" && credentials == "credentials" => {
            let id = request
                .query_pairs()
                .into_iter()
                .find(|(name, _)| name == "id")
                .map(|(_, value)| value)
                .unwrap_or_default();
            Some((CredentialsVersion::V1, id))
        }
        [version, credentials] if version == "v2" && credentials == "credentials" => {
            Some((CredentialsVersion::V2, String::new()))
        }
        [version, credentials, id] if version == "v2" && credentials == "credentials" => {
            Some((CredentialsVersion::V2, id.clone()))
        }
        _ => None,
    }
}

/// The ECS agent's error answer.
fn credentials_error(status: u16, code: &str, message: String) -> HttpResponse {
    HttpResponse::json(
        status,
        &json!({ "code": code, "message": message, "HTTPErrorCode": status }),
    )
}

/// The answer for credentials id `id`; `starting`: the agent has not restored its tasks yet,
/// so an id it does not know may be a restored task's.
pub fn credentials_answer(
    store: &CredentialsStore,
    version: CredentialsVersion,
    id: &str,
    starting: bool,
) -> HttpResponse {
    let prefix = version.error_prefix();
    if id.is_empty() {
        return credentials_error(
            400,
            "NoIdInRequest",
            format!("{prefix}No Credential ID in the request"),
        );
    }
    let uninitialized = || {
        credentials_error(
            503,
            "CredentialsUninitialized",
            format!("{prefix}Credentials uninitialized for ID"),
        )
    };
    match store.lookup(id) {
        CredentialsLookup::Ready {
            task_arn,
            role,
            credentials,
        } => {
            log::debug!(
                "credentials endpoint: {} credentials of task {task_arn} served",
                role.as_str()
            );
            HttpResponse::json(200, &credentials.endpoint_json())
        }
        CredentialsLookup::Pending => uninitialized(),
        CredentialsLookup::Unknown if starting => uninitialized(),
        CredentialsLookup::Unknown => credentials_error(
            400,
            "InvalidIdInRequest",
            format!("{prefix}Credentials not found"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::role_credentials::{RoleCredentials, RoleType};
    use serde_json::Value;

    fn request(target: &str) -> HttpRequest {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        HttpRequest {
            method: "GET".into(),
            path: path.into(),
            query: query.into(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    #[test]
    fn credentials_paths_are_recognised_and_others_left_alone() {
        let v1 = CredentialsVersion::V1;
        let v2 = CredentialsVersion::V2;
        // (request target, what it asks for)
        let table = [
            ("/v2/credentials/abc-123", Some((v2, "abc-123"))),
            ("/v2/credentials/abc-123/", Some((v2, "abc-123"))),
            ("/v2/credentials/", Some((v2, ""))),
            ("/v2/credentials", Some((v2, ""))),
            ("/v1/credentials?id=abc-123", Some((v1, "abc-123"))),
            ("/v1/credentials?other=1", Some((v1, ""))),
            ("/v1/credentials", Some((v1, ""))),
            ("/v2/credentials/a/b", None),
            ("/v3/credentials/abc", None),
            ("/v4/token", None),
        ];
        for (target, expected) in table {
            let asked = credentials_request(&request(target));
            let asked = asked.as_ref().map(|(version, id)| (*version, id.as_str()));
            assert_eq!(asked, expected, "{target}");
        }
    }

    #[test]
    fn each_state_of_an_id_gets_the_ecs_agents_answer() {
        let store = CredentialsStore::new();
        let task = "arn:aws:ecs:eu-west-1:1:task/c/abc";
        store.expect(task, RoleType::TaskApplication, "pending");
        store
            .set(
                task,
                RoleType::TaskExecution,
                "ready",
                RoleCredentials {
                    access_key_id: "AKIAREADY".into(),
                    secret_access_key: "secret".into(),
                    session_token: "token".into(),
                    expiration: "2026-12-05T03:00:00Z".into(),
                    role_arn: "arn:aws:iam::1:role/exec".into(),
                },
            )
            .expect("set");
        let error = |code: &str, message: &str, status: u16| json!({"code": code, "message": message, "HTTPErrorCode": status});
        let v2 = CredentialsVersion::V2;
        // (version, id, starting, status, body)
        let table = [
            (
                v2,
                "",
                false,
                400,
                error(
                    "NoIdInRequest",
                    "CredentialsV2Request: No Credential ID in the request",
                    400,
                ),
            ),
            (
                v2,
                "unknown",
                false,
                400,
                error(
                    "InvalidIdInRequest",
                    "CredentialsV2Request: Credentials not found",
                    400,
                ),
            ),
            (
                v2,
                "unknown",
                true,
                503,
                error(
                    "CredentialsUninitialized",
                    "CredentialsV2Request: Credentials uninitialized for ID",
                    503,
                ),
            ),
            (
                v2,
                "pending",
                false,
                503,
                error(
                    "CredentialsUninitialized",
                    "CredentialsV2Request: Credentials uninitialized for ID",
                    503,
                ),
            ),
            (
                CredentialsVersion::V1,
                "unknown",
                false,
                400,
                error(
                    "InvalidIdInRequest",
                    "CredentialsV1Request: Credentials not found",
                    400,
                ),
            ),
            (
                v2,
                "ready",
                false,
                200,
                json!({"RoleArn": "arn:aws:iam::1:role/exec", "AccessKeyId": "AKIAREADY",
                "SecretAccessKey": "secret", "Token": "token", "Expiration": "2026-12-05T03:00:00Z"}),
            ),
            (
                v2,
                "ready",
                true,
                200,
                json!({"RoleArn": "arn:aws:iam::1:role/exec", "AccessKeyId": "AKIAREADY",
                "SecretAccessKey": "secret", "Token": "token", "Expiration": "2026-12-05T03:00:00Z"}),
            ),
        ];
        for (version, id, starting, status, body) in table {
            let answer = credentials_answer(&store, version, id, starting);
            assert_eq!(answer.status, status, "{id} {starting}");
            assert_eq!(answer.header("Content-Type"), Some("application/json"));
            let read: Value = serde_json::from_slice(&answer.body).expect("JSON");
            assert_eq!(read, body, "{id} {starting}");
        }
    }
}
