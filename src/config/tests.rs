//! Table-driven tests of the configuration rules: defaults per scope, file syntax, environment
//! over file, every bad value, minimum clamps and the packaged config file staying in step with
//! the key table.

use super::*;
use crate::registry::RegistryCredentials;
use crate::state::scratch::ScratchDir;
use std::cell::Cell;

/// An environment made of `(key, value)` pairs.
fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let owned: Vec<(String, String)> = pairs
        .iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect();
    move |key: &str| {
        owned
            .iter()
            .rev()
            .find(|(candidate, _)| candidate == key)
            .map(|(_, value)| value.clone())
    }
}

fn config_file_path() -> &'static Path {
    Path::new("/etc/deckhand/deckhand.conf")
}

fn system_config(file: Option<&str>, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let env = env_of(env);
    Config::from_sources(
        file.map(|text| (config_file_path(), text)),
        &env,
        Scope::System,
    )
}

#[test]
fn system_defaults_match_the_documented_table() {
    let config = system_config(None, &[]).expect("defaults load");
    assert_eq!(
        config,
        Config {
            docker_host: "unix:///var/run/docker.sock".into(),
            docker_socket_path: PathBuf::from("/var/run/docker.sock"),
            cluster: "default".into(),
            data_dir: PathBuf::from("/var/lib/deckhand"),
            api_socket: PathBuf::from("/run/deckhand/api.sock"),
            tasks_dir: PathBuf::from("/etc/deckhand/tasks.d"),
            introspection_addr: Some("127.0.0.1:51678".parse().expect("literal address")),
            task_metadata: true,
            task_metadata_port: 51679,
            credentials_endpoint: true,
            task_roles: TaskRoles::Off,
            task_cleanup_wait: Duration::from_secs(3 * 3600),
            container_stop_timeout: Duration::from_secs(30),
            container_start_timeout: Duration::from_secs(180),
            container_create_timeout: Duration::from_secs(240),
            image_pull_timeout: Duration::from_secs(2 * 3600),
            image_pull_behavior: ImagePullBehavior::Default,
            pull_dependent_containers_upfront: false,
            privileged_disabled: false,
            disable_metrics: false,
            exclude_ipv6_port_bindings: true,
            reserved_ports: vec![22, 2375, 2376, 51678, 51679],
            reserved_ports_udp: vec![],
            reserved_memory_mib: 0,
            gpu_ids: vec![],
            log_level: LevelFilter::Info,
            steady_state_check_interval: Duration::from_secs(300),
            remove_orphans: false,
            docker_concurrency: 8,
            registry_credentials: RegistryCredentials::default(),
            image_cleanup: ImageCleanupConfig {
                disabled: false,
                interval: Duration::from_secs(30 * 60),
                minimum_age: Duration::from_secs(3600),
                images_per_cycle: 5,
                untracked_cleanup: false,
                untracked_minimum_age: Duration::from_secs(3600),
                excluded_images: vec![],
                disk_high_percent: 85,
                disk_low_percent: 80,
            },
            secrets_file: PathBuf::from("/etc/deckhand/secrets.json"),
            environment_files_dir: None,
            aws_logs: AwsLogsConfig {
                log_driver_fallback: "json-file".into(),
                region: None,
                access_keys: false,
                shared_credentials_file: None,
                profile: "default".into(),
            },
            ecs: None,
            environment_files: EnvironmentFilesConfig {
                credential_values: [
                    ("AWS_PROFILE".to_string(), "default".to_string()),
                    (
                        "AWS_SHARED_CREDENTIALS_FILE".to_string(),
                        "/root/.aws/credentials".to_string(),
                    ),
                ]
                .into(),
                ..EnvironmentFilesConfig::default()
            },
            aws_endpoints: Default::default(),
            scope: Scope::System,
            config_file: None,
            warnings: vec![],
        }
    );
}

#[test]
fn the_awslogs_keys_and_the_secrets_file() {
    let config = system_config(
        Some("AWS_ACCESS_KEY_ID=AKIDEXAMPLE\nAWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI\nAWS_DEFAULT_REGION=eu-west-1\n"),
        &[("HOME", "/root"), ("DECKHAND_SECRETS_FILE", "/srv/secrets.json")],
    )
    .expect("loads");
    assert_eq!(config.secrets_file, PathBuf::from("/srv/secrets.json"));
    assert_eq!(config.aws_logs.region.as_deref(), Some("eu-west-1"));
    assert!(config.aws_logs.access_keys);
    assert_eq!(
        config.aws_logs.shared_credentials_file,
        Some(PathBuf::from("/root/.aws/credentials"))
    );
    assert!(
        !format!("{config:?}").contains("wJalrXUtnFEMI"),
        "no secret in Debug"
    );
    let error =
        system_config(None, &[("DECKHAND_LOG_DRIVER_FALLBACK", "awslogs")]).expect_err("refused");
    assert!(
        error.to_string().contains("DECKHAND_LOG_DRIVER_FALLBACK"),
        "{error}"
    );
    let error = system_config(Some("AWS_SECRET_ACCESS_KEY=\"wJalr\n"), &[]).expect_err("refused");
    assert!(!error.to_string().contains("wJalr"), "{error}");
    let user =
        Config::from_sources(None, &env_of(&[("HOME", "/home/u")]), Scope::User).expect("loads");
    assert_eq!(
        user.secrets_file,
        PathBuf::from("/home/u/.config/deckhand/secrets.json")
    );
}

#[test]
fn shared_credentials_profiles() {
    // (file, profile, has it)
    let table = [
        (
            "[default]\naws_access_key_id = A\naws_secret_access_key = S\n",
            "default",
            true,
        ),
        ("[default]\naws_access_key_id = A\n", "default", false),
        (
            "[edge]\naws_access_key_id=A\naws_secret_access_key=S\n[default]\nregion=x\n",
            "default",
            false,
        ),
        (
            "[edge]\naws_access_key_id=A\naws_secret_access_key=S\n[default]\nregion=x\n",
            "edge",
            true,
        ),
        ("", "default", false),
        (
            "[default]\naws_access_key_id =\naws_secret_access_key = S\n",
            "default",
            false,
        ),
    ];
    for (text, profile, expected) in table {
        assert_eq!(
            Config::credentials_file_has_profile(text, profile),
            expected,
            "{text:?} {profile}"
        );
    }
}

#[test]
fn every_documented_default_is_what_the_loader_uses() {
    // Each key's documented default, written explicitly, gives the same config as leaving it out.
    let implicit = system_config(None, &[]).expect("defaults load");
    for doc in CONFIG_KEYS {
        let explicit = system_config(None, &[(doc.key, doc.system_default)])
            .unwrap_or_else(|error| panic!("{}: documented default rejected: {error}", doc.key));
        assert_eq!(explicit, implicit, "{}", doc.key);
    }
}

#[test]
fn user_scope_defaults_move_to_xdg_places() {
    struct Case {
        name: &'static str,
        env: &'static [(&'static str, &'static str)],
        data_dir: &'static str,
        api_socket: &'static str,
        tasks_dir: &'static str,
        config_file: &'static str,
    }
    let cases = [
        Case {
            name: "all XDG variables set",
            env: &[
                ("HOME", "/home/dev"),
                ("XDG_STATE_HOME", "/x/state"),
                ("XDG_RUNTIME_DIR", "/run/user/1000"),
                ("XDG_CONFIG_HOME", "/x/config"),
            ],
            data_dir: "/x/state/deckhand",
            api_socket: "/run/user/1000/deckhand/api.sock",
            tasks_dir: "/x/config/deckhand/tasks.d",
            config_file: "/x/config/deckhand/deckhand.conf",
        },
        Case {
            name: "only HOME",
            env: &[("HOME", "/home/dev")],
            data_dir: "/home/dev/.local/state/deckhand",
            api_socket: "/home/dev/.local/state/deckhand/api.sock",
            tasks_dir: "/home/dev/.config/deckhand/tasks.d",
            config_file: "/home/dev/.config/deckhand/deckhand.conf",
        },
        Case {
            name: "relative XDG values are ignored",
            env: &[
                ("HOME", "/home/dev"),
                ("XDG_STATE_HOME", "state"),
                ("XDG_RUNTIME_DIR", "run"),
                ("XDG_CONFIG_HOME", "config"),
            ],
            data_dir: "/home/dev/.local/state/deckhand",
            api_socket: "/home/dev/.local/state/deckhand/api.sock",
            tasks_dir: "/home/dev/.config/deckhand/tasks.d",
            config_file: "/home/dev/.config/deckhand/deckhand.conf",
        },
        Case {
            name: "explicit data dir carries the fallback socket",
            env: &[("HOME", "/home/dev"), ("ECS_DATADIR", "/srv/dh")],
            data_dir: "/srv/dh",
            api_socket: "/srv/dh/api.sock",
            tasks_dir: "/home/dev/.config/deckhand/tasks.d",
            config_file: "/home/dev/.config/deckhand/deckhand.conf",
        },
    ];
    for case in cases {
        let env = env_of(case.env);
        let config = Config::from_sources(None, &env, Scope::User)
            .unwrap_or_else(|error| panic!("{}: {error}", case.name));
        assert_eq!(
            config.data_dir,
            PathBuf::from(case.data_dir),
            "{}",
            case.name
        );
        assert_eq!(
            config.api_socket,
            PathBuf::from(case.api_socket),
            "{}",
            case.name
        );
        assert_eq!(
            config.tasks_dir,
            PathBuf::from(case.tasks_dir),
            "{}",
            case.name
        );
        assert_eq!(config.scope, Scope::User, "{}", case.name);
        assert_eq!(
            default_config_file(Scope::User, &env).expect("user config path"),
            PathBuf::from(case.config_file),
            "{}",
            case.name
        );
    }
}

#[test]
fn user_scope_without_home_or_xdg_names_the_key_to_set() {
    let env = env_of(&[]);
    let error = Config::from_sources(None, &env, Scope::User).expect_err("no home");
    let message = error.to_string();
    assert!(message.contains("ECS_DATADIR"), "{message}");
    assert!(message.contains("XDG_STATE_HOME"), "{message}");
    // With every path given explicitly, no home directory is needed.
    let env = env_of(&[
        ("ECS_DATADIR", "/srv/dh"),
        ("DECKHAND_TASKS_DIR", "/srv/dh/tasks.d"),
        ("DECKHAND_SECRETS_FILE", "/srv/dh/secrets.json"),
    ]);
    let config = Config::from_sources(None, &env, Scope::User).expect("explicit paths");
    assert_eq!(config.api_socket, PathBuf::from("/srv/dh/api.sock"));
}

#[test]
fn system_scope_ignores_xdg_variables() {
    let config = system_config(
        None,
        &[
            ("HOME", "/root"),
            ("XDG_STATE_HOME", "/x"),
            ("XDG_RUNTIME_DIR", "/run/user/0"),
        ],
    )
    .expect("loads");
    assert_eq!(config.data_dir, PathBuf::from("/var/lib/deckhand"));
    assert_eq!(config.api_socket, PathBuf::from("/run/deckhand/api.sock"));
}

/// One value per key, different from the default, with the field it must land in.
type FieldCheck = fn(&Config) -> String;
const NON_DEFAULT_VALUES: &[(&str, &str, &str, FieldCheck)] = &[
    ("DOCKER_HOST", "unix:///tmp/d.sock", "/tmp/d.sock", |c| {
        c.docker_socket_path.display().to_string()
    }),
    ("ECS_CLUSTER", "edge-7", "edge-7", |c| c.cluster.clone()),
    ("ECS_DATADIR", "/srv/deckhand", "/srv/deckhand", |c| {
        c.data_dir.display().to_string()
    }),
    (
        "DECKHAND_API_SOCKET",
        "/srv/api.sock",
        "/srv/api.sock",
        |c| c.api_socket.display().to_string(),
    ),
    ("DECKHAND_TASKS_DIR", "/srv/tasks", "/srv/tasks", |c| {
        c.tasks_dir.display().to_string()
    }),
    (
        "DECKHAND_INTROSPECTION_ADDR",
        "0.0.0.0:9000",
        "Some(0.0.0.0:9000)",
        |c| format!("{:?}", c.introspection_addr),
    ),
    ("DECKHAND_TASK_METADATA", "false", "false", |c| {
        c.task_metadata.to_string()
    }),
    ("DECKHAND_TASK_METADATA_PORT", "9179", "9179", |c| {
        c.task_metadata_port.to_string()
    }),
    ("DECKHAND_CREDENTIALS_ENDPOINT", "false", "false", |c| {
        c.credentials_endpoint.to_string()
    }),
    (
        "ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION",
        "10m",
        "600s",
        |c| format!("{}s", c.task_cleanup_wait.as_secs()),
    ),
    ("ECS_CONTAINER_STOP_TIMEOUT", "5s", "5s", |c| {
        format!("{}s", c.container_stop_timeout.as_secs())
    }),
    ("ECS_CONTAINER_START_TIMEOUT", "1m", "60s", |c| {
        format!("{}s", c.container_start_timeout.as_secs())
    }),
    ("ECS_CONTAINER_CREATE_TIMEOUT", "2m", "120s", |c| {
        format!("{}s", c.container_create_timeout.as_secs())
    }),
    ("ECS_IMAGE_PULL_TIMEOUT", "15m", "900s", |c| {
        format!("{}s", c.image_pull_timeout.as_secs())
    }),
    ("DECKHAND_TASK_ROLES", "assume", "Assume", |c| {
        format!("{:?}", c.task_roles)
    }),
    ("DECKHAND_TASK_ROLES", "host", "Host", |c| {
        format!("{:?}", c.task_roles)
    }),
    (
        "ECS_IMAGE_PULL_BEHAVIOR",
        "prefer-cached",
        "PreferCached",
        |c| format!("{:?}", c.image_pull_behavior),
    ),
    (
        "ECS_PULL_DEPENDENT_CONTAINERS_UPFRONT",
        "true",
        "true",
        |c| c.pull_dependent_containers_upfront.to_string(),
    ),
    ("ECS_DISABLE_PRIVILEGED", "true", "true", |c| {
        c.privileged_disabled.to_string()
    }),
    ("ECS_DISABLE_METRICS", "true", "true", |c| {
        c.disable_metrics.to_string()
    }),
    ("ECS_EXCLUDE_IPV6_PORTBINDING", "false", "false", |c| {
        c.exclude_ipv6_port_bindings.to_string()
    }),
    ("ECS_RESERVED_PORTS", "[80,443]", "[80, 443]", |c| {
        format!("{:?}", c.reserved_ports)
    }),
    ("ECS_RESERVED_PORTS_UDP", "[53, 5353]", "[53, 5353]", |c| {
        format!("{:?}", c.reserved_ports_udp)
    }),
    ("ECS_RESERVED_MEMORY", "256", "256", |c| {
        c.reserved_memory_mib.to_string()
    }),
    ("DECKHAND_GPU_IDS", "GPU-a, GPU-b", "GPU-a,GPU-b", |c| {
        c.gpu_ids.join(",")
    }),
    ("ECS_LOGLEVEL", "debug", "DEBUG", |c| {
        c.log_level.to_string()
    }),
    ("DECKHAND_STEADY_CHECK_INTERVAL", "30s", "30s", |c| {
        format!("{}s", c.steady_state_check_interval.as_secs())
    }),
    ("DECKHAND_REMOVE_ORPHANS", "true", "true", |c| {
        c.remove_orphans.to_string()
    }),
    ("DECKHAND_DOCKER_CONCURRENCY", "2", "2", |c| {
        c.docker_concurrency.to_string()
    }),
    ("ECS_DISABLE_IMAGE_CLEANUP", "true", "true", |c| {
        c.image_cleanup.disabled.to_string()
    }),
    ("ECS_IMAGE_CLEANUP_INTERVAL", "1h", "3600s", |c| {
        format!("{}s", c.image_cleanup.interval.as_secs())
    }),
    ("ECS_IMAGE_MINIMUM_CLEANUP_AGE", "3h", "10800s", |c| {
        format!("{}s", c.image_cleanup.minimum_age.as_secs())
    }),
    ("ECS_NUM_IMAGES_DELETE_PER_CYCLE", "12", "12", |c| {
        c.image_cleanup.images_per_cycle.to_string()
    }),
    ("ECS_ENABLE_UNTRACKED_IMAGE_CLEANUP", "true", "true", |c| {
        c.image_cleanup.untracked_cleanup.to_string()
    }),
    ("NON_ECS_IMAGE_MINIMUM_CLEANUP_AGE", "2h", "7200s", |c| {
        format!("{}s", c.image_cleanup.untracked_minimum_age.as_secs())
    }),
    (
        "ECS_EXCLUDE_UNTRACKED_IMAGE",
        "nginx:1.25, ,registry.local:5000/app:v2",
        "[\"nginx:1.25\", \"registry.local:5000/app:v2\"]",
        |c| format!("{:?}", c.image_cleanup.excluded_images),
    ),
    ("DECKHAND_IMAGE_CLEANUP_DISK_HIGH", "95", "95", |c| {
        c.image_cleanup.disk_high_percent.to_string()
    }),
    ("DECKHAND_IMAGE_CLEANUP_DISK_LOW", "50", "50", |c| {
        c.image_cleanup.disk_low_percent.to_string()
    }),
    ("DECKHAND_SECRETS_FILE", "/srv/s.json", "/srv/s.json", |c| {
        c.secrets_file.display().to_string()
    }),
    (
        "DECKHAND_ENVIRONMENT_FILES_DIR",
        "/srv/mirror",
        "/srv/mirror",
        |c| {
            c.environment_files_dir
                .as_ref()
                .map(|path| path.display().to_string())
                .unwrap_or_default()
        },
    ),
    ("DECKHAND_LOG_DRIVER_FALLBACK", "local", "local", |c| {
        c.aws_logs.log_driver_fallback.clone()
    }),
    ("AWS_REGION", "eu-west-1", "eu-west-1", |c| {
        c.aws_logs.region.clone().unwrap_or_default()
    }),
    ("AWS_DEFAULT_REGION", "us-east-2", "us-east-2", |c| {
        c.aws_logs.region.clone().unwrap_or_default()
    }),
    ("AWS_SHARED_CREDENTIALS_FILE", "/srv/aws", "/srv/aws", |c| {
        c.aws_logs
            .shared_credentials_file
            .as_ref()
            .map(|path| path.display().to_string())
            .unwrap_or_default()
    }),
    ("AWS_PROFILE", "edge", "edge", |c| {
        c.aws_logs.profile.clone()
    }),
    (
        "AWS_ENDPOINT_URL_S3",
        "http://127.0.0.1:9000",
        "http://127.0.0.1:9000",
        |c| c.environment_files.endpoint.clone().unwrap_or_default(),
    ),
    (
        "AWS_ENDPOINT_URL",
        "http://127.0.0.1:9001",
        "http://127.0.0.1:9001",
        |c| c.environment_files.endpoint.clone().unwrap_or_default(),
    ),
    (
        "AWS_ENDPOINT_URL_STS",
        "http://127.0.0.1:9002",
        "http://127.0.0.1:9002",
        |c| {
            c.aws_endpoints
                .get("AWS_ENDPOINT_URL_STS")
                .cloned()
                .unwrap_or_default()
        },
    ),
    (
        "AWS_ENDPOINT_URL_SSM",
        "http://127.0.0.1:9003",
        "http://127.0.0.1:9003",
        |c| {
            c.aws_endpoints
                .get("AWS_ENDPOINT_URL_SSM")
                .cloned()
                .unwrap_or_default()
        },
    ),
    (
        "AWS_ENDPOINT_URL_SECRETS_MANAGER",
        "http://127.0.0.1:9004",
        "http://127.0.0.1:9004",
        |c| {
            c.aws_endpoints
                .get("AWS_ENDPOINT_URL_SECRETS_MANAGER")
                .cloned()
                .unwrap_or_default()
        },
    ),
    (
        "AWS_ENDPOINT_URL_ECR",
        "http://127.0.0.1:9005",
        "http://127.0.0.1:9005",
        |c| {
            c.aws_endpoints
                .get("AWS_ENDPOINT_URL_ECR")
                .cloned()
                .unwrap_or_default()
        },
    ),
];

#[test]
fn every_key_is_covered_by_the_non_default_table() {
    // Read only as a pair; `registry_credentials_load_in_both_formats_from_file_or_environment`
    // covers them (file, environment, and the environment over the file).
    // The AWS access keys likewise: `the_awslogs_keys_and_the_secrets_file`.
    // The ECS connection's keys mean something only with ECS_EXTERNAL=true and a region:
    // `ecs_settings_take_ecs_names_and_defaults` and `ecs_keys_come_from_the_file_too`.
    let paired = [
        "ECS_ENGINE_AUTH_TYPE",
        "ECS_ENGINE_AUTH_DATA",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "ECS_EXTERNAL",
        "ECS_BACKEND_HOST",
        "ECS_INSTANCE_ATTRIBUTES",
        "ECS_CONTAINER_INSTANCE_TAGS",
        "AWS_SESSION_TOKEN",
    ];
    for doc in CONFIG_KEYS.iter().filter(|doc| !paired.contains(&doc.key)) {
        assert!(
            NON_DEFAULT_VALUES.iter().any(|(key, ..)| *key == doc.key),
            "{} has no row in NON_DEFAULT_VALUES",
            doc.key
        );
    }
}

#[test]
fn each_key_is_read_from_the_file_and_from_the_environment() {
    let defaults = system_config(None, &[]).expect("defaults");
    for (key, value, expected, field) in NON_DEFAULT_VALUES {
        assert_ne!(
            field(&defaults),
            *expected,
            "{key}: table value equals the default"
        );
        let from_file = system_config(Some(&format!("{key}={value}\n")), &[])
            .unwrap_or_else(|error| panic!("{key} in file: {error}"));
        assert_eq!(field(&from_file), *expected, "{key} from the file");
        let from_env = system_config(None, &[(key, value)])
            .unwrap_or_else(|error| panic!("{key} in env: {error}"));
        assert_eq!(field(&from_env), *expected, "{key} from the environment");
    }
}

#[test]
fn the_environment_overrides_the_file_for_every_key() {
    for (key, value, expected, field) in NON_DEFAULT_VALUES {
        // The file holds the documented default; the environment holds the other value.
        let file = format!("{key}={}\n", default_of(key));
        let config = system_config(Some(&file), &[(key, value)])
            .unwrap_or_else(|error| panic!("{key}: {error}"));
        assert_eq!(field(&config), *expected, "{key}: environment must win");
    }
}

#[test]
fn an_empty_environment_variable_leaves_the_file_value() {
    let config = system_config(Some("ECS_CLUSTER=edge\n"), &[("ECS_CLUSTER", "")]).expect("ok");
    assert_eq!(config.cluster, "edge");
}

#[test]
fn empty_introspection_address_turns_the_endpoint_off() {
    let from_file = system_config(Some("DECKHAND_INTROSPECTION_ADDR=\n"), &[]).expect("ok");
    assert_eq!(from_file.introspection_addr, None);
    let from_env = system_config(None, &[("DECKHAND_INTROSPECTION_ADDR", "")]).expect("ok");
    assert_eq!(from_env.introspection_addr, None);
    let quoted = system_config(Some("DECKHAND_INTROSPECTION_ADDR=\"\"\n"), &[]).expect("ok");
    assert_eq!(quoted.introspection_addr, None);
    // Other keys treat empty as unset.
    let cluster = system_config(Some("ECS_CLUSTER=\n"), &[]).expect("ok");
    assert_eq!(cluster.cluster, "default");
}

#[test]
fn bad_values_are_errors_naming_the_key_the_value_and_the_expected_form() {
    let cases: &[(&str, &str, &str)] = &[
        ("DOCKER_HOST", "tcp://127.0.0.1:2375", "unix:///"),
        ("DOCKER_HOST", "unix://relative.sock", "absolute path"),
        ("DOCKER_HOST", "/var/run/docker.sock", "unix:///"),
        ("ECS_DATADIR", "var/lib/deckhand", "absolute path"),
        ("DECKHAND_API_SOCKET", "api.sock", "absolute path"),
        ("DECKHAND_TASKS_DIR", "./tasks.d", "absolute path"),
        ("DECKHAND_INTROSPECTION_ADDR", "localhost:51678", "IP:PORT"),
        ("DECKHAND_INTROSPECTION_ADDR", "127.0.0.1", "IP:PORT"),
        ("ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION", "3", "no unit"),
        ("ECS_CONTAINER_STOP_TIMEOUT", "30", "no unit"),
        ("ECS_CONTAINER_START_TIMEOUT", "3 minutes", "unknown unit"),
        ("ECS_CONTAINER_CREATE_TIMEOUT", "-4m", "not a duration"),
        ("ECS_IMAGE_PULL_TIMEOUT", "2d", "unknown unit"),
        ("DECKHAND_STEADY_CHECK_INTERVAL", "5min", "unknown unit"),
        ("ECS_IMAGE_PULL_BEHAVIOR", "never", "prefer-cached"),
        ("DECKHAND_TASK_ROLES", "on", "expected off, assume or host"),
        (
            "ECS_PULL_DEPENDENT_CONTAINERS_UPFRONT",
            "yes",
            "true or false",
        ),
        ("ECS_DISABLE_PRIVILEGED", "1", "true or false"),
        ("ECS_DISABLE_METRICS", "yes", "true or false"),
        ("DECKHAND_REMOVE_ORPHANS", "TRUE", "true or false"),
        ("DECKHAND_TASK_METADATA", "no", "true or false"),
        ("DECKHAND_CREDENTIALS_ENDPOINT", "off", "true or false"),
        ("DECKHAND_TASK_METADATA_PORT", "0", "from 1 to 65535"),
        ("DECKHAND_TASK_METADATA_PORT", "65536", "from 1 to 65535"),
        ("DECKHAND_DOCKER_CONCURRENCY", "0", "from 1 to 64"),
        ("DECKHAND_DOCKER_CONCURRENCY", "65", "from 1 to 64"),
        ("DECKHAND_DOCKER_CONCURRENCY", "eight", "from 1 to 64"),
        ("DECKHAND_DOCKER_CONCURRENCY", "-1", "from 1 to 64"),
        ("ECS_RESERVED_PORTS", "22,2375", "JSON list"),
        ("ECS_RESERVED_PORTS", "[22, 70000]", "JSON list"),
        ("ECS_RESERVED_PORTS", "[\"22\"]", "JSON list"),
        ("ECS_RESERVED_PORTS_UDP", "53", "JSON list"),
        ("ECS_RESERVED_MEMORY", "256MiB", "whole number of MiB"),
        ("DECKHAND_GPU_IDS", "GPU-a,,GPU-b", "is not a GPU id"),
        ("DECKHAND_GPU_IDS", "GPU-a,GPU-a", "given twice"),
        ("ECS_DISABLE_IMAGE_CLEANUP", "yes", "true or false"),
        ("ECS_IMAGE_CLEANUP_INTERVAL", "30", "no unit"),
        ("ECS_IMAGE_MINIMUM_CLEANUP_AGE", "1d", "unknown unit"),
        (
            "NON_ECS_IMAGE_MINIMUM_CLEANUP_AGE",
            "an hour",
            "not a duration",
        ),
        ("ECS_NUM_IMAGES_DELETE_PER_CYCLE", "-1", "from 0 to 1000"),
        ("ECS_NUM_IMAGES_DELETE_PER_CYCLE", "five", "from 0 to 1000"),
        ("ECS_ENABLE_UNTRACKED_IMAGE_CLEANUP", "on", "true or false"),
        (
            "ECS_EXCLUDE_UNTRACKED_IMAGE",
            "a:1,b c:2",
            "separated by commas",
        ),
        ("DECKHAND_IMAGE_CLEANUP_DISK_HIGH", "0", "from 1 to 100"),
        ("DECKHAND_IMAGE_CLEANUP_DISK_HIGH", "101", "from 1 to 100"),
        ("DECKHAND_IMAGE_CLEANUP_DISK_LOW", "100", "from 0 to 99"),
        (
            "DECKHAND_IMAGE_CLEANUP_DISK_LOW",
            "85",
            "below DECKHAND_IMAGE_CLEANUP_DISK_HIGH",
        ),
        ("ECS_RESERVED_MEMORY", "-1", "whole number of MiB"),
        (
            "ECS_LOGLEVEL",
            "verbose",
            "debug, info, warn, error or crit",
        ),
    ];
    for (key, value, expected_reason) in cases {
        let error = system_config(None, &[(key, value)]).expect_err(key);
        let message = error.to_string();
        assert!(
            matches!(&error, ConfigError::BadValue { key: k, origin: ValueOrigin::Environment, .. } if k == key),
            "{key}={value}: {error:?}"
        );
        assert!(message.contains(key), "{message}");
        assert!(message.contains(&format!("{value:?}")), "{message}");
        assert!(
            message.contains(expected_reason),
            "{key}={value}: {message}"
        );
        assert!(message.starts_with("environment:"), "{message}");

        let file = format!("# header\n\n{key}={value}\n");
        let error = system_config(Some(&file), &[]).expect_err(key);
        let message = error.to_string();
        assert!(
            message.starts_with("/etc/deckhand/deckhand.conf:3: "),
            "{key}={value}: {message}"
        );
        assert!(message.contains(key), "{message}");
        assert!(message.contains(expected_reason), "{message}");
    }
}

#[test]
fn a_bad_environment_value_is_an_error_even_when_the_file_is_fine() {
    let error = system_config(Some("ECS_LOGLEVEL=info\n"), &[("ECS_LOGLEVEL", "loud")])
        .expect_err("env is bad");
    assert!(error.to_string().contains("ECS_LOGLEVEL"), "{error}");
}

#[test]
fn unknown_keys_in_the_file_are_errors_naming_file_line_and_key() {
    for key in [
        "ECS_AVAILABLE_LOGGING_DRIVERS",
        "DECKHAND_FOO",
        "PATH",
        "ecs_cluster",
    ] {
        let file = format!("ECS_CLUSTER=a\n{key}=x\n");
        let error = system_config(Some(&file), &[]).expect_err(key);
        assert!(
            matches!(&error, ConfigError::UnknownKey { line: 2, key: k, .. } if k == key),
            "{key}: {error:?}"
        );
        let message = error.to_string();
        assert!(
            message.starts_with("/etc/deckhand/deckhand.conf:2: unknown key"),
            "{message}"
        );
        assert!(message.contains(key), "{message}");
    }
}

#[test]
fn unknown_variables_in_the_environment_are_ignored() {
    let asked = Cell::new(0usize);
    // An environment where every variable holds garbage except the ones deckhand knows.
    let env = |key: &str| {
        asked.set(asked.get() + 1);
        if CONFIG_KEYS.iter().any(|doc| doc.key == key) {
            None
        } else {
            Some("not a valid anything".to_string())
        }
    };
    let config = Config::from_sources(None, &env, Scope::System).expect("unknown env ignored");
    assert_eq!(config.cluster, "default");
    assert!(asked.get() >= CONFIG_KEYS.len());
}

#[test]
fn file_syntax_forms() {
    let accepted: &[(&str, &str)] = &[
        ("ECS_CLUSTER=edge", "edge"),
        ("  ECS_CLUSTER = edge  ", "edge"),
        ("ECS_CLUSTER=\"edge\"", "edge"),
        ("ECS_CLUSTER='edge'", "edge"),
        ("export ECS_CLUSTER=edge", "edge"),
        ("export\tECS_CLUSTER=\"edge\"", "edge"),
        (
            "# comment\n\n   # indented comment\nECS_CLUSTER=edge",
            "edge",
        ),
        ("ECS_CLUSTER=first\nECS_CLUSTER=edge", "edge"),
        ("ECS_CLUSTER=a=b", "a=b"),
        ("ECS_CLUSTER=edge\r\n", "edge"),
        ("", "default"),
    ];
    for (file, cluster) in accepted {
        let config =
            system_config(Some(file), &[]).unwrap_or_else(|error| panic!("{file:?}: {error}"));
        assert_eq!(config.cluster, *cluster, "{file:?}");
        assert_eq!(config.config_file.as_deref(), Some(config_file_path()));
    }

    let rejected: &[(&str, usize, &str)] = &[
        ("ECS_CLUSTER edge", 1, "expected KEY=VALUE"),
        ("\n\n=edge", 3, "expected KEY=VALUE"),
        ("ECS CLUSTER=edge", 1, "expected KEY=VALUE"),
        ("ECS_CLUSTER=\"edge", 1, "unterminated"),
        ("ECS_CLUSTER='edge\"", 1, "unterminated"),
        ("exportECS_CLUSTER=edge", 1, "unknown key"),
    ];
    for (file, line, expected) in rejected {
        let error = system_config(Some(file), &[]).expect_err(file);
        let message = error.to_string();
        assert!(
            message.starts_with(&format!("/etc/deckhand/deckhand.conf:{line}: ")),
            "{file:?}: {message}"
        );
        assert!(message.contains(expected), "{file:?}: {message}");
    }
}

#[test]
fn a_key_set_twice_in_the_file_warns_and_the_later_wins() {
    let config = system_config(Some("ECS_CLUSTER=a\nECS_CLUSTER=b\n"), &[]).expect("ok");
    assert_eq!(config.cluster, "b");
    assert_eq!(config.warnings.len(), 1, "{:?}", config.warnings);
    assert!(config.warnings[0].contains("ECS_CLUSTER"));
    assert!(config.warnings[0].contains(":1"));
}

#[test]
fn duration_forms() {
    let good: &[(&str, Duration)] = &[
        ("90s", Duration::from_secs(90)),
        ("5m", Duration::from_secs(300)),
        ("1h30m", Duration::from_secs(5400)),
        ("1h30m15s", Duration::from_secs(5415)),
        ("2h", Duration::from_secs(7200)),
        ("500ms", Duration::from_millis(500)),
        ("1s500ms", Duration::from_millis(1500)),
        ("0", Duration::ZERO),
        ("0s", Duration::ZERO),
        (" 45s ", Duration::from_secs(45)),
    ];
    for (text, expected) in good {
        assert_eq!(parse_duration(text), Ok(*expected), "{text:?}");
    }
    let bad: &[(&str, &str)] = &[
        ("", "empty"),
        ("30", "no unit"),
        ("1h30", "no unit"),
        ("1.5h", "unknown unit"),
        ("5 m", "unknown unit"),
        ("5M", "unknown unit"),
        ("1d", "unknown unit"),
        ("1us", "unknown unit"),
        ("m", "not a duration"),
        ("-5s", "not a duration"),
        ("99999999999999999999s", "too large"),
        ("9999999999999999999h", "too long"),
    ];
    for (text, expected) in bad {
        let error = parse_duration(text).expect_err(text);
        assert!(error.contains(expected), "{text:?}: {error}");
        assert!(
            error.contains("expected a duration like") || error.contains("too long"),
            "{text:?}: {error}"
        );
    }
}

#[test]
fn durations_format_back_to_what_parses() {
    let cases: &[(Duration, &str)] = &[
        (Duration::from_secs(5400), "1h30m"),
        (Duration::from_secs(45), "45s"),
        (Duration::from_millis(1500), "1s500ms"),
        (Duration::from_secs(3 * 3600), "3h"),
        (Duration::ZERO, "0"),
    ];
    for (duration, text) in cases {
        assert_eq!(format_duration(*duration), *text);
        assert_eq!(parse_duration(text), Ok(*duration));
    }
}

#[test]
fn below_minimum_values_are_adjusted_as_ecs_does_with_a_warning() {
    type Field = fn(&Config) -> Duration;
    let cases: &[(&str, &str, Duration, Field)] = &[
        // Raised to the minimum.
        (
            "ECS_CONTAINER_STOP_TIMEOUT",
            "500ms",
            Duration::from_secs(1),
            |c| c.container_stop_timeout,
        ),
        (
            "ECS_CONTAINER_START_TIMEOUT",
            "10s",
            Duration::from_secs(45),
            |c| c.container_start_timeout,
        ),
        (
            "ECS_CONTAINER_CREATE_TIMEOUT",
            "59s",
            Duration::from_secs(60),
            |c| c.container_create_timeout,
        ),
        // Replaced by the default.
        (
            "ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION",
            "999ms",
            Duration::from_secs(3 * 3600),
            |c| c.task_cleanup_wait,
        ),
        // Zero means unset: the default.
        (
            "ECS_CONTAINER_STOP_TIMEOUT",
            "0s",
            Duration::from_secs(30),
            |c| c.container_stop_timeout,
        ),
        (
            "ECS_IMAGE_PULL_TIMEOUT",
            "0",
            Duration::from_secs(7200),
            |c| c.image_pull_timeout,
        ),
        (
            "DECKHAND_STEADY_CHECK_INTERVAL",
            "0ms",
            Duration::from_secs(300),
            |c| c.steady_state_check_interval,
        ),
    ];
    for (key, value, expected, field) in cases {
        let config = system_config(None, &[(key, value)]).unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!(field(&config), *expected, "{key}={value}");
        assert_eq!(
            config.warnings.len(),
            1,
            "{key}={value}: {:?}",
            config.warnings
        );
        assert!(config.warnings[0].starts_with(key), "{:?}", config.warnings);
    }
    // Exactly the minimum is kept, silently.
    let config = system_config(
        None,
        &[
            ("ECS_CONTAINER_STOP_TIMEOUT", "1s"),
            ("ECS_CONTAINER_START_TIMEOUT", "45s"),
            ("ECS_CONTAINER_CREATE_TIMEOUT", "1m"),
            ("ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION", "1s"),
        ],
    )
    .expect("minimums are valid");
    assert_eq!(config.container_stop_timeout, Duration::from_secs(1));
    assert_eq!(config.container_start_timeout, Duration::from_secs(45));
    assert_eq!(config.container_create_timeout, Duration::from_secs(60));
    assert_eq!(config.task_cleanup_wait, Duration::from_secs(1));
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
}

#[test]
fn image_cleanup_values_below_the_ecs_minimums_are_kept_with_a_warning() {
    let config = system_config(
        None,
        &[
            ("ECS_IMAGE_CLEANUP_INTERVAL", "2s"),
            ("ECS_NUM_IMAGES_DELETE_PER_CYCLE", "0"),
            ("ECS_IMAGE_MINIMUM_CLEANUP_AGE", "10ms"),
        ],
    )
    .expect("accepted");
    assert_eq!(config.image_cleanup.interval, Duration::from_secs(2));
    assert_eq!(config.image_cleanup.images_per_cycle, 0);
    assert_eq!(config.image_cleanup.minimum_age, Duration::from_millis(10));
    assert_eq!(config.warnings.len(), 2, "{:?}", config.warnings);
    assert!(config.warnings[0].starts_with("ECS_IMAGE_CLEANUP_INTERVAL: 2s is below"));
    assert!(config.warnings[1].starts_with("ECS_NUM_IMAGES_DELETE_PER_CYCLE: 0"));
    // The marks: a high mark at or below the default low mark takes the low one down; both
    // given, the low one must be below.
    let config = system_config(None, &[("DECKHAND_IMAGE_CLEANUP_DISK_HIGH", "1")]).expect("ok");
    assert_eq!(config.image_cleanup.disk_low_percent, 0);
    let config = system_config(
        None,
        &[
            ("DECKHAND_IMAGE_CLEANUP_DISK_HIGH", "1"),
            ("DECKHAND_IMAGE_CLEANUP_DISK_LOW", "0"),
        ],
    )
    .expect("ok");
    assert_eq!(
        (
            config.image_cleanup.disk_high_percent,
            config.image_cleanup.disk_low_percent
        ),
        (1, 0)
    );
}

#[test]
fn log_levels_map_onto_log_filters() {
    for (text, expected) in [
        ("debug", LevelFilter::Debug),
        ("info", LevelFilter::Info),
        ("warn", LevelFilter::Warn),
        ("error", LevelFilter::Error),
        ("crit", LevelFilter::Error),
        ("DEBUG", LevelFilter::Debug),
    ] {
        let config = system_config(None, &[("ECS_LOGLEVEL", text)]).expect(text);
        assert_eq!(config.log_level, expected, "{text}");
    }
}

#[test]
fn scope_comes_from_the_effective_uid() {
    let cases: &[(&str, Option<Scope>)] = &[
        ("Name:\tx\nUid:\t0\t0\t0\t0\nGid:\t0\n", Some(Scope::System)),
        ("Uid:\t1000\t1000\t1000\t1000\n", Some(Scope::User)),
        // setuid root: real 1000, effective 0.
        ("Uid:\t1000\t0\t0\t0\n", Some(Scope::System)),
        // real root, effective 1000 (dropped privileges).
        ("Uid:\t0\t1000\t1000\t1000\n", Some(Scope::User)),
        ("Uid:\t0\n", None),
        ("Uid:\tx\ty\n", None),
        ("Name:\tx\n", None),
    ];
    for (status, expected) in cases {
        assert_eq!(scope_from_proc_status(status), *expected, "{status:?}");
    }
    // This process: the test reads the real file, so the answer must match the real Uid line.
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc");
    assert_eq!(
        Some(Scope::of_current_process()),
        scope_from_proc_status(&status)
    );
}

/// Reads `packaging/deckhand.conf`. With `DECKHAND_BLESS=1` it first rewrites the file from
/// [`render_packaged_config_file`], which is how the file is regenerated after a key changes.
fn packaged_config_file_text() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/deckhand.conf");
    if std::env::var("DECKHAND_BLESS").as_deref() == Ok("1") {
        std::fs::write(&path, render_packaged_config_file())
            .expect("write packaging/deckhand.conf");
    }
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

#[test]
fn packaged_config_file_lists_every_key_commented_out_with_its_default() {
    let text = packaged_config_file_text();
    for doc in CONFIG_KEYS {
        let line = format!("#{}={}", doc.key, doc.system_default);
        assert!(
            text.lines().any(|candidate| candidate == line),
            "packaging/deckhand.conf lacks the line {line:?}"
        );
        assert!(
            text.contains(doc.meaning),
            "packaging/deckhand.conf lacks the meaning of {}",
            doc.key
        );
    }
    assert_eq!(
        text,
        render_packaged_config_file(),
        "packaging/deckhand.conf differs from render_packaged_config_file(); regenerate it with DECKHAND_BLESS=1 cargo test --lib config"
    );
}

#[test]
fn packaged_config_file_loads_as_the_defaults() {
    let text = packaged_config_file_text();
    let from_file = system_config(Some(&text), &[]).expect("packaged file loads");
    let mut without_file = system_config(None, &[]).expect("defaults");
    without_file.config_file = Some(config_file_path().to_path_buf());
    assert_eq!(from_file, without_file);
}

#[test]
fn the_packaged_file_uncommented_still_loads_as_the_defaults() {
    // Every documented default, made active, must parse: users uncomment lines and edit them.
    let uncommented: String = packaged_config_file_text()
        .lines()
        .map(|line| match line.strip_prefix('#') {
            Some(rest) if rest.contains('=') && !rest.starts_with(' ') => format!("{rest}\n"),
            _ => format!("{line}\n"),
        })
        .collect();
    let config = system_config(Some(&uncommented), &[]).expect("uncommented file loads");
    let mut defaults = system_config(None, &[]).expect("defaults");
    defaults.config_file = config.config_file.clone();
    assert_eq!(config, defaults);
}

#[test]
fn loading_reads_the_given_file_and_requires_it_to_exist() {
    let scratch = ScratchDir::new("deckhand-config-given");
    let directory = scratch.path.clone();
    let path = directory.join("deckhand.conf");
    std::fs::write(&path, "ECS_CLUSTER=from-file\n").expect("write config");
    let env = env_of(&[]);
    let config = Config::load_for_scope(Some(&path), &env, Scope::System).expect("loads");
    assert_eq!(config.cluster, "from-file");
    assert_eq!(config.config_file.as_deref(), Some(path.as_path()));

    let missing = directory.join("absent.conf");
    let error = Config::load_for_scope(Some(&missing), &env, Scope::System).expect_err("missing");
    assert!(
        matches!(error, ConfigError::MissingFile { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("absent.conf"), "{error}");

    // A directory is not a readable file.
    let error = Config::load_for_scope(Some(&directory), &env, Scope::System).expect_err("dir");
    assert!(
        matches!(error, ConfigError::UnreadableFile { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains(&directory.display().to_string()),
        "{error}"
    );
}

#[test]
fn loading_without_a_default_file_uses_the_defaults_and_with_one_reads_it() {
    let scratch = ScratchDir::new("deckhand-config-default");
    let directory = scratch.path.clone();
    let xdg_config = directory.display().to_string();
    let env = env_of(&[("HOME", "/nonexistent"), ("XDG_CONFIG_HOME", &xdg_config)]);
    let config = Config::load_for_scope(None, &env, Scope::User).expect("no file is fine");
    assert_eq!(config.config_file, None);
    assert_eq!(config.cluster, "default");

    std::fs::create_dir_all(directory.join("deckhand")).expect("mkdir");
    std::fs::write(
        directory.join("deckhand/deckhand.conf"),
        "ECS_CLUSTER=mine\n",
    )
    .expect("write");
    let config = Config::load_for_scope(None, &env, Scope::User).expect("reads the user file");
    assert_eq!(config.cluster, "mine");
    assert_eq!(
        config.config_file,
        Some(directory.join("deckhand/deckhand.conf"))
    );
}

#[test]
fn exit_code_for_bad_configuration_is_ex_config() {
    assert_eq!(EXIT_CONFIG, 78);
}

#[test]
fn the_systemd_unit_does_not_restart_on_the_config_exit_code() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/deckhand.service");
    let unit = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    let expected = format!("RestartPreventExitStatus={EXIT_CONFIG}");
    assert!(
        unit.lines().any(|line| line == expected),
        "packaging/deckhand.service must contain {expected}"
    );
    // The unit's default paths are the system defaults the config module uses.
    assert!(unit.lines().any(|line| line == "StateDirectory=deckhand"));
    assert_eq!(default_of("ECS_DATADIR"), "/var/lib/deckhand");
    assert!(unit.lines().any(|line| line == "RuntimeDirectory=deckhand"));
    assert_eq!(default_of("DECKHAND_API_SOCKET"), "/run/deckhand/api.sock");
    assert!(unit
        .lines()
        .any(|line| line == "ConfigurationDirectory=deckhand"));
    assert_eq!(SYSTEM_CONFIG_FILE, "/etc/deckhand/deckhand.conf");
}

/// `(key, value)` pairs standing for the environment.
type Environment<'a> = Vec<(&'a str, &'a str)>;

/// A password that no configuration error, warning or `Debug` output may contain.
const REGISTRY_SECRET: &str = "c0nfig-Secret-pw";

#[test]
fn registry_credentials_load_in_both_formats_from_file_or_environment() {
    let docker = format!(
        r#"{{"registry.example.com":{{"username":"deck","password":"{REGISTRY_SECRET}","email":"ops@example.com"}}}}"#
    );
    // base64("deck:c0nfig-Secret-pw")
    let dockercfg =
        r#"{"https://registry.example.com":{"auth":"ZGVjazpjMG5maWctU2VjcmV0LXB3","email":"e"}}"#;
    // (case, file, environment)
    type Case<'a> = (&'a str, Option<String>, Environment<'a>);
    let cases: Vec<Case> = vec![
        ("docker in the environment", None, vec![("ECS_ENGINE_AUTH_TYPE", "docker"), ("ECS_ENGINE_AUTH_DATA", docker.as_str())]),
        (
            "docker in the file, single-quoted",
            Some(format!("ECS_ENGINE_AUTH_TYPE=docker\nECS_ENGINE_AUTH_DATA='{docker}'\n")),
            vec![],
        ),
        (
            "dockercfg in the file, unquoted",
            Some(format!("ECS_ENGINE_AUTH_TYPE=dockercfg\nECS_ENGINE_AUTH_DATA={dockercfg}\n")),
            vec![],
        ),
        (
            "type in the file, data in the environment",
            Some("ECS_ENGINE_AUTH_TYPE=dockercfg\n".to_string()),
            vec![("ECS_ENGINE_AUTH_DATA", dockercfg)],
        ),
        (
            "the environment over the file",
            Some(
                "ECS_ENGINE_AUTH_TYPE=docker\nECS_ENGINE_AUTH_DATA={\"registry.example.com\":{\"username\":\"file\",\"password\":\"f\"}}\n"
                    .to_string(),
            ),
            vec![("ECS_ENGINE_AUTH_TYPE", "dockercfg"), ("ECS_ENGINE_AUTH_DATA", dockercfg)],
        ),
    ];
    for (name, file, env) in &cases {
        let config =
            system_config(file.as_deref(), env).unwrap_or_else(|error| panic!("{name}: {error}"));
        let matched = config
            .registry_credentials
            .for_image("registry.example.com/team/app:v1")
            .unwrap_or_else(|| panic!("{name}: no credential for the registry"));
        assert_eq!(matched.credential.username, "deck", "{name}");
        assert_eq!(matched.credential.password, REGISTRY_SECRET, "{name}");
        assert_eq!(matched.server_address, "registry.example.com", "{name}");
        let debug = format!("{config:?}");
        assert!(
            !debug.contains(REGISTRY_SECRET),
            "{name}: Config's Debug shows the password: {debug}"
        );
        assert!(debug.contains("<redacted>"), "{name}: {debug}");
    }
}

#[test]
fn bad_registry_credentials_are_configuration_errors_that_never_quote_the_data() {
    let valid = format!(r#"{{"r.example":{{"username":"u","password":"{REGISTRY_SECRET}"}}}}"#);
    type Case<'a> = (Vec<(&'a str, String)>, &'a str, &'a str);
    let cases: Vec<Case> = vec![
        // (environment, key named, reason)
        (
            vec![
                ("ECS_ENGINE_AUTH_TYPE", "ecr".into()),
                ("ECS_ENGINE_AUTH_DATA", valid.clone()),
            ],
            "ECS_ENGINE_AUTH_TYPE",
            "docker or dockercfg",
        ),
        (
            vec![("ECS_ENGINE_AUTH_TYPE", "docker".into())],
            "ECS_ENGINE_AUTH_TYPE",
            "ECS_ENGINE_AUTH_DATA is not set",
        ),
        (
            vec![("ECS_ENGINE_AUTH_DATA", valid.clone())],
            "ECS_ENGINE_AUTH_DATA",
            "ECS_ENGINE_AUTH_TYPE is not set",
        ),
        (
            vec![
                ("ECS_ENGINE_AUTH_TYPE", "docker".into()),
                (
                    "ECS_ENGINE_AUTH_DATA",
                    format!(r#"{{"r.example":{{"username":"u","password":"{REGISTRY_SECRET}"}}"#),
                ),
            ],
            "ECS_ENGINE_AUTH_DATA",
            "not valid JSON",
        ),
        (
            vec![
                ("ECS_ENGINE_AUTH_TYPE", "dockercfg".into()),
                ("ECS_ENGINE_AUTH_DATA", valid.clone()),
            ],
            "ECS_ENGINE_AUTH_DATA",
            "belongs to ECS_ENGINE_AUTH_TYPE=docker",
        ),
    ];
    for (env, key, reason) in &cases {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let error = system_config(None, &env).expect_err(key);
        let message = error.to_string();
        assert!(
            matches!(&error, ConfigError::BadValue { key: k, .. } if k == key),
            "{env:?}: {message}"
        );
        assert!(
            message.contains(key) && message.contains(reason),
            "{message}"
        );
        assert!(!message.contains(REGISTRY_SECRET), "{message}");
        assert!(!format!("{error:?}").contains(REGISTRY_SECRET), "{error:?}");
    }

    // From the file: the line is named, the data is not quoted, not even a broken quote of it or
    // a JSON value spread over several lines.
    let files = [
        (format!("ECS_ENGINE_AUTH_TYPE=docker\nECS_ENGINE_AUTH_DATA={{\"r\":{{\"password\":\"{REGISTRY_SECRET}\"}}}}\n"), ":2: bad value for ECS_ENGINE_AUTH_DATA"),
        (format!("ECS_ENGINE_AUTH_TYPE=docker\nECS_ENGINE_AUTH_DATA='{valid}\n"), ":2: ECS_ENGINE_AUTH_DATA: an opening quote"),
        (
            format!("ECS_ENGINE_AUTH_TYPE=docker\nECS_ENGINE_AUTH_DATA={{\n  \"r.example\": {{\"username\": \"u\",\n  \"password\": \"{REGISTRY_SECRET}\"}}}}\n"),
            ":3: expected KEY=VALUE; this line looks like part of a JSON value",
        ),
        (
            format!("ECS_ENGINE_AUTH_TYPE=docker\nECS_ENGINE_AUTH_DATA={{\n  \"password\": \"a={REGISTRY_SECRET}\"}}\n"),
            ":3: expected KEY=VALUE; this line looks like part of a JSON value",
        ),
    ];
    for (file, expected) in &files {
        let error = system_config(Some(file), &[]).expect_err(file);
        let message = error.to_string();
        assert!(message.contains(expected), "{file}: {message}");
        assert!(!message.contains(REGISTRY_SECRET), "{message}");
        assert!(!format!("{error:?}").contains(REGISTRY_SECRET), "{error:?}");
    }
}

fn ecs_config(pairs: &[(&str, &str)]) -> Result<Option<EcsConfig>, ConfigError> {
    let env: Vec<(String, String)> = pairs
        .iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect();
    let lookup = move |key: &str| {
        env.iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.clone())
    };
    Config::from_sources(None, &lookup, Scope::System).map(|config| config.ecs)
}

#[test]
fn ecs_external_is_off_by_default_and_needs_a_region_when_on() {
    assert_eq!(ecs_config(&[]).unwrap(), None);
    assert_eq!(ecs_config(&[("ECS_EXTERNAL", "false")]).unwrap(), None);
    let error = ecs_config(&[("ECS_EXTERNAL", "true")]).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("AWS_REGION") && message.contains("AWS_DEFAULT_REGION"),
        "{message}"
    );
    assert!(ecs_config(&[("ECS_EXTERNAL", "yes please")]).is_err());
    let error = ecs_config(&[("ECS_EXTERNAL", "true"), ("AWS_REGION", "US West")]).unwrap_err();
    assert!(error.to_string().contains("AWS_REGION"), "{error}");
}

#[test]
fn ecs_settings_take_ecs_names_and_defaults() {
    let ecs = ecs_config(&[
        ("ECS_EXTERNAL", "true"),
        ("AWS_DEFAULT_REGION", "eu-west-1"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(ecs.region, "eu-west-1");
    assert_eq!(ecs.backend_host, "https://ecs.eu-west-1.amazonaws.com");
    assert_eq!(ecs.profile, "default");
    assert_eq!(ecs.access_key_id, None);
    // No HOME (the packaged service): root's file, which ECS Anywhere's SSM agent rotates.
    assert_eq!(
        ecs.shared_credentials_file,
        PathBuf::from("/root/.aws/credentials")
    );

    let ecs = ecs_config(&[
        ("ECS_EXTERNAL", "true"),
        ("AWS_REGION", "us-west-2"),
        ("AWS_DEFAULT_REGION", "eu-west-1"),
        ("ECS_BACKEND_HOST", "http://127.0.0.1:4000"),
        (
            "ECS_INSTANCE_ATTRIBUTES",
            r#"{"stack":"prod","zone":"shelf-3"}"#,
        ),
        ("ECS_CONTAINER_INSTANCE_TAGS", r#"{"site":"depot 7"}"#),
        ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
        ("AWS_SECRET_ACCESS_KEY", "very-secret"),
        ("AWS_SESSION_TOKEN", "token-secret"),
        ("HOME", "/home/edge"),
        ("AWS_PROFILE", "fleet"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(ecs.region, "us-west-2");
    assert_eq!(ecs.backend_host, "http://127.0.0.1:4000");
    assert_eq!(
        ecs.instance_attributes,
        vec![
            ("stack".to_string(), "prod".to_string()),
            ("zone".to_string(), "shelf-3".to_string())
        ]
    );
    assert_eq!(
        ecs.instance_tags,
        vec![("site".to_string(), "depot 7".to_string())]
    );
    assert_eq!(
        ecs.shared_credentials_file,
        PathBuf::from("/home/edge/.aws/credentials")
    );
    assert_eq!(ecs.profile, "fleet");
    let shown = format!("{ecs:?}");
    assert!(
        !shown.contains("very-secret") && !shown.contains("token-secret"),
        "{shown}"
    );
}

#[test]
fn ecs_bad_values_name_the_key() {
    let base = [("ECS_EXTERNAL", "true"), ("AWS_REGION", "us-west-2")];
    let cases: &[(&str, &str, &str)] = &[
        (
            "ECS_BACKEND_HOST",
            "ecs.us-west-2.amazonaws.com",
            "https://",
        ),
        ("ECS_INSTANCE_ATTRIBUTES", "stack=prod", "JSON object"),
        ("ECS_INSTANCE_ATTRIBUTES", "[1]", "JSON object"),
        ("ECS_INSTANCE_ATTRIBUTES", r#"{"n":1}"#, "must be a string"),
        ("ECS_CONTAINER_INSTANCE_TAGS", "site=depot", "JSON object"),
        (
            "ECS_CONTAINER_INSTANCE_TAGS",
            r#"{"n":true}"#,
            r#"tag "n" must be a string"#,
        ),
        (
            "AWS_SHARED_CREDENTIALS_FILE",
            "relative/credentials",
            "AWS_SHARED_CREDENTIALS_FILE",
        ),
    ];
    for (key, value, expected) in cases {
        let mut pairs = base.to_vec();
        pairs.push((key, value));
        let message = ecs_config(&pairs).unwrap_err().to_string();
        assert!(
            message.contains(key) && message.contains(expected),
            "{key}={value}: {message}"
        );
    }
}

#[test]
fn ecs_keys_come_from_the_file_too() {
    let file = "ECS_EXTERNAL=true\nAWS_REGION=ap-south-1\nECS_BACKEND_HOST=http://127.0.0.1:9\nECS_INSTANCE_ATTRIBUTES={\"rack\":\"7\"}\nAWS_SESSION_TOKEN=tok\n";
    let ecs = system_config(Some(file), &[]).unwrap().ecs.unwrap();
    assert_eq!(ecs.region, "ap-south-1");
    assert_eq!(ecs.backend_host, "http://127.0.0.1:9");
    assert_eq!(
        ecs.instance_attributes,
        vec![("rack".to_string(), "7".to_string())]
    );
    assert_eq!(ecs.session_token.as_deref(), Some("tok"));
    // The environment wins over the file, as for every key.
    let ecs = system_config(Some(file), &[("ECS_BACKEND_HOST", "https://ecs.example")])
        .unwrap()
        .ecs
        .unwrap();
    assert_eq!(ecs.backend_host, "https://ecs.example");
    // Off in the environment turns off what the file turned on.
    assert_eq!(
        system_config(Some(file), &[("ECS_EXTERNAL", "false")])
            .unwrap()
            .ecs,
        None
    );
    // A bad attribute list is an error even with the connection off.
    assert!(system_config(Some("ECS_INSTANCE_ATTRIBUTES=oops\n"), &[]).is_err());
}
