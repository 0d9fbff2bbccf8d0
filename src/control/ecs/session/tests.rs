use super::*;
use serde_json::json;

const CLUSTER: &str = "arn:aws:ecs:us-east-1:1:cluster/edge";
const INSTANCE: &str = "arn:aws:ecs:us-east-1:1:container-instance/edge/i";

fn frame(kind: &str, message: Value) -> SessionInput {
    SessionInput::Text(json!({"type": kind, "message": message}).to_string())
}

fn connected() -> (AcsSession, Instant) {
    let now = Instant::now();
    let mut session = AcsSession::new(CLUSTER, INSTANCE, 7);
    assert_eq!(session.handle(SessionInput::Connected, now), vec![]);
    (session, now)
}

fn task(arn: &str, status: &str) -> Value {
    json!({"arn": arn, "desiredStatus": status, "family": "web", "version": "1", "containers": [{"name": "web", "image": "nginx", "essential": true}]})
}

fn sent(effects: &[SessionEffect]) -> Vec<Value> {
    effects.iter().filter_map(|effect| match effect {
        SessionEffect::Send(text) => serde_json::from_str(text).ok(),
        _ => None,
    }).collect()
}

fn reconnect_after(effects: &[SessionEffect]) -> Option<Duration> {
    effects.iter().find_map(|effect| match effect {
        SessionEffect::Reconnect { after } => Some(*after),
        _ => None,
    })
}

#[test]
fn each_message_gets_its_answer() {
    // (input, frames sent, other effect kinds)
    let payload = json!({"messageId": "p1", "clusterArn": CLUSTER, "containerInstanceArn": INSTANCE, "seqNum": 4, "tasks": [task("arn:t1", "RUNNING")]});
    let table: Vec<(SessionInput, Vec<Value>, &str)> = vec![
        (frame("HeartbeatMessage", json!({"messageId": "h1", "healthy": true})), vec![json!({"type": "HeartbeatAckRequest", "message": {"messageId": "h1"}})], ""),
        (frame("PayloadMessage", payload), vec![], "Apply"),
        (frame("PayloadMessage", json!({"messageId": "p1", "tasks": []})), vec![], "Log"),
        (frame("PerformUpdateMessage", json!({"messageId": "u1", "clusterArn": CLUSTER, "containerInstanceArn": INSTANCE})),
            vec![json!({"type": "NackRequest", "message": {"cluster": CLUSTER, "containerInstance": INSTANCE, "messageId": "u1", "reason": "updates are disabled"}})], ""),
        (frame("StageUpdateMessage", json!({"messageId": "u2", "clusterArn": CLUSTER, "containerInstanceArn": INSTANCE})),
            vec![json!({"type": "NackRequest", "message": {"cluster": CLUSTER, "containerInstance": INSTANCE, "messageId": "u2", "reason": "updates are disabled"}})], ""),
        (frame("IAMRoleCredentialsMessage", json!({"messageId": "c1"})), vec![], "Log"),
        (frame("SomethingNew", json!({})), vec![], "Log"),
        (SessionInput::Text("{not json".into()), vec![], "Log"),
        (SessionInput::Text("[1]".into()), vec![], "Log"),
        (frame("TaskStopVerificationAck", json!({"messageId": "nobody", "stopTasks": [{"taskArn": "arn:t1"}]})), vec![], "Log"),
        (frame("CloseMessage", json!({"message": "bye"})), vec![], "Reconnect"),
        (frame("ErrorMessage", json!({"message": "boom"})), vec![], "Reconnect"),
        (SessionInput::Closed, vec![], "Reconnect"),
        (SessionInput::ConnectionError("reset".into()), vec![], "Reconnect"),
        (SessionInput::Applied { message_id: "unknown".into(), ok: true }, vec![], ""),
        (SessionInput::Tick, vec![], ""),
    ];
    for (input, frames, kind) in table {
        let (mut session, now) = connected();
        let label = format!("{input:?}");
        let effects = session.handle(input, now);
        assert_eq!(sent(&effects), frames, "{label}");
        let has = |name: &str| effects.iter().any(|effect| format!("{effect:?}").starts_with(name));
        if !kind.is_empty() {
            assert!(has(kind), "{label}: {effects:?}");
        }
        for other in ["Apply", "Reconnect", "StopTasks", "CompareManifest"] {
            if other != kind {
                assert!(!has(other), "{label}: {effects:?}");
            }
        }
    }
}

#[test]
fn a_payload_is_acked_only_once_durable_with_stops_first() {
    let (mut session, now) = connected();
    let effects = session.handle(frame("PayloadMessage", json!({"messageId": "p1", "clusterArn": CLUSTER, "containerInstanceArn": INSTANCE, "seqNum": 9,
        "tasks": [task("arn:start", "RUNNING"), json!({"arn": "arn:bad", "desiredStatus": "RUNNING", "containers": [{"name": "x"}]}), task("arn:stop", "STOPPED")]})), now);
    let [SessionEffect::Apply { message_id, seq_num, tasks }] = effects.as_slice() else { panic!("{effects:?}") };
    assert_eq!((message_id.as_str(), *seq_num), ("p1", Some(9)));
    let order: Vec<String> = tasks.iter().map(|task| match task { Ok(task) => task.arn.clone(), Err(error) => format!("err {}", error.arn.clone().unwrap_or_default()) }).collect();
    assert_eq!(order, ["err arn:bad", "arn:stop", "arn:start"]);
    assert!(matches!(&tasks[0], Err(error) if error.path.starts_with("tasks[1].")), "{tasks:?}");
    assert_eq!(session.highest_seq_num(), Some(9));
    assert_eq!(session.handle(SessionInput::Applied { message_id: "p1".into(), ok: false }, now).len(), 1);
    assert!(sent(&session.handle(SessionInput::Applied { message_id: "p1".into(), ok: true }, now)).is_empty(), "a refused apply is forgotten");
    session.handle(frame("PayloadMessage", json!({"messageId": "p2", "clusterArn": CLUSTER, "containerInstanceArn": INSTANCE, "seqNum": 3, "tasks": []})), now);
    assert_eq!(session.highest_seq_num(), Some(9), "the highest seen is kept");
    assert_eq!(sent(&session.handle(SessionInput::Applied { message_id: "p2".into(), ok: true }, now)),
        vec![json!({"type": "AckRequest", "message": {"cluster": CLUSTER, "containerInstance": INSTANCE, "messageId": "p2"}})]);
}

#[test]
fn a_manifest_leads_to_stop_verification_and_a_matching_ack_stops() {
    let (mut session, now) = connected();
    session.handle(frame("PayloadMessage", json!({"messageId": "p1", "clusterArn": CLUSTER, "containerInstanceArn": INSTANCE, "seqNum": 5, "tasks": []})), now);
    let stale = session.handle(frame("TaskManifestMessage", json!({"messageId": "m0", "clusterArn": CLUSTER, "containerInstanceArn": INSTANCE, "timeline": 5, "tasks": []})), now);
    assert!(matches!(stale.as_slice(), [SessionEffect::Log(..)]), "not newer: discarded {stale:?}");
    let effects = session.handle(frame("TaskManifestMessage", json!({"messageId": "m1", "clusterArn": CLUSTER, "containerInstanceArn": INSTANCE, "timeline": 6,
        "tasks": [{"taskArn": "arn:kept", "desiredStatus": "RUNNING"}]})), now);
    assert_eq!(sent(&effects), vec![json!({"type": "AckRequest", "message": {"cluster": CLUSTER, "containerInstance": INSTANCE, "messageId": "m1"}})]);
    assert!(effects.contains(&SessionEffect::CompareManifest { message_id: "m1".into(), manifest_arns: vec!["arn:kept".into()], timeline: 6 }));
    assert!(session.handle(SessionInput::LocalRunning { message_id: "m1".into(), arns: vec!["arn:kept".into()] }, now).is_empty(), "nothing missing: nothing sent");
    assert!(session.handle(SessionInput::LocalRunning { message_id: "m0".into(), arns: vec!["arn:gone".into()] }, now).is_empty(), "another manifest's answer");
    assert_eq!(sent(&session.handle(SessionInput::LocalRunning { message_id: "m1".into(), arns: vec!["arn:kept".into(), "arn:gone".into()] }, now)),
        vec![json!({"type": "TaskStopVerificationMessage", "message": {"messageId": "m1", "stopCandidates": [{"taskArn": "arn:gone", "desiredStatus": "STOPPED", "taskClusterArn": CLUSTER}]}})]);
    let wrong = session.handle(frame("TaskStopVerificationAck", json!({"messageId": "m0", "stopTasks": [{"taskArn": "arn:gone"}]})), now);
    assert!(matches!(wrong.as_slice(), [SessionEffect::Log(..)]));
    assert_eq!(session.handle(frame("TaskStopVerificationAck", json!({"messageId": "m1", "stopTasks": [{"taskArn": "arn:gone"}]})), now),
        vec![SessionEffect::StopTasks(vec!["arn:gone".into()])]);
    assert!(matches!(session.handle(frame("TaskStopVerificationAck", json!({"messageId": "m1", "stopTasks": []})), now).as_slice(), [SessionEffect::Log(..)]), "only once");
}

/// The ECS agent keeps only the tasks a manifest lists with `desiredStatus` RUNNING: one listed
/// STOPPED (or with no desired status) is a stop candidate like one left out.
#[test]
fn only_tasks_the_manifest_lists_as_running_are_kept() {
    let cases: &[(Value, &[&str], &[&str])] = &[
        (json!([{"taskArn": "arn:a", "desiredStatus": "RUNNING"}]), &["arn:a"], &["arn:b"]),
        (json!([{"taskArn": "arn:a", "desiredStatus": "STOPPED"}]), &[], &["arn:a", "arn:b"]),
        (json!([{"taskArn": "arn:a"}]), &[], &["arn:a", "arn:b"]),
        (json!([{"taskArn": "arn:a", "desiredStatus": "running"}]), &[], &["arn:a", "arn:b"]),
        (json!([{"taskArn": "arn:a", "desiredStatus": "RUNNING"}, {"taskArn": "arn:b", "desiredStatus": "STOPPED"}]), &["arn:a"], &["arn:b"]),
        (json!([{"desiredStatus": "RUNNING"}, 7, null]), &[], &["arn:a", "arn:b"]),
        (json!("not a list"), &[], &["arn:a", "arn:b"]),
    ];
    for (index, (tasks, kept, candidates)) in cases.iter().enumerate() {
        let (mut session, now) = connected();
        let id = format!("m{index}");
        let effects = session.handle(frame("TaskManifestMessage", json!({"messageId": id, "clusterArn": CLUSTER, "timeline": 10, "tasks": tasks})), now);
        let expected: Vec<String> = kept.iter().map(|arn| arn.to_string()).collect();
        assert!(effects.contains(&SessionEffect::CompareManifest { message_id: id.clone(), manifest_arns: expected, timeline: 10 }), "{tasks}: {effects:?}");
        let local = vec!["arn:a".to_string(), "arn:b".to_string()];
        let verification = sent(&session.handle(SessionInput::LocalRunning { message_id: id.clone(), arns: local }, now));
        let expected: Vec<Value> = candidates.iter().map(|arn| json!({"taskArn": arn, "desiredStatus": "STOPPED", "taskClusterArn": CLUSTER})).collect();
        assert_eq!(verification, vec![json!({"type": "TaskStopVerificationMessage", "message": {"messageId": id, "stopCandidates": expected}})], "{tasks}");
    }
    // Without a clusterArn in the manifest, the candidates carry no taskClusterArn.
    let (mut session, now) = connected();
    session.handle(frame("TaskManifestMessage", json!({"messageId": "m", "timeline": 3, "tasks": []})), now);
    assert_eq!(sent(&session.handle(SessionInput::LocalRunning { message_id: "m".into(), arns: vec!["arn:x".into()] }, now)),
        vec![json!({"type": "TaskStopVerificationMessage", "message": {"messageId": "m", "stopCandidates": [{"taskArn": "arn:x", "desiredStatus": "STOPPED"}]}})]);
}

#[test]
fn reconnects_back_off_and_reset_after_a_long_session() {
    let (mut session, start) = connected();
    let mut delays = Vec::new();
    let mut now = start;
    for _ in 0..20 {
        let effects = session.handle(SessionInput::ConnectionError("reset".into()), now);
        delays.push(reconnect_after(&effects).expect("reconnect"));
        now += Duration::from_secs(1);
        session.handle(SessionInput::Connected, now);
    }
    assert!(delays[0] >= BACKOFF_MIN && delays[0] < BACKOFF_MIN.mul_f64(1.2), "{delays:?}");
    assert!(delays[1] >= BACKOFF_MIN.mul_f64(1.5) && delays[1] < BACKOFF_MIN.mul_f64(1.5 * 1.2), "{delays:?}");
    assert!(delays.windows(2).all(|pair| pair[1] >= pair[0].mul_f64(0.8)), "{delays:?}");
    assert!(delays[19] >= BACKOFF_MAX && delays[19] <= BACKOFF_MAX.mul_f64(1.2), "{delays:?}");
    // Up for longer than the heartbeat timeout plus its jitter: the back-off starts over.
    now += HEARTBEAT_TIMEOUT + HEARTBEAT_JITTER;
    let effects = session.handle(SessionInput::ConnectionError("reset".into()), now);
    assert!(reconnect_after(&effects).expect("reconnect") < BACKOFF_MIN.mul_f64(1.2));
    // A clean close reconnects at once; a deregistered instance waits an hour.
    session.handle(SessionInput::Connected, now);
    assert_eq!(reconnect_after(&session.handle(SessionInput::Closed, now)), Some(Duration::ZERO));
    assert_eq!(reconnect_after(&session.handle(SessionInput::ConnectFailed("InactiveInstanceException: deregistered".into()), now)), Some(INACTIVE_INSTANCE_DELAY));
    session.handle(SessionInput::Connected, now);
    assert_eq!(reconnect_after(&session.handle(frame("ErrorMessage", json!({"message": "InactiveInstanceException: gone"})), now)), Some(INACTIVE_INSTANCE_DELAY));
    // The same seed gives the same delays.
    let mut again = AcsSession::new(CLUSTER, INSTANCE, 7);
    again.handle(SessionInput::Connected, start);
    assert_eq!(reconnect_after(&again.handle(SessionInput::ConnectionError("x".into()), start)), Some(delays[0]));
}

#[test]
fn an_idle_connection_is_ended_and_any_message_keeps_it() {
    let (mut session, start) = connected();
    let deadline = session.next_deadline().expect("a deadline while connected");
    assert!(deadline >= start + HEARTBEAT_TIMEOUT && deadline < start + HEARTBEAT_TIMEOUT + HEARTBEAT_JITTER);
    assert!(session.handle(SessionInput::Tick, deadline - Duration::from_millis(1)).is_empty());
    let later = deadline - Duration::from_millis(1);
    session.handle(frame("SomethingNew", json!({})), later);
    assert!(session.next_deadline().expect("deadline") > deadline, "activity moves the deadline");
    let effects = session.handle(SessionInput::Tick, later + HEARTBEAT_TIMEOUT + HEARTBEAT_JITTER);
    assert!(reconnect_after(&effects).is_some(), "{effects:?}");
    assert_eq!(session.next_deadline(), None, "no deadline while not connected");
}

#[test]
fn a_scripted_conversation() {
    let (mut session, now) = connected();
    let script: Vec<(SessionInput, Vec<&str>)> = vec![
        (frame("HeartbeatMessage", json!({"messageId": "h1"})), vec!["HeartbeatAckRequest"]),
        (frame("PayloadMessage", json!({"messageId": "p1", "clusterArn": CLUSTER, "containerInstanceArn": INSTANCE, "seqNum": 1, "tasks": [task("arn:a", "RUNNING")]})), vec![]),
        (SessionInput::Applied { message_id: "p1".into(), ok: true }, vec!["AckRequest"]),
        (frame("PayloadMessage", json!({"messageId": "p1", "clusterArn": CLUSTER, "containerInstanceArn": INSTANCE, "seqNum": 1, "tasks": [task("arn:a", "RUNNING")]})), vec![]),
        (SessionInput::Applied { message_id: "p1".into(), ok: true }, vec!["AckRequest"]),
        (frame("TaskManifestMessage", json!({"messageId": "m1", "clusterArn": CLUSTER, "containerInstanceArn": INSTANCE, "timeline": 2, "tasks": []})), vec!["AckRequest"]),
        (SessionInput::LocalRunning { message_id: "m1".into(), arns: vec!["arn:a".into()] }, vec!["TaskStopVerificationMessage"]),
        (frame("TaskStopVerificationAck", json!({"messageId": "m1", "stopTasks": [{"taskArn": "arn:a"}]})), vec![]),
        (frame("StageUpdateMessage", json!({"messageId": "u1"})), vec!["NackRequest"]),
        (frame("CloseMessage", json!({})), vec![]),
    ];
    for (input, kinds) in script {
        let label = format!("{input:?}");
        let effects = session.handle(input, now);
        let kinds_sent: Vec<String> = sent(&effects).iter().map(|frame| frame["type"].as_str().unwrap_or_default().to_string()).collect();
        assert_eq!(kinds_sent, kinds, "{label}");
    }
}

fn role_credentials(id: &str, key: &str) -> Value {
    json!({"credentialsId": id, "accessKeyId": format!("AKIA{key}"), "secretAccessKey": format!("SECRET{key}"), "sessionToken": format!("TOKEN{key}"), "expiration": format!("2026-12-05T0{key}:00:00Z"), "roleArn": "arn:aws:iam::1:role/r"})
}

#[test]
fn a_payloads_credentials_are_acknowledged_after_the_payload_each_with_its_id_and_expiration() {
    let (mut session, now) = connected();
    let mut with_both = task("arn:t1", "RUNNING");
    with_both["roleCredentials"] = role_credentials("app-1", "1");
    with_both["executionRoleCredentials"] = role_credentials("exec-1", "2");
    let mut stopping = task("arn:t2", "STOPPED");
    stopping["roleCredentials"] = role_credentials("app-2", "3");
    let mut broken = task("arn:t3", "RUNNING");
    broken["containers"] = json!("nope");
    broken["roleCredentials"] = role_credentials("app-3", "4");
    let payload = json!({"messageId": "p1", "clusterArn": CLUSTER, "containerInstanceArn": INSTANCE, "tasks": [with_both, stopping, broken]});
    let effects = session.handle(frame("PayloadMessage", payload), now);
    let Some(SessionEffect::Apply { tasks, .. }) = effects.first() else { panic!("{effects:?}") };
    assert_eq!(tasks.iter().flatten().filter_map(|t| t.credentials.task_role.as_ref()).count(), 2);
    assert!(!format!("{effects:?}").contains("SECRET"), "Debug shows no secret: {effects:?}");
    assert!(sent(&effects).is_empty(), "nothing before the tasks are durable");
    let acks = sent(&session.handle(SessionInput::Applied { message_id: "p1".into(), ok: true }, now));
    let ack = |id: &str, expiration: &str| json!({"type": "IAMRoleCredentialsAckRequest", "message": {"messageId": "p1", "credentialsId": id, "expiration": expiration}});
    assert_eq!(acks, vec![
        json!({"type": "AckRequest", "message": {"cluster": CLUSTER, "containerInstance": INSTANCE, "messageId": "p1"}}),
        // Stops come first, as the tasks were sorted; the task that failed to map has none.
        ack("app-2", "2026-12-05T03:00:00Z"),
        ack("app-1", "2026-12-05T01:00:00Z"),
        ack("exec-1", "2026-12-05T02:00:00Z"),
    ]);
    // A payload that could not be made durable acknowledges nothing, credentials included.
    let mut again = task("arn:t4", "RUNNING");
    again["roleCredentials"] = role_credentials("app-4", "5");
    session.handle(frame("PayloadMessage", json!({"messageId": "p2", "clusterArn": CLUSTER, "containerInstanceArn": INSTANCE, "tasks": [again]})), now);
    assert!(sent(&session.handle(SessionInput::Applied { message_id: "p2".into(), ok: false }, now)).is_empty());
}

#[test]
fn a_credentials_message_is_checked_set_and_acknowledged_once_set() {
    let (mut session, now) = connected();
    let message = |role_type: &str| json!({"messageId": "c1", "taskArn": "arn:t1", "taskClusterArn": CLUSTER, "roleType": role_type, "roleCredentials": role_credentials("app-1", "7")});
    for (role_type, role) in [("TaskApplication", RoleType::TaskApplication), ("TaskExecution", RoleType::TaskExecution)] {
        let effects = session.handle(frame("IAMRoleCredentialsMessage", message(role_type)), now);
        assert!(!format!("{effects:?}").contains("SECRET"), "{effects:?}");
        let [SessionEffect::SetCredentials { message_id, task_arn, role: set_role, credentials }] = effects.as_slice() else { panic!("{effects:?}") };
        assert_eq!((message_id.as_str(), task_arn.as_str(), *set_role), ("c1", "arn:t1", role));
        assert_eq!((credentials.credentials_id.as_str(), credentials.credentials.secret_access_key.as_str()), ("app-1", "SECRET7"));
    }
    let set = |ok: bool| SessionInput::CredentialsSet { message_id: "c1".into(), credentials_id: "app-1".into(), expiration: "2026-12-05T07:00:00Z".into(), ok };
    assert_eq!(sent(&session.handle(set(true), now)), vec![json!({"type": "IAMRoleCredentialsAckRequest", "message": {"messageId": "c1", "credentialsId": "app-1", "expiration": "2026-12-05T07:00:00Z"}})]);
    // Its task is not here: the ECS agent sends no ack.
    assert!(session.handle(set(false), now).is_empty());
    // (message, what the log says) — the ECS agent's checks; none is acknowledged or set.
    let without = |key: &str| { let mut m = message("TaskApplication"); m.as_object_mut().map(|m| m.remove(key)); m };
    let mut no_id = message("TaskApplication");
    no_id["roleCredentials"]["credentialsId"] = json!("");
    let table = [
        (without("messageId"), "Message ID is not set"),
        (without("taskArn"), "taskArn is not set"),
        (without("roleCredentials"), "roleCredentials is not set"),
        (no_id, "credentialsId: required"),
        (message("TaskRole"), "roleType \"TaskRole\" is invalid"),
        (without("roleType"), "roleType \"\" is invalid"),
    ];
    for (input, why) in table {
        let effects = session.handle(frame("IAMRoleCredentialsMessage", input.clone()), now);
        match effects.as_slice() {
            [SessionEffect::Log(LogLevel::Error, line)] => {
                assert!(line.contains(why), "{input}: {line}");
                assert!(!line.contains("SECRET") && !line.contains("AKIA"), "{line}");
            }
            other => panic!("{input}: {other:?}"),
        }
    }
}
