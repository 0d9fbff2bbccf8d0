//! The generated configuration against the ECS agent's own expected renderings
//! (`agent/taskresource/firelens/firelensconfig_unix_test.go`: same task, options and
//! container; deckhand writes no `ec2_instance_id`, as it runs on no EC2 instance), one case per
//! router option; the options' rules; the implicit dependency; the wiring.

use super::render::render_config;
use super::*;
use crate::task::{
    FirelensConfiguration, LogConfiguration, NetworkMode, SecretReference, Task, TaskDefinition,
};

const ARN: &str =
    "arn:aws:ecs:us-east-2:01234567891011:task/mycluster/3de392df-6bfa-470b-97ed-aa6f482cd7a";

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect()
}

fn fluentd_options() -> BTreeMap<String, String> {
    map(&[
        ("@type", "kinesis_firehose"),
        ("region", "us-west-2"),
        ("deliver_stream_name", "my-stream"),
        ("include-pattern", "*failure*"),
        ("exclude-pattern", "*success*"),
    ])
}

fn fluentbit_options() -> BTreeMap<String, String> {
    let mut options = fluentd_options();
    options.remove("@type");
    options.insert("Name".into(), "kinesis_firehose".into());
    options
}

const FILE_OPTIONS: &[(&str, &str)] = &[
    ("config-file-type", "file"),
    ("config-file-value", "/tmp/dummy.conf"),
];
const S3_OPTIONS: &[(&str, &str)] = &[
    ("config-file-type", "s3"),
    ("config-file-value", "arn:aws:s3:::bucket/key"),
];

/// A task like the ECS agent's test: a router and one container named `container`.
fn task(
    router_type: FirelensType,
    router_options: &[(&str, &str)],
    network_mode: NetworkMode,
    router_memory_reservation: Option<u64>,
    app_options: BTreeMap<String, String>,
) -> Task {
    let mut router = ContainerDefinition::new("router", "fluent");
    router.firelens_configuration = Some(FirelensConfiguration {
        router_type,
        options: map(router_options),
    });
    router.memory_reservation_mib = router_memory_reservation;
    let mut app = ContainerDefinition::new("container", "app");
    app.log_configuration = Some(LogConfiguration {
        log_driver: AWSFIRELENS.into(),
        options: app_options,
        secret_options: Vec::new(),
    });
    let definition = TaskDefinition {
        roles: Default::default(),
        family: "taskdefinition".into(),
        revision: 1,
        network_mode,
        cpu: None,
        memory_mib: None,
        volumes: Vec::new(),
        containers: vec![router, app],
        pid_mode: None,
        ipc_mode: None,
    };
    let mut task = Task::new(
        "3de392df6bfa470b97edaa6f482cd7a0".into(),
        "mycluster",
        definition,
        1,
        0,
    );
    task.arn = ARN.into();
    task
}

const FLUENTD_BRIDGE: &str = "
<source>
    @type unix
    path /var/run/fluent.sock
</source>

<source>
    @type forward
    bind 0.0.0.0
    port 24224
</source>

<filter container-firelens**>
    @type  grep
    <regexp>
        key log
        pattern *failure*
    </regexp>
</filter>

<filter container-firelens**>
    @type  grep
    <exclude>
        key log
        pattern *success*
    </exclude>
</filter>

<filter **>
    @type record_transformer
    <record>
        ecs_cluster mycluster
        ecs_task_arn arn:aws:ecs:us-east-2:01234567891011:task/mycluster/3de392df-6bfa-470b-97ed-aa6f482cd7a
        ecs_task_definition taskdefinition:1
    </record>
</filter>

@include /tmp/dummy.conf

<match container-firelens**>
    @type kinesis_firehose
    deliver_stream_name my-stream
    region us-west-2
</match>
";

const FLUENTBIT_BRIDGE_S3: &str = "
[INPUT]
    Name forward
    Mem_Buf_Limit 50MB
    unix_path /var/run/fluent.sock

[INPUT]
    Name forward
    Listen 0.0.0.0
    Port 24224

[INPUT]
    Name tcp
    Tag firelens-healthcheck
    Listen 127.0.0.1
    Port 8877

[FILTER]
    Name   grep
    Match container-firelens*
    Regex  log *failure*

[FILTER]
    Name   grep
    Match container-firelens*
    Exclude log *success*

[FILTER]
    Name record_modifier
    Match *
    Record ecs_cluster mycluster
    Record ecs_task_arn arn:aws:ecs:us-east-2:01234567891011:task/mycluster/3de392df-6bfa-470b-97ed-aa6f482cd7a
    Record ecs_task_definition taskdefinition:1

@INCLUDE /fluent-bit/etc/external.conf

[OUTPUT]
    Name null
    Match firelens-healthcheck

[OUTPUT]
    Name kinesis_firehose
    Match container-firelens*
    deliver_stream_name my-stream
    region us-west-2
";

/// (what, type, router options, network mode, memory reservation, app options, expected)
type RenderCase<'a> = (
    &'a str,
    FirelensType,
    &'a [(&'a str, &'a str)],
    NetworkMode,
    Option<u64>,
    BTreeMap<String, String>,
    String,
);

/// (router options, what they say)
type OptionsCase = (
    &'static [(&'static str, &'static str)],
    Result<RouterOptions, OptionError>,
);

#[test]
fn the_generated_configuration_is_the_ecs_agents_for_each_option_and_network_mode() {
    let fluentd_awsvpc = FLUENTD_BRIDGE.replace("bind 0.0.0.0", "bind 127.0.0.1");
    let fluentd_host = FLUENTD_BRIDGE.replace(
        "\n<source>\n    @type forward\n    bind 0.0.0.0\n    port 24224\n</source>\n",
        "",
    );
    let fluentd_without_metadata = FLUENTD_BRIDGE.replace(
        "\n<filter **>\n    @type record_transformer\n    <record>\n        ecs_cluster mycluster\n        ecs_task_arn arn:aws:ecs:us-east-2:01234567891011:task/mycluster/3de392df-6bfa-470b-97ed-aa6f482cd7a\n        ecs_task_definition taskdefinition:1\n    </record>\n</filter>\n",
        "",
    );
    let fluentbit_default_buffer = FLUENTBIT_BRIDGE_S3.replace("50MB", "25MB");
    let fluentbit_without_output = FLUENTBIT_BRIDGE_S3.replace(
        "\n[OUTPUT]\n    Name kinesis_firehose\n    Match container-firelens*\n    deliver_stream_name my-stream\n    region us-west-2\n",
        "",
    );
    let fluentbit_file = FLUENTBIT_BRIDGE_S3.replace(
        "@INCLUDE /fluent-bit/etc/external.conf",
        "@INCLUDE /tmp/dummy.conf",
    );
    let fluentbit_no_include =
        FLUENTBIT_BRIDGE_S3.replace("\n@INCLUDE /fluent-bit/etc/external.conf\n", "");
    let metadata_off: Vec<(&str, &str)> = FILE_OPTIONS
        .iter()
        .copied()
        .chain([("enable-ecs-log-metadata", "false")])
        .collect();
    let metadata_on: Vec<(&str, &str)> = FILE_OPTIONS
        .iter()
        .copied()
        .chain([("enable-ecs-log-metadata", "true")])
        .collect();
    let patterns_only = map(&[
        ("include-pattern", "*failure*"),
        ("exclude-pattern", "*success*"),
    ]);
    // (what, type, router options, network mode, memory reservation, app options, expected)
    let cases: Vec<RenderCase> = vec![
        (
            "fluentd, bridge, config-file-type file",
            FirelensType::Fluentd,
            FILE_OPTIONS,
            NetworkMode::Bridge,
            Some(100),
            fluentd_options(),
            FLUENTD_BRIDGE.to_string(),
        ),
        (
            "fluentd, awsvpc",
            FirelensType::Fluentd,
            FILE_OPTIONS,
            NetworkMode::Awsvpc,
            Some(100),
            fluentd_options(),
            fluentd_awsvpc,
        ),
        (
            "fluentd, host: no TCP input",
            FirelensType::Fluentd,
            FILE_OPTIONS,
            NetworkMode::Host,
            Some(100),
            fluentd_options(),
            fluentd_host,
        ),
        (
            "enable-ecs-log-metadata false",
            FirelensType::Fluentd,
            &metadata_off,
            NetworkMode::Bridge,
            Some(100),
            fluentd_options(),
            fluentd_without_metadata,
        ),
        (
            "enable-ecs-log-metadata true",
            FirelensType::Fluentd,
            &metadata_on,
            NetworkMode::Bridge,
            Some(100),
            fluentd_options(),
            FLUENTD_BRIDGE.to_string(),
        ),
        (
            "fluentbit, bridge, config-file-type s3, memory reservation 100",
            FirelensType::Fluentbit,
            S3_OPTIONS,
            NetworkMode::Bridge,
            Some(100),
            fluentbit_options(),
            FLUENTBIT_BRIDGE_S3.to_string(),
        ),
        (
            "fluentbit without a memory size: the default buffer",
            FirelensType::Fluentbit,
            S3_OPTIONS,
            NetworkMode::Bridge,
            None,
            fluentbit_options(),
            fluentbit_default_buffer,
        ),
        (
            "fluentbit, only patterns: no output section",
            FirelensType::Fluentbit,
            S3_OPTIONS,
            NetworkMode::Bridge,
            Some(100),
            patterns_only,
            fluentbit_without_output,
        ),
        (
            "fluentbit, config-file-type file",
            FirelensType::Fluentbit,
            FILE_OPTIONS,
            NetworkMode::Bridge,
            Some(100),
            fluentbit_options(),
            fluentbit_file,
        ),
        (
            "fluentbit, no config file",
            FirelensType::Fluentbit,
            &[],
            NetworkMode::Bridge,
            Some(100),
            fluentbit_options(),
            fluentbit_no_include,
        ),
    ];
    for (what, router_type, router_options, network_mode, reservation, app_options, expected) in
        cases
    {
        let task = task(
            router_type,
            router_options,
            network_mode,
            reservation,
            app_options,
        );
        let rendered = render_config(&task, "mycluster")
            .unwrap_or_else(|error| panic!("{what}: {error}"))
            .unwrap_or_else(|| panic!("{what}: no configuration"));
        assert_eq!(rendered, expected, "{what}");
    }
}

#[test]
fn the_buffer_is_half_the_reservation_else_half_the_limit_else_the_default() {
    let buffer = |reservation: Option<u64>, limit: Option<u64>| {
        let mut task = task(
            FirelensType::Fluentbit,
            &[],
            NetworkMode::Host,
            reservation,
            fluentbit_options(),
        );
        std::sync::Arc::make_mut(&mut task.containers[0].definition).memory_mib = limit;
        let rendered = render_config(&task, "c")
            .expect("renders")
            .expect("a router");
        rendered
            .lines()
            .find_map(|line| {
                line.trim()
                    .strip_prefix("Mem_Buf_Limit ")
                    .map(str::to_string)
            })
            .expect("a buffer line")
    };
    assert_eq!(buffer(Some(100), Some(512)), "50MB");
    assert_eq!(buffer(None, Some(512)), "256MB");
    assert_eq!(buffer(None, None), "25MB");
    assert_eq!(buffer(Some(1), None), "25MB");
}

#[test]
fn plugin_options_without_the_plugin_name_are_refused_as_ecs_refuses_them() {
    for router_type in [FirelensType::Fluentbit, FirelensType::Fluentd] {
        let task = task(
            router_type,
            &[],
            NetworkMode::Bridge,
            None,
            map(&[("key1", "value1")]),
        );
        let error = render_config(&task, "c").expect_err("no plugin");
        assert_eq!(
            error,
            format!(
                "container \"container\": missing output key {} which is required for firelens \
                 configuration of type {}",
                output_plugin_key(router_type),
                router_type.as_str()
            )
        );
    }
}

#[test]
fn secret_log_options_are_variables_of_the_router_and_the_buffer_limit_is_no_output_option() {
    let mut options = fluentbit_options();
    options.insert(LOG_DRIVER_BUFFER_LIMIT.into(), "1048576".into());
    for (router_type, reference) in [
        (FirelensType::Fluentbit, "${password_1}"),
        (FirelensType::Fluentd, "\"#{ENV['password_1']}\""),
    ] {
        let mut app_options = options.clone();
        if router_type == FirelensType::Fluentd {
            app_options.remove("Name");
            app_options.insert("@type".into(), "kinesis_firehose".into());
        }
        let mut task = task(router_type, &[], NetworkMode::Host, None, app_options);
        let app = std::sync::Arc::make_mut(&mut task.containers[1].definition);
        if let Some(log) = app.log_configuration.as_mut() {
            log.secret_options.push(SecretReference {
                name: "password".into(),
                value_from: "arn:aws:ssm:eu-west-1:1:parameter/p".into(),
            });
        }
        let rendered = render_config(&task, "c")
            .expect("renders")
            .expect("a router");
        assert!(
            rendered.contains(&format!("    password {reference}\n")),
            "{rendered}"
        );
        assert!(!rendered.contains(LOG_DRIVER_BUFFER_LIMIT), "{rendered}");
    }
    assert_eq!(secret_variable("password", 1), "password_1");
}

#[test]
fn a_task_without_a_router_has_no_configuration() {
    let mut task = task(
        FirelensType::Fluentbit,
        &[],
        NetworkMode::Bridge,
        None,
        BTreeMap::new(),
    );
    std::sync::Arc::make_mut(&mut task.containers[0].definition).firelens_configuration = None;
    assert_eq!(render_config(&task, "c"), Ok(None));
}

#[test]
fn router_options_are_read_as_the_ecs_agent_reads_them() {
    let s3 = |arn: &str| ExternalConfig::S3 {
        arn: arn.to_string(),
        object: parse_s3_arn(arn).expect("an ARN"),
    };
    let ok = |metadata: bool, external: Option<ExternalConfig>| {
        Ok(RouterOptions {
            ecs_log_metadata: metadata,
            external,
        })
    };
    let error = |option: &'static str, message: &str| {
        Err(OptionError {
            option,
            message: message.to_string(),
        })
    };
    let cases: Vec<OptionsCase> = vec![
        (&[], ok(true, None)),
        (&[("enable-ecs-log-metadata", "false")], ok(false, None)),
        (&[("enable-ecs-log-metadata", "F")], ok(false, None)),
        (&[("enable-ecs-log-metadata", "TRUE")], ok(true, None)),
        (
            &[("enable-ecs-log-metadata", "yes")],
            error(
                OPTION_ECS_LOG_METADATA,
                "invalid value \"yes\": expected true or false",
            ),
        ),
        (
            FILE_OPTIONS,
            ok(
                true,
                Some(ExternalConfig::File {
                    path: "/tmp/dummy.conf".into(),
                }),
            ),
        ),
        (S3_OPTIONS, ok(true, Some(s3("arn:aws:s3:::bucket/key")))),
        (
            &[("config-file-type", "file")],
            error(
                OPTION_CONFIG_FILE_VALUE,
                "option config-file-type is specified but config-file-value is not specified",
            ),
        ),
        (
            &[("config-file-type", "http"), ("config-file-value", "x")],
            error(
                OPTION_CONFIG_FILE_TYPE,
                "invalid value \"http\" is specified: expected file or s3",
            ),
        ),
        (
            &[
                ("config-file-type", "file"),
                ("config-file-value", "dummy.conf"),
            ],
            error(
                OPTION_CONFIG_FILE_VALUE,
                "\"dummy.conf\" must be an absolute path (of a file in the router's image)",
            ),
        ),
        (
            &[
                ("config-file-type", "s3"),
                ("config-file-value", "s3://bucket/key"),
            ],
            error(
                OPTION_CONFIG_FILE_VALUE,
                "\"s3://bucket/key\" is not an S3 object ARN (not arn:PARTITION:s3:::…; expected arn:aws:s3:::BUCKET/KEY)",
            ),
        ),
        // A value alone is no configuration file.
        (&[("config-file-value", "/x.conf")], ok(true, None)),
    ];
    for (options, expected) in cases {
        assert_eq!(router_options(&map(options)), expected, "{options:?}");
    }
}

#[test]
fn s3_arns_name_a_bucket_and_a_key_that_stays_inside_the_mirror() {
    let object = parse_s3_arn("arn:aws-cn:s3:::my-bucket/dir/fluent.conf").expect("valid");
    assert_eq!(object.bucket, "my-bucket");
    assert_eq!(object.key, "dir/fluent.conf");
    assert_eq!(
        object.mirror_path(Path::new("/srv/mirror")),
        PathBuf::from("/srv/mirror/my-bucket/dir/fluent.conf")
    );
    for bad in [
        "",
        "arn:aws:s3:::bucket",
        "arn:aws:s3:::bucket/",
        "arn:aws:s3:::/key",
        "arn::s3:::bucket/key",
        "arn:aws:s3::1:bucket/key",
        "arn:aws:s3:::bucket/../etc/passwd",
        "arn:aws:s3:::bucket/a//b",
        "arn:aws:s3:::../key",
        "arn:aws:s3:::bucket/./key",
        "arn:aws:ecs:::bucket/key",
    ] {
        assert!(parse_s3_arn(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn awsfirelens_containers_wait_for_the_router_unless_told_otherwise() {
    let dependency = |name: &str| Dependency {
        container_name: name.into(),
        condition: DependencyCondition::Start,
    };
    // The app gets START on the router; the router does not get one on itself.
    let task = task(
        FirelensType::Fluentbit,
        &[],
        NetworkMode::Bridge,
        None,
        BTreeMap::new(),
    );
    assert_eq!(
        task.containers[1].definition.depends_on,
        vec![dependency("router")]
    );
    assert!(task.containers[0].definition.depends_on.is_empty());

    // A router with a dependency of its own: nothing is added.
    let mut containers = task.containers.clone();
    std::sync::Arc::make_mut(&mut containers[1].definition)
        .depends_on
        .clear();
    std::sync::Arc::make_mut(&mut containers[0].definition)
        .depends_on
        .push(dependency("other"));
    add_router_dependencies(&mut containers);
    assert!(containers[1].definition.depends_on.is_empty());

    // A container that names the router already keeps its own condition; adding again is a
    // no-op (a restore).
    let mut containers = task.containers.clone();
    std::sync::Arc::make_mut(&mut containers[1].definition).depends_on = vec![Dependency {
        container_name: "router".into(),
        condition: DependencyCondition::Healthy,
    }];
    let before = containers.clone();
    add_router_dependencies(&mut containers);
    assert_eq!(containers, before);

    // A router that links to a container (deckhand: no edge, which would make a cycle).
    let mut containers = task.containers.clone();
    std::sync::Arc::make_mut(&mut containers[1].definition)
        .depends_on
        .clear();
    std::sync::Arc::make_mut(&mut containers[0].definition)
        .links
        .push("container".into());
    add_router_dependencies(&mut containers);
    assert!(containers[1].definition.depends_on.is_empty());

    // An awsvpc task: the router's sandbox edge does not count as a dependency of its own.
    let task = task_with_mode(NetworkMode::Awsvpc);
    assert!(task.containers[1]
        .definition
        .depends_on
        .contains(&dependency("router")));
}

fn task_with_mode(mode: NetworkMode) -> Task {
    task(FirelensType::Fluentbit, &[], mode, None, BTreeMap::new())
}

#[test]
fn the_router_and_its_containers_are_wired_to_the_tasks_directory_as_ecs_wires_them() {
    let paths = FirelensPaths::new(Path::new("/var/lib/deckhand"), "abc");
    assert_eq!(
        paths.socket(),
        PathBuf::from("/var/lib/deckhand/firelens/abc/socket/fluent.sock")
    );
    let file = router_options(&map(FILE_OPTIONS)).expect("valid");
    let s3 = router_options(&map(S3_OPTIONS)).expect("valid");
    assert_eq!(
        router_binds(&paths, FirelensType::Fluentbit, &file),
        [
            "/var/lib/deckhand/firelens/abc/config/fluent.conf:/fluent-bit/etc/fluent-bit.conf",
            "/var/lib/deckhand/firelens/abc/socket/:/var/run/",
        ]
    );
    assert_eq!(
        router_binds(&paths, FirelensType::Fluentd, &s3),
        [
            "/var/lib/deckhand/firelens/abc/config/fluent.conf:/fluentd/etc/fluent.conf",
            "/var/lib/deckhand/firelens/abc/socket/:/var/run/",
            "/var/lib/deckhand/firelens/abc/config/external.conf:/fluentd/etc/external.conf",
        ]
    );
    assert_eq!(
        fluentd_log_options(
            &paths,
            "web",
            "abc",
            &map(&[("Name", "stdout"), (LOG_DRIVER_BUFFER_LIMIT, "2097152")])
        ),
        map(&[
            ("tag", "web-firelens-abc"),
            (
                "fluentd-address",
                "unix:///var/lib/deckhand/firelens/abc/socket/fluent.sock"
            ),
            ("fluentd-sub-second-precision", "true"),
            ("fluentd-buffer-limit", "2097152"),
            ("fluentd-async", "true"),
        ])
    );
}
