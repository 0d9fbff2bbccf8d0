//! `environmentFiles` in the whole agent on real Docker: one file from the local mirror
//! (`DECKHAND_ENVIRONMENT_FILES_DIR`), one from a fake S3 on 127.0.0.1 that checks every
//! request's SigV4 signature (service `s3`) with its own implementation. The container sees the
//! variables merged as ECS merges them (`environment` first, then the first file naming a
//! variable); the mirror's file is never asked of S3; a file S3 does not have stops the task
//! with `ResourceInitializationError` naming its ARN, and no container is created.

#[path = "support/agent.rs"]
mod agent_support;
#[path = "support/docker.rs"]
mod docker_support;
#[path = "support/fake_ecs.rs"]
mod fake_ecs;

use agent_support::{Agent, AgentOptions};
use fake_ecs::{verify_for_service, Credentials};
use serde_json::json;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const REGION: &str = "eu-west-1";

/// One GET the fake S3 answered: its path and whether its signature held.
#[derive(Debug, Clone)]
struct S3Request {
    path: String,
    signature: Result<(), String>,
}

/// A fake S3: objects by path (`/bucket/key`, path-style), every request's signature checked.
struct FakeS3 {
    port: u16,
    requests: Arc<Mutex<Vec<S3Request>>>,
}

impl FakeS3 {
    fn start(objects: BTreeMap<String, String>, credentials: Credentials) -> FakeS3 {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the fake S3");
        let port = listener.local_addr().expect("address").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&requests);
        thread::spawn(move || {
            for connection in listener.incoming() {
                let Ok(connection) = connection else { return };
                let answer = serve(connection, &objects, &credentials);
                if let Some(request) = answer {
                    recorded.lock().expect("lock").push(request);
                }
            }
        });
        FakeS3 { port, requests }
    }

    fn requests(&self) -> Vec<S3Request> {
        self.requests.lock().expect("lock").clone()
    }
}

fn serve(
    mut connection: TcpStream,
    objects: &BTreeMap<String, String>,
    credentials: &Credentials,
) -> Option<S3Request> {
    let mut reader = BufReader::new(connection.try_clone().ok()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line).ok()?;
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs() as i64)
        .unwrap_or(0);
    let signature = verify_for_service(
        "s3",
        now,
        std::slice::from_ref(credentials),
        REGION,
        &method,
        path,
        query,
        &headers,
        b"",
    )
    .map_err(|(kind, message)| format!("{kind}: {message}"));
    let (status, body) = match (&signature, objects.get(path)) {
        (Err(message), _) => ("403 Forbidden", message.clone()),
        (Ok(()), Some(body)) => ("200 OK", body.clone()),
        (Ok(()), None) => (
            "404 Not Found",
            "<Error><Code>NoSuchKey</Code></Error>".into(),
        ),
    };
    let _ = write!(
        connection,
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    Some(S3Request {
        path: path.to_string(),
        signature,
    })
}

fn definition(family: &str, environment_files: &[&str]) -> String {
    let files: Vec<_> = environment_files
        .iter()
        .map(|arn| json!({"value": arn, "type": "s3"}))
        .collect();
    json!({
        "family": family,
        "containerDefinitions": [{
            "name": "app",
            "image": docker_support::TEST_IMAGE,
            "memory": 32,
            "environment": [{"name": "OWN", "value": "from-environment"}],
            "environmentFiles": files,
            "command": ["sh", "-c", "echo \"SHARED=$SHARED FROM_MIRROR=$FROM_MIRROR FROM_S3=$FROM_S3 OWN=$OWN\"; exec sleep 3600"],
        }]
    })
    .to_string()
}

#[test]
fn environment_files_come_from_the_mirror_and_a_signed_s3_get_merged_as_ecs_merges_them() {
    let Some(docker) = docker_support::docker_client_or_skip("environment files") else {
        return;
    };
    let credentials = Credentials::test();
    let s3 = FakeS3::start(
        BTreeMap::from([(
            "/s3-bucket/app/prod.env".to_string(),
            "SHARED=from-s3\nFROM_S3=yes\nOWN=from-s3\n".to_string(),
        )]),
        credentials.clone(),
    );
    let mirror = docker_support::TempDir::new("dh-env-mirror");
    let mirrored = mirror.path.join("mirror-bucket/config/common.env");
    std::fs::create_dir_all(mirrored.parent().expect("parent")).expect("mirror directory");
    std::fs::write(
        &mirrored,
        "# shared settings\nSHARED=from-mirror\nFROM_MIRROR=yes\n",
    )
    .expect("mirror file");
    let agent = Agent::start(
        docker,
        AgentOptions {
            introspection: false,
            extra_env: vec![
                ("AWS_REGION".into(), REGION.into()),
                ("AWS_ACCESS_KEY_ID".into(), credentials.access_key.clone()),
                (
                    "AWS_SECRET_ACCESS_KEY".into(),
                    credentials.secret_key.clone(),
                ),
                (
                    "AWS_SESSION_TOKEN".into(),
                    credentials.session_token.clone().unwrap_or_default(),
                ),
                (
                    "AWS_ENDPOINT_URL_S3".into(),
                    format!("http://127.0.0.1:{}", s3.port),
                ),
                (
                    "DECKHAND_ENVIRONMENT_FILES_DIR".into(),
                    mirror.path.display().to_string(),
                ),
            ],
        },
    );

    let task = agent.submit(&definition(
        "env-files",
        &[
            "arn:aws:s3:::mirror-bucket/config/common.env",
            "arn:aws:s3:::s3-bucket/app/prod.env",
        ],
    ));
    agent.wait_for_task_status(&task, "RUNNING");
    let expected = "SHARED=from-mirror FROM_MIRROR=yes FROM_S3=yes OWN=from-environment";
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let output = agent.cli(&["logs", &task, "app"]);
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        if text.contains(expected) {
            break;
        }
        assert!(Instant::now() < deadline, "the container printed {text:?}");
        thread::sleep(Duration::from_millis(100));
    }
    let requests = s3.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].path, "/s3-bucket/app/prod.env");
    assert_eq!(requests[0].signature, Ok(()), "{requests:?}");

    // A file S3 does not have: the task stops naming it, before any container exists.
    let missing = "arn:aws:s3:::s3-bucket/app/missing.env";
    let task = agent.submit(&definition("env-files-missing", &[missing]));
    let stopped = agent.wait_for_task_status(&task, "STOPPED");
    let reason = stopped.reason.unwrap_or_default();
    assert!(
        reason.contains("ResourceInitializationError") && reason.contains(missing),
        "{reason}"
    );
    let view = agent.inspect(&task);
    let container = &view["Containers"][0];
    assert!(
        container["DockerId"]
            .as_str()
            .unwrap_or_default()
            .is_empty(),
        "{view}"
    );
}
