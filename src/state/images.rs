//! `images.json`: the images deckhand's tasks used (docs/ENGINE.md §15) — each image's id, the
//! names tasks used it by, when it was first and last used, and which tasks hold it (until
//! their containers are cleaned up). Image cleanup reads it to choose what to remove, oldest use
//! first; it is written with the store's one atomic writer after every change, and loaded at
//! start like `agent.json` (a newer schema stops start-up, a damaged file is quarantined and
//! the record starts empty: images then count as untracked, never as removable).

use crate::task::Millis;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The whole file's body: one entry per image id, sorted by id.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ImagesRecord {
    #[serde(default)]
    pub images: Vec<TrackedImage>,
}

/// One image deckhand's tasks used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrackedImage {
    /// Docker's image id (`sha256:…`).
    pub image_id: String,
    /// The names tasks used it by, as their definitions wrote them.
    #[serde(default)]
    pub names: BTreeSet<String>,
    /// When a task of this agent first used it (ECS's `PulledAt`): the minimum age counts from
    /// here.
    pub pulled_at: Millis,
    /// When a task last started or stopped using it (ECS's `LastUsedAt`): the oldest goes first.
    pub last_used_at: Millis,
    /// Ids of the tasks that hold it: used by a task whose containers are not cleaned up yet.
    #[serde(default)]
    pub holders: BTreeSet<String>,
}

impl ImagesRecord {
    /// The entry of `image_id`, if tracked.
    pub fn get(&self, image_id: &str) -> Option<&TrackedImage> {
        self.images.iter().find(|image| image.image_id == image_id)
    }

    /// Records that task `task_id` uses image `image_id` by `name` at `now`. A name that moved
    /// to this id is taken off the entry it was on before (Docker moves a tag on a new pull).
    /// Returns whether anything durable changed (a new entry, name or holder).
    pub fn record_use(&mut self, image_id: &str, name: &str, task_id: &str, now: Millis) -> bool {
        let mut changed = false;
        for other in self.images.iter_mut().filter(|i| i.image_id != image_id) {
            changed |= other.names.remove(name);
        }
        match self.images.iter_mut().find(|i| i.image_id == image_id) {
            Some(image) => {
                changed |= image.names.insert(name.to_string());
                changed |= image.holders.insert(task_id.to_string());
                image.last_used_at = image.last_used_at.max(now);
            }
            None => {
                self.images.push(TrackedImage {
                    image_id: image_id.to_string(),
                    names: BTreeSet::from([name.to_string()]),
                    pulled_at: now,
                    last_used_at: now,
                    holders: BTreeSet::from([task_id.to_string()]),
                });
                crate::sorting::sort_by(&mut self.images, |a, b| a.image_id.cmp(&b.image_id));
                changed = true;
            }
        }
        changed
    }

    /// Task `task_id` is cleaned up: it holds nothing any more, and each image it held was last
    /// used now. Returns whether anything changed.
    pub fn release_task(&mut self, task_id: &str, now: Millis) -> bool {
        let mut changed = false;
        for image in &mut self.images {
            if image.holders.remove(task_id) {
                image.last_used_at = image.last_used_at.max(now);
                changed = true;
            }
        }
        changed
    }

    /// Drops every holder that is not one of `live_tasks` (a task cleaned up just before a
    /// crash, whose release was not written). Returns whether anything changed.
    pub fn keep_holders(&mut self, live_tasks: &BTreeSet<String>) -> bool {
        let mut changed = false;
        for image in &mut self.images {
            let before = image.holders.len();
            image.holders.retain(|task| live_tasks.contains(task));
            changed |= image.holders.len() != before;
        }
        changed
    }

    /// Takes `name` off image `image_id` (it was removed from Docker); the entry goes with its
    /// last name. Returns whether anything changed.
    pub fn remove_name(&mut self, image_id: &str, name: &str) -> bool {
        let Some(position) = self.images.iter().position(|i| i.image_id == image_id) else {
            return false;
        };
        let changed = self.images[position].names.remove(name);
        if self.images[position].names.is_empty() {
            self.images.remove(position);
            return true;
        }
        changed
    }

    /// Forgets image `image_id` entirely (gone from Docker, or no longer deckhand's).
    pub fn forget(&mut self, image_id: &str) -> bool {
        let before = self.images.len();
        self.images.retain(|image| image.image_id != image_id);
        self.images.len() != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uses_and_releases_move_holders_names_and_times() {
        let mut record = ImagesRecord::default();
        assert!(record.record_use("sha256:a", "app:v1", "t1", 100));
        assert!(record.record_use("sha256:a", "app:v1", "t2", 200));
        assert!(
            !record.record_use("sha256:a", "app:v1", "t2", 300),
            "nothing durable"
        );
        let image = record.get("sha256:a").expect("tracked");
        assert_eq!(image.pulled_at, 100);
        assert_eq!(image.last_used_at, 300);
        assert_eq!(image.holders.len(), 2);
        // The tag moves to a new id: the old entry loses the name.
        assert!(record.record_use("sha256:b", "app:v1", "t3", 400));
        assert!(record.get("sha256:a").expect("kept").names.is_empty());
        assert!(record.release_task("t1", 500));
        assert!(!record.release_task("t1", 600));
        assert_eq!(record.get("sha256:a").expect("kept").last_used_at, 500);
        assert!(record.keep_holders(&BTreeSet::from(["t3".to_string()])));
        assert!(record.get("sha256:a").expect("kept").holders.is_empty());
        assert!(record.remove_name("sha256:b", "app:v1"));
        assert!(record.get("sha256:b").is_none(), "gone with its last name");
        assert!(record.forget("sha256:a"));
        assert!(record.images.is_empty());
    }

    #[test]
    fn the_record_survives_a_reopen_and_a_damaged_file_is_quarantined() {
        use crate::state::scratch::ScratchDir;
        use crate::state::StateStore;
        let dir = ScratchDir::new("deckhand-images-json");
        let (store, loaded) = StateStore::open(&dir.path).expect("opens");
        assert!(loaded.images.images.is_empty());
        let mut record = ImagesRecord::default();
        record.record_use("sha256:a", "app:v1", "t1", 100);
        store.save_images(&record).expect("written");
        assert_eq!(store.images(), record);
        drop(store);
        let (_store, loaded) = StateStore::open(&dir.path).expect("reopens");
        assert_eq!(loaded.images, record);

        std::fs::write(
            dir.path.join("images.json"),
            b"{\"schema\": 1, \"images\": 7}",
        )
        .expect("damage");
        let (store, loaded) = StateStore::open(&dir.path).expect("opens past the damage");
        assert!(loaded.images.images.is_empty());
        assert!(store.images().images.is_empty());
        assert_eq!(loaded.quarantined.len(), 1, "{:?}", loaded.quarantined);
        assert!(loaded.quarantined[0].original.ends_with("images.json"));

        std::fs::write(
            dir.path.join("images.json"),
            b"{\"schema\": 9, \"images\": {}}",
        )
        .expect("future");
        let refused = StateStore::open(&dir.path).expect_err("a newer schema stops start-up");
        assert!(refused.is_future_schema(), "{refused}");
    }
}
