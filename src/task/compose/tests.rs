//! Compose files → task definitions, by table: the shapes popular projects use, every refused
//! key with its message and line, interpolation, and the small value languages.

use super::values::*;
use super::*;
use serde_json::json;

fn context_with<'a>(read: ReadFile<'a>, dot_env: Option<&str>) -> ComposeContext<'a> {
    let mut environment = BTreeMap::new();
    environment.insert("TAG".to_string(), "1.25".to_string());
    environment.insert("EMPTY".to_string(), String::new());
    environment.insert("HOME".to_string(), "/home/ops".to_string());
    ComposeContext {
        environment,
        dot_env: dot_env.map(str::to_string),
        directory_name: Some("My_App.v2".to_string()),
        directory: Some(PathBuf::from("/srv/my_app")),
        read_file: read,
    }
}

fn read_files(name: &Path) -> std::io::Result<String> {
    match name.to_str().unwrap_or_default() {
        "/srv/my_app/web.env" => Ok("# settings\nMODE=production\nexport GREETING=\"hello world\"\nTAG\n".to_string()),
        _ => Err(std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory")),
    }
}

fn convert(yaml: &str) -> Result<ConvertedCompose, Vec<String>> {
    let context = context_with(&read_files, Some("DB_PASSWORD=from-dot-env\nTAG=ignored-env-wins\n"));
    convert_compose(yaml.as_bytes(), &context).map_err(|errors| errors.iter().map(ToString::to_string).collect())
}

fn json_of(yaml: &str) -> serde_json::Value {
    match convert(yaml) {
        Ok(converted) => converted.json,
        Err(errors) => panic!("{yaml}\n→ {errors:#?}"),
    }
}

fn warnings_of(yaml: &str) -> Vec<String> {
    convert(yaml).map(|converted| converted.parsed.warnings).unwrap_or_else(|errors| panic!("{errors:#?}"))
}

fn errors_of(yaml: &str) -> Vec<String> {
    match convert(yaml) {
        Ok(converted) => panic!("{yaml}\n→ accepted: {}", converted.json),
        Err(errors) => errors,
    }
}

#[test]
fn whole_files_become_these_task_definitions() {
    let cases: &[(&str, &str, serde_json::Value)] = &[
        (
            "web app and a database, health-gated",
            "name: shop
services:
  web:
    image: nginx:${TAG}
    ports: ['8080:80']
    depends_on:
      db:
        condition: service_healthy
    environment:
      DATABASE_URL: postgres://db/shop
  db:
    image: postgres:16
    environment:
      - POSTGRES_PASSWORD=${DB_PASSWORD}
    healthcheck:
      test: [CMD-SHELL, pg_isready -U postgres]
      interval: 10s
      timeout: 5s
      retries: 5
    volumes:
      - db-data:/var/lib/postgresql/data
volumes:
  db-data:
",
            json!({
                "family": "shop", "networkMode": "bridge",
                "volumes": [{"name": "shop_db-data", "dockerVolumeConfiguration": {"scope": "shared", "autoprovision": true}}],
                "containerDefinitions": [
                    {"name": "web", "image": "nginx:1.25", "essential": true,
                     "environment": [{"name": "DATABASE_URL", "value": "postgres://db/shop"}],
                     "portMappings": [{"containerPort": 80, "hostPort": 8080, "protocol": "tcp"}],
                     "dependsOn": [{"containerName": "db", "condition": "HEALTHY"}],
                     "links": ["db"]},
                    {"name": "db", "image": "postgres:16", "essential": true,
                     "environment": [{"name": "POSTGRES_PASSWORD", "value": "from-dot-env"}],
                     "mountPoints": [{"sourceVolume": "shop_db-data", "containerPath": "/var/lib/postgresql/data", "readOnly": false}],
                     "healthCheck": {"command": ["CMD-SHELL", "pg_isready -U postgres"], "interval": 10, "timeout": 5, "retries": 5, "startPeriod": 0}}
                ]
            }),
        ),
        (
            "a one-shot migration before the app (it is not essential)",
            "services:
  migrate:
    image: app:1
    command: ./manage.py migrate --noinput
  app:
    image: app:1
    command: [gunicorn, 'app:wsgi']
    entrypoint: /bin/sh -c 'exec \"$$@\"' --
    depends_on:
      migrate:
        condition: service_completed_successfully
    restart: unless-stopped
",
            json!({
                "family": "my_appv2", "networkMode": "bridge",
                "containerDefinitions": [
                    {"name": "migrate", "image": "app:1", "essential": false,
                     "command": ["./manage.py", "migrate", "--noinput"]},
                    {"name": "app", "image": "app:1", "essential": true,
                     "command": ["gunicorn", "app:wsgi"],
                     "entryPoint": ["/bin/sh", "-c", "exec \"$@\"", "--"],
                     "dependsOn": [{"containerName": "migrate", "condition": "SUCCESS"}],
                     "restartPolicy": {"enabled": true, "restartAttemptPeriod": 60}}
                ]
            }),
        ),
        (
            "bind mounts, named volumes (long and short forms), anonymous volumes and tmpfs",
            "name: files
x-common: &common
  image: busybox:1.36
  restart: on-failure
services:
  reader:
    <<: *common
    volumes:
      - ./config:/etc/app:ro
      - /var/log/app:/logs
      - cache:/cache
      - /scratch
      - type: bind
        source: ~/data
        target: /data
        read_only: true
      - type: tmpfs
        target: /tmp
        tmpfs:
          size: 16m
  writer:
    <<: *common
    x-deckhand-essential: false
    volumes:
      - ./config:/etc/app
      - type: volume
        source: cache
        target: /cache
volumes:
  cache:
    driver: local
    labels:
      team: ops
",
            json!({
                "family": "files", "networkMode": "bridge",
                "volumes": [
                    {"name": "bind-1", "host": {"sourcePath": "/srv/my_app/config"}},
                    {"name": "bind-2", "host": {"sourcePath": "/var/log/app"}},
                    {"name": "files_cache", "dockerVolumeConfiguration": {"scope": "shared", "autoprovision": true, "driver": "local", "labels": {"team": "ops"}}},
                    {"name": "anonymous-1"},
                    {"name": "bind-3", "host": {"sourcePath": "/home/ops/data"}}
                ],
                "containerDefinitions": [
                    {"name": "reader", "image": "busybox:1.36", "essential": true,
                     "mountPoints": [
                        {"sourceVolume": "bind-1", "containerPath": "/etc/app", "readOnly": true},
                        {"sourceVolume": "bind-2", "containerPath": "/logs", "readOnly": false},
                        {"sourceVolume": "files_cache", "containerPath": "/cache", "readOnly": false},
                        {"sourceVolume": "anonymous-1", "containerPath": "/scratch", "readOnly": false},
                        {"sourceVolume": "bind-3", "containerPath": "/data", "readOnly": true}
                     ],
                     "linuxParameters": {"tmpfs": [{"containerPath": "/tmp", "size": 16}]},
                     "restartPolicy": {"enabled": true, "ignoredExitCodes": [0], "restartAttemptPeriod": 60}},
                    {"name": "writer", "image": "busybox:1.36", "essential": false,
                     "mountPoints": [
                        {"sourceVolume": "bind-1", "containerPath": "/etc/app", "readOnly": false},
                        {"sourceVolume": "files_cache", "containerPath": "/cache", "readOnly": false}
                     ],
                     "restartPolicy": {"enabled": true, "ignoredExitCodes": [0], "restartAttemptPeriod": 60}}
                ]
            }),
        ),
        (
            "host networking",
            "name: edge
services:
  agent:
    image: telegraf:1.30
    network_mode: host
    ports: ['8125:8125/udp']
    cap_add: [NET_ADMIN, CAP_SYS_TIME]
    cap_drop: [all]
    init: true
    privileged: false
    read_only: true
    user: '1000:1000'
    working_dir: /app
    mem_limit: 256m
    mem_reservation: 128M
    cpus: 0.5
    stop_grace_period: 1m30s
    labels: [tier=edge]
    logging:
      driver: json-file
      options: {max-size: 10m, max-file: 3}
    ulimits:
      nofile: {soft: 1024, hard: 4096}
      nproc: 512
    dns: 1.1.1.1
    dns_search: [example.com]
    extra_hosts: ['gateway:10.0.0.1', 'db=10.0.0.2']
",
            json!({
                "family": "edge", "networkMode": "host",
                "containerDefinitions": [
                    {"name": "agent", "image": "telegraf:1.30", "essential": true,
                     "portMappings": [{"containerPort": 8125, "hostPort": 8125, "protocol": "udp"}],
                     "linuxParameters": {"initProcessEnabled": true, "capabilities": {"add": ["NET_ADMIN", "SYS_TIME"], "drop": ["ALL"]}},
                     "privileged": false, "readonlyRootFilesystem": true,
                     "user": "1000:1000", "workingDirectory": "/app",
                     "memory": 256, "memoryReservation": 128, "cpu": 512,
                     "stopTimeout": 90,
                     "dockerLabels": {"tier": "edge"},
                     "logConfiguration": {"logDriver": "json-file", "options": {"max-size": "10m", "max-file": "3"}},
                     "ulimits": [{"name": "nofile", "softLimit": 1024, "hardLimit": 4096}, {"name": "nproc", "softLimit": 512, "hardLimit": 512}],
                     "dnsServers": ["1.1.1.1"], "dnsSearchDomains": ["example.com"],
                     "extraHosts": [{"hostname": "gateway", "ipAddress": "10.0.0.1"}, {"hostname": "db", "ipAddress": "10.0.0.2"}]}
                ]
            }),
        ),
        (
            "ports in every form, env_file under environment, deploy resources",
            "name: ports
services:
  api:
    image: api
    env_file: web.env
    environment: [MODE=debug, EMPTY, UNSET_HERE]
    ports:
      - '80'
      - 8443:443
      - 127.0.0.1:9000:9000/udp
      - '7000-7001:8000-8001'
      - '6000-6002'
      - target: 5000
        published: '5001'
        protocol: tcp
        mode: host
    deploy:
      replicas: 1
      resources:
        limits: {cpus: '1.5', memory: 1g}
        reservations: {memory: 512m}
",
            json!({
                "family": "ports", "networkMode": "bridge",
                "containerDefinitions": [
                    {"name": "api", "image": "api", "essential": true,
                     "environment": [
                        {"name": "EMPTY", "value": ""},
                        {"name": "GREETING", "value": "hello world"},
                        {"name": "MODE", "value": "debug"},
                        {"name": "TAG", "value": "1.25"}
                     ],
                     "portMappings": [
                        {"containerPort": 80, "protocol": "tcp"},
                        {"containerPort": 443, "hostPort": 8443, "protocol": "tcp"},
                        {"containerPort": 9000, "hostPort": 9000, "protocol": "udp"},
                        {"containerPort": 8000, "hostPort": 7000, "protocol": "tcp"},
                        {"containerPort": 8001, "hostPort": 7001, "protocol": "tcp"},
                        {"containerPortRange": "6000-6002", "protocol": "tcp"},
                        {"containerPort": 5000, "hostPort": 5001, "protocol": "tcp"}
                     ],
                     "memory": 1024, "memoryReservation": 512, "cpu": 1536}
                ]
            }),
        ),
    ];
    for (name, yaml, expected) in cases {
        let actual = json_of(yaml);
        assert_eq!(&actual, expected, "{name}:\n{}", serde_json::to_string_pretty(&actual).unwrap_or_default());
    }
}

#[test]
fn refused_keys_are_errors_with_path_and_line_all_at_once() {
    let errors = errors_of(
        "name: bad
services:
  web:
    build: .
    image: web
    secrets: [token]
    profiles: [debug]
  api:
    image: api
    scale: 3
    deploy:
      replicas: 2
    networks: [backend]
    network_mode: service:web
    stop_signal: SIGNOPE
    frobnicate: 1
  worker:
    extends:
      file: base.yml
      service: api
networks:
  backend: {}
secrets:
  token:
    file: ./token
configs:
  app:
    file: ./app.conf
include:
  - other.yml
bogus: 1
",
    );
    let expected = [
        "networks.backend (line 22): user-defined networks are not supported",
        "secrets (line 23): ECS secrets and configs come from AWS services",
        "configs (line 26): ECS secrets and configs come from AWS services",
        "include (line 29): include is not supported",
        "bogus (line 31): unknown top-level key",
        "services.web.profiles (line 7): the service is in profiles debug and none is selected",
        "services.worker.extends.file (line 19): extends from another file (\"base.yml\") is not supported",
        "services.api.networks (line 13): user-defined networks are not supported",
        "services.api.frobnicate (line 16): unknown or unsupported service key",
        "services.api.network_mode (line 14): \"service:web\" is not supported",
        "services.api.stop_signal (line 15): \"SIGNOPE\" is not a Linux signal",
        "services.api.deploy.replicas (line 12): a task runs each service once",
        "services.api.scale (line 10): a task runs each service once",
    ];
    for wanted in expected {
        assert!(errors.iter().any(|error| error.starts_with(wanted)), "missing {wanted:?} in {errors:#?}");
    }
    assert_eq!(errors.len(), expected.len(), "{errors:#?}");

    // The profile's service is refused on its own, so its other errors are not reported; once
    // the profile is gone they are.
    let errors = errors_of("services:\n  web:\n    build: .\n    image: web\n    secrets: [token]\n");
    assert_eq!(errors, [
        "services.web.build (line 3): build the image first (docker build -t NAME .) and give image: NAME; deckhand runs images",
        "services.web.secrets (line 5): ECS secrets come from AWS services deckhand does not use; mount the file with a bind volume instead",
    ]);
}

#[test]
fn one_line_errors() {
    let cases: &[(&str, &str)] = &[
        ("services:\n  web:\n    command: echo hi\n", "services.web.image (line 2): required: deckhand runs images (build them first)"),
        ("services:\n  web:\n    image: a\n    volumes: [data:/data]\n", "services.web.volumes[0] (line 4): volume \"data\" is not declared under the top-level volumes:"),
        ("services:\n  web:\n    image: a\n    depends_on: [db]\n", "services.web.depends_on (line 4): no service named \"db\""),
        ("services:\n  web:\n    image: a\n    ports: ['80:80:80:80']\n", "services.web.ports[0] (line 4): \"80:80:80:80\" is not a port (expected [[HOST_IP:]HOST:]CONTAINER[/PROTOCOL])"),
        ("services:\n  web:\n    image: a\n    restart: sometimes\n", "services.web.restart (line 4): \"sometimes\": expected no, always, on-failure[:N] or unless-stopped"),
        ("services:\n  web:\n    image: a\n    healthcheck:\n      test: [CMD, true]\n      interval: 10\n", "services.web.healthcheck.interval (line 6): \"10\" is not a duration"),
        ("services:\n  web:\n    image: a\n    healthcheck:\n      test: [CMD, 'true']\n      interval: ten\n", "services.web.healthcheck.interval (line 6): \"ten\" is not a duration (like 30s, 1m30s or 500ms)"),
        ("services:\n  web:\n    image: a\n    command: \"echo 'unclosed\"\n", "services.web.command (line 4): unterminated single quote"),
        ("services:\n  web:\n    image: ${MISSING?set it}\n", "services.web.image (line 3): required variable MISSING is not set: set it"),
        ("services:\n  web:\n    image: ${EMPTY:?}\n", "services.web.image (line 3): required variable EMPTY is not set"),
        ("services: [\n", "$ (line 1): not valid YAML: unclosed bracket"),
        ("- a\n- b\n", "$ (line 1): a Compose file is a mapping with services:"),
        ("services: {}\n", "services (line 1): must be a mapping of at least one service"),
        ("services:\n  web:\n    image: a\n    depends_on:\n      web2:\n        condition: service_done\n  web2:\n    image: b\n", "services.web.depends_on.web2.condition (line 5): unknown condition \"service_done\""),
        ("services:\n  a:\n    image: a\n    network_mode: host\n  b:\n    image: b\n    network_mode: none\n", "services.b.network_mode (line 7): every service of a task shares one network mode (a has host)"),
        ("services:\n  web:\n    image: a\n    env_file: missing.env\n", "services.web.env_file (line 4): cannot read env_file \"missing.env\": No such file or directory"),
        ("services:\n  web:\n    image: a\n    volumes:\n      - type: volume\n        source: v\n        target: /v\n        volume: {subpath: x}\nvolumes: {v: {}}\n", "services.web.volumes[0].volume.subpath (line 8): unknown or unsupported key (known here: nocopy)"),
        ("services:\n  web:\n    image: a\n    deploy:\n      resources:\n        limits: {pids: 10}\n", "services.web.deploy.resources.limits.pids (line 6): unknown or unsupported key (known here: cpus, memory)"),
        ("services:\n  web:\n    image: a\n    ports:\n      - target: 80\n        publish: 8080\n", "services.web.ports[0].publish (line 6): unknown or unsupported key"),
        ("services:\n  web:\n    image: a\n    x-deckhand-essential: false\n", "converted task definition containerDefinitions: at least one container must be essential"),
        ("services:\n  web:\n    image: a\n    volumes_from: [data]\n", "services.web.volumes_from[0] (line 4): no service named \"data\""),
        ("services:\n  web:\n    image: a\n    volumes_from: ['container:legacy']\n", "services.web.volumes_from[0] (line 4): \"container:legacy\": volumes from a container outside the project are not supported"),
        ("services:\n  web:\n    image: a\n    volumes_from: ['db:z']\n  db:\n    image: b\n", "services.web.volumes_from[0] (line 4): \"db:z\": unknown mode \"z\" (expected ro or rw)"),
    ];
    for (yaml, wanted) in cases {
        let errors = errors_of(yaml);
        assert!(errors.iter().any(|error| error.starts_with(wanted)), "{yaml}\nwanted {wanted:?}\ngot {errors:#?}");
    }
}

#[test]
fn values_ecs_would_refuse_are_made_valid_with_a_warning() {
    let yaml = "services:
  web:
    image: a
    container_name: my-web
    ports: ['127.0.0.1:8080:80']
    healthcheck:
      test: curl -f http://localhost/
      interval: 1s
      timeout: 1s
      retries: 20
      start_period: 10m
    restart: on-failure:5
    stop_grace_period: 5m
    tmpfs: /run
    mem_limit: 1m
";
    let converted = convert(yaml).unwrap_or_else(|errors| panic!("{errors:#?}"));
    let container = &converted.json["containerDefinitions"][0];
    assert_eq!(container["healthCheck"], json!({"command": ["CMD-SHELL", "curl -f http://localhost/"], "interval": 5, "timeout": 2, "retries": 10, "startPeriod": 300}));
    assert_eq!(container["stopTimeout"], json!(120));
    assert_eq!(container["memory"], json!(6));
    assert_eq!(container["portMappings"], json!([{"containerPort": 80, "hostPort": 8080, "protocol": "tcp"}]));
    assert_eq!(container["linuxParameters"]["tmpfs"], json!([{"containerPath": "/run", "size": 64}]));
    let warnings = converted.parsed.warnings;
    for wanted in [
        "services.web.container_name (line 4): ignored: deckhand names containers after the task",
        "services.web.ports[0] (line 5): host address 127.0.0.1 dropped",
        "services.web.healthcheck.interval (line 8): 1 s is outside ECS's 5–300 s; using 5 s",
        "services.web.healthcheck.timeout (line 9): 1 s is outside ECS's 2–60 s; using 2 s",
        "services.web.healthcheck.retries (line 10): 20 is outside ECS's 1–10; using 10",
        "services.web.healthcheck.start_period (line 11): 600 s is outside ECS's 0–300 s; using 300 s",
        "services.web.restart (line 12): the retry count 5 is ignored",
        "services.web.stop_grace_period (line 13): 300 s is more than ECS's 120 s stopTimeout",
        "services.web.tmpfs[0] (line 14): tmpfs /run has no size; using 64 MiB",
        "services.web.mem_limit",
    ] {
        assert!(warnings.iter().any(|warning| warning.starts_with(wanted)), "missing {wanted:?} in {warnings:#?}");
    }
}

#[test]
fn scalars_read_as_compose_reads_them() {
    let yaml = "services:\n  a:\n    image: a\n    restart: no\n    ports: [22:22]\n    environment:\n      DEBUG: yes\n      MODE: 0755\n      ON: on\n      T: true\n      N: 10\n";
    let container = json_of(yaml)["containerDefinitions"][0].clone();
    assert_eq!(container.get("restartPolicy"), None);
    assert_eq!(container["portMappings"], json!([{"containerPort": 22, "hostPort": 22, "protocol": "tcp"}]));
    assert_eq!(container["environment"], json!([
        {"name": "DEBUG", "value": "yes"}, {"name": "MODE", "value": "0755"}, {"name": "N", "value": "10"},
        {"name": "ON", "value": "on"}, {"name": "T", "value": "true"}
    ]));
}

#[test]
fn healthcheck_forms() {
    let check = |body: &str| json_of(&format!("services:\n  web:\n    image: a\n    healthcheck:\n{body}"))["containerDefinitions"][0]["healthCheck"].clone();
    assert_eq!(check("      disable: true\n"), json!({"command": ["NONE"]}));
    assert_eq!(check("      test: [NONE]\n"), json!({"command": ["NONE"]}));
    assert_eq!(check("      test: [CMD, wget, -q, localhost]\n"), json!({"command": ["CMD", "wget", "-q", "localhost"], "interval": 30, "timeout": 29, "retries": 3, "startPeriod": 0}));
    assert_eq!(check("      test: exit 0\n      interval: 1m30s\n      timeout: 10s\n"), json!({"command": ["CMD-SHELL", "exit 0"], "interval": 90, "timeout": 10, "retries": 3, "startPeriod": 0}));
}

#[test]
fn x_keys_are_ignored_and_version_is_accepted() {
    let yaml = "version: '3.8'\nx-anything: {whatever: [1]}\nservices:\n  web:\n    image: a\n    x-note: ${NOT_INTERPOLATED?no}\n";
    assert_eq!(json_of(yaml)["containerDefinitions"][0], json!({"name": "web", "image": "a", "essential": true}));
    assert!(warnings_of(yaml).is_empty());
}

#[test]
fn interpolation() {
    let variables: BTreeMap<String, String> = [("A", "alpha"), ("EMPTY", ""), ("B_2", "two")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    type Expected<'a> = Result<(&'a str, &'a [&'a str]), &'a str>;
    let cases: &[(&str, Expected)] = &[
        ("plain", Ok(("plain", &[]))),
        ("$A and ${A}", Ok(("alpha and alpha", &[]))),
        ("${B_2}x$B_2", Ok(("twoxtwo", &[]))),
        ("$$A costs $$5 $", Ok(("$A costs $5 $", &[]))),
        ("${NOPE}", Ok(("", &["NOPE"]))),
        ("$NOPE/x", Ok(("/x", &["NOPE"]))),
        ("${NOPE:-def}", Ok(("def", &[]))),
        ("${EMPTY:-def}", Ok(("def", &[]))),
        ("${EMPTY-def}", Ok(("", &[]))),
        ("${NOPE-def}", Ok(("def", &[]))),
        ("${NOPE:-${A}-x}", Ok(("alpha-x", &[]))),
        ("${NOPE:-${ALSO:-deep}}", Ok(("deep", &[]))),
        ("${A:+set}", Ok(("set", &[]))),
        ("${EMPTY:+set}", Ok(("", &[]))),
        ("${EMPTY+set}", Ok(("set", &[]))),
        ("${A:?boom}", Ok(("alpha", &[]))),
        ("${NOPE:?boom}", Err("required variable NOPE is not set: boom")),
        ("${NOPE?boom}", Err("required variable NOPE is not set: boom")),
        ("${EMPTY:?}", Err("required variable EMPTY is not set")),
        ("${EMPTY?}", Ok(("", &[]))),
        ("${A", Err("unterminated ${ in \"${A\"")),
        ("${}", Err("invalid variable name in ${}")),
        ("${A B}", Err("invalid interpolation ${A B}")),
        ("é${A}é", Ok(("éalphaé", &[]))),
    ];
    for (input, expected) in cases {
        let actual = interpolate(input, &variables);
        match expected {
            Ok((text, unset)) => {
                let actual = actual.unwrap_or_else(|error| panic!("{input}: {error}"));
                assert_eq!(actual.text, *text, "{input}");
                assert_eq!(actual.unset, *unset, "{input}");
            }
            Err(message) => assert_eq!(actual, Err(message.to_string()), "{input}"),
        }
    }
    // From the file: the environment wins over .env, and an unset variable warns.
    let converted = convert("services:\n  web:\n    image: a:${TAG}\n    command: echo ${DB_PASSWORD} ${NOT_SET}\n").unwrap_or_else(|errors| panic!("{errors:#?}"));
    assert_eq!(converted.json["containerDefinitions"][0]["image"], json!("a:1.25"));
    assert_eq!(converted.json["containerDefinitions"][0]["command"], json!(["echo", "from-dot-env"]));
    assert!(converted.parsed.warnings.contains(&"services.web.command (line 4): variable NOT_SET is not set; using an empty string".to_string()), "{:#?}", converted.parsed.warnings);
}

#[test]
fn env_files() {
    let none = BTreeMap::new();
    let entries = |text: &str| parse_env_file(text, &none).map(|file| file.entries);
    assert_eq!(
        entries("# c\n\nA=1\nexport B = two words # note\nC='single # kept'\nD=\"x\\ny\"\nE\nF=\nG: colon\nH='it\\'s'\nI=\"a\\rb\" # after\nJ=a#b\n"),
        Ok(vec![
            ("A".into(), Some("1".into())),
            ("B".into(), Some("two words".into())),
            ("C".into(), Some("single # kept".into())),
            ("D".into(), Some("x\ny".into())),
            ("E".into(), None),
            ("F".into(), Some(String::new())),
            ("G".into(), Some("colon".into())),
            ("H".into(), Some("it's".into())),
            ("I".into(), Some("a\rb".into())),
            ("J".into(), Some("a#b".into())),
        ])
    );
    assert_eq!(entries("A=\"open\n"), Err("line 1: unterminated double quote".into()));
    assert_eq!(entries("NOT A KEY\n"), Err("line 1: not KEY=VALUE".into()));
}

#[test]
fn env_file_values_are_interpolated_as_compose_does() {
    let environment: BTreeMap<String, String> = [("HOST", "db.internal"), ("PORT", "5432"), ("EMPTY", "")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    type Expected<'a> = Result<(&'a [(&'a str, &'a str)], &'a [&'a str]), &'a str>;
    let cases: &[(&str, Expected)] = &[
        // Unquoted and double-quoted values are interpolated; single-quoted ones are literal.
        ("URL=postgres://${HOST}:$PORT/app\n", Ok((&[("URL", "postgres://db.internal:5432/app")], &[]))),
        ("A=\"${HOST}\"\nB='${HOST}'\n", Ok((&[("A", "db.internal"), ("B", "${HOST}")], &[]))),
        // Earlier lines are variables for later ones.
        ("USER=app\nDSN=${USER}@${HOST}\n", Ok((&[("USER", "app"), ("DSN", "app@db.internal")], &[]))),
        // The environment wins over a line of the file.
        ("HOST=local\nTARGET=$HOST\n", Ok((&[("HOST", "local"), ("TARGET", "db.internal")], &[]))),
        // Defaults, $$, and an unset variable (empty, reported).
        ("A=${MISSING:-fallback}\nB=$$HOST\nC=${EMPTY:-e}\nD=${NOPE}x\n", Ok((&[("A", "fallback"), ("B", "$HOST"), ("C", "e"), ("D", "x")], &["NOPE"]))),
        // A required variable that is missing is an error naming the line.
        ("A=1\nB=${SECRET:?set SECRET}\n", Err("line 2: required variable SECRET is not set: set SECRET")),
        ("A=${unclosed\n", Err("line 1: unterminated ${ in \"${unclosed\"")),
    ];
    for (text, expected) in cases {
        let actual = parse_env_file(text, &environment);
        match expected {
            Ok((pairs, unset)) => {
                let file = actual.unwrap_or_else(|error| panic!("{text}: {error}"));
                let wanted: Vec<(String, Option<String>)> = pairs.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect();
                assert_eq!(file.entries, wanted, "{text}");
                assert_eq!(file.unset, *unset, "{text}");
            }
            Err(message) => assert_eq!(actual, Err(message.to_string()), "{text}"),
        }
    }

    // In a Compose file: an env_file refers to the file's variables (environment over .env),
    // and .env refers to the environment and its own earlier lines.
    let read = |path: &Path| -> std::io::Result<String> {
        match path.to_str().unwrap_or_default() {
            "/srv/my_app/app.env" => Ok("GREETING=hello ${WHO}\nIMAGE_TAG=$TAG\nLATER=${GREETING}!\nLOST=${GONE}\n".to_string()),
            _ => Err(std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory")),
        }
    };
    let mut context = context_with(&read, Some("WHO=world\nTAG_COPY=${TAG}\nBOTH=${WHO}-${TAG_COPY}\n"));
    context.environment.insert("TAG".into(), "2.0".into());
    let converted = convert_compose(b"services:\n  web:\n    image: a:${BOTH}\n    env_file: app.env\n", &context).unwrap_or_else(|errors| panic!("{errors:#?}"));
    assert_eq!(converted.json["containerDefinitions"][0]["image"], json!("a:world-2.0"));
    assert_eq!(converted.json["containerDefinitions"][0]["environment"], json!([
        {"name": "GREETING", "value": "hello world"},
        {"name": "IMAGE_TAG", "value": "2.0"},
        {"name": "LATER", "value": "hello world!"},
        {"name": "LOST", "value": ""}
    ]));
    assert!(converted.parsed.warnings.contains(&"services.web.env_file (line 4): app.env: variable GONE is not set; using an empty string".to_string()), "{:#?}", converted.parsed.warnings);
    let context = context_with(&read, Some("BAD=${NEEDED:?give NEEDED}\n"));
    let errors: Vec<String> = convert_compose(b"services:\n  web:\n    image: a\n", &context).err().unwrap_or_default().iter().map(ToString::to_string).collect();
    assert_eq!(errors, [".env: line 1: required variable NEEDED is not set: give NEEDED"]);
}

#[test]
fn compose_project_name_wins_over_name_as_in_compose() {
    let read = |_: &Path| -> std::io::Result<String> { Err(std::io::Error::new(std::io::ErrorKind::NotFound, "none")) };
    let family = |environment: Option<&str>, dot_env: Option<&str>, yaml: &str| -> Result<serde_json::Value, Vec<String>> {
        let mut context = context_with(&read, dot_env);
        if let Some(name) = environment {
            context.environment.insert("COMPOSE_PROJECT_NAME".into(), name.into());
        }
        convert_compose(yaml.as_bytes(), &context)
            .map(|converted| converted.json["family"].clone())
            .map_err(|errors| errors.iter().map(ToString::to_string).collect())
    };
    let named = "name: from-file\nservices:\n  a:\n    image: a\n";
    let unnamed = "services:\n  a:\n    image: a\n";
    /// (COMPOSE_PROJECT_NAME in the environment, the .env, the file, the family or the error)
    type Case<'a> = (Option<&'a str>, Option<&'a str>, &'a str, Result<&'a str, &'a str>);
    let cases: &[Case] = &[
        // 1. the environment, 2. the .env beside the file, 3. name:, 4. the directory.
        (Some("From_Env"), Some("COMPOSE_PROJECT_NAME=from-dot-env\n"), named, Ok("from_env")),
        (None, Some("COMPOSE_PROJECT_NAME=from-dot-env\n"), named, Ok("from-dot-env")),
        (None, None, named, Ok("from-file")),
        (None, None, unnamed, Ok("my_appv2")),
        (Some("Shop"), None, unnamed, Ok("shop")),
        // An empty variable is no name.
        (Some(""), None, named, Ok("from-file")),
        (Some("..."), None, named, Err("COMPOSE_PROJECT_NAME: COMPOSE_PROJECT_NAME has no letter or digit")),
    ];
    for (environment, dot_env, yaml, expected) in cases {
        let actual = family(*environment, *dot_env, yaml);
        match expected {
            Ok(name) => assert_eq!(actual, Ok(json!(name)), "{environment:?} {dot_env:?} {yaml}"),
            Err(message) => assert_eq!(actual, Err(vec![message.to_string()]), "{environment:?} {dot_env:?}"),
        }
    }
    // The project name names the Compose volumes too.
    let volumes = family(Some("other"), None, "name: shop\nservices:\n  a:\n    image: a\n    volumes: [data:/data]\nvolumes: {data: {}}\n");
    assert_eq!(volumes, Ok(json!("other")));
    let mut context = context_with(&read, None);
    context.environment.insert("COMPOSE_PROJECT_NAME".into(), "other".into());
    let converted = convert_compose(b"name: shop\nservices:\n  a:\n    image: a\n    volumes: [data:/data]\nvolumes: {data: {}}\n", &context).unwrap_or_else(|errors| panic!("{errors:#?}"));
    assert_eq!(converted.json["volumes"][0]["name"], json!("other_data"));
}

#[test]
fn durations_sizes_words_ports_names() {
    for (text, expected) in [("30s", Ok(30_000)), ("1m30s", Ok(90_000)), ("500ms", Ok(500)), ("1.5h", Ok(5_400_000)), ("2h45m", Ok(9_900_000)), ("10us", Ok(1)), ("0", Ok(0)), ("", Err(())), ("10", Err(())), ("s", Err(())), ("1x", Err(())), ("1.2.3s", Err(()))] {
        assert_eq!(parse_duration_ms(text).map_err(|_| ()), expected, "{text}");
    }
    for (text, expected) in [("512m", Ok(512 << 20)), ("1g", Ok(1 << 30)), ("1.5GB", Ok(3 << 29)), ("1024", Ok(1024)), ("300k", Ok(300 << 10)), ("12q", Err(())), ("", Err(()))] {
        assert_eq!(parse_bytes(text).map_err(|_| ()), expected, "{text}");
    }
    let words: &[(&str, Result<&[&str], ()>)] = &[
        ("npm run start", Ok(&["npm", "run", "start"])),
        ("  sh -c 'echo $HOME; exit 1'  ", Ok(&["sh", "-c", "echo $HOME; exit 1"])),
        (r#"echo "a \"b\" \$c \n" d\ e"#, Ok(&["echo", "a \"b\" $c \\n", "d e"])),
        ("''", Ok(&[""])),
        ("", Ok(&[])),
        ("echo \"open", Err(())),
    ];
    for (text, expected) in words {
        let expected = expected.map(|words| words.iter().map(|w| w.to_string()).collect::<Vec<_>>());
        assert_eq!(shell_words(text).map_err(|_| ()), expected, "{text}");
    }
    let port = |ip: Option<&str>, host: Option<(u16, u16)>, container: (u16, u16), protocol: &str| ShortPort { host_ip: ip.map(str::to_string), host, container, protocol: protocol.to_string() };
    let ports = [
        ("80", Ok(port(None, None, (80, 80), "tcp"))),
        ("8080:80", Ok(port(None, Some((8080, 8080)), (80, 80), "tcp"))),
        ("127.0.0.1:8080:80/udp", Ok(port(Some("127.0.0.1"), Some((8080, 8080)), (80, 80), "udp"))),
        ("[::1]:8080:80", Ok(port(Some("::1"), Some((8080, 8080)), (80, 80), "tcp"))),
        ("127.0.0.1::80", Ok(port(Some("127.0.0.1"), None, (80, 80), "tcp"))),
        ("9090-9091:8080-8081", Ok(port(None, Some((9090, 9091)), (8080, 8081), "tcp"))),
        ("3000-3005", Ok(port(None, None, (3000, 3005), "tcp"))),
        ("80/sctp", Err(())),
        ("70000", Err(())),
        ("90-80", Err(())),
        ("a:b", Err(())),
        ("[::1", Err(())),
    ];
    for (text, expected) in ports {
        assert_eq!(parse_port(text).map_err(|_| ()), expected, "{text}");
    }
    for (name, expected) in [("My_App.v2", "my_appv2"), ("--x", "x"), ("Ünïcode Dir", "ncodedir"), ("...", "")] {
        assert_eq!(normalise_project_name(name), expected, "{name}");
    }
}

#[test]
fn what_looks_like_compose() {
    assert!(looks_like_compose("compose.yaml", b"{}"));
    assert!(looks_like_compose("x.YML", b""));
    assert!(!looks_like_compose("web.json", b"services: {}"));
    assert!(looks_like_compose("-", b"services:\n  a: {}"));
    assert!(!looks_like_compose("-", b"\xef\xbb\xbf  {\"family\": \"a\"}"));
    assert!(!looks_like_compose("-", b""));
}

#[test]
fn hostile_yaml_is_an_error_not_a_panic() {
    let mut deep = String::new();
    for _ in 0..5000 {
        deep.push('[');
    }
    let bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: [*f, *f, *f, *f, *f, *f, *f, *f, *f]\n";
    for input in [deep.as_str(), bomb, "\u{0}", "services:\n  a:\n    image: [\n", "services: !!binary aGVsbG8=\n", "? [a]\n: b\n"] {
        assert!(convert(input).is_err(), "{input:?}");
    }
}

#[test]
fn linux_settings_become_ecs_fields() {
    let yaml = "name: edge
services:
  modem:
    image: modem
    pid: host
    ipc: host
    devices:
      - /dev/ttyUSB0
      - /dev/sda:/dev/xvda
      - /dev/snd:/dev/snd:rw
      - source: /dev/video0
        target: /dev/cam
        permissions: rwm
    sysctls:
      net.core.somaxconn: 1024
      net.ipv4.tcp_syncookies: 0
    security_opt: [no-new-privileges:true, apparmor=docker-default, 'label:type:svirt_apache_t', no-new-privileges]
    shm_size: 1gb
  logger:
    image: logger
    pid: host
    ipc: host
    sysctls: [net.ipv4.ip_forward=1]
    security_opt: [label=disable]
    shm_size: 67108864
";
    assert_eq!(json_of(yaml), json!({
        "family": "edge", "networkMode": "bridge", "pidMode": "host", "ipcMode": "host",
        "containerDefinitions": [
            {"name": "modem", "image": "modem", "essential": true,
             "linuxParameters": {
                "devices": [
                    {"hostPath": "/dev/ttyUSB0", "containerPath": "/dev/ttyUSB0"},
                    {"hostPath": "/dev/sda", "containerPath": "/dev/xvda"},
                    {"hostPath": "/dev/snd", "containerPath": "/dev/snd", "permissions": ["read", "write"]},
                    {"hostPath": "/dev/video0", "containerPath": "/dev/cam", "permissions": ["read", "write", "mknod"]}
                ],
                "sharedMemorySize": 1024
             },
             "systemControls": [{"namespace": "net.core.somaxconn", "value": "1024"}, {"namespace": "net.ipv4.tcp_syncookies", "value": "0"}],
             "dockerSecurityOptions": ["no-new-privileges", "apparmor:docker-default", "label:type:svirt_apache_t"]},
            {"name": "logger", "image": "logger", "essential": true,
             "linuxParameters": {"sharedMemorySize": 64},
             "systemControls": [{"namespace": "net.ipv4.ip_forward", "value": "1"}],
             "dockerSecurityOptions": ["label:disable"]}
        ]
    }));
    // With ipcMode host the task definition warns that shm_size changes nothing.
    assert!(warnings_of(yaml).iter().any(|w| w.contains("sharedMemorySize: ignored: with ipcMode host")), "{:#?}", warnings_of(yaml));

    let shm = |size: &str| convert(&format!("services:\n  a:\n    image: a\n    shm_size: {size}\n")).map(|c| (c.json["containerDefinitions"][0]["linuxParameters"]["sharedMemorySize"].clone(), c.parsed.warnings));
    assert_eq!(shm("64m").map(|(mib, _)| mib), Ok(json!(64)));
    assert_eq!(shm("'256MB'").map(|(mib, _)| mib), Ok(json!(256)));
    let (mib, warnings) = shm("1500000").unwrap_or_else(|errors| panic!("{errors:#?}"));
    assert_eq!(mib, json!(2));
    assert_eq!(warnings, ["services.a.shm_size (line 4): 1500000 is not a whole number of MiB; using 2 MiB (ECS's sharedMemorySize is in MiB)"]);
    let (mib, warnings) = shm("0").unwrap_or_else(|errors| panic!("{errors:#?}"));
    assert_eq!(mib, json!(null));
    assert_eq!(warnings, ["services.a.shm_size (line 4): ignored: 0 leaves Docker's default (64 MiB)"]);
    let (_, warnings) = convert("services:\n  a:\n    image: a\n    security_opt: ['no-new-privileges:false']\n").map(|c| (c.json, c.parsed.warnings)).unwrap_or_else(|errors| panic!("{errors:#?}"));
    assert_eq!(warnings, ["services.a.security_opt[0] (line 4): ignored: no-new-privileges:false is Docker's default"]);

    // ipc: none is ECS's ipcMode none.
    assert_eq!(json_of("services:\n  a:\n    image: a\n    ipc: none\n")["ipcMode"], json!("none"));
}

#[test]
fn linux_settings_ecs_cannot_take_are_refused_with_path_and_line() {
    let cases: &[(&str, &str)] = &[
        ("    devices: [vendor.com/gpu=all]\n", "services.a.devices[0] (line 4): \"vendor.com/gpu=all\" is not a device path: ECS devices are host paths such as /dev/ttyUSB0 (CDI device names are not supported)"),
        ("    devices: ['/dev/a:/dev/b:rwx']\n", "services.a.devices[0] (line 4): \"rwx\" are not device permissions: r (read), w (write) and m (mknod), like rwm"),
        ("    devices: ['/dev/a:/dev/b:rr']\n", "services.a.devices[0] (line 4): \"rr\" are not device permissions"),
        ("    devices: ['/dev/a:dev/b']\n", "services.a.devices[0] (line 4): the container path \"dev/b\" must be absolute"),
        ("    devices: ['/dev/a:/dev/b:r:x']\n", "services.a.devices[0] (line 4): \"/dev/a:/dev/b:r:x\" is not HOST_PATH[:CONTAINER_PATH[:PERMISSIONS]]"),
        ("    devices: /dev/a\n", "services.a.devices (line 4): must be a list"),
        ("    devices:\n      - target: /dev/b\n", "services.a.devices[0].source (line 5): required"),
        ("    sysctls: {kernel.pid_max: 100}\n", "services.a.sysctls.kernel.pid_max (line 4): \"kernel.pid_max\" is not a namespaced kernel parameter Docker sets per container (net.*, fs.mqueue.*, kernel.msg*, kernel.sem, kernel.shm*)"),
        ("    sysctls: [net.core.somaxconn]\n", "services.a.sysctls.net.core.somaxconn (line 4): needs a value (NAME=VALUE)"),
        ("    security_opt: [seccomp=unconfined]\n", "services.a.security_opt[0] (line 4): \"seccomp=unconfined\" is not a security option ECS accepts: expected no-new-privileges, apparmor:PROFILE or label:VALUE"),
        ("    security_opt: ['apparmor:']\n", "services.a.security_opt[0] (line 4): \"apparmor:\" is not a security option ECS accepts"),
        ("    security_opt: ['credentialspec=file://x.json']\n", "services.a.security_opt[0] (line 4): credentialspec is for Windows containers and Active Directory; not supported on this host"),
        ("    shm_size: lots\n", "services.a.shm_size (line 4): \"lots\" is not a size (like 512m, 1g or 1024)"),
        ("    pid: service:b\n", "services.a.pid (line 4): \"service:b\" is not supported: pid may be host (ECS's pidMode, for the whole task); sharing a service's or a container's namespace has no ECS field"),
        ("    pid: container:abc\n", "services.a.pid (line 4): \"container:abc\" is not supported"),
        ("    ipc: shareable\n", "services.a.ipc (line 4): \"shareable\" is not supported: ipc may be host or none (ECS's ipcMode, for the whole task)"),
        ("    stop_signal: SIGINTT\n", "services.a.stop_signal (line 4): \"SIGINTT\" is not a Linux signal"),
    ];
    for (body, wanted) in cases {
        let yaml = format!("services:\n  a:\n    image: a\n{body}");
        let errors = errors_of(&yaml);
        assert!(errors.iter().any(|error| error.starts_with(wanted)), "{yaml}\nwanted {wanted:?}\ngot {errors:#?}");
    }
    // A stop signal is kept on the parsed definition (Docker's StopSignal), never in the ECS
    // JSON, which has no field for it; SIGTERM is Docker's own default and sets nothing.
    for (signal, expected) in [("SIGQUIT", Some("SIGQUIT")), ("int", Some("SIGINT")), ("3", Some("3")), ("SIGTERM", None)] {
        let converted = convert(&format!("services:\n  a:\n    image: a\n    stop_signal: {signal}\n")).expect("converts");
        assert_eq!(converted.parsed.definition.containers[0].stop_signal.as_deref(), expected, "{signal}");
        assert!(!converted.json.to_string().contains("topSignal"), "{signal}: {}", converted.json);
    }

    // pid and ipc are task-wide: services that disagree, or one that has none, are errors
    // naming both services.
    let errors = errors_of("services:\n  a:\n    image: a\n    pid: host\n  b:\n    image: b\n  c:\n    image: c\n    ipc: host\n  d:\n    image: d\n    ipc: none\n");
    assert_eq!(errors, [
        "services.a.pid (line 4): pid is set for the whole task in ECS: a has pid: host and b has none (give every service pid: host, or none of them)",
        "services.d.ipc (line 12): ipc is set for the whole task in ECS: c has ipc: host and d has ipc: none",
        "services.c.ipc (line 9): ipc is set for the whole task in ECS: c has ipc: host and a has none (give every service ipc: host, or none of them)",
    ]);
    // A sysctl of the IPC namespace with ipc: host is refused by the task definition's rule.
    let errors = errors_of("services:\n  a:\n    image: a\n    ipc: host\n    sysctls: {kernel.shmmax: 1}\n");
    assert!(errors.iter().any(|error| error.contains("is an IPC parameter: with ipcMode host")), "{errors:#?}");
}

#[test]
fn extends_merges_as_the_compose_specification_says() {
    let yaml = "name: shop
x-logs: &logs
  driver: json-file
services:
  base:
    image: app:1
    command: [serve, --base]
    entrypoint: /base-entry
    environment:
      MODE: base
      KEEP: kept
    labels: [tier=back, owner=ops]
    ports: ['80', '9000']
    expose: ['7000']
    dns: 1.1.1.1
    cap_add: [NET_ADMIN]
    volumes:
      - ./base:/data
      - /cache
    tmpfs: ['/run:size=8m']
    devices: ['/dev/ttyUSB0']
    sysctls: {net.core.somaxconn: 128}
    extra_hosts: ['db:10.0.0.1']
    healthcheck:
      test: [CMD, base-check]
      interval: 10s
      retries: 2
    logging:
      <<: *logs
      options: {max-size: 1m}
    deploy:
      resources:
        limits: {memory: 128m, cpus: '0.5'}
    depends_on: [cache]
    links: [cache]
    x-deckhand-essential: false
  cache:
    image: redis:7
  web:
    extends: base
    command: [serve, --web]
    environment: [MODE=web, EXTRA=1]
    labels: {tier: front}
    ports: ['80', '8443:443']
    expose: ['7000', '7001']
    dns: [8.8.8.8]
    cap_add: [NET_ADMIN, SYS_TIME]
    volumes:
      - ./web:/data:ro
    tmpfs: /run:size=16m
    devices: ['/dev/ttyUSB1:/dev/ttyUSB0']
    sysctls: [net.core.somaxconn=1024]
    extra_hosts: {db: 10.0.0.2}
    healthcheck:
      test: [CMD, web-check]
    logging:
      options: {max-file: '3'}
    deploy:
      resources:
        limits: {memory: 256m}
    x-deckhand-essential: true
";
    let converted = json_of(yaml);
    let web = converted["containerDefinitions"][2].clone();
    assert_eq!(web, json!({
        "name": "web", "image": "app:1", "essential": true,
        "command": ["serve", "--web"],
        "entryPoint": ["/base-entry"],
        "environment": [
            {"name": "EXTRA", "value": "1"}, {"name": "KEEP", "value": "kept"}, {"name": "MODE", "value": "web"}
        ],
        "portMappings": [
            {"containerPort": 80, "protocol": "tcp"},
            {"containerPort": 9000, "protocol": "tcp"},
            {"containerPort": 443, "hostPort": 8443, "protocol": "tcp"}
        ],
        "mountPoints": [
            {"sourceVolume": "bind-2", "containerPath": "/data", "readOnly": true},
            {"sourceVolume": "anonymous-2", "containerPath": "/cache", "readOnly": false}
        ],
        "linuxParameters": {
            "tmpfs": [{"containerPath": "/run", "size": 16}],
            "capabilities": {"add": ["NET_ADMIN", "SYS_TIME"]},
            "devices": [{"hostPath": "/dev/ttyUSB1", "containerPath": "/dev/ttyUSB0"}]
        },
        "healthCheck": {"command": ["CMD", "web-check"], "interval": 10, "timeout": 9, "retries": 2, "startPeriod": 0},
        "memory": 256, "cpu": 512,
        "dockerLabels": {"owner": "ops", "tier": "front"},
        "logConfiguration": {"logDriver": "json-file", "options": {"max-size": "1m", "max-file": "3"}},
        "dnsServers": ["1.1.1.1", "8.8.8.8"],
        "extraHosts": [{"hostname": "db", "ipAddress": "10.0.0.2"}],
        "systemControls": [{"namespace": "net.core.somaxconn", "value": "1024"}]
    }));
    // depends_on and links are not inherited: web neither waits for nor links to cache.
    assert_eq!(web.get("dependsOn"), None);
    assert_eq!(web.get("links"), None);
    // The extended service still runs as itself.
    assert_eq!(converted["containerDefinitions"][0]["command"], json!(["serve", "--base"]));
    assert_eq!(converted["containerDefinitions"][0]["dependsOn"], json!([{"containerName": "cache", "condition": "START"}]));

    // A different logging driver replaces the options instead of merging them.
    let logging = json_of("services:\n  a:\n    image: a\n    logging: {driver: syslog, options: {tag: a}}\n  b:\n    extends: {service: a}\n    logging: {driver: json-file, options: {max-size: 1m}}\n");
    assert_eq!(logging["containerDefinitions"][1]["logConfiguration"], json!({"logDriver": "json-file", "options": {"max-size": "1m"}}));
}

#[test]
fn extends_chains_and_errors() {
    // A chain: c extends b extends a; each level overrides the one below.
    let chain = json_of("services:\n  a:\n    image: a\n    environment: {A: a, B: a, C: a}\n  b:\n    extends: a\n    environment: {B: b, C: b}\n  c:\n    extends:\n      service: b\n    image: c\n    environment: {C: c}\n");
    assert_eq!(chain["containerDefinitions"][2], json!({
        "name": "c", "image": "c", "essential": true,
        "environment": [{"name": "A", "value": "a"}, {"name": "B", "value": "b"}, {"name": "C", "value": "c"}]
    }));
    // The order of the services does not matter.
    let backwards = json_of("services:\n  c:\n    extends: b\n  b:\n    extends: a\n  a:\n    image: a\n    user: '1000'\n");
    assert_eq!(backwards["containerDefinitions"][0], json!({"name": "c", "image": "a", "essential": true, "user": "1000"}));

    let cases: &[(&str, &[&str])] = &[
        ("services:\n  a:\n    image: a\n    extends: b\n  b:\n    image: b\n    extends: a\n",
         &["services.b.extends (line 7): extends cycle: a → b → a"]),
        ("services:\n  a:\n    image: a\n    extends: a\n",
         &["services.a.extends (line 4): extends cycle: a → a"]),
        ("services:\n  a:\n    extends: b\n  b:\n    extends: c\n  c:\n    extends: a\n  d:\n    image: d\n",
         &["services.c.extends (line 7): extends cycle: a → b → c → a"]),
        ("services:\n  a:\n    image: a\n    extends: nope\n",
         &["services.a.extends (line 4): no service named \"nope\" to extend"]),
        ("services:\n  a:\n    image: a\n    extends:\n      file: common.yml\n      service: base\n",
         &["services.a.extends.file (line 5): extends from another file (\"common.yml\") is not supported: deckhand reads one Compose file; copy the service into this file and extend it by name"]),
        ("services:\n  a:\n    image: a\n    extends: {}\n  b:\n    image: b\n",
         &["services.a.extends.service (line 4): required: the service to extend"]),
        ("services:\n  a:\n    image: a\n    extends: {service: b, with: x}\n  b:\n    image: b\n",
         &["services.a.extends.with (line 4): unknown or unsupported key (known here: service, file)"]),
        ("services:\n  a:\n    image: a\n    extends: [b]\n  b:\n    image: b\n",
         &["services.a.extends (line 4): must be a service name or {service: NAME}"]),
        // A base's own error is reported once; a service extending a failed base is not mapped.
        ("services:\n  a:\n    image: a\n    extends: nope\n  b:\n    extends: a\n  c:\n    image: c\n",
         &["services.a.extends (line 4): no service named \"nope\" to extend"]),
        // Errors in inherited values name the extending service's path and the line they are on.
        ("services:\n  a:\n    image: a\n    restart: sometimes\n  b:\n    extends: a\n",
         &["services.a.restart (line 4): \"sometimes\": expected no, always, on-failure[:N] or unless-stopped",
           "services.b.restart (line 4): \"sometimes\": expected no, always, on-failure[:N] or unless-stopped"]),
    ];
    for (yaml, wanted) in cases {
        assert_eq!(errors_of(yaml), *wanted, "{yaml}");
    }

    // A long chain, written from its end, is followed without recursion.
    let mut long = String::from("services:\n");
    for index in (1..=200).rev() {
        long.push_str(&format!("  s{index}:\n    extends: s{}\n", index - 1));
    }
    long.push_str("  s0:\n    image: a\n    environment: {DEPTH: '0'}\n");
    let converted = json_of(&long);
    assert_eq!(converted["containerDefinitions"][0], json!({"name": "s200", "image": "a", "essential": true, "environment": [{"name": "DEPTH", "value": "0"}]}));
}

#[test]
fn extends_merges_tmpfs_by_path_and_bounds_what_merging_creates() {
    let merged = json_of("services:\n  a:\n    image: a\n    tmpfs: ['/run:rw,noexec', /tmp]\n  b:\n    extends: a\n    tmpfs: ['/run:size=16m']\n");
    assert_eq!(merged["containerDefinitions"][1]["linuxParameters"]["tmpfs"], json!([{"containerPath": "/run", "size": 16}, {"containerPath": "/tmp", "size": 64}]));

    // Many services extending one large service: refused before it fills memory.
    let mut yaml = String::from("services:\n  base:\n    image: a\n    labels: [");
    yaml.push_str(&vec!["l"; 2000].join(", "));
    yaml.push_str("]\n");
    for index in 0..110 {
        yaml.push_str(&format!("  s{index}:\n    extends: base\n"));
    }
    let errors = errors_of(&yaml);
    assert!(errors.iter().any(|error| error.ends_with("extends makes the file too large (more than 200000 values)")), "{errors:#?}");
    // The same large service, extended a few times, is fine.
    let few: String = yaml.lines().take(4 + 2 * 3).collect::<Vec<_>>().join("\n") + "\n";
    assert_eq!(json_of(&few)["containerDefinitions"].as_array().map(Vec::len), Some(4));
}

#[test]
fn reset_and_override_tags_are_refused_not_dropped() {
    for (yaml, line) in [
        ("services:\n  a:\n    image: a\n    ports: ['80']\n  b:\n    extends: a\n    ports: !reset []\n", 7),
        ("services:\n  a:\n    image: a\n    ports: ['80']\n  b:\n    extends: a\n    ports: !override ['81']\n", 7),
        ("services:\n  a:\n    image: !custom a\n", 3),
    ] {
        let errors = errors_of(yaml);
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(errors[0].starts_with(&format!("$ (line {line}): not valid YAML: ")), "{errors:#?}");
    }
    // YAML's own tags still work.
    assert_eq!(json_of("services:\n  a:\n    image: !!str a\n    environment: {N: !!str 10}\n")["containerDefinitions"][0]["environment"], json!([{"name": "N", "value": "10"}]));
}

#[test]
fn volumes_from_shares_another_services_volumes_read_write_or_read_only() {
    let yaml = "services:\n  data:\n    image: a\n    volumes: [/srv]\n    x-deckhand-essential: false\n  web:\n    image: b\n    volumes_from: [data]\n  report:\n    image: c\n    volumes_from: ['service:data:ro']\n";
    let definition = json_of(yaml);
    let container = |name: &str| definition["containerDefinitions"].as_array().expect("containers").iter().find(|c| c["name"] == name).cloned().unwrap_or_else(|| panic!("no {name}"));
    assert_eq!(container("web")["volumesFrom"], serde_json::json!([{"sourceContainer": "data", "readOnly": false}]));
    assert_eq!(container("report")["volumesFrom"], serde_json::json!([{"sourceContainer": "data", "readOnly": true}]));
    // The task-definition parser accepts it (volumesFrom waits for its source's create).
    let parsed = convert(yaml).unwrap_or_else(|errors| panic!("{errors:#?}")).parsed.definition;
    let web = parsed.containers.iter().find(|c| c.name == "web").expect("web");
    assert_eq!(web.volumes_from.len(), 1);
    assert!(!web.volumes_from[0].read_only);
}
