//! `pi-forge test`: golden cases of Presets, run as a real process against temp workspaces.

use std::process::Output;

mod support;

use serde_json::{json, Value};
use support::Dirs;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const LEAN: &str = r#"{
  "schemaVersion": 2,
  "type": "pi-forge.prompt-stack",
  "id": "lean",
  "mode": "replace",
  "parameters": {"who": "LEAN"},
  "tools": {"allow": ["read", "grep"]},
  "items": [
    {"id": "sys", "kind": "block", "role": "system", "content": "You are {{ parameters.who }}.\nLast: {{ runtime.lastUserMessage }}"},
    {"id": "history", "kind": "slot", "slot": "chat-history"}
  ]
}
"#;

const PASSING: &str = r#"{
  "schemaVersion": 1,
  "prompt": "hi",
  "expect": {"systemPrompt": "You are LEAN.\nLast: hi", "tools": ["read", "grep"]}
}
"#;

const FAILING: &str = r#"{
  "schemaVersion": 1,
  "prompt": "hi",
  "parameters": {"who": "TERSE"},
  "expect": {"systemPrompt": "You are LEAN.\nLast: hi"},
  "budgets": {"mustContain": ["TERSE"]}
}
"#;

const OVER_BUDGET: &str = r#"{
  "schemaVersion": 1,
  "prompt": "hi",
  "expect": {},
  "budgets": {"maxSystemTokens": 3, "mustNotContain": ["LEAN"]}
}
"#;

const MALFORMED: &str = r#"{"schemaVersion": 1, "expect": {"tools": "read"}}"#;

fn project() -> Dirs {
    let ws = Dirs::new();
    ws.write(".pi/forge/prompt-stacks/lean.json", LEAN);
    ws.write(".pi/forge/tests/lean/a-passing.json", PASSING);
    ws.write(".pi/forge/tests/lean/b-failing.json", FAILING);
    ws.write(".pi/forge/tests/lean/c-over-budget.json", OVER_BUDGET);
    ws.write(".pi/forge/tests/lean/d-malformed.json", MALFORMED);
    ws.write(".pi/forge/tests/ghost/one.json", PASSING);
    ws
}

const REPORT: &str = "\
ERROR ghost/one: no Preset ghost in this workspace (run `pi-forge list stacks`; a case for a missing Preset is an error, not a skip)
PASS lean/a-passing
FAIL lean/b-failing
  systemPrompt: the system prompt differs from the expected one
    @@ -1,2 +1,2 @@
    -You are LEAN.
    +You are TERSE.
     Last: hi
FAIL lean/c-over-budget
  maxSystemTokens: the system prompt is 6 tokens, over the budget of 3 (approximate (UTF-16 code units / 4))
  mustNotContain: \"LEAN\" is in the compiled request
ERROR lean/d-malformed: expect.tools: must be an array of strings

5 cases: 1 passed, 2 failed, 2 errors
";

#[test]
fn test_reports_passing_failing_over_budget_and_malformed_cases_and_exits_one() {
    let ws = project();
    let out = ws.run(&["test"]);
    assert_eq!(stdout(&out), REPORT);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

#[test]
fn test_json_and_junit_reports() {
    let ws = project();
    let junit = ws.project().join("report.xml");
    let junit_arg = junit.display().to_string();
    let out = ws.run(&["test", "lean", "--json", "--junit", &junit_arg]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let tokens = |system: u64, total: u64| json!({"system": system, "total": total, "count": "approximate (UTF-16 code units / 4)"});
    assert_eq!(
        report,
        json!({
            "cases": [
                {"preset": "lean", "case": "a-passing", "file": ".pi/forge/tests/lean/a-passing.json",
                 "status": "pass", "error": null, "failures": [], "tokens": tokens(6, 6)},
                {"preset": "lean", "case": "b-failing", "file": ".pi/forge/tests/lean/b-failing.json",
                 "status": "fail", "error": null, "failures": [
                    {"part": "systemPrompt", "summary": "the system prompt differs from the expected one",
                     "diff": "@@ -1,2 +1,2 @@\n-You are LEAN.\n+You are TERSE.\n Last: hi\n"}
                 ], "tokens": tokens(6, 6)},
                {"preset": "lean", "case": "c-over-budget", "file": ".pi/forge/tests/lean/c-over-budget.json",
                 "status": "fail", "error": null, "failures": [
                    {"part": "maxSystemTokens", "summary": "the system prompt is 6 tokens, over the budget of 3 (approximate (UTF-16 code units / 4))", "diff": null},
                    {"part": "mustNotContain", "summary": "\"LEAN\" is in the compiled request", "diff": null}
                 ], "tokens": tokens(6, 6)},
                {"preset": "lean", "case": "d-malformed", "file": ".pi/forge/tests/lean/d-malformed.json",
                 "status": "error", "error": "expect.tools: must be an array of strings", "failures": [], "tokens": null}
            ],
            "summary": {"cases": 4, "passed": 1, "failed": 2, "errors": 1, "updated": 0}
        })
    );
    assert_eq!(
        std::fs::read_to_string(&junit).expect("the JUnit report is written"),
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>
<testsuites name=\"pi-forge test\" tests=\"4\" failures=\"2\" errors=\"1\">
  <testsuite name=\"pi-forge golden cases\" tests=\"4\" failures=\"2\" errors=\"1\">
    <testcase classname=\"lean\" name=\"a-passing\" file=\".pi/forge/tests/lean/a-passing.json\"/>
    <testcase classname=\"lean\" name=\"b-failing\" file=\".pi/forge/tests/lean/b-failing.json\">
      <failure message=\"systemPrompt: the system prompt differs from the expected one\">@@ -1,2 +1,2 @@
-You are LEAN.
+You are TERSE.
 Last: hi
</failure>
    </testcase>
    <testcase classname=\"lean\" name=\"c-over-budget\" file=\".pi/forge/tests/lean/c-over-budget.json\">
      <failure message=\"maxSystemTokens: the system prompt is 6 tokens, over the budget of 3 (approximate (UTF-16 code units / 4)); mustNotContain: &quot;LEAN&quot; is in the compiled request\"></failure>
    </testcase>
    <testcase classname=\"lean\" name=\"d-malformed\" file=\".pi/forge/tests/lean/d-malformed.json\">
      <error message=\"expect.tools: must be an array of strings\"/>
    </testcase>
  </testsuite>
</testsuites>
"
    );
}

#[test]
fn update_rewrites_only_the_expected_parts_and_budgets_still_fail() {
    let ws = project();
    let out = ws.run(&["test", "lean", "--update"]);
    assert_eq!(
        stdout(&out),
        "\
PASS lean/a-passing
UPDATED lean/b-failing
FAIL lean/c-over-budget
  maxSystemTokens: the system prompt is 6 tokens, over the budget of 3 (approximate (UTF-16 code units / 4))
  mustNotContain: \"LEAN\" is in the compiled request
ERROR lean/d-malformed: expect.tools: must be an array of strings

4 cases: 1 passed, 1 failed, 1 error, 1 updated
"
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let read = |name: &str| {
        std::fs::read_to_string(
            ws.project()
                .join(format!(".pi/forge/tests/lean/{name}.json")),
        )
        .expect("case file")
    };
    // The passing case is untouched, byte for byte; the malformed one too.
    assert_eq!(read("a-passing"), PASSING);
    assert_eq!(read("d-malformed"), MALFORMED);
    // Only `expect.systemPrompt` changed (the only part it named); budgets stay.
    let failing: Value = serde_json::from_str(&read("b-failing")).expect("JSON");
    assert_eq!(
        failing,
        json!({"schemaVersion": 1, "prompt": "hi", "parameters": {"who": "TERSE"},
               "expect": {"systemPrompt": "You are TERSE.\nLast: hi"},
               "budgets": {"mustContain": ["TERSE"]}})
    );
    // An empty `expect` gets all three parts; the budgets are never rewritten.
    let over: Value = serde_json::from_str(&read("c-over-budget")).expect("JSON");
    assert_eq!(
        over,
        json!({"schemaVersion": 1, "prompt": "hi",
               "expect": {"systemPrompt": "You are LEAN.\nLast: hi", "messages": [], "tools": ["read", "grep"]},
               "budgets": {"maxSystemTokens": 3, "mustNotContain": ["LEAN"]}})
    );
    // Run again: the updated case passes as it is.
    let again = ws.run(&["test", "lean"]);
    assert!(
        stdout(&again).contains("PASS lean/b-failing\n"),
        "{}",
        stdout(&again)
    );
}

#[test]
fn no_cases_and_unknown_filters() {
    let ws = Dirs::new();
    ws.write(".pi/forge/prompt-stacks/lean.json", LEAN);
    let out = ws.run(&["test"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stdout(&out),
        "No golden cases: .pi/forge/tests/ does not exist (a case is .pi/forge/tests/<preset-id>/<case>.json; see docs/file-formats.md).\n"
    );
    let out = ws.run(&["test", "lean"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "pi-forge: no cases for Preset lean: .pi/forge/tests/lean/ does not exist (a case is .pi/forge/tests/<preset-id>/<case>.json)\n"
    );
}
