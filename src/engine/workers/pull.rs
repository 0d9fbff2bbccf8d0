//! The pull decisions of §13: the registry credential a pull sends, whether to pull under the
//! pull behaviour, whether a failed pull continues with the local image, and saying once per
//! image that it does.

use super::WorkerContext;
use crate::runtime::RegistryAuth;
use crate::task::PullBehavior;
use std::collections::HashSet;
use std::sync::Mutex;

/// §13: the credentials a pull of `image` sends, when one is configured for its registry.
pub fn registry_auth_for(context: &WorkerContext, image: &str) -> Option<RegistryAuth> {
    context
        .registry_credentials
        .for_image(image)
        .map(|matched| RegistryAuth {
            username: matched.credential.username.clone(),
            password: matched.credential.password.clone(),
            server_address: matched.server_address.to_string(),
        })
}

/// §13: whether to pull under `behavior`. `present_locally` is only asked for `prefer-cached`.
pub fn should_pull(
    behavior: PullBehavior,
    pulled_by_this_agent: bool,
    present_locally: impl FnOnce() -> bool,
) -> bool {
    match behavior {
        PullBehavior::Default | PullBehavior::Always => true,
        PullBehavior::Once => !pulled_by_this_agent,
        PullBehavior::PreferCached => !present_locally(),
    }
}

/// §13: whether a failed pull continues with the image Docker already has. Only `default` and
/// `prefer-cached` continue, and only when the image is there: otherwise the pull error stands
/// (and the create that follows fails with it). `present_locally` is asked only when it matters.
pub fn falls_back_to_cached_image(
    behavior: PullBehavior,
    present_locally: impl FnOnce() -> bool,
) -> bool {
    match behavior {
        PullBehavior::Default | PullBehavior::PreferCached => present_locally(),
        PullBehavior::Always | PullBehavior::Once => false,
    }
}

pub(super) fn pull_behavior_name(behavior: PullBehavior) -> &'static str {
    match behavior {
        PullBehavior::Default => "default",
        PullBehavior::Always => "always",
        PullBehavior::Once => "once",
        PullBehavior::PreferCached => "prefer-cached",
    }
}

/// Images whose failed pull was already logged, process-wide: a host with no registry runs
/// many containers of one local image, and one line says all there is to say. `failed: true`
/// records the image and returns whether it was already there; `false` (a pull succeeded)
/// forgets it, so a later failure is logged again.
pub(super) fn pull_fallback_logged(image: &str, failed: bool) -> bool {
    static LOGGED: std::sync::OnceLock<Mutex<HashSet<String>>> = std::sync::OnceLock::new();
    let mut logged = LOGGED
        .get_or_init(|| Mutex::new(HashSet::new()))
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    if failed {
        !logged.insert(image.to_string())
    } else {
        logged.remove(image);
        false
    }
}
