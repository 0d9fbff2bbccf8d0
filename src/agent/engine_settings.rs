//! The agent's configuration turned into the engine's settings and sources: the engine
//! imports nothing of the configuration.

use super::*;

/// The agent turns its configuration into the engine's settings here, so the engine imports
/// nothing of the configuration.
impl EngineConfig {
    /// The engine's part of the agent configuration; the rest keeps its defaults. Reads this
    /// host's memory and cores for the host capacity (§9a).
    pub fn from_agent_config(config: &Config) -> EngineConfig {
        let mem_total_mib = match crate::host::read_mem_total_mib() {
            Ok(mib) => Some(mib),
            Err(error) => {
                log::warn!("{error}: task memory is not accounted on this host");
                None
            }
        };
        EngineConfig {
            host_capacity: host_capacity(
                config,
                mem_total_mib,
                crate::host::cpu_cores(),
                crate::host::gpus::for_tasks(&config.gpu_ids),
            ),
            cluster: config.cluster.clone(),
            cleanup_wait: config.task_cleanup_wait,
            stop_timeout: config.container_stop_timeout,
            steady_check_interval: config.steady_state_check_interval,
            pull_behavior: config.image_pull_behavior.into(),
            pull_dependent_containers_upfront: config.pull_dependent_containers_upfront,
            disable_privileged: config.privileged_disabled,
            remove_orphans: config.remove_orphans,
            docker_concurrency: config.docker_concurrency,
            registry_credentials: Arc::new(config.registry_credentials.clone()),
            exclude_ipv6_port_bindings: config.exclude_ipv6_port_bindings,
            secrets_file: Some(config.secrets_file.clone()),
            aws_logs: aws_logs_setup(&config.aws_logs),
            data_dir: Some(config.data_dir.clone()),
            environment_files_dir: config.environment_files_dir.clone(),
            environment_files: environment_file_source(
                &config.environment_files,
                config.environment_files_dir.clone(),
            ),
            execution_role: execution_role(config),
            ..EngineConfig::default()
        }
    }
}

/// The engine reads environment files through its own trait; the ECS side's mirror-then-S3
/// source is it (wired here, so the engine imports nothing of the ECS connection).
impl crate::engine::environment_files::EnvironmentFileSource
    for crate::control::ecs::s3::S3EnvironmentFiles
{
    fn fetch(&self, _arn: &str, bucket: &str, key: &str) -> Result<Vec<u8>, String> {
        crate::control::ecs::s3::S3EnvironmentFiles::fetch(self, bucket, key)
    }
}

/// SSM, Secrets Manager and ECR for the execution role's pulls and secrets; `None` (with a
/// warning) when a proxy variable cannot be used, so only the local secret store answers.
fn execution_role(config: &Config) -> Option<Arc<dyn crate::engine::workers::ExecutionRoleAws>> {
    match crate::net::proxy::ProxySettings::from_env() {
        Ok(proxies) => Some(Arc::new(super::execution_role::AwsExecutionRole::new(
            config, proxies,
        ))),
        Err(error) => {
            log::warn!("SSM, Secrets Manager and ECR cannot be reached: {error}");
            None
        }
    }
}

/// The mirror and S3 for `environmentFiles`; `None` (with a warning) when the S3 endpoint
/// cannot be parsed, so such a task fails naming its file rather than the agent not starting.
fn environment_file_source(
    config: &crate::config::EnvironmentFilesConfig,
    mirror: Option<std::path::PathBuf>,
) -> Option<Arc<dyn crate::engine::environment_files::EnvironmentFileSource>> {
    let credentials = Arc::new(
        crate::control::ecs::credentials::CredentialChain::from_values(&config.credential_values),
    );
    match crate::control::ecs::s3::S3EnvironmentFiles::new(
        mirror,
        config.region.clone(),
        config.endpoint.as_deref(),
        credentials,
        // The proxy variables come from the process environment, as for the ECS connection.
        crate::net::proxy::ProxySettings::from_env(),
    ) {
        Ok(source) => Some(Arc::new(source)),
        Err(error) => {
            log::warn!("environment files cannot be fetched from S3: {error}");
            None
        }
    }
}

/// Whether awslogs containers ship (§13): a region, and AWS credentials in deckhand's
/// environment or config file or in the shared credentials file's profile (read here, once,
/// at start). Docker's awslogs driver takes its credentials from the Docker daemon's own
/// environment: this is the operator's word that the host is set up to ship logs.
pub fn aws_logs_setup(
    config: &crate::config::AwsLogsConfig,
) -> crate::engine::log_driver::AwsLogsSetup {
    let in_shared_file = || {
        config
            .shared_credentials_file
            .as_ref()
            .and_then(|path| std::fs::read_to_string(path).ok())
            .is_some_and(|text| Config::credentials_file_has_profile(&text, &config.profile))
    };
    crate::engine::log_driver::AwsLogsSetup {
        fallback_driver: config.log_driver_fallback.clone(),
        region: config.region.clone(),
        credentials: config.access_keys || in_shared_file(),
    }
}

/// What the host offers tasks (§9a): `MemTotal` (MiB) less `ECS_RESERVED_MEMORY` (unlimited when
/// the host's memory could not be read), 1024 CPU units per core, the reserved ports, and the
/// GPUs by id.
pub fn host_capacity(
    config: &Config,
    mem_total_mib: Option<u64>,
    cpu_cores: u64,
    gpu_ids: Vec<String>,
) -> HostCapacity {
    HostCapacity {
        gpu_ids,
        memory_mib: mem_total_mib.map_or(u64::MAX, |total| {
            total.saturating_sub(config.reserved_memory_mib)
        }),
        cpu_units: cpu_cores.saturating_mul(1024),
        reserved_tcp_ports: crate::sorting::set_of(config.reserved_ports.iter().copied()),
        reserved_udp_ports: crate::sorting::set_of(config.reserved_ports_udp.iter().copied()),
    }
}

/// The configured `ECS_IMAGE_PULL_BEHAVIOR` as the engine's pull behaviour. The configuration
/// imports nothing of the task model, so the two types meet here, where the agent turns its
/// configuration into engine settings.
impl From<ImagePullBehavior> for PullBehavior {
    fn from(setting: ImagePullBehavior) -> PullBehavior {
        match setting {
            ImagePullBehavior::Default => PullBehavior::Default,
            ImagePullBehavior::Always => PullBehavior::Always,
            ImagePullBehavior::Once => PullBehavior::Once,
            ImagePullBehavior::PreferCached => PullBehavior::PreferCached,
        }
    }
}

/// `DECKHAND_TASK_ROLES=assume|host`: the thread that gives local tasks' roles their
/// credentials, and what the engine tells it of each role; `None` for `off`. STS is called in
/// `AWS_REGION` (else `us-east-1`, where STS's global endpoint signs), signed with the host's
/// credentials: the chain the ECS connection and S3 read.
pub(super) fn start_task_roles(
    config: &Config,
    store: &CredentialsStore,
) -> Option<(
    crate::control::task_roles::TaskRoleRefresher,
    Arc<dyn crate::role_credentials::local::LocalRoles>,
)> {
    use crate::control::task_roles::{RefresherSettings, RoleSource, TaskRoleRefresher};
    let source = match config.task_roles {
        crate::config::TaskRoles::Off => return None,
        crate::config::TaskRoles::Assume => RoleSource::Assume,
        crate::config::TaskRoles::Host => {
            log::warn!(
                "DECKHAND_TASK_ROLES=host: every local task with a taskRoleArn or \
                 executionRoleArn is served this host's own AWS credentials; for development \
                 hosts only"
            );
            RoleSource::Host
        }
    };
    let proxies = match crate::net::proxy::ProxySettings::from_env() {
        Ok(proxies) => proxies,
        Err(error) => {
            log::error!("DECKHAND_TASK_ROLES: local tasks' roles get no credentials: {error}");
            return None;
        }
    };
    let settings = RefresherSettings {
        source,
        store: store.clone(),
        client: crate::control::aws::AwsClient::new(
            &|key| config.aws_endpoints.get(key).cloned(),
            proxies,
        ),
        host_credentials: Arc::new(crate::control::ecs::CredentialChain::from_values(
            &config.environment_files.credential_values,
        )),
        region: config
            .environment_files
            .region
            .clone()
            .unwrap_or_else(|| "us-east-1".to_string()),
        stopping: Arc::default(),
    };
    match TaskRoleRefresher::start(settings) {
        Ok(started) => Some(started),
        Err(error) => {
            log::error!("DECKHAND_TASK_ROLES: cannot start the task roles thread: {error}");
            None
        }
    }
}
