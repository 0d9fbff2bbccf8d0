//! Tests of `deckhand top`'s pure part: rates from two readings, sorting, the frame at 80×24
//! and wider, plain and coloured, and the JSON.

use super::*;

fn container(name: &str, cpu_seconds: f64, memory: u64) -> ContainerStats {
    ContainerStats {
        name: name.into(),
        docker_id: Some(format!("{name}-id")),
        known_status: "RUNNING".into(),
        started_at: Some(1_000_000),
        cpu_seconds: Some(cpu_seconds),
        memory_used_bytes: Some(memory),
        memory_limit_bytes: Some(64 * 1024 * 1024),
        network_rx_bytes: Some(1500),
        network_tx_bytes: Some(700),
        block_read_bytes: Some(4096),
        block_write_bytes: Some(0),
        ..ContainerStats::default()
    }
}

fn reading(time: u64, cpu: [f64; 3], host_busy: f64) -> StatsReading {
    StatsReading {
        time,
        host: HostStats {
            cpus: Some(2),
            cpu_busy_seconds: Some(host_busy),
            cpu_total_seconds: Some(time as f64 / 1000.0 * 2.0),
            memory_total_bytes: Some(8 << 30),
            memory_available_bytes: Some(6 << 30),
        },
        agent: AgentStats {
            resident_bytes: Some(4 << 20),
            cpu_seconds: Some(1.0),
        },
        tasks: vec![
            TaskStats {
                id: "aaaa0000000000000000000000000000".into(),
                family: "idle".into(),
                revision: 1,
                known_status: "RUNNING".into(),
                network_mode: Some("bridge".into()),
                health_status: Some("HEALTHY".into()),
                containers: vec![ContainerStats {
                    health_status: Some("HEALTHY".into()),
                    restart_count: 2,
                    ..container("sleeper", cpu[0], 1 << 20)
                }],
            },
            TaskStats {
                id: "bbbb0000000000000000000000000000".into(),
                family: "busy".into(),
                revision: 7,
                known_status: "RUNNING".into(),
                network_mode: Some("awsvpc".into()),
                health_status: None,
                containers: vec![
                    container("spinner", cpu[1], 2 << 20),
                    container("helper", cpu[2], 3 << 20),
                ],
            },
            TaskStats {
                id: "cccc0000000000000000000000000000".into(),
                family: "gone".into(),
                revision: 1,
                known_status: "STOPPED".into(),
                ..TaskStats::default()
            },
        ],
    }
}

#[test]
fn rates_come_from_two_readings_and_the_busiest_task_is_first() {
    let first = reading(1_010_000, [1.0, 10.0, 5.0], 100.0);
    let second = reading(1_012_000, [1.02, 11.9, 5.2], 102.0);
    let view = TopView::new(Some(&first), &second);
    let names: Vec<&str> = view.rows.iter().map(|row| row.name.as_str()).collect();
    assert_eq!(names, ["busy:7", "spinner", "helper", "idle:1", "sleeper"]);
    let cpu = |index: usize| view.rows[index].cpu_percent.unwrap();
    assert!((cpu(1) - 95.0).abs() < 1e-6, "{}", cpu(1));
    assert!((cpu(2) - 10.0).abs() < 1e-6);
    assert!(
        (cpu(0) - 105.0).abs() < 1e-6,
        "a task is the sum of its containers"
    );
    assert!((cpu(3) - 1.0).abs() < 1e-6);
    // The awsvpc task's containers share one namespace: counted once.
    assert_eq!(view.rows[0].network_rx_bytes, Some(1500));
    assert_eq!(view.rows[0].memory_used_bytes, Some(5 << 20));
    assert_eq!(view.rows[3].restarts, 2);
    assert_eq!(view.rows[1].uptime_millis, Some(12_000));
    let totals = &view.totals;
    assert_eq!(totals.tasks_shown, 2, "a STOPPED task is not shown");
    assert_eq!(totals.containers_running, 3);
    assert!((totals.host_cpu_percent.unwrap() - 50.0).abs() < 1e-6);
    assert_eq!(totals.host_memory_used_bytes, Some(2 << 30));
    assert_eq!(totals.agent_cpu_percent, Some(0.0));

    // One reading alone has no rates; a container that restarted (new id) neither.
    let alone = TopView::new(None, &second);
    assert!(alone.rows.iter().all(|row| row.cpu_percent.is_none()));
    let mut restarted = second.clone();
    restarted.tasks[1].containers[0].docker_id = Some("new".into());
    let view = TopView::new(Some(&first), &restarted);
    let spinner = view.rows.iter().find(|row| row.name == "spinner").unwrap();
    assert_eq!(spinner.cpu_percent, None);
}

#[test]
fn sizes_fit_in_four_characters() {
    let table = [
        (0, "0B"),
        (999, "999B"),
        (1000, "1.0K"),
        (1536, "1.5K"),
        (10 * 1024, "10K"),
        (1023 * 1024, "1.0M"),
        (123 << 20, "123M"),
        (8 << 30, "8.0G"),
        (u64::MAX, "16E"),
    ];
    for (bytes, expected) in table {
        let text = compact_bytes(bytes);
        if bytes < u64::MAX {
            assert_eq!(text, expected, "{bytes}");
        }
        assert!(text.chars().count() <= 4, "{bytes}: {text}");
    }
}

#[test]
fn a_frame_fits_80_by_24_and_cuts_what_does_not_fit() {
    let first = reading(1_010_000, [1.0, 10.0, 5.0], 100.0);
    let second = reading(1_012_000, [1.02, 11.9, 5.2], 102.0);
    let view = TopView::new(Some(&first), &second);
    let lines = render(&view, Some(80), Some(24), Style::Plain, true, None);
    for line in &lines {
        assert!(line.chars().count() <= 80, "{line:?}");
        assert!(!line.contains('\x1b'), "plain has no escapes: {line:?}");
    }
    assert!(lines[0].starts_with("deckhand top"), "{lines:?}");
    assert!(lines[0].contains("q quits"));
    assert!(lines[1].contains("2 CPUs 50.0%"), "{}", lines[1]);
    assert!(lines[1].contains("RSS 4.0M"), "{}", lines[1]);
    assert!(lines[2].contains("tasks: 2 running of 2"), "{}", lines[2]);
    let heading = lines
        .iter()
        .position(|line| line.starts_with("NAME"))
        .unwrap();
    let words: Vec<&str> = lines[heading + 2].split_whitespace().collect();
    assert_eq!(
        words,
        [
            "spinner",
            "RUNNING",
            "-",
            "0",
            "95.0",
            "2.0M/64M",
            "1.5K/700B",
            "4.0K/0B",
            "12s"
        ]
    );
    let sleeper: Vec<&str> = lines[heading + 5].split_whitespace().collect();
    assert_eq!(sleeper[..4], ["sleeper", "RUNNING", "HEALTHY", "2"]);

    // Too few rows: the last one says how many are left out.
    let short = render(&view, Some(80), Some(8), Style::Plain, true, None);
    assert_eq!(short.len(), 8, "{short:?}");
    assert!(short[7].contains("more rows"), "{short:?}");

    // A long name is cut at 80 columns, kept whole without a terminal.
    let mut long = second.clone();
    long.tasks[1].containers[0].name = "a-container-with-a-very-long-name\x1b[31m".into();
    let view = TopView::new(Some(&first), &long);
    let lines = render(&view, Some(80), Some(24), Style::Plain, false, None);
    assert!(
        lines.iter().any(|line| line.contains("  a-container…")),
        "{lines:?}"
    );
    assert!(lines.iter().all(|line| !line.contains('\x1b')), "{lines:?}");
    let whole = render(&view, None, None, Style::Plain, false, None);
    assert!(whole
        .iter()
        .any(|line| line.contains("a-container-with-a-very-long-name?[31m")));
    assert!(!whole[0].contains("q quits"));
}

#[test]
fn colours_only_on_a_terminal_without_no_color() {
    assert!(colour_allowed(true, None, Some("xterm")));
    assert!(colour_allowed(true, Some(""), None));
    assert!(!colour_allowed(true, Some("1"), Some("xterm")));
    assert!(!colour_allowed(false, None, Some("xterm")));
    assert!(!colour_allowed(true, None, Some("dumb")));

    let first = reading(1_010_000, [1.0, 10.0, 5.0], 100.0);
    let second = reading(1_012_000, [1.02, 11.9, 5.2], 102.0);
    let view = TopView::new(Some(&first), &second);
    let lines = render(&view, Some(100), Some(24), Style::Colour, true, None);
    assert!(lines.iter().any(|line| line.contains("\x1b[7mNAME")));
    assert!(lines.iter().any(|line| line.contains("\x1b[32mHEALTHY")));
    let visible = |line: &str| {
        let mut text = String::new();
        let mut in_escape = false;
        for character in line.chars() {
            match (in_escape, character) {
                (false, '\x1b') => in_escape = true,
                (true, 'm') => in_escape = false,
                (false, character) => text.push(character),
                _ => {}
            }
        }
        text
    };
    for line in &lines {
        assert!(visible(line).chars().count() <= 100, "{line:?}");
    }
    // The problem of the latest reading is shown, not fatal.
    let lines = render(
        &view,
        Some(80),
        Some(24),
        Style::Plain,
        true,
        Some("agent away"),
    );
    assert!(lines.iter().any(|line| line == "! agent away"), "{lines:?}");
}

#[test]
fn the_json_nests_containers_under_their_task() {
    let first = reading(1_010_000, [1.0, 10.0, 5.0], 100.0);
    let second = reading(1_012_000, [1.02, 11.9, 5.2], 102.0);
    let json = TopView::new(Some(&first), &second).to_json();
    assert_eq!(json["host"]["cpuPercent"], 50.0);
    assert_eq!(json["agent"]["residentBytes"], 4 << 20);
    let tasks = json["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[0]["id"], "bbbb0000000000000000000000000000");
    assert_eq!(tasks[0]["name"], "busy:7");
    assert_eq!(tasks[0]["cpuPercent"], 105.0);
    assert_eq!(tasks[0]["containers"][0]["name"], "spinner");
    assert_eq!(tasks[0]["containers"][0]["cpuPercent"], 95.0);
    assert_eq!(tasks[0]["containers"][0]["uptimeSeconds"], 12);
    assert_eq!(tasks[1]["healthStatus"], "HEALTHY");
    assert_eq!(tasks[1]["restartCount"], 2);
    // A reading from an agent that sends less: absent values are null, not an error.
    let sparse: StatsReading = serde_json::from_value(
        json!({"time": 5, "tasks": [{"id": "x", "knownStatus": "RUNNING",
            "containers": [{"name": "c", "knownStatus": "RUNNING", "cpuSeconds": null}]}]}),
    )
    .unwrap();
    let view = TopView::new(None, &sparse);
    assert_eq!(view.rows.len(), 2);
    assert_eq!(
        view.to_json()["tasks"][0]["containers"][0]["cpuPercent"],
        Value::Null
    );
}
