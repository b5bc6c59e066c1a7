//! A delegated child whose provider request differs from the approved plan is stopped before
//! the request leaves: real Pi 1.6.0 as the child, a fake model that records every request it
//! receives. `PI_FORGE_TEST_CHILD_DRIFT` (pi-forge's test hook, see server/src/agent.rs) makes
//! the child differ from the plan: one more message, one more tool, another model.
//!
//! One test in this binary: it sets the variable for the pi-forge processes it starts.

mod pi;
mod support;

use pi::delegation::{CHILD, REVIEWER, SETTINGS};
use pi::Workspace;
use serde_json::Value;

#[test]
fn an_altered_request_is_stopped_before_the_model_sees_it_and_recorded_as_payload_mismatch() {
    let cases = [
        (
            "extra-message",
            "payload_mismatch: request 1: the first request has 1 messages after the approved 3; the child was stopped before the request was sent.",
        ),
        (
            "extra-tool",
            "payload_mismatch: request 1: the request declared the tools [read, grep, find], the plan approved [grep, read]; the child was stopped before the request was sent.",
        ),
        (
            "model=fake/fake-2",
            "payload_mismatch: request 1: the model is \"fake-2\", the plan approved \"fake-1\"; the child was stopped before the request was sent.",
        ),
    ];
    for (drift, error) in cases {
        let ws = Workspace::new(&[
            (".pi/forge/prompt-stacks/child.json", CHILD),
            (".pi/forge/agent-profiles/reviewer.json", REVIEWER),
            (".pi/forge/subagents.json", SETTINGS),
        ]);
        std::env::set_var("PI_FORGE_TEST_CHILD_DRIFT", drift);
        let out = ws.forge_input(
            &[
                "agent",
                "run",
                "reviewer",
                "Summarize src/",
                "--approve-in-terminal",
            ],
            "a\n",
        );
        std::env::remove_var("PI_FORGE_TEST_CHILD_DRIFT");
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(1), "{drift}: {stderr}");
        // The fake model never received the request.
        assert_eq!(ws.model.bodies().len(), 0, "{drift}: {stderr}");
        let runs: Value =
            serde_json::from_slice(&ws.forge(&["agent", "runs", "--json"]).stdout).unwrap();
        assert_eq!(runs[0]["status"], "payload_mismatch", "{drift}");
        assert_eq!(runs[0]["error"], error, "{drift}");
        assert_eq!(runs[0]["payloadSha256"], serde_json::json!([]), "{drift}");
        // The refused request is kept for review; nothing of the child is left running.
        let folder = ws
            .project()
            .join(".pi/forge/runs")
            .join(runs[0]["runId"].as_str().unwrap().replace(':', "-"));
        assert!(folder.join("refused-request.json").is_file(), "{drift}");
        assert!(!folder.join("child.json").exists(), "{drift}");
    }
}
