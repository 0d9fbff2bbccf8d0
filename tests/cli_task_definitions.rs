//! Task definitions in the shapes people have — a Fargate service's definition with awslogs,
//! secrets and a sidecar, a `describe-task-definition` output full of `null`s, a file whose
//! template placeholders were never filled in, a FireLens definition without its router, an
//! awsvpc definition with a mismatched host port, GPUs, an inference accelerator — through
//! `deckhand validate` as a process: the exit code, and the lines a person reads on stderr and
//! stdout. Offline: no Docker needed.

use std::io::Write;
use std::process::{Command, Stdio};

struct Case {
    name: &'static str,
    definition: &'static str,
    exit_code: i32,
    /// Lines (or parts of lines) that must be printed, stdout and stderr together.
    shown: &'static [&'static str],
    /// Texts that must not be printed.
    not_shown: &'static [&'static str],
}

const FARGATE_SERVICE: &str = r#"{
  "family": "shop-api",
  "networkMode": "awsvpc",
  "requiresCompatibilities": ["FARGATE"],
  "executionRoleArn": "arn:aws:iam::123456789012:role/ecsTaskExecutionRole",
  "taskRoleArn": "arn:aws:iam::123456789012:role/shop-api",
  "cpu": "512",
  "memory": "1024",
  "ephemeralStorage": {"sizeInGiB": 30},
  "runtimePlatform": {"operatingSystemFamily": "LINUX", "cpuArchitecture": "X86_64"},
  "containerDefinitions": [
    {
      "name": "api",
      "image": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/shop-api:1.4.2",
      "essential": true,
      "portMappings": [{"containerPort": 8080, "protocol": "tcp", "name": "http", "appProtocol": "http"}],
      "environment": [{"name": "LOG_LEVEL", "value": "info"}],
      "secrets": [
        {"name": "DB_PASSWORD", "valueFrom": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:shop/db-AbCdEf:password::"},
        {"name": "API_KEY", "valueFrom": "arn:aws:ssm:eu-west-1:123456789012:parameter/shop/api-key"}
      ],
      "logConfiguration": {
        "logDriver": "awslogs",
        "options": {"awslogs-group": "/ecs/shop-api", "awslogs-region": "eu-west-1", "awslogs-stream-prefix": "ecs"}
      },
      "healthCheck": {"command": ["CMD-SHELL", "wget -q -O - http://127.0.0.1:8080/health || exit 1"], "interval": 30, "timeout": 5, "retries": 3, "startPeriod": 10}
    },
    {
      "name": "envoy",
      "image": "public.ecr.aws/appmesh/aws-appmesh-envoy:v1.27.0.0-prod",
      "essential": false,
      "dependsOn": [{"containerName": "api", "condition": "HEALTHY"}],
      "logConfiguration": {
        "logDriver": "awslogs",
        "options": {"awslogs-group": "/ecs/shop-api", "awslogs-region": "eu-west-1", "awslogs-stream-prefix": "envoy"}
      }
    }
  ]
}"#;

const DESCRIBE_OUTPUT_WITH_NULLS: &str = r#"{"taskDefinition": {
  "taskDefinitionArn": "arn:aws:ecs:us-east-1:123456789012:task-definition/worker:12",
  "family": "worker", "revision": 12, "status": "ACTIVE", "networkMode": "bridge",
  "requiresAttributes": [{"name": "com.amazonaws.ecs.capability.logging-driver.json-file"}],
  "compatibilities": ["EC2"], "registeredAt": "2024-03-01T10:00:00.000Z", "registeredBy": "arn:aws:iam::123456789012:user/ci",
  "placementConstraints": [], "volumes": [],
  "containerDefinitions": [{
    "name": "worker", "image": "busybox:1.36", "cpu": 128, "memory": 256, "memoryReservation": null,
    "links": null, "portMappings": [], "essential": true, "entryPoint": null, "command": ["sleep", "3600"],
    "environment": [], "environmentFiles": null, "mountPoints": [], "volumesFrom": [], "linuxParameters": null,
    "secrets": null, "dependsOn": null, "startTimeout": null, "stopTimeout": null, "hostname": null, "user": null,
    "workingDirectory": null, "disableNetworking": null, "privileged": null, "readonlyRootFilesystem": null,
    "dnsServers": null, "dnsSearchDomains": null, "extraHosts": null, "dockerSecurityOptions": null,
    "interactive": null, "pseudoTerminal": null, "dockerLabels": null, "ulimits": null, "logConfiguration": null,
    "healthCheck": null, "systemControls": null, "resourceRequirements": null, "firelensConfiguration": null,
    "repositoryCredentials": null, "gpu": null, "credentialSpecs": null
  }]
}, "tags": []}"#;

const UNFILLED_TEMPLATE: &str = r#"{"family": "web", "containerDefinitions": [
 {"name": "web", "image": "<IMAGE1_NAME>", "essential": true},
 {"name": "jobs", "image": "registry.example.com/jobs:${TAG}", "essential": false}]}"#;

const FIRELENS_WITHOUT_ROUTER: &str = r#"{"family": "web", "containerDefinitions": [
 {"name": "web", "image": "nginx:1.25", "essential": true,
  "logConfiguration": {"logDriver": "awsfirelens", "options": {"Name": "cloudwatch"}}}]}"#;

/// The ECS developer guide's FireLens example: a Fluent Bit router (its own logs to awslogs)
/// and an application whose logs it sends to CloudWatch.
const FIRELENS_FLUENT_BIT: &str = r#"{"family": "firelens-example-cloudwatch",
  "taskRoleArn": "arn:aws:iam::123456789012:role/ecs_task_iam_role",
  "executionRoleArn": "arn:aws:iam::123456789012:role/ecs_task_execution_role",
  "containerDefinitions": [
   {"essential": true, "image": "public.ecr.aws/aws-observability/aws-for-fluent-bit:stable",
    "name": "log_router", "user": "0", "memoryReservation": 50,
    "firelensConfiguration": {"type": "fluentbit", "options": {"enable-ecs-log-metadata": "true"}},
    "logConfiguration": {"logDriver": "awslogs", "options": {"awslogs-group": "firelens-container",
      "awslogs-region": "us-west-2", "awslogs-create-group": "true", "awslogs-stream-prefix": "firelens"}}},
   {"essential": true, "image": "nginx", "name": "app", "memoryReservation": 100,
    "logConfiguration": {"logDriver": "awsfirelens", "options": {"Name": "cloudwatch_logs",
      "region": "us-west-2", "log_group_name": "firelens-blog", "auto_create_group": "true",
      "log_stream_prefix": "from-fluent-bit", "log-driver-buffer-limit": "2097152"}}}]}"#;

const AWSVPC_HOST_PORT_DIFFERS: &str = r#"{"family": "web", "networkMode": "awsvpc",
  "containerDefinitions": [{"name": "web", "image": "nginx:1.25", "essential": true,
    "hostname": "web", "portMappings": [{"containerPort": 80, "hostPort": 8080}]}]}"#;

const GPU_TRAINING: &str = r#"{"family": "train", "requiresCompatibilities": ["EC2"],
  "containerDefinitions": [
    {"name": "trainer", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04", "memory": 2048,
     "command": ["nvidia-smi"], "resourceRequirements": [{"type": "GPU", "value": "2"}]},
    {"name": "exporter", "image": "busybox:1.36", "memory": 64, "essential": false,
     "resourceRequirements": []}]}"#;

const INFERENCE_ACCELERATOR: &str = r#"{"family": "infer",
  "containerDefinitions": [{"name": "model", "image": "busybox:1.36", "memory": 256,
    "resourceRequirements": [{"type": "InferenceAccelerator", "value": "device_1"}]}]}"#;

fn validate(definition: &str) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_deckhand"))
        .args(["validate", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn deckhand validate");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(definition.as_bytes())
        .expect("write the definition");
    let output = child.wait_with_output().expect("deckhand exits");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), printed)
}

#[test]
fn real_shaped_task_definitions_validate_with_messages_people_can_act_on() {
    let cases = [
        Case {
            name: "a Fargate service: awsvpc, awslogs with a stream prefix, secrets, a sidecar",
            definition: FARGATE_SERVICE,
            exit_code: 0,
            shown: &[
                "valid: family \"shop-api\", 2 containers, start order: api, envoy",
                "warning: ephemeralStorage: ignored: a Fargate sizing promise",
            ],
            // The roles are the agent's to use or ignore (DECKHAND_TASK_ROLES), not a
            // definition's fault: the submit names them when they are ignored.
            not_shown: &[
                "error:",
                "awsvpc is not supported",
                "secrets: not supported",
                "executionRoleArn",
                "taskRoleArn",
            ],
        },
        Case {
            name: "describe-task-definition output with nulls: one line for the empty keys",
            definition: DESCRIBE_OUTPUT_WITH_NULLS,
            exit_code: 0,
            shown: &[
                "valid: family \"worker\" revision 12, 1 container",
                "warning: taskDefinition.containerDefinitions[0]: ignored, empty: credentialSpecs, \
                 gpu\n",
            ],
            not_shown: &["error:", "containerDefinitions[0].gpu"],
        },
        Case {
            name: "template placeholders never filled in are named as such",
            definition: UNFILLED_TEMPLATE,
            exit_code: 2,
            shown: &[
                "error: containerDefinitions[0].image: looks like an unfilled template placeholder \"<IMAGE1_NAME>\"",
                "error: containerDefinitions[1].image: looks like an unfilled template placeholder \"${TAG}\"",
            ],
            not_shown: &["lowercase"],
        },
        Case {
            name: "awsfirelens without a log router container",
            definition: FIRELENS_WITHOUT_ROUTER,
            exit_code: 2,
            shown: &["error: containerDefinitions[0].logConfiguration.logDriver: awsfirelens sends the logs to the task's FireLens log router"],
            not_shown: &[],
        },
        Case {
            name: "a FireLens task: a Fluent Bit router and an awsfirelens application",
            definition: FIRELENS_FLUENT_BIT,
            exit_code: 0,
            shown: &["valid: family \"firelens-example-cloudwatch\", 2 containers, start order: log_router, app"],
            not_shown: &["error:", "firelensConfiguration"],
        },
        Case {
            name: "awsvpc: ECS's rules, every error at once",
            definition: AWSVPC_HOST_PORT_DIFFERS,
            exit_code: 2,
            shown: &[
                "error: containerDefinitions[0].hostname: not supported for tasks that use the awsvpc network mode",
                "error: containerDefinitions[0].portMappings[0].hostPort: with networkMode awsvpc, hostPort (8080) must equal containerPort (80)",
            ],
            not_shown: &[],
        },
        Case {
            name: "GPUs by resourceRequirements: valid, whatever this host has",
            definition: GPU_TRAINING,
            exit_code: 0,
            shown: &["valid: family \"train\", 2 containers"],
            not_shown: &["error:", "resourceRequirements"],
        },
        Case {
            name: "an Elastic Inference accelerator is refused, naming the requirement",
            definition: INFERENCE_ACCELERATOR,
            exit_code: 2,
            shown: &["error: containerDefinitions[0].resourceRequirements[0].type: InferenceAccelerator is not supported by deckhand"],
            not_shown: &[],
        },
    ];
    for case in cases {
        let (exit_code, printed) = validate(case.definition);
        assert_eq!(
            exit_code, case.exit_code,
            "{}: exit code; printed:\n{printed}",
            case.name
        );
        for line in case.shown {
            assert!(
                printed.contains(line),
                "{}: missing {line:?}; printed:\n{printed}",
                case.name
            );
        }
        for text in case.not_shown {
            assert!(
                !printed.contains(text),
                "{}: printed {text:?}:\n{printed}",
                case.name
            );
        }
    }
}
