//! The order containers start and stop in: dependencies (`dependsOn`, `links`, `volumesFrom`,
//! and the FireLens router before the containers that log through it) first, definition order
//! among equals. Works on the model, so it serves every input format.

use crate::task::firelens::implicit_router_dependents;
use crate::task::{ContainerDefinition, TaskDefinition};
use std::collections::HashMap;

/// Containers in a valid start order (dependencies first), by name.
///
/// Among containers whose dependencies are all placed, definition order decides, so the result
/// is stable. Edges to unknown containers are ignored; containers caught in a cycle (which
/// validation rejects) come last, in definition order.
pub fn start_order(definition: &TaskDefinition) -> Vec<String> {
    let (order, leftovers) = topological_order(&definition.containers);
    order
        .into_iter()
        .chain(leftovers)
        .map(|index| definition.containers[index].name.clone())
        .collect()
}

/// Containers in a valid shutdown order (dependents first), by name: the reverse of
/// [`start_order`]. The engine enforces it per container through §4's shutdown-order rule; this
/// is the same order as a list, for display and for stopping without the engine.
pub fn shutdown_order(definition: &TaskDefinition) -> Vec<String> {
    let mut order = start_order(definition);
    order.reverse();
    order
}

/// Kahn's algorithm over every dependency edge, picking the earliest ready container each round.
/// Returns (ordered indexes, indexes left over because of cycles).
pub(super) fn topological_order(containers: &[ContainerDefinition]) -> (Vec<usize>, Vec<usize>) {
    let index_of: HashMap<&str, usize> = containers
        .iter()
        .enumerate()
        .map(|(index, container)| (container.name.as_str(), index))
        .collect();
    let mut edges: Vec<Vec<usize>> = containers
        .iter()
        .map(|container| {
            container
                .dependencies()
                .iter()
                .filter_map(|edge| index_of.get(edge.container_name.as_str()).copied())
                .collect()
        })
        .collect();
    // The FireLens router starts before the containers that log through it, as the task will
    // have it once accepted.
    let definitions: Vec<&ContainerDefinition> = containers.iter().collect();
    if let Some((router, dependents)) = implicit_router_dependents(&definitions) {
        if let Some(&router_index) = index_of.get(router) {
            for index in dependents {
                edges[index].push(router_index);
            }
        }
    }
    let mut placed = vec![false; containers.len()];
    let mut order = Vec::with_capacity(containers.len());
    loop {
        let ready = (0..containers.len())
            .find(|&index| !placed[index] && edges[index].iter().all(|&dep| placed[dep]));
        match ready {
            Some(index) => {
                placed[index] = true;
                order.push(index);
            }
            None => break,
        }
    }
    let leftovers = (0..containers.len()).filter(|&i| !placed[i]).collect();
    (order, leftovers)
}
