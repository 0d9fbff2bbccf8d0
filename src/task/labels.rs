//! The labels deckhand stamps on every container it creates: the five ECS labels, so tools that
//! understand ECS hosts recognise deckhand's containers, merged over the container's own
//! `dockerLabels` (deckhand's win). Pure data of the task model: the engine puts them on a create
//! request, the API's views show them, and every list or event subscription filters on them.

use super::{Container, Task};
use std::collections::BTreeMap;

pub const LABEL_CLUSTER: &str = "com.amazonaws.ecs.cluster";
pub const LABEL_TASK_ARN: &str = "com.amazonaws.ecs.task-arn";
pub const LABEL_CONTAINER_NAME: &str = "com.amazonaws.ecs.container-name";
pub const LABEL_TASK_DEFINITION_FAMILY: &str = "com.amazonaws.ecs.task-definition-family";
pub const LABEL_TASK_DEFINITION_VERSION: &str = "com.amazonaws.ecs.task-definition-version";

/// The five ECS labels, merged over the container's own labels (ours win).
pub fn container_labels(
    task: &Task,
    container: &Container,
    cluster: &str,
) -> BTreeMap<String, String> {
    let mut labels = container.definition.docker_labels.clone();
    labels.insert(LABEL_CLUSTER.to_string(), cluster.to_string());
    labels.insert(LABEL_TASK_ARN.to_string(), task.arn.clone());
    labels.insert(
        LABEL_CONTAINER_NAME.to_string(),
        container.name().to_string(),
    );
    labels.insert(
        LABEL_TASK_DEFINITION_FAMILY.to_string(),
        task.family.clone(),
    );
    labels.insert(
        LABEL_TASK_DEFINITION_VERSION.to_string(),
        task.revision.to_string(),
    );
    labels
}
