//! The sequential wait group (docs/ENGINE.md §9): orders stops before later starts.
//!
//! Every accepted stop registers its sequence number here (`add`) on the thread that accepted the
//! command, before the next command is accepted, so a start in the same batch cannot slip past it.
//! A task started with sequence number *m* asks for a readiness receiver (`ready(m)`) that fires
//! once no stop numbered ≤ *m* is still outstanding. The receiver sits in the task's `select!`, so
//! a waiting task still answers a stop. A task calls `done` only for a number it was handed as
//! registered, so it can never release another task's entry.

use crossbeam_channel::{bounded, Receiver, Sender};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Shared between the engine (which registers stops) and the managed tasks (which finish them
/// and wait on them).
#[derive(Debug, Default)]
pub struct SequentialWaitGroup {
    inner: Mutex<WaitGroupState>,
}

#[derive(Debug, Default)]
struct WaitGroupState {
    /// Outstanding count per sequence number; a key is removed when its count reaches zero.
    counts: BTreeMap<u64, i64>,
    /// Waiters: fire once no key ≤ the number remains.
    waiters: Vec<(u64, Sender<()>)>,
}

impl WaitGroupState {
    fn is_clear_up_to(&self, sequence: u64) -> bool {
        self.counts.range(..=sequence).next().is_none()
    }

    /// Fires (and forgets) every waiter whose numbers are all finished.
    fn wake_ready_waiters(&mut self) {
        let counts = &self.counts;
        self.waiters.retain(|(sequence, sender)| {
            if counts.range(..=*sequence).next().is_none() {
                // The receiver may be gone (the task stopped waiting); nothing to do then.
                let _ = sender.try_send(());
                false
            } else {
                true
            }
        });
    }
}

impl SequentialWaitGroup {
    pub fn new() -> SequentialWaitGroup {
        SequentialWaitGroup::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, WaitGroupState> {
        // A panic while holding this lock leaves only plain integers behind; keep going.
        self.inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// `count[sequence] += delta`; at ≤ 0 the number is removed and waiters are woken.
    pub fn add(&self, sequence: u64, delta: i64) {
        let mut state = self.state();
        let count = state.counts.entry(sequence).or_insert(0);
        *count += delta;
        if *count <= 0 {
            state.counts.remove(&sequence);
            state.wake_ready_waiters();
        }
    }

    /// Finishes one registration of `sequence`. An unknown number is a no-op.
    pub fn done(&self, sequence: u64) {
        let mut state = self.state();
        let Some(count) = state.counts.get_mut(&sequence) else {
            return;
        };
        *count -= 1;
        if *count <= 0 {
            state.counts.remove(&sequence);
            state.wake_ready_waiters();
        }
    }

    /// A receiver that yields `()` once no number ≤ `sequence` is outstanding (at once if none is).
    pub fn ready(&self, sequence: u64) -> Receiver<()> {
        let (sender, receiver) = bounded(1);
        let mut state = self.state();
        if state.is_clear_up_to(sequence) {
            sender
                .try_send(())
                .expect("a fresh channel of capacity one has room for one message");
        } else {
            state.waiters.push((sequence, sender));
        }
        receiver
    }

    /// Whether any number ≤ `sequence` is outstanding.
    pub fn is_blocked(&self, sequence: u64) -> bool {
        !self.state().is_clear_up_to(sequence)
    }

    /// Outstanding numbers, lowest first (for diagnostics and tests).
    pub fn outstanding(&self) -> Vec<u64> {
        self.state().counts.keys().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fired(receiver: &Receiver<()>) -> bool {
        receiver.try_recv().is_ok()
    }

    #[test]
    fn ready_fires_at_once_when_nothing_earlier_is_outstanding() {
        let group = SequentialWaitGroup::new();
        group.add(9, 1);
        assert!(fired(&group.ready(8)));
        assert!(fired(&group.ready(0)));
    }

    #[test]
    fn wait_is_inclusive_of_its_own_number() {
        let group = SequentialWaitGroup::new();
        group.add(5, 1);
        let waiter = group.ready(5);
        assert!(!fired(&waiter));
        group.done(5);
        assert!(fired(&waiter));
    }

    #[test]
    fn waiter_needs_every_earlier_stop_done() {
        let group = SequentialWaitGroup::new();
        group.add(2, 1);
        group.add(4, 1);
        group.add(7, 1);
        let waiter = group.ready(5);
        group.done(2);
        assert!(!fired(&waiter), "stop 4 is still outstanding");
        group.done(7);
        assert!(
            !fired(&waiter),
            "stop 7 is later than 5 and does not matter"
        );
        group.done(4);
        assert!(fired(&waiter));
        assert_eq!(group.outstanding(), Vec::<u64>::new());
    }

    #[test]
    fn done_of_an_unknown_number_is_a_no_op() {
        let group = SequentialWaitGroup::new();
        group.add(3, 1);
        group.done(99);
        group.done(2);
        assert_eq!(group.outstanding(), vec![3]);
        assert!(group.is_blocked(3));
    }

    #[test]
    fn count_above_one_needs_as_many_dones() {
        let group = SequentialWaitGroup::new();
        group.add(3, 2);
        let waiter = group.ready(10);
        group.done(3);
        assert!(!fired(&waiter));
        group.done(3);
        assert!(fired(&waiter));
        // A third done does not go negative or resurrect the number.
        group.done(3);
        assert!(!group.is_blocked(10));
    }

    #[test]
    fn add_with_negative_delta_removes_and_wakes() {
        let group = SequentialWaitGroup::new();
        group.add(1, 1);
        let waiter = group.ready(1);
        group.add(1, -1);
        assert!(fired(&waiter));
        assert!(group.outstanding().is_empty());
    }

    #[test]
    fn dropped_waiter_does_not_disturb_others() {
        let group = SequentialWaitGroup::new();
        group.add(1, 1);
        let dropped = group.ready(1);
        drop(dropped);
        let kept = group.ready(2);
        group.done(1);
        assert!(fired(&kept));
    }

    #[test]
    fn table_of_waits() {
        // (outstanding numbers, waited number, ready?)
        let table: &[(&[u64], u64, bool)] = &[
            (&[], 1, true),
            (&[1], 1, false),
            (&[2], 1, true),
            (&[1, 2], 3, false),
            (&[5], 4, true),
            (&[5], 6, false),
        ];
        for (outstanding, waited, ready) in table {
            let group = SequentialWaitGroup::new();
            for number in *outstanding {
                group.add(*number, 1);
            }
            assert_eq!(
                fired(&group.ready(*waited)),
                *ready,
                "outstanding {outstanding:?}, wait({waited})"
            );
        }
    }
}
