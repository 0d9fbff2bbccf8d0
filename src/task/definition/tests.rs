//! Tests of task-definition parsing and validation: both input shapes, every key class, every
//! validation rule (one table row each, with the exact path), image references, start order,
//! the shipped examples, and a replay of the saved fuzz corpus.

use super::*;
use crate::task::{ContainerDefinition, Dependency, DependencyCondition, HealthCheck, MountPoint, NetworkMode, PortMapping, Protocol, RestartPolicy, Volume, VolumeFrom};
use crate::task::{DockerVolumeConfiguration, VolumeScope};
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// A small valid definition that the tables mutate.
fn base() -> Value {
    json!({
        "family": "shop",
        "containerDefinitions": [
            {
                "name": "web",
                "image": "deckhand-test/busybox:latest",
                "links": ["db"],
                "portMappings": [{"containerPort": 80, "hostPort": 8080}]
            },
            {
                "name": "db",
                "image": "deckhand-test/busybox:latest",
                "essential": false,
                "healthCheck": {"command": ["CMD-SHELL", "true"]}
            }
        ]
    })
}

fn parse_value(value: &Value) -> Result<ParsedDefinition, Vec<ValidationError>> {
    parse_task_definition(value.to_string().as_bytes())
}

fn errors_of(value: &Value) -> Vec<String> {
    match parse_value(value) {
        Ok(parsed) => panic!("expected errors, parsed {parsed:?}"),
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
    }
}

fn mutated(mutate: impl FnOnce(&mut Value)) -> Value {
    let mut value = base();
    mutate(&mut value);
    value
}

#[test]
fn base_definition_is_valid() {
    let parsed = parse_value(&base()).expect("base is valid");
    assert_eq!(parsed.definition.family, "shop");
    assert_eq!(parsed.definition.revision, 0);
    assert_eq!(parsed.definition.network_mode, NetworkMode::Bridge);
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    let web = &parsed.definition.containers[0];
    assert!(web.essential, "essential defaults to true");
    assert_eq!(web.links, vec!["db".to_string()]);
    assert_eq!(web.port_mappings[0], PortMapping { container_port: 80, host_port: Some(8080), protocol: Protocol::Tcp, container_port_range: None });
    let check = parsed.definition.containers[1].health_check.as_ref().expect("health check");
    assert_eq!(
        (check.interval_secs, check.timeout_secs, check.retries, check.start_period_secs),
        (30, 5, 3, 0),
        "ECS health-check defaults"
    );
}

#[test]
fn every_supported_field_is_parsed() {
    let value = json!({
        "family": "full_family-1",
        "revision": 7,
        "networkMode": "host",
        "cpu": "1 vCPU",
        "memory": "0.5 GB",
        "volumes": [{"name": "data", "host": {"sourcePath": "/srv/data"}}, {"name": "scratch"}],
        "containerDefinitions": [{
            "name": "main",
            "image": "registry.local:5000/team/app:1.2@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "essential": true,
            "command": ["serve", "--port", "80"],
            "entryPoint": ["/bin/app"],
            "environment": [{"name": "MODE", "value": "prod"}, {"name": "EMPTY"}],
            "dependsOn": [{"containerName": "side", "condition": "START"}],
            "volumesFrom": [{"sourceContainer": "side", "readOnly": true}],
            "mountPoints": [{"sourceVolume": "data", "containerPath": "/data", "readOnly": true}],
            "portMappings": [{"containerPort": 80, "protocol": "udp"}],
            "healthCheck": {"command": ["CMD", "true"], "interval": 10, "timeout": 3, "retries": 2, "startPeriod": 15},
            "stopTimeout": 12,
            "startTimeout": 60,
            "memory": 256,
            "memoryReservation": 128,
            "cpu": 512,
            "privileged": true,
            "user": "1000:1000",
            "workingDirectory": "/srv",
            "dockerLabels": {"team": "edge"},
            "logConfiguration": {"logDriver": "json-file", "options": {"max-size": "10m"}},
            "restartPolicy": {"enabled": true, "ignoredExitCodes": [0, 143], "restartAttemptPeriod": 120}
        }, {
            "name": "side",
            "image": "busybox",
            "essential": false
        }]
    });
    let parsed = parse_value(&value).expect("valid");
    let definition = &parsed.definition;
    assert_eq!((definition.revision, definition.network_mode), (7, NetworkMode::Host));
    assert_eq!((definition.cpu, definition.memory_mib), (Some(1024), Some(512)));
    assert_eq!(definition.volumes[0], Volume { host_source_path: Some("/srv/data".into()), ..Volume::new("data") });
    assert_eq!(definition.volumes[1], Volume::new("scratch"));
    let main = &definition.containers[0];
    assert_eq!(main.command.as_deref(), Some(&["serve".to_string(), "--port".into(), "80".into()][..]));
    assert_eq!(main.entry_point.as_deref(), Some(&["/bin/app".to_string()][..]));
    assert_eq!(main.environment, vec![("MODE".into(), "prod".into()), ("EMPTY".into(), String::new())]);
    assert_eq!(main.depends_on, vec![Dependency { container_name: "side".into(), condition: DependencyCondition::Start }]);
    assert_eq!(main.volumes_from, vec![VolumeFrom { source_container: "side".into(), read_only: true }]);
    assert_eq!(main.mount_points, vec![MountPoint { source_volume: "data".into(), container_path: "/data".into(), read_only: true }]);
    assert_eq!(main.port_mappings, vec![PortMapping { container_port: 80, host_port: None, protocol: Protocol::Udp, container_port_range: None }]);
    assert_eq!(
        main.health_check,
        Some(HealthCheck { command: vec!["CMD".into(), "true".into()], interval_secs: 10, timeout_secs: 3, retries: 2, start_period_secs: 15 })
    );
    assert_eq!((main.stop_timeout_secs, main.start_timeout_secs), (Some(12), Some(60)));
    assert_eq!((main.memory_mib, main.memory_reservation_mib, main.cpu), (Some(256), Some(128), Some(512)));
    assert!(main.privileged);
    assert_eq!((main.user.as_deref(), main.working_directory.as_deref()), (Some("1000:1000"), Some("/srv")));
    assert_eq!(main.docker_labels.get("team").map(String::as_str), Some("edge"));
    let log = main.log_configuration.as_ref().expect("log configuration");
    assert_eq!((log.log_driver.as_str(), log.options.get("max-size").map(String::as_str)), ("json-file", Some("10m")));
    assert_eq!(
        main.restart_policy,
        Some(RestartPolicy { enabled: true, ignored_exit_codes: vec![0, 143], restart_attempt_period_secs: 120 })
    );
    assert!(!definition.containers[1].essential);
}

#[test]
fn describe_task_definition_output_is_accepted_with_warnings() {
    let value = json!({
        "taskDefinition": {
            "taskDefinitionArn": "arn:aws:ecs:us-east-1:123456789012:task-definition/shop:3",
            "family": "shop",
            "revision": 3,
            "status": "ACTIVE",
            "executionRoleArn": "arn:aws:iam::123456789012:role/exec",
            "taskRoleArn": "arn:aws:iam::123456789012:role/task",
            "requiresAttributes": [{"name": "com.amazonaws.ecs.capability.docker-remote-api.1.18"}],
            "compatibilities": ["EC2"],
            "requiresCompatibilities": ["EC2"],
            "placementConstraints": [],
            "registeredAt": "2024-01-01T00:00:00Z",
            "registeredBy": "arn:aws:iam::123456789012:user/me",
            "runtimePlatform": {"operatingSystemFamily": "LINUX"},
            "containerDefinitions": [{"name": "web", "image": "busybox:1.36", "versionConsistency": "enabled"}]
        },
        "tags": [{"key": "team", "value": "edge"}]
    });
    let parsed = parse_value(&value).expect("valid");
    assert_eq!((parsed.definition.family.as_str(), parsed.definition.revision), ("shop", 3));
    assert_eq!(parsed.definition.roles.task_role.as_deref(), Some("arn:aws:iam::123456789012:role/task"));
    assert_eq!(parsed.definition.roles.execution_role.as_deref(), Some("arn:aws:iam::123456789012:role/exec"));
    for key in [
        "taskDefinition.taskDefinitionArn", "taskDefinition.status", "taskDefinition.requiresAttributes", "taskDefinition.compatibilities",
        "taskDefinition.requiresCompatibilities", "taskDefinition.placementConstraints", "taskDefinition.registeredAt",
        "taskDefinition.registeredBy", "taskDefinition.runtimePlatform", "tags",
        "taskDefinition.containerDefinitions[0].versionConsistency",
    ] {
        assert!(
            parsed.warnings.iter().any(|warning| warning.starts_with(&format!("{key}: ignored"))),
            "no warning for {key}: {:?}",
            parsed.warnings
        );
    }
}

#[test]
fn describe_output_errors_carry_the_wrapper_path() {
    let value = json!({"taskDefinition": {"family": "x", "containerDefinitions": [{"name": "a", "image": "busybox", "credentialSpecs": ["credentialspec:arn"]}]}});
    assert_eq!(
        errors_of(&value),
        vec!["taskDefinition.containerDefinitions[0].credentialSpecs: not supported by deckhand yet; refusing to run the container differently from what was asked"]
    );
}

#[test]
fn unsupported_keys_are_errors_naming_the_path() {
    let container_keys = [
        ("credentialSpecs", json!(["credentialspec:arn"])),
    ];
    for (key, value) in container_keys {
        let definition = mutated(|d| { d["containerDefinitions"][0][key] = value; });
        let errors = errors_of(&definition);
        assert_eq!(errors.len(), 1, "{key}: {errors:?}");
        assert!(errors[0].starts_with(&format!("containerDefinitions[0].{key}: not supported")), "{errors:?}");
    }
    let task_keys = [
        ("proxyConfiguration", json!({"containerName": "envoy"})),
        ("inferenceAccelerators", json!([{"deviceName": "a", "deviceType": "eia2.medium"}])),
    ];
    for (key, value) in task_keys {
        let definition = mutated(|d| { d[key] = value; });
        let errors = errors_of(&definition);
        assert_eq!(errors.len(), 1, "{key}: {errors:?}");
        assert!(errors[0].starts_with(&format!("{key}: not supported")), "{errors:?}");
    }
    let nested = [
        ("volumes", json!([{"name": "efs", "efsVolumeConfiguration": {"fileSystemId": "fs-1"}}]), "volumes[0].efsVolumeConfiguration"),
        ("volumes", json!([{"name": "fsx", "fsxWindowsFileServerVolumeConfiguration": {"fileSystemId": "fs-1"}}]), "volumes[0].fsxWindowsFileServerVolumeConfiguration"),
    ];
    for (key, value, path) in nested {
        let definition = mutated(|d| { d[key] = value; });
        let errors = errors_of(&definition);
        assert!(errors.iter().any(|e| e.starts_with(&format!("{path}: not supported"))), "{errors:?}");
    }
}

#[test]
fn unsupported_keys_with_empty_values_are_warnings() {
    let definition = mutated(|d| {
        d["containerDefinitions"][0]["secrets"] = json!([]);
        d["containerDefinitions"][0]["environmentFiles"] = json!([]);
        d["containerDefinitions"][0]["firelensConfiguration"] = json!({});
        d["pidMode"] = json!("");
    });
    let parsed = parse_value(&definition).expect("empty unsupported values ask for nothing");
    assert_eq!(
        parsed.warnings,
        vec![
            "pidMode: ignored: empty".to_string(),
        ]
    );
}

#[test]
fn unknown_keys_are_errors_with_suggestions() {
    let definition = mutated(|d| {
        d["containerDefinitions"][1]["esential"] = json!(true);
        d["famliy"] = json!("x");
        d["containerDefinitions"][0]["portMappings"][0]["hostport"] = json!(1);
        d["containerDefinitions"][0]["frobnicate"] = json!(1);
    });
    let errors = errors_of(&definition);
    for expected in [
        "containerDefinitions[1].esential: unknown key (did you mean \"essential\"?)",
        "famliy: unknown key (did you mean \"family\"?)",
        "containerDefinitions[0].portMappings[0].hostport: unknown key (did you mean \"hostPort\"?)",
        "containerDefinitions[0].frobnicate: unknown key",
    ] {
        assert!(errors.contains(&expected.to_string()), "missing {expected:?} in {errors:?}");
    }
}

type Mutation = Box<dyn Fn(&mut Value)>;

/// (case, mutation, expected error line). Each row proves one validation rule with its path.
type ValidationCase = (&'static str, Box<dyn Fn(&mut Value)>, &'static str);

fn set_at(pointer: &'static str, value: Value) -> Box<dyn Fn(&mut Value)> {
    Box::new(move |d: &mut Value| {
        *d.pointer_mut(pointer).unwrap_or_else(|| panic!("{pointer} exists in the base")) = value.clone();
    })
}

fn insert(pointer: &'static str, key: &'static str, value: Value) -> Box<dyn Fn(&mut Value)> {
    Box::new(move |d: &mut Value| {
        d.pointer_mut(pointer).unwrap_or_else(|| panic!("{pointer} exists in the base"))[key] = value.clone();
    })
}

fn remove(pointer: &'static str, key: &'static str) -> Box<dyn Fn(&mut Value)> {
    Box::new(move |d: &mut Value| {
        if let Some(Value::Object(map)) = d.pointer_mut(pointer) {
            map.remove(key);
        }
    })
}

#[test]
fn validation_rules_one_row_each() {
    let c0 = "/containerDefinitions/0";
    let c1 = "/containerDefinitions/1";
    let cases: Vec<ValidationCase> = vec![
        ("invalid JSON", Box::new(|d| *d = Value::String("{".into())), "$: expected an object, found a string"),
        ("not an object", set_at("", json!([1])), "$: expected an object, found an array"),
        ("family missing", remove("", "family"), "family: required"),
        ("family empty", insert("", "family", json!("")), "family: family must not be empty"),
        ("family bad chars", insert("", "family", json!("my shop")), "family: family \"my shop\" may contain only letters, digits, hyphens and underscores"),
        ("family not a string", insert("", "family", json!(5)), "family: expected a string, found a number"),
        ("revision zero", insert("", "revision", json!(0)), "revision: 0 is too small: at least 1"),
        ("revision negative", insert("", "revision", json!(-1)), "revision: expected a whole number ≥ 1, found -1"),
        ("unknown network mode", insert("", "networkMode", json!("nat")), "networkMode: unknown network mode \"nat\": expected bridge, host, awsvpc or none"),
        ("task cpu nonsense", insert("", "cpu", json!("lots")), "cpu: expected a whole number or a string such as \"1024\" or \"1 vCPU\", found \"lots\""),
        ("task memory zero", insert("", "memory", json!(0)), "memory: expected a whole number or a string such as \"1024\" or \"1 GB\", found 0"),
        ("containers missing", remove("", "containerDefinitions"), "containerDefinitions: required"),
        ("containers empty", insert("", "containerDefinitions", json!([])), "containerDefinitions: at least one container is required"),
        ("container not an object", set_at(c1, json!("db")), "containerDefinitions[1]: expected an object, found a string"),
        ("name missing", remove(c1, "name"), "containerDefinitions[1].name: required"),
        ("name invalid for Docker", insert(c1, "name", json!("my db")), "containerDefinitions[1].name: \"my db\" is not a valid container name (a letter or digit, then letters, digits, '_', '.' or '-')"),
        ("name starts with dash", insert(c1, "name", json!("-db")), "containerDefinitions[1].name: \"-db\" is not a valid container name (a letter or digit, then letters, digits, '_', '.' or '-')"),
        ("duplicate names", insert(c1, "name", json!("web")), "containerDefinitions[1].name: duplicate container name \"web\" (also containerDefinitions[0])"),
        ("image missing", remove(c1, "image"), "containerDefinitions[1].image: required"),
        ("image empty", insert(c1, "image", json!("")), "containerDefinitions[1].image: image must not be empty"),
        ("image uppercase", insert(c1, "image", json!("Busybox")), "containerDefinitions[1].image: \"Busybox\" is not a valid image reference: repository names must be lowercase"),
        ("image bad tag", insert(c1, "image", json!("busybox:-x")), "containerDefinitions[1].image: \"busybox:-x\" is not a valid image reference: a tag is 1–128 letters, digits, '_', '.' or '-', not starting with '.' or '-'"),
        ("essential not a bool", insert(c1, "essential", json!("yes")), "containerDefinitions[1].essential: expected true or false, found a string"),
        ("no essential container", insert(c0, "essential", json!(false)), "containerDefinitions: at least one container must be essential"),
        ("command not strings", insert(c1, "command", json!(["sh", 1])), "containerDefinitions[1].command[1]: expected a string, found a number"),
        ("dependsOn unknown container", insert(c1, "dependsOn", json!([{"containerName": "cache", "condition": "START"}])), "containerDefinitions[1].dependsOn[0].containerName: no container named \"cache\""),
        ("dependsOn unknown condition", insert(c1, "dependsOn", json!([{"containerName": "web", "condition": "READY"}])), "containerDefinitions[1].dependsOn[0].condition: unknown condition \"READY\": expected START, COMPLETE, SUCCESS or HEALTHY"),
        ("dependsOn condition missing", insert(c1, "dependsOn", json!([{"containerName": "web"}])), "containerDefinitions[1].dependsOn[0].condition: required"),
        ("HEALTHY without healthCheck", insert(c1, "dependsOn", json!([{"containerName": "web", "condition": "HEALTHY"}])), "containerDefinitions[1].dependsOn[0].condition: HEALTHY needs container \"web\" to have a healthCheck"),
        ("HEALTHY on a NONE healthCheck", Box::new(|d| {
            d["containerDefinitions"][1]["healthCheck"] = json!({"command": ["NONE"]});
            d["containerDefinitions"][0]["dependsOn"] = json!([{"containerName": "db", "condition": "HEALTHY"}]);
        }), "containerDefinitions[0].dependsOn[0].condition: HEALTHY needs container \"db\" to have a healthCheck"),
        ("link unknown container", insert(c0, "links", json!(["cache"])), "containerDefinitions[0].links[0]: no container named \"cache\""),
        ("link with two colons", insert(c0, "links", json!(["db:a:b"])), "containerDefinitions[0].links[0]: \"db:a:b\" has more than one ':' (expected name[:alias])"),
        ("link empty alias", insert(c0, "links", json!(["db:"])), "containerDefinitions[0].links[0]: \"db:\" is not of the form name[:alias]"),
        ("links in host mode", Box::new(|d| {
            d["networkMode"] = json!("host");
            d["containerDefinitions"][0]["portMappings"] = json!([]);
        }), "containerDefinitions[0].links: links need networkMode bridge (this task uses host)"),
        ("volumesFrom unknown container", insert(c1, "volumesFrom", json!([{"sourceContainer": "cache"}])), "containerDefinitions[1].volumesFrom[0].sourceContainer: no container named \"cache\""),
        ("cycle through dependsOn and links", insert(c1, "dependsOn", json!([{"containerName": "web", "condition": "START"}])), "containerDefinitions[0]: dependency cycle: \"web\" -> \"db\" -> \"web\" (through dependsOn, links and volumesFrom)"),
        ("cycle through volumesFrom", insert(c1, "volumesFrom", json!([{"sourceContainer": "web"}])), "containerDefinitions[0]: dependency cycle: \"web\" -> \"db\" -> \"web\" (through dependsOn, links and volumesFrom)"),
        ("self dependency", insert(c1, "dependsOn", json!([{"containerName": "db", "condition": "START"}])), "containerDefinitions[1]: dependency cycle: \"db\" -> \"db\" (through dependsOn, links and volumesFrom)"),
        ("health interval low", insert("/containerDefinitions/1/healthCheck", "interval", json!(4)), "containerDefinitions[1].healthCheck.interval: 4 is out of range 5–300"),
        ("health interval high", insert("/containerDefinitions/1/healthCheck", "interval", json!(301)), "containerDefinitions[1].healthCheck.interval: 301 is out of range 5–300"),
        ("health timeout low", insert("/containerDefinitions/1/healthCheck", "timeout", json!(1)), "containerDefinitions[1].healthCheck.timeout: 1 is out of range 2–60"),
        ("health timeout high", insert("/containerDefinitions/1/healthCheck", "timeout", json!(61)), "containerDefinitions[1].healthCheck.timeout: 61 is out of range 2–60"),
        ("health retries low", insert("/containerDefinitions/1/healthCheck", "retries", json!(0)), "containerDefinitions[1].healthCheck.retries: 0 is out of range 1–10"),
        ("health retries high", insert("/containerDefinitions/1/healthCheck", "retries", json!(11)), "containerDefinitions[1].healthCheck.retries: 11 is out of range 1–10"),
        ("health startPeriod high", insert("/containerDefinitions/1/healthCheck", "startPeriod", json!(301)), "containerDefinitions[1].healthCheck.startPeriod: 301 is out of range 0–300"),
        ("health interval fractional", insert("/containerDefinitions/1/healthCheck", "interval", json!(5.5)), "containerDefinitions[1].healthCheck.interval: expected a whole number in 5–300, found 5.5"),
        ("health command missing", remove("/containerDefinitions/1/healthCheck", "command"), "containerDefinitions[1].healthCheck.command: required"),
        ("health command bare", insert("/containerDefinitions/1/healthCheck", "command", json!(["true"])), "containerDefinitions[1].healthCheck.command: must start with \"CMD\", \"CMD-SHELL\" or \"NONE\""),
        ("health command CMD alone", insert("/containerDefinitions/1/healthCheck", "command", json!(["CMD"])), "containerDefinitions[1].healthCheck.command: \"CMD\" needs the command to run after it"),
        ("host port clash in bridge", insert(c1, "portMappings", json!([{"containerPort": 81, "hostPort": 8080}])), "containerDefinitions[1].portMappings[0]: host port 8080/tcp is already used by containerDefinitions[0].portMappings[0]"),
        ("host port clash in one container", insert(c0, "portMappings", json!([{"containerPort": 80, "hostPort": 9000}, {"containerPort": 81, "hostPort": 9000}])), "containerDefinitions[0].portMappings[1]: host port 9000/tcp is already used by containerDefinitions[0].portMappings[0]"),
        ("host port clash in host mode", Box::new(|d| {
            d["networkMode"] = json!("host");
            d["containerDefinitions"][0]["links"] = json!([]);
            d["containerDefinitions"][0]["portMappings"] = json!([{"containerPort": 8080}]);
            d["containerDefinitions"][1]["portMappings"] = json!([{"containerPort": 8080, "hostPort": 8080}]);
        }), "containerDefinitions[1].portMappings[0]: host port 8080/tcp is already used by containerDefinitions[0].portMappings[0]"),
        ("host mode hostPort differs", Box::new(|d| {
            d["networkMode"] = json!("host");
            d["containerDefinitions"][0]["links"] = json!([]);
        }), "containerDefinitions[0].portMappings[0].hostPort: with networkMode host, hostPort (8080) must equal containerPort (80)"),
        ("port mappings with none", Box::new(|d| {
            d["networkMode"] = json!("none");
            d["containerDefinitions"][0]["links"] = json!([]);
        }), "containerDefinitions[0].portMappings[0]: port mappings need networkMode bridge, host or awsvpc (this task uses none)"),
        ("awsvpc hostPort differs", Box::new(|d| {
            d["networkMode"] = json!("awsvpc");
            d["containerDefinitions"][0]["links"] = json!([]);
        }), "containerDefinitions[0].portMappings[0].hostPort: with networkMode awsvpc, hostPort (8080) must equal containerPort (80)"),
        ("awsvpc links", Box::new(|d| {
            d["networkMode"] = json!("awsvpc");
            d["containerDefinitions"][0]["portMappings"] = json!([{"containerPort": 80}]);
        }), "containerDefinitions[0].links: links need networkMode bridge (this task uses awsvpc)"),
        ("awsvpc hostname", Box::new(|d| {
            d["networkMode"] = json!("awsvpc");
            d["containerDefinitions"][0]["links"] = json!([]);
            d["containerDefinitions"][0]["portMappings"] = json!([{"containerPort": 80, "hostPort": 80}]);
            d["containerDefinitions"][1]["hostname"] = json!("db");
        }), "containerDefinitions[1].hostname: not supported for tasks that use the awsvpc network mode: the task's containers share one network namespace"),
        ("awsvpc same port twice", Box::new(|d| {
            d["networkMode"] = json!("awsvpc");
            d["containerDefinitions"][0]["links"] = json!([]);
            d["containerDefinitions"][0]["portMappings"] = json!([{"containerPort": 80}]);
            d["containerDefinitions"][1]["portMappings"] = json!([{"containerPort": 80}]);
        }), "containerDefinitions[1].portMappings[0]: host port 80/tcp is already used by containerDefinitions[0].portMappings[0]"),
        ("containerPort zero", insert("/containerDefinitions/0/portMappings/0", "containerPort", json!(0)), "containerDefinitions[0].portMappings[0].containerPort: 0 is out of range 1–65535"),
        ("containerPort missing", remove("/containerDefinitions/0/portMappings/0", "containerPort"), "containerDefinitions[0].portMappings[0].containerPort: required"),
        ("hostPort too big", insert("/containerDefinitions/0/portMappings/0", "hostPort", json!(70000)), "containerDefinitions[0].portMappings[0].hostPort: 70000 is out of range 0–65535"),
        ("protocol unknown", insert("/containerDefinitions/0/portMappings/0", "protocol", json!("sctp")), "containerDefinitions[0].portMappings[0].protocol: unknown protocol \"sctp\": expected tcp or udp"),
        ("mountPoints unknown volume", insert(c1, "mountPoints", json!([{"sourceVolume": "data", "containerPath": "/data"}])), "containerDefinitions[1].mountPoints[0].sourceVolume: no volume named \"data\" in volumes"),
        ("mountPoints relative path", Box::new(|d| {
            d["volumes"] = json!([{"name": "data"}]);
            d["containerDefinitions"][1]["mountPoints"] = json!([{"sourceVolume": "data", "containerPath": "data"}]);
        }), "containerDefinitions[1].mountPoints[0].containerPath: \"data\" must be an absolute path"),
        ("volume host path relative", insert("", "volumes", json!([{"name": "data", "host": {"sourcePath": "srv"}}])), "volumes[0].host.sourcePath: \"srv\" must be an absolute path"),
        ("duplicate volume", insert("", "volumes", json!([{"name": "data"}, {"name": "data"}])), "volumes[1].name: duplicate volume name \"data\""),
        ("restart period low", insert(c1, "restartPolicy", json!({"enabled": true, "restartAttemptPeriod": 59})), "containerDefinitions[1].restartPolicy.restartAttemptPeriod: 59 is out of range 60–1800"),
        ("restart period high", insert(c1, "restartPolicy", json!({"enabled": true, "restartAttemptPeriod": 1801})), "containerDefinitions[1].restartPolicy.restartAttemptPeriod: 1801 is out of range 60–1800"),
        ("restart too many codes", insert(c1, "restartPolicy", json!({"enabled": true, "ignoredExitCodes": (0..51).collect::<Vec<i64>>()})), "containerDefinitions[1].restartPolicy.ignoredExitCodes: 51 exit codes given, at most 50 are allowed"),
        ("restart enabled missing", insert(c1, "restartPolicy", json!({"restartAttemptPeriod": 60})), "containerDefinitions[1].restartPolicy.enabled: required"),
        ("memory below Docker's minimum", insert(c1, "memory", json!(4)), "containerDefinitions[1].memory: 4 is too small: at least 6"),
        ("reservation above limit", Box::new(|d| {
            d["containerDefinitions"][1]["memory"] = json!(64);
            d["containerDefinitions"][1]["memoryReservation"] = json!(128);
        }), "containerDefinitions[1].memoryReservation: 128 MiB is more than the memory limit of 64 MiB"),
        ("workingDirectory relative", insert(c1, "workingDirectory", json!("srv")), "containerDefinitions[1].workingDirectory: \"srv\" must be an absolute path"),
        ("environment name with =", insert(c1, "environment", json!([{"name": "A=B", "value": "1"}])), "containerDefinitions[1].environment[0].name: \"A=B\" is not a valid environment variable name"),
        ("environment value not a string", insert(c1, "environment", json!([{"name": "A", "value": 1}])), "containerDefinitions[1].environment[0].value: expected a string, found a number"),
        ("dockerLabels value not a string", insert(c1, "dockerLabels", json!({"a": 1})), "containerDefinitions[1].dockerLabels.a: expected a string, found a number"),
        ("logDriver missing", insert(c1, "logConfiguration", json!({"options": {}})), "containerDefinitions[1].logConfiguration.logDriver: required"),
        ("log secretOptions twice", insert(c1, "logConfiguration", json!({"logDriver": "splunk", "options": {"splunk-token": "x"}, "secretOptions": [{"name": "splunk-token", "valueFrom": "b"}]})), "containerDefinitions[1].logConfiguration.secretOptions: \"splunk-token\" is both an option and a secret option; give it once"),
        ("stopTimeout negative", insert(c1, "stopTimeout", json!(-5)), "containerDefinitions[1].stopTimeout: expected a whole number ≥ 0, found -5"),
    ];
    let count = cases.len();
    for (name, mutate, expected) in cases {
        let mut definition = base();
        mutate(&mut definition);
        let errors = match parse_value(&definition) {
            Ok(parsed) => panic!("{name}: expected {expected:?}, parsed {parsed:?}"),
            Err(errors) => errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        };
        assert!(errors.iter().any(|error| error == expected), "{name}: expected {expected:?} in {errors:?}");
    }
    assert!(count >= 70, "the table lost rows: {count}");
}

#[test]
fn syntax_errors_are_reported_at_the_document() {
    let errors = parse_task_definition(b"{\"family\": ").expect_err("truncated JSON");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].path, "$");
    assert!(errors[0].message.starts_with("not valid JSON: EOF while parsing"), "{}", errors[0]);
}

#[test]
fn all_errors_are_reported_at_once() {
    let definition = json!({
        "family": "shop",
        "networkMode": "nat",
        "containerDefinitions": [
            {"name": "web", "image": "", "essential": false},
            {"name": "web", "image": "busybox", "essential": false,
             "dependsOn": [{"containerName": "db", "condition": "START"}],
             "links": ["a:b:c"]}
        ]
    });
    let errors = errors_of(&definition);
    assert_eq!(
        errors,
        vec![
            "networkMode: unknown network mode \"nat\": expected bridge, host, awsvpc or none",
            "containerDefinitions[0].image: image must not be empty",
            "containerDefinitions[1].name: duplicate container name \"web\" (also containerDefinitions[0])",
            "containerDefinitions: at least one container must be essential",
            "containerDefinitions[1].dependsOn[0].containerName: no container named \"db\"",
            "containerDefinitions[1].links[0]: \"a:b:c\" has more than one ':' (expected name[:alias])",
        ]
    );
}

#[test]
fn task_sizes_accept_strings_and_numbers() {
    let cases = [
        (json!(256), json!(512), Some(256), Some(512)),
        (json!("256"), json!("512"), Some(256), Some(512)),
        (json!("0.25 vCPU"), json!("1 GB"), Some(256), Some(1024)),
        (json!("2 vcpu"), json!("2GB"), Some(2048), Some(2048)),
    ];
    for (cpu, memory, expected_cpu, expected_memory) in cases {
        let definition = mutated(|d| {
            d["cpu"] = cpu.clone();
            d["memory"] = memory.clone();
        });
        let parsed = parse_value(&definition).expect("valid sizes");
        assert_eq!((parsed.definition.cpu, parsed.definition.memory_mib), (expected_cpu, expected_memory), "{cpu} {memory}");
    }
}

#[test]
fn owned_labels_are_warned_about() {
    let definition = mutated(|d| {
        d["containerDefinitions"][0]["dockerLabels"] = json!({"com.amazonaws.ecs.cluster": "mine"});
    });
    let parsed = parse_value(&definition).expect("valid");
    assert_eq!(
        parsed.warnings,
        vec!["containerDefinitions[0].dockerLabels.com.amazonaws.ecs.cluster: overridden: deckhand sets this label itself"]
    );
}

#[test]
fn image_references_table() {
    let valid = [
        "busybox",
        "busybox:1.36",
        "deckhand-test/busybox:latest",
        "library/busy_box",
        "my__repo/a-b--c.d",
        "localhost/app",
        "localhost:5000/app:v1",
        "registry.example.com/team/app",
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/app:Tag_1.0",
        "Registry.Example.com/app",
        "busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "busybox:1@sha256:0123456789abcdef0123456789abcdef",
    ];
    for reference in valid {
        assert_eq!(check_image_reference(reference), Ok(()), "{reference}");
    }
    let invalid = [
        "",
        "Busybox",
        "busybox:",
        ":latest",
        "busybox:.x",
        "busy box",
        "/busybox",
        "busybox/",
        "a//b",
        "busy...box",
        "-busybox",
        "busybox___x",
        "busybox@sha256:abc",
        "busybox@:0123456789abcdef0123456789abcdef",
        "host:port/app",
        "registry.example.com:/app",
        "reg_istry.example.com/app",
    ];
    for reference in invalid {
        assert!(check_image_reference(reference).is_err(), "{reference:?} accepted");
    }
}

#[test]
fn container_names_table() {
    for name in ["web", "Web-1", "a", "a.b_c-d", "1st"] {
        assert_eq!(check_container_name(name), Ok(()), "{name}");
    }
    let too_long = "a".repeat(256);
    for name in ["", "-a", "_a", "a b", "a/b", "ä", too_long.as_str()] {
        assert!(check_container_name(name).is_err(), "{name:?} accepted");
    }
}

#[test]
fn start_order_puts_dependencies_first_and_is_stable() {
    let definition = json!({
        "family": "order",
        "containerDefinitions": [
            {"name": "app", "image": "busybox", "links": ["db"],
             "dependsOn": [{"containerName": "init", "condition": "SUCCESS"}]},
            {"name": "sidecar", "image": "busybox", "essential": false},
            {"name": "db", "image": "busybox", "volumesFrom": [{"sourceContainer": "data"}]},
            {"name": "data", "image": "busybox", "essential": false},
            {"name": "init", "image": "busybox", "essential": false}
        ]
    });
    let parsed = parse_value(&definition).expect("valid");
    assert_eq!(start_order(&parsed.definition), vec!["sidecar", "data", "db", "init", "app"]);
    assert_eq!(shutdown_order(&parsed.definition), vec!["app", "init", "db", "data", "sidecar"]);
}

#[test]
fn start_order_of_a_cyclic_definition_lists_every_container() {
    // validation rejects it, but start_order still names every container once.
    let mut parsed = parse_value(&base()).expect("valid").definition;
    parsed.containers[1].links.push("web".into());
    assert_eq!(start_order(&parsed), vec!["web", "db"]);
}

#[test]
fn every_example_in_the_repository_validates() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = Vec::new();
    for directory in ["examples", "packaging/examples"] {
        let Ok(entries) = std::fs::read_dir(root.join(directory)) else { continue };
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let input = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if let Err(errors) = parse_task_definition(&input) {
                panic!("{}: {:?}", path.display(), errors.iter().map(ToString::to_string).collect::<Vec<_>>());
            }
            checked.push(path);
        }
    }
    assert!(checked.len() >= 2, "examples not found: {checked:?}");
}

#[test]
fn shipped_examples_are_valid() {
    let web = parse_task_definition(include_bytes!("../../../examples/web.json")).expect("examples/web.json");
    assert_eq!(web.definition.containers[0].port_mappings[0].host_port, Some(8080));
    assert_eq!(web.definition.containers[0].image, "deckhand/busybox:latest");
    let three = parse_task_definition(include_bytes!("../../../examples/three-tier.json")).expect("examples/three-tier.json");
    assert_eq!(start_order(&three.definition), vec!["init", "db", "app"]);
    let app = &three.definition.containers[2];
    assert!(app.depends_on.contains(&Dependency { container_name: "db".into(), condition: DependencyCondition::Healthy }));
    assert!(app.depends_on.contains(&Dependency { container_name: "init".into(), condition: DependencyCondition::Success }));
}

/// Every input the fuzzer ever saved (including crashes found and fixed) parses without a panic,
/// and valid ones agree with their own start order.
#[test]
fn fuzz_corpus_replays_without_panics() {
    let directory = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/parse");
    let entries = std::fs::read_dir(&directory).unwrap_or_else(|e| panic!("{}: {e}", directory.display()));
    let mut replayed = 0;
    for entry in entries {
        let path = entry.expect("directory entry").path();
        let input = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if let Ok(parsed) = parse_task_definition(&input) {
            assert_eq!(start_order(&parsed.definition).len(), parsed.definition.containers.len(), "{}", path.display());
            assert_firelens_renders(parsed.definition, &String::from_utf8_lossy(&input));
        }
        replayed += 1;
    }
    assert!(replayed >= 10, "the corpus at {} has only {replayed} inputs", directory.display());
}

/// What the parser accepts, a FireLens router's configuration can be generated for: the
/// parser's promise to the router's create.
fn assert_firelens_renders(definition: crate::task::TaskDefinition, input: &str) {
    let task = crate::task::Task::new("0".repeat(32), "fuzz", definition, 1, 0);
    if let Err(error) = crate::task::firelens::render::render_config(&task, "fuzz") {
        panic!("accepted but its FireLens configuration fails ({error}): {input}");
    }
}

/// A small deterministic PRNG (xorshift64*), so the mutation test is reproducible.
struct Xorshift(u64);

impl Xorshift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound.max(1) as u64) as usize
    }
}

/// Tokens that steer mutations towards interesting JSON rather than random bytes.
const MUTATION_TOKENS: &[&str] = &[
    "null", "true", "false", "0", "-1", "65536", "1e999", "4294967296", "\"\"", "[]", "{}", ",", ":",
    "\"a:b:c\"", "\"HEALTHY\"", "\"awsvpc\"", "\"host\"", "\"none\"", "\"0.5 vCPU\"", "\"1 GB\"",
    "\"containerDefinitions\"", "\"dependsOn\"", "\"links\"", "\"volumesFrom\"", "\"portMappings\"",
    "\"healthCheck\"", "\"restartPolicy\"", "\"taskDefinition\"", "\"secrets\"", "\"\\u0000\"", "\"é\"",
    "\"awsfirelens\"", "\"firelensConfiguration\"", "\"fluentd\"", "\"config-file-type\"", "\"s3\"", "\"Name\"",
];

/// Seeded mutation of the saved corpus: every mutant parses without a panic and, when valid,
/// yields a start order naming each container once. Runs in CI, where cargo-fuzz does not.
#[test]
fn seeded_mutations_of_the_corpus_never_panic() {
    let directory = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/parse");
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(&directory)
        .unwrap_or_else(|e| panic!("{}: {e}", directory.display()))
        .map(|entry| std::fs::read(entry.expect("directory entry").path()).expect("read seed"))
        .filter(|seed| seed.len() <= 16 * 1024)
        .collect();
    seeds.sort();
    assert!(!seeds.is_empty());
    let inputs = std::env::var("DECKHAND_MUTATION_INPUTS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let mut random = Xorshift(0x5EED_DEC0_0000_0001);
    let (mut accepted, mut rejected) = (0u64, 0u64);
    for _ in 0..inputs {
        let mut input = seeds[random.below(seeds.len())].clone();
        for _ in 0..=random.below(4) {
            let at = random.below(input.len() + 1);
            match random.below(6) {
                0 if !input.is_empty() => {
                    let at = at.min(input.len() - 1);
                    input[at] ^= 1 << random.below(8);
                }
                1 if at < input.len() => {
                    let end = (at + 1 + random.below(16)).min(input.len());
                    input.drain(at..end);
                }
                2 => {
                    let token = MUTATION_TOKENS[random.below(MUTATION_TOKENS.len())];
                    input.splice(at..at, token.bytes());
                }
                3 if at < input.len() => {
                    // Replace a value-sized run with a token.
                    let end = (at + 1 + random.below(12)).min(input.len());
                    let token = MUTATION_TOKENS[random.below(MUTATION_TOKENS.len())];
                    input.splice(at..end, token.bytes());
                }
                4 => {
                    // Splice in a slice of another seed.
                    let other = &seeds[random.below(seeds.len())];
                    let from = random.below(other.len());
                    let to = (from + random.below(64)).min(other.len());
                    input.splice(at..at, other[from..to].iter().copied());
                }
                _ => {
                    let byte = b"{}[]\",:0a \\"[random.below(11)];
                    input.insert(at, byte);
                }
            }
        }
        match parse_task_definition(&input) {
            Ok(parsed) => {
                let order = start_order(&parsed.definition);
                let unique: BTreeSet<&String> = order.iter().collect();
                assert_eq!(unique.len(), parsed.definition.containers.len(), "{}", String::from_utf8_lossy(&input));
                assert_firelens_renders(parsed.definition, &String::from_utf8_lossy(&input));
                accepted += 1;
            }
            Err(errors) => {
                assert!(!errors.is_empty() && errors.iter().all(|e| !e.path.is_empty()));
                rejected += 1;
            }
        }
    }
    assert_eq!(accepted + rejected, inputs as u64);
    // Mutants must exercise both outcomes, or the mutator is broken.
    assert!(accepted > 0 && rejected > 0, "accepted {accepted}, rejected {rejected}");
    eprintln!("seeded mutation: {inputs} inputs, {accepted} accepted, {rejected} rejected, no panic");
}

#[test]
fn odd_keys_are_quoted_in_paths() {
    let errors = errors_of(&mutated(|d| {
        d[""] = json!(1);
        d["containerDefinitions"][0]["my key"] = json!(1);
        d["containerDefinitions"][0]["dockerLabels"] = json!({"a b": 1});
    }));
    for expected in [
        "$[\"\"]: unknown key",
        "containerDefinitions[0][\"my key\"]: unknown key",
        "containerDefinitions[0].dockerLabels[\"a b\"]: expected a string, found a number",
    ] {
        assert!(errors.contains(&expected.to_string()), "missing {expected:?} in {errors:?}");
    }
}

#[test]
fn a_container_with_only_name_and_image_parses_to_container_definition_new() {
    let parsed = parse_value(&json!({
        "family": "minimal",
        "containerDefinitions": [{"name": "web", "image": "deckhand-test/busybox:latest"}]
    }))
    .expect("a name and an image are enough");
    assert_eq!(
        parsed.definition.containers,
        vec![ContainerDefinition::new("web", "deckhand-test/busybox:latest")]
    );
}

#[test]
fn docker_volume_configurations_parse_with_ecs_defaults() {
    let value = mutated(|d| {
        d["volumes"] = json!([
            {"name": "scratch", "dockerVolumeConfiguration": {}},
            {"name": "cache", "dockerVolumeConfiguration": {"scope": "task", "driver": "local",
                "driverOpts": {"type": "tmpfs", "device": "tmpfs"}, "labels": {"team": "edge"}}},
            {"name": "db-data", "dockerVolumeConfiguration": {"scope": "shared", "autoprovision": true}},
            {"name": "given", "dockerVolumeConfiguration": {"scope": "shared", "driver": "rexray/ebs"}}
        ]);
    });
    let parsed = parse_value(&value).expect("valid");
    let configurations: Vec<DockerVolumeConfiguration> = parsed
        .definition
        .volumes
        .iter()
        .map(|volume| volume.docker_volume_configuration.clone().expect("configured"))
        .collect();
    let configuration = |scope, autoprovision, driver: &str, opts: &[(&str, &str)], labels: &[(&str, &str)]| {
        let map = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        DockerVolumeConfiguration { scope, autoprovision, driver: driver.into(), driver_opts: map(opts), labels: map(labels) }
    };
    assert_eq!(
        configurations,
        vec![
            configuration(VolumeScope::Task, false, "local", &[], &[]),
            configuration(VolumeScope::Task, false, "local", &[("device", "tmpfs"), ("type", "tmpfs")], &[("team", "edge")]),
            configuration(VolumeScope::Shared, true, "local", &[], &[]),
            configuration(VolumeScope::Shared, false, "rexray/ebs", &[], &[]),
        ]
    );
    assert!(parsed.definition.volumes[2].is_shared());
    assert!(!parsed.definition.volumes[1].is_shared());
}

#[test]
fn docker_volume_configuration_rules_one_row_each() {
    let volume = |configuration: Value| -> Box<dyn Fn(&mut Value)> {
        Box::new(move |d: &mut Value| {
            d["volumes"] = json!([{"name": "data", "dockerVolumeConfiguration": configuration.clone()}]);
        })
    };
    let path = "volumes[0].dockerVolumeConfiguration";
    type Case = (&'static str, Box<dyn Fn(&mut Value)>, String);
    let cases: Vec<Case> = vec![
        ("not an object", volume(json!("shared")), format!("{path}: expected an object, found a string")),
        ("unknown scope", volume(json!({"scope": "host"})), format!("{path}.scope: unknown scope \"host\": expected task or shared")),
        ("scope not a string", volume(json!({"scope": 1})), format!("{path}.scope: expected a string, found a number")),
        ("task scope autoprovisioned", volume(json!({"scope": "task", "autoprovision": true})), format!("{path}.autoprovision: a task-scoped volume cannot be autoprovisioned (autoprovision is only for scope \"shared\")")),
        ("default scope autoprovisioned", volume(json!({"autoprovision": true})), format!("{path}.autoprovision: a task-scoped volume cannot be autoprovisioned (autoprovision is only for scope \"shared\")")),
        ("autoprovision not a bool", volume(json!({"scope": "shared", "autoprovision": "yes"})), format!("{path}.autoprovision: expected true or false, found a string")),
        ("driver empty", volume(json!({"driver": " "})), format!("{path}.driver: must not be empty")),
        ("driver not a string", volume(json!({"driver": ["local"]})), format!("{path}.driver: expected a string, found an array")),
        ("driverOpts value not a string", volume(json!({"driverOpts": {"size": 5}})), format!("{path}.driverOpts.size: expected a string, found a number")),
        ("labels not an object", volume(json!({"labels": ["a"]})), format!("{path}.labels: expected an object, found an array")),
        ("unknown key", volume(json!({"drivers": "local"})), format!("{path}.drivers: unknown key (did you mean \"driver\"?)")),
        ("host and docker volume", Box::new(|d: &mut Value| {
            d["volumes"] = json!([{"name": "data", "host": {"sourcePath": "/srv"}, "dockerVolumeConfiguration": {}}]);
        }), format!("{path}: a volume is either a host path (host) or a Docker volume (dockerVolumeConfiguration), not both")),
        ("shared name too short for Docker", Box::new(|d: &mut Value| {
            d["volumes"] = json!([{"name": "d", "dockerVolumeConfiguration": {"scope": "shared"}}]);
        }), format!("{path}.scope: a shared volume is named \"d\" in Docker, and Docker volume names need at least two characters, a letter or digit first")),
        ("shared name starting with an underscore", Box::new(|d: &mut Value| {
            d["volumes"] = json!([{"name": "_db", "dockerVolumeConfiguration": {"scope": "shared"}}]);
        }), format!("{path}.scope: a shared volume is named \"_db\" in Docker, and Docker volume names need at least two characters, a letter or digit first")),
    ];
    for (name, mutate, expected) in cases {
        let mut definition = base();
        mutate(&mut definition);
        let errors = errors_of(&definition);
        assert!(errors.contains(&expected), "{name}: expected {expected:?} in {errors:?}");
    }
    // A task-scoped volume may have any task volume name: its Docker name is deckhand's own.
    let short = mutated(|d| { d["volumes"] = json!([{"name": "d", "dockerVolumeConfiguration": {"scope": "task"}}]); });
    assert!(parse_value(&short).is_ok());
}

/// A container using every Linux field deckhand applies, in a task with `pidMode`.
fn linux_definition() -> Value {
    json!({
        "family": "linux",
        "pidMode": "host",
        "containerDefinitions": [{
            "name": "app",
            "image": "deckhand-test/busybox:latest",
            "memory": 64,
            "ulimits": [{"name": "nofile", "softLimit": 1024, "hardLimit": 2048}, {"name": "memlock", "softLimit": -1, "hardLimit": -1}],
            "linuxParameters": {
                "initProcessEnabled": true,
                "capabilities": {"add": ["NET_ADMIN", "cap_sys_ptrace"], "drop": ["MKNOD"]},
                "devices": [{"hostPath": "/dev/null", "containerPath": "/dev/nothing", "permissions": ["read", "write"]}, {"hostPath": "/dev/zero"}],
                "tmpfs": [{"containerPath": "/scratch", "size": 16, "mountOptions": ["noexec", "mode=1777"]}],
                "sharedMemorySize": 32,
                "maxSwap": 128,
                "swappiness": 10
            },
            "readonlyRootFilesystem": true,
            "hostname": "edge-box",
            "extraHosts": [{"hostname": "registry.local", "ipAddress": "10.0.0.5"}, {"hostname": "v6", "ipAddress": "fd00::1"}],
            "dnsServers": ["10.0.0.2"],
            "dnsSearchDomains": ["corp.example", "example.com."],
            "systemControls": [{"namespace": "net.core.somaxconn", "value": "1024"}],
            "dockerSecurityOptions": ["no-new-privileges", "label:type:svirt_apache_t", "apparmor:docker-default"],
            "disableNetworking": false,
            "interactive": true,
            "pseudoTerminal": true,
            "portMappings": [{"containerPort": 80, "hostPort": 8080}, {"containerPortRange": "9000-9009", "protocol": "udp"}]
        }]
    })
}

#[test]
fn linux_fields_are_parsed() {
    use crate::task::{Device, DevicePermission, ExtraHost, IpcMode, KernelCapabilities, LinuxParameters, PidMode, PortRange, SystemControl, Tmpfs, Ulimit};
    let parsed = parse_value(&linux_definition()).expect("valid");
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    let definition = &parsed.definition;
    assert_eq!((definition.pid_mode, definition.ipc_mode), (Some(PidMode::Host), None));
    let awsvpc_task = parse_value(&mutated(|d| {
        d["networkMode"] = json!("awsvpc");
        d["pidMode"] = json!("task");
        d["ipcMode"] = json!("task");
        d["containerDefinitions"][0]["links"] = json!([]);
        d["containerDefinitions"][0]["portMappings"] = json!([{"containerPort": 80}]);
    })).expect("awsvpc with task namespaces is valid").definition;
    assert_eq!((awsvpc_task.pid_mode, awsvpc_task.ipc_mode), (Some(crate::task::PidMode::Task), Some(crate::task::IpcMode::Task)));
    let with_ipc = |mode: &str| parse_value(&mutated(|d| { d["ipcMode"] = json!(mode); })).expect("valid").definition.ipc_mode;
    assert_eq!((with_ipc("host"), with_ipc("none")), (Some(IpcMode::Host), Some(IpcMode::None)));
    let app = &definition.containers[0];
    assert_eq!(app.ulimits, vec![
        Ulimit { name: "nofile".into(), soft_limit: 1024, hard_limit: 2048 },
        Ulimit { name: "memlock".into(), soft_limit: -1, hard_limit: -1 },
    ]);
    assert_eq!(app.linux_parameters, LinuxParameters {
        init_process_enabled: true,
        capabilities: KernelCapabilities { add: vec!["NET_ADMIN".into(), "SYS_PTRACE".into()], drop: vec!["MKNOD".into()] },
        devices: vec![
            Device { host_path: "/dev/null".into(), container_path: Some("/dev/nothing".into()), permissions: vec![DevicePermission::Read, DevicePermission::Write] },
            Device { host_path: "/dev/zero".into(), container_path: None, permissions: vec![] },
        ],
        tmpfs: vec![Tmpfs { container_path: "/scratch".into(), size_mib: 16, mount_options: vec!["noexec".into(), "mode=1777".into()] }],
        shared_memory_size_mib: Some(32),
        max_swap_mib: Some(128),
        swappiness: Some(10),
    });
    assert!(app.readonly_root_filesystem && app.interactive && app.pseudo_terminal && !app.disable_networking);
    assert_eq!(app.hostname.as_deref(), Some("edge-box"));
    assert_eq!(app.extra_hosts, vec![
        ExtraHost { hostname: "registry.local".into(), ip_address: "10.0.0.5".into() },
        ExtraHost { hostname: "v6".into(), ip_address: "fd00::1".into() },
    ]);
    assert_eq!(app.dns_servers, vec!["10.0.0.2".to_string()]);
    assert_eq!(app.dns_search_domains, vec!["corp.example".to_string(), "example.com.".into()]);
    assert_eq!(app.system_controls, vec![SystemControl { namespace: "net.core.somaxconn".into(), value: "1024".into() }]);
    assert_eq!(app.docker_security_options.len(), 3);
    assert_eq!(app.port_mappings[1], PortMapping {
        container_port: 9000,
        host_port: None,
        protocol: Protocol::Udp,
        container_port_range: Some(PortRange { first: 9000, last: 9009 }),
    });
}

#[test]
fn linux_field_rules_one_row_each() {
    let c0 = "/containerDefinitions/0";
    let cases: Vec<ValidationCase> = vec![
        ("ulimit unknown name", insert(c0, "ulimits", json!([{"name": "files", "softLimit": 1, "hardLimit": 1}])), "containerDefinitions[0].ulimits[0].name: unknown ulimit \"files\": expected one of core, cpu, data, fsize, locks, memlock, msgqueue, nice, nofile, nproc, rss, rtprio, rttime, sigpending, stack"),
        ("ulimit soft above hard", insert(c0, "ulimits", json!([{"name": "nofile", "softLimit": 10, "hardLimit": 5}])), "containerDefinitions[0].ulimits[0].softLimit: soft limit 10 is above the hard limit 5"),
        ("ulimit finite soft above unlimited hard is fine, unlimited soft above finite hard is not", insert(c0, "ulimits", json!([{"name": "nofile", "softLimit": -1, "hardLimit": 5}])), "containerDefinitions[0].ulimits[0].softLimit: soft limit -1 is above the hard limit 5"),
        ("ulimit hard missing", insert(c0, "ulimits", json!([{"name": "nofile", "softLimit": 1}])), "containerDefinitions[0].ulimits[0].hardLimit: required"),
        ("ulimit below -1", insert(c0, "ulimits", json!([{"name": "nofile", "softLimit": -2, "hardLimit": 1}])), "containerDefinitions[0].ulimits[0].softLimit: -2 is out of range -1–2147483647"),
        ("ulimit duplicate", insert(c0, "ulimits", json!([{"name": "nofile", "softLimit": 1, "hardLimit": 1}, {"name": "nofile", "softLimit": 2, "hardLimit": 2}])), "containerDefinitions[0].ulimits[1].name: duplicate ulimit \"nofile\" (also containerDefinitions[0].ulimits[0])"),
        ("linuxParameters not an object", insert(c0, "linuxParameters", json!([])), "containerDefinitions[0].linuxParameters: expected an object, found an array"),
        ("linuxParameters unknown key", insert(c0, "linuxParameters", json!({"initProcessEnable": true})), "containerDefinitions[0].linuxParameters.initProcessEnable: unknown key (did you mean \"initProcessEnabled\"?)"),
        ("init not a bool", insert(c0, "linuxParameters", json!({"initProcessEnabled": "yes"})), "containerDefinitions[0].linuxParameters.initProcessEnabled: expected true or false, found a string"),
        ("capability unknown", insert(c0, "linuxParameters", json!({"capabilities": {"add": ["NET_ADMIN", "FLY"]}})), "containerDefinitions[0].linuxParameters.capabilities.add[1]: \"FLY\" is not a Linux capability ECS accepts (for example NET_ADMIN, SYS_PTRACE or ALL, with or without CAP_)"),
        ("capability CAP_ALL", insert(c0, "linuxParameters", json!({"capabilities": {"drop": ["CAP_ALL"]}})), "containerDefinitions[0].linuxParameters.capabilities.drop[0]: \"CAP_ALL\" is not a Linux capability ECS accepts (for example NET_ADMIN, SYS_PTRACE or ALL, with or without CAP_)"),
        ("device hostPath missing", insert(c0, "linuxParameters", json!({"devices": [{"containerPath": "/dev/x"}]})), "containerDefinitions[0].linuxParameters.devices[0].hostPath: required"),
        ("device hostPath relative", insert(c0, "linuxParameters", json!({"devices": [{"hostPath": "dev/null"}]})), "containerDefinitions[0].linuxParameters.devices[0].hostPath: \"dev/null\" must be an absolute path"),
        ("device containerPath relative", insert(c0, "linuxParameters", json!({"devices": [{"hostPath": "/dev/null", "containerPath": "null"}]})), "containerDefinitions[0].linuxParameters.devices[0].containerPath: \"null\" must be an absolute path"),
        ("device permission unknown", insert(c0, "linuxParameters", json!({"devices": [{"hostPath": "/dev/null", "permissions": ["read", "exec"]}]})), "containerDefinitions[0].linuxParameters.devices[0].permissions[1]: unknown permission \"exec\": expected read, write or mknod"),
        ("tmpfs size missing", insert(c0, "linuxParameters", json!({"tmpfs": [{"containerPath": "/t"}]})), "containerDefinitions[0].linuxParameters.tmpfs[0].size: required"),
        ("tmpfs size zero", insert(c0, "linuxParameters", json!({"tmpfs": [{"containerPath": "/t", "size": 0}]})), "containerDefinitions[0].linuxParameters.tmpfs[0].size: 0 is too small: at least 1"),
        ("tmpfs path missing", insert(c0, "linuxParameters", json!({"tmpfs": [{"size": 1}]})), "containerDefinitions[0].linuxParameters.tmpfs[0].containerPath: required"),
        ("tmpfs path relative", insert(c0, "linuxParameters", json!({"tmpfs": [{"containerPath": "t", "size": 1}]})), "containerDefinitions[0].linuxParameters.tmpfs[0].containerPath: \"t\" must be an absolute path"),
        ("tmpfs option unknown", insert(c0, "linuxParameters", json!({"tmpfs": [{"containerPath": "/t", "size": 1, "mountOptions": ["noexec", "size=5m"]}]})), "containerDefinitions[0].linuxParameters.tmpfs[0].mountOptions[1]: \"size=5m\" is not a tmpfs mount option ECS accepts (for example noexec, nosuid or mode=1777)"),
        ("tmpfs option smuggling a comma", insert(c0, "linuxParameters", json!({"tmpfs": [{"containerPath": "/t", "size": 1, "mountOptions": ["mode=1777,size=9g"]}]})), "containerDefinitions[0].linuxParameters.tmpfs[0].mountOptions[0]: \"mode=1777,size=9g\" is not a tmpfs mount option ECS accepts (for example noexec, nosuid or mode=1777)"),
        ("tmpfs path twice", insert(c0, "linuxParameters", json!({"tmpfs": [{"containerPath": "/t", "size": 1}, {"containerPath": "/t", "size": 2}]})), "containerDefinitions[0].linuxParameters.tmpfs[1].containerPath: \"/t\" is already a tmpfs mount (containerDefinitions[0].linuxParameters.tmpfs[0])"),
        ("tmpfs over a mount point", Box::new(|d| {
            d["volumes"] = json!([{"name": "data"}]);
            d["containerDefinitions"][0]["mountPoints"] = json!([{"sourceVolume": "data", "containerPath": "/t"}]);
            d["containerDefinitions"][0]["linuxParameters"] = json!({"tmpfs": [{"containerPath": "/t", "size": 1}]});
        }), "containerDefinitions[0].linuxParameters.tmpfs[0].containerPath: \"/t\" is also a mountPoints containerPath"),
        ("sharedMemorySize zero", insert(c0, "linuxParameters", json!({"sharedMemorySize": 0})), "containerDefinitions[0].linuxParameters.sharedMemorySize: 0 is too small: at least 1"),
        ("maxSwap without memory", insert(c0, "linuxParameters", json!({"maxSwap": 0})), "containerDefinitions[0].linuxParameters.maxSwap: needs the container's memory (hard limit) to be set: the swap limit is memory plus maxSwap"),
        ("maxSwap negative", insert(c0, "linuxParameters", json!({"maxSwap": -1})), "containerDefinitions[0].linuxParameters.maxSwap: expected a whole number ≥ 0, found -1"),
        ("swappiness above 100", Box::new(|d| {
            d["containerDefinitions"][0]["memory"] = json!(64);
            d["containerDefinitions"][0]["linuxParameters"] = json!({"maxSwap": 10, "swappiness": 101});
        }), "containerDefinitions[0].linuxParameters.swappiness: 101 is out of range 0–100"),
        ("hostname too long", insert(c0, "hostname", json!("h".repeat(65))), "containerDefinitions[0].hostname: \"hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh\" is not a valid host name (at most 64 letters, digits, '-', '_' or '.')"),
        ("hostname with a space", insert(c0, "hostname", json!("my box")), "containerDefinitions[0].hostname: \"my box\" is not a valid host name (at most 64 letters, digits, '-', '_' or '.')"),
        ("extraHosts address", insert(c0, "extraHosts", json!([{"hostname": "a", "ipAddress": "10.0.0"}])), "containerDefinitions[0].extraHosts[0].ipAddress: \"10.0.0\" is not an IPv4 or IPv6 address"),
        ("extraHosts hostname with colon", insert(c0, "extraHosts", json!([{"hostname": "a:b", "ipAddress": "10.0.0.1"}])), "containerDefinitions[0].extraHosts[0].hostname: \"a:b\" is not a valid host name"),
        ("extraHosts ipAddress missing", insert(c0, "extraHosts", json!([{"hostname": "a"}])), "containerDefinitions[0].extraHosts[0].ipAddress: required"),
        ("dnsServers not an address", insert(c0, "dnsServers", json!(["10.0.0.2", "dns.local"])), "containerDefinitions[0].dnsServers[1]: \"dns.local\" is not an IPv4 or IPv6 address"),
        ("dnsSearchDomains bad label", insert(c0, "dnsSearchDomains", json!(["-bad.example"])), "containerDefinitions[0].dnsSearchDomains[0]: \"-bad.example\" is not a valid DNS search domain"),
        ("systemControls not namespaced", insert(c0, "systemControls", json!([{"namespace": "vm.swappiness", "value": "1"}])), "containerDefinitions[0].systemControls[0].namespace: \"vm.swappiness\" is not a namespaced kernel parameter Docker sets per container (net.*, fs.mqueue.*, kernel.msg*, kernel.sem, kernel.shm*)"),
        ("systemControls value missing", insert(c0, "systemControls", json!([{"namespace": "net.core.somaxconn"}])), "containerDefinitions[0].systemControls[0].value: required"),
        ("systemControls twice", insert(c0, "systemControls", json!([{"namespace": "kernel.sem", "value": "1"}, {"namespace": "kernel.sem", "value": "2"}])), "containerDefinitions[0].systemControls[1].namespace: \"kernel.sem\" is already set (containerDefinitions[0].systemControls[0])"),
        ("net sysctl with host network", Box::new(|d| {
            d["networkMode"] = json!("host");
            d["containerDefinitions"][0]["links"] = json!([]);
            d["containerDefinitions"][0]["portMappings"] = json!([]);
            d["containerDefinitions"][0]["systemControls"] = json!([{"namespace": "net.ipv4.tcp_keepalive_time", "value": "60"}]);
        }), "containerDefinitions[0].systemControls[0].namespace: \"net.ipv4.tcp_keepalive_time\" is a network parameter: with networkMode host it would change the host's own network stack, which ECS does not allow"),
        ("ipc sysctl with host ipc", Box::new(|d| {
            d["ipcMode"] = json!("host");
            d["containerDefinitions"][0]["systemControls"] = json!([{"namespace": "fs.mqueue.msg_max", "value": "20"}]);
        }), "containerDefinitions[0].systemControls[0].namespace: \"fs.mqueue.msg_max\" is an IPC parameter: with ipcMode host it would change the host's own IPC namespace, which ECS does not allow"),
        ("security option unknown", insert(c0, "dockerSecurityOptions", json!(["seccomp:unconfined"])), "containerDefinitions[0].dockerSecurityOptions[0]: \"seccomp:unconfined\" is not a security option ECS accepts: expected no-new-privileges, apparmor:PROFILE or label:VALUE"),
        ("security option empty profile", insert(c0, "dockerSecurityOptions", json!(["apparmor:"])), "containerDefinitions[0].dockerSecurityOptions[0]: \"apparmor:\" is not a security option ECS accepts: expected no-new-privileges, apparmor:PROFILE or label:VALUE"),
        ("security option credentialspec", insert(c0, "dockerSecurityOptions", json!(["credentialspec:file://x.json"])), "containerDefinitions[0].dockerSecurityOptions[0]: credentialspec is for Windows containers and Active Directory; not supported on this host"),
        ("readonlyRootFilesystem not a bool", insert(c0, "readonlyRootFilesystem", json!(1)), "containerDefinitions[0].readonlyRootFilesystem: expected true or false, found a number"),
        ("pseudoTerminal not a bool", insert(c0, "pseudoTerminal", json!("true")), "containerDefinitions[0].pseudoTerminal: expected true or false, found a string"),
        ("pidMode task", insert("", "pidMode", json!("task")), "pidMode: task needs networkMode awsvpc: deckhand shares a task's namespace through the sandbox container it adds to awsvpc tasks; use awsvpc, or host, or leave the key out for a namespace per container"),
        ("ipcMode task", insert("", "ipcMode", json!("task")), "ipcMode: task needs networkMode awsvpc: deckhand shares a task's namespace through the sandbox container it adds to awsvpc tasks; use awsvpc, or host, or leave the key out for a namespace per container"),
        ("pidMode unknown", insert("", "pidMode", json!("container")), "pidMode: unknown pid mode \"container\": expected host or task"),
        ("ipcMode unknown", insert("", "ipcMode", json!("shareable")), "ipcMode: unknown ipc mode \"shareable\": expected host, task or none"),
        ("port range and port", insert("/containerDefinitions/0/portMappings/0", "containerPortRange", json!("9000-9001")), "containerDefinitions[0].portMappings[0].containerPortRange: give either containerPort or containerPortRange, not both"),
        ("port range with hostPort", set_at("/containerDefinitions/0/portMappings", json!([{"containerPortRange": "9000-9001", "hostPort": 9000}])), "containerDefinitions[0].portMappings[0].hostPort: not allowed with containerPortRange: the host ports of a range are chosen when the container is created"),
        ("port range with hostPortRange", set_at("/containerDefinitions/0/portMappings", json!([{"containerPortRange": "9000-9001", "hostPortRange": "9000-9001"}])), "containerDefinitions[0].portMappings[0].hostPortRange: set by the agent, not by the task definition (give containerPortRange)"),
        ("port range reversed", set_at("/containerDefinitions/0/portMappings", json!([{"containerPortRange": "9001-9000"}])), "containerDefinitions[0].portMappings[0].containerPortRange: the first port (9001) must be below the last port (9000)"),
        ("port range of one port", set_at("/containerDefinitions/0/portMappings", json!([{"containerPortRange": "9000-9000"}])), "containerDefinitions[0].portMappings[0].containerPortRange: the first port (9000) must be below the last port (9000)"),
        ("port range not a range", set_at("/containerDefinitions/0/portMappings", json!([{"containerPortRange": "9000"}])), "containerDefinitions[0].portMappings[0].containerPortRange: \"9000\" is not a port range such as \"9000-9099\" (ports 1–65535)"),
        ("port range past 65535", set_at("/containerDefinitions/0/portMappings", json!([{"containerPortRange": "65000-70000"}])), "containerDefinitions[0].portMappings[0].containerPortRange: \"65000-70000\" is not a port range such as \"9000-9099\" (ports 1–65535)"),
        ("port range overlapping a port", set_at("/containerDefinitions/0/portMappings", json!([{"containerPort": 9005}, {"containerPortRange": "9000-9009"}])), "containerDefinitions[0].portMappings[1].containerPortRange: overlaps containerDefinitions[0].portMappings[0] (9005/tcp): a container port may be in one port mapping only"),
        ("port ranges overlapping", set_at("/containerDefinitions/0/portMappings", json!([{"containerPortRange": "9000-9009"}, {"containerPortRange": "9009-9020"}])), "containerDefinitions[0].portMappings[1].containerPortRange: overlaps containerDefinitions[0].portMappings[0] (9000-9009/tcp): a container port may be in one port mapping only"),
        ("port range with host network", Box::new(|d| {
            d["networkMode"] = json!("host");
            d["containerDefinitions"][0]["links"] = json!([]);
            d["containerDefinitions"][0]["portMappings"] = json!([{"containerPortRange": "9000-9009"}]);
        }), "containerDefinitions[0].portMappings[0].containerPortRange: port ranges need networkMode bridge (this task uses host)"),
        ("too many port ranges", set_at("/containerDefinitions/0/portMappings", Value::Array((0..101).map(|i| json!({"containerPortRange": format!("{}-{}", 10000 + 2 * i, 10001 + 2 * i)})).collect())), "containerDefinitions[0].portMappings[100].containerPortRange: at most 100 port ranges are allowed per container"),
    ];
    let count = cases.len();
    for (name, mutate, expected) in cases {
        let mut definition = base();
        mutate(&mut definition);
        let errors = match parse_value(&definition) {
            Ok(parsed) => panic!("{name}: expected {expected:?}, parsed {parsed:?}"),
            Err(errors) => errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        };
        assert!(errors.iter().any(|error| error == expected), "{name}: expected {expected:?} in {errors:?}");
        assert_eq!(errors.len(), 1, "{name}: one rule, one error: {errors:?}");
    }
    assert!(count >= 50, "the table lost rows: {count}");
}

#[test]
fn linux_fields_accept_what_ecs_accepts() {
    let c0 = "/containerDefinitions/0";
    let cases: Vec<(&str, Mutation)> = vec![
        ("capabilities with CAP_ in any case", insert(c0, "linuxParameters", json!({"capabilities": {"add": ["CAP_NET_ADMIN", "sys_time", "ALL"], "drop": ["Cap_Chown"]}}))),
        ("unlimited ulimits", insert(c0, "ulimits", json!([{"name": "memlock", "softLimit": -1, "hardLimit": -1}, {"name": "core", "softLimit": 0, "hardLimit": -1}]))),
        ("maxSwap 0 with memory", Box::new(|d| {
            d["containerDefinitions"][0]["memory"] = json!(32);
            d["containerDefinitions"][0]["linuxParameters"] = json!({"maxSwap": 0, "swappiness": 0});
        })),
        ("ipc sysctls with private ipc", insert(c0, "systemControls", json!([{"namespace": "kernel.shmmax", "value": "68719476736"}, {"namespace": "fs.mqueue.msg_max", "value": "20"}]))),
        ("net sysctl with ipc host", Box::new(|d| {
            d["ipcMode"] = json!("host");
            d["containerDefinitions"][0]["systemControls"] = json!([{"namespace": "net.core.somaxconn", "value": "1024"}]);
        })),
        ("ipcMode none", insert("", "ipcMode", json!("none"))),
        ("search domain root", insert(c0, "dnsSearchDomains", json!(["."]))),
        ("IPv6 DNS server", insert(c0, "dnsServers", json!(["fd00::53"]))),
        ("empty hostname asks for nothing", insert(c0, "hostname", json!(""))),
        ("disableNetworking", insert(c0, "disableNetworking", json!(true))),
        ("udp and tcp ranges over the same ports", set_at("/containerDefinitions/0/portMappings", json!([{"containerPortRange": "9000-9009"}, {"containerPortRange": "9000-9009", "protocol": "udp"}, {"containerPort": 80, "hostPort": 8080}]))),
        ("empty hostPortRange", set_at("/containerDefinitions/0/portMappings", json!([{"containerPortRange": "9000-9009", "hostPortRange": ""}]))),
        ("device with mknod only", insert(c0, "linuxParameters", json!({"devices": [{"hostPath": "/dev/fuse", "permissions": ["mknod"]}]}))),
    ];
    for (name, mutate) in cases {
        let mut definition = base();
        mutate(&mut definition);
        if let Err(errors) = parse_value(&definition) {
            panic!("{name}: {errors:?}");
        }
    }
}

#[test]
fn swappiness_without_max_swap_is_a_warning() {
    let parsed = parse_value(&mutated(|d| {
        d["containerDefinitions"][0]["linuxParameters"] = json!({"swappiness": 10});
    }))
    .expect("valid");
    assert_eq!(
        parsed.warnings,
        vec!["containerDefinitions[0].linuxParameters.swappiness: ignored: swappiness applies only together with maxSwap".to_string()]
    );
}

#[test]
fn shared_memory_size_without_a_private_ipc_namespace_is_a_warning() {
    for (mode, expected) in [
        ("host", "containerDefinitions[0].linuxParameters.sharedMemorySize: ignored: with ipcMode host the container uses the host's /dev/shm"),
        ("none", "containerDefinitions[0].linuxParameters.sharedMemorySize: ignored: with ipcMode none the container has no /dev/shm"),
    ] {
        let parsed = parse_value(&mutated(|d| {
            d["ipcMode"] = json!(mode);
            d["containerDefinitions"][0]["linuxParameters"] = json!({"sharedMemorySize": 64});
        }))
        .expect("valid");
        assert_eq!(parsed.warnings, vec![expected.to_string()], "{mode}");
    }
}

#[test]
fn checkpoints_written_before_the_linux_fields_still_load() {
    // A container and a task as deckhand serialised them before these fields existed.
    let mut container = serde_json::to_value(ContainerDefinition::new("web", "busybox")).expect("serialises");
    let object = container.as_object_mut().expect("an object");
    for key in ["ulimits", "linux_parameters", "hostname", "extra_hosts", "readonly_root_filesystem", "pseudo_terminal"] {
        assert!(!object.contains_key(key), "{key} is left out when not asked for");
    }
    let parsed: ContainerDefinition = serde_json::from_value(container).expect("loads");
    assert_eq!(parsed, ContainerDefinition::new("web", "busybox"));
    let old_mapping = json!({"container_port": 80, "host_port": null, "protocol": "tcp"});
    let mapping: PortMapping = serde_json::from_value(old_mapping).expect("loads");
    assert_eq!(mapping.container_port_range, None);
    // A task saved before pidMode/ipcMode existed has neither key; one that sets them keeps them.
    let plain = crate::task::Task::new("0".repeat(32), "edge", parse_value(&base()).expect("valid").definition, 1, 0);
    let mut saved = serde_json::to_value(&plain).expect("serialises");
    assert!(saved.get("pid_mode").is_none() && saved.get("ipc_mode").is_none(), "{saved}");
    saved.as_object_mut().expect("an object").remove("pid_mode");
    assert_eq!(serde_json::from_value::<crate::task::Task>(saved).expect("loads"), plain);
    let namespaced = crate::task::Task::new("1".repeat(32), "edge", parse_value(&linux_definition()).expect("valid").definition, 1, 0);
    let reloaded: crate::task::Task = serde_json::from_value(serde_json::to_value(&namespaced).expect("serialises")).expect("loads");
    assert_eq!(reloaded.pid_mode, Some(crate::task::PidMode::Host));
    assert_eq!(reloaded, namespaced);
    let full = parse_value(&linux_definition()).expect("valid").definition.containers[0].clone();
    let round_trip: ContainerDefinition = serde_json::from_value(serde_json::to_value(&full).expect("serialises")).expect("loads");
    assert_eq!(round_trip, full);
}

#[test]
fn secrets_repository_credentials_and_secret_options_are_kept_as_references() {
    let definition = mutated(|d| {
        d["containerDefinitions"][0]["secrets"] = json!([
            {"name": "DB_PASSWORD", "valueFrom": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf:password::"},
            {"name": "API_KEY", "valueFrom": "/shop/api-key"}
        ]);
        d["containerDefinitions"][0]["repositoryCredentials"] = json!({"credentialsParameter": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:registry-XyZ"});
        d["containerDefinitions"][0]["logConfiguration"] = json!({"logDriver": "splunk", "options": {"splunk-url": "https://splunk:8088"}, "secretOptions": [{"name": "splunk-token", "valueFrom": "arn:aws:ssm:eu-west-1:123456789012:parameter/splunk-token"}]});
    });
    let parsed = parse_value(&definition).expect("valid");
    let web = &parsed.definition.containers[0];
    assert_eq!(web.secrets.iter().map(|s| (s.name.as_str(), s.value_from.as_str())).collect::<Vec<_>>(), vec![
        ("DB_PASSWORD", "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf:password::"),
        ("API_KEY", "/shop/api-key"),
    ]);
    assert_eq!(web.repository_credentials.as_deref(), Some("arn:aws:secretsmanager:eu-west-1:123456789012:secret:registry-XyZ"));
    let log = web.log_configuration.as_ref().expect("log configuration");
    assert_eq!(log.secret_options[0].name, "splunk-token");
    assert_eq!(web.secret_references(), vec![
        "arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf:password::",
        "/shop/api-key",
        "arn:aws:ssm:eu-west-1:123456789012:parameter/splunk-token",
        "arn:aws:secretsmanager:eu-west-1:123456789012:secret:registry-XyZ",
    ]);
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
}

#[test]
fn secret_reference_rules() {
    let c0 = "/containerDefinitions/0";
    let table: Vec<ValidationCase> = vec![
        ("no valueFrom", insert(c0, "secrets", json!([{"name": "A"}])), "containerDefinitions[0].secrets[0].valueFrom: required"),
        ("empty valueFrom", insert(c0, "secrets", json!([{"name": "A", "valueFrom": " "}])), "containerDefinitions[0].secrets[0].valueFrom: must not be empty"),
        ("bad name", insert(c0, "secrets", json!([{"name": "A=B", "valueFrom": "x"}])), "containerDefinitions[0].secrets[0].name: \"A=B\" is not a valid environment variable name"),
        ("twice", insert(c0, "secrets", json!([{"name": "A", "valueFrom": "x"}, {"name": "A", "valueFrom": "y"}])), "containerDefinitions[0].secrets[1].name: \"A\" is given twice in secrets"),
        ("unknown key", insert(c0, "secrets", json!([{"name": "A", "valueFrom": "x", "type": "env"}])), "containerDefinitions[0].secrets[0].type: unknown key"),
        ("no parameter", insert(c0, "repositoryCredentials", json!({})), "containerDefinitions[0].repositoryCredentials.credentialsParameter: required"),
        ("parameter not a string", insert(c0, "repositoryCredentials", json!({"credentialsParameter": 1})), "containerDefinitions[0].repositoryCredentials.credentialsParameter: expected a string, found a number"),
    ];
    for (name, mutate, expected) in table {
        let mut definition = base();
        mutate(&mut definition);
        let errors = errors_of(&definition);
        assert_eq!(errors, vec![expected.to_string()], "{name}");
    }
}

#[test]
fn awsfirelens_without_a_log_router_is_refused_with_a_message() {
    let definition = mutated(|d| {
        d["containerDefinitions"][0]["logConfiguration"] = json!({"logDriver": "awsfirelens", "options": {"Name": "cloudwatch"}});
    });
    let errors = errors_of(&definition);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with("containerDefinitions[0].logConfiguration.logDriver: awsfirelens sends the logs to the task's FireLens log router"), "{errors:?}");
}

#[test]
fn a_firelens_router_and_its_containers_are_read_and_checked() {
    let accepted = mutated(|d| {
        d["containerDefinitions"][0]["logConfiguration"] = json!({"logDriver": "awsfirelens", "options": {"Name": "cloudwatch", "region": "eu-west-1", "include-pattern": "^x", "log-driver-buffer-limit": "2097152"}});
        d["containerDefinitions"][1]["firelensConfiguration"] = json!({"type": "fluentbit", "options": {"enable-ecs-log-metadata": "false", "config-file-type": "file", "config-file-value": "/fluent-bit/etc/extra.conf"}});
    });
    let parsed = parse_value(&accepted).expect("a FireLens task");
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    let router = &parsed.definition.containers[1];
    let firelens = router.firelens_configuration.as_ref().expect("the router");
    assert_eq!(firelens.router_type, crate::task::FirelensType::Fluentbit);
    assert_eq!(firelens.options["config-file-type"], "file");
    // The implicit dependency is the task's (added when it is accepted), not the definition's;
    // the start order shows it already.
    assert!(parsed.definition.containers[0].depends_on.is_empty());
    let app_first = json!({"family": "logs", "containerDefinitions": [
        {"name": "app", "image": "busybox", "logConfiguration": {"logDriver": "awsfirelens", "options": {"Name": "stdout"}}},
        {"name": "plain", "image": "busybox"},
        {"name": "router", "image": "fluent", "firelensConfiguration": {"type": "fluentbit"}}]});
    let parsed = parse_value(&app_first).expect("valid");
    assert_eq!(start_order(&parsed.definition), ["plain", "router", "app"]);

    let with_router = || {
        let mut d = base();
        d["containerDefinitions"][0]["logConfiguration"] = json!({"logDriver": "awsfirelens", "options": {"Name": "stdout"}});
        d["containerDefinitions"][1]["firelensConfiguration"] = json!({"type": "fluentbit"});
        d
    };
    type Mutate = fn(&mut serde_json::Value);
    let table: Vec<(&str, Mutate, &str)> = vec![
        ("a second router", |d| d["containerDefinitions"][0]["firelensConfiguration"] = json!({"type": "fluentbit"}),
         "containerDefinitions[1].firelensConfiguration: a task has one FireLens log router, and container \"web\" is it already"),
        ("a router user by name", |d| d["containerDefinitions"][1]["user"] = json!("fluent"),
         "containerDefinitions[1].user: \"fluent\": a FireLens router's user is a number (uid or uid:gid), which its socket directory is given to"),
        ("an unknown type", |d| d["containerDefinitions"][1]["firelensConfiguration"] = json!({"type": "vector"}),
         "containerDefinitions[1].firelensConfiguration.type: unknown FireLens type \"vector\": expected fluentbit or fluentd"),
        ("no type", |d| d["containerDefinitions"][1]["firelensConfiguration"] = json!({"options": {}}),
         "containerDefinitions[1].firelensConfiguration.type: required"),
        ("enable-ecs-log-metadata", |d| d["containerDefinitions"][1]["firelensConfiguration"]["options"] = json!({"enable-ecs-log-metadata": "yes"}),
         "containerDefinitions[1].firelensConfiguration.options.enable-ecs-log-metadata: invalid value \"yes\": expected true or false"),
        ("config-file-type", |d| d["containerDefinitions"][1]["firelensConfiguration"]["options"] = json!({"config-file-type": "https", "config-file-value": "x"}),
         "containerDefinitions[1].firelensConfiguration.options.config-file-type: invalid value \"https\" is specified: expected file or s3"),
        ("config-file-value", |d| d["containerDefinitions"][1]["firelensConfiguration"]["options"] = json!({"config-file-type": "s3"}),
         "containerDefinitions[1].firelensConfiguration.options.config-file-value: option config-file-type is specified but config-file-value is not specified"),
        ("an S3 value that is no ARN", |d| d["containerDefinitions"][1]["firelensConfiguration"]["options"] = json!({"config-file-type": "s3", "config-file-value": "s3://b/k"}),
         "containerDefinitions[1].firelensConfiguration.options.config-file-value: \"s3://b/k\" is not an S3 object ARN (not arn:PARTITION:s3:::…; expected arn:aws:s3:::BUCKET/KEY)"),
        ("plugin options without the plugin", |d| d["containerDefinitions"][0]["logConfiguration"]["options"] = json!({"region": "eu-west-1"}),
         "containerDefinitions[0].logConfiguration.options: container \"web\": missing output key Name which is required for firelens configuration of type fluentbit"),
        ("the Fluentd plugin key with Fluent Bit", |d| d["containerDefinitions"][0]["logConfiguration"]["options"] = json!({"@type": "stdout"}),
         "containerDefinitions[0].logConfiguration.options: container \"web\": missing output key Name which is required for firelens configuration of type fluentbit"),
        ("an option that breaks a line", |d| d["containerDefinitions"][0]["logConfiguration"]["options"] = json!({"Name": "stdout", "Format": "a\nb"}),
         "containerDefinitions[0].logConfiguration.options.Format: a FireLens option is one line of the router's configuration: a name without spaces and a value without line breaks"),
    ];
    for (name, mutate, expected) in table {
        let mut definition = with_router();
        mutate(&mut definition);
        assert_eq!(errors_of(&definition), vec![expected.to_string()], "{name}");
    }
    // Patterns alone need no plugin (the user's configuration file may route the records); an
    // option the router does not read is a warning.
    let mut definition = with_router();
    definition["containerDefinitions"][0]["logConfiguration"]["options"] = json!({"include-pattern": "^x"});
    definition["containerDefinitions"][1]["firelensConfiguration"]["options"] = json!({"colour": "blue"});
    let parsed = parse_value(&definition).expect("valid");
    assert_eq!(parsed.warnings, vec!["containerDefinitions[1].firelensConfiguration.options.colour: ignored: a FireLens router reads only enable-ecs-log-metadata, config-file-type, config-file-value".to_string()]);
}

#[test]
fn a_describe_output_full_of_nulls_gives_one_line_per_object() {
    let value = json!({"taskDefinition": {
        "family": "shop", "taskRoleArn": null, "executionRoleArn": null, "networkMode": "bridge",
        "volumes": [], "placementConstraints": [], "requiresCompatibilities": ["EC2"],
        "cpu": null, "memory": null, "proxyConfiguration": null, "inferenceAccelerators": [],
        "containerDefinitions": [{
            "name": "web", "image": "busybox", "secrets": null, "repositoryCredentials": null,
            "environmentFiles": [], "firelensConfiguration": null, "resourceRequirements": [],
            "credentialSpecs": null, "gpu": null, "environment": [], "portMappings": []
        }]
    }, "tags": []});
    let parsed = parse_value(&value).expect("valid");
    assert_eq!(parsed.warnings, vec![
        "tags: ignored: empty".to_string(),
        "taskDefinition.requiresCompatibilities: ignored: it has no effect on this host".to_string(),
        "taskDefinition: ignored, empty: inferenceAccelerators, placementConstraints, proxyConfiguration".to_string(),
        "taskDefinition.containerDefinitions[0]: ignored, empty: credentialSpecs, gpu".to_string(),
    ]);
}

#[test]
fn ephemeral_storage_is_a_fargate_sizing_promise_and_ignored() {
    let definition = mutated(|d| { d["ephemeralStorage"] = json!({"sizeInGiB": 30}); });
    let parsed = parse_value(&definition).expect("ignored, not refused");
    assert_eq!(parsed.warnings, vec!["ephemeralStorage: ignored: a Fargate sizing promise (the task's ephemeral storage); on this host a container's storage is the Docker host's disk".to_string()]);
}

#[test]
fn environment_files_are_s3_arns_at_most_ten() {
    let parsed = parse_value(&mutated(|d| {
        d["containerDefinitions"][0]["environmentFiles"] = json!([
            {"value": "arn:aws:s3:::bucket-a/app.env", "type": "s3"},
            {"value": "arn:aws:s3:::bucket-b/dir/more.env", "type": "s3"},
        ]);
    }))
    .expect("valid");
    assert_eq!(
        parsed.definition.containers[0].environment_files,
        ["arn:aws:s3:::bucket-a/app.env", "arn:aws:s3:::bucket-b/dir/more.env"]
    );
    let cases = [
        (json!([{"value": "arn:aws:s3:::bucket-a/app.env", "type": "file"}]), "environmentFiles[0].type: \"file\" is not a type ECS takes (s3)"),
        (json!([{"value": "s3://bucket-a/app.env", "type": "s3"}]), "environmentFiles[0].value: \"s3://bucket-a/app.env\" is not an S3 object ARN"),
        (json!([{"type": "s3"}]), "environmentFiles[0].value"),
        (json!((0..11).map(|i| json!({"value": format!("arn:aws:s3:::bucket-a/{i}.env"), "type": "s3"})).collect::<Vec<_>>()), "environmentFiles: 11 files; ECS takes at most 10"),
    ];
    for (files, expected) in cases {
        let errors = errors_of(&mutated(|d| { d["containerDefinitions"][0]["environmentFiles"] = files.clone(); }));
        assert!(errors.iter().any(|error| error.starts_with(&format!("containerDefinitions[0].{expected}"))), "{expected}: {errors:?}");
    }
    let parsed = parse_value(&mutated(|d| {
        d["containerDefinitions"][0]["environmentFiles"] = json!([{"value": "arn:aws:s3:::bucket-a/app.txt", "type": "s3"}]);
    }))
    .expect("a name without .env is a warning");
    assert!(parsed.warnings.iter().any(|w| w.contains("to end in .env")), "{:?}", parsed.warnings);
}

#[test]
fn table_of_gpu_resource_requirements() {
    // (resourceRequirements, GPUs asked for, or the errors)
    let path = "containerDefinitions[0].resourceRequirements";
    let cases: Vec<(Value, Result<u32, Vec<String>>)> = vec![
        (json!([{"type": "GPU", "value": "1"}]), Ok(1)),
        (json!([{"type": "GPU", "value": "2"}]), Ok(2)),
        (json!([{"type": "GPU", "value": " 4 "}]), Ok(4)),
        (json!([]), Ok(0)),
        (json!(null), Ok(0)),
        (json!([{"type": "GPU", "value": "1024"}]), Ok(1024)),
        (json!([{"type": "GPU", "value": "0"}]), Err(vec![format!("{path}[0].value: \"0\" is out of range: a whole number of GPUs in 1–1024")])),
        (json!([{"type": "GPU", "value": "1025"}]), Err(vec![format!("{path}[0].value: \"1025\" is out of range: a whole number of GPUs in 1–1024")])),
        (json!([{"type": "GPU", "value": "99999999999999999999"}]), Err(vec![format!("{path}[0].value: \"99999999999999999999\" is out of range: a whole number of GPUs in 1–1024")])),
        (json!([{"type": "GPU", "value": "-1"}]), Err(vec![format!("{path}[0].value: \"-1\" is not a whole number of GPUs in 1–1024")])),
        (json!([{"type": "GPU", "value": "1.5"}]), Err(vec![format!("{path}[0].value: \"1.5\" is not a whole number of GPUs in 1–1024")])),
        (json!([{"type": "GPU", "value": "two"}]), Err(vec![format!("{path}[0].value: \"two\" is not a whole number of GPUs in 1–1024")])),
        (json!([{"type": "GPU", "value": ""}]), Err(vec![format!("{path}[0].value: \"\" is not a whole number of GPUs in 1–1024")])),
        (json!([{"type": "GPU", "value": 2}]), Err(vec![format!("{path}[0].value: expected a string, found a number")])),
        (json!([{"type": "GPU"}]), Err(vec![format!("{path}[0].value: required")])),
        (json!([{"type": "GPU", "value": "1"}, {"type": "GPU", "value": "2"}]), Err(vec![format!("{path}[1].type: GPU is given twice; give the container's GPUs in one requirement")])),
        (json!([{"type": "InferenceAccelerator", "value": "device_1"}]), Err(vec![format!("{path}[0].type: InferenceAccelerator is not supported by deckhand: it has no Elastic Inference accelerators")])),
        (json!([{"type": "gpu", "value": "1"}]), Err(vec![format!("{path}[0].type: unknown type \"gpu\": expected GPU or InferenceAccelerator")])),
        (json!([{"type": "GPU", "value": "1", "count": 1}]), Err(vec![format!("{path}[0].count: unknown key")])),
        (json!({"type": "GPU", "value": "1"}), Err(vec![format!("{path}: expected an array, found an object")])),
    ];
    for (requirements, want) in cases {
        let definition = mutated(|d| { d["containerDefinitions"][0]["resourceRequirements"] = requirements.clone(); });
        match (parse_value(&definition), want) {
            (Ok(parsed), Ok(gpus)) => {
                assert_eq!(parsed.definition.containers[0].gpus, gpus, "{requirements}");
            }
            (Err(_), Err(errors)) => assert_eq!(errors_of(&definition), errors, "{requirements}"),
            (got, want) => panic!("{requirements}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn gpus_are_per_container_and_kept_in_the_model() {
    let definition = mutated(|d| {
        d["containerDefinitions"][0]["resourceRequirements"] = json!([{"type": "GPU", "value": "2"}]);
    });
    let parsed = parse_value(&definition).expect("valid");
    assert_eq!(parsed.definition.containers[0].gpus, 2);
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    // A checkpoint keeps the count; a container without GPUs leaves it out.
    let saved = serde_json::to_value(&parsed.definition.containers[0]).expect("serializes");
    assert_eq!(saved["gpus"], 2);
    let plain = serde_json::to_value(ContainerDefinition::new("a", "busybox")).expect("serializes");
    assert!(plain.get("gpus").is_none(), "{plain}");
}
