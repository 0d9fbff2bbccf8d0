//! FireLens at create and at cleanup (the model's side is `task::firelens`): what the create of
//! the router and of each `awsfirelens` container adds to its request (pure, [`prepare_create`]),
//! the files the create worker writes before the router's create ([`write_files`]), and the
//! task's directory cleanup removes with its containers.
//!
//! The files are written at every create of the router, the same bytes each time, so a create
//! made again (after a crash, after Docker was away) finds them as the first left them, and a
//! restart of the agent leaves a running router's files alone.

use crate::engine::messages::{ExternalSource, FirelensFiles, SecretTarget, SecretUse};
use crate::runtime::{CreateContainer, LogConfig, RuntimeError};
use crate::state::fsio::{write_atomic, FaultInjector};
use crate::task::firelens::{
    fluentd_log_options, render::render_config, router, router_binds, router_options,
    secret_variable, uses_firelens, ExternalConfig, FirelensPaths, FLUENT_PORT,
};
use crate::task::{FirelensType, NetworkMode, Task};
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The ECS agent's mode for the router's configuration files: the router may run as any user.
const CONFIG_FILE_MODE: u32 = 0o644;
const DIRECTORY_MODE: u32 = 0o755;
/// The largest `config-file-type: s3` file deckhand copies (a Fluent configuration is a few KiB).
pub const MAX_EXTERNAL_CONFIG_BYTES: u64 = 1024 * 1024;

/// The longest path a Unix socket address holds (`sun_path`, 108 bytes with its NUL): Docker's
/// fluentd driver could not connect to a longer one.
const MAX_SOCKET_PATH_BYTES: usize = 107;

/// Where FireLens files go and where `config-file-type: s3` files come from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FirelensSetup {
    /// `ECS_DATADIR`: a task's files are `<data dir>/firelens/<task id>/`. `None`: FireLens
    /// tasks are refused.
    pub data_dir: Option<PathBuf>,
    /// `DECKHAND_ENVIRONMENT_FILES_DIR`: the operator's mirror of S3 objects, `<bucket>/<key>`.
    pub environment_files_dir: Option<PathBuf>,
}

/// The task's FireLens directory, when it has a router and deckhand a data directory: what
/// cleanup removes.
pub fn task_directory(task: &Task, setup: &FirelensSetup) -> Option<PathBuf> {
    router(&task.containers)?;
    let data_dir = setup.data_dir.as_ref()?;
    Some(FirelensPaths::new(data_dir, &task.id).directory)
}

/// Refuses a FireLens task deckhand cannot run: no data directory, or a configuration that
/// cannot be generated.
pub fn check_task(task: &Task, cluster: &str, setup: &FirelensSetup) -> Result<(), String> {
    if router(&task.containers).is_none() {
        return Ok(());
    }
    let Some(data_dir) = &setup.data_dir else {
        return Err(
            "FireLens: the router's files need deckhand's data directory (ECS_DATADIR), \
                    and this engine has none"
                .to_string(),
        );
    };
    let socket = FirelensPaths::new(data_dir, &task.id).socket();
    let length = socket.as_os_str().len();
    if length > MAX_SOCKET_PATH_BYTES {
        return Err(format!(
            "FireLens: the router's socket {} is {length} bytes long, and a Unix socket path \
             holds at most {MAX_SOCKET_PATH_BYTES}: use a shorter ECS_DATADIR",
            socket.display()
        ));
    }
    render_config(task, cluster).map(|_| ())
}

/// Adds FireLens to the create request of container `index`: the router gets its bind mounts,
/// `FLUENT_UID=0` for Fluentd (so it can use the socket Docker connects to) and the secret log
/// options of the `awsfirelens` containers as environment variables, and returns the files to
/// write first; an `awsfirelens` container gets Docker's `fluentd` driver aimed at the router's
/// socket (its secret log options go to the router instead of Docker) and, in bridge and
/// awsvpc tasks, `FLUENT_HOST`/`FLUENT_PORT` of the router's TCP input.
pub fn prepare_create(
    task: &Task,
    index: usize,
    cluster: &str,
    setup: &FirelensSetup,
    spec: &mut CreateContainer,
    secrets: &mut Vec<SecretUse>,
) -> Result<Option<FirelensFiles>, String> {
    let Some(router) = router(&task.containers) else {
        return Ok(None);
    };
    let Some(container) = task.containers.get(index) else {
        return Err(format!("no container at index {index}"));
    };
    let is_router = container.name() == router.name();
    if !is_router && !uses_firelens(&container.definition) {
        return Ok(None);
    }
    let Some(firelens) = &router.definition.firelens_configuration else {
        return Ok(None);
    };
    let data_dir = setup.data_dir.as_ref().ok_or_else(|| {
        "FireLens: the router's files need deckhand's data directory (ECS_DATADIR)".to_string()
    })?;
    let paths = FirelensPaths::new(data_dir, &task.id);
    if let Some(log) = container
        .definition
        .log_configuration
        .as_ref()
        .filter(|_| uses_firelens(&container.definition))
    {
        spec.log_config = Some(LogConfig {
            driver: "fluentd".to_string(),
            options: fluentd_log_options(&paths, container.name(), &task_id(task), &log.options),
        });
        secrets.retain(|secret| secret.target != SecretTarget::LogOption);
        let host = match task.network_mode {
            NetworkMode::Awsvpc => Some("127.0.0.1".to_string()),
            NetworkMode::Bridge => router
                .networks
                .iter()
                .map(|network| network.ipv4_address.clone())
                .find(|address| !address.is_empty()),
            NetworkMode::Host | NetworkMode::None => None,
        };
        if let Some(host) = host {
            set_environment(spec, "FLUENT_HOST", &host);
            set_environment(spec, "FLUENT_PORT", FLUENT_PORT);
        }
    }
    if !is_router {
        return Ok(None);
    }
    let options = router_options(&firelens.options).map_err(|error| {
        format!(
            "container {:?}: firelensConfiguration.options.{}: {}",
            router.name(),
            error.option,
            error.message
        )
    })?;
    spec.binds
        .extend(router_binds(&paths, firelens.router_type, &options));
    if firelens.router_type == FirelensType::Fluentd {
        set_environment(spec, "FLUENT_UID", "0");
    }
    for (member_index, member) in task.containers.iter().enumerate() {
        let Some(log) = member
            .definition
            .log_configuration
            .as_ref()
            .filter(|_| uses_firelens(&member.definition))
        else {
            continue;
        };
        for secret in &log.secret_options {
            secrets.push(SecretUse {
                target: SecretTarget::Environment,
                name: secret_variable(&secret.name, member_index),
                value_from: secret.value_from.clone(),
            });
        }
    }
    let config = render_config(task, cluster)?
        .ok_or_else(|| "FireLens: the task has no router".to_string())?;
    let external = match options.external {
        Some(ExternalConfig::S3 { arn, object }) => Some(ExternalSource {
            arn,
            mirror_path: setup
                .environment_files_dir
                .as_deref()
                .map(|mirror| object.mirror_path(mirror)),
        }),
        Some(ExternalConfig::File { .. }) | None => None,
    };
    Ok(Some(FirelensFiles {
        paths,
        config,
        external,
        socket_owner: router.definition.user.clone(),
    }))
}

/// ECS's task id: the last part of the task ARN.
fn task_id(task: &Task) -> String {
    task.arn.rsplit('/').next().unwrap_or(&task.id).to_string()
}

/// Sets `name` in the request's environment, replacing the definition's value (the agent's to
/// give, as ECS merges it).
fn set_environment(spec: &mut CreateContainer, name: &str, value: &str) {
    spec.env
        .retain(|entry| entry.split('=').next().unwrap_or_default() != name);
    spec.env.push(format!("{name}={value}"));
}

fn failure(message: String) -> RuntimeError {
    RuntimeError::ResourceInitialization {
        message: format!("unable to create the FireLens resource: {message}"),
    }
}

/// The uid and gid a router `user` gives the socket directory (ECS's `SetOwnership`): a numeric
/// uid, and the group's number when it is one, else deckhand's own group. A user name is
/// refused, as ECS refuses it.
pub fn socket_ownership(user: &str, own_gid: u32) -> Result<(u32, u32), String> {
    let (user_part, group_part) = match user.split_once(':') {
        Some((user, group)) => (user, Some(group)),
        None => (user, None),
    };
    let uid = user_part.parse::<u32>().map_err(|_| {
        format!("unable to determine the user ID of the router's user {user:?}: give a number")
    })?;
    let gid = group_part
        .and_then(|group| group.parse::<u32>().ok())
        .unwrap_or(own_gid);
    Ok((uid, gid))
}

/// Reads the S3 configuration file from the mirror, at most [`MAX_EXTERNAL_CONFIG_BYTES`].
fn read_external(source: &ExternalSource) -> Result<Vec<u8>, RuntimeError> {
    let Some(path) = &source.mirror_path else {
        return Err(failure(format!(
            "config-file-value {}: S3 objects are read from the operator's mirror, and \
             DECKHAND_ENVIRONMENT_FILES_DIR is not set",
            source.arn
        )));
    };
    let file = std::fs::File::open(path).map_err(|error| {
        failure(format!(
            "config-file-value {}: cannot read {} in DECKHAND_ENVIRONMENT_FILES_DIR: {error}",
            source.arn,
            path.display()
        ))
    })?;
    let mut bytes = Vec::new();
    file.take(MAX_EXTERNAL_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| {
            failure(format!(
                "config-file-value {}: cannot read {}: {error}",
                source.arn,
                path.display()
            ))
        })?;
    if bytes.len() as u64 > MAX_EXTERNAL_CONFIG_BYTES {
        return Err(failure(format!(
            "config-file-value {}: {} is larger than {MAX_EXTERNAL_CONFIG_BYTES} bytes",
            source.arn,
            path.display()
        )));
    }
    Ok(bytes)
}

fn create_directory(path: &Path) -> Result<(), RuntimeError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIRECTORY_MODE)
        .create(path)
        .map_err(|error| failure(format!("cannot create {}: {error}", path.display())))
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), RuntimeError> {
    write_atomic(&FaultInjector::new(), path, bytes).map_err(|error| {
        failure(format!(
            "cannot write {} ({}): {}",
            error.path.display(),
            error.step.as_str(),
            error.source
        ))
    })?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(CONFIG_FILE_MODE))
        .map_err(|error| failure(format!("cannot make {} readable: {error}", path.display())))
}

/// Writes the router's files (ECS's `Create` of its FireLens resource): the directories, the
/// socket directory given to the router's user, the S3 configuration file from the mirror, then
/// the generated configuration. Any failure is a `ResourceInitializationError` and the router
/// is not created.
pub fn write_files(files: &FirelensFiles) -> Result<(), RuntimeError> {
    create_directory(&files.paths.config_directory())?;
    let socket_directory = files.paths.socket_directory();
    create_directory(&socket_directory)?;
    if let Some(user) = files
        .socket_owner
        .as_deref()
        .filter(|user| !user.is_empty())
    {
        // deckhand's own group (ECS's default for a user without one) is the group the
        // directory it just made was given.
        let own_group = std::fs::metadata(&socket_directory)
            .map(|metadata| metadata.gid())
            .map_err(|error| {
                failure(format!(
                    "cannot read {}: {error}",
                    socket_directory.display()
                ))
            })?;
        let (uid, gid) = socket_ownership(user, own_group).map_err(failure)?;
        std::os::unix::fs::chown(&socket_directory, Some(uid), Some(gid)).map_err(|error| {
            failure(format!(
                "cannot give {} to the router's user {user}: {error}",
                socket_directory.display()
            ))
        })?;
    }
    if let Some(source) = &files.external {
        let bytes = read_external(source)?;
        write_file(&files.paths.external_config_file(), &bytes)?;
    }
    write_file(&files.paths.config_file(), files.config.as_bytes())
}

/// Removes a cleaned-up task's FireLens directory; one already gone is removed.
pub fn remove_directory(directory: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(directory) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::container_spec::{assign_docker_names, create_request};
    use crate::task::{
        ContainerDefinition, ContainerNetwork, FirelensConfiguration, LogConfiguration,
        SecretReference, TaskDefinition,
    };
    use std::collections::BTreeMap;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    }

    fn task(router_type: FirelensType, router_options: &[(&str, &str)], mode: NetworkMode) -> Task {
        let mut router = ContainerDefinition::new("log_router", "fluent");
        router.firelens_configuration = Some(FirelensConfiguration {
            router_type,
            options: map(router_options),
        });
        router.user = Some("1000".into());
        let mut app = ContainerDefinition::new("app", "busybox");
        app.environment = vec![("FLUENT_HOST".into(), "mine".into())];
        app.log_configuration = Some(LogConfiguration {
            log_driver: "awsfirelens".into(),
            options: map(&[
                (
                    crate::task::firelens::output_plugin_key(router_type),
                    "stdout",
                ),
                ("log-driver-buffer-limit", "4096"),
            ]),
            secret_options: vec![SecretReference {
                name: "token".into(),
                value_from: "token-ref".into(),
            }],
        });
        let plain = ContainerDefinition::new("plain", "busybox");
        let definition = TaskDefinition {
            roles: Default::default(),
            family: "logs".into(),
            revision: 3,
            network_mode: mode,
            cpu: None,
            memory_mib: None,
            volumes: Vec::new(),
            containers: vec![router, app, plain],
            pid_mode: None,
            ipc_mode: None,
        };
        let mut task = Task::new(
            "0123456789abcdef0123456789abcdef".into(),
            "edge",
            definition,
            1,
            0,
        );
        let mut suffix = 0;
        assign_docker_names(&mut task, || {
            suffix += 1;
            format!("{suffix}")
        });
        task
    }

    fn setup() -> FirelensSetup {
        FirelensSetup {
            data_dir: Some(PathBuf::from("/var/lib/deckhand")),
            environment_files_dir: Some(PathBuf::from("/srv/mirror")),
        }
    }

    fn prepared(
        task: &Task,
        index: usize,
    ) -> (CreateContainer, Vec<SecretUse>, Option<FirelensFiles>) {
        let mut spec = create_request(task, index, "edge").expect("a request");
        let mut secrets = vec![SecretUse {
            target: SecretTarget::LogOption,
            name: "token".into(),
            value_from: "token-ref".into(),
        }];
        let files = prepare_create(task, index, "edge", &setup(), &mut spec, &mut secrets)
            .expect("prepared");
        (spec, secrets, files)
    }

    #[test]
    fn the_router_gets_its_mounts_its_variables_and_its_files() {
        let task = task(
            FirelensType::Fluentd,
            &[
                ("config-file-type", "s3"),
                ("config-file-value", "arn:aws:s3:::conf/fluent/extra.conf"),
            ],
            NetworkMode::Bridge,
        );
        let (spec, secrets, files) = prepared(&task, 0);
        let directory = "/var/lib/deckhand/firelens/0123456789abcdef0123456789abcdef";
        assert_eq!(
            spec.binds,
            [
                format!("{directory}/config/fluent.conf:/fluentd/etc/fluent.conf"),
                format!("{directory}/socket/:/var/run/"),
                format!("{directory}/config/external.conf:/fluentd/etc/external.conf"),
            ]
        );
        assert!(
            spec.env.contains(&"FLUENT_UID=0".to_string()),
            "{:?}",
            spec.env
        );
        assert_eq!(spec.log_config, None);
        // The app's secret log option is the router's variable `<name>_<index>`.
        assert!(secrets.contains(&SecretUse {
            target: SecretTarget::Environment,
            name: "token_1".into(),
            value_from: "token-ref".into(),
        }));
        let files = files.expect("the router's files");
        assert_eq!(files.paths.directory, PathBuf::from(directory));
        assert_eq!(
            files.external,
            Some(ExternalSource {
                arn: "arn:aws:s3:::conf/fluent/extra.conf".into(),
                mirror_path: Some(PathBuf::from("/srv/mirror/conf/fluent/extra.conf")),
            })
        );
        assert_eq!(files.socket_owner.as_deref(), Some("1000"));
        assert!(files.config.contains("<match app-firelens**>\n    @type stdout\n    token \"#{ENV['token_1']}\"\n</match>"), "{}", files.config);
    }

    #[test]
    fn an_awsfirelens_container_logs_to_the_routers_socket_with_ecs_tag() {
        let mut task = task(FirelensType::Fluentbit, &[], NetworkMode::Bridge);
        task.containers[0].networks = vec![ContainerNetwork {
            name: "bridge".into(),
            ipv4_address: "172.17.0.5".into(),
        }];
        let (spec, secrets, files) = prepared(&task, 1);
        assert_eq!(files, None);
        let log = spec.log_config.expect("a log driver");
        assert_eq!(log.driver, "fluentd");
        assert_eq!(
            log.options,
            map(&[
                ("tag", "app-firelens-0123456789abcdef0123456789abcdef"),
                ("fluentd-address", "unix:///var/lib/deckhand/firelens/0123456789abcdef0123456789abcdef/socket/fluent.sock"),
                ("fluentd-sub-second-precision", "true"),
                ("fluentd-buffer-limit", "4096"),
                ("fluentd-async", "true"),
            ])
        );
        // Its secret log option went to the router, not to Docker.
        assert!(secrets.is_empty(), "{secrets:?}");
        assert!(
            spec.env.contains(&"FLUENT_HOST=172.17.0.5".to_string()),
            "{:?}",
            spec.env
        );
        assert!(!spec.env.contains(&"FLUENT_HOST=mine".to_string()));
        assert!(spec.env.contains(&"FLUENT_PORT=24224".to_string()));

        // awsvpc: the router is on the task's localhost; host: no TCP input to point at.
        let awsvpc = self::task(FirelensType::Fluentbit, &[], NetworkMode::Awsvpc);
        let (spec, _, _) = prepared(&awsvpc, 1);
        assert!(spec.env.contains(&"FLUENT_HOST=127.0.0.1".to_string()));
        let host = self::task(FirelensType::Fluentbit, &[], NetworkMode::Host);
        let (spec, _, _) = prepared(&host, 1);
        assert!(spec.env.contains(&"FLUENT_HOST=mine".to_string()));
    }

    #[test]
    fn other_containers_and_tasks_without_a_router_are_left_alone() {
        let task = task(FirelensType::Fluentbit, &[], NetworkMode::Bridge);
        let before = create_request(&task, 2, "edge").expect("a request");
        let (spec, secrets, files) = prepared(&task, 2);
        assert_eq!((spec, files), (before, None));
        assert_eq!(secrets.len(), 1);
        let mut without = task.clone();
        std::sync::Arc::make_mut(&mut without.containers[0].definition).firelens_configuration =
            None;
        assert_eq!(task_directory(&without, &setup()), None);
        assert_eq!(
            check_task(&without, "edge", &FirelensSetup::default()),
            Ok(())
        );
        assert_eq!(
            task_directory(&task, &setup()),
            Some(PathBuf::from(
                "/var/lib/deckhand/firelens/0123456789abcdef0123456789abcdef"
            ))
        );
        assert!(check_task(&task, "edge", &FirelensSetup::default())
            .expect_err("no data directory")
            .contains("ECS_DATADIR"));
        assert_eq!(check_task(&task, "edge", &setup()), Ok(()));
        let deep = FirelensSetup {
            data_dir: Some(PathBuf::from(format!("/{}", "d".repeat(60)))),
            environment_files_dir: None,
        };
        let error = check_task(&task, "edge", &deep).expect_err("too long");
        assert!(
            error.contains("a Unix socket path holds at most 107"),
            "{error}"
        );
    }

    #[test]
    fn the_socket_directory_goes_to_the_routers_numeric_user_as_ecs_gives_it() {
        assert_eq!(socket_ownership("1000", 7), Ok((1000, 7)));
        assert_eq!(socket_ownership("1000:2000", 7), Ok((1000, 2000)));
        assert_eq!(socket_ownership("1000:fluent", 7), Ok((1000, 7)));
        assert!(socket_ownership("fluent", 7).is_err());
        assert!(socket_ownership("", 7).is_err());
    }

    #[test]
    fn files_are_written_readable_and_the_s3_file_comes_from_the_mirror() {
        let scratch = std::env::temp_dir().join(format!(
            "deckhand-firelens-files-{}-{}",
            std::process::id(),
            crate::clock::now_millis()
        ));
        let mirror = scratch.join("mirror");
        std::fs::create_dir_all(mirror.join("conf")).expect("mirror");
        std::fs::write(
            mirror.join("conf/extra.conf"),
            "[OUTPUT]\n    Name stdout\n",
        )
        .expect("object");
        let paths = FirelensPaths::new(&scratch.join("data"), "t1");
        let mut files = FirelensFiles {
            paths: paths.clone(),
            config: "[INPUT]\n".into(),
            external: Some(ExternalSource {
                arn: "arn:aws:s3:::conf/extra.conf".into(),
                mirror_path: Some(mirror.join("conf/extra.conf")),
            }),
            socket_owner: None,
        };
        write_files(&files).expect("written");
        // Again (a create made twice): the same files.
        write_files(&files).expect("written again");
        assert_eq!(
            std::fs::read_to_string(paths.config_file()).expect("config"),
            "[INPUT]\n"
        );
        assert_eq!(
            std::fs::read_to_string(paths.external_config_file()).expect("external"),
            "[OUTPUT]\n    Name stdout\n"
        );
        let mode = std::fs::metadata(paths.config_file())
            .expect("metadata")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
        assert!(paths.socket_directory().is_dir());
        // The socket directory goes to the router's user (here deckhand's own, which any test
        // user may give).
        let own = std::fs::metadata(&scratch).expect("metadata");
        files.socket_owner = Some(own.uid().to_string());
        write_files(&files).expect("written with an owner");
        let socket = std::fs::metadata(paths.socket_directory()).expect("metadata");
        assert_eq!((socket.uid(), socket.gid()), (own.uid(), own.gid()));

        // An object the mirror lacks, or no mirror: ResourceInitializationError naming the ARN.
        files.external = Some(ExternalSource {
            arn: "arn:aws:s3:::conf/missing.conf".into(),
            mirror_path: Some(mirror.join("conf/missing.conf")),
        });
        let error = write_files(&files).expect_err("missing").to_string();
        assert!(
            error.starts_with("ResourceInitializationError: "),
            "{error}"
        );
        assert!(error.contains("arn:aws:s3:::conf/missing.conf"), "{error}");
        files.external = Some(ExternalSource {
            arn: "arn:aws:s3:::conf/extra.conf".into(),
            mirror_path: None,
        });
        let error = write_files(&files).expect_err("no mirror").to_string();
        assert!(
            error.contains("DECKHAND_ENVIRONMENT_FILES_DIR is not set"),
            "{error}"
        );

        remove_directory(&paths.directory).expect("removed");
        assert!(!paths.directory.exists());
        remove_directory(&paths.directory).expect("gone already");
        let _ = std::fs::remove_dir_all(&scratch);
    }
}
