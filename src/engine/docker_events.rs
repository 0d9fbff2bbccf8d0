//! The Docker events thread: reads the Docker event stream for this cluster's containers and
//! forwards each change to the owning task's inbox without ever blocking (Docker drops a
//! subscriber that stops reading).
//!
//! Routing is by Docker id through the engine's index; events for ids no task tracks are dropped.
//! A task inbox that is full is not waited on: the task is told to re-inspect its containers
//! instead (a one-slot resync channel), so nothing is lost and the reader never stalls. When the
//! stream breaks, the thread reconnects with back-off and asks every task to re-inspect, since
//! events may have been missed in between, then runs the engine's re-list (containers created
//! while the stream was down: adopted by their task, or reported as belonging to none). A panic
//! in the thread is logged and the thread follows the stream again after a pause, as after a
//! reconnect.

use crate::engine::container_spec::LABEL_CLUSTER;
pub use crate::engine::messages::DockerObservation;
use crate::engine::messages::TaskRoute;
use crate::runtime::{ContainerRuntime, EventFilter, EventStream, RuntimeEvent, StreamCanceller};
use crate::task::{ContainerStatus, HealthStatus};
use crossbeam_channel::{Receiver, TrySendError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// The actions deckhand subscribes to (explicitly, so Docker sends nothing else).
pub const SUBSCRIBED_ACTIONS: [&str; 6] =
    ["create", "start", "stop", "die", "oom", "health_status"];

/// The subscription: this cluster's containers, the actions above.
pub fn event_filter(cluster: &str) -> EventFilter {
    EventFilter {
        labels: vec![format!("{LABEL_CLUSTER}={cluster}")],
        actions: SUBSCRIBED_ACTIONS
            .iter()
            .map(|action| action.to_string())
            .collect(),
        since: None,
    }
}

/// Maps one Docker event to what it means for the container, or `None` when it means nothing.
pub fn observation_for_event(event: &RuntimeEvent) -> Option<DockerObservation> {
    let action = event.action.as_str();
    if let Some(health) = action.strip_prefix("health_status:") {
        let health = match health.trim() {
            "healthy" => HealthStatus::Healthy,
            "unhealthy" => HealthStatus::Unhealthy,
            _ => HealthStatus::Unknown,
        };
        return Some(DockerObservation::Health { health });
    }
    if action == "oom" {
        return Some(DockerObservation::OutOfMemory);
    }
    let status = match action {
        "create" => ContainerStatus::Created,
        "start" => ContainerStatus::Running,
        "stop" | "die" => ContainerStatus::Stopped,
        _ => return None,
    };
    let exit_code = if action == "die" {
        event.exit_code()
    } else {
        None
    };
    let at = (event.time_nano > 0).then_some(event.time_nano);
    Some(DockerObservation::Status {
        status,
        exit_code,
        at,
    })
}

/// Docker id → the owning task's inboxes. Written by the managed tasks (when a container is
/// created and when a task is forgotten), read by the events thread.
pub type DockerIndex = RwLock<HashMap<String, TaskRoute>>;

/// Forwards one event; never blocks.
pub fn route_event(index: &DockerIndex, event: &RuntimeEvent) {
    let Some(observation) = observation_for_event(event) else {
        return;
    };
    let index = index.read().unwrap_or_else(|poison| poison.into_inner());
    let Some(route) = index.get(&event.id) else {
        log::trace!(
            "dropping {} event for untracked container {}",
            event.action,
            event.id
        );
        return;
    };
    match route
        .docker_events
        .try_send(Box::new((event.id.clone(), observation)))
    {
        Ok(()) | Err(TrySendError::Disconnected(_)) => {}
        Err(TrySendError::Full(_)) => {
            // The task is behind; have it re-inspect instead of waiting for room.
            let _ = route.resync.try_send(());
        }
    }
}

/// Asks every task that tracks a container to re-inspect it (after a stream loss).
pub fn resync_all(index: &DockerIndex) {
    let index = index.read().unwrap_or_else(|poison| poison.into_inner());
    for route in index.values() {
        let _ = route.resync.try_send(());
    }
}

/// Shared between the engine (which stops the thread) and the thread.
#[derive(Default)]
pub struct EventsThreadControl {
    state: Mutex<EventsThreadState>,
}

#[derive(Default)]
struct EventsThreadState {
    stopping: bool,
    canceller: Option<StreamCanceller>,
}

impl EventsThreadControl {
    /// Ends the thread: cancels the current stream. Pair with closing the back-off channel.
    pub fn stop(&self) {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        state.stopping = true;
        if let Some(canceller) = state.canceller.take() {
            canceller.cancel();
        }
    }

    fn is_stopping(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .stopping
    }

    /// Records the stream's canceller; false (and the stream cancelled) when already stopping.
    fn install(&self, canceller: StreamCanceller) -> bool {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if state.stopping {
            canceller.cancel();
            return false;
        }
        state.canceller = Some(canceller);
        true
    }
}

/// Back-off between reconnect attempts.
#[derive(Debug, Clone, Copy)]
pub struct Reconnect {
    pub initial: Duration,
    pub maximum: Duration,
}

/// Runs after each reconnect, on the events thread, once the new stream is subscribed (so a
/// change after it is an event, not missed): the engine's re-list by label.
pub type OnReconnect = Box<dyn Fn() + Send>;

/// The events thread body. `first_stream` is the subscription made before any task started (so
/// nothing is missed at start-up); `None` when that first attempt failed. `stop_signal` is a
/// channel that is closed (or sent to) when the thread must end, so the back-off wait is
/// interruptible.
///
/// A panic while following the stream (deckhand choking on an event it did not expect, or in the
/// re-list) does not end the thread: it is logged, and after a pause (doubling from
/// `reconnect.initial` to `reconnect.maximum` while it keeps panicking, so a panic that repeats
/// does not spin) the thread subscribes again, as after a reconnect: every task re-inspects and
/// the re-list runs, since events may have been missed meanwhile.
#[allow(clippy::too_many_arguments)]
pub fn run_events_thread(
    runtime: Arc<dyn ContainerRuntime>,
    cluster: String,
    index: Arc<DockerIndex>,
    control: Arc<EventsThreadControl>,
    stop_signal: Receiver<()>,
    first_stream: Option<Box<dyn EventStream>>,
    reconnect: Reconnect,
    on_reconnect: OnReconnect,
) {
    let mut first_stream = first_stream;
    let mut connected_before = first_stream.is_some();
    let mut pause = reconnect.initial;
    loop {
        let started = std::time::Instant::now();
        let followed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            follow_events(
                runtime.as_ref(),
                &cluster,
                &index,
                &control,
                &stop_signal,
                first_stream.take(),
                &mut connected_before,
                reconnect,
                &on_reconnect,
            )
        }));
        let Err(panic) = followed else {
            return;
        };
        if control.is_stopping() {
            return;
        }
        if started.elapsed() > reconnect.maximum {
            // It ran well for a while: this is a new problem, not the same one again.
            pause = reconnect.initial;
        }
        log::error!(
            "the Docker events thread panicked ({}); following Docker's events again in {}s",
            crate::text::panic_message(panic.as_ref()),
            pause.as_secs_f64()
        );
        match stop_signal.recv_timeout(pause) {
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            _ => return,
        }
        pause = (pause * 2).min(reconnect.maximum);
    }
}

/// Tells the metrics whether Docker answered a subscription (`deckhand_docker_up`): with no task
/// calling Docker, the events thread's reconnects are what notice it going away and coming back.
pub fn note_docker_answer<T>(
    subscribed: Result<T, crate::runtime::RuntimeError>,
) -> Result<T, crate::runtime::RuntimeError> {
    crate::metrics::global().docker_answered(super::workers::docker_outcome(&subscribed));
    subscribed
}

/// Subscribes, routes events and reconnects with back-off until the thread is told to stop.
/// `connected_before`: a subscription succeeded earlier (so the next one is a reconnect).
#[allow(clippy::too_many_arguments)]
fn follow_events(
    runtime: &dyn ContainerRuntime,
    cluster: &str,
    index: &DockerIndex,
    control: &EventsThreadControl,
    stop_signal: &Receiver<()>,
    first_stream: Option<Box<dyn EventStream>>,
    connected_before: &mut bool,
    reconnect: Reconnect,
    on_reconnect: &OnReconnect,
) {
    let filter = event_filter(cluster);
    let mut pending_stream = first_stream;
    let mut backoff = reconnect.initial;
    loop {
        if control.is_stopping() {
            return;
        }
        let stream = match pending_stream.take() {
            Some(stream) => Some(stream),
            None => match note_docker_answer(runtime.events(&filter)) {
                Ok(stream) => {
                    if *connected_before {
                        log::info!("Docker event stream reconnected; re-inspecting containers");
                    }
                    // Whatever happened while disconnected was missed: re-inspect, and look for
                    // containers no task has recorded yet.
                    let reconnected = *connected_before;
                    resync_all(index);
                    *connected_before = true;
                    if reconnected {
                        on_reconnect();
                    }
                    Some(stream)
                }
                Err(error) => {
                    log::warn!("cannot subscribe to Docker events: {error}");
                    None
                }
            },
        };
        if let Some(mut stream) = stream {
            if !control.install(stream.canceller()) {
                return;
            }
            backoff = reconnect.initial;
            loop {
                match stream.next_event() {
                    Ok(Some(event)) => route_event(index, &event),
                    Ok(None) => {
                        if !control.is_stopping() {
                            log::warn!("Docker event stream ended; reconnecting");
                        }
                        break;
                    }
                    Err(error) => {
                        log::warn!("Docker event stream broke: {error}");
                        break;
                    }
                }
            }
        }
        if control.is_stopping() {
            return;
        }
        match stop_signal.recv_timeout(backoff) {
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            _ => return,
        }
        backoff = (backoff * 2).min(reconnect.maximum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn event(action: &str, attributes: &[(&str, &str)]) -> RuntimeEvent {
        RuntimeEvent {
            id: "abc".to_string(),
            action: action.to_string(),
            attributes: attributes
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect::<BTreeMap<_, _>>(),
            time_nano: 1_700_000_000_000_000_000,
        }
    }

    #[test]
    fn docker_actions_map_to_container_changes() {
        let status = |status, exit_code| {
            Some(DockerObservation::Status {
                status,
                exit_code,
                at: Some(1_700_000_000_000_000_000),
            })
        };
        let health = |health| Some(DockerObservation::Health { health });
        let table = [
            (event("create", &[]), status(ContainerStatus::Created, None)),
            (event("start", &[]), status(ContainerStatus::Running, None)),
            (event("stop", &[]), status(ContainerStatus::Stopped, None)),
            (
                event("die", &[("exitCode", "3")]),
                status(ContainerStatus::Stopped, Some(3)),
            ),
            (event("die", &[]), status(ContainerStatus::Stopped, None)),
            (
                event("stop", &[("exitCode", "3")]),
                status(ContainerStatus::Stopped, None),
            ),
            (
                event("health_status: healthy", &[]),
                health(HealthStatus::Healthy),
            ),
            (
                event("health_status: unhealthy", &[]),
                health(HealthStatus::Unhealthy),
            ),
            (
                event("health_status: starting", &[]),
                health(HealthStatus::Unknown),
            ),
            (event("kill", &[("signal", "15")]), None),
            (event("destroy", &[]), None),
            (event("oom", &[]), Some(DockerObservation::OutOfMemory)),
        ];
        for (input, expected) in table {
            assert_eq!(observation_for_event(&input), expected, "{}", input.action);
        }
    }

    #[test]
    fn subscription_filters_on_the_cluster_label_and_lists_actions() {
        let filter = event_filter("edge");
        assert_eq!(
            filter.labels,
            vec!["com.amazonaws.ecs.cluster=edge".to_string()]
        );
        assert_eq!(
            filter.actions,
            vec!["create", "start", "stop", "die", "oom", "health_status"]
        );
    }

    #[test]
    fn routing_never_blocks_and_falls_back_to_resync() {
        let (route, docker_events, resync) = TaskRoute::new_for_test(1);
        let index: DockerIndex = RwLock::new(HashMap::from([("abc".to_string(), route)]));
        route_event(&index, &event("start", &[]));
        route_event(&index, &event("die", &[("exitCode", "0")]));
        route_event(&index, &event("die", &[("exitCode", "0")]));
        // The first fits; the others find the inbox full and leave one resync request.
        assert_eq!(docker_events.len(), 1);
        assert_eq!(resync.len(), 1);
        // Unknown ids are dropped.
        let mut unknown = event("start", &[]);
        unknown.id = "other".to_string();
        route_event(&index, &unknown);
        assert_eq!(docker_events.len(), 1);
    }
}
