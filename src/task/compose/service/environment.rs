//! A service's environment: `environment` (list or map) over `env_file`.

use super::*;

impl TaskBuilder {
    /// `environment` (list or map) over `env_file` (later files win), as Compose orders them.
    pub(super) fn environment(
        &mut self,
        mapper: &mut Mapper,
        service: &Node,
        path: &str,
    ) -> BTreeMap<String, String> {
        let mut environment = BTreeMap::new();
        if let Some(files) = service.get("env_file") {
            let files_path = join(path, "env_file");
            let list: Vec<(String, bool)> = match &files.value {
                Value::String(file) => vec![(file.clone(), true)],
                Value::Sequence(items) => items
                    .iter()
                    .filter_map(|item| match &item.value {
                        Value::String(file) => Some((file.clone(), true)),
                        Value::Mapping(_) => {
                            let file = item.get("path").and_then(Node::scalar_text)?;
                            let required = !matches!(
                                item.get("required").map(|n| &n.value),
                                Some(Value::Bool(false))
                            );
                            Some((file, required))
                        }
                        _ => None,
                    })
                    .collect(),
                _ => {
                    mapper.error(&files_path, files.line, "must be a path or a list of paths");
                    Vec::new()
                }
            };
            for (file, required) in list {
                let text = if required {
                    mapper.read_env_file(&file, &files_path, files.line)
                } else {
                    let full = mapper
                        .context
                        .directory
                        .as_ref()
                        .map_or_else(|| file.clone().into(), |directory| directory.join(&file));
                    (mapper.context.read_file)(&full).ok()
                };
                let Some(text) = text else { continue };
                // Its values may refer to the Compose file's variables and to the lines above.
                match values::parse_env_file(&text, &mapper.variables) {
                    Ok(parsed) => {
                        for name in parsed.unset {
                            mapper.warn(
                                &files_path,
                                files.line,
                                format!(
                                    "{file}: variable {name} is not set; using an empty string"
                                ),
                            );
                        }
                        for (key, value) in parsed.entries {
                            let value = value.or_else(|| mapper.variable(&key).map(str::to_string));
                            if let Some(value) = value {
                                environment.insert(key, value);
                            }
                        }
                    }
                    Err(error) => mapper.error(&files_path, files.line, format!("{file}: {error}")),
                }
            }
        }
        if let Some(node) = service.get("environment") {
            for (key, value) in key_values(mapper, node, &join(path, "environment"), true) {
                // `- NAME` with no value takes NAME from the environment, or leaves it unset.
                let value = value.or_else(|| mapper.variable(&key).map(str::to_string));
                match value {
                    Some(value) => {
                        environment.insert(key, value);
                    }
                    None => {
                        environment.remove(&key);
                    }
                }
            }
        }
        environment
    }
}
