use super::*;
use serde_json::json;

fn task(containers: Value) -> Value {
    json!({"arn": "arn:aws:ecs:us-east-1:1:task/c/abc", "desiredStatus": "RUNNING", "family": "web", "version": "3", "containers": containers})
}

fn web() -> Value {
    json!({"name": "web", "image": "nginx:1", "essential": true, "environment": {"B": "2", "A": "1"}, "cpu": 0, "memory": 128,
           "portMappings": [{"containerPort": 80, "hostPort": 8080, "protocol": "tcp"}],
           "dockerConfig": {"config": "{\"Labels\":{\"team\":\"web\"},\"Healthcheck\":{\"Test\":[\"CMD-SHELL\",\"true\"],\"Interval\":10000000000,\"Retries\":3}}",
                            "hostConfig": "{\"MemoryReservation\":67108864,\"Ulimits\":[{\"Name\":\"nofile\",\"Soft\":1,\"Hard\":2}]}", "version": "1.17"}})
}

#[test]
fn a_payload_task_maps_onto_the_model() {
    let parsed = parse_acs_task(&task(json!([web()]))).expect("maps");
    assert_eq!((parsed.arn.as_str(), parsed.desired_status, parsed.family.as_str(), parsed.version.as_str()), ("arn:aws:ecs:us-east-1:1:task/c/abc", TaskStatus::Running, "web", "3"));
    assert_eq!(parsed.definition.revision, 3);
    let container = &parsed.definition.containers[0];
    assert_eq!(container.environment, vec![("A".to_string(), "1".to_string()), ("B".to_string(), "2".to_string())]);
    assert_eq!((container.memory_mib, container.cpu, container.memory_reservation_mib), (Some(128), None, Some(64)));
    assert_eq!(container.health_check.as_ref().map(|check| (check.interval_secs, check.retries)), Some((10, 3)));
    let overlay = container.docker_config.as_ref().expect("overlay");
    assert_eq!(overlay.config.as_ref().map(|config| config["Labels"]["team"].clone()), Some(json!("web")));
    assert_eq!(overlay.host_config.as_ref().map(|host| host["Ulimits"][0]["Name"].clone()), Some(json!("nofile")));
    assert_eq!(container.port_mappings[0].host_port, Some(8080));
}

#[test]
fn problems_are_reported_with_their_acs_path() {
    // (task, path, message contains)
    let with = |key: &str, value: Value| { let mut container = web(); container[key] = value; task(json!([container])) };
    let table = [
        (json!([]), "$", "expected an object"),
        (json!({"desiredStatus": "RUNNING"}), "arn", "required"),
        (json!({"arn": "a", "desiredStatus": "PENDING", "containers": []}), "desiredStatus", "RUNNING or STOPPED"),
        ({ let mut t = task(json!([web()])); t["version"] = json!("x"); t }, "version", "revision"),
        ({ let mut t = task(json!([web()])); t["elasticNetworkInterfaces"] = json!([{}]); t }, "elasticNetworkInterfaces", "not supported"),
        (with("dockerConfig", json!({"hostConfig": "{not json"})), "containers[0].dockerConfig.hostConfig", "not valid JSON"),
        (with("dockerConfig", json!({"hostConfig": "[1]"})), "containers[0].dockerConfig.hostConfig", "JSON object"),
        (with("dockerConfig", json!({"hostConfig": "{\"Binds\":[\"/:/host\"]}"})), "containers[0].dockerConfig.hostConfig.Binds", "not supported"),
        (with("dockerConfig", json!({"hostConfig": "{\"RestartPolicy\":{\"Name\":\"always\"}}"})), "containers[0].dockerConfig.hostConfig.RestartPolicy", "restarts"),
        ({ let mut t = with("dockerConfig", json!({"hostConfig": "{\"NetworkMode\":\"host\"}"})); t["networkMode"] = json!("bridge"); t }, "containers[0].dockerConfig.hostConfig", "differs"),
        (with("environment", json!({"A": 1})), "containers[0].environment.A", "expected a string"),
        (with("image", json!("")), "containers[0].image", ""),
        (with("healthCheckType", json!("docker")), "", ""),
        (with("environmentFiles", json!([{"value": "s3://x", "type": "s3"}])), "containers[0].environmentFiles", "not supported"),
        (with("overrides", json!("{\"memory\":5}")), "containers[0].overrides.memory", "only replace the command"),
        (with("secrets", json!([{"name": "P", "valueFrom": "arn:x", "target": "LOG_DRIVER"}])), "containers[0].secrets[0].target", "needs a log driver"),
        (with("secrets", json!([{"name": "P", "valueFrom": "arn:x", "target": "VOLUME"}])), "containers[0].secrets[0].target", "not supported"),
        (with("secrets", json!([{"name": "P", "valueFrom": "arn:x", "type": "MOUNT_POINT"}])), "containers[0].secrets[0].type", "not supported"),
        ({ let mut t = task(json!([web()])); t["volumes"] = json!([{"name": "v", "type": "efs"}]); t }, "volumes[0].type", "not supported"),
    ];
    for (input, path, message) in table {
        if path.is_empty() {
            // The network mode matches (bridge, the default), and a docker health check with a Healthcheck is fine.
            assert!(parse_acs_task(&input).is_ok(), "{input}");
            continue;
        }
        let error = parse_acs_task(&input).expect_err(&input.to_string());
        assert_eq!(error.path, path, "{input}: {error}");
        assert!(error.message.contains(message), "{input}: {error}");
    }
}

#[test]
fn errors_name_the_task_and_sit_under_their_payload_index() {
    let mut container = web();
    container["name"] = json!("bad name!");
    let error = parse_acs_task(&task(json!([container]))).expect_err("bad name").within("tasks[2]");
    assert_eq!(error.arn.as_deref(), Some("arn:aws:ecs:us-east-1:1:task/c/abc"));
    assert!(error.path.starts_with("tasks[2].containers[0].name"), "{error}");
    let error = parse_acs_task(&json!(1)).expect_err("not a task").within("tasks[0]");
    assert_eq!((error.path.as_str(), error.arn), ("tasks[0]", None));
}

#[test]
fn acs_defaults_differ_from_the_definitions() {
    // No type: a host volume; no source path: a task-scoped Docker volume. essential absent: false.
    let mut input = task(json!([web(), {"name": "side", "image": "busybox", "mountPoints": [{"sourceVolume": "data", "containerPath": "/d"}], "overrides": "{\"command\":[\"sleep\",\"1\"]}"}]));
    input["volumes"] = json!([{"name": "data", "host": {"sourcePath": ""}}, {"name": "logs", "type": "host", "host": {"sourcePath": "/var/log"}}, {"name": "db", "type": "docker", "dockerVolumeConfiguration": {"scope": "shared", "autoprovision": true}}]);
    input["cpu"] = json!(0.5);
    input["zone"] = json!("us-east-1a");
    let parsed = parse_acs_task(&input).expect("maps");
    assert_eq!(parsed.definition.cpu, Some(512));
    assert!(!parsed.definition.containers[1].essential);
    assert_eq!(parsed.definition.containers[1].command, Some(vec!["sleep".to_string(), "1".to_string()]));
    assert_eq!(parsed.definition.volumes[0].host_source_path, None);
    assert_eq!(parsed.definition.volumes[1].host_source_path.as_deref(), Some("/var/log"));
    assert!(parsed.definition.volumes[2].is_shared());
    assert!(parsed.warnings.iter().any(|warning| warning.starts_with("zone:")), "{:?}", parsed.warnings);
    let host = { let mut t = task(json!([{"name": "a", "image": "busybox", "essential": true, "dockerConfig": {"hostConfig": "{\"NetworkMode\":\"host\"}"}}])); t.as_object_mut().map(|m| m.remove("version")); t };
    let parsed = parse_acs_task(&host).expect("host mode from the host config");
    assert_eq!((parsed.definition.network_mode, parsed.definition.revision), (crate::task::NetworkMode::Host, 0));
}

#[test]
fn hostile_input_is_an_error_never_a_panic() {
    let huge = "x".repeat(MAX_DOCKER_CONFIG_BYTES + 1);
    let inputs = [
        json!(null), json!("task"), json!({"arn": 5}), json!({"arn": "a", "desiredStatus": "RUNNING", "containers": {}}),
        json!({"arn": "a", "desiredStatus": "RUNNING", "containers": [null]}),
        json!({"arn": "a", "desiredStatus": "RUNNING", "cpu": -1, "containers": [web()]}),
        json!({"arn": "a", "desiredStatus": "RUNNING", "containers": [{"name": "a", "image": "b", "dockerConfig": {"config": huge}}]}),
        json!({"arn": "a", "desiredStatus": "RUNNING", "containers": (0..=MAX_ACS_CONTAINERS).map(|_| web()).collect::<Vec<_>>()}),
    ];
    for input in inputs {
        assert!(parse_acs_task(&input).is_err());
    }
}

#[test]
fn a_payload_tasks_role_credentials_are_read_and_their_ids_kept() {
    let mut input = task(json!([web()]));
    input["roleCredentials"] = json!({"credentialsId": "app-id", "accessKeyId": "AKIAAPP", "secretAccessKey": "SECRETAPP", "sessionToken": "TOKENAPP", "expiration": "2026-12-05T03:00:00Z", "roleArn": "arn:aws:iam::1:role/app"});
    input["executionRoleCredentials"] = json!({"credentialsId": "exec-id", "accessKeyId": "AKIAEXEC", "secretAccessKey": "SECRETEXEC", "sessionToken": "TOKENEXEC", "expiration": "2026-12-05T03:00:00Z", "roleArn": "arn:aws:iam::1:role/exec"});
    let parsed = parse_acs_task(&input).expect("maps");
    let app = parsed.credentials.task_role.as_ref().expect("task role");
    assert_eq!((app.credentials_id.as_str(), app.credentials.secret_access_key.as_str()), ("app-id", "SECRETAPP"));
    assert_eq!(parsed.credentials.execution_role.as_ref().map(|c| c.credentials.role_arn.as_str()), Some("arn:aws:iam::1:role/exec"));
    assert_eq!(parsed.credentials.ids(), crate::task::RoleCredentialsIds { task_role: Some("app-id".into()), execution_role: Some("exec-id".into()) });
    assert!(parsed.warnings.iter().all(|warning| !warning.contains("Credentials")), "{:?}", parsed.warnings);
    let shown = format!("{parsed:?}");
    for secret in ["AKIAAPP", "SECRETAPP", "TOKENAPP", "AKIAEXEC", "SECRETEXEC", "TOKENEXEC"] {
        assert!(!shown.contains(secret), "Debug shows {secret}");
    }
    // Empty or null: no credentials, as for every other key.
    for empty in [json!(null), json!({})] {
        let mut input = task(json!([web()]));
        input["roleCredentials"] = empty;
        assert!(parse_acs_task(&input).expect("maps").credentials.ids().is_empty());
    }
    // Without an id they cannot be served: the task is refused, naming the field only.
    let mut input = task(json!([web()]));
    input["executionRoleCredentials"] = json!({"accessKeyId": "AKIAEXEC", "secretAccessKey": "SECRETEXEC"});
    let error = parse_acs_task(&input).expect_err("refused");
    assert_eq!((error.path.as_str(), error.message.as_str()), ("executionRoleCredentials", "credentialsId: required"));
    assert!(!error.to_string().contains("SECRETEXEC"));
}

#[test]
fn a_payloads_secrets_manager_pull_credentials_are_the_containers_repository_credentials() {
    let arn = "arn:aws:secretsmanager:us-east-1:1:secret:hub-AbCdEf";
    // (registryAuthentication, repositoryCredentials read)
    let table = [
        (json!({"type": "asm", "asmAuthData": {"credentialsParameter": arn, "region": "us-east-1"}}), Some(arn)),
        (json!({"type": "ecr", "ecrAuthData": {"region": "us-east-1", "registryId": "1"}}), None),
        (json!({"type": "asm", "asmAuthData": {"credentialsParameter": ""}}), None),
        (json!({"type": "asm"}), None),
        (json!(null), None),
    ];
    for (auth, expected) in table {
        let mut container = web();
        container["registryAuthentication"] = auth.clone();
        let parsed = parse_acs_task(&task(json!([container]))).expect("maps");
        assert_eq!(parsed.definition.containers[0].repository_credentials.as_deref(), expected, "{auth}");
        assert!(parsed.warnings.iter().all(|warning| !warning.contains("registryAuthentication")), "{:?}", parsed.warnings);
    }
}

#[test]
fn a_host_config_log_config_becomes_the_containers_log_configuration() {
    // (hostConfig, (driver, options) expected, what stays in the overlay's hostConfig)
    let table = [
        (json!({"LogConfig": {"Type": "awslogs", "Config": {"awslogs-group": "g", "awslogs-stream": "ecs/web/abc"}}}),
         Some(("awslogs", vec![("awslogs-group", "g"), ("awslogs-stream", "ecs/web/abc")])), None),
        (json!({"LogConfig": {"Type": "json-file"}, "Ulimits": []}), Some(("json-file", vec![])), Some(json!({"Ulimits": []}))),
        (json!({"LogConfig": {"Type": "", "Config": {}}, "ShmSize": 1}), None, Some(json!({"ShmSize": 1}))),
        (json!({"LogConfig": null, "ShmSize": 1}), None, Some(json!({"ShmSize": 1}))),
    ];
    for (host_config, expected, overlay) in table {
        let mut container = web();
        container["dockerConfig"] = json!({"hostConfig": host_config.to_string()});
        let parsed = parse_acs_task(&task(json!([container]))).expect("maps");
        let container = &parsed.definition.containers[0];
        let log = container.log_configuration.as_ref().map(|log| {
            (log.log_driver.as_str(), log.options.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect::<Vec<_>>())
        });
        assert_eq!(log, expected, "{host_config}");
        let host = container.docker_config.as_ref().and_then(|overlay| overlay.host_config.clone());
        assert_eq!(host, overlay, "{host_config}");
    }
    // A LOG_DRIVER secret is an option of the log driver (the definition's secretOptions), the
    // others environment variables, as the ECS agent gives them.
    let mut container = web();
    container["dockerConfig"] = json!({"hostConfig": json!({"LogConfig": {"Type": "splunk", "Config": {"splunk-url": "https://s:8088"}}}).to_string()});
    container["secrets"] = json!([
        {"name": "splunk-token", "valueFrom": "arn:aws:ssm:us-west-2:123456789012:parameter/token", "target": "LOG_DRIVER", "provider": "ssm", "type": "ENVIRONMENT_VARIABLE"},
        {"name": "DB", "valueFrom": "arn:aws:secretsmanager:us-west-2:123456789012:secret:db", "target": "CONTAINER", "provider": "asm"},
    ]);
    let parsed = parse_acs_task(&task(json!([container]))).expect("maps");
    let container = &parsed.definition.containers[0];
    let log = container.log_configuration.as_ref().expect("a log configuration");
    let log_secrets: Vec<_> = log.secret_options.iter().map(|s| (s.name.as_str(), s.value_from.as_str())).collect();
    assert_eq!(log_secrets, [("splunk-token", "arn:aws:ssm:us-west-2:123456789012:parameter/token")]);
    let environment: Vec<_> = container.secrets.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(environment, ["DB"]);
    // A log configuration Docker would not take is refused with its path.
    for (bad, path) in [
        (json!({"LogConfig": []}), "containers[0].dockerConfig.hostConfig.LogConfig"),
        (json!({"LogConfig": {"Type": 1}}), "containers[0].dockerConfig.hostConfig.LogConfig"),
        (json!({"LogConfig": {"Type": "syslog", "Config": {"a": 1}}}), "containers[0].dockerConfig.hostConfig.LogConfig"),
        (json!({"LogConfig": {"Type": "syslog", "Config": "a=1"}}), "containers[0].dockerConfig.hostConfig.LogConfig"),
    ] {
        let mut container = web();
        container["dockerConfig"] = json!({"hostConfig": bad.to_string()});
        let error = parse_acs_task(&task(json!([container]))).expect_err("refused");
        assert!(error.to_string().contains(path), "{bad}: {error}");
    }
}
