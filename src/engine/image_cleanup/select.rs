//! Which images a cleanup cycle may remove, and in which order (docs/ENGINE.md §15): a pure
//! function of Docker's image list, deckhand's image record, the protected and excluded names,
//! the ages and the clock. No I/O; table-tested below.
//!
//! Never removed: an image a task holds (used by a task whose containers are not cleaned up),
//! an image named by a task definition in `tasks.d` or by any task the engine still has, an
//! image in the exclude list, an untracked image unless untracked cleanup is on, and an image
//! younger than its minimum age. The rest goes tracked first, oldest last use first, then
//! untracked, oldest creation first.

use crate::runtime::ImageSummary;
use crate::state::ImagesRecord;
use crate::task::Millis;
use std::collections::HashSet;
use std::time::Duration;

/// Everything one selection looks at.
#[derive(Debug, Clone, Copy)]
pub struct SelectionInput<'a> {
    pub now: Millis,
    /// Docker's images (`GET /images/json`).
    pub images: &'a [ImageSummary],
    pub tracked: &'a ImagesRecord,
    /// Names no cycle may remove: `tasks.d`'s images and those of every task not cleaned up.
    pub protected_names: &'a [String],
    /// `ECS_EXCLUDE_UNTRACKED_IMAGE`.
    pub excluded_names: &'a [String],
    pub minimum_age: Duration,
    pub untracked_cleanup: bool,
    pub untracked_minimum_age: Duration,
}

/// One image a cycle may remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    pub image_id: String,
    /// What to remove, one `DELETE /images/{name}` each: the image's names as Docker lists
    /// them; the id alone for an image with no name.
    pub names: Vec<String>,
    pub size: i64,
    /// Whether deckhand's tasks used it.
    pub tracked: bool,
    /// Why it may go, for the log line.
    pub reason: String,
}

/// What a selection found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selection {
    /// In removal order.
    pub removable: Vec<Removal>,
    /// Tracked ids Docker no longer has: the record forgets them.
    pub gone: Vec<String>,
}

/// A name as Docker lists it in `RepoTags`/`RepoDigests`: Docker Hub's `docker.io/` and
/// `library/` left out, `:latest` added to a name with neither tag nor digest.
pub fn normalize_image_name(name: &str) -> String {
    let mut name = name.trim();
    for prefix in ["docker.io/", "index.docker.io/", "registry-1.docker.io/"] {
        if let Some(rest) = name.strip_prefix(prefix) {
            name = rest;
            break;
        }
    }
    if let Some(rest) = name.strip_prefix("library/") {
        name = rest;
    }
    if name.starts_with("sha256:") || name.contains('@') {
        return name.to_string();
    }
    let last_component = name.rsplit('/').next().unwrap_or(name);
    if last_component.contains(':') {
        name.to_string()
    } else {
        format!("{name}:latest")
    }
}

/// Whether `name` (normalized) names `image`: one of its tags or digests, or its id.
fn names_image(normalized: &str, image: &ImageSummary) -> bool {
    image.id == normalized
        || image
            .repo_tags
            .iter()
            .chain(&image.repo_digests)
            .any(|docker_name| normalize_image_name(docker_name) == normalized)
}

/// An age for a log line: `2h5m`, `40s`, `350ms`.
fn age_text(millis: u64) -> String {
    let seconds = millis / 1000;
    match seconds {
        0 => format!("{millis}ms"),
        1..=59 => format!("{seconds}s"),
        60..=3599 => format!("{}m{}s", seconds / 60, seconds % 60),
        _ => format!("{}h{}m", seconds / 3600, seconds % 3600 / 60),
    }
}

/// The images a cycle may remove, in order, and the tracked ids Docker no longer has.
pub fn select_removable(input: &SelectionInput<'_>) -> Selection {
    let normalized = |names: &[String]| -> Vec<String> {
        names
            .iter()
            .map(|name| normalize_image_name(name))
            .collect()
    };
    let protected = normalized(input.protected_names);
    // The awsvpc sandbox's image is deckhand's own, like ECS's pause image that its cleanup
    // never removes.
    let mut excluded = normalized(input.excluded_names);
    excluded.push(normalize_image_name(crate::task::sandbox::SANDBOX_IMAGE));
    let kept_by =
        |image: &ImageSummary, names: &[String]| names.iter().any(|name| names_image(name, image));
    let listed: HashSet<&str> = input.images.iter().map(|image| image.id.as_str()).collect();
    let mut selection = Selection {
        gone: input
            .tracked
            .images
            .iter()
            .filter(|image| !listed.contains(image.image_id.as_str()))
            .map(|image| image.image_id.clone())
            .collect(),
        ..Selection::default()
    };
    let minimum_age = u64::try_from(input.minimum_age.as_millis()).unwrap_or(u64::MAX);
    let untracked_minimum_age =
        u64::try_from(input.untracked_minimum_age.as_millis()).unwrap_or(u64::MAX);

    let mut tracked = Vec::new();
    let mut untracked = Vec::new();
    for image in input.images {
        if kept_by(image, &protected) || kept_by(image, &excluded) {
            continue;
        }
        match input.tracked.get(&image.id) {
            Some(entry) => {
                if !entry.holders.is_empty() {
                    continue;
                }
                let age = input.now.saturating_sub(entry.pulled_at);
                if age < minimum_age {
                    continue;
                }
                // Only the names deckhand's tasks used: other names on the image are someone
                // else's, and an image they hold is not deckhand's to remove.
                let tracked_names: Vec<String> = entry
                    .names
                    .iter()
                    .map(|name| normalize_image_name(name))
                    .collect();
                let names: Vec<String> = image
                    .repo_tags
                    .iter()
                    .chain(&image.repo_digests)
                    .filter(|docker_name| {
                        tracked_names.contains(&normalize_image_name(docker_name))
                    })
                    .cloned()
                    .collect();
                let names = if !names.is_empty() {
                    names
                } else if image.repo_tags.is_empty() && image.repo_digests.is_empty() {
                    vec![image.id.clone()]
                } else {
                    continue;
                };
                let idle = input.now.saturating_sub(entry.last_used_at);
                tracked.push((
                    entry.last_used_at,
                    Removal {
                        image_id: image.id.clone(),
                        names,
                        size: image.size,
                        tracked: true,
                        reason: format!(
                            "used by deckhand's tasks, none holds it; last used {} ago, first \
                             used {} ago (minimum age {})",
                            age_text(idle),
                            age_text(age),
                            age_text(minimum_age)
                        ),
                    },
                ));
            }
            None => {
                if !input.untracked_cleanup {
                    continue;
                }
                let created_millis = u64::try_from(image.created.max(0))
                    .unwrap_or(0)
                    .saturating_mul(1000);
                let age = input.now.saturating_sub(created_millis);
                if age < untracked_minimum_age {
                    continue;
                }
                let names = if image.repo_tags.is_empty() {
                    vec![image.id.clone()]
                } else {
                    image.repo_tags.clone()
                };
                untracked.push((
                    image.created,
                    Removal {
                        image_id: image.id.clone(),
                        names,
                        size: image.size,
                        tracked: false,
                        reason: format!(
                            "untracked (ECS_ENABLE_UNTRACKED_IMAGE_CLEANUP=true); created {} \
                             ago (minimum age {})",
                            age_text(age),
                            age_text(untracked_minimum_age)
                        ),
                    },
                ));
            }
        }
    }
    crate::sorting::sort_by(&mut tracked, |a, b| {
        (a.0, &a.1.image_id).cmp(&(b.0, &b.1.image_id))
    });
    crate::sorting::sort_by(&mut untracked, |a, b| {
        (a.0, &a.1.image_id).cmp(&(b.0, &b.1.image_id))
    });
    selection.removable = tracked
        .into_iter()
        .map(|(_, removal)| removal)
        .chain(untracked.into_iter().map(|(_, removal)| removal))
        .collect();
    selection
}

/// The share of a file system in use, 0–1, as `df` counts it: used blocks over used plus those
/// available to unprivileged users. `None` for an empty file system.
pub fn used_ratio(total_blocks: u64, free_blocks: u64, available_blocks: u64) -> Option<f64> {
    let used = total_blocks.saturating_sub(free_blocks);
    let usable = used.saturating_add(available_blocks);
    (usable > 0).then(|| used as f64 / usable as f64)
}

/// Whether usage `ratio` has reached `percent`.
pub fn at_or_above(ratio: f64, percent: u8) -> bool {
    ratio * 100.0 >= f64::from(percent)
}

#[cfg(test)]
mod tests;
