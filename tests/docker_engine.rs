//! The Docker client against the real Docker Engine: container lifecycle, events, health checks,
//! wait and exit codes, stop escalation, pulls from local registries (with and without htpasswd
//! auth), and named volumes. The tests make their own image and registries; they need no network.

#[path = "support/docker.rs"]
mod docker_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use deckhand::docker::DockerClient;
use deckhand::runtime::{
    ContainerRuntime, CreateContainer, CreateVolume, EventFilter, HealthConfig, PortBinding,
    RegistryAuth, RuntimeError,
};
use docker_support::{
    docker_client_or_skip, ensure_busybox_image, push_to_registry, remove_image_tag,
    write_htpasswd, EventCollector, LocalRegistry, TempDir, TestContainers, TEST_IMAGE,
};

const EVENT_DEADLINE: Duration = Duration::from_secs(30);

fn setup(test_name: &str) -> Option<(DockerClient, TestContainers)> {
    let client = docker_client_or_skip(test_name)?;
    ensure_busybox_image(&client);
    let containers = TestContainers::new(&client);
    Some((client, containers))
}

fn shell_container(containers: &TestContainers, role: &str, script: &str) -> CreateContainer {
    CreateContainer {
        name: containers.name(role),
        image: TEST_IMAGE.into(),
        labels: containers.labels(),
        cmd: Some(vec!["sh".into(), "-c".into(), script.into()]),
        ..CreateContainer::default()
    }
}

/// A shell that exits 143 on SIGTERM (a shell as PID 1 ignores it unless trapped).
const SLEEP_UNTIL_TERM: &str = "trap 'exit 143' TERM; sleep 300 & wait";

#[test]
fn lifecycle_create_start_inspect_stop_remove() {
    let Some((client, containers)) = setup("lifecycle_create_start_inspect_stop_remove") else {
        return;
    };
    // The shell marks a bind-mounted file once its TERM trap is set, so the stop below cannot
    // race the trap (a PID 1 shell without it ignores SIGTERM and is killed with 137).
    let ready_dir = TempDir::new("deckhand-ready");
    let mut spec = shell_container(
        &containers,
        "life",
        "trap 'exit 143' TERM; touch /ready/up; sleep 300 & wait",
    );
    spec.binds = vec![format!("{}:/ready", ready_dir.path.display())];
    spec.env = vec!["GREETING=hello".into()];
    spec.working_dir = Some("/tmp".into());
    spec.memory = Some(64 << 20);
    spec.memory_reservation = Some(32 << 20);
    spec.cpu_shares = Some(128);
    spec.port_bindings = vec![PortBinding {
        container_port: 8080,
        protocol: "tcp".into(),
        host_port: 0,
        host_ip: "127.0.0.1".into(),
    }];
    let id = client.create_container(&spec).expect("create");

    let created = client
        .inspect_container(&spec.name)
        .expect("inspect by name");
    assert_eq!(created.id, id);
    assert_eq!(created.name, spec.name);
    assert_eq!(created.state.status, "created");
    assert_eq!(created.labels, containers.labels());

    match client.create_container(&spec) {
        Err(RuntimeError::Conflict { message }) => {
            assert!(message.contains("already in use"), "{message}")
        }
        other => panic!("a second create with the same name gave {other:?}"),
    }

    client.start_container(&id).expect("start");
    client
        .start_container(&id)
        .expect("starting a running container (304) is success");
    let running = client.inspect_container(&id).expect("inspect running");
    assert!(running.state.running, "{:?}", running.state);
    assert_ne!(running.state.started_at, "0001-01-01T00:00:00Z");
    let binding = running
        .ports
        .iter()
        .find(|binding| binding.container_port == 8080)
        .unwrap_or_else(|| panic!("no binding for 8080 in {:?}", running.ports));
    assert_eq!(binding.protocol, "tcp");
    assert_eq!(binding.host_ip, "127.0.0.1");
    assert!(binding.host_port > 0, "Docker chose no host port");
    assert!(
        running.networks.iter().any(|(name, _)| name == "bridge"),
        "{:?}",
        running.networks
    );

    let listed = client
        .list_containers(&[containers.label_filter()])
        .expect("list");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].id, id);
    assert_eq!(listed[0].name, spec.name);
    assert_eq!(listed[0].state, "running");

    let ready_deadline = std::time::Instant::now() + EVENT_DEADLINE;
    while !ready_dir.path.join("up").exists() {
        assert!(
            std::time::Instant::now() < ready_deadline,
            "the container never set its TERM trap"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    client
        .stop_container(&id, Duration::from_secs(10))
        .expect("stop");
    let stopped = client.inspect_container(&id).expect("inspect stopped");
    assert!(!stopped.state.running);
    assert_eq!(stopped.state.status, "exited");
    assert_eq!(stopped.state.exit_code, 143);
    assert!(!stopped.state.oom_killed);
    assert_ne!(stopped.state.finished_at, "0001-01-01T00:00:00Z");
    client
        .stop_container(&id, Duration::from_secs(10))
        .expect("stopping a stopped container (304) is success");

    client.remove_container(&id, true).expect("remove");
    assert!(matches!(
        client.inspect_container(&id),
        Err(RuntimeError::NoSuchContainer { .. })
    ));
    match client.remove_container(&id, true) {
        Err(RuntimeError::NoSuchContainer { message }) => {
            assert!(message.contains("No such container"), "{message}")
        }
        other => panic!("removing a removed container gave {other:?}"),
    }
    assert!(client
        .list_containers(&[containers.label_filter()])
        .expect("list")
        .is_empty());
}

#[test]
fn create_with_a_missing_image_is_no_such_image() {
    let Some((client, containers)) = setup("create_with_a_missing_image_is_no_such_image") else {
        return;
    };
    let mut spec = shell_container(&containers, "noimage", "true");
    spec.image = "deckhand-test/does-not-exist:never".into();
    match client.create_container(&spec) {
        Err(RuntimeError::NoSuchImage { message }) => {
            assert!(message.contains("does-not-exist"), "{message}")
        }
        other => panic!("expected NoSuchImage, got {other:?}"),
    }
    assert!(matches!(
        client.inspect_image("deckhand-test/does-not-exist:never"),
        Err(RuntimeError::NoSuchImage { .. })
    ));
    let image = client.inspect_image(TEST_IMAGE).expect("the test image");
    assert!(image.id.starts_with("sha256:"), "{image:?}");
}

#[test]
fn events_report_start_and_die_with_exit_code_filtered_by_label() {
    let Some((client, containers)) =
        setup("events_report_start_and_die_with_exit_code_filtered_by_label")
    else {
        return;
    };
    let events = EventCollector::subscribe(
        &client,
        &EventFilter {
            labels: vec![containers.label_filter()],
            actions: vec!["start".into(), "die".into()],
            since: None,
        },
    );
    // A container of another run must not show up in this subscription.
    let others = TestContainers::new(&client);
    let other_id = client
        .create_container(&shell_container(&others, "other", "exit 9"))
        .expect("create the other container");
    client.start_container(&other_id).expect("start other");

    let id = client
        .create_container(&shell_container(&containers, "exit3", "exit 3"))
        .expect("create");
    client.start_container(&id).expect("start");
    let start = events.wait_for("start", EVENT_DEADLINE, |event| event.action == "start");
    assert_eq!(start.id, id);
    assert_eq!(
        start.attributes.get("deckhand-test-run"),
        Some(&containers.run_id)
    );
    let die = events.wait_for("die", EVENT_DEADLINE, |event| event.action == "die");
    assert_eq!(die.id, id);
    assert_eq!(die.exit_code(), Some(3));
    assert!(die.time_nano > start.time_nano);

    assert_eq!(client.wait_container(&id, EVENT_DEADLINE).expect("wait"), 3);
    assert_eq!(
        client
            .wait_container(&other_id, EVENT_DEADLINE)
            .expect("wait"),
        9
    );
    assert!(
        events.drain().iter().all(|event| event.id == id),
        "an event of another run leaked through the label filter"
    );
    assert_eq!(
        client
            .inspect_container(&id)
            .expect("inspect")
            .state
            .exit_code,
        3
    );
}

#[test]
fn events_since_replays_what_happened_before_the_subscription() {
    let Some((client, containers)) =
        setup("events_since_replays_what_happened_before_the_subscription")
    else {
        return;
    };
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64
        - 1;
    let id = client
        .create_container(&shell_container(&containers, "past", "exit 0"))
        .expect("create");
    client.start_container(&id).expect("start");
    assert_eq!(client.wait_container(&id, EVENT_DEADLINE).expect("wait"), 0);
    let events = EventCollector::subscribe(
        &client,
        &EventFilter {
            labels: vec![containers.label_filter()],
            actions: vec!["create".into(), "die".into()],
            since: Some(before),
        },
    );
    let create = events.wait_for("replayed create", EVENT_DEADLINE, |event| {
        event.action == "create"
    });
    assert_eq!(create.id, id);
    let die = events.wait_for("replayed die", EVENT_DEADLINE, |event| {
        event.action == "die"
    });
    assert_eq!(die.exit_code(), Some(0));
}

#[test]
fn an_event_stream_is_cancelled_from_another_thread() {
    let Some((client, containers)) = setup("an_event_stream_is_cancelled_from_another_thread")
    else {
        return;
    };
    let mut stream = client
        .events(&EventFilter {
            labels: vec![containers.label_filter()],
            ..EventFilter::default()
        })
        .expect("subscribe");
    let canceller = stream.canceller();
    let (done_sender, done) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let result = stream.next_event();
        let _ = done_sender.send(());
        result
    });
    // The reader is blocked: nothing carries this run's label.
    assert!(done.recv_timeout(Duration::from_millis(200)).is_err());
    canceller.cancel();
    done.recv_timeout(Duration::from_secs(5))
        .expect("the blocked read must return after cancel");
    let result = reader.join().expect("reader thread");
    assert_eq!(result, Ok(None));
}

#[test]
fn health_checks_turn_healthy_and_unhealthy() {
    let Some((client, containers)) = setup("health_checks_turn_healthy_and_unhealthy") else {
        return;
    };
    let events = EventCollector::subscribe(
        &client,
        &EventFilter {
            labels: vec![containers.label_filter()],
            actions: vec!["health_status".into()],
            since: None,
        },
    );
    let check = |command: &str| HealthConfig {
        test: vec!["CMD-SHELL".into(), command.into()],
        interval: Duration::from_millis(500),
        timeout: Duration::from_secs(5),
        retries: 1,
        start_period: Duration::ZERO,
    };
    let mut healthy = shell_container(&containers, "healthy", SLEEP_UNTIL_TERM);
    healthy.healthcheck = Some(check("echo fine"));
    let mut unhealthy = shell_container(&containers, "unhealthy", SLEEP_UNTIL_TERM);
    unhealthy.healthcheck = Some(check("echo broken; exit 1"));
    let healthy_id = client.create_container(&healthy).expect("create healthy");
    let unhealthy_id = client
        .create_container(&unhealthy)
        .expect("create unhealthy");
    client.start_container(&healthy_id).expect("start healthy");
    client
        .start_container(&unhealthy_id)
        .expect("start unhealthy");

    let became_healthy = events.wait_for("health_status: healthy", EVENT_DEADLINE, |event| {
        event.id == healthy_id && event.action == "health_status: healthy"
    });
    assert_eq!(became_healthy.id, healthy_id);
    events.wait_for("health_status: unhealthy", EVENT_DEADLINE, |event| {
        event.id == unhealthy_id && event.action == "health_status: unhealthy"
    });

    let healthy_state = client
        .inspect_container(&healthy_id)
        .expect("inspect")
        .state
        .health
        .expect("a health check was configured");
    assert_eq!(healthy_state.status, "healthy");
    assert_eq!(healthy_state.last_exit_code, Some(0));
    assert_eq!(
        healthy_state.last_output.as_deref().map(str::trim),
        Some("fine")
    );
    let unhealthy_state = client
        .inspect_container(&unhealthy_id)
        .expect("inspect")
        .state
        .health
        .expect("a health check was configured");
    assert_eq!(unhealthy_state.status, "unhealthy");
    assert!(unhealthy_state.failing_streak >= 1);
    assert_eq!(unhealthy_state.last_exit_code, Some(1));
}

#[test]
fn a_container_ignoring_sigterm_is_killed_after_the_grace_period() {
    let Some((client, containers)) =
        setup("a_container_ignoring_sigterm_is_killed_after_the_grace_period")
    else {
        return;
    };
    let id = client
        .create_container(&shell_container(
            &containers,
            "stubborn",
            "trap '' TERM; while true; do sleep 1; done",
        ))
        .expect("create");
    client.start_container(&id).expect("start");
    let grace = Duration::from_secs(2);
    let started = Instant::now();
    client.stop_container(&id, grace).expect("stop");
    let took = started.elapsed();
    assert!(
        took >= grace,
        "stop returned after {took:?}, before the grace period"
    );
    assert!(took < Duration::from_secs(30), "stop took {took:?}");
    let state = client.inspect_container(&id).expect("inspect").state;
    assert!(!state.running);
    assert_eq!(state.exit_code, 137, "SIGKILL's exit code");
}

#[test]
fn wait_returns_exit_codes_and_kill_ends_a_container() {
    let Some((client, containers)) = setup("wait_returns_exit_codes_and_kill_ends_a_container")
    else {
        return;
    };
    for code in [0, 1, 42] {
        let id = client
            .create_container(&shell_container(
                &containers,
                &format!("exit{code}"),
                &format!("exit {code}"),
            ))
            .expect("create");
        client.start_container(&id).expect("start");
        assert_eq!(
            client.wait_container(&id, EVENT_DEADLINE).expect("wait"),
            code
        );
    }
    let id = client
        .create_container(&shell_container(&containers, "killed", SLEEP_UNTIL_TERM))
        .expect("create");
    match client.kill_container(&id, "KILL") {
        Err(RuntimeError::Conflict { message }) => {
            assert!(message.contains("not running"), "{message}")
        }
        other => panic!("killing a created container gave {other:?}"),
    }
    client.start_container(&id).expect("start");
    client.kill_container(&id, "KILL").expect("kill");
    assert_eq!(
        client.wait_container(&id, EVENT_DEADLINE).expect("wait"),
        137
    );
    match client.wait_container("deckhand-test-no-such-container", EVENT_DEADLINE) {
        Err(RuntimeError::NoSuchContainer { .. }) => {}
        other => panic!("waiting on a missing container gave {other:?}"),
    }
}

#[test]
fn pulls_from_a_local_registry() {
    let Some(client) = docker_client_or_skip("pulls_from_a_local_registry") else {
        return;
    };
    ensure_busybox_image(&client);
    let storage = TempDir::new("deckhand-registry-storage");
    let registry = LocalRegistry::start(&storage.path, None);
    let repository = format!("deckhand/pull-{}", docker_support::unique_id());
    let pushed = push_to_registry(
        TEST_IMAGE,
        &registry.address,
        &format!("{repository}:latest"),
    );

    // No tag in the reference: deckhand pulls `latest`, not every tag.
    let untagged = format!("{}/{repository}", registry.address);
    client.pull_image(&untagged, None).expect("pull");
    let image = client
        .inspect_image(&pushed)
        .expect("pulled image is present");
    assert!(image.repo_tags.contains(&pushed), "{image:?}");
    client
        .pull_image(&pushed, None)
        .expect("pulling an image that is up to date");

    match client.pull_image(&format!("{untagged}:missing"), None) {
        Err(RuntimeError::CannotPull { message }) => assert!(
            message.contains("not found") || message.contains("manifest unknown"),
            "Docker's message must be kept: {message}"
        ),
        other => panic!("pulling a missing tag gave {other:?}"),
    }
    remove_image_tag(&pushed);
}

#[test]
fn pulls_from_a_registry_with_htpasswd_auth() {
    let Some(client) = docker_client_or_skip("pulls_from_a_registry_with_htpasswd_auth") else {
        return;
    };
    ensure_busybox_image(&client);
    let storage = TempDir::new("deckhand-registry-storage");
    let repository = format!("deckhand/auth-{}", docker_support::unique_id());
    // Push through an open registry, then serve the same storage behind htpasswd.
    {
        let open_registry = LocalRegistry::start(&storage.path, None);
        push_to_registry(
            TEST_IMAGE,
            &open_registry.address,
            &format!("{repository}:v1"),
        );
    }
    let auth_dir = TempDir::new("deckhand-registry-auth");
    let htpasswd = write_htpasswd(&auth_dir.path, "deckhand", "s3cret-pass");
    let registry = LocalRegistry::start(&storage.path, Some(&htpasswd));
    let image = format!("{}/{repository}:v1", registry.address);

    match client.pull_image(&image, None) {
        Err(RuntimeError::CannotPull { message }) => assert!(
            message.contains("auth") || message.contains("unauthorized"),
            "{message}"
        ),
        other => panic!("pulling without credentials gave {other:?}"),
    }
    let wrong = RegistryAuth {
        username: "deckhand".into(),
        password: "wrong".into(),
        server_address: registry.address.clone(),
    };
    assert!(matches!(
        client.pull_image(&image, Some(&wrong)),
        Err(RuntimeError::CannotPull { .. })
    ));
    let right = RegistryAuth {
        password: "s3cret-pass".into(),
        ..wrong
    };
    client
        .pull_image(&image, Some(&right))
        .expect("pull with credentials");
    assert!(client.inspect_image(&image).is_ok());
    remove_image_tag(&image);
}

#[test]
fn create_passes_entrypoint_env_user_workdir_binds_volumes_and_network_mode() {
    let Some((client, containers)) =
        setup("create_passes_entrypoint_env_user_workdir_binds_volumes_and_network_mode")
    else {
        return;
    };
    let shared = TempDir::new("deckhand-bind");
    // The container runs as an unprivileged user and must write here.
    std::fs::set_permissions(
        &shared.path,
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .expect("chmod the bind source");
    let spec = CreateContainer {
        name: containers.name("fields"),
        image: TEST_IMAGE.into(),
        labels: containers.labels(),
        env: vec!["GREETING=hello from env".into()],
        entrypoint: Some(vec!["sh".into(), "-c".into()]),
        cmd: Some(vec![
            "echo \"$GREETING\" > /data/greeting; id -u > /data/uid; pwd > /data/pwd".into(),
        ]),
        working_dir: Some("/tmp".into()),
        user: Some("1234".into()),
        binds: vec![format!("{}:/data", shared.path.display())],
        volumes: vec!["/scratch".into()],
        network_mode: Some("none".into()),
        log_config: Some(deckhand::runtime::LogConfig {
            driver: "json-file".into(),
            options: [("max-size".to_string(), "1m".to_string())].into(),
        }),
        ..CreateContainer::default()
    };
    let id = client.create_container(&spec).expect("create");
    client.start_container(&id).expect("start");
    assert_eq!(client.wait_container(&id, EVENT_DEADLINE).expect("wait"), 0);
    let read = |file: &str| {
        std::fs::read_to_string(shared.path.join(file))
            .unwrap_or_else(|error| panic!("the container did not write {file}: {error}"))
            .trim()
            .to_string()
    };
    assert_eq!(read("greeting"), "hello from env");
    assert_eq!(read("uid"), "1234");
    assert_eq!(read("pwd"), "/tmp");
    let info = client.inspect_container(&id).expect("inspect");
    assert!(
        info.mounts.iter().any(|(source, destination)| source
            == &shared.path.display().to_string()
            && destination == "/data"),
        "{:?}",
        info.mounts
    );
    assert!(
        info.mounts
            .iter()
            .any(|(_, destination)| destination == "/scratch"),
        "{:?}",
        info.mounts
    );
    assert_eq!(
        info.networks
            .iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>(),
        vec!["none"]
    );
    client
        .remove_container(&id, true)
        .expect("remove with volumes");
}

#[test]
fn volumes_are_created_listed_and_removed_and_a_missing_one_counts_as_removed() {
    let Some((client, containers)) =
        setup("volumes_are_created_listed_and_removed_and_a_missing_one_counts_as_removed")
    else {
        return;
    };
    let labels = containers.labels();
    let run_filter = vec![containers.label_filter()];
    let named = format!("deckhand-test-volume-{}", docker_support::unique_id());
    let tmpfs = BTreeMap::from([
        ("type".to_string(), "tmpfs".to_string()),
        ("device".to_string(), "tmpfs".to_string()),
    ]);
    assert_eq!(
        client.inspect_volume(&named),
        Ok(None),
        "absent is not an error"
    );
    let create = CreateVolume {
        name: named.clone(),
        driver: "local".to_string(),
        driver_opts: tmpfs.clone(),
        labels: labels.clone(),
    };
    assert_eq!(client.create_volume(&create), Ok(()));
    assert_eq!(
        client.create_volume(&create),
        Ok(()),
        "creating it again is Docker's no-op"
    );
    let inspected = client
        .inspect_volume(&named)
        .expect("inspect volume")
        .expect("the volume exists");
    assert_eq!(
        (inspected.name.as_str(), inspected.driver.as_str()),
        (named.as_str(), "local")
    );
    assert_eq!(inspected.options, tmpfs);
    assert_eq!(inspected.labels, labels);
    let listed = client.list_volumes(&run_filter).expect("list volumes");
    assert_eq!(
        listed
            .iter()
            .map(|volume| volume.name.clone())
            .collect::<Vec<_>>(),
        vec![named.clone()],
        "only this test's volume carries its label"
    );
    assert_eq!(listed[0].labels, labels);

    // The engine's way: a named volume that a bind creates implicitly, used by a container.
    let implicit = format!("deckhand-test-implicit-{}", docker_support::unique_id());
    let mut spec = shell_container(&containers, "volume-user", "echo kept > /data/file");
    spec.binds = vec![format!("{implicit}:/data"), format!("{named}:/named")];
    let id = client.create_container(&spec).expect("create");
    client.start_container(&id).expect("start");
    assert_eq!(client.wait_container(&id, EVENT_DEADLINE).expect("wait"), 0);
    match client.remove_volume(&implicit) {
        Err(RuntimeError::Conflict { message }) => {
            assert!(message.contains("in use"), "{message}")
        }
        other => panic!("removing a volume in use: {other:?}"),
    }
    client
        .remove_container(&id, false)
        .expect("remove container");
    for volume in [&implicit, &named] {
        client
            .remove_volume(volume)
            .unwrap_or_else(|error| panic!("remove {volume}: {error}"));
        client
            .remove_volume(volume)
            .unwrap_or_else(|error| panic!("a second remove of {volume} is not an error: {error}"));
    }
    assert!(client.list_volumes(&run_filter).expect("list").is_empty());
    let all: Vec<String> = client
        .list_volumes(&[])
        .expect("list all")
        .into_iter()
        .map(|volume| volume.name)
        .collect();
    assert!(!all.contains(&implicit) && !all.contains(&named), "{all:?}");
}
