//! Redaction, the capture store and the run diff (web-editor spec §4).

use forge_core::diff::{BlockStatus, CacheReporting, CaptureInfo, UsageReport};
use forge_core::payload::{
    is_secret_key, normalize_key, redact, Armed, PayloadError, PayloadStore, REDACTED,
    TOKEN_COUNT_KEYS,
};
use serde_json::{json, Value};

const HIDDEN: [&str; 22] = [
    "Authorization",
    "authorization",
    "apiKey",
    "api_key",
    "api-key",
    "x-api-key",
    "X-Api-Key",
    "token",
    "access_token",
    "accessToken",
    "refreshToken",
    "refresh-token",
    "id_token",
    "sessionToken",
    "session-token",
    "Cookie",
    "set-cookie",
    "client_secret",
    "clientSecret",
    "password",
    "db-password",
    "credentials",
];

const KEPT_VARIANTS: [&str; 12] = [
    "max_completion_tokens",
    "maxCompletionTokens",
    "max-completion-tokens",
    "max_tokens",
    "maxTokens",
    "cached_tokens",
    "cachedTokens",
    "maxOutputTokens",
    "tokenBudget",
    "token-count",
    "tokenizer",
    "prompt_tokens",
];

#[test]
fn every_hidden_key_is_a_secret_and_every_token_count_is_kept() {
    for key in HIDDEN {
        assert!(is_secret_key(key), "{key} must be hidden");
    }
    for key in KEPT_VARIANTS.iter().chain(TOKEN_COUNT_KEYS.iter()) {
        assert!(!is_secret_key(key), "{key} must be kept");
    }
    for key in [
        "model",
        "messages",
        "stream",
        "tools",
        "content",
        "role",
        "temperature",
    ] {
        assert!(!is_secret_key(key), "{key} is not a secret");
    }
}

#[test]
fn keys_normalise_like_the_original() {
    assert_eq!(normalize_key("maxOutputTokens"), "max_output_tokens");
    assert_eq!(
        normalize_key("max-completion-tokens"),
        "max_completion_tokens"
    );
    assert_eq!(normalize_key("x--api..key"), "x_api_key");
    assert_eq!(normalize_key("token2Count"), "token2_count");
    assert_eq!(normalize_key("Authorization"), "authorization");
}

#[test]
fn redaction_reaches_every_depth_and_array() {
    let mut payload = json!({
        "model": "fake-1",
        "max_completion_tokens": 1000,
        "apiKey": "sk-top",
        "headers": {"Authorization": "Bearer sk-1", "x-api-key": {"nested": "sk-2"}},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi", "sessionToken": "s-3"}]},
            {"role": "assistant", "content": "ok", "usage": {"cached_tokens": 5, "prompt_tokens": 10}}
        ],
        "providerOptions": [[{"refreshToken": "r-4", "tokenBudget": 300, "cookie": ["c-5"]}]],
    });
    for key in HIDDEN {
        payload["deep"]["array"] = json!([{ key: "secret-value" }]);
        let out = redact(&payload);
        assert_eq!(out["deep"]["array"][0][key], json!(REDACTED), "{key}");
    }
    let out = redact(&payload);
    assert_eq!(out["apiKey"], json!(REDACTED));
    assert_eq!(out["headers"]["Authorization"], json!(REDACTED));
    assert_eq!(out["headers"]["x-api-key"], json!(REDACTED));
    assert_eq!(
        out["messages"][0]["content"][0]["sessionToken"],
        json!(REDACTED)
    );
    assert_eq!(out["messages"][0]["content"][0]["text"], json!("hi"));
    assert_eq!(
        out["messages"][1]["usage"],
        json!({"cached_tokens": 5, "prompt_tokens": 10})
    );
    assert_eq!(
        out["providerOptions"][0][0]["refreshToken"],
        json!(REDACTED)
    );
    assert_eq!(out["providerOptions"][0][0]["cookie"], json!(REDACTED));
    assert_eq!(out["providerOptions"][0][0]["tokenBudget"], json!(300));
    assert_eq!(out["max_completion_tokens"], json!(1000));
    let text = out.to_string();
    for secret in ["sk-top", "sk-1", "sk-2", "s-3", "r-4", "c-5"] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
    // Key order is kept: the stored form is the request as sent, minus secrets.
    let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
    assert_eq!(keys[..3], ["model", "max_completion_tokens", "apiKey"]);
}

fn request(turn: usize, extra_messages: &[(&str, &str)]) -> Value {
    let mut messages = vec![json!({"role": "system", "content": "You are terse."})];
    for (role, text) in extra_messages {
        messages.push(json!({"role": role, "content": text}));
    }
    json!({"model": "fake-1", "messages": messages, "stream": true, "max_completion_tokens": 1000 + turn})
}

fn info(seq: u64) -> CaptureInfo {
    CaptureInfo {
        request_seq: Some(seq),
        pi_turn: Some(0),
        provider: Some("fake".into()),
        model: Some("fake-1".into()),
        api: Some("openai-completions".into()),
    }
}

fn usage(input: u64, cache_read: u64) -> UsageReport {
    UsageReport {
        provider: Some("fake".into()),
        model: Some("fake-1".into()),
        input,
        output: 3,
        cache_read,
        cache_write: 0,
        stop_reason: Some("stop".into()),
        cost: Some(0.25),
    }
}

#[test]
fn captures_pair_usage_by_request_and_report_cache_only_once_seen() {
    let mut store = PayloadStore::new();
    let first = store.capture(
        "s1",
        "t1",
        Some("p"),
        info(1),
        request(1, &[("user", "one")]),
        0,
    );
    assert_eq!(first.summary.turn_id, "turn-1");
    assert_eq!(
        first.summary.bytes,
        request(1, &[("user", "one")]).to_string().len()
    );
    assert!(first.armed.is_none());
    store.capture(
        "s1",
        "t2",
        Some("p"),
        info(2),
        request(2, &[("user", "one"), ("assistant", "ok"), ("user", "two")]),
        0,
    );

    // Usage for request 1 arrives after request 2 was captured: it still lands on turn-1.
    let u1 = store.record_usage("s1", 1, &usage(10, 0)).unwrap();
    assert_eq!(u1.cache_reporting, CacheReporting::NotReported);
    assert_eq!(u1.cache_hit_ratio, None);
    let u2 = store.record_usage("s1", 2, &usage(4, 16)).unwrap();
    assert_eq!(u2.prompt_tokens, 20);
    assert_eq!(u2.cache_hit_ratio, Some(0.8));
    assert_eq!(u2.cost, Some(0.25));
    // A second report for the same request, an unknown request, another session: ignored.
    assert_eq!(store.record_usage("s1", 2, &usage(1, 1)), None);
    assert_eq!(store.record_usage("s1", 9, &usage(1, 1)), None);
    assert_eq!(store.record_usage("other", 1, &usage(1, 1)), None);

    let view = store.view();
    assert_eq!(view.session_id.as_deref(), Some("s1"));
    let ids: Vec<&str> = view.turns.iter().map(|t| t.turn_id.as_str()).collect();
    assert_eq!(ids, ["turn-1", "turn-2"]);
    assert_eq!(view.turns[0].usage.as_ref().unwrap().input, 10);
    assert_eq!(view.turns[1].usage.as_ref().unwrap().cache_read, 16);
    let wire = serde_json::to_value(&view.turns[1]).unwrap();
    assert_eq!(wire["requestSeq"], json!(2));
    assert_eq!(wire["api"], json!("openai-completions"));
    assert_eq!(wire["usage"]["cacheHitRatio"], json!(0.8));
}

#[test]
fn a_new_session_starts_a_new_history_and_arming_pins_one_capture() {
    let mut store = PayloadStore::new();
    store.arm(Armed {
        armed_at: "a0".into(),
        save: true,
        by: "web".into(),
    });
    let pinned = store.capture("s1", "t1", None, info(1), request(1, &[("user", "x")]), 0);
    assert_eq!(pinned.armed.as_ref().map(|a| a.save), Some(true));
    assert!(
        store.armed().is_none(),
        "the arm is consumed by one capture"
    );
    let next = store.capture("s1", "t2", None, info(2), request(2, &[("user", "y")]), 3);
    assert!(next.armed.is_none());
    for seq in 3..=25 {
        store.capture("s1", "t", None, info(seq), request(seq as usize, &[]), 3);
    }
    let view = store.view();
    assert_eq!(view.turns.len(), 20);
    assert_eq!(view.turns[0].turn_id, "turn-6");
    assert_eq!(view.dropped, 3);
    // The pinned capture outlives the history.
    assert_eq!(view.latest.as_ref().unwrap().turn_id, "turn-1");
    assert_eq!(
        store.get("turn-1").unwrap().payload.as_ref().unwrap()["messages"][1]["content"],
        json!("x")
    );
    assert_eq!(
        store.get("turn-2").unwrap_err(),
        PayloadError::UnknownTurn("turn-2".into())
    );

    // Another session: everything starts over (numbering too).
    let other = store.capture("s2", "t", None, info(1), request(1, &[]), 0);
    assert_eq!(other.summary.turn_id, "turn-1");
    assert_eq!(store.view().turns.len(), 1);
    assert!(store.view().latest.is_none());

    store.arm(Armed {
        armed_at: "a1".into(),
        save: false,
        by: "pi".into(),
    });
    store.clear();
    let cleared = store.view();
    assert!(cleared.turns.is_empty() && cleared.armed.is_none() && cleared.latest.is_none());
    assert_eq!(store.diff(None, None).unwrap_err(), PayloadError::Empty);
}

#[test]
fn run_diff_marks_appended_messages_and_the_prefix_boundary() {
    let mut store = PayloadStore::new();
    store.capture(
        "s",
        "t1",
        None,
        info(1),
        request(1, &[("user", "first question")]),
        0,
    );
    store.capture(
        "s",
        "t2",
        None,
        info(2),
        request(
            1,
            &[
                ("user", "first question"),
                ("assistant", "ok from fake"),
                ("user", "second"),
            ],
        ),
        0,
    );
    let diff = store.diff(None, None).unwrap();
    assert_eq!(diff.from.as_ref().unwrap().turn_id, "turn-1");
    assert_eq!(diff.to.turn_id, "turn-2");
    let statuses: Vec<(String, BlockStatus)> = diff
        .diff
        .blocks
        .iter()
        .map(|b| {
            (
                b.after.as_ref().or(b.before.as_ref()).unwrap().role.clone(),
                b.status,
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("request".to_string(), BlockStatus::Same),
            ("system".to_string(), BlockStatus::Same),
            ("user".to_string(), BlockStatus::Same),
            ("assistant".to_string(), BlockStatus::Added),
            ("user".to_string(), BlockStatus::Added),
            ("request".to_string(), BlockStatus::Same),
            ("request".to_string(), BlockStatus::Same),
        ]
    );
    assert_eq!(diff.prefix_blocks, 3);
    assert!(diff
        .prefix_boundary
        .as_deref()
        .unwrap()
        .starts_with("message-assistant-"));
    let sum: i64 = diff.diff.blocks.iter().map(|b| b.token_delta).sum();
    assert_eq!(sum, diff.diff.delta_tokens);

    // Explicit ends, and the first capture against nothing.
    let first = store.diff(None, Some("turn-1")).unwrap();
    assert!(first.from.is_none());
    assert_eq!(first.prefix_blocks, 0);
    assert_eq!(first.diff.summary.added, first.diff.blocks.len());
    let reverse = store.diff(Some("turn-2"), Some("turn-1")).unwrap();
    assert_eq!(reverse.diff.summary.removed, 2);
    assert_eq!(
        store.diff(Some("turn-9"), None).unwrap_err().to_string(),
        "No captured turn turn-9 in this session (the history keeps the last 20 turns)."
    );
}
