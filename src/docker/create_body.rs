//! The `POST /containers/create` body: the runtime's [`CreateContainer`] in Docker's JSON, with
//! ECS's `dockerConfig` overlays merged as Go's decoder would. Pure; no I/O here.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::runtime::CreateContainer;

/// The `POST /containers/create` body. The restart policy is always `no`: deckhand restarts.
pub fn create_body(spec: &CreateContainer) -> Value {
    let mut exposed_ports = serde_json::Map::new();
    let mut port_bindings: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for binding in &spec.port_bindings {
        let key = format!("{}/{}", binding.container_port, binding.protocol);
        exposed_ports.insert(key.clone(), json!({}));
        let host_port = if binding.host_port == 0 {
            String::new()
        } else {
            binding.host_port.to_string()
        };
        port_bindings
            .entry(key)
            .or_default()
            .push(json!({ "HostIp": binding.host_ip, "HostPort": host_port }));
    }
    let volumes =
        crate::sorting::json_object_of(spec.volumes.iter().map(|path| (path.clone(), json!({}))));
    let mut host_config = json!({
        "Binds": spec.binds,
        "VolumesFrom": spec.volumes_from,
        "Links": spec.links,
        "PortBindings": port_bindings,
        "Privileged": spec.privileged,
        "RestartPolicy": { "Name": "no" },
    });
    let set = |object: &mut Value, key: &str, value: Value| {
        if let Some(map) = object.as_object_mut() {
            map.insert(key.to_string(), value);
        }
    };
    if let Some(memory) = spec.memory {
        set(&mut host_config, "Memory", json!(memory));
    }
    if let Some(reservation) = spec.memory_reservation {
        set(&mut host_config, "MemoryReservation", json!(reservation));
    }
    if let Some(shares) = spec.cpu_shares {
        set(&mut host_config, "CpuShares", json!(shares));
    }
    if let Some(log_config) = &spec.log_config {
        set(
            &mut host_config,
            "LogConfig",
            json!({ "Type": log_config.driver, "Config": log_config.options }),
        );
    }
    if let Some(network_mode) = &spec.network_mode {
        set(&mut host_config, "NetworkMode", json!(network_mode));
    }
    // The task-definition fields below are sent only when asked for, so a create request for a
    // definition without them is the same as before they existed.
    if spec.readonly_rootfs {
        set(&mut host_config, "ReadonlyRootfs", json!(true));
    }
    if spec.init {
        set(&mut host_config, "Init", json!(true));
    }
    let lists = [
        ("CapAdd", &spec.cap_add),
        ("CapDrop", &spec.cap_drop),
        ("ExtraHosts", &spec.extra_hosts),
        ("Dns", &spec.dns),
        ("DnsSearch", &spec.dns_search),
        ("SecurityOpt", &spec.security_opt),
    ];
    for (key, list) in lists {
        if !list.is_empty() {
            set(&mut host_config, key, json!(list));
        }
    }
    if !spec.devices.is_empty() {
        let devices: Vec<Value> = spec
            .devices
            .iter()
            .map(|device| {
                json!({
                    "PathOnHost": device.path_on_host,
                    "PathInContainer": device.path_in_container,
                    "CgroupPermissions": device.cgroup_permissions,
                })
            })
            .collect();
        set(&mut host_config, "Devices", Value::Array(devices));
    }
    if !spec.tmpfs.is_empty() {
        set(&mut host_config, "Tmpfs", json!(spec.tmpfs));
    }
    if !spec.sysctls.is_empty() {
        set(&mut host_config, "Sysctls", json!(spec.sysctls));
    }
    if !spec.ulimits.is_empty() {
        let ulimits: Vec<Value> = spec
            .ulimits
            .iter()
            .map(|limit| json!({ "Name": limit.name, "Soft": limit.soft, "Hard": limit.hard }))
            .collect();
        set(&mut host_config, "Ulimits", Value::Array(ulimits));
    }
    let numbers = [
        ("ShmSize", spec.shm_size),
        ("MemorySwap", spec.memory_swap),
        ("MemorySwappiness", spec.memory_swappiness),
    ];
    for (key, number) in numbers {
        if let Some(number) = number {
            set(&mut host_config, key, json!(number));
        }
    }
    if !spec.gpu_ids.is_empty() {
        // The NVIDIA driver's GPUs by id, as `docker run --gpus '"device=…"'` asks for them.
        set(
            &mut host_config,
            "DeviceRequests",
            json!([{
                "Driver": "nvidia",
                "DeviceIDs": spec.gpu_ids,
                "Capabilities": [["gpu"]],
            }]),
        );
    }
    if let Some(pid_mode) = &spec.pid_mode {
        set(&mut host_config, "PidMode", json!(pid_mode));
    }
    if let Some(ipc_mode) = &spec.ipc_mode {
        set(&mut host_config, "IpcMode", json!(ipc_mode));
    }
    let mut body = json!({
        "Image": spec.image,
        "Labels": spec.labels,
        "Env": spec.env,
        "ExposedPorts": exposed_ports,
        "Volumes": volumes,
        "HostConfig": host_config,
    });
    if let Some(cmd) = &spec.cmd {
        set(&mut body, "Cmd", json!(cmd));
    }
    if let Some(entrypoint) = &spec.entrypoint {
        set(&mut body, "Entrypoint", json!(entrypoint));
    }
    if let Some(working_dir) = &spec.working_dir {
        set(&mut body, "WorkingDir", json!(working_dir));
    }
    if let Some(user) = &spec.user {
        set(&mut body, "User", json!(user));
    }
    if let Some(stop_timeout) = spec.stop_timeout {
        set(&mut body, "StopTimeout", json!(stop_timeout));
    }
    if let Some(stop_signal) = &spec.stop_signal {
        set(&mut body, "StopSignal", json!(stop_signal));
    }
    if let Some(hostname) = &spec.hostname {
        set(&mut body, "Hostname", json!(hostname));
    }
    let flags = [
        ("NetworkDisabled", spec.network_disabled),
        ("OpenStdin", spec.open_stdin),
        ("Tty", spec.tty),
    ];
    for (key, flag) in flags {
        if flag {
            set(&mut body, key, json!(true));
        }
    }
    if let Some(health) = &spec.healthcheck {
        let nanos =
            |duration: std::time::Duration| i64::try_from(duration.as_nanos()).unwrap_or(i64::MAX);
        set(
            &mut body,
            "Healthcheck",
            json!({
                "Test": health.test,
                "Interval": nanos(health.interval),
                "Timeout": nanos(health.timeout),
                "Retries": health.retries,
                "StartPeriod": nanos(health.start_period),
            }),
        );
    }
    apply_overlays(&mut body, spec);
    body
}

/// Lays ECS's `dockerConfig` over the body: `config` over the body's top level (Docker's
/// create `Config`), `hostConfig` over its `HostConfig`, as the ECS agent unmarshals them over
/// the configuration it built. Then puts back what deckhand must own whatever the overlay
/// says: every label deckhand set (an overlay may add labels — the ECS control plane sends a
/// definition's `dockerLabels` as `Config.Labels` — but never change or drop one, or deckhand
/// would lose track of its own container: it lists and adopts by these labels), and the network
/// mode deckhand chose (the task's, or the sandbox's namespace in an awsvpc task).
fn apply_overlays(body: &mut Value, spec: &CreateContainer) {
    if spec.config_overlay.is_none() && spec.host_config_overlay.is_none() {
        return;
    }
    if let Some(overlay) = &spec.config_overlay {
        merge_json(body, overlay);
    }
    if let Some(overlay) = &spec.host_config_overlay {
        if let Some(map) = body.as_object_mut() {
            let host_config = map.entry("HostConfig").or_insert_with(|| json!({}));
            merge_json(host_config, overlay);
        }
    }
    let Some(map) = body.as_object_mut() else {
        return;
    };
    let labels = map.entry("Labels").or_insert_with(|| json!({}));
    if !labels.is_object() {
        *labels = json!({});
    }
    if let Some(labels) = labels.as_object_mut() {
        for (key, value) in &spec.labels {
            labels.insert(key.clone(), Value::String(value.clone()));
        }
    }
    if let Some(network_mode) = &spec.network_mode {
        let host_config = map.entry("HostConfig").or_insert_with(|| json!({}));
        if !host_config.is_object() {
            *host_config = json!({});
        }
        if let Some(host_config) = host_config.as_object_mut() {
            host_config.insert("NetworkMode".to_string(), json!(network_mode));
        }
    }
}

/// Merges `overlay` into `base` as Go's `json.Unmarshal` does into a filled struct: an object
/// over an object merges key by key (recursively); `null` clears an object or array and leaves
/// a scalar as it was (Go leaves a non-pointer field alone on `null`); anything else replaces
/// (arrays are not appended to). Keys match exactly: Docker's own decoding matches field names
/// case-insensitively, which the ECS control plane never relies on.
pub fn merge_json(base: &mut Value, overlay: &Value) {
    match (base, overlay) {
        (Value::Object(base_map), Value::Object(overlay_map)) => {
            for (key, overlay_value) in overlay_map {
                match base_map.get_mut(key) {
                    Some(base_value) => merge_json(base_value, overlay_value),
                    None => {
                        base_map.insert(key.clone(), overlay_value.clone());
                    }
                }
            }
        }
        (Value::Bool(_) | Value::Number(_) | Value::String(_), Value::Null) => {}
        (base, overlay) => *base = overlay.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{HealthConfig, LogConfig, PortBinding};
    use std::time::Duration;

    #[test]
    fn create_body_carries_every_field() {
        let spec = CreateContainer {
            name: "web".into(),
            image: "app:v1".into(),
            labels: BTreeMap::from([("k".to_string(), "v".to_string())]),
            env: vec!["A=1".into()],
            cmd: Some(vec!["sleep".into(), "5".into()]),
            entrypoint: Some(vec!["/bin/sh".into(), "-c".into()]),
            working_dir: Some("/srv".into()),
            user: Some("1000:1000".into()),
            healthcheck: Some(HealthConfig {
                test: vec!["CMD-SHELL".into(), "true".into()],
                interval: Duration::from_secs(5),
                timeout: Duration::from_millis(1500),
                retries: 3,
                start_period: Duration::from_secs(0),
            }),
            binds: vec!["/data:/data:ro".into()],
            volumes: vec!["/scratch".into()],
            volumes_from: vec!["other:ro".into()],
            links: vec!["db:database".into()],
            port_bindings: vec![
                PortBinding {
                    container_port: 80,
                    protocol: "tcp".into(),
                    host_port: 8080,
                    host_ip: String::new(),
                },
                PortBinding {
                    container_port: 53,
                    protocol: "udp".into(),
                    host_port: 0,
                    host_ip: "127.0.0.1".into(),
                },
            ],
            memory: Some(64 << 20),
            memory_reservation: Some(32 << 20),
            cpu_shares: Some(256),
            privileged: true,
            log_config: Some(LogConfig {
                driver: "json-file".into(),
                options: BTreeMap::from([("max-size".to_string(), "10m".to_string())]),
            }),
            network_mode: Some("bridge".into()),
            stop_timeout: Some(10),
            stop_signal: Some("SIGQUIT".into()),
            ..CreateContainer::default()
        };
        let body = create_body(&spec);
        assert_eq!(body["Image"], "app:v1");
        assert_eq!(body["Labels"]["k"], "v");
        assert_eq!(body["Env"][0], "A=1");
        assert_eq!(body["Cmd"], json!(["sleep", "5"]));
        assert_eq!(body["Entrypoint"], json!(["/bin/sh", "-c"]));
        assert_eq!(body["WorkingDir"], "/srv");
        assert_eq!(body["User"], "1000:1000");
        assert_eq!(body["StopTimeout"], 10);
        assert_eq!(body["StopSignal"], "SIGQUIT");
        assert_eq!(body["Healthcheck"]["Interval"], 5_000_000_000i64);
        assert_eq!(body["Healthcheck"]["Timeout"], 1_500_000_000i64);
        assert_eq!(body["Healthcheck"]["Retries"], 3);
        assert_eq!(body["Volumes"], json!({"/scratch": {}}));
        assert_eq!(body["ExposedPorts"], json!({"80/tcp": {}, "53/udp": {}}));
        let host = &body["HostConfig"];
        assert_eq!(host["Binds"][0], "/data:/data:ro");
        assert_eq!(host["VolumesFrom"][0], "other:ro");
        assert_eq!(host["Links"][0], "db:database");
        assert_eq!(
            host["PortBindings"],
            json!({
                "80/tcp": [{"HostIp": "", "HostPort": "8080"}],
                "53/udp": [{"HostIp": "127.0.0.1", "HostPort": ""}],
            })
        );
        assert_eq!(host["Memory"], 64 << 20);
        assert_eq!(host["MemoryReservation"], 32 << 20);
        assert_eq!(host["CpuShares"], 256);
        assert_eq!(host["Privileged"], true);
        assert_eq!(host["LogConfig"]["Type"], "json-file");
        assert_eq!(host["LogConfig"]["Config"]["max-size"], "10m");
        assert_eq!(host["NetworkMode"], "bridge");
        assert_eq!(host["RestartPolicy"]["Name"], "no");
    }

    #[test]
    fn create_body_carries_the_linux_fields() {
        use crate::runtime::{DeviceMapping, Ulimit};
        let body = create_body(&CreateContainer {
            name: "x".into(),
            image: "img".into(),
            hostname: Some("edge-box".into()),
            network_disabled: true,
            open_stdin: true,
            tty: true,
            readonly_rootfs: true,
            init: true,
            cap_add: vec!["NET_ADMIN".into()],
            cap_drop: vec!["MKNOD".into()],
            devices: vec![DeviceMapping {
                path_on_host: "/dev/null".into(),
                path_in_container: "/dev/nothing".into(),
                cgroup_permissions: "rw".into(),
            }],
            tmpfs: BTreeMap::from([("/scratch".to_string(), "noexec,size=16m".to_string())]),
            shm_size: Some(32 << 20),
            memory: Some(64 << 20),
            memory_swap: Some(192 << 20),
            memory_swappiness: Some(60),
            ulimits: vec![Ulimit {
                name: "nofile".into(),
                soft: 1024,
                hard: -1,
            }],
            extra_hosts: vec!["registry.local:10.0.0.5".into()],
            dns: vec!["10.0.0.2".into()],
            dns_search: vec!["corp.example".into()],
            sysctls: BTreeMap::from([("net.core.somaxconn".to_string(), "1024".to_string())]),
            security_opt: vec!["no-new-privileges".into()],
            gpu_ids: vec!["GPU-0".into(), "GPU-1".into()],
            pid_mode: Some("host".into()),
            ipc_mode: Some("none".into()),
            ..CreateContainer::default()
        });
        assert_eq!(body["Hostname"], "edge-box");
        assert_eq!(body["NetworkDisabled"], true);
        assert_eq!(body["OpenStdin"], true);
        assert_eq!(body["Tty"], true);
        let host = &body["HostConfig"];
        assert_eq!(host["ReadonlyRootfs"], true);
        assert_eq!(host["Init"], true);
        assert_eq!(host["CapAdd"], json!(["NET_ADMIN"]));
        assert_eq!(host["CapDrop"], json!(["MKNOD"]));
        assert_eq!(
            host["Devices"],
            json!([{"PathOnHost": "/dev/null", "PathInContainer": "/dev/nothing", "CgroupPermissions": "rw"}])
        );
        assert_eq!(host["Tmpfs"], json!({"/scratch": "noexec,size=16m"}));
        assert_eq!(host["ShmSize"], 32 << 20);
        assert_eq!(host["Memory"], 64 << 20);
        assert_eq!(host["MemorySwap"], 192 << 20);
        assert_eq!(host["MemorySwappiness"], 60);
        assert_eq!(
            host["Ulimits"],
            json!([{"Name": "nofile", "Soft": 1024, "Hard": -1}])
        );
        assert_eq!(host["ExtraHosts"], json!(["registry.local:10.0.0.5"]));
        assert_eq!(host["Dns"], json!(["10.0.0.2"]));
        assert_eq!(host["DnsSearch"], json!(["corp.example"]));
        assert_eq!(host["Sysctls"], json!({"net.core.somaxconn": "1024"}));
        assert_eq!(host["SecurityOpt"], json!(["no-new-privileges"]));
        assert_eq!(
            host["DeviceRequests"],
            json!([{"Driver": "nvidia", "DeviceIDs": ["GPU-0", "GPU-1"], "Capabilities": [["gpu"]]}])
        );
        assert_eq!(host["PidMode"], "host");
        assert_eq!(host["IpcMode"], "none");
    }

    #[test]
    fn merge_json_follows_go_unmarshal_into_a_filled_struct() {
        // (base, overlay, merged)
        let table = [
            (json!({"a": 1}), json!({"b": 2}), json!({"a": 1, "b": 2})),
            (json!({"a": 1}), json!({"a": 2}), json!({"a": 2})),
            (
                json!({"a": {"x": 1, "y": 2}}),
                json!({"a": {"y": 3, "z": 4}}),
                json!({"a": {"x": 1, "y": 3, "z": 4}}),
            ),
            (json!({"a": [1, 2]}), json!({"a": [3]}), json!({"a": [3]})),
            (json!({"a": [1, 2]}), json!({"a": null}), json!({"a": null})),
            (
                json!({"a": {"x": 1}}),
                json!({"a": null}),
                json!({"a": null}),
            ),
            (json!({"a": true}), json!({"a": null}), json!({"a": true})),
            (
                json!({"a": "text"}),
                json!({"a": null}),
                json!({"a": "text"}),
            ),
            (
                json!({"a": 1}),
                json!({"a": {"x": 1}}),
                json!({"a": {"x": 1}}),
            ),
            (json!({"a": {"x": 1}}), json!({"a": 5}), json!({"a": 5})),
            (json!({"a": 1}), json!({}), json!({"a": 1})),
            (json!({"a": 1}), json!({"a": false}), json!({"a": false})),
        ];
        for (mut base, overlay, merged) in table {
            let before = base.clone();
            merge_json(&mut base, &overlay);
            assert_eq!(base, merged, "{before} + {overlay}");
        }
    }

    #[test]
    fn create_body_takes_the_docker_config_overlays_and_keeps_deckhands_labels_and_network() {
        let labels = BTreeMap::from([
            (
                "com.amazonaws.ecs.task-arn".to_string(),
                "arn:task".to_string(),
            ),
            (
                "com.amazonaws.ecs.container-name".to_string(),
                "web".to_string(),
            ),
        ]);
        let body = create_body(&CreateContainer {
            image: "nginx".into(),
            labels,
            env: vec!["A=1".into()],
            memory: Some(128 << 20),
            network_mode: Some("bridge".into()),
            cap_add: vec!["NET_ADMIN".into()],
            config_overlay: Some(json!({
                "Labels": {"team": "web", "com.amazonaws.ecs.task-arn": "arn:other"},
                "User": "nobody",
            })),
            host_config_overlay: Some(json!({
                "Ulimits": [{"Name": "nofile", "Soft": 1024, "Hard": 2048}],
                "LogConfig": {"Type": "json-file", "Config": {"max-size": "10m"}},
                "MemoryReservation": 67108864,
                "CapAdd": [],
                "NetworkMode": "host",
            })),
            ..CreateContainer::default()
        });
        assert_eq!(body["Labels"]["team"], "web", "an overlay adds labels");
        assert_eq!(
            body["Labels"]["com.amazonaws.ecs.task-arn"], "arn:task",
            "but never changes deckhand's"
        );
        assert_eq!(body["Labels"]["com.amazonaws.ecs.container-name"], "web");
        assert_eq!(body["User"], "nobody");
        assert_eq!(
            body["Env"],
            json!(["A=1"]),
            "what the overlay leaves alone stays"
        );
        assert_eq!(body["HostConfig"]["Memory"], 128 << 20);
        assert_eq!(body["HostConfig"]["MemoryReservation"], 67108864);
        assert_eq!(body["HostConfig"]["Ulimits"][0]["Name"], "nofile");
        assert_eq!(body["HostConfig"]["LogConfig"]["Config"]["max-size"], "10m");
        assert_eq!(body["HostConfig"]["CapAdd"], json!([]), "an array replaces");
        assert_eq!(
            body["HostConfig"]["NetworkMode"], "bridge",
            "deckhand's network mode stays"
        );
        assert_eq!(body["HostConfig"]["RestartPolicy"]["Name"], "no");

        let overlay_labels_not_an_object = create_body(&CreateContainer {
            labels: BTreeMap::from([("k".to_string(), "v".to_string())]),
            config_overlay: Some(json!({"Labels": null})),
            ..CreateContainer::default()
        });
        assert_eq!(overlay_labels_not_an_object["Labels"], json!({"k": "v"}));
    }

    #[test]
    fn create_body_leaves_out_what_is_unset() {
        let body = create_body(&CreateContainer {
            name: "x".into(),
            image: "img".into(),
            ..CreateContainer::default()
        });
        for key in [
            "Cmd",
            "Entrypoint",
            "WorkingDir",
            "User",
            "Healthcheck",
            "StopTimeout",
            "StopSignal",
            "Hostname",
            "NetworkDisabled",
            "OpenStdin",
            "Tty",
        ] {
            assert!(body.get(key).is_none(), "{key} must be absent");
        }
        for key in [
            "Memory",
            "CpuShares",
            "LogConfig",
            "NetworkMode",
            "ReadonlyRootfs",
            "Init",
            "CapAdd",
            "CapDrop",
            "Devices",
            "Tmpfs",
            "ShmSize",
            "MemorySwap",
            "MemorySwappiness",
            "Ulimits",
            "ExtraHosts",
            "Dns",
            "DnsSearch",
            "Sysctls",
            "SecurityOpt",
            "DeviceRequests",
            "PidMode",
            "IpcMode",
        ] {
            assert!(
                body["HostConfig"].get(key).is_none(),
                "HostConfig.{key} must be absent"
            );
        }
    }
}
