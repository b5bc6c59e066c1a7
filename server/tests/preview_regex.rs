//! Issue 19 through the preview API of a real `pi-forge ui`: regex rules with counted quantifiers
//! match (the prefilter once read their digits as required text), `\u{…}` without the `u` flag
//! is annex B's identity escape, tool-pair repair runs after a role filter that removed nothing,
//! and templates print objects in JavaScript's property order.

mod support;

use std::time::Duration;

use reqwest::blocking::Client;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use support::{Dirs, Server};

const STACK_DIR: &str = ".pi/forge/prompt-stacks";

/// The issue's example, saved on disk.
const QUANTIFIERS: &str = r#"{
  "schemaVersion": 2,
  "type": "pi-forge.prompt-stack",
  "id": "quantifiers",
  "name": "Counted quantifiers",
  "mode": "replace",
  "regex": {
    "schemaVersion": 1,
    "rules": [
      { "id": "a2", "stage": "compiled", "targets": ["system"], "pattern": "a{2,}", "flags": "g", "replace": "[A]" },
      { "id": "d4", "stage": "compiled", "targets": ["system"], "pattern": "\\d{4}", "flags": "g", "replace": "[D]" }
    ]
  },
  "items": [
    { "kind": "block", "id": "text", "role": "system", "content": "aaa ab ab 1234 x" },
    { "kind": "slot", "id": "history", "slot": "chat-history" }
  ]
}
"#;

struct Fixture {
    _dirs: Dirs,
    server: Server,
    client: Client,
}

impl Fixture {
    fn new() -> Fixture {
        let dirs = Dirs::new();
        dirs.write(&format!("{STACK_DIR}/quantifiers.json"), QUANTIFIERS);
        let server = Server::start(&dirs, &[], &[]);
        let client = Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        Fixture {
            _dirs: dirs,
            server,
            client,
        }
    }

    fn preview(&self, id: &str, body: &Value) -> Value {
        let response = self
            .client
            .request(
                Method::POST,
                self.server.url(&format!("/api/stacks/{id}/preview")),
            )
            .header("x-pi-forge-token", &self.server.token)
            .json(body)
            .send()
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        response.json().unwrap()
    }
}

fn system_prompt(body: &Value) -> &str {
    body["compiled"]["systemPrompt"]
        .as_str()
        .unwrap_or_else(|| panic!("no compiled.systemPrompt in {body}"))
}

fn messages(body: &Value) -> &Vec<Value> {
    body["compiled"]["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("no compiled.messages in {body}"))
}

fn infos(body: &Value) -> Vec<String> {
    body["compiled"]["diagnostics"]
        .as_array()
        .unwrap_or_else(|| panic!("no compiled.diagnostics in {body}"))
        .iter()
        .filter(|d| d["level"] == "info")
        .map(|d| d["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn system_stack(content: &str, rules: Value) -> Value {
    json!({"id": "draft", "mode": "replace", "regex": {"rules": rules}, "items": [
        {"kind": "block", "id": "text", "role": "system", "content": content},
        {"kind": "slot", "id": "history", "slot": "chat-history"}
    ]})
}

#[test]
fn preview_api_matches_the_original_on_issue_19_examples() {
    let f = Fixture::new();

    // The saved stack: both counted quantifiers match.
    let body = f.preview("quantifiers", &json!({}));
    assert_eq!(system_prompt(&body), "[A] ab ab [D] x");
    assert_eq!(
        infos(&body),
        [
            "Regex rule a2 matched 1 time(s) and changed 1 text segment(s) in compiled/system.",
            "Regex rule d4 matched 1 time(s) and changed 1 text segment(s) in compiled/system."
        ]
    );

    // Drafts with the other counted forms.
    for (pattern, expected) in [
        ("(ab){2,}", "[Q] x"),
        ("a{1,3}", "[Q]b[Q]b x"),
        ("b{1}a", "a[Q]b x"),
        ("x{10}", "abab x"),
    ] {
        let draft = system_stack(
            "abab x",
            json!([{"id": "q", "stage": "compiled", "targets": ["system"], "pattern": pattern, "flags": "g", "replace": "[Q]"}]),
        );
        let body = f.preview("draft", &json!({"stack": draft}));
        assert_eq!(system_prompt(&body), expected, "{pattern}");
    }

    // `\u{1F600}` without `u` is the text `u{1F600}`; with `u` it is the emoji.
    for (flags, expected) in [("g", "a😀b x[E]"), ("gu", "a[E]b xu{1F600}")] {
        let draft = system_stack(
            "a😀b xu{1F600}",
            json!([{"id": "e", "stage": "compiled", "targets": ["system"], "pattern": "\\u{1F600}", "flags": flags, "replace": "[E]"}]),
        );
        let body = f.preview("draft", &json!({"stack": draft}));
        assert_eq!(system_prompt(&body), expected, "{flags}");
    }

    // A role filter that removes nothing still repairs the tool pairs.
    let draft = json!({"id": "draft", "items": [
        {"kind": "block", "id": "text", "role": "system", "content": "System."},
        {"kind": "slot", "id": "h", "slot": "chat-history", "options": {"roles": ["user", "assistant", "toolResult"]}}
    ]});
    let conversation = json!([
        {"role": "user", "content": "q", "timestamp": 1},
        {"role": "assistant", "content": [{"type": "text", "text": "t"}, {"type": "toolCall", "id": "c1", "name": "read", "arguments": {}}], "timestamp": 2},
        {"role": "toolResult", "toolCallId": "c2", "toolName": "read", "content": [{"type": "text", "text": "out"}], "isError": false, "timestamp": 3},
        {"role": "user", "content": "last", "timestamp": 4}
    ]);
    let body = f.preview("draft", &json!({"stack": draft, "messages": conversation}));
    let sent: Vec<Value> = messages(&body)
        .iter()
        .map(|m| m["message"].clone())
        .collect();
    assert_eq!(
        sent,
        [
            conversation[0].clone(),
            json!({"role": "assistant", "content": [{"type": "text", "text": "t"}], "timestamp": 2}),
            conversation[3].clone()
        ]
    );
    assert_eq!(
        infos(&body),
        ["Repaired tool history after chat-history filtering: removed 1 dangling tool call(s), dropped 1 dangling tool result message(s)."]
    );

    // Objects print with integer-like keys first.
    let draft = json!({"id": "draft", "schemaVersion": 2, "mode": "replace",
    "parameters": {"obj": {"b": 1, "2": 2}},
    "items": [
        {"kind": "block", "id": "text", "role": "system", "content": "{{ parameters.obj }} {{ parameters.obj | json }}"},
        {"kind": "slot", "id": "history", "slot": "chat-history"}
    ]});
    let body = f.preview("draft", &json!({"stack": draft}));
    assert_eq!(system_prompt(&body), r#"{"2":2,"b":1} {"2":2,"b":1}"#);
}

/// Issue 16, point 1: a catastrophic rule on a long message ends with an error naming the rule,
/// and the server answers other requests while it runs.
#[test]
fn runaway_rule_ends_with_a_budget_error_while_the_server_keeps_answering() {
    let f = Fixture::new();
    let draft = json!({"id": "draft", "regex": {"rules": [
        { "id": "nested", "stage": "history", "pattern": "(a+)+$", "replace": "x" }
    ]}, "items": [{"kind": "slot", "id": "history", "slot": "chat-history"}]});
    // Without a budget this is 2^40 ways to split the run: it would never end.
    let long = format!("{}!", "a".repeat(40));
    let messages = json!([{"role": "user", "content": long, "timestamp": 1}]);
    let body = json!({"stack": draft, "messages": messages});
    std::thread::scope(|scope| {
        let preview = scope.spawn(|| f.preview("draft", &body));
        // Meanwhile the server answers.
        let meta = f
            .client
            .get(f.server.url("/api/meta"))
            .header("x-pi-forge-token", &f.server.token)
            .send()
            .unwrap();
        assert_eq!(meta.status(), StatusCode::OK);
        let answer = preview.join().unwrap();
        let errors = support::error_messages(&answer);
        assert_eq!(
            errors,
            vec!["Regex rule nested exceeded its time budget (20000000 steps of the regex engine) in history/messages: the pattern backtracks catastrophically on this text. Simplify it (no nested quantifiers such as (a+)+)."]
        );
    });
}
