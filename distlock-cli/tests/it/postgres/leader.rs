//! `run --leader` and `leader` on PostgreSQL (the lease table): three candidates, each kill
//! of the leading `distlock` hands the leadership to a survivor within the lease and a second
//! with a strictly larger term (run_leader.rs's scenario), and `leader` names the value.

use std::time::Duration;

use super::server;
use crate::common::{distlock, json, stdout};
use crate::run_leader::{candidate_on, end_all, three_candidates_fail_over, wait_starts};

#[test]
fn three_candidates_terms_rise_and_a_killed_leader_is_replaced() {
    let server = server();
    three_candidates_fail_over(&["--url", &server.url()], "cron:pg", true);
}

#[test]
fn leader_names_the_candidate_that_leads() {
    let server = server();
    let urls = [server.url()];
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("starts");
    let name = "cron:shown";
    let nobody = json(&distlock(&urls, &["--json", "leader", name]));
    assert_eq!(nobody["leader"], serde_json::Value::Null);

    let target = ["--url", urls[0].as_str()];
    let mut candidates = vec![candidate_on(&target, name, &file, &["--value", "pod-a"])];
    let start = wait_starts(&file, 1, Duration::from_secs(15))[0];
    let doc = json(&distlock(&urls, &["--json", "leader", name]));
    assert_eq!(doc["leader"]["term"], start.term, "{doc:#}");
    assert_eq!(doc["leader"]["value"], "pod-a", "{doc:#}");
    assert!(doc["leader"]["since_ms"].as_u64().is_some(), "{doc:#}");
    let shown = stdout(&distlock(&urls, &["leader", name]));
    assert!(
        shown.contains(&start.term.to_string()) && shown.contains("pod-a"),
        "{shown}"
    );
    // `ls` shows it as the election it is.
    let listed = json(&distlock(&urls, &["--json", "ls"]));
    let election = crate::common::find(&listed, name, "election");
    assert_eq!(election["leader"]["value"], "pod-a");
    end_all(&mut candidates);
}
