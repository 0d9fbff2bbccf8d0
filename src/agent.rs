//! `deckhand run`: wires the agent together and takes it down in order.
//!
//! Start: configuration (exit 78 on error) → logging (`ECS_LOGLEVEL`, `RUST_LOG` wins) → state
//! store under `ECS_DATADIR` (exit 78 for a file written by a newer deckhand; corrupt files are
//! quarantined and reported) → Docker client (waiting, with back-off and a log line, while
//! Docker is not up yet: systemd may start deckhand first) → the task metadata endpoint and
//! the iptables redirect of 169.254.170.2:80 to it → engine, restoring every saved task
//! → local API + ECS introspection + `tasks.d` watcher → `READY=1` to systemd (and watchdog
//! pings at half of `WATCHDOG_USEC` when the unit sets one).
//!
//! Signals: SIGTERM or SIGINT removes the redirect, stops accepting commands (the API goes
//! first), ends the `tasks.d` watcher and every managed-task loop, and exits 0 — leaving every
//! container running; the next start re-adopts them. A second SIGTERM/SIGINT, or a shutdown that
//! takes longer than [`SHUTDOWN_DEADLINE`], exits at once (still 0: nothing is lost, containers
//! keep running). SIGHUP rescans `tasks.d`.

mod ecs_start;
mod engine_settings;
pub mod execution_role;
mod redirect;

use crate::api::{ApiServers, TaskMetadataServers};
use crate::config::{Config, ImagePullBehavior, EXIT_CONFIG};
use crate::control::ecs::connection::EcsConnection;
use crate::control::tasks_d::{TasksDirWatcher, DEFAULT_RESCAN_INTERVAL};
use crate::docker::{DockerClient, DockerHost};
use crate::engine::host_resources::HostCapacity;
use crate::engine::image_cleanup::{
    ImageCleanupCounters, ImageCleanupSettings, DISK_SAMPLE_INTERVAL,
};
use crate::engine::{EngineConfig, EngineHandle, TaskEngine};
use crate::role_credentials::CredentialsStore;
use crate::runtime::{ContainerRuntime, RuntimeError, Timeouts};
use crate::state::StateStore;
use crate::task::PullBehavior;
use crossbeam_channel::{never, select, tick, unbounded, Receiver};
use ecs_start::prepare_ecs;
pub use engine_settings::{aws_logs_setup, host_capacity};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// A shutdown that takes longer than this is cut short.
pub const SHUTDOWN_DEADLINE: Duration = Duration::from_millis(4500);
/// Exit code of a runtime failure (socket in use, state directory unusable).
const EXIT_RUNTIME: u8 = 1;
/// Longest wait between two attempts to reach Docker at start-up.
const DOCKER_WAIT_MAXIMUM: Duration = Duration::from_secs(30);

/// What the signal thread tells the main loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SignalEvent {
    Terminate(i32),
    Rescan,
}

fn init_logging(config: &Config) {
    let mut builder = env_logger::Builder::new();
    builder.filter_level(config.log_level);
    if let Ok(filters) = std::env::var("RUST_LOG") {
        builder.parse_filters(&filters);
    }
    builder.format_timestamp_millis();
    let _ = builder.try_init();
}

fn docker_timeouts(config: &Config) -> Timeouts {
    Timeouts {
        pull_total: config.image_pull_timeout,
        create: config.container_create_timeout,
        start: config.container_start_timeout,
        ..Timeouts::default()
    }
}

/// Forwards SIGTERM/SIGINT/SIGHUP to a channel from a thread of its own. A second terminating
/// signal exits the process at once.
fn start_signal_thread() -> std::io::Result<Receiver<SignalEvent>> {
    let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP])?;
    let (sender, receiver) = unbounded();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut terminating = false;
            for signal in signals.forever() {
                let event = match signal {
                    SIGHUP => SignalEvent::Rescan,
                    other => {
                        if terminating {
                            log::warn!("second termination signal: exiting now");
                            std::process::exit(0);
                        }
                        terminating = true;
                        SignalEvent::Terminate(other)
                    }
                };
                if sender.send(event).is_err() {
                    return;
                }
            }
        })?;
    Ok(receiver)
}

fn notify_systemd(states: &[sd_notify::NotifyState<'_>]) {
    if let Err(error) = sd_notify::notify(false, states) {
        log::debug!("cannot notify systemd: {error}");
    }
}

/// Connects to Docker, waiting while it is not up (systemd may start deckhand before Docker).
/// `Ok(None)`: a termination signal came while waiting; `Err`: Docker answered, but not in a
/// way deckhand can work with (an API version too old), which waiting does not mend.
fn connect_to_docker(
    host: &DockerHost,
    config: &Config,
    signals: &Receiver<SignalEvent>,
) -> Result<Option<DockerClient>, RuntimeError> {
    let mut backoff = Duration::from_secs(1);
    loop {
        match DockerClient::connect(host.clone(), docker_timeouts(config)) {
            Ok(client) => return Ok(Some(client)),
            // Waiting does not mend a socket this user may not open (group membership is fixed
            // when the process starts): say so and exit. The transport words that case so.
            Err(RuntimeError::Unreachable { message })
                if message.starts_with("permission denied") =>
            {
                return Err(RuntimeError::Unreachable { message })
            }
            Err(error @ (RuntimeError::Unreachable { .. } | RuntimeError::Timeout { .. })) => {
                log::warn!(
                    "Docker at {} does not answer ({error}); waiting for it, next try in {}s",
                    host.source,
                    backoff.as_secs()
                );
            }
            Err(error) => return Err(error),
        }
        let deadline = crossbeam_channel::after(backoff);
        loop {
            select! {
                recv(signals) -> event => match event {
                    Ok(SignalEvent::Rescan) => continue,
                    Ok(SignalEvent::Terminate(signal)) => {
                        log::info!("signal {signal} while waiting for Docker: exiting");
                        return Ok(None);
                    }
                    Err(_) => return Ok(None),
                },
                recv(deadline) -> _ => break,
            }
        }
        backoff = (backoff * 2).min(DOCKER_WAIT_MAXIMUM);
    }
}

/// Starts the task metadata endpoint unless `DECKHAND_TASK_METADATA=false`: on the Docker bridge
/// network's gateway (asked of Docker) and on 127.0.0.1. `None` when it is off or could not
/// listen (already warned).
fn start_task_metadata(
    config: &Config,
    runtime: &dyn ContainerRuntime,
    role_credentials: &CredentialsStore,
) -> Option<TaskMetadataServers> {
    if !config.task_metadata {
        log::info!("task metadata endpoint off (DECKHAND_TASK_METADATA=false)");
        return None;
    }
    let gateway = runtime.bridge_gateway().unwrap_or_else(|error| {
        log::warn!("cannot read the Docker bridge network's gateway: {error}");
        None
    });
    TaskMetadataServers::start(gateway, config.task_metadata_port, role_credentials.clone())
}

/// Image cleanup's settings from the configuration (§15).
pub fn image_cleanup_settings(config: &Config) -> ImageCleanupSettings {
    let keys = &config.image_cleanup;
    ImageCleanupSettings {
        interval: keys.interval,
        minimum_age: keys.minimum_age,
        images_per_cycle: keys.images_per_cycle,
        untracked_cleanup: keys.untracked_cleanup,
        untracked_minimum_age: keys.untracked_minimum_age,
        excluded_images: keys.excluded_images.clone(),
        disk_high_percent: keys.disk_high_percent,
        disk_low_percent: keys.disk_low_percent,
        disk_sample_interval: DISK_SAMPLE_INTERVAL,
        remove_images: true,
    }
}

/// Starts image cleanup (§15) unless it is off, with `tasks.d`'s images protected: the
/// directory is read afresh before each cycle and each removal. As in ECS, pull behaviour
/// `prefer-cached` turns it off (that behaviour counts on the images staying).
fn start_image_cleanup(engine: &TaskEngine, config: &Config) -> Option<Arc<ImageCleanupCounters>> {
    let off = if config.image_cleanup.disabled {
        Some("image cleanup off (ECS_DISABLE_IMAGE_CLEANUP=true)")
    } else if config.image_pull_behavior == ImagePullBehavior::PreferCached {
        Some("image cleanup off: pull behavior prefer-cached keeps the images it uses")
    } else {
        None
    };
    if let Some(why) = off {
        log::info!("{why}; the disk is still sampled for the metrics");
        let settings = ImageCleanupSettings {
            remove_images: false,
            ..image_cleanup_settings(config)
        };
        let nothing_declared: crate::engine::image_cleanup::ProtectedImages =
            Arc::new(|| Ok(Vec::new()));
        return match engine.start_image_cleanup(settings, nothing_declared) {
            Ok(counters) => Some(counters),
            Err(error) => {
                log::error!("cannot start sampling the image disk: {error}");
                None
            }
        };
    }
    for image in &config.image_cleanup.excluded_images {
        log::info!("image cleanup: image {image} is excluded (ECS_EXCLUDE_UNTRACKED_IMAGE)");
    }
    let tasks_dir = config.tasks_dir.clone();
    let declared: crate::engine::image_cleanup::ProtectedImages =
        Arc::new(move || crate::control::tasks_d::declared_images(&tasks_dir));
    match engine.start_image_cleanup(image_cleanup_settings(config), declared) {
        Ok(counters) => {
            log::info!(
                "image cleanup every {}s, images unused for {}s, disk marks {}%/{}%{}",
                config.image_cleanup.interval.as_secs_f64(),
                config.image_cleanup.minimum_age.as_secs_f64(),
                config.image_cleanup.disk_high_percent,
                config.image_cleanup.disk_low_percent,
                if config.image_cleanup.untracked_cleanup {
                    ", untracked images too"
                } else {
                    ""
                }
            );
            Some(counters)
        }
        Err(error) => {
            log::error!("cannot start image cleanup: {error}");
            None
        }
    }
}

/// Runs the agent until SIGTERM/SIGINT; returns the process exit code.
pub fn run(config_path: Option<&Path>) -> ExitCode {
    let config = match Config::from_process_env(config_path) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("deckhand: configuration error: {error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    init_logging(&config);
    for warning in &config.warnings {
        log::warn!("configuration: {warning}");
    }
    if !config.registry_credentials.is_empty() {
        // Which registries only: the credentials themselves are never logged.
        let registries: Vec<&str> = config.registry_credentials.registries().collect();
        log::info!("registry credentials for {}", registries.join(", "));
    }
    // The ECS connection's own checks (credentials, attributes, the endpoint) before anything
    // starts: a host that cannot join its cluster says so and is not restarted in a loop.
    let ecs_prepared = match config
        .ecs
        .as_ref()
        .map(|ecs| prepare_ecs(ecs, &config.data_dir))
        .transpose()
    {
        Ok(prepared) => prepared,
        Err(error) => {
            eprintln!("deckhand: configuration error: {error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    // Signals are caught from here on, so a SIGTERM during start-up is not fatal mid-way.
    let signals = match start_signal_thread() {
        Ok(signals) => signals,
        Err(error) => {
            log::error!("cannot install signal handlers: {error}");
            return ExitCode::from(EXIT_RUNTIME);
        }
    };

    let host = match DockerHost::parse(&config.docker_host) {
        Ok(host) => host,
        Err(error) => {
            eprintln!("deckhand: configuration error: DOCKER_HOST: {error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let (store, loaded) = match StateStore::open(&config.data_dir) {
        Ok(opened) => opened,
        Err(error) if error.is_future_schema() => {
            log::error!("{error}");
            eprintln!("deckhand: {error}");
            return ExitCode::from(EXIT_CONFIG);
        }
        Err(error) => {
            log::error!("cannot open the state directory: {error}");
            eprintln!("deckhand: cannot open the state directory: {error}");
            return ExitCode::from(EXIT_RUNTIME);
        }
    };
    for file in &loaded.quarantined {
        // Already logged by the store as a warning; say once more that start-up goes on.
        log::error!("state: {file}; continuing without it");
    }
    log::info!(
        "state: {} saved task(s) in {}, next event {}",
        loaded.tasks.len(),
        config.data_dir.display(),
        loaded.events.next_seq
    );
    let store = Arc::new(store);

    let client = match connect_to_docker(&host, &config, &signals) {
        Ok(Some(client)) => client,
        Ok(None) => return ExitCode::SUCCESS,
        Err(error) => {
            log::error!("{error}");
            eprintln!("deckhand: {error}");
            return ExitCode::from(EXIT_RUNTIME);
        }
    };
    let docker_version = match client.version() {
        Ok(version) => {
            log::info!(
                "Docker Engine {} at {}, API {} (negotiated; daemon supports up to {})",
                version.version,
                client.host().source,
                client.api_version(),
                version.api_version
            );
            Some(version.version)
        }
        Err(error) => {
            log::warn!("cannot read the Docker Engine version: {error}");
            None
        }
    };
    let docker_api_version = client.api_version();
    let runtime: Arc<dyn ContainerRuntime> = Arc::new(client);
    let runtime_for_ecs = Arc::clone(&runtime);

    // Tasks' IAM role credentials, in memory only (`role_credentials` says who uses them).
    let role_credentials = CredentialsStore::new();
    // Listening before the engine starts: restored tasks create containers pointed at it.
    let mut task_metadata = start_task_metadata(&config, runtime.as_ref(), &role_credentials);
    // 169.254.170.2:80 leads to those listeners (README: credentials endpoint).
    let endpoint = task_metadata.as_ref().map(|servers| servers.endpoint);
    let credentials_redirect = redirect::start_credentials_redirect(&config, &*runtime, endpoint);
    let mut engine_config = EngineConfig::from_agent_config(&config);
    engine_config.role_credentials = role_credentials.clone();
    let mut task_roles = engine_settings::start_task_roles(&config, &role_credentials);
    engine_config.local_roles = task_roles.as_ref().map(|(_, roles)| Arc::clone(roles));
    engine_config.task_metadata = endpoint;
    let engine = match TaskEngine::start_durable(runtime, engine_config, store, loaded.tasks) {
        Ok(engine) => Arc::new(engine),
        Err(error) => {
            log::error!("cannot start the task engine: {error}");
            return ExitCode::from(EXIT_RUNTIME);
        }
    };
    let handle: Arc<dyn EngineHandle> = engine.clone();
    if let Some(servers) = &task_metadata {
        servers.api.attach(handle.clone());
    }

    // Its counters are for the metrics endpoint.
    let _image_cleanup_counters = start_image_cleanup(&engine, &config);

    let mut api = match ApiServers::start_with_credentials(
        handle.clone(),
        &config.api_socket,
        config.introspection_addr,
        role_credentials.clone(),
    ) {
        Ok(api) => api,
        Err(error) => {
            log::error!("{error}");
            eprintln!("deckhand: {error}");
            engine.shutdown();
            return ExitCode::from(EXIT_RUNTIME);
        }
    };
    let handle_for_ecs = handle.clone();
    let mut watcher =
        match TasksDirWatcher::start(handle, config.tasks_dir.clone(), DEFAULT_RESCAN_INTERVAL) {
            Ok(watcher) => watcher,
            Err(error) => {
                log::error!("cannot start the tasks.d watcher: {error}");
                api.shutdown();
                engine.shutdown();
                return ExitCode::from(EXIT_RUNTIME);
            }
        };

    let ecs = match ecs_prepared {
        Some(prepared) => {
            let mut settings = prepared.settings(
                &config,
                (docker_api_version.major, docker_api_version.minor),
                docker_version,
            );
            // The telemetry session's runtime check: Docker answers its ping.
            settings.docker_ping = Arc::new(move || runtime_for_ecs.ping().is_ok());
            settings.role_credentials = role_credentials.clone();
            // The task-role capabilities only with a listener that serves the credentials: on
            // but unable to listen (its port taken) is as off.
            if config.task_metadata && endpoint.is_none() {
                log::warn!(
                    "ECS: task IAM role capabilities are not advertised: the task metadata \
                     endpoint, which serves the credentials, is not listening"
                );
            }
            settings.registration.credentials_served = endpoint.is_some();
            match EcsConnection::start(settings, handle_for_ecs.clone()) {
                Ok(connection) => Some(connection),
                Err(error) => {
                    log::error!("cannot start the ECS connection: {error}");
                    watcher.shutdown();
                    api.shutdown();
                    engine.shutdown();
                    return ExitCode::from(EXIT_RUNTIME);
                }
            }
        }
        None => None,
    };

    let mut watchdog_usec = 0u64;
    let watchdog = if sd_notify::watchdog_enabled(false, &mut watchdog_usec) && watchdog_usec > 0 {
        tick(Duration::from_micros(watchdog_usec / 2))
    } else {
        never()
    };
    notify_systemd(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status("serving"),
    ]);
    log::info!(
        "deckhand {} ready: cluster {}, API {}, tasks from {}",
        crate::VERSION,
        config.cluster,
        config.api_socket.display(),
        config.tasks_dir.display()
    );

    loop {
        select! {
            recv(signals) -> event => match event {
                Ok(SignalEvent::Rescan) => {
                    log::info!("SIGHUP: rescanning {}", config.tasks_dir.display());
                    watcher.rescan();
                }
                Ok(SignalEvent::Terminate(signal)) => {
                    log::info!("signal {signal}: shutting down; containers keep running");
                    break;
                }
                Err(_) => break,
            },
            recv(watchdog) -> _ => notify_systemd(&[sd_notify::NotifyState::Watchdog]),
        }
    }

    notify_systemd(&[sd_notify::NotifyState::Stopping]);
    // If anything below hangs, leave anyway: containers keep running either way.
    let _ = std::thread::Builder::new()
        .name("shutdown-deadline".into())
        .spawn(|| {
            std::thread::sleep(SHUTDOWN_DEADLINE);
            log::warn!(
                "shutdown took longer than {}s: exiting now",
                SHUTDOWN_DEADLINE.as_secs_f64()
            );
            std::process::exit(0);
        });
    // First, so that nothing is led to listeners that are going away.
    redirect::stop_credentials_redirect(credentials_redirect);
    api.shutdown();
    if let Some(servers) = &mut task_metadata {
        servers.shutdown();
    }
    if let Some(ecs) = ecs {
        ecs.shutdown();
    }
    watcher.shutdown();
    engine.shutdown();
    if let Some((refresher, _)) = &mut task_roles {
        refresher.shutdown();
    }
    log::info!("deckhand stopped");
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Scope;

    #[test]
    fn engine_settings_come_from_the_agent_configuration() {
        let file = "ECS_CLUSTER=edge\nECS_ENGINE_TASK_CLEANUP_WAIT_DURATION=10m\nECS_CONTAINER_STOP_TIMEOUT=7s\nECS_IMAGE_PULL_BEHAVIOR=once\nECS_PULL_DEPENDENT_CONTAINERS_UPFRONT=true\nECS_DISABLE_PRIVILEGED=true\nDECKHAND_DOCKER_CONCURRENCY=3\nECS_EXCLUDE_IPV6_PORTBINDING=false\n";
        let config = Config::from_sources(
            Some((Path::new("/etc/deckhand/deckhand.conf"), file)),
            &|_| None,
            Scope::System,
        )
        .expect("a valid configuration");
        let engine = EngineConfig::from_agent_config(&config);
        assert_eq!(engine.cluster, "edge");
        assert_eq!(engine.cleanup_wait, Duration::from_secs(600));
        assert_eq!(engine.stop_timeout, Duration::from_secs(7));
        assert_eq!(engine.pull_behavior, PullBehavior::Once);
        assert!(engine.pull_dependent_containers_upfront);
        assert!(engine.disable_privileged);
        assert_eq!(engine.docker_concurrency, 3);
        assert!(!engine.exclude_ipv6_port_bindings);
        assert_eq!(
            engine.steady_check_interval,
            config.steady_state_check_interval
        );
    }

    #[test]
    fn the_host_capacity_is_memtotal_less_the_reserved_memory_and_1024_units_per_core() {
        let file =
            "ECS_RESERVED_MEMORY=512\nECS_RESERVED_PORTS=[22]\nECS_RESERVED_PORTS_UDP=[53, 5353]\n";
        let config = Config::from_sources(
            Some((Path::new("/etc/deckhand/deckhand.conf"), file)),
            &|_| None,
            Scope::System,
        )
        .expect("a valid configuration");
        let capacity = host_capacity(&config, Some(2048), 2, vec!["GPU-a".to_string()]);
        assert_eq!(capacity.gpu_ids, vec!["GPU-a".to_string()]);
        assert_eq!(capacity.memory_mib, 1536);
        assert_eq!(capacity.cpu_units, 2048);
        assert_eq!(capacity.reserved_tcp_ports, [22].into_iter().collect());
        assert_eq!(
            capacity.reserved_udp_ports,
            [53, 5353].into_iter().collect()
        );
        // More reserved than the host has: nothing is offered.
        assert_eq!(
            host_capacity(&config, Some(256), 1, Vec::new()).memory_mib,
            0
        );
        // The host's memory unknown: memory is not accounted.
        assert_eq!(
            host_capacity(&config, None, 1, Vec::new()).memory_mib,
            u64::MAX
        );
        // The agent reads this host's.
        let engine = EngineConfig::from_agent_config(&config);
        let total = crate::host::read_mem_total_mib().expect("this host has /proc/meminfo");
        assert_eq!(engine.host_capacity.memory_mib, total.saturating_sub(512));
        assert_eq!(
            engine.host_capacity.cpu_units,
            1024 * crate::host::cpu_cores()
        );
    }

    #[test]
    fn the_engines_default_pool_size_is_the_configured_default() {
        assert_eq!(
            EngineConfig::default().docker_concurrency,
            Config::from_sources(None, &|_| None, Scope::System)
                .expect("the defaults load")
                .docker_concurrency,
            "the engine's default pool size is the documented DECKHAND_DOCKER_CONCURRENCY"
        );
    }

    /// Every value the configuration accepts names the same behaviour in the engine.
    #[test]
    fn each_configured_pull_behavior_maps_to_the_engine_behavior_of_the_same_name() {
        for name in ["default", "always", "once", "prefer-cached"] {
            let configured: ImagePullBehavior = name.parse().expect("a configured behaviour");
            let engine: PullBehavior = name.parse().expect("an engine behaviour");
            assert_eq!(PullBehavior::from(configured), engine, "{name}");
        }
    }
}
