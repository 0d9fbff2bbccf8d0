//! FireLens in a task definition: a router's `firelensConfiguration` (its type and options, read
//! by [`crate::task::firelens::router_options`]) and the rules across containers — one router
//! per task, `awsfirelens` only with a router, and `awsfirelens` options the router's generated
//! configuration can hold.

use super::json::{join, ContainerPaths, Parser};
use super::keys::FIRELENS_CONFIGURATION_KEYS;
use crate::task::firelens::{
    output_plugin_key, render::missing_output_plugin, router_options, uses_firelens,
    EXCLUDE_PATTERN, INCLUDE_PATTERN, LOG_DRIVER_BUFFER_LIMIT, ROUTER_OPTIONS,
};
use crate::task::{ContainerDefinition, FirelensConfiguration, FirelensType};
use serde_json::{Map, Value};

impl Parser {
    /// `firelensConfiguration`: `type` (`fluentbit` or `fluentd`) and `options`. An empty object
    /// asks for nothing.
    pub(super) fn firelens_configuration(
        &mut self,
        object: &Map<String, Value>,
        path: &str,
    ) -> Option<FirelensConfiguration> {
        let value = Self::field(object, "firelensConfiguration")?;
        let config_path = join(path, "firelensConfiguration");
        let map = self.object(&config_path, value)?;
        if map.is_empty() {
            return None;
        }
        self.check_keys(&config_path, map, &FIRELENS_CONFIGURATION_KEYS);
        let router_type = match self.required_string(map, &config_path, "type")?.as_str() {
            "fluentbit" => FirelensType::Fluentbit,
            "fluentd" => FirelensType::Fluentd,
            other => {
                self.error(
                    &join(&config_path, "type"),
                    format!("unknown FireLens type {other:?}: expected fluentbit or fluentd"),
                );
                return None;
            }
        };
        let options = self.string_map(map, &config_path, "options");
        let options_path = join(&config_path, "options");
        for key in options.keys() {
            if !ROUTER_OPTIONS.contains(&key.as_str()) {
                self.warn(
                    &join(&options_path, key),
                    format!(
                        "ignored: a FireLens router reads only {}",
                        ROUTER_OPTIONS.join(", ")
                    ),
                );
            }
        }
        if let Err(error) = router_options(&options) {
            self.error(&join(&options_path, error.option), error.message);
            return None;
        }
        Some(FirelensConfiguration {
            router_type,
            options,
        })
    }

    /// The task's router is one container at most; an `awsfirelens` container needs it, and
    /// gives its output plugin when it gives plugin options (ECS's rule), each option one line
    /// of the generated configuration.
    pub(super) fn firelens_checks(
        &mut self,
        containers: &[ContainerDefinition],
        paths: &[ContainerPaths],
    ) {
        let mut router: Option<(&str, FirelensType)> = None;
        for (container, paths) in containers.iter().zip(paths) {
            let Some(firelens) = &container.firelens_configuration else {
                continue;
            };
            // ECS gives the router's socket directory to its user by number, and fails the
            // task at run time for a user name.
            if let Some(user) = container.user.as_deref().filter(|user| !user.is_empty()) {
                let user_part = user.split(':').next().unwrap_or_default();
                if user_part.parse::<u32>().is_err() {
                    self.error(
                        &paths.at("user"),
                        format!(
                            "{user:?}: a FireLens router's user is a number (uid or uid:gid), \
                             which its socket directory is given to"
                        ),
                    );
                }
            }
            match router {
                None => router = Some((&container.name, firelens.router_type)),
                Some((first, _)) => self.error(
                    &paths.at("firelensConfiguration"),
                    format!(
                        "a task has one FireLens log router, and container {first:?} is it already"
                    ),
                ),
            }
        }
        for (container, paths) in containers.iter().zip(paths) {
            if !uses_firelens(container) {
                continue;
            }
            let log_path = paths.at("logConfiguration");
            let Some((_, router_type)) = router else {
                // A router whose firelensConfiguration was refused already is not "none".
                let router_refused = self
                    .errors
                    .iter()
                    .any(|error| error.path.contains(".firelensConfiguration"));
                if router_refused {
                    continue;
                }
                self.error(
                    &join(&log_path, "logDriver"),
                    "awsfirelens sends the logs to the task's FireLens log router (a container \
                     with firelensConfiguration), and this task has none: add one (type \
                     fluentbit or fluentd), or use another log driver",
                );
                continue;
            };
            let Some(log) = &container.log_configuration else {
                continue;
            };
            let options_path = join(&log_path, "options");
            for (key, value) in &log.options {
                let breaks_a_line = |text: &str| text.contains(['\n', '\r', '\0']);
                if key.is_empty() || key.contains(char::is_whitespace) || breaks_a_line(value) {
                    self.error(
                        &join(&options_path, key),
                        "a FireLens option is one line of the router's configuration: a name \
                         without spaces and a value without line breaks",
                    );
                }
            }
            let plugin_key = output_plugin_key(router_type);
            let plugin_options = log
                .options
                .keys()
                .map(String::as_str)
                .chain(log.secret_options.iter().map(|secret| secret.name.as_str()))
                .any(|key| {
                    ![
                        plugin_key,
                        INCLUDE_PATTERN,
                        EXCLUDE_PATTERN,
                        LOG_DRIVER_BUFFER_LIMIT,
                    ]
                    .contains(&key)
                });
            if plugin_options && !log.options.contains_key(plugin_key) {
                self.error(
                    &options_path,
                    missing_output_plugin(&container.name, router_type),
                );
            }
        }
    }
}
