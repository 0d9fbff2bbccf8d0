//! A container's port binding, the one data type the task model and the Docker runtime share:
//! requested at create from a task definition's port mappings, reported by Docker's inspect, kept
//! in a task's checkpoint and shown by the API. A leaf module, so the model does not depend on the
//! runtime nor the runtime on the model.

/// A port binding: requested at create, or reported by inspect.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PortBinding {
    pub container_port: u16,
    /// `tcp` or `udp`.
    pub protocol: String,
    /// 0 at create = let Docker choose.
    pub host_port: u16,
    /// Empty = all addresses.
    pub host_ip: String,
}
