//! The router's generated configuration, in Fluent Bit's or Fluentd's syntax, as the ECS agent
//! renders it (its `generateConfig` over the awslabs config generator's two templates): the
//! inputs (the task's Unix socket; for bridge and awsvpc tasks also a TCP forward input and,
//! for Fluent Bit, the health-check input), the grep filters of `include-pattern` and
//! `exclude-pattern`, the ECS metadata filter, the user's configuration file, then the
//! health-check output and one output per `awsfirelens` container. Options are written in
//! byte order of their names, as Go's templates range over maps; the containers' sections in
//! task order (the ECS agent's order is Go's random map order).

use super::{
    output_plugin_key, router_options, secret_variable, uses_firelens, ExternalConfig,
    EXCLUDE_PATTERN, INCLUDE_PATTERN, LOG_DRIVER_BUFFER_LIMIT, ROUTER_SOCKET_PATH,
};
use crate::task::{FirelensType, NetworkMode, Task};
use std::collections::BTreeMap;
use std::fmt::Write;

/// ECS's default Fluent Bit memory buffer (MB) for a router without a memory size.
const DEFAULT_MEM_BUF_LIMIT_MB: u64 = 25;
const HEALTH_CHECK_TAG: &str = "firelens-healthcheck";
const HEALTH_CHECK_PORT: &str = "8877";

/// An input or an output section.
struct Section {
    name: String,
    tag: String,
    options: BTreeMap<String, String>,
}

/// A grep filter on the `log` key of records matching `tag`.
struct Grep {
    tag: String,
    regex: String,
}

/// The configuration before it is written in one syntax.
struct Config {
    inputs: Vec<Section>,
    include_filters: Vec<Grep>,
    exclude_filters: Vec<Grep>,
    /// The ECS metadata fields, for records matching the tag.
    record_fields: Option<(String, BTreeMap<String, String>)>,
    includes: Vec<String>,
    outputs: Vec<Section>,
}

fn options(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    crate::sorting::map_of(
        pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string())),
    )
}

/// The router's memory buffer: half its memory reservation, else half its memory limit, else
/// ECS's default.
fn mem_buf_limit(reservation_mib: Option<u64>, memory_mib: Option<u64>) -> String {
    let limit = reservation_mib
        .filter(|mib| *mib > 0)
        .or(memory_mib)
        .unwrap_or(0)
        / 2;
    let limit = if limit == 0 {
        DEFAULT_MEM_BUF_LIMIT_MB
    } else {
        limit
    };
    format!("{limit}MB")
}

/// The router's configuration for `task` in its router's syntax, or `None` when the task has
/// no router. `cluster` is the metadata filter's `ecs_cluster`. Fails, naming the container,
/// when an `awsfirelens` container gives plugin options but no plugin (the parser refuses such
/// a definition first), or when the router's options are not valid.
pub fn render_config(task: &Task, cluster: &str) -> Result<Option<String>, String> {
    let Some(router) = super::router(&task.containers) else {
        return Ok(None);
    };
    let Some(firelens) = &router.definition.firelens_configuration else {
        return Ok(None);
    };
    let router_type = firelens.router_type;
    let router_options = router_options(&firelens.options).map_err(|error| {
        format!(
            "firelensConfiguration.options.{}: {}",
            error.option, error.message
        )
    })?;
    let wildcard = match router_type {
        FirelensType::Fluentbit => "*",
        FirelensType::Fluentd => "**",
    };
    let mut config = Config {
        inputs: Vec::new(),
        include_filters: Vec::new(),
        exclude_filters: Vec::new(),
        record_fields: None,
        includes: Vec::new(),
        outputs: Vec::new(),
    };
    config.inputs.push(match router_type {
        FirelensType::Fluentd => Section {
            name: "unix".into(),
            tag: String::new(),
            options: options(&[("path", ROUTER_SOCKET_PATH)]),
        },
        FirelensType::Fluentbit => Section {
            name: "forward".into(),
            tag: String::new(),
            options: options(&[
                ("unix_path", ROUTER_SOCKET_PATH),
                (
                    "Mem_Buf_Limit",
                    &mem_buf_limit(
                        router.definition.memory_reservation_mib,
                        router.definition.memory_mib,
                    ),
                ),
            ]),
        },
    });
    let bind = match task.network_mode {
        NetworkMode::Bridge => Some("0.0.0.0"),
        NetworkMode::Awsvpc => Some("127.0.0.1"),
        NetworkMode::Host | NetworkMode::None => None,
    };
    if let Some(bind) = bind {
        config.inputs.push(Section {
            name: "forward".into(),
            tag: String::new(),
            options: match router_type {
                FirelensType::Fluentd => options(&[("bind", bind), ("port", super::FLUENT_PORT)]),
                FirelensType::Fluentbit => {
                    options(&[("Listen", bind), ("Port", super::FLUENT_PORT)])
                }
            },
        });
        if router_type == FirelensType::Fluentbit {
            config.inputs.push(Section {
                name: "tcp".into(),
                tag: HEALTH_CHECK_TAG.into(),
                options: options(&[("Listen", "127.0.0.1"), ("Port", HEALTH_CHECK_PORT)]),
            });
            config.outputs.push(Section {
                name: "null".into(),
                tag: HEALTH_CHECK_TAG.into(),
                options: BTreeMap::new(),
            });
        }
    }
    if router_options.ecs_log_metadata {
        config.record_fields = Some((
            wildcard.to_string(),
            options(&[
                ("ecs_cluster", cluster),
                ("ecs_task_arn", &task.arn),
                (
                    "ecs_task_definition",
                    &format!("{}:{}", task.family, task.revision),
                ),
            ]),
        ));
    }
    for (index, container) in task.containers.iter().enumerate() {
        let definition = &container.definition;
        let Some(log) = definition
            .log_configuration
            .as_ref()
            .filter(|_| uses_firelens(definition))
        else {
            continue;
        };
        let tag = format!("{}-firelens{wildcard}", definition.name);
        let placeholder = |variable: String| match router_type {
            FirelensType::Fluentbit => format!("${{{variable}}}"),
            FirelensType::Fluentd => format!("\"#{{ENV['{variable}']}}\""),
        };
        let mut given: BTreeMap<String, String> = crate::sorting::map_of(
            log.options
                .iter()
                .filter(|(key, _)| key.as_str() != LOG_DRIVER_BUFFER_LIMIT)
                .map(|(key, value)| (key.clone(), value.clone())),
        );
        for secret in &log.secret_options {
            given.insert(
                secret.name.clone(),
                placeholder(secret_variable(&secret.name, index)),
            );
        }
        let plugin_key = output_plugin_key(router_type);
        let mut output_options = BTreeMap::new();
        for (key, value) in &given {
            match key.as_str() {
                key if key == plugin_key => {}
                INCLUDE_PATTERN => config.include_filters.push(Grep {
                    tag: tag.clone(),
                    regex: value.clone(),
                }),
                EXCLUDE_PATTERN => config.exclude_filters.push(Grep {
                    tag: tag.clone(),
                    regex: value.clone(),
                }),
                _ => {
                    output_options.insert(key.clone(), value.clone());
                }
            }
        }
        match given.get(plugin_key) {
            Some(plugin) => config.outputs.push(Section {
                name: plugin.clone(),
                tag,
                options: output_options,
            }),
            None if !output_options.is_empty() => {
                return Err(missing_output_plugin(&definition.name, router_type));
            }
            // The user's own configuration file may route this container's records.
            None => {}
        }
    }
    match &router_options.external {
        Some(ExternalConfig::File { path }) => config.includes.push(path.clone()),
        Some(ExternalConfig::S3 { .. }) => config
            .includes
            .push(super::external_config_path_in_router(router_type).to_string()),
        None => {}
    }
    Ok(Some(match router_type {
        FirelensType::Fluentbit => write_fluent_bit(&config),
        FirelensType::Fluentd => write_fluentd(&config),
    }))
}

/// ECS's error for `awsfirelens` options without the output plugin.
pub fn missing_output_plugin(container: &str, router_type: FirelensType) -> String {
    format!(
        "container {container:?}: missing output key {} which is required for firelens \
         configuration of type {}",
        output_plugin_key(router_type),
        router_type.as_str()
    )
}

// `write!` into a String cannot fail; the results below are ignored for that reason.

fn write_fluent_bit(config: &Config) -> String {
    let mut out = String::new();
    for input in &config.inputs {
        let _ = write!(out, "\n[INPUT]\n    Name {}\n", input.name);
        if !input.tag.is_empty() {
            let _ = writeln!(out, "    Tag {}", input.tag);
        }
        for (key, value) in &input.options {
            let _ = writeln!(out, "    {key} {value}");
        }
    }
    for filter in &config.include_filters {
        let _ = write!(
            out,
            "\n[FILTER]\n    Name   grep\n    Match {}\n    Regex  log {}\n",
            filter.tag, filter.regex
        );
    }
    for filter in &config.exclude_filters {
        let _ = write!(
            out,
            "\n[FILTER]\n    Name   grep\n    Match {}\n    Exclude log {}\n",
            filter.tag, filter.regex
        );
    }
    if let Some((tag, fields)) = &config.record_fields {
        let _ = write!(
            out,
            "\n[FILTER]\n    Name record_modifier\n    Match {tag}\n"
        );
        for (key, value) in fields {
            let _ = writeln!(out, "    Record {key} {value}");
        }
    }
    for include in &config.includes {
        let _ = write!(out, "\n@INCLUDE {include}\n");
    }
    for output in &config.outputs {
        let _ = write!(
            out,
            "\n[OUTPUT]\n    Name {}\n    Match {}\n",
            output.name, output.tag
        );
        for (key, value) in &output.options {
            let _ = writeln!(out, "    {key} {value}");
        }
    }
    out
}

fn write_fluentd(config: &Config) -> String {
    let mut out = String::new();
    for input in &config.inputs {
        let _ = write!(out, "\n<source>\n    @type {}\n", input.name);
        if !input.tag.is_empty() {
            let _ = writeln!(out, "    tag {}", input.tag);
        }
        for (key, value) in &input.options {
            let _ = writeln!(out, "    {key} {value}");
        }
        out.push_str("</source>\n");
    }
    for (filters, block) in [
        (&config.include_filters, "regexp"),
        (&config.exclude_filters, "exclude"),
    ] {
        for filter in filters {
            let _ = write!(
                out,
                "\n<filter {}>\n    @type  grep\n    <{block}>\n        key log\n        \
                 pattern {}\n    </{block}>\n</filter>\n",
                filter.tag, filter.regex
            );
        }
    }
    if let Some((tag, fields)) = &config.record_fields {
        let _ = write!(
            out,
            "\n<filter {tag}>\n    @type record_transformer\n    <record>\n"
        );
        for (key, value) in fields {
            let _ = writeln!(out, "        {key} {value}");
        }
        out.push_str("    </record>\n</filter>\n");
    }
    for include in &config.includes {
        let _ = write!(out, "\n@include {include}\n");
    }
    for output in &config.outputs {
        let _ = write!(out, "\n<match {}>\n    @type {}\n", output.tag, output.name);
        for (key, value) in &output.options {
            let _ = writeln!(out, "    {key} {value}");
        }
        out.push_str("</match>\n");
    }
    out
}
