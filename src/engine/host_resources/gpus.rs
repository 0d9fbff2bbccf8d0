//! The host's GPUs as a host resource: which task holds which GPU id. Plain data with no lock,
//! like the rest of the ledger. A task is assigned the first free ids in the host's order when
//! it is admitted; at restore it takes back the ids its checkpoint names, so its containers keep
//! the GPUs they were created with; it gives them all back when it becomes known STOPPED.

use std::collections::BTreeMap;
use std::fmt;

/// Why a task's GPUs can never be met on this host: it asks for more than the host has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooFewGpus {
    pub needs: usize,
    pub host_has: usize,
}

impl fmt::Display for TooFewGpus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "needs {} {}, the host has {}",
            self.needs,
            gpus_word(self.needs),
            self.host_has
        )
    }
}

fn gpus_word(count: usize) -> &'static str {
    if count == 1 {
        "GPU"
    } else {
        "GPUs"
    }
}

/// The host's GPU ids and their holders.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuPool {
    /// The host's ids, in discovery order (the order they are handed out in).
    host: Vec<String>,
    /// Id → the task that holds it.
    holders: BTreeMap<String, String>,
}

impl GpuPool {
    pub fn new(host: Vec<String>) -> GpuPool {
        GpuPool {
            host,
            holders: BTreeMap::new(),
        }
    }

    /// The host's ids.
    pub fn host(&self) -> &[String] {
        &self.host
    }

    /// `None` when `needs` GPUs can be met on this host at all.
    pub fn never_fits(&self, needs: usize) -> Option<TooFewGpus> {
        (needs > self.host.len()).then_some(TooFewGpus {
            needs,
            host_has: self.host.len(),
        })
    }

    /// How many of the host's GPUs nobody holds.
    pub fn free(&self) -> usize {
        self.host
            .iter()
            .filter(|id| !self.holders.contains_key(*id))
            .count()
    }

    /// The ids `task_id` holds, in the host's order (ids it took back at restore that the host
    /// no longer lists come last).
    pub fn held_by(&self, task_id: &str) -> Vec<String> {
        let mut held: Vec<String> = self
            .host
            .iter()
            .filter(|id| {
                self.holders
                    .get(*id)
                    .is_some_and(|holder| holder == task_id)
            })
            .cloned()
            .collect();
        for (id, holder) in &self.holders {
            if holder == task_id && !held.contains(id) {
                held.push(id.clone());
            }
        }
        held
    }

    /// Gives `task_id` `count` GPUs: the first free ids in the host's order, fewer when fewer
    /// are free (the caller admits a task only when enough are). A task that holds some already
    /// keeps them and gets only what it lacks. Returns what it holds then.
    pub fn assign(&mut self, task_id: &str, count: usize) -> Vec<String> {
        let mut missing = count.saturating_sub(self.held_by(task_id).len());
        for id in &self.host {
            if missing == 0 {
                break;
            }
            if !self.holders.contains_key(id) {
                self.holders.insert(id.clone(), task_id.to_string());
                missing -= 1;
            }
        }
        self.held_by(task_id)
    }

    /// Restore: `task_id` takes back the ids its checkpoint names, whether or not the host still
    /// lists them or another task restored before it claims them too (its containers were
    /// created with them; the first claim is kept and the clash returned, for a warning).
    pub fn take_back(&mut self, task_id: &str, ids: &[String]) -> Vec<(String, String)> {
        let mut clashes = Vec::new();
        for id in ids {
            match self.holders.get(id) {
                Some(holder) if holder != task_id => clashes.push((id.clone(), holder.clone())),
                Some(_) => {}
                None => {
                    self.holders.insert(id.clone(), task_id.to_string());
                }
            }
        }
        clashes
    }

    /// `task_id` gives back every id it holds; whether it held any.
    pub fn release(&mut self, task_id: &str) -> bool {
        let before = self.holders.len();
        self.holders.retain(|_, holder| holder != task_id);
        self.holders.len() != before
    }
}

/// The ids each container of a task gets from `assigned`, the ids the task holds. `wanted` is
/// each container's GPU count and the ids it has now (its checkpoint's). A container that has
/// its count of ids, all among `assigned` and none kept by an earlier container, keeps them:
/// it may exist in Docker with them. The others take the first ids nobody kept, in order
/// (fewer when too few are left, which admission never lets happen).
pub fn hand_out(wanted: &[(usize, &[String])], assigned: &[String]) -> Vec<Vec<String>> {
    let mut taken: Vec<&String> = Vec::new();
    let mut handed: Vec<Option<Vec<String>>> = wanted
        .iter()
        .map(|(count, current)| {
            let keeps = current.len() == *count
                && current
                    .iter()
                    .all(|id| assigned.contains(id) && !taken.contains(&id));
            if keeps {
                taken.extend(current.iter());
                Some(current.to_vec())
            } else {
                None
            }
        })
        .collect();
    let mut free = assigned.iter().filter(|id| !taken.contains(id));
    for (slot, (count, _)) in handed.iter_mut().zip(wanted) {
        if slot.is_none() {
            *slot = Some(free.by_ref().take(*count).cloned().collect());
        }
    }
    handed.into_iter().map(Option::unwrap_or_default).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn table_of_what_can_never_fit() {
        let cases: &[(&[&str], usize, Option<&str>)] = &[
            (&[], 0, None),
            (&[], 1, Some("needs 1 GPU, the host has 0")),
            (&[], 2, Some("needs 2 GPUs, the host has 0")),
            (&["GPU-a"], 1, None),
            (&["GPU-a"], 3, Some("needs 3 GPUs, the host has 1")),
            (&["GPU-a", "GPU-b"], 2, None),
        ];
        for (host, needs, want) in cases {
            let pool = GpuPool::new(ids(host));
            assert_eq!(
                pool.never_fits(*needs)
                    .map(|reason| reason.to_string())
                    .as_deref(),
                *want,
                "{host:?} {needs}"
            );
        }
    }

    #[test]
    fn tasks_get_the_first_free_ids_and_give_them_back_at_release() {
        let mut pool = GpuPool::new(ids(&["GPU-a", "GPU-b", "GPU-c"]));
        assert_eq!(pool.assign("t1", 2), ids(&["GPU-a", "GPU-b"]));
        assert_eq!(pool.free(), 1);
        assert_eq!(pool.assign("t2", 1), ids(&["GPU-c"]));
        assert_eq!(pool.free(), 0);
        // Nothing free: a third task gets nothing (it is not admitted).
        assert_eq!(pool.assign("t3", 1), Vec::<String>::new());
        assert!(pool.release("t1"));
        assert!(!pool.release("t1"), "release is idempotent");
        assert_eq!(pool.free(), 2);
        assert_eq!(pool.assign("t4", 2), ids(&["GPU-a", "GPU-b"]));
        // Assigning again keeps what a task holds.
        assert_eq!(pool.assign("t4", 2), ids(&["GPU-a", "GPU-b"]));
        assert_eq!(pool.held_by("t2"), ids(&["GPU-c"]));
    }

    #[test]
    fn table_of_ids_handed_out_to_containers() {
        let none: Vec<String> = Vec::new();
        let ab = ids(&["GPU-a", "GPU-b"]);
        let c = ids(&["GPU-c"]);
        let b = ids(&["GPU-b"]);
        // (each container's count and current ids, the task's ids, what each gets)
        type Case<'a> = (Vec<(usize, &'a [String])>, Vec<String>, Vec<Vec<String>>);
        let cases: Vec<Case> = vec![
            (vec![], ids(&["GPU-a"]), vec![]),
            (vec![(0, &none)], none.clone(), vec![none.clone()]),
            // Fresh containers take the ids in order.
            (
                vec![(2, &none), (0, &none), (1, &none)],
                ids(&["GPU-a", "GPU-b", "GPU-c"]),
                vec![ab.clone(), none.clone(), c.clone()],
            ),
            // Saved ids among the task's are kept, even out of order.
            (
                vec![(2, &none), (1, &b)],
                ids(&["GPU-a", "GPU-b", "GPU-c"]),
                vec![ids(&["GPU-a", "GPU-c"]), b.clone()],
            ),
            // Saved ids the task no longer holds are replaced.
            (vec![(1, &c)], ids(&["GPU-a"]), vec![ids(&["GPU-a"])]),
            // Two containers naming the same id: the first keeps it.
            (
                vec![(1, &b), (1, &b)],
                ab.clone(),
                vec![b.clone(), ids(&["GPU-a"])],
            ),
            // Too few: the last gets what is left.
            (
                vec![(1, &none), (2, &none)],
                ab.clone(),
                vec![ids(&["GPU-a"]), b.clone()],
            ),
        ];
        for (wanted, assigned, want) in cases {
            assert_eq!(
                hand_out(&wanted, &assigned),
                want,
                "{wanted:?} from {assigned:?}"
            );
        }
    }

    #[test]
    fn restore_takes_back_the_saved_ids_and_reports_clashes() {
        let mut pool = GpuPool::new(ids(&["GPU-a", "GPU-b", "GPU-c"]));
        assert!(pool.take_back("t1", &ids(&["GPU-c"])).is_empty());
        // An id the host no longer lists is still held (the container has it).
        assert!(pool.take_back("t2", &ids(&["GPU-gone"])).is_empty());
        assert_eq!(
            pool.take_back("t3", &ids(&["GPU-c", "GPU-a"])),
            vec![("GPU-c".to_string(), "t1".to_string())]
        );
        assert_eq!(pool.held_by("t1"), ids(&["GPU-c"]));
        assert_eq!(pool.held_by("t2"), ids(&["GPU-gone"]));
        assert_eq!(pool.held_by("t3"), ids(&["GPU-a"]));
        // What is left goes to the next task.
        assert_eq!(pool.assign("t4", 1), ids(&["GPU-b"]));
        assert!(pool.release("t2"));
        assert_eq!(pool.free(), 0);
    }
}
