//! Table tests of the selection: ages, holders, protected (`tasks.d`, live tasks), excluded,
//! untracked on and off, order, and the disk arithmetic.

use super::*;
use crate::state::TrackedImage;
use std::collections::BTreeSet;

const HOUR: u64 = 3_600_000;
const NOW: Millis = 10_000 * HOUR;

fn listed(id: &str, tags: &[&str], created_hours_ago: u64) -> ImageSummary {
    ImageSummary {
        id: id.to_string(),
        repo_tags: tags.iter().map(|tag| tag.to_string()).collect(),
        repo_digests: Vec::new(),
        size: 1000,
        created: ((NOW - created_hours_ago * HOUR) / 1000) as i64,
    }
}

fn tracked(
    id: &str,
    name: &str,
    first_used_hours_ago: u64,
    last_used_hours_ago: u64,
    holders: &[&str],
) -> TrackedImage {
    TrackedImage {
        image_id: id.to_string(),
        names: BTreeSet::from([name.to_string()]),
        pulled_at: NOW - first_used_hours_ago * HOUR,
        last_used_at: NOW - last_used_hours_ago * HOUR,
        holders: holders.iter().map(|h| h.to_string()).collect(),
    }
}

struct Case {
    name: &'static str,
    images: Vec<ImageSummary>,
    tracked: Vec<TrackedImage>,
    protected: &'static [&'static str],
    excluded: &'static [&'static str],
    untracked_cleanup: bool,
    /// Removal order, as the first name of each.
    expected: &'static [&'static str],
}

fn case(name: &'static str) -> Case {
    Case {
        name,
        images: Vec::new(),
        tracked: Vec::new(),
        protected: &[],
        excluded: &[],
        untracked_cleanup: false,
        expected: &[],
    }
}

#[test]
fn selection_table() {
    let cases = vec![
        Case {
            images: vec![listed("sha256:a", &["app:v1"], 500)],
            tracked: vec![tracked("sha256:a", "app:v1", 2, 2, &[])],
            expected: &["app:v1"],
            ..case("a tracked image nobody holds, old enough, goes")
        },
        Case {
            images: vec![listed("sha256:a", &["app:v1"], 500)],
            tracked: vec![tracked("sha256:a", "app:v1", 2, 2, &["task-1"])],
            ..case("a held image stays")
        },
        Case {
            images: vec![listed("sha256:a", &["app:v1"], 500)],
            tracked: vec![tracked("sha256:a", "app:v1", 0, 0, &[])],
            ..case("a tracked image younger than the minimum age stays")
        },
        Case {
            images: vec![listed("sha256:a", &["busybox:latest"], 500)],
            tracked: vec![tracked("sha256:a", "busybox", 2, 2, &[])],
            protected: &["docker.io/library/busybox"],
            ..case("a name tasks.d declares stays, however it is written")
        },
        Case {
            images: vec![listed("sha256:a", &["app:v1", "app:stable"], 500)],
            tracked: vec![tracked("sha256:a", "app:v1", 2, 2, &[])],
            protected: &["app:stable"],
            ..case("another name of the same image protects it")
        },
        Case {
            images: vec![listed("sha256:a", &["app:v1"], 500)],
            tracked: vec![tracked("sha256:a", "app:v1", 2, 2, &[])],
            protected: &["sha256:a"],
            ..case("a live task's image id protects it")
        },
        Case {
            images: vec![
                listed("sha256:a", &["app:v1"], 500),
                listed("sha256:u", &["other:1"], 500),
            ],
            tracked: vec![tracked("sha256:a", "app:v1", 2, 2, &[])],
            excluded: &["app:v1", "other:1"],
            untracked_cleanup: true,
            ..case("the exclude list keeps tracked and untracked images")
        },
        Case {
            images: vec![listed("sha256:u", &["other:1"], 500)],
            ..case("untracked images stay when untracked cleanup is off")
        },
        Case {
            images: vec![
                listed("sha256:s", &["deckhand/sandbox:1"], 500),
                listed("sha256:t", &["deckhand/sandbox:0"], 500),
            ],
            tracked: vec![tracked("sha256:s", "deckhand/sandbox:1", 2, 2, &[])],
            untracked_cleanup: true,
            expected: &["deckhand/sandbox:0"],
            ..case(
                "the awsvpc sandbox's image stays, as ECS keeps its pause image; an older tag goes",
            )
        },
        Case {
            images: vec![
                listed("sha256:u1", &["young:1"], 0),
                listed("sha256:u2", &["old:1"], 5),
                listed("sha256:u3", &[], 9),
            ],
            untracked_cleanup: true,
            expected: &["sha256:u3", "old:1"],
            ..case("untracked cleanup on: old enough ones go, oldest first; an untagged one by id")
        },
        Case {
            images: vec![
                listed("sha256:a", &["a:1"], 500),
                listed("sha256:b", &["b:1"], 500),
                listed("sha256:c", &["c:1"], 500),
                listed("sha256:u", &["u:1"], 900),
            ],
            tracked: vec![
                tracked("sha256:a", "a:1", 10, 1, &[]),
                tracked("sha256:b", "b:1", 10, 5, &[]),
                tracked("sha256:c", "c:1", 10, 3, &[]),
            ],
            untracked_cleanup: true,
            expected: &["b:1", "c:1", "a:1", "u:1"],
            ..case("tracked first, oldest last use first, then untracked")
        },
        Case {
            images: vec![listed("sha256:a", &["app:v1", "someone/else:2"], 500)],
            tracked: vec![tracked("sha256:a", "app:v1", 2, 2, &[])],
            expected: &["app:v1"],
            ..case("only the names deckhand's tasks used are removed")
        },
        Case {
            images: vec![listed("sha256:a", &["someone/else:2"], 500)],
            tracked: vec![tracked("sha256:a", "app:v1", 2, 2, &[])],
            ..case("a tracked image held only by names deckhand did not use stays")
        },
        Case {
            images: vec![listed("sha256:a", &[], 500)],
            tracked: vec![tracked("sha256:a", "app:v1", 2, 2, &[])],
            expected: &["sha256:a"],
            ..case("a tracked image left with no name goes by id")
        },
    ];
    for case in cases {
        let record = ImagesRecord {
            images: case.tracked.clone(),
        };
        let to_strings = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let protected = to_strings(case.protected);
        let excluded = to_strings(case.excluded);
        let selection = select_removable(&SelectionInput {
            now: NOW,
            images: &case.images,
            tracked: &record,
            protected_names: &protected,
            excluded_names: &excluded,
            minimum_age: Duration::from_secs(3600),
            untracked_cleanup: case.untracked_cleanup,
            untracked_minimum_age: Duration::from_secs(3600),
        });
        let order: Vec<&str> = selection
            .removable
            .iter()
            .map(|removal| removal.names[0].as_str())
            .collect();
        assert_eq!(order, case.expected, "{}", case.name);
        assert!(selection.gone.is_empty(), "{}", case.name);
    }
}

#[test]
fn tracked_images_docker_no_longer_has_are_reported_gone() {
    let record = ImagesRecord {
        images: vec![tracked("sha256:gone", "app:v1", 2, 2, &[])],
    };
    let selection = select_removable(&SelectionInput {
        now: NOW,
        images: &[],
        tracked: &record,
        protected_names: &[],
        excluded_names: &[],
        minimum_age: Duration::ZERO,
        untracked_cleanup: false,
        untracked_minimum_age: Duration::ZERO,
    });
    assert_eq!(selection.gone, vec!["sha256:gone".to_string()]);
}

#[test]
fn names_normalize_as_docker_lists_them() {
    for (written, listed) in [
        ("busybox", "busybox:latest"),
        ("library/busybox:1.36", "busybox:1.36"),
        ("docker.io/library/busybox", "busybox:latest"),
        ("docker.io/team/app:2", "team/app:2"),
        ("registry.local:5000/app", "registry.local:5000/app:latest"),
        ("registry.local:5000/app:v1", "registry.local:5000/app:v1"),
        ("app@sha256:abc", "app@sha256:abc"),
        ("sha256:abc", "sha256:abc"),
    ] {
        assert_eq!(normalize_image_name(written), listed, "{written}");
    }
}

#[test]
fn disk_usage_counts_as_df_does_and_marks_compare_in_percent() {
    assert_eq!(used_ratio(100, 20, 10), Some(80.0 / 90.0));
    assert_eq!(used_ratio(0, 0, 0), None);
    assert!(at_or_above(0.85, 85));
    assert!(!at_or_above(0.849, 85));
    assert!(at_or_above(0.01, 1));
    assert!(at_or_above(0.0, 0), "a low mark of 0 is never undercut");
}
