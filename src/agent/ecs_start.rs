//! `ECS_EXTERNAL=true` at start: what the ECS connection needs, checked before Docker is
//! reached, then the connection started.

use super::*;

/// What the ECS connection needs that can be checked before Docker is reached.
pub(super) struct PreparedEcs {
    endpoint: crate::control::ecs::Endpoint,
    credentials: Arc<crate::control::ecs::CredentialChain>,
    custom_attributes: Vec<(String, String)>,
    tags: Vec<(String, String)>,
    region: String,
    record: Arc<crate::control::ecs::reporter::RecordFile>,
    proxies: crate::net::proxy::ProxySettings,
}

/// `ECS_EXTERNAL=true`: the endpoint parses, the attributes and tags follow ECS's rules, there are
/// credentials (the message says where they were looked for), and `ecs.json` reads.
pub(super) fn prepare_ecs(
    ecs: &crate::config::EcsConfig,
    data_dir: &Path,
) -> Result<PreparedEcs, String> {
    use crate::control::ecs::{register, CredentialChain, Endpoint};
    register::check_ecs_architecture(std::env::consts::ARCH)?;
    let endpoint =
        Endpoint::parse(&ecs.backend_host).map_err(|error| format!("ECS_BACKEND_HOST: {error}"))?;
    let attributes = crate::sorting::json_object_of(
        ecs.instance_attributes
            .iter()
            .map(|(name, value)| (name.clone(), serde_json::Value::String(value.clone()))),
    );
    let custom_attributes =
        register::parse_instance_attributes(&serde_json::Value::Object(attributes).to_string())
            .map_err(|error| format!("ECS_INSTANCE_ATTRIBUTES: {error}"))?;
    // The proxy variables come from the process environment (a systemd drop-in), as curl and
    // the ECS agent read them; one that cannot be used stops the start, naming it.
    let proxies = crate::net::proxy::ProxySettings::from_env()?;
    let tags = crate::sorting::json_object_of(
        ecs.instance_tags
            .iter()
            .map(|(key, value)| (key.clone(), serde_json::Value::String(value.clone()))),
    );
    let tags = register::parse_instance_tags(&serde_json::Value::Object(tags).to_string())
        .map_err(|error| error.to_string())?;
    let mut values = std::collections::BTreeMap::new();
    let mut put = |key: &str, value: Option<&String>| {
        if let Some(value) = value {
            values.insert(key.to_string(), value.clone());
        }
    };
    put("AWS_ACCESS_KEY_ID", ecs.access_key_id.as_ref());
    put("AWS_SECRET_ACCESS_KEY", ecs.secret_access_key.as_ref());
    put("AWS_SESSION_TOKEN", ecs.session_token.as_ref());
    put("AWS_PROFILE", Some(&ecs.profile));
    put(
        "AWS_SHARED_CREDENTIALS_FILE",
        Some(&ecs.shared_credentials_file.display().to_string()),
    );
    let credentials = Arc::new(CredentialChain::from_values(&values));
    credentials
        .current()
        .map_err(|error| format!("ECS_EXTERNAL=true needs AWS credentials: {error}"))?;
    // A damaged record must not make this host register as a new instance or report twice:
    // the operator looks at it (the message names it) before the agent goes on.
    let record = crate::control::ecs::reporter::RecordFile::open(data_dir)?;
    Ok(PreparedEcs {
        record: Arc::new(record),
        endpoint,
        credentials,
        custom_attributes,
        tags,
        region: ecs.region.clone(),
        proxies,
    })
}

impl PreparedEcs {
    pub(super) fn settings(
        self,
        config: &Config,
        docker_api_version: (u32, u32),
        docker_version: Option<String>,
    ) -> crate::control::ecs::connection::EcsSettings {
        use crate::control::ecs::register::{ecs_cpu_architecture, RegistrationInput};
        let mem_total_mib = crate::host::read_mem_total_mib().unwrap_or(0);
        crate::control::ecs::connection::EcsSettings {
            cluster: config.cluster.clone(),
            region: self.region,
            endpoint: self.endpoint,
            credentials: self.credentials,
            registration: RegistrationInput {
                cluster: config.cluster.clone(),
                container_instance_arn: None,
                cpu_cores: u32::try_from(crate::host::cpu_cores()).unwrap_or(u32::MAX),
                memory_mib: mem_total_mib,
                reserved_memory_mib: config.reserved_memory_mib.min(mem_total_mib),
                reserved_tcp_ports: config.reserved_ports.clone(),
                reserved_udp_ports: config.reserved_ports_udp.clone(),
                docker_api_version,
                agent_version: crate::VERSION.to_string(),
                agent_hash: String::new(),
                docker_version: docker_version.clone().unwrap_or_default(),
                privileged_disabled: config.privileged_disabled,
                // Made true by the agent once the task metadata listener is up.
                credentials_served: false,
                cpu_architecture: ecs_cpu_architecture(std::env::consts::ARCH).to_string(),
                custom_attributes: self.custom_attributes,
                tags: self.tags,
                client_token: crate::engine::container_spec::random_hex(16).unwrap_or_default(),
            },
            record: self.record,
            exclude_ipv6: config.exclude_ipv6_port_bindings,
            docker_version,
            proxies: self.proxies,
            disable_metrics: config.disable_metrics,
            docker_ping: Arc::new(|| true),
            role_credentials: CredentialsStore::new(),
        }
    }
}
