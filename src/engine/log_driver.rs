//! A container's log configuration as Docker gets it (docs/ENGINE.md §13, "awslogs"): the
//! ECS-only options translated as ECS translates them, and an awslogs container run with a local
//! driver when this host has no AWS credentials or region to ship its logs with. Pure functions
//! over the task model and the agent's [`AwsLogsSetup`]; table-tested.

use crate::engine::messages::{SecretTarget, SecretUse};
use crate::role_credentials::{relative_uri, AWSLOGS_CREDENTIALS_ENDPOINT_OPTION};
use crate::runtime::LogConfig;
use crate::task::{ContainerDefinition, LogFallback, Task};
use std::collections::BTreeMap;

pub const AWSLOGS: &str = "awslogs";
const STREAM_PREFIX: &str = "awslogs-stream-prefix";
const STREAM: &str = "awslogs-stream";
const REGION: &str = "awslogs-region";
/// The buffer the ECS agent gives a `mode: non-blocking` log driver that sets none.
const NON_BLOCKING_BUFFER_DEFAULT: &str = "10m";

/// What the agent's configuration says about shipping awslogs logs from this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsLogsSetup {
    /// `DECKHAND_LOG_DRIVER_FALLBACK`.
    pub fallback_driver: String,
    /// `AWS_REGION`, else `AWS_DEFAULT_REGION`.
    pub region: Option<String>,
    /// AWS credentials are configured: both access keys in deckhand's environment or config
    /// file, or the shared credentials file holding `AWS_PROFILE`.
    pub credentials: bool,
}

impl Default for AwsLogsSetup {
    fn default() -> AwsLogsSetup {
        AwsLogsSetup {
            fallback_driver: "json-file".to_string(),
            region: None,
            credentials: false,
        }
    }
}

/// Whether an awslogs container ships to CloudWatch through Docker's driver, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AwsLogsDecision {
    /// Docker's awslogs driver, in this region.
    Ship { region: String },
    /// The fallback driver, for this reason.
    Fallback { reason: String },
}

/// The decision for a container whose awslogs options are `options`: a region (its
/// `awslogs-region`, else the agent's) and credentials are both needed.
pub fn awslogs_decision(
    options: &BTreeMap<String, String>,
    setup: &AwsLogsSetup,
) -> AwsLogsDecision {
    let region = options
        .get(REGION)
        .filter(|region| !region.trim().is_empty())
        .cloned()
        .or_else(|| setup.region.clone());
    match (setup.credentials, region) {
        (true, Some(region)) => AwsLogsDecision::Ship { region },
        (false, None) => AwsLogsDecision::Fallback {
            reason: "no AWS credentials and no region configured".to_string(),
        },
        (false, Some(_)) => AwsLogsDecision::Fallback {
            reason: "no AWS credentials configured".to_string(),
        },
        (true, None) => AwsLogsDecision::Fallback {
            reason: "no AWS region configured (awslogs-region, AWS_REGION)".to_string(),
        },
    }
}

/// ECS's task id: the last part of the task ARN.
fn task_id_of(task: &Task) -> &str {
    task.arn.rsplit('/').next().unwrap_or(&task.id)
}

/// The log configuration Docker gets for `definition` of `task`, the fallback when one is
/// used, and the log options to read from the secret store (none with a fallback: the local
/// driver takes no options). An awslogs container of a task with execution-role credentials
/// ships with them: Docker's driver is pointed at their endpoint
/// (`awslogs-credentials-endpoint`, as the ECS agent's `ApplyExecutionRoleLogsAuth` does), so
/// the host needs no AWS credentials of its own.
pub fn docker_log_config(
    task: &Task,
    definition: &ContainerDefinition,
    setup: &AwsLogsSetup,
) -> (Option<LogConfig>, Option<LogFallback>, Vec<SecretUse>) {
    let Some(log) = &definition.log_configuration else {
        return (None, None, Vec::new());
    };
    let mut options = log.options.clone();
    if log.log_driver == AWSLOGS {
        let execution_credentials = task.credentials_ids.execution_role.as_deref();
        let with_role;
        let setup = match execution_credentials {
            Some(_) => {
                with_role = AwsLogsSetup {
                    credentials: true,
                    ..setup.clone()
                };
                &with_role
            }
            None => setup,
        };
        match awslogs_decision(&options, setup) {
            AwsLogsDecision::Fallback { reason } => {
                let config = LogConfig {
                    driver: setup.fallback_driver.clone(),
                    options: BTreeMap::new(),
                };
                let fallback = LogFallback {
                    log_driver: setup.fallback_driver.clone(),
                    reason,
                };
                return (Some(config), Some(fallback), Vec::new());
            }
            AwsLogsDecision::Ship { region } => {
                // Docker's driver does not know the prefix: ECS names the stream
                // prefix/container-name/task-id, unless the definition names it.
                if let Some(prefix) = options.remove(STREAM_PREFIX) {
                    options.entry(STREAM.to_string()).or_insert_with(|| {
                        format!("{prefix}/{}/{}", definition.name, task_id_of(task))
                    });
                }
                options.entry(REGION.to_string()).or_insert(region);
                if let Some(id) = execution_credentials {
                    options.insert(
                        AWSLOGS_CREDENTIALS_ENDPOINT_OPTION.to_string(),
                        relative_uri(id),
                    );
                }
            }
        }
    }
    if options
        .get("mode")
        .is_some_and(|mode| mode == "non-blocking")
    {
        options
            .entry("max-buffer-size".to_string())
            .or_insert_with(|| NON_BLOCKING_BUFFER_DEFAULT.to_string());
    }
    let secrets = log
        .secret_options
        .iter()
        .map(|secret| SecretUse {
            target: SecretTarget::LogOption,
            name: secret.name.clone(),
            value_from: secret.value_from.clone(),
        })
        .collect();
    let config = LogConfig {
        driver: log.log_driver.clone(),
        options,
    };
    (Some(config), None, secrets)
}

/// The environment variables of `definition` to read from the secret store.
pub fn environment_secrets(definition: &ContainerDefinition) -> Vec<SecretUse> {
    definition
        .secrets
        .iter()
        .map(|secret| SecretUse {
            target: SecretTarget::Environment,
            name: secret.name.clone(),
            value_from: secret.value_from.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{LogConfiguration, SecretReference, TaskDefinition};

    fn options(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    }

    #[test]
    fn awslogs_ships_only_with_credentials_and_a_region() {
        let setup = |credentials: bool, region: Option<&str>| AwsLogsSetup {
            fallback_driver: "json-file".into(),
            region: region.map(str::to_string),
            credentials,
        };
        let ship = |region: &str| AwsLogsDecision::Ship {
            region: region.into(),
        };
        let fallback = |reason: &str| AwsLogsDecision::Fallback {
            reason: reason.into(),
        };
        // (credentials, agent region, awslogs-region option, decision)
        let table = [
            (true, Some("eu-west-1"), None, ship("eu-west-1")),
            (
                true,
                Some("eu-west-1"),
                Some("us-east-1"),
                ship("us-east-1"),
            ),
            (true, None, Some("us-east-1"), ship("us-east-1")),
            (
                true,
                None,
                Some(" "),
                fallback("no AWS region configured (awslogs-region, AWS_REGION)"),
            ),
            (
                true,
                None,
                None,
                fallback("no AWS region configured (awslogs-region, AWS_REGION)"),
            ),
            (
                false,
                Some("eu-west-1"),
                None,
                fallback("no AWS credentials configured"),
            ),
            (
                false,
                None,
                Some("us-east-1"),
                fallback("no AWS credentials configured"),
            ),
            (
                false,
                None,
                None,
                fallback("no AWS credentials and no region configured"),
            ),
        ];
        for (credentials, region, option, expected) in table {
            let options = match option {
                Some(region) => options(&[(REGION, region)]),
                None => BTreeMap::new(),
            };
            assert_eq!(
                awslogs_decision(&options, &setup(credentials, region)),
                expected,
                "{credentials} {region:?} {option:?}"
            );
        }
    }

    fn task_with_log(log: LogConfiguration) -> Task {
        let mut web = ContainerDefinition::new("web", "busybox");
        web.log_configuration = Some(log);
        let definition = TaskDefinition {
            roles: Default::default(),
            family: "shop".into(),
            revision: 1,
            network_mode: Default::default(),
            cpu: None,
            memory_mib: None,
            volumes: Vec::new(),
            containers: vec![web],
            pid_mode: None,
            ipc_mode: None,
        };
        Task::new(
            "0123456789abcdef0123456789abcdef".into(),
            "edge",
            definition,
            1,
            0,
        )
    }

    #[test]
    fn ecs_only_options_are_translated_when_logs_ship() {
        let setup = AwsLogsSetup {
            fallback_driver: "json-file".into(),
            region: Some("eu-west-1".into()),
            credentials: true,
        };
        // (options as written, options Docker gets)
        let table = [
            (
                vec![
                    ("awslogs-group", "/ecs/shop"),
                    ("awslogs-stream-prefix", "ecs"),
                ],
                vec![
                    ("awslogs-group", "/ecs/shop"),
                    ("awslogs-region", "eu-west-1"),
                    ("awslogs-stream", "ecs/web/0123456789abcdef0123456789abcdef"),
                ],
            ),
            (
                vec![
                    ("awslogs-stream-prefix", "ecs"),
                    ("awslogs-stream", "mine"),
                    ("awslogs-region", "us-east-1"),
                ],
                vec![("awslogs-region", "us-east-1"), ("awslogs-stream", "mine")],
            ),
            (
                vec![("awslogs-group", "g"), ("mode", "non-blocking")],
                vec![
                    ("awslogs-group", "g"),
                    ("awslogs-region", "eu-west-1"),
                    ("max-buffer-size", "10m"),
                    ("mode", "non-blocking"),
                ],
            ),
        ];
        for (written, expected) in table {
            let task = task_with_log(LogConfiguration {
                log_driver: "awslogs".into(),
                options: options(&written),
                secret_options: Vec::new(),
            });
            let (config, fallback, _) =
                docker_log_config(&task, &task.containers[0].definition, &setup);
            let config = config.expect("a log configuration");
            assert_eq!(config.driver, "awslogs");
            assert_eq!(config.options, options(&expected), "{written:?}");
            assert_eq!(fallback, None);
        }
    }

    #[test]
    fn without_credentials_awslogs_falls_back_with_no_options_and_no_secret_options() {
        let task = task_with_log(LogConfiguration {
            log_driver: "awslogs".into(),
            options: options(&[("awslogs-group", "g"), ("awslogs-stream-prefix", "ecs")]),
            secret_options: vec![SecretReference {
                name: "awslogs-credentials-endpoint".into(),
                value_from: "x".into(),
            }],
        });
        let (config, fallback, secrets) = docker_log_config(
            &task,
            &task.containers[0].definition,
            &AwsLogsSetup::default(),
        );
        assert_eq!(
            config,
            Some(LogConfig {
                driver: "json-file".into(),
                options: BTreeMap::new()
            })
        );
        assert_eq!(
            fallback,
            Some(LogFallback {
                log_driver: "json-file".into(),
                reason: "no AWS credentials and no region configured".into()
            })
        );
        assert!(secrets.is_empty());
    }

    #[test]
    fn other_drivers_pass_as_written_with_their_secret_options() {
        let task = task_with_log(LogConfiguration {
            log_driver: "splunk".into(),
            options: options(&[("splunk-url", "https://s:8088")]),
            secret_options: vec![SecretReference {
                name: "splunk-token".into(),
                value_from: "/splunk/token".into(),
            }],
        });
        let (config, fallback, secrets) = docker_log_config(
            &task,
            &task.containers[0].definition,
            &AwsLogsSetup::default(),
        );
        let config = config.expect("config");
        assert_eq!(
            (config.driver.as_str(), config.options),
            ("splunk", options(&[("splunk-url", "https://s:8088")]))
        );
        assert_eq!(fallback, None);
        assert_eq!(
            secrets,
            vec![SecretUse {
                target: SecretTarget::LogOption,
                name: "splunk-token".into(),
                value_from: "/splunk/token".into()
            }]
        );
    }

    #[test]
    fn an_execution_role_ships_awslogs_with_its_endpoint_and_its_absence_keeps_the_fallback() {
        let mut task = task_with_log(LogConfiguration {
            log_driver: "awslogs".into(),
            options: options(&[("awslogs-group", "g"), ("awslogs-region", "eu-west-1")]),
            secret_options: Vec::new(),
        });
        task.credentials_ids.task_role = Some("app-id".into());
        // (execution role id, the host's credentials, driver, the endpoint option)
        let table = [
            (None, false, "json-file", None),
            (None, true, "awslogs", None),
            (
                Some("exec-id"),
                false,
                "awslogs",
                Some("/v2/credentials/exec-id"),
            ),
            (
                Some("exec-id"),
                true,
                "awslogs",
                Some("/v2/credentials/exec-id"),
            ),
        ];
        for (execution, credentials, driver, endpoint) in table {
            task.credentials_ids.execution_role = execution.map(str::to_string);
            let setup = AwsLogsSetup {
                credentials,
                ..AwsLogsSetup::default()
            };
            let (config, fallback, _) =
                docker_log_config(&task, &task.containers[0].definition, &setup);
            let config = config.expect("a log configuration");
            assert_eq!(config.driver, driver, "{execution:?} {credentials}");
            assert_eq!(fallback.is_some(), driver == "json-file");
            assert_eq!(
                config
                    .options
                    .get("awslogs-credentials-endpoint")
                    .map(String::as_str),
                endpoint,
                "{execution:?} {credentials}"
            );
        }
        // Without a region, even the role cannot ship.
        let mut no_region = task_with_log(LogConfiguration {
            log_driver: "awslogs".into(),
            options: options(&[("awslogs-group", "g")]),
            secret_options: Vec::new(),
        });
        no_region.credentials_ids.execution_role = Some("exec-id".into());
        let (_, fallback, _) = docker_log_config(
            &no_region,
            &no_region.containers[0].definition,
            &AwsLogsSetup::default(),
        );
        assert!(fallback.is_some());
    }
}
