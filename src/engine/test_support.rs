//! Model values and a call-recording runtime for the engine's unit tests (compiled for tests
//! only).

use crate::runtime::{
    ContainerInfo, ContainerRuntime, ContainerSummary, CreateContainer, EventFilter, EventStream,
    ImageInfo, RegistryAuth, RuntimeError,
};
use crate::task::ContainerDefinition;
use crossbeam_channel::Sender;
use std::time::Duration;

/// A runtime with no Docker behind it: it reports each pull (`pull <image>`) on a channel,
/// answers every container inspection with `inspect_answer` when set, and every other call as
/// Docker being unreachable. Enough to see a task's loop reach its first Docker call (made only
/// once every earlier stop finished), or to restore a task against a container in a given state.
pub(crate) struct UnitRuntime {
    pub(crate) pulls: Sender<String>,
    pub(crate) inspect_answer: Option<ContainerInfo>,
}

fn unreachable() -> RuntimeError {
    RuntimeError::Unreachable {
        message: "no Docker in unit tests".to_string(),
    }
}

impl ContainerRuntime for UnitRuntime {
    fn pull_image(&self, image: &str, _auth: Option<&RegistryAuth>) -> Result<(), RuntimeError> {
        let _ = self.pulls.send(format!("pull {image}"));
        Err(unreachable())
    }
    fn inspect_image(&self, _image: &str) -> Result<ImageInfo, RuntimeError> {
        Err(unreachable())
    }
    fn create_container(&self, _spec: &CreateContainer) -> Result<String, RuntimeError> {
        Err(unreachable())
    }
    fn start_container(&self, _id: &str) -> Result<(), RuntimeError> {
        Err(unreachable())
    }
    fn stop_container(&self, _id: &str, _grace: Duration) -> Result<(), RuntimeError> {
        Err(unreachable())
    }
    fn inspect_container(&self, _id_or_name: &str) -> Result<ContainerInfo, RuntimeError> {
        self.inspect_answer.clone().ok_or_else(unreachable)
    }
    fn remove_container(&self, _id: &str, _volumes: bool) -> Result<(), RuntimeError> {
        Err(unreachable())
    }
    fn list_containers(&self, _labels: &[String]) -> Result<Vec<ContainerSummary>, RuntimeError> {
        Err(unreachable())
    }
    fn events(&self, _filter: &EventFilter) -> Result<Box<dyn EventStream>, RuntimeError> {
        Err(unreachable())
    }
    fn ping(&self) -> Result<(), RuntimeError> {
        Err(unreachable())
    }
}

/// An essential container running `image`, with nothing else set.
pub(crate) fn container_definition(name: &str, image: &str) -> ContainerDefinition {
    ContainerDefinition::new(name, image)
}
