//! Context diff: spec §6 "Context diff (pure)" and §7 vectors 60–63, plus edge cases.

use forge_core::diff::{
    approx_tokens, block, diff_sections, diff_turns, extract_blocks, hash_text,
    payload_content_text, prefix_tokens, turn_tokens, Block, BlockStatus, CacheReporting, Section,
    TurnHistory, UsageReport, HISTORY_LIMIT,
};
use proptest::prelude::*;
use serde_json::{json, Value};

use BlockStatus::{Added, Modified, Removed, Same};

fn b(key: &str, role: &str, text: &str) -> Block {
    block(key, role, text, None)
}

fn statuses(diff: &forge_core::diff::TurnDiff) -> Vec<BlockStatus> {
    diff.blocks.iter().map(|d| d.status).collect()
}

fn token_deltas(diff: &forge_core::diff::TurnDiff) -> Vec<i64> {
    diff.blocks.iter().map(|d| d.token_delta).collect()
}

fn keys(blocks: &[Block]) -> Vec<&str> {
    blocks.iter().map(|b| b.key.as_str()).collect()
}

fn report(model: &str, input: u64, cache_read: u64, cache_write: u64) -> UsageReport {
    UsageReport {
        provider: Some("openai".into()),
        model: Some(model.into()),
        input,
        output: 7,
        cache_read,
        cache_write,
        stop_reason: None,
        cost: None,
    }
}

// ---- Vector 60: hashes and tokens ------------------------------------------------------------

#[test]
fn v60_hash_text_vectors() {
    assert_eq!(hash_text(""), "811c9dc5");
    assert_eq!(hash_text("a"), "e40c292c");
    assert_eq!(hash_text("system\0System prompt"), "57362e4d");
    assert_eq!(hash_text("user\0Hello"), "f89e5ea6");
}

#[test]
fn v60_hash_text_counts_utf16_code_units() {
    assert_eq!(hash_text("é"), "6c0b6c44");
    // One astral character folds in both surrogates.
    assert_eq!(hash_text("😀"), "cb31c4b8");
    assert_eq!(hash_text("é😀"), hash_text(&["é", "😀"].concat()));
}

#[test]
fn v60_block_hello_world() {
    let blk = b("system", "system", "Hello, world!");
    assert_eq!(blk.key, "system");
    assert_eq!(blk.role, "system");
    assert_eq!(blk.chars, 13);
    assert_eq!(blk.approx_tokens, 4);
    assert_eq!(blk.hash, "c509d54a");
    // The hash is hashText of the JSON text {"role","text"}.
    assert_eq!(
        blk.hash,
        hash_text(r#"{"role":"system","text":"Hello, world!"}"#)
    );
}

#[test]
fn v60_token_estimates() {
    assert_eq!(approx_tokens(0), 1);
    assert_eq!(approx_tokens(5), 2);
    assert_eq!(approx_tokens(4), 1);
    assert_eq!(approx_tokens(8), 2);
    assert_eq!(b("k", "user", "").approx_tokens, 1);
    assert_eq!(b("k", "user", "abcde").approx_tokens, 2);
    let turn = [
        b("1", "user", "a"),
        b("2", "user", "b"),
        b("3", "user", "c"),
    ];
    assert_eq!(turn_tokens(&turn), 1);
    assert_eq!(turn_tokens(&[]), 0);
    assert_eq!(turn_tokens(&[b("e", "user", "")]), 0);
}

// ---- Vector 61 -------------------------------------------------------------------------------

#[test]
fn v61_modified_same_added() {
    let prev = [
        b("system", "system", "You are helpful."),
        b("m1", "user", "Hello there"),
    ];
    let cur = [
        b("system", "system", "You are helpful!"),
        b("m1", "user", "Hello there"),
        b("m2", "assistant", "Hi! How can I help today?"),
    ];
    let diff = diff_turns(Some(&prev), &cur);
    assert_eq!(statuses(&diff), vec![Modified, Same, Added]);
    assert_eq!(token_deltas(&diff), vec![0, 0, 6]);
    assert_eq!(diff.prefix_tokens, 3);
    assert_eq!(diff.prefix_ratio, 3.0 / 13.0);
    assert_eq!(diff.delta_tokens, 6);
    assert_eq!(diff.summary.changed_blocks, 2);
    assert_eq!(diff.summary.modified, 1);
    assert_eq!(diff.summary.same, 1);
    assert_eq!(diff.summary.added, 1);
    assert_eq!(diff.summary.removed, 0);
    assert_eq!(diff.summary.added_tokens, 6);
    assert_eq!(diff.summary.removed_tokens, 0);
    assert_eq!(diff.summary.net_tokens, 6);
    assert_eq!(diff.blocks[2].before, None);
    assert_eq!(diff.blocks[2].after.as_ref().unwrap().key, "m2");
}

// ---- Vector 62: diff shapes ------------------------------------------------------------------

#[test]
fn v62_middle_insertion_aligns_by_key() {
    let prev = [
        b("a", "user", "A"),
        b("b", "user", "B"),
        b("c", "user", "C"),
    ];
    let cur = [
        b("a", "user", "A"),
        b("x", "user", "X"),
        b("b", "user", "B"),
        b("c", "user", "C"),
    ];
    let diff = diff_turns(Some(&prev), &cur);
    assert_eq!(statuses(&diff), vec![Same, Added, Same, Same]);
    assert_eq!(diff.blocks[1].after.as_ref().unwrap().key, "x");
    // 3 chars → 1 token, 4 chars → 1 token.
    assert_eq!(diff.delta_tokens, 0);
    assert_eq!(token_deltas(&diff), vec![0, 0, 0, 0]);
}

#[test]
fn v62_role_change_is_modified_with_zero_prefix() {
    let prev = [b("m", "user", "Same words here")];
    let cur = [b("m", "assistant", "Same words here")];
    let diff = diff_turns(Some(&prev), &cur);
    assert_eq!(statuses(&diff), vec![Modified]);
    assert_eq!(diff.prefix_tokens, 0);
    assert_eq!(diff.prefix_ratio, 0.0);
    assert_eq!(diff.delta_tokens, 0);
    assert_eq!(token_deltas(&diff), vec![0]);
    assert_eq!(diff.summary.changed_blocks, 1);
}

#[test]
fn v62_no_previous_all_added() {
    let cur = [b("a", "system", "abcdefgh"), b("b", "user", "xy")];
    let diff = diff_turns(None, &cur);
    assert_eq!(statuses(&diff), vec![Added, Added]);
    assert_eq!(diff.delta_tokens, 3);
    assert_eq!(token_deltas(&diff), vec![3, 0]);
    assert_eq!(diff.prefix_tokens, 0);
    assert_eq!(diff.prefix_ratio, 0.0);
    assert_eq!(diff.summary.added, 2);
    assert_eq!(diff.summary.changed_blocks, 2);
    // An empty previous list behaves the same.
    assert_eq!(diff_turns(Some(&[]), &cur), diff);
}

#[test]
fn v62_empty_current_all_removed() {
    let prev = [b("a", "system", "abcdefgh"), b("b", "user", "xy")];
    let diff = diff_turns(Some(&prev), &[]);
    assert_eq!(statuses(&diff), vec![Removed, Removed]);
    assert_eq!(diff.delta_tokens, -3);
    assert_eq!(token_deltas(&diff), vec![-3, 0]);
    assert_eq!(diff.prefix_tokens, 0);
    assert_eq!(diff.prefix_ratio, 0.0);
    assert_eq!(diff.summary.removed, 2);
    assert_eq!(diff.summary.removed_tokens, 3);
    assert_eq!(diff.summary.added_tokens, 0);
    assert_eq!(diff.summary.net_tokens, -3);
    assert!(diff.blocks.iter().all(|d| d.after.is_none()));
}

#[test]
fn v62_both_empty() {
    let diff = diff_turns(Some(&[]), &[]);
    assert!(diff.blocks.is_empty());
    assert_eq!(diff.prefix_tokens, 0);
    assert_eq!(diff.prefix_ratio, 0.0);
    assert_eq!(diff.delta_tokens, 0);
    assert_eq!(diff.summary.changed_blocks, 0);
    assert_eq!(diff_turns(None, &[]), diff);
}

#[test]
fn v62_remainder_round_robin() {
    let prev = [b("base", "user", "abcd")];
    let cur = [
        b("base", "user", "abcd"),
        b("x1", "user", "x"),
        b("x2", "user", "x"),
        b("x3", "user", "x"),
    ];
    let diff = diff_turns(Some(&prev), &cur);
    assert_eq!(diff.delta_tokens, 1);
    assert_eq!(statuses(&diff), vec![Same, Added, Added, Added]);
    assert_eq!(token_deltas(&diff), vec![0, 1, 0, 0]);
    // Same shape with empty (positional) keys.
    let prev = [b("", "user", "abcd")];
    let cur = [
        b("", "user", "abcd"),
        b("", "user", "x"),
        b("", "user", "x"),
        b("", "user", "x"),
    ];
    let diff = diff_turns(Some(&prev), &cur);
    assert_eq!(token_deltas(&diff), vec![0, 1, 0, 0]);
}

// ---- Vector 63: payloads and history ---------------------------------------------------------

fn openai_payload() -> Value {
    json!({
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "System prompt"},
            {"role": "user", "content": "User message"},
            {"role": "assistant", "content": "Assistant message"}
        ]
    })
}

#[test]
fn v63_openai_payload_keys() {
    let blocks = extract_blocks(&openai_payload());
    assert_eq!(
        keys(&blocks),
        vec![
            "request-model",
            "message-system-57362e4d",
            "message-user-3d22cb12",
            "message-assistant-c0a65ea4"
        ]
    );
    assert_eq!(blocks[0].role, "request");
    assert_eq!(blocks[0].text, "{\n  \"model\": \"gpt-4o\"\n}");
    assert_eq!(blocks[0].chars, 23);
    assert_eq!(blocks[1].role, "system");
    assert_eq!(blocks[1].text, "System prompt");
    assert_eq!(blocks[2].role, "user");
    assert_eq!(blocks[2].text, "User message");
    assert_eq!(blocks[3].text, "Assistant message");
    // Message blocks are hashed with {section:"messages", value}.
    let value = json!({"role": "user", "content": "User message"});
    let serialized = json!({"section": "messages", "value": value});
    assert_eq!(
        blocks[2].hash,
        block(
            "message-user-3d22cb12",
            "user",
            "User message",
            Some(&serialized)
        )
        .hash
    );
    assert_ne!(blocks[2].hash, b("x", "user", "User message").hash);
}

#[test]
fn v63_history_keeps_last_twenty() {
    let mut history = TurnHistory::new();
    for i in 1..=25 {
        let payload = json!({"messages": [{"role": "user", "content": format!("turn {i}")}]});
        let turn = history.capture(&format!("2026-06-13T09:00:{i:02}Z"), Some("s"), &payload);
        assert_eq!(turn.turn_id, format!("turn-{i}"));
    }
    assert_eq!(HISTORY_LIMIT, 20);
    assert_eq!(history.len(), 20);
    let ids: Vec<String> = history.turns().map(|t| t.turn_id.clone()).collect();
    let expected: Vec<String> = (6..=25).map(|i| format!("turn-{i}")).collect();
    assert_eq!(ids, expected);
    let view = history.view();
    assert_eq!(view.turns.len(), 20);
    assert_eq!(view.turns[0].turn_id, "turn-6");
    assert_eq!(view.latest.as_ref().unwrap().turn.turn_id, "turn-25");
}

#[test]
fn v63_usage_reporting_rules() {
    let mut history = TurnHistory::new();
    history.capture("t1", None, &openai_payload());
    let first = history.record_usage(&report("gpt-4o", 120, 0, 0)).unwrap();
    assert_eq!(first.prompt_tokens, 120);
    assert_eq!(first.cache_reporting, CacheReporting::NotReported);
    assert_eq!(first.cache_hit_ratio, None);

    history.capture("t2", None, &openai_payload());
    let second = history.record_usage(&report("gpt-4o", 25, 75, 0)).unwrap();
    assert_eq!(second.prompt_tokens, 100);
    assert_eq!(second.cache_reporting, CacheReporting::Reported);
    assert_eq!(second.cache_hit_ratio, Some(0.75));

    history.capture("t3", None, &openai_payload());
    let third = history.record_usage(&report("gpt-4o", 100, 0, 0)).unwrap();
    assert_eq!(third.prompt_tokens, 100);
    assert_eq!(third.cache_reporting, CacheReporting::Reported);
    assert_eq!(third.cache_hit_ratio, Some(0.0));
}

// ---- Alignment -------------------------------------------------------------------------------

#[test]
fn duplicate_keys_fall_back_to_position() {
    let prev = [
        b("a", "user", "A"),
        b("b", "user", "B"),
        b("c", "user", "C"),
    ];
    let cur = [
        b("a", "user", "A"),
        b("a", "user", "X"),
        b("b", "user", "B"),
        b("c", "user", "C"),
    ];
    let diff = diff_turns(Some(&prev), &cur);
    assert_eq!(statuses(&diff), vec![Same, Modified, Modified, Added]);
    assert_eq!(diff.blocks[1].before.as_ref().unwrap().text, "B");
    assert_eq!(diff.blocks[1].after.as_ref().unwrap().text, "X");
    // Duplicates on the previous side count too.
    let prev = [b("a", "user", "A"), b("a", "user", "B")];
    let cur = [b("a", "user", "B")];
    assert_eq!(
        statuses(&diff_turns(Some(&prev), &cur)),
        vec![Modified, Removed]
    );
}

#[test]
fn empty_or_unshared_keys_fall_back_to_position() {
    let prev = [b("", "user", "A"), b("b", "user", "B")];
    let cur = [b("b", "user", "B")];
    assert_eq!(
        statuses(&diff_turns(Some(&prev), &cur)),
        vec![Modified, Removed]
    );
    let prev = [b("p", "user", "A"), b("q", "user", "B")];
    let cur = [b("r", "user", "B"), b("s", "user", "B")];
    assert_eq!(
        statuses(&diff_turns(Some(&prev), &cur)),
        vec![Modified, Same]
    );
}

#[test]
fn removed_in_the_middle() {
    let prev = [
        b("a", "user", "A"),
        b("b", "user", "BBBB"),
        b("c", "user", "C"),
    ];
    let cur = [b("a", "user", "A"), b("c", "user", "C")];
    let diff = diff_turns(Some(&prev), &cur);
    assert_eq!(statuses(&diff), vec![Same, Removed, Same]);
    assert_eq!(diff.blocks[1].before.as_ref().unwrap().key, "b");
    // 6 chars → 2 tokens, 2 chars → 1 token.
    assert_eq!(diff.delta_tokens, -1);
    assert_eq!(token_deltas(&diff), vec![0, -1, 0]);
    assert_eq!(diff.summary.removed_tokens, 1);
    // Prefix: position 1 differs (roles equal, "C" vs "BBBB" share nothing).
    assert_eq!(diff.prefix_tokens, 0);
}

#[test]
fn gaps_pair_by_position() {
    let prev = [
        b("a", "user", "A"),
        b("p", "user", "P"),
        b("q", "user", "Q"),
        b("z", "user", "Z"),
    ];
    let cur = [
        b("a", "user", "A"),
        b("r", "user", "R"),
        b("z", "user", "Z"),
    ];
    let diff = diff_turns(Some(&prev), &cur);
    assert_eq!(statuses(&diff), vec![Same, Modified, Removed, Same]);
    assert_eq!(diff.blocks[1].before.as_ref().unwrap().key, "p");
    assert_eq!(diff.blocks[1].after.as_ref().unwrap().key, "r");
    assert_eq!(diff.blocks[2].before.as_ref().unwrap().key, "q");
    // Trailing gap: leftovers on both sides pair by position too.
    let prev = [b("a", "user", "A"), b("p", "user", "P")];
    let cur = [
        b("a", "user", "A"),
        b("r", "user", "P"),
        b("s", "user", "S"),
    ];
    let diff = diff_turns(Some(&prev), &cur);
    assert_eq!(statuses(&diff), vec![Same, Same, Added]);
}

#[test]
fn keys_behind_the_cursor_are_unmatched() {
    let prev = [
        b("a", "user", "A"),
        b("b", "user", "B"),
        b("c", "user", "C"),
    ];
    let cur = [
        b("a", "user", "A"),
        b("c", "user", "C"),
        b("b", "user", "B"),
    ];
    let diff = diff_turns(Some(&prev), &cur);
    assert_eq!(statuses(&diff), vec![Same, Removed, Same, Added]);
    assert_eq!(diff.blocks[1].before.as_ref().unwrap().key, "b");
    assert_eq!(diff.blocks[3].after.as_ref().unwrap().key, "b");
    assert_eq!(diff.summary.changed_blocks, 2);
    assert_eq!(diff.delta_tokens, 0);
    assert_eq!(token_deltas(&diff), vec![0, 0, 0, 0]);
}

// ---- Prefix ----------------------------------------------------------------------------------

#[test]
fn prefix_stops_at_appended_blocks() {
    let prev = [b("s", "system", "0123456789"), b("u", "user", "abcdef")];
    let cur = [
        b("s", "system", "0123456789"),
        b("u", "user", "abcdef"),
        b("a", "assistant", "a reply of some length"),
    ];
    let diff = diff_turns(Some(&prev), &cur);
    // 16 shared chars of 38 → floor(16/4) = 4 of ceil(38/4) = 10.
    assert_eq!(diff.prefix_tokens, 4);
    assert_eq!(diff.prefix_ratio, 0.4);
    assert_eq!(diff.delta_tokens, 6);
    assert_eq!(token_deltas(&diff), vec![0, 0, 6]);
}

#[test]
fn prefix_covers_everything() {
    // Nothing mismatched: the current list is a prefix of the previous one.
    let prev = [b("s", "system", "abcdefg"), b("u", "user", "x")];
    let cur = [b("s", "system", "abcdefg")];
    let diff = diff_turns(Some(&prev), &cur);
    assert_eq!(diff.prefix_tokens, 2);
    assert_eq!(diff.prefix_ratio, 1.0);
    // A mismatch whose common prefix still covers every current char.
    let prev = [b("s", "system", "abcdefg"), b("u", "user", "Hello world")];
    let cur = [b("s", "system", "abcdefg"), b("u", "user", "Hello")];
    assert_eq!(prefix_tokens(&prev, &cur), 3);
    assert_eq!(diff_turns(Some(&prev), &cur).prefix_ratio, 1.0);
}

#[test]
fn prefix_common_prefix_counts_utf16_units() {
    // "😀😀ab" vs "😀😀ac": common prefix 4 code units + 1 = 5 (floor 5/4 = 1).
    let prev = [b("m", "user", "😀😀ab-----")];
    let cur = [b("m", "user", "😀😀ac-----")];
    assert_eq!(cur[0].chars, 11);
    assert_eq!(prefix_tokens(&prev, &cur), 1);
    // Different surrogate tails: the shared high surrogate still counts as one unit.
    let prev = [b("m", "user", "😀xxxxxxxx")];
    let cur = [b("m", "user", "😁xxxxxxxx")];
    assert_eq!(prefix_tokens(&prev, &cur), 0);
    let prev = [b("m", "user", "abc😀xxxxxxxx")];
    let cur = [b("m", "user", "abc😁xxxxxxxx")];
    assert_eq!(prefix_tokens(&prev, &cur), 1);
}

#[test]
fn prefix_same_text_different_serialization_adds_nothing() {
    let prev = [block("m", "assistant", "Done.", Some(&json!({"args": 1})))];
    let cur = [block("m", "assistant", "Done.", Some(&json!({"args": 2})))];
    let diff = diff_turns(Some(&prev), &cur);
    assert_eq!(statuses(&diff), vec![Modified]);
    assert_eq!(diff.prefix_tokens, 0);
    assert_eq!(token_deltas(&diff), vec![0]);
}

// ---- Unicode ---------------------------------------------------------------------------------

#[test]
fn unicode_blocks_count_utf16_units() {
    let blk = b("k", "user", "é😀");
    assert_eq!(blk.chars, 3);
    assert_eq!(blk.approx_tokens, 1);
    assert_eq!(blk.hash, hash_text("{\"role\":\"user\",\"text\":\"é😀\"}"));
    assert_eq!(b("k", "user", "😀😀😀").chars, 6);
    assert_eq!(turn_tokens(&[b("k", "user", "😀😀😀")]), 2);
    // Escapes follow JSON.stringify.
    assert_eq!(
        b("k", "user", "a\"b\n\u{1}").hash,
        hash_text("{\"role\":\"user\",\"text\":\"a\\\"b\\n\\u0001\"}")
    );
}

// ---- Token deltas ----------------------------------------------------------------------------

#[test]
fn remainder_goes_to_negative_blocks() {
    // a grows by 4 (+1); b and c shrink by 3 each (0). Turn 11 → 9 chars: 3 → 3 tokens,
    // delta 0, remainder -1 to the first negative block.
    let prev = [
        b("a", "user", "aaaaa"),
        b("b", "user", "bbb"),
        b("c", "user", "ccc"),
    ];
    let cur = [b("a", "user", "aaaaaaaaa")];
    let diff = diff_turns(Some(&prev), &cur);
    assert_eq!(statuses(&diff), vec![Modified, Removed, Removed]);
    assert_eq!(diff.delta_tokens, 0);
    assert_eq!(token_deltas(&diff), vec![1, -1, 0]);
    assert_eq!(diff.summary.added_tokens, 1);
    assert_eq!(diff.summary.removed_tokens, 1);
    assert_eq!(diff.summary.net_tokens, 0);
}

#[test]
fn remainder_equal_whole_shares() {
    // 10 chars (3 tokens) → 4 chars (1 token): delta -2, both removals truncate to 0,
    // remainder -2 = one whole share each.
    let prev = [
        b("a", "user", "abcd"),
        b("b", "user", "bbb"),
        b("c", "user", "ccc"),
    ];
    let cur = [b("a", "user", "abcd")];
    let diff = diff_turns(Some(&prev), &cur);
    assert_eq!(diff.delta_tokens, -2);
    assert_eq!(token_deltas(&diff), vec![0, -1, -1]);
    assert_eq!(diff.summary.removed_tokens, 2);
}

#[test]
fn truncation_toward_zero() {
    // -7 chars → trunc(-7/4) = -1 (not floor -2); 9 → 2 chars is 3 → 1 tokens, remainder -1.
    let prev = [b("a", "user", "123456789")];
    let cur = [b("a", "user", "12")];
    let diff = diff_turns(Some(&prev), &cur);
    assert_eq!(diff.delta_tokens, -2);
    assert_eq!(token_deltas(&diff), vec![-2]);
    // +7 chars → 1, remainder +1 → 2.
    let diff = diff_turns(Some(&cur), &prev);
    assert_eq!(diff.delta_tokens, 2);
    assert_eq!(token_deltas(&diff), vec![2]);
}

// ---- Extraction ------------------------------------------------------------------------------

#[test]
fn serialized_payload_is_preferred() {
    let payload = json!({
        "note": "outer",
        "serializedPayload": {"system": "Be brief.", "max_tokens": 64}
    });
    let blocks = extract_blocks(&payload);
    assert_eq!(keys(&blocks), vec!["system", "request-max_tokens"]);
    assert_eq!(blocks[0].text, "Be brief.");
    assert_eq!(blocks[1].text, "{\n  \"max_tokens\": 64\n}");
    // A JSON string is parsed; anything else stays text.
    let payload = json!({"serializedPayload": "{\"temperature\":0.5}"});
    let blocks = extract_blocks(&payload);
    assert_eq!(keys(&blocks), vec!["request-temperature"]);
    assert_eq!(blocks[0].text, "{\n  \"temperature\": 0.5\n}");
    let payload = json!({"serializedPayload": "not json"});
    let blocks = extract_blocks(&payload);
    assert_eq!(keys(&blocks), vec!["payload-text"]);
    assert_eq!(blocks[0].text, "not json");
    // null means absent.
    let payload = json!({"serializedPayload": null, "model": "m"});
    assert_eq!(
        keys(&extract_blocks(&payload)),
        vec!["request-serializedPayload", "request-model"]
    );
}

#[test]
fn non_object_payload_is_one_text_block() {
    let blocks = extract_blocks(&json!("raw body"));
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].key, "payload-text");
    assert_eq!(blocks[0].role, "payload");
    assert_eq!(blocks[0].text, "raw body");
    assert_eq!(blocks[0].chars, 8);
    let blocks = extract_blocks(&json!([1, {"a": true}]));
    assert_eq!(keys(&blocks), vec!["payload-text"]);
    assert_eq!(blocks[0].text, "[\n  1,\n  {\n    \"a\": true\n  }\n]");
    assert_eq!(extract_blocks(&json!(null))[0].text, "null");
    assert!(extract_blocks(&json!({})).is_empty());
}

#[test]
fn system_parts_join_trim_and_images() {
    let payload = json!({
        "system": [
            {"type": "text", "text": "  First part", "cache_control": {"type": "ephemeral"}},
            {"type": "image", "source": {"data": "AAAA"}},
            {"type": "text", "text": "Last part \n"}
        ]
    });
    let blocks = extract_blocks(&payload);
    assert_eq!(keys(&blocks), vec!["system"]);
    assert_eq!(blocks[0].role, "system");
    assert_eq!(blocks[0].text, "First part\n[image content]\nLast part");
    // A plain string is kept as is.
    assert_eq!(extract_blocks(&json!({"system": " x "}))[0].text, " x ");
    assert_eq!(
        payload_content_text(&json!(["a", {"type": "image_url", "image_url": {}}, {"k": 1}])),
        "a\n[image content]\n{\"k\":1}"
    );
    assert_eq!(payload_content_text(&Value::Null), "");
}

#[test]
fn repeated_messages_get_numbered_keys() {
    let payload = json!({
        "messages": [
            {"role": "user", "content": "again"},
            {"role": "user", "content": "again"},
            {"role": "user", "content": [{"type": "text", "text": "again"}]},
            {"role": "toolResult", "content": "ok"},
            {"content": "no role"}
        ]
    });
    let blocks = extract_blocks(&payload);
    let base = format!("message-user-{}", hash_text("user\0again"));
    assert_eq!(
        keys(&blocks),
        vec![
            base.clone(),
            format!("{base}-2"),
            format!("{base}-3"),
            format!("message-toolresult-{}", hash_text("toolResult\0ok")),
            format!("message-unknown-{}", hash_text("unknown\0no role")),
        ]
    );
    // Same text, different underlying value → different hash.
    assert_eq!(blocks[0].hash, blocks[1].hash);
    assert_ne!(blocks[0].hash, blocks[2].hash);
    assert_eq!(blocks[3].role, "toolResult");
}

#[test]
fn request_blocks_keep_key_order_and_pretty_json() {
    let payload = json!({
        "stream": true,
        "tools": [{"name": "read", "parameters": {}}],
        "temperature": 1.0
    });
    let blocks = extract_blocks(&payload);
    assert_eq!(
        keys(&blocks),
        vec!["request-stream", "request-tools", "request-temperature"]
    );
    assert_eq!(blocks[0].text, "{\n  \"stream\": true\n}");
    assert_eq!(
        blocks[1].text,
        "{\n  \"tools\": [\n    {\n      \"name\": \"read\",\n      \"parameters\": {}\n    }\n  ]\n}"
    );
    assert_eq!(blocks[2].text, "{\n  \"temperature\": 1\n}");
    assert!(blocks.iter().all(|b| b.role == "request"));
}

#[test]
fn payload_turns_diff_end_to_end() {
    let first = extract_blocks(&openai_payload());
    let mut second_payload = openai_payload();
    second_payload["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "user", "content": "Next question"}));
    let second = extract_blocks(&second_payload);
    let diff = diff_turns(Some(&first), &second);
    assert_eq!(statuses(&diff), vec![Same, Same, Same, Same, Added]);
    // 23 + 13 + 12 + 17 = 65 shared chars of 78: floor(65/4) = 16 of ceil(78/4) = 20.
    assert_eq!(diff.prefix_tokens, 16);
    assert_eq!(diff.prefix_ratio, 0.8);
    assert_eq!(diff.delta_tokens, 3);
    assert_eq!(token_deltas(&diff), vec![0, 0, 0, 0, 3]);
}

// ---- History ---------------------------------------------------------------------------------

#[test]
fn usage_memory_is_per_model() {
    let mut history = TurnHistory::new();
    assert_eq!(
        history
            .observe_usage(&report("a", 10, 5, 0))
            .cache_reporting,
        CacheReporting::Reported
    );
    let other = history.observe_usage(&report("b", 10, 0, 0));
    assert_eq!(other.cache_reporting, CacheReporting::NotReported);
    assert_eq!(other.cache_hit_ratio, None);
    // A cache write alone also counts as reporting.
    let write = history.observe_usage(&report("c", 10, 0, 30));
    assert_eq!(write.prompt_tokens, 40);
    assert_eq!(write.cache_hit_ratio, Some(0.0));
    // Reported with zero prompt tokens → ratio 0, never NaN.
    assert_eq!(
        history.observe_usage(&report("a", 0, 0, 0)).cache_hit_ratio,
        Some(0.0)
    );
}

#[test]
fn usage_ratios_then_aborted() {
    let mut history = TurnHistory::new();
    history.capture("t1", Some("s"), &openai_payload());
    assert!(history.usage_pending());
    let usage = history.record_usage(&report("m", 20, 80, 0)).unwrap();
    assert_eq!(usage.cache_hit_ratio, Some(0.8));
    assert!(!history.usage_pending());
    // Nothing pending: observed but not attached.
    assert_eq!(history.record_usage(&report("m", 1, 1, 0)), None);
    history.capture("t2", Some("s"), &openai_payload());
    let mut aborted = report("m", 90, 10, 0);
    aborted.stop_reason = Some("aborted".into());
    let usage = history.record_usage(&aborted).unwrap();
    assert_eq!(usage.cache_hit_ratio, Some(0.1));
    let view = history.view();
    assert_eq!(
        view.turns[0].usage.as_ref().unwrap().cache_hit_ratio,
        Some(0.8)
    );
    assert_eq!(
        view.latest.unwrap().usage.unwrap().stop_reason.as_deref(),
        Some("aborted")
    );
}

#[test]
fn history_view_shape() {
    let mut history = TurnHistory::new();
    assert_eq!(
        serde_json::to_value(history.view()).unwrap(),
        json!({"turns": [], "latest": null, "latestDiff": null})
    );
    history.push("t1", Some("s"), vec![b("a", "user", "abcd")]);
    history.push(
        "t2",
        None,
        vec![b("a", "user", "abcd"), b("b", "user", "xyz")],
    );
    history.record_usage(&report("m", 3, 0, 0));
    let view = serde_json::to_value(history.view()).unwrap();
    assert_eq!(
        view["turns"][0],
        json!({
            "turnId": "turn-1", "capturedAt": "t1", "stackId": "s", "approxTokens": 1,
            "blockCount": 1, "chars": 4, "deltaTokens": 1, "prefixTokens": 0,
            "prefixRatio": 0.0, "changedBlocks": 1
        })
    );
    assert_eq!(
        view["turns"][1],
        json!({
            "turnId": "turn-2", "capturedAt": "t2", "approxTokens": 2,
            "blockCount": 2, "chars": 7, "deltaTokens": 1, "prefixTokens": 1,
            "prefixRatio": 0.5, "changedBlocks": 1,
            "usage": {"provider": "openai", "model": "m", "input": 3, "output": 7,
                      "cacheRead": 0, "cacheWrite": 0, "promptTokens": 3,
                      "cacheReporting": "not-reported", "cacheHitRatio": null}
        })
    );
    assert_eq!(view["latest"]["turn"]["turnId"], "turn-2");
    assert_eq!(
        view["latest"]["turn"]["blocks"][1],
        json!({"key": "b", "role": "user", "text": "xyz", "chars": 3, "approxTokens": 1,
               "hash": hash_text("{\"role\":\"user\",\"text\":\"xyz\"}")})
    );
    assert_eq!(view["latest"]["diff"], view["latestDiff"]);
    let diff = &view["latestDiff"];
    assert_eq!(diff["blocks"][0]["status"], "same");
    assert_eq!(diff["blocks"][1]["status"], "added");
    assert!(diff["blocks"][1].get("before").is_none());
    assert_eq!(diff["blocks"][1]["tokenDelta"], 1);
    assert_eq!(
        diff["summary"],
        json!({"same": 1, "added": 1, "removed": 0, "modified": 0, "changedBlocks": 1,
               "addedTokens": 1, "removedTokens": 0, "netTokens": 1})
    );
}

#[test]
fn clear_empties_history_but_keeps_numbering_and_model_memory() {
    let mut history = TurnHistory::new();
    history.capture("t1", None, &openai_payload());
    history.record_usage(&report("m", 1, 1, 0));
    history.capture("t2", None, &openai_payload());
    assert!(history.usage_pending());
    history.clear();
    assert!(history.is_empty());
    assert!(!history.usage_pending());
    assert_eq!(history.view().latest, None);
    let turn = history.capture("t3", None, &openai_payload());
    assert_eq!(turn.turn_id, "turn-3");
    // The first turn after a clear is diffed against nothing.
    assert_eq!(history.view().turns[0].changed_blocks, 4);
    assert_eq!(
        history
            .record_usage(&report("m", 5, 0, 0))
            .unwrap()
            .cache_reporting,
        CacheReporting::Reported
    );
}

// ---- Editor draft diff -----------------------------------------------------------------------

#[test]
fn draft_diff_keys_by_diff_key_or_id() {
    let saved = vec![
        Section::new("system", Some("system"), "System prompt", None, "base"),
        Section::new(
            "message-0",
            Some("stack-item:a:1"),
            "A",
            Some("user"),
            "alpha",
        ),
        Section::new(
            "message-1",
            Some("stack-item:b:1"),
            "B",
            Some("user"),
            "beta",
        ),
    ];
    let draft = vec![
        Section::new("system", Some("system"), "System prompt", None, "base"),
        Section::new(
            "message-0",
            Some("stack-item:new:1"),
            "New",
            Some("user"),
            "gamma!",
        ),
        Section::new(
            "message-1",
            Some("stack-item:a:1"),
            "A",
            Some("user"),
            "alpha",
        ),
        Section::new(
            "message-2",
            Some("stack-item:b:1"),
            "B",
            Some("user"),
            "beta",
        ),
    ];
    let diff = diff_sections(&saved, &draft);
    assert_eq!(statuses(&diff), vec![Same, Added, Same, Same]);
    assert_eq!(
        diff.blocks[1].after.as_ref().unwrap().key,
        "stack-item:new:1"
    );
    // Without diff keys the ids align (here: by position through the shared ids).
    let no_keys: Vec<Section> = draft
        .iter()
        .map(|s| Section {
            diff_key: None,
            ..s.clone()
        })
        .collect();
    let saved_ids: Vec<Section> = saved
        .iter()
        .map(|s| Section {
            diff_key: None,
            ..s.clone()
        })
        .collect();
    let diff = diff_sections(&saved_ids, &no_keys);
    assert_eq!(statuses(&diff), vec![Same, Modified, Modified, Added]);
    assert_eq!(draft[1].chars, 6);
    assert_eq!(draft[1].approx_tokens, 2);
    assert_eq!(
        serde_json::to_value(&draft[0]).unwrap(),
        json!({"id": "system", "diffKey": "system", "title": "System prompt",
               "content": "base", "chars": 4, "approxTokens": 1})
    );
}

// ---- Properties ------------------------------------------------------------------------------

fn arb_block() -> impl Strategy<Value = Block> {
    (
        prop_oneof![Just(String::new()), "[a-e]", "k[0-9]{1,2}"],
        prop_oneof![
            Just("user".to_string()),
            Just("assistant".to_string()),
            Just("system".to_string())
        ],
        "(a|b|é|😀| ){0,12}",
    )
        .prop_map(|(key, role, text)| block(&key, &role, &text, None))
}

fn arb_blocks() -> impl Strategy<Value = Vec<Block>> {
    prop::collection::vec(arb_block(), 0..8)
}

fn unique_keyed(blocks: Vec<Block>) -> Vec<Block> {
    blocks
        .into_iter()
        .enumerate()
        .map(|(i, blk)| block(&format!("k{i}"), &blk.role, &blk.text, None))
        .collect()
}

proptest! {
    #[test]
    fn identical_turns_are_all_same(blocks in arb_blocks()) {
        let diff = diff_turns(Some(&blocks), &blocks);
        prop_assert_eq!(diff.blocks.len(), blocks.len());
        prop_assert!(diff.blocks.iter().all(|d| d.status == Same && d.token_delta == 0));
        prop_assert_eq!(diff.delta_tokens, 0);
        prop_assert_eq!(diff.summary.changed_blocks, 0);
        let expected = if turn_tokens(&blocks) == 0 { 0.0 } else { 1.0 };
        prop_assert_eq!(diff.prefix_ratio, expected);
        prop_assert_eq!(diff.prefix_tokens, turn_tokens(&blocks));
    }

    #[test]
    fn summaries_add_up(prev in arb_blocks(), cur in arb_blocks(), none in any::<bool>()) {
        let diff = diff_turns(if none { None } else { Some(&prev) }, &cur);
        let s = &diff.summary;
        prop_assert_eq!(s.same + s.added + s.removed + s.modified, diff.blocks.len());
        prop_assert_eq!(s.changed_blocks, s.added + s.removed + s.modified);
        prop_assert_eq!(s.net_tokens, diff.delta_tokens);
        prop_assert_eq!(s.added_tokens - s.removed_tokens, diff.delta_tokens);
        let total: i64 = diff.blocks.iter().map(|d| d.token_delta).sum();
        prop_assert_eq!(total, diff.delta_tokens);
        prop_assert!(diff.prefix_tokens <= turn_tokens(&cur));
        prop_assert!((0.0..=1.0).contains(&diff.prefix_ratio));
        // Every block of both sides appears exactly once, in order.
        let afters: Vec<&Block> = diff.blocks.iter().filter_map(|d| d.after.as_ref()).collect();
        prop_assert_eq!(afters, cur.iter().collect::<Vec<_>>());
        if !none {
            let befores: Vec<&Block> = diff.blocks.iter().filter_map(|d| d.before.as_ref()).collect();
            prop_assert_eq!(befores.len(), prev.len());
        }
    }

    #[test]
    fn keyed_alignment_preserves_both_orders(prev in arb_blocks(), cur in arb_blocks()) {
        let prev = unique_keyed(prev);
        let cur = unique_keyed(cur);
        let diff = diff_turns(Some(&prev), &cur);
        let befores: Vec<&Block> = diff.blocks.iter().filter_map(|d| d.before.as_ref()).collect();
        prop_assert_eq!(befores, prev.iter().collect::<Vec<_>>());
        for d in &diff.blocks {
            match d.status {
                Same => prop_assert_eq!(&d.before.as_ref().unwrap().hash, &d.after.as_ref().unwrap().hash),
                Modified => prop_assert_ne!(&d.before.as_ref().unwrap().hash, &d.after.as_ref().unwrap().hash),
                Added => prop_assert!(d.before.is_none()),
                Removed => prop_assert!(d.after.is_none()),
            }
        }
    }

    #[test]
    fn extraction_never_panics(text in "\\PC{0,40}", n in 0u32..4) {
        let payload = match n {
            0 => json!(text),
            1 => json!({"system": text, "messages": [{"role": text, "content": text}]}),
            2 => json!({"serializedPayload": text}),
            _ => json!({"messages": [text, {"content": [text, {"type": "image"}]}], "x": [text]}),
        };
        let blocks = extract_blocks(&payload);
        let again = extract_blocks(&payload);
        prop_assert_eq!(&blocks, &again);
        let diff = diff_turns(Some(&blocks), &again);
        prop_assert!(diff.blocks.iter().all(|d| d.status == Same));
    }
}
