//! The JSON the Docker Engine API speaks, and its mapping to and from the runtime types:
//! inspect and list answers, event messages, version answers, error bodies, and
//! image references. Pure functions, tested on captured Docker JSON; no I/O here.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::runtime::{
    ContainerInfo, ContainerState, ContainerSummary, CreateVolume, HealthState, ImageInfo,
    ImageSummary, PortBinding, RegistryAuth, RuntimeError, RuntimeEvent, VolumeInfo,
};

use crate::encoding::base64_url;

pub use super::create_body::{create_body, merge_json};

/// Splits an image reference into the `fromImage` and `tag` a pull sends. A reference without a
/// tag gets `latest` (pulling without a tag would fetch every tag); a digest is sent as the tag.
pub fn split_image_reference(image: &str) -> Result<(String, String), RuntimeError> {
    let image = image.trim();
    let invalid = |why: &str| RuntimeError::CannotPull {
        message: format!("invalid image reference {image:?}: {why}"),
    };
    if image.is_empty() {
        return Err(invalid("it is empty"));
    }
    if image.chars().any(|character| character.is_whitespace()) {
        return Err(invalid("it contains whitespace"));
    }
    let (name, tag) = if let Some((name, digest)) = image.split_once('@') {
        (name, digest)
    } else {
        let last_slash = image.rfind('/').map_or(0, |index| index + 1);
        match image[last_slash..].rfind(':') {
            Some(colon) => (
                &image[..last_slash + colon],
                &image[last_slash + colon + 1..],
            ),
            None => (image, "latest"),
        }
    };
    if name.is_empty() {
        return Err(invalid("the repository name is empty"));
    }
    if tag.is_empty() {
        return Err(invalid("the tag or digest is empty"));
    }
    Ok((name.to_string(), tag.to_string()))
}

/// `X-Registry-Auth`: the credentials as JSON, base64url-encoded.
pub fn registry_auth_header(auth: &RegistryAuth) -> String {
    let body = json!({
        "username": auth.username,
        "password": auth.password,
        "serveraddress": auth.server_address,
    });
    base64_url(body.to_string().as_bytes())
}

/// Docker's error message from an error body (`{"message": …}`), else the body as text, else
/// the reason phrase.
pub fn error_message(body: &[u8], reason: &str) -> String {
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        if let Some(message) = value.get("message").and_then(Value::as_str) {
            return message.trim().to_string();
        }
    }
    let text = String::from_utf8_lossy(body).trim().to_string();
    if text.is_empty() {
        reason.to_string()
    } else {
        text
    }
}

#[derive(Deserialize)]
struct CreatedAnswer {
    #[serde(rename = "Id")]
    id: String,
}

/// The id from a create answer.
pub fn parse_created(body: &[u8]) -> Result<String, RuntimeError> {
    let answer: CreatedAnswer = parse_json(body, "container create answer")?;
    Ok(answer.id)
}

/// Parses `body` as `T`, naming `what` in the error.
pub fn parse_json<T: serde::de::DeserializeOwned>(
    body: &[u8],
    what: &str,
) -> Result<T, RuntimeError> {
    serde_json::from_slice(body).map_err(|error| RuntimeError::Protocol {
        message: format!(
            "Docker sent an invalid {what} ({error}): {}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        ),
    })
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct InspectAnswer {
    #[serde(rename = "Id")]
    id: String,
    #[serde(rename = "Name")]
    name: String,
    #[serde(rename = "Image")]
    image_id: String,
    #[serde(rename = "Created")]
    created: String,
    #[serde(rename = "Config")]
    config: Option<InspectConfig>,
    #[serde(rename = "State")]
    state: Option<InspectState>,
    #[serde(rename = "NetworkSettings")]
    network_settings: Option<InspectNetworkSettings>,
    #[serde(rename = "Mounts")]
    mounts: Option<Vec<InspectMount>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct InspectConfig {
    #[serde(rename = "Image")]
    image: String,
    #[serde(rename = "Labels")]
    labels: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct InspectState {
    #[serde(rename = "Status")]
    status: String,
    #[serde(rename = "Running")]
    running: bool,
    #[serde(rename = "Dead")]
    dead: bool,
    #[serde(rename = "OOMKilled")]
    oom_killed: bool,
    #[serde(rename = "ExitCode")]
    exit_code: i64,
    #[serde(rename = "Error")]
    error: String,
    #[serde(rename = "StartedAt")]
    started_at: String,
    #[serde(rename = "FinishedAt")]
    finished_at: String,
    #[serde(rename = "Health")]
    health: Option<InspectHealth>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct InspectHealth {
    #[serde(rename = "Status")]
    status: String,
    #[serde(rename = "FailingStreak")]
    failing_streak: u32,
    #[serde(rename = "Log")]
    log: Option<Vec<InspectHealthProbe>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct InspectHealthProbe {
    #[serde(rename = "ExitCode")]
    exit_code: i64,
    #[serde(rename = "Output")]
    output: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct InspectNetworkSettings {
    #[serde(rename = "Ports")]
    ports: Option<HashMap<String, Option<Vec<InspectHostPort>>>>,
    #[serde(rename = "Networks")]
    networks: Option<BTreeMap<String, InspectNetwork>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct InspectHostPort {
    #[serde(rename = "HostIp")]
    host_ip: String,
    #[serde(rename = "HostPort")]
    host_port: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct InspectNetwork {
    #[serde(rename = "IPAddress")]
    ip_address: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct InspectMount {
    #[serde(rename = "Source")]
    source: String,
    #[serde(rename = "Destination")]
    destination: String,
}

/// `80/tcp` → (80, "tcp").
fn parse_port_key(key: &str) -> Option<(u16, String)> {
    let (port, protocol) = key.split_once('/').unwrap_or((key, "tcp"));
    Some((port.parse().ok()?, protocol.to_string()))
}

/// `GET /containers/{id}/json` → [`ContainerInfo`].
pub fn parse_container_info(body: &[u8]) -> Result<ContainerInfo, RuntimeError> {
    let answer: InspectAnswer = parse_json(body, "container inspect answer")?;
    let config = answer.config.unwrap_or_default();
    let state = answer.state.unwrap_or_default();
    let network_settings = answer.network_settings.unwrap_or_default();
    let mut ports = Vec::new();
    for (key, bindings) in network_settings.ports.unwrap_or_default() {
        let Some((container_port, protocol)) = parse_port_key(&key) else {
            continue;
        };
        // An exposed port without a host binding is not a binding.
        for binding in bindings.unwrap_or_default() {
            ports.push(PortBinding {
                container_port,
                protocol: protocol.clone(),
                host_port: binding.host_port.parse().unwrap_or(0),
                host_ip: binding.host_ip,
            });
        }
    }
    crate::sorting::sort_by(&mut ports, |left, right| {
        (left.container_port, &left.protocol, &left.host_ip).cmp(&(
            right.container_port,
            &right.protocol,
            &right.host_ip,
        ))
    });
    let health = state.health.map(|health| {
        let last_probe = health.log.unwrap_or_default().pop();
        HealthState {
            status: health.status,
            failing_streak: health.failing_streak,
            last_output: last_probe.as_ref().map(|probe| probe.output.clone()),
            last_exit_code: last_probe.map(|probe| probe.exit_code),
        }
    });
    Ok(ContainerInfo {
        id: answer.id,
        name: answer.name.trim_start_matches('/').to_string(),
        image: config.image,
        image_id: answer.image_id,
        created: answer.created,
        labels: config.labels.unwrap_or_default(),
        state: ContainerState {
            status: state.status,
            running: state.running,
            dead: state.dead,
            oom_killed: state.oom_killed,
            exit_code: state.exit_code,
            error: state.error,
            started_at: state.started_at,
            finished_at: state.finished_at,
            health,
        },
        ports,
        networks: network_settings
            .networks
            .unwrap_or_default()
            .into_iter()
            .map(|(name, network)| (name, network.ip_address))
            .collect(),
        mounts: answer
            .mounts
            .unwrap_or_default()
            .into_iter()
            .map(|mount| (mount.source, mount.destination))
            .collect(),
    })
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct SummaryAnswer {
    #[serde(rename = "Id")]
    id: String,
    #[serde(rename = "Names")]
    names: Option<Vec<String>>,
    #[serde(rename = "Image")]
    image: String,
    #[serde(rename = "State")]
    state: String,
    #[serde(rename = "Labels")]
    labels: Option<BTreeMap<String, String>>,
}

/// `GET /containers/json` → summaries.
pub fn parse_container_list(body: &[u8]) -> Result<Vec<ContainerSummary>, RuntimeError> {
    let answer: Vec<SummaryAnswer> = parse_json(body, "container list")?;
    Ok(answer
        .into_iter()
        .map(|row| ContainerSummary {
            id: row.id,
            name: row
                .names
                .unwrap_or_default()
                .first()
                .map(|name| name.trim_start_matches('/').to_string())
                .unwrap_or_default(),
            image: row.image,
            state: row.state,
            labels: row.labels.unwrap_or_default(),
        })
        .collect())
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct VolumeAnswer {
    #[serde(rename = "Name")]
    name: String,
    #[serde(rename = "Labels")]
    labels: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct VolumeListAnswer {
    #[serde(rename = "Volumes")]
    volumes: Option<Vec<VolumeAnswer>>,
}

/// `POST /volumes/create` → the volume's name (Docker's, which is the one asked for).
pub fn parse_volume_created(body: &[u8]) -> Result<String, RuntimeError> {
    let answer: VolumeAnswer = parse_json(body, "volume create answer")?;
    Ok(answer.name)
}

/// The body of `POST /volumes/create`: Docker's `VolumeCreateOptions` (`Name`, `Driver`,
/// `DriverOpts`, `Labels`).
pub fn create_volume_body(spec: &CreateVolume) -> Value {
    json!({
        "Name": spec.name,
        "Driver": spec.driver,
        "DriverOpts": spec.driver_opts,
        "Labels": spec.labels,
    })
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct VolumeInspectAnswer {
    #[serde(rename = "Name")]
    name: String,
    #[serde(rename = "Driver")]
    driver: String,
    #[serde(rename = "Options")]
    options: Option<BTreeMap<String, String>>,
    #[serde(rename = "Labels")]
    labels: Option<BTreeMap<String, String>>,
}

/// `GET /volumes/{name}` → its name, driver, options and labels (`null` maps are empty).
pub fn parse_volume_info(body: &[u8]) -> Result<VolumeInfo, RuntimeError> {
    let answer: VolumeInspectAnswer = parse_json(body, "volume inspection")?;
    Ok(VolumeInfo {
        name: answer.name,
        driver: answer.driver,
        options: answer.options.unwrap_or_default(),
        labels: answer.labels.unwrap_or_default(),
    })
}

/// One row of `GET /volumes`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VolumeSummary {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

/// `GET /volumes` → each volume's name and labels (`"Volumes": null` when there are none).
pub fn parse_volume_list(body: &[u8]) -> Result<Vec<VolumeSummary>, RuntimeError> {
    let answer: VolumeListAnswer = parse_json(body, "volume list")?;
    Ok(answer
        .volumes
        .unwrap_or_default()
        .into_iter()
        .map(|volume| VolumeSummary {
            name: volume.name,
            labels: volume.labels.unwrap_or_default(),
        })
        .collect())
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct NetworkAnswer {
    #[serde(rename = "IPAM")]
    ipam: Option<IpamAnswer>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct IpamAnswer {
    #[serde(rename = "Config")]
    config: Option<Vec<IpamConfigAnswer>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct IpamConfigAnswer {
    #[serde(rename = "Subnet")]
    subnet: Option<String>,
    #[serde(rename = "Gateway")]
    gateway: Option<String>,
}

/// The IPv4 address of `text`, written bare or with a prefix length (`172.17.0.1/16`).
fn ipv4_of(text: &str) -> Option<Ipv4Addr> {
    text.split('/')
        .next()
        .unwrap_or_default()
        .trim()
        .parse()
        .ok()
}

/// The first host address of an IPv4 subnet (`172.17.0.0/16` → `172.17.0.1`), which is where
/// Docker puts a bridge's own address unless told otherwise.
fn first_host_address(subnet: &str) -> Option<Ipv4Addr> {
    let (address, prefix) = subnet.split_once('/')?;
    let address: Ipv4Addr = address.trim().parse().ok()?;
    let prefix: u32 = prefix.trim().parse().ok()?;
    if prefix > 30 {
        return None;
    }
    let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    Some(Ipv4Addr::from((u32::from(address) & mask) + 1))
}

/// `GET /networks/{name}` → the network's IPv4 gateway: the first `IPAM.Config[].Gateway`, or,
/// since Docker 20.10 leaves it out for the default bridge it made itself, the first host
/// address of the first IPv4 `Subnet`. `None` when there is neither (an IPv6-only network).
pub fn parse_network_gateway(body: &[u8]) -> Result<Option<Ipv4Addr>, RuntimeError> {
    let answer: NetworkAnswer = parse_json(body, "network inspect answer")?;
    let configs = answer.ipam.and_then(|ipam| ipam.config).unwrap_or_default();
    let gateway = configs
        .iter()
        .filter_map(|config| config.gateway.as_deref())
        .find_map(ipv4_of);
    Ok(gateway.or_else(|| {
        configs
            .iter()
            .filter_map(|config| config.subnet.as_deref())
            .find_map(first_host_address)
    }))
}

/// The option of a bridge network that names its Linux bridge device.
const BRIDGE_NAME_OPTION: &str = "com.docker.network.bridge.name";

#[derive(Deserialize, Default)]
#[serde(default)]
struct NetworkOptionsAnswer {
    #[serde(rename = "Options")]
    options: Option<serde_json::Map<String, Value>>,
}

/// `GET /networks/{name}` → the network's bridge device (`Options`'
/// `com.docker.network.bridge.name`, `docker0` for the default bridge), as Docker wrote it;
/// `None` when the answer names none or names it with something other than a string. The caller
/// checks that it reads as an interface name before using it.
pub fn parse_network_bridge_name(body: &[u8]) -> Result<Option<String>, RuntimeError> {
    let answer: NetworkOptionsAnswer = parse_json(body, "network inspect answer")?;
    Ok(answer.options.and_then(|options| {
        options
            .get(BRIDGE_NAME_OPTION)?
            .as_str()
            .map(str::to_string)
    }))
}

/// `GET /containers/{id}/stats?stream=false` → Docker's stats object, kept as it came (the task
/// metadata endpoint passes it on). Anything but a JSON object is a protocol error.
pub fn parse_stats(body: &[u8]) -> Result<Value, RuntimeError> {
    let answer: Value = parse_json(body, "container stats answer")?;
    if answer.is_object() {
        Ok(answer)
    } else {
        Err(RuntimeError::Protocol {
            message: "Docker sent container stats that are not a JSON object".into(),
        })
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ImageAnswer {
    #[serde(rename = "Id")]
    id: String,
    #[serde(rename = "RepoTags")]
    repo_tags: Option<Vec<String>>,
}

/// `GET /images/{name}/json` → [`ImageInfo`].
pub fn parse_image_info(body: &[u8]) -> Result<ImageInfo, RuntimeError> {
    let answer: ImageAnswer = parse_json(body, "image inspect answer")?;
    Ok(ImageInfo {
        id: answer.id,
        repo_tags: answer.repo_tags.unwrap_or_default(),
    })
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ImageListRow {
    #[serde(rename = "Id")]
    id: String,
    #[serde(rename = "RepoTags")]
    repo_tags: Option<Vec<String>>,
    #[serde(rename = "RepoDigests")]
    repo_digests: Option<Vec<String>>,
    #[serde(rename = "Size")]
    size: i64,
    #[serde(rename = "Created")]
    created: i64,
}

/// `GET /images/json` → [`ImageSummary`] rows. Docker writes `<none>:<none>` and
/// `<none>@<none>` for an untagged image: those are no names.
pub fn parse_image_list(body: &[u8]) -> Result<Vec<ImageSummary>, RuntimeError> {
    let rows: Vec<ImageListRow> = parse_json(body, "image list")?;
    let real_names = |names: Option<Vec<String>>| -> Vec<String> {
        names
            .unwrap_or_default()
            .into_iter()
            .filter(|name| !name.starts_with("<none>"))
            .collect()
    };
    Ok(rows
        .into_iter()
        .map(|row| ImageSummary {
            id: row.id,
            repo_tags: real_names(row.repo_tags),
            repo_digests: real_names(row.repo_digests),
            size: row.size,
            created: row.created,
        })
        .collect())
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct InfoAnswer {
    #[serde(rename = "DockerRootDir")]
    docker_root_dir: String,
}

/// `GET /info` → `DockerRootDir`, `None` when Docker leaves it out or empty.
pub fn parse_docker_root_dir(body: &[u8]) -> Result<Option<String>, RuntimeError> {
    let answer: InfoAnswer = parse_json(body, "info answer")?;
    Ok(Some(answer.docker_root_dir).filter(|dir| !dir.is_empty()))
}

/// `GET /version`, the parts deckhand reports.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default)]
pub struct EngineVersion {
    #[serde(rename = "Version")]
    pub version: String,
    #[serde(rename = "ApiVersion")]
    pub api_version: String,
    #[serde(rename = "MinAPIVersion")]
    pub min_api_version: String,
    #[serde(rename = "Os")]
    pub os: String,
    #[serde(rename = "Arch")]
    pub arch: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct EventMessage {
    #[serde(rename = "Type")]
    kind: String,
    #[serde(rename = "Action")]
    action: String,
    #[serde(rename = "Actor")]
    actor: Option<EventActor>,
    #[serde(rename = "timeNano")]
    time_nano: i64,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct EventActor {
    #[serde(rename = "ID")]
    id: String,
    #[serde(rename = "Attributes")]
    attributes: Option<BTreeMap<String, String>>,
}

/// One line of `GET /events`; `None` for events that are not about a container.
pub fn parse_event(line: &[u8]) -> Result<Option<RuntimeEvent>, RuntimeError> {
    let message: EventMessage = parse_json(line, "event")?;
    if message.kind != "container" {
        return Ok(None);
    }
    let actor = message.actor.unwrap_or_default();
    Ok(Some(RuntimeEvent {
        id: actor.id,
        action: message.action,
        attributes: actor.attributes.unwrap_or_default(),
        time_nano: message.time_nano,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_answers_parse_with_and_without_volumes() {
        assert_eq!(
            parse_volume_created(br#"{"Name":"v1","Driver":"local","Labels":{"a":"b"}}"#),
            Ok("v1".to_string())
        );
        let list = parse_volume_list(
            br#"{"Volumes":[{"Name":"v1","Labels":{"k":"x"}},{"Name":"v2","Labels":null}],"Warnings":null}"#,
        )
        .expect("list");
        assert_eq!(
            list,
            vec![
                VolumeSummary {
                    name: "v1".to_string(),
                    labels: [("k".to_string(), "x".to_string())].into(),
                },
                VolumeSummary {
                    name: "v2".to_string(),
                    labels: BTreeMap::new(),
                },
            ]
        );
        assert_eq!(
            parse_volume_list(br#"{"Volumes":null,"Warnings":null}"#),
            Ok(Vec::new())
        );
        assert!(parse_volume_list(b"[1,2]").is_err());
    }

    #[test]
    fn image_references_always_get_a_tag() {
        let cases: &[(&str, Option<(&str, &str)>)] = &[
            ("busybox", Some(("busybox", "latest"))),
            ("busybox:1.36", Some(("busybox", "1.36"))),
            (
                "127.0.0.1:5000/team/app",
                Some(("127.0.0.1:5000/team/app", "latest")),
            ),
            (
                "127.0.0.1:5000/team/app:v2",
                Some(("127.0.0.1:5000/team/app", "v2")),
            ),
            ("app@sha256:0123abcd", Some(("app", "sha256:0123abcd"))),
            ("", None),
            ("app:", None),
            (":v1", None),
            ("bad name", None),
        ];
        for (image, expected) in cases {
            let result = split_image_reference(image);
            match (result, expected) {
                (Ok((name, tag)), Some((expected_name, expected_tag))) => {
                    assert_eq!(
                        (name.as_str(), tag.as_str()),
                        (*expected_name, *expected_tag)
                    )
                }
                (Err(RuntimeError::CannotPull { message }), None) => {
                    assert!(message.contains("invalid image reference"), "{message}")
                }
                (other, _) => panic!("{image:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn registry_auth_is_base64url_json() {
        let header = registry_auth_header(&RegistryAuth {
            username: "user".into(),
            password: "p?>?".into(),
            server_address: "127.0.0.1:5000".into(),
        });
        assert!(!header.contains('+') && !header.contains('/'), "{header}");
        // Decoding with the standard alphabet after swapping back gives the JSON.
        assert_eq!(
            header,
            base64_url(
                br#"{"password":"p?>?","serveraddress":"127.0.0.1:5000","username":"user"}"#
            )
        );
    }

    #[test]
    fn error_messages_keep_dockers_words() {
        let cases: &[(&[u8], &str, &str)] = &[
            (
                br#"{"message":"No such container: abc"}"#,
                "Not Found",
                "No such container: abc",
            ),
            (b"page not found\n", "Not Found", "page not found"),
            (b"", "Conflict", "Conflict"),
        ];
        for (body, reason, expected) in cases {
            assert_eq!(error_message(body, reason), *expected);
        }
    }

    #[test]
    fn inspect_answer_maps_state_health_ports_and_labels() {
        let body = br#"{
            "Id": "abc123", "Name": "/web", "Image": "sha256:img", "Created": "2026-01-01T00:00:00Z",
            "Config": {"Image": "app:v1", "Labels": {"deckhand-test": "1"}},
            "State": {"Status": "exited", "Running": false, "Dead": false, "OOMKilled": true,
                      "ExitCode": 137, "Error": "", "StartedAt": "2026-01-01T00:00:01Z",
                      "FinishedAt": "2026-01-01T00:00:02Z",
                      "Health": {"Status": "unhealthy", "FailingStreak": 3,
                                 "Log": [{"ExitCode": 0, "Output": "ok"}, {"ExitCode": 1, "Output": "bad"}]}},
            "NetworkSettings": {"Ports": {"80/tcp": [{"HostIp": "0.0.0.0", "HostPort": "49153"}],
                                          "443/tcp": null},
                                "Networks": {"bridge": {"IPAddress": "172.17.0.2"}}},
            "Mounts": [{"Source": "/data", "Destination": "/srv"}]
        }"#;
        let info = parse_container_info(body).expect("valid inspect answer");
        assert_eq!(info.id, "abc123");
        assert_eq!(info.name, "web");
        assert_eq!(info.image, "app:v1");
        assert_eq!(info.image_id, "sha256:img");
        assert_eq!(
            info.labels.get("deckhand-test").map(String::as_str),
            Some("1")
        );
        assert_eq!(info.state.status, "exited");
        assert!(info.state.oom_killed);
        assert_eq!(info.state.exit_code, 137);
        assert_eq!(info.state.finished_at, "2026-01-01T00:00:02Z");
        let health = info.state.health.expect("health present");
        assert_eq!(health.status, "unhealthy");
        assert_eq!(health.failing_streak, 3);
        assert_eq!(health.last_output.as_deref(), Some("bad"));
        assert_eq!(health.last_exit_code, Some(1));
        assert_eq!(
            info.ports,
            vec![PortBinding {
                container_port: 80,
                protocol: "tcp".into(),
                host_port: 49153,
                host_ip: "0.0.0.0".into()
            }]
        );
        assert_eq!(
            info.networks,
            vec![("bridge".to_string(), "172.17.0.2".to_string())]
        );
        assert_eq!(info.mounts, vec![("/data".to_string(), "/srv".to_string())]);
    }

    #[test]
    fn inspect_answer_tolerates_nulls_and_rejects_garbage() {
        let info = parse_container_info(
            br#"{"Id":"a","Name":"/n","Config":{"Labels":null},"State":{"Health":null},"NetworkSettings":{"Ports":null,"Networks":null},"Mounts":null}"#,
        )
        .expect("nulls are fine");
        assert!(info.labels.is_empty() && info.ports.is_empty() && info.state.health.is_none());
        match parse_container_info(b"{not json") {
            Err(RuntimeError::Protocol { message }) => assert!(message.contains("inspect")),
            other => panic!("expected Protocol, got {other:?}"),
        }
    }

    #[test]
    fn list_and_image_answers() {
        let rows = parse_container_list(
            br#"[{"Id":"a","Names":["/one"],"Image":"img","State":"running","Labels":{"x":"y"}},
                 {"Id":"b","Names":null,"Image":"img","State":"exited","Labels":null}]"#,
        )
        .expect("valid list");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].name, "one");
        assert_eq!(rows[0].labels.get("x").map(String::as_str), Some("y"));
        assert_eq!(rows[1].name, "");
        let image = parse_image_info(br#"{"Id":"sha256:1","RepoTags":["a:b"]}"#).expect("image");
        assert_eq!(image.repo_tags, vec!["a:b".to_string()]);
    }

    #[test]
    fn network_answers_give_the_first_ipv4_gateway() {
        // (answer, gateway)
        let table: [(&[u8], Option<&str>); 10] = [
            (
                br#"{"Name":"bridge","IPAM":{"Driver":"default","Config":[{"Subnet":"172.17.0.0/16","Gateway":"172.17.0.1"}]}}"#,
                Some("172.17.0.1"),
            ),
            (
                br#"{"IPAM":{"Config":[{"Subnet":"fd00::/64","Gateway":"fd00::1"},{"Gateway":"10.1.0.1/24"}]}}"#,
                Some("10.1.0.1"),
            ),
            // Docker 20.10's default bridge: a subnet and no gateway.
            (
                br#"{"IPAM":{"Config":[{"Subnet":"172.17.0.0/16"}]}}"#,
                Some("172.17.0.1"),
            ),
            (
                br#"{"IPAM":{"Config":[{"Subnet":"fd00::/64"},{"Subnet":"10.9.8.0/24"}]}}"#,
                Some("10.9.8.1"),
            ),
            (br#"{"IPAM":{"Config":[{"Subnet":"10.9.8.7/32"}]}}"#, None),
            (br#"{"IPAM":{"Config":[{"Subnet":"10.0.0.0/0"}]}}"#, Some("0.0.0.1")),
            (br#"{"IPAM":{"Config":null}}"#, None),
            (br#"{"IPAM":null}"#, None),
            (br#"{"IPAM":{"Config":[{"Gateway":"not an address"}]}}"#, None),
            (br#"{}"#, None),
        ];
        for (body, expected) in table {
            let gateway = parse_network_gateway(body).expect("a valid answer");
            assert_eq!(
                gateway.map(|address| address.to_string()).as_deref(),
                expected,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        assert!(parse_network_gateway(b"[1,2").is_err());
        assert!(parse_network_gateway(br#"{"IPAM":{"Config":[{"Gateway":7}]}}"#).is_err());
    }

    #[test]
    fn network_answers_name_their_bridge_device() {
        let table: [(&[u8], Option<&str>); 6] = [
            (
                br#"{"Name":"bridge","Options":{"com.docker.network.bridge.default_bridge":"true","com.docker.network.bridge.name":"docker0"}}"#,
                Some("docker0"),
            ),
            (
                br#"{"Options":{"com.docker.network.bridge.name":"br-lan"}}"#,
                Some("br-lan"),
            ),
            (br#"{"Options":{"com.docker.network.bridge.name":7}}"#, None),
            (br#"{"Options":{}}"#, None),
            (br#"{"Options":null}"#, None),
            (br#"{}"#, None),
        ];
        for (body, expected) in table {
            let name = parse_network_bridge_name(body).expect("a valid answer");
            assert_eq!(
                name.as_deref(),
                expected,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        assert!(parse_network_bridge_name(b"[1,2").is_err());
        assert!(parse_network_bridge_name(br#"{"Options":[1]}"#).is_err());
    }

    #[test]
    fn stats_answers_pass_through_as_objects() {
        let stats = parse_stats(br#"{"read":"2026-01-01T00:00:00Z","memory_stats":{"usage":5}}"#)
            .expect("an object");
        assert_eq!(stats["memory_stats"]["usage"], 5);
        assert!(parse_stats(b"[]").is_err());
        assert!(parse_stats(b"null").is_err());
        assert!(parse_stats(b"{").is_err());
    }

    #[test]
    fn events_keep_container_events_only() {
        let die = br#"{"status":"die","id":"abc","from":"img","Type":"container","Action":"die",
            "Actor":{"ID":"abc","Attributes":{"exitCode":"3","name":"web"}},"scope":"local",
            "time":1700000000,"timeNano":1700000000123456789}"#;
        let event = parse_event(die).expect("valid").expect("a container event");
        assert_eq!(event.id, "abc");
        assert_eq!(event.action, "die");
        assert_eq!(event.exit_code(), Some(3));
        assert_eq!(event.time_nano, 1700000000123456789);
        let network = br#"{"Type":"network","Action":"connect","Actor":{"ID":"n"}}"#;
        assert_eq!(parse_event(network).expect("valid"), None);
        assert!(matches!(
            parse_event(b"{\"Type\":"),
            Err(RuntimeError::Protocol { .. })
        ));
    }

    #[test]
    fn a_volume_create_body_carries_driver_options_and_labels() {
        let spec = CreateVolume {
            name: "db-data".into(),
            driver: "local".into(),
            driver_opts: BTreeMap::from([("type".to_string(), "tmpfs".to_string())]),
            labels: BTreeMap::from([("team".to_string(), "edge".to_string())]),
        };
        assert_eq!(
            create_volume_body(&spec),
            json!({
                "Name": "db-data",
                "Driver": "local",
                "DriverOpts": {"type": "tmpfs"},
                "Labels": {"team": "edge"}
            })
        );
        let bare = CreateVolume {
            name: "v".into(),
            driver: "local".into(),
            ..CreateVolume::default()
        };
        assert_eq!(
            create_volume_body(&bare),
            json!({"Name": "v", "Driver": "local", "DriverOpts": {}, "Labels": {}})
        );
    }

    #[test]
    fn a_volume_inspection_parses_with_null_maps() {
        type Pairs = &'static [(&'static str, &'static str)];
        // (answer, name, driver, options, labels)
        let table: [(&[u8], &str, &str, Pairs, Pairs); 3] = [
            (
                br#"{"Name":"db","Driver":"local","Mountpoint":"/var/lib/docker/volumes/db/_data",
                    "Options":{"type":"tmpfs","device":"tmpfs"},"Labels":{"a":"b"},"Scope":"local"}"#,
                "db",
                "local",
                &[("device", "tmpfs"), ("type", "tmpfs")],
                &[("a", "b")],
            ),
            (
                br#"{"Name":"db","Driver":"local","Options":null,"Labels":null}"#,
                "db",
                "local",
                &[],
                &[],
            ),
            (br#"{}"#, "", "", &[], &[]),
        ];
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect()
        };
        for (body, name, driver, options, labels) in table {
            let info = parse_volume_info(body).expect("valid answer");
            assert_eq!(
                info,
                VolumeInfo {
                    name: name.into(),
                    driver: driver.into(),
                    options: map(options),
                    labels: map(labels),
                },
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        for bad in [&b"{\"Name\":"[..], br#"{"Options":{"a":1}}"#, b"\"text\""] {
            assert!(
                matches!(parse_volume_info(bad), Err(RuntimeError::Protocol { .. })),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn image_lists_and_docker_info_read_what_image_cleanup_needs() {
        let images = parse_image_list(
            br#"[{"Id":"sha256:aa","RepoTags":["busybox:latest","<none>:<none>"],
                  "RepoDigests":["busybox@sha256:bb"],"Size":4261550,"Created":1700000000},
                 {"Id":"sha256:cc","RepoTags":null,"RepoDigests":["<none>@<none>"]}]"#,
        )
        .expect("parses");
        assert_eq!(images.len(), 2);
        assert_eq!(images[0].repo_tags, ["busybox:latest"]);
        assert_eq!(images[0].repo_digests, ["busybox@sha256:bb"]);
        assert_eq!((images[0].size, images[0].created), (4261550, 1700000000));
        assert!(images[1].repo_tags.is_empty() && images[1].repo_digests.is_empty());
        assert!(parse_image_list(b"{}").is_err());
        assert_eq!(
            parse_docker_root_dir(br#"{"DockerRootDir":"/var/lib/docker"}"#).expect("parses"),
            Some("/var/lib/docker".to_string())
        );
        assert_eq!(parse_docker_root_dir(b"{}").expect("parses"), None);
    }
}
