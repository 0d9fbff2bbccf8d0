//! The key table: every key deckhand reads, with its default for the system scope and its
//! meaning, in the order the packaged `deckhand.conf` lists them; and that file, rendered from
//! the table (a unit test checks `packaging/deckhand.conf` against it).

/// One configuration key as documented: the packaged `deckhand.conf` lists each of these,
/// commented out, with its default and meaning (a unit test checks it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigKeyDoc {
    pub key: &'static str,
    /// The default when the agent runs as root (the packaged service).
    pub system_default: &'static str,
    /// One line for the config file and `--help` texts.
    pub meaning: &'static str,
}

/// Every key deckhand reads, in the order the packaged config file lists them.
pub const CONFIG_KEYS: &[ConfigKeyDoc] = &[
    ConfigKeyDoc {
        key: "DOCKER_HOST",
        system_default: "unix:///var/run/docker.sock",
        meaning: "Docker Engine endpoint; only unix:// sockets are supported",
    },
    ConfigKeyDoc {
        key: "ECS_CLUSTER",
        system_default: "default",
        meaning: "cluster name written into every container's com.amazonaws.ecs.cluster label",
    },
    ConfigKeyDoc {
        key: "ECS_DATADIR",
        system_default: "/var/lib/deckhand",
        meaning: "directory for task checkpoints and the event log (absolute path)",
    },
    ConfigKeyDoc {
        key: "DECKHAND_API_SOCKET",
        system_default: "/run/deckhand/api.sock",
        meaning: "Unix socket of the local API used by the deckhand CLI (group deckhand may use it)",
    },
    ConfigKeyDoc {
        key: "DECKHAND_TASKS_DIR",
        system_default: "/etc/deckhand/tasks.d",
        meaning: "directory of task files (*.json task definitions, *.yaml Compose files) that should be running",
    },
    ConfigKeyDoc {
        key: "DECKHAND_INTROSPECTION_ADDR",
        system_default: "127.0.0.1:51678",
        meaning: "address of the read-only ECS introspection endpoint; empty turns it off",
    },
    ConfigKeyDoc {
        key: "DECKHAND_TASK_METADATA",
        system_default: "true",
        meaning: "serve the task metadata endpoint and set ECS_CONTAINER_METADATA_URI_V4 in containers (true/false)",
    },
    ConfigKeyDoc {
        key: "DECKHAND_TASK_METADATA_PORT",
        system_default: "51679",
        meaning: "port of the task metadata endpoint, on the Docker bridge gateway and 127.0.0.1",
    },
    ConfigKeyDoc {
        key: "DECKHAND_CREDENTIALS_ENDPOINT",
        system_default: "true",
        meaning: "redirect 169.254.170.2:80, from bridge containers and from the host, to the task metadata endpoint with iptables nat rules (true/false)",
    },
    ConfigKeyDoc {
        key: "DECKHAND_TASK_ROLES",
        system_default: "off",
        meaning: "IAM roles of local tasks (taskRoleArn, executionRoleArn): off (ignored), assume (STS AssumeRole with the host's credentials) or host (the host's own credentials; development hosts only)",
    },
    ConfigKeyDoc {
        key: "ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION",
        system_default: "3h",
        meaning: "how long a stopped task's containers are kept before removal; under 1s means the default",
    },
    ConfigKeyDoc {
        key: "ECS_CONTAINER_STOP_TIMEOUT",
        system_default: "30s",
        meaning: "grace between SIGTERM and SIGKILL when stopping a container (minimum 1s)",
    },
    ConfigKeyDoc {
        key: "ECS_CONTAINER_START_TIMEOUT",
        system_default: "3m",
        meaning: "how long a Docker start call may take (minimum 45s)",
    },
    ConfigKeyDoc {
        key: "ECS_CONTAINER_CREATE_TIMEOUT",
        system_default: "4m",
        meaning: "how long a Docker create call may take (minimum 1m)",
    },
    ConfigKeyDoc {
        key: "ECS_IMAGE_PULL_TIMEOUT",
        system_default: "2h",
        meaning: "how long one image pull may take",
    },
    ConfigKeyDoc {
        key: "ECS_IMAGE_PULL_BEHAVIOR",
        system_default: "default",
        meaning: "when to pull images: default, always, once or prefer-cached",
    },
    ConfigKeyDoc {
        key: "ECS_PULL_DEPENDENT_CONTAINERS_UPFRONT",
        system_default: "false",
        meaning: "pull a container's image before its dependencies are satisfied (true/false)",
    },
    ConfigKeyDoc {
        key: "ECS_DISABLE_IMAGE_CLEANUP",
        system_default: "false",
        meaning: "turn off the removal of unused images (true/false)",
    },
    ConfigKeyDoc {
        key: "ECS_IMAGE_CLEANUP_INTERVAL",
        system_default: "30m",
        meaning: "time between two image cleanup cycles (ECS's minimum 10m; less is accepted with a warning)",
    },
    ConfigKeyDoc {
        key: "ECS_IMAGE_MINIMUM_CLEANUP_AGE",
        system_default: "1h",
        meaning: "how long after deckhand first used an image it may be removed",
    },
    ConfigKeyDoc {
        key: "ECS_NUM_IMAGES_DELETE_PER_CYCLE",
        system_default: "5",
        meaning: "images one cleanup cycle removes at most, unless the disk is past DECKHAND_IMAGE_CLEANUP_DISK_HIGH (ECS's minimum 1; 0 is accepted with a warning)",
    },
    ConfigKeyDoc {
        key: "ECS_ENABLE_UNTRACKED_IMAGE_CLEANUP",
        system_default: "false",
        meaning: "also remove images no deckhand task used (true/false)",
    },
    ConfigKeyDoc {
        key: "NON_ECS_IMAGE_MINIMUM_CLEANUP_AGE",
        system_default: "1h",
        meaning: "how long after its creation an image no deckhand task used may be removed",
    },
    ConfigKeyDoc {
        key: "ECS_EXCLUDE_UNTRACKED_IMAGE",
        system_default: "",
        meaning: "images never removed, as a comma-separated list of names (repository:tag)",
    },
    ConfigKeyDoc {
        key: "DECKHAND_IMAGE_CLEANUP_DISK_HIGH",
        system_default: "85",
        meaning: "percent used of the file system of Docker's root directory that starts a cleanup cycle at once, 1 to 100",
    },
    ConfigKeyDoc {
        key: "DECKHAND_IMAGE_CLEANUP_DISK_LOW",
        system_default: "80",
        meaning: "percent used such a cycle removes images until it is below, 0 to 99 and below the high mark",
    },
    ConfigKeyDoc {
        key: "ECS_DISABLE_PRIVILEGED",
        system_default: "false",
        meaning: "reject tasks with privileged containers (true/false)",
    },
    ConfigKeyDoc {
        key: "ECS_EXCLUDE_IPV6_PORTBINDING",
        system_default: "true",
        meaning: "leave out the IPv6 (::) twin of each IPv4 (0.0.0.0) port binding Docker reports (true/false)",
    },
    ConfigKeyDoc {
        key: "ECS_RESERVED_PORTS",
        system_default: "[22, 2375, 2376, 51678, 51679]",
        meaning: "TCP host ports no task may bind, as a JSON list",
    },
    ConfigKeyDoc {
        key: "ECS_RESERVED_PORTS_UDP",
        system_default: "[]",
        meaning: "UDP host ports no task may bind, as a JSON list",
    },
    ConfigKeyDoc {
        key: "ECS_RESERVED_MEMORY",
        system_default: "0",
        meaning: "MiB of the host's memory kept from tasks; a task waits until the rest has room for it",
    },
    ConfigKeyDoc {
        key: "DECKHAND_GPU_IDS",
        system_default: "",
        meaning: "the NVIDIA GPUs tasks' resourceRequirements of type GPU are given, by id, comma-separated (e.g. GPU-8b4e…,GPU-0c1d…); empty: those nvidia-smi -L or /proc/driver/nvidia/gpus lists at start (README: GPUs)",
    },
    ConfigKeyDoc {
        key: "ECS_LOGLEVEL",
        system_default: "info",
        meaning: "log level: debug, info, warn, error or crit",
    },
    ConfigKeyDoc {
        key: "DECKHAND_STEADY_CHECK_INTERVAL",
        system_default: "5m",
        meaning: "how often a running task re-checks its containers with Docker",
    },
    ConfigKeyDoc {
        key: "DECKHAND_REMOVE_ORPHANS",
        system_default: "false",
        meaning: "remove labelled containers that belong to no known task at start (true/false)",
    },
    ConfigKeyDoc {
        key: "DECKHAND_DOCKER_CONCURRENCY",
        system_default: "8",
        meaning: "Docker calls made at once, 1 to 64; stops go first and pulls never take the last worker",
    },
    ConfigKeyDoc {
        key: "ECS_ENGINE_AUTH_TYPE",
        system_default: "",
        meaning: "format of ECS_ENGINE_AUTH_DATA: docker or dockercfg; empty for no registry credentials",
    },
    ConfigKeyDoc {
        key: "ECS_ENGINE_AUTH_DATA",
        system_default: "",
        meaning: "registry credentials: one line of JSON keyed by registry host[:port] (README: Private registries); a password here makes this file a secret, keep it mode 0640 or 0600",
    },
    ConfigKeyDoc {
        key: "DECKHAND_SECRETS_FILE",
        system_default: "/etc/deckhand/secrets.json",
        meaning: "the local secret store: a JSON object from valueFrom (secrets, secretOptions, repositoryCredentials) to its value; mode 0600, owned by the agent's user (README: Secrets)",
    },
    ConfigKeyDoc {
        key: "DECKHAND_ENVIRONMENT_FILES_DIR",
        system_default: "",
        meaning: "a directory mirroring S3 objects as <bucket>/<key>, synced while online: environmentFiles ARNs are read from it before S3, FireLens config-file-type s3 files only from it (absolute path; empty: none; README: Environment files)",
    },
    ConfigKeyDoc {
        key: "AWS_ENDPOINT_URL_S3",
        system_default: "",
        meaning: "the S3 endpoint environment files are fetched from (empty: AWS_ENDPOINT_URL, else https://s3.<region>.amazonaws.com)",
    },
    ConfigKeyDoc {
        key: "AWS_ENDPOINT_URL_STS",
        system_default: "",
        meaning: "the STS endpoint tasks' roles are assumed at (empty: AWS_ENDPOINT_URL, else https://sts.<region>.amazonaws.com)",
    },
    ConfigKeyDoc {
        key: "AWS_ENDPOINT_URL_SSM",
        system_default: "",
        meaning: "the SSM endpoint secrets' parameters are read from (empty: AWS_ENDPOINT_URL, else https://ssm.<region>.amazonaws.com)",
    },
    ConfigKeyDoc {
        key: "AWS_ENDPOINT_URL_SECRETS_MANAGER",
        system_default: "",
        meaning: "the Secrets Manager endpoint secrets are read from (empty: AWS_ENDPOINT_URL, else https://secretsmanager.<region>.amazonaws.com)",
    },
    ConfigKeyDoc {
        key: "AWS_ENDPOINT_URL_ECR",
        system_default: "",
        meaning: "the ECR API endpoint registry logins are asked from (empty: AWS_ENDPOINT_URL, else https://api.ecr.<region>.amazonaws.com)",
    },
    ConfigKeyDoc {
        key: "AWS_ENDPOINT_URL",
        system_default: "",
        meaning: "the endpoint of every AWS service deckhand calls that has no endpoint key of its own set (S3, STS, SSM, Secrets Manager, ECR)",
    },
    ConfigKeyDoc {
        key: "DECKHAND_LOG_DRIVER_FALLBACK",
        system_default: "json-file",
        meaning: "the log driver an awslogs container runs with when no AWS credentials and region are configured (README: awslogs)",
    },
    ConfigKeyDoc {
        key: "ECS_EXTERNAL",
        system_default: "false",
        meaning: "join the Amazon ECS cluster ECS_CLUSTER as an external instance (true/false; README: Joining an ECS cluster; x86_64 and arm64 hosts only, as ECS supports no 32-bit ARM); false runs local tasks only",
    },
    ConfigKeyDoc {
        key: "ECS_DISABLE_METRICS",
        system_default: "false",
        meaning: "with ECS_EXTERNAL=true: send no CPU and memory metrics to ECS (the telemetry session still sends container health and the Docker check) (true/false)",
    },
    ConfigKeyDoc {
        key: "ECS_BACKEND_HOST",
        system_default: "",
        meaning: "the ECS API endpoint URL when ECS_EXTERNAL=true (empty: https://ecs.<region>.amazonaws.com)",
    },
    ConfigKeyDoc {
        key: "ECS_INSTANCE_ATTRIBUTES",
        system_default: "",
        meaning: "custom attributes registered with ECS, a JSON object of names to values, e.g. {\"stack\":\"prod\"}",
    },
    ConfigKeyDoc {
        key: "ECS_CONTAINER_INSTANCE_TAGS",
        system_default: "",
        meaning: "tags of the container instance, sent at every registration with ECS: a JSON object of keys to values, e.g. {\"site\":\"depot-7\"} (ECS's rules: at most 50, keys 1-128 and values up to 256 characters, letters, digits, spaces and _ . : / = + - @, no aws: prefix)",
    },
    ConfigKeyDoc {
        key: "AWS_REGION",
        system_default: "",
        meaning: "AWS region for awslogs containers that set no awslogs-region (AWS_DEFAULT_REGION is read when this is empty)",
    },
    ConfigKeyDoc {
        key: "AWS_DEFAULT_REGION",
        system_default: "",
        meaning: "AWS region, as the AWS CLI reads it, when AWS_REGION is not set",
    },
    ConfigKeyDoc {
        key: "AWS_ACCESS_KEY_ID",
        system_default: "",
        meaning: "with AWS_SECRET_ACCESS_KEY: the credentials deckhand signs its ECS requests with (ECS_EXTERNAL=true), and says that this host ships awslogs logs (Docker's awslogs driver reads the Docker daemon's own credentials)",
    },
    ConfigKeyDoc {
        key: "AWS_SECRET_ACCESS_KEY",
        system_default: "",
        meaning: "the secret half of AWS_ACCESS_KEY_ID; a value here makes this file a secret",
    },
    ConfigKeyDoc {
        key: "AWS_SESSION_TOKEN",
        system_default: "",
        meaning: "the session token of temporary AWS credentials; a value here makes this file a secret",
    },
    ConfigKeyDoc {
        key: "AWS_SHARED_CREDENTIALS_FILE",
        system_default: "",
        meaning: "the AWS shared credentials file looked into for AWS_PROFILE (empty: $HOME/.aws/credentials, /root/.aws/credentials without HOME); re-read when it changes",
    },
    ConfigKeyDoc {
        key: "AWS_PROFILE",
        system_default: "default",
        meaning: "the profile of the shared credentials file that ECS requests are signed with and that counts as AWS credentials for awslogs",
    },
];

/// Keys whose value is a secret: no message, warning or `Debug` output quotes it.
pub(super) const SECRET_KEYS: &[&str] = &[
    "ECS_ENGINE_AUTH_DATA",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
];

/// Whether `key`'s value must never be quoted (see [`SECRET_KEYS`]).
pub(super) fn is_secret_key(key: &str) -> bool {
    SECRET_KEYS.contains(&key)
}

/// Renders the packaged `deckhand.conf`: a header and, per key, its meaning and the key commented
/// out with its system default. `packaging/deckhand.conf` is this text (a unit test checks it).
pub fn render_packaged_config_file() -> String {
    let mut text = String::from(
        "# deckhand configuration: KEY=VALUE lines, '#' starts a comment.\n\
         # Every key below is commented out and shows its default. Environment variables of the\n\
         # same name override this file. A bad value or an unknown key stops the agent with exit\n\
         # code 78 and a message naming the key and line (systemd does not restart it then).\n\
         # Durations are written like 90s, 5m, 1h30m or 500ms.\n",
    );
    for doc in CONFIG_KEYS {
        text.push('\n');
        text.push_str(&format!("# {}\n", doc.meaning));
        text.push_str(&format!("#{}={}\n", doc.key, doc.system_default));
    }
    text
}

/// The system default of `key` as written in the table.
pub(super) fn default_of(key: &str) -> &'static str {
    CONFIG_KEYS
        .iter()
        .find(|doc| doc.key == key)
        .map(|doc| doc.system_default)
        .expect("every key read is in CONFIG_KEYS")
}
