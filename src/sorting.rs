//! One stable sort for every ordered listing in deckhand (tasks by creation, ports, images,
//! headers, names, …). Each `slice::sort_by` over a new element type or closure compiles a copy
//! of the standard library's sort, about 4 KB each; these functions sort a list of indices
//! instead, through one non-generic comparison, then move the items into that order, so the
//! binary holds the sort once. The order is exactly `slice::sort_by`'s: stable, equal items keep
//! their order.
//!
//! Maps and sets are built here too: `collect` into a `BTreeMap` or `BTreeSet` (or a JSON
//! object, a map underneath) sorts its items first, with a copy of the sort for every iterator
//! it is given; inserting them one by one gives the same map (a later value for a key replaces
//! an earlier one, as `collect` keeps the last) with the map's own code only.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

/// The map of `pairs`, the last value of a key kept (as `collect` builds it).
pub fn map_of<K: Ord, V>(pairs: impl IntoIterator<Item = (K, V)>) -> BTreeMap<K, V> {
    let mut map = BTreeMap::new();
    map.extend(pairs);
    map
}

/// The set of `items` (as `collect` builds it).
pub fn set_of<T: Ord>(items: impl IntoIterator<Item = T>) -> BTreeSet<T> {
    let mut set = BTreeSet::new();
    set.extend(items);
    set
}

/// The JSON object of `pairs`, the last value of a key kept (as `collect` builds it).
pub fn json_object_of(
    pairs: impl IntoIterator<Item = (String, serde_json::Value)>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut object = serde_json::Map::new();
    object.extend(pairs);
    object
}

/// `items` sorted by `compare`, equal items in their order (as `slice::sort_by`).
pub fn sort_by<T>(items: &mut [T], compare: impl Fn(&T, &T) -> Ordering) {
    let order = stable_order(items.len(), &|left, right| {
        compare(&items[left], &items[right])
    });
    permute(&order, &mut |left, right| items.swap(left, right));
}

/// `items` sorted by `key`, equal keys in their order (as `slice::sort_by_key`).
pub fn sort_by_key<T, K: Ord>(items: &mut [T], key: impl Fn(&T) -> K) {
    sort_by(items, |left, right| key(left).cmp(&key(right)));
}

/// `items` in ascending order (as `slice::sort`; equal items cannot be told apart by `Ord`).
pub fn sort<T: Ord>(items: &mut [T]) {
    sort_by(items, T::cmp);
}

/// The indices `0..len` ordered by `compare` of the items they stand for, stable.
#[inline(never)]
fn stable_order(len: usize, compare: &dyn Fn(usize, usize) -> Ordering) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    order.sort_by(|&left, &right| compare(left, right));
    order
}

/// Rearranges a list by `swap` so that position `i` holds the item that was at `order[i]`,
/// following each cycle of the permutation once.
#[inline(never)]
fn permute(order: &[usize], swap: &mut dyn FnMut(usize, usize)) {
    let mut placed = vec![false; order.len()];
    for start in 0..order.len() {
        let mut position = start;
        while !placed[position] {
            placed[position] = true;
            let source = order[position];
            if source == start {
                break;
            }
            swap(position, source);
            position = source;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_as_the_standard_stable_sort_does() {
        // (key, original position): equal keys must keep their positions' order.
        let lists: Vec<Vec<u8>> = vec![
            vec![],
            vec![7],
            vec![2, 1],
            vec![1, 2, 3, 4],
            vec![4, 3, 2, 1],
            vec![3, 1, 3, 2, 1, 3, 0, 2],
            vec![5, 5, 5, 5],
            vec![9, 0, 8, 1, 7, 2, 6, 3, 5, 4, 4, 5, 3, 6, 2, 7, 1, 8, 0, 9],
        ];
        for list in lists {
            let tagged: Vec<(u8, usize)> = list.iter().copied().zip(0..).collect();
            let mut expected = tagged.clone();
            expected.sort_by_key(|item| item.0);
            let mut sorted = tagged.clone();
            sort_by(&mut sorted, |left, right| left.0.cmp(&right.0));
            assert_eq!(sorted, expected, "{list:?}");
            let mut by_key = tagged.clone();
            sort_by_key(&mut by_key, |item| std::cmp::Reverse(item.0));
            let mut expected_reverse = tagged.clone();
            expected_reverse.sort_by_key(|item| std::cmp::Reverse(item.0));
            assert_eq!(by_key, expected_reverse, "{list:?}");
            let mut plain = list.clone();
            sort(&mut plain);
            let mut expected_plain = list.clone();
            expected_plain.sort();
            assert_eq!(plain, expected_plain);
        }
    }

    #[test]
    fn maps_keep_the_last_value_of_a_key_as_collect_does() {
        let pairs = [("b", 1), ("a", 2), ("b", 3), ("c", 4), ("a", 5)];
        let collected: BTreeMap<&str, i32> = pairs.iter().copied().collect();
        assert_eq!(map_of(pairs.iter().copied()), collected);
        let json_pairs = pairs
            .iter()
            .map(|(key, value)| (key.to_string(), serde_json::json!(value)));
        let collected: serde_json::Map<String, serde_json::Value> = json_pairs.clone().collect();
        assert_eq!(json_object_of(json_pairs), collected);
        let collected: BTreeSet<&str> = pairs.iter().map(|(key, _)| *key).collect();
        assert_eq!(set_of(pairs.iter().map(|(key, _)| *key)), collected);
    }

    #[test]
    fn every_permutation_of_five_is_sorted() {
        let mut items = [0u8, 1, 2, 3, 4];
        // Heap's algorithm over all 120 orders.
        let mut counters = [0usize; 5];
        let mut index = 0;
        let check = |items: &[u8; 5]| {
            let mut sorted = *items;
            sort(&mut sorted);
            assert_eq!(sorted, [0, 1, 2, 3, 4], "{items:?}");
        };
        check(&items);
        while index < 5 {
            if counters[index] < index {
                if index % 2 == 0 {
                    items.swap(0, index);
                } else {
                    items.swap(counters[index], index);
                }
                check(&items);
                counters[index] += 1;
                index = 0;
            } else {
                counters[index] = 0;
                index += 1;
            }
        }
    }
}
