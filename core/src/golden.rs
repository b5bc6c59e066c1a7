//! Golden cases for Presets (`pi-forge test`): a saved input, what the Preset must compile it
//! to, and budgets the result must keep.
//!
//! A case file (`.pi/forge/tests/<preset-id>/<case>.json`) is
//! `{"schemaVersion": 1, "prompt"?, "messages"?, "runtime"?, "parameters"?, "expect": {"systemPrompt"?,
//! "messages"?, "tools"?}, "budgets"?: {"maxSystemTokens"?, "maxTotalTokens"?, "mustContain"?,
//! "mustNotContain"?}}`. This module is pure: it reads a case from bytes, compiles it against a
//! Preset and says what failed; reading folders and writing files is the caller's.
//!
//! Decisions:
//! - without `runtime`, a case compiles against [`standin_runtime`]: pi-forge's stand-in with a
//!   fixed clock and working directory, so a case gives the same result on every machine and day;
//! - `messages` replaces the runtime's conversation; `parameters` are laid over the Preset's own
//!   `parameters` (a schemaVersion 2 Preset) for this case only;
//! - an expected part that is absent is not checked; `expect` may be empty (budgets only);
//! - token budgets use the preview's count, `ceil(UTF-16 code units / 4)` ([`TOKEN_COUNT_KIND`]):
//!   the system prompt alone for `maxSystemTokens`, the preview's total for `maxTotalTokens`;
//! - `mustContain` / `mustNotContain` look at the system prompt and every message's text;
//! - a Preset that compiles with an error fails the case whatever it expects.

use crate::compile::{self, CompileInput, Compiled, MacroRegistry};
use crate::diag::{Diagnostic, Level};
use crate::diff::text::{diff_lines, hunks, LineTag};
use crate::json;
use crate::runtime::{Clock, RuntimeSnapshot};
use crate::stack::PromptStack;
use serde_json::{Map, Value};
use std::fmt::Write as _;

/// The case format this build reads and writes.
pub const CASE_SCHEMA_VERSION: u64 = 1;

/// Which token count the budgets use, as reports name it.
pub const TOKEN_COUNT_KIND: &str = "approximate (UTF-16 code units / 4)";

/// The stand-in clock of a case without `runtime`: 2026-01-01T00:00:00Z.
pub const STANDIN_EPOCH_MS: i64 = 1_767_225_600_000;

/// The stand-in working directory of a case without `runtime`.
pub const STANDIN_CWD: &str = "/project";

/// Lines of unchanged context around each change in a failure's diff.
const DIFF_CONTEXT: usize = 2;

/// A case file that cannot be used: which field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct CaseError {
    /// The field's path in the file (`expect.tools`, `budgets.maxSystemTokens`), or `file`.
    pub field: String,
    pub message: String,
}

fn case_error(field: &str, message: impl Into<String>) -> CaseError {
    CaseError {
        field: field.to_string(),
        message: message.into(),
    }
}

/// What a case expects; `None` parts are not checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expect {
    pub system_prompt: Option<String>,
    pub messages: Option<Vec<Value>>,
    pub tools: Option<Vec<String>>,
}

/// Limits the compiled result must keep (never rewritten by an update).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Budgets {
    pub max_system_tokens: Option<u64>,
    pub max_total_tokens: Option<u64>,
    pub must_contain: Vec<String>,
    pub must_not_contain: Vec<String>,
}

/// One golden case, read from its file.
#[derive(Debug, Clone, PartialEq)]
pub struct GoldenCase {
    pub prompt: Option<String>,
    pub messages: Option<Vec<Value>>,
    pub runtime: Option<RuntimeSnapshot>,
    pub parameters: Option<Map<String, Value>>,
    pub expect: Expect,
    pub budgets: Budgets,
    /// The file as read, so an update changes `expect` and nothing else.
    pub raw: Map<String, Value>,
}

const CASE_FIELDS: [&str; 7] = [
    "schemaVersion",
    "prompt",
    "messages",
    "runtime",
    "parameters",
    "expect",
    "budgets",
];
const EXPECT_FIELDS: [&str; 3] = ["systemPrompt", "messages", "tools"];
const BUDGET_FIELDS: [&str; 4] = [
    "maxSystemTokens",
    "maxTotalTokens",
    "mustContain",
    "mustNotContain",
];

fn check_fields(map: &Map<String, Value>, known: &[&str], prefix: &str) -> Result<(), CaseError> {
    match map.keys().find(|key| !known.contains(&key.as_str())) {
        Some(key) => Err(case_error(
            &format!("{prefix}{key}"),
            format!("unknown field (known: {})", known.join(", ")),
        )),
        None => Ok(()),
    }
}

fn string(value: &Value, field: &str) -> Result<String, CaseError> {
    value
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| case_error(field, "must be a string"))
}

fn strings(value: &Value, field: &str) -> Result<Vec<String>, CaseError> {
    let items = value
        .as_array()
        .ok_or_else(|| case_error(field, "must be an array of strings"))?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| string(item, &format!("{field}[{i}]")))
        .collect()
}

fn messages(value: &Value, field: &str) -> Result<Vec<Value>, CaseError> {
    let items = value
        .as_array()
        .ok_or_else(|| case_error(field, "must be an array of messages"))?;
    for (i, item) in items.iter().enumerate() {
        if !item.is_object() {
            return Err(case_error(
                &format!("{field}[{i}]"),
                "must be a message object",
            ));
        }
    }
    Ok(items.clone())
}

fn count(value: &Value, field: &str) -> Result<u64, CaseError> {
    value
        .as_u64()
        .ok_or_else(|| case_error(field, "must be a whole number of tokens, 0 or more"))
}

fn object<'a>(value: &'a Value, field: &str) -> Result<&'a Map<String, Value>, CaseError> {
    value
        .as_object()
        .ok_or_else(|| case_error(field, "must be an object"))
}

/// Reads a case file's bytes.
pub fn parse_case(bytes: &[u8]) -> Result<GoldenCase, CaseError> {
    let value =
        json::parse_bytes(bytes).map_err(|e| case_error("file", format!("not valid JSON: {e}")))?;
    let raw = value
        .as_object()
        .ok_or_else(|| case_error("file", "must hold a JSON object"))?
        .clone();
    check_fields(&raw, &CASE_FIELDS, "")?;
    match raw.get("schemaVersion") {
        Some(v) if v.as_u64() == Some(CASE_SCHEMA_VERSION) => {}
        Some(_) => {
            return Err(case_error(
                "schemaVersion",
                format!("must be {CASE_SCHEMA_VERSION}"),
            ))
        }
        None => {
            return Err(case_error(
                "schemaVersion",
                format!("is missing (write \"schemaVersion\": {CASE_SCHEMA_VERSION})"),
            ))
        }
    }
    let prompt = raw.get("prompt").map(|v| string(v, "prompt")).transpose()?;
    let conversation = raw
        .get("messages")
        .map(|v| messages(v, "messages"))
        .transpose()?;
    let runtime = raw
        .get("runtime")
        .map(|v| {
            object(v, "runtime")?;
            serde_json::from_value::<RuntimeSnapshot>(v.clone()).map_err(|e| {
                case_error(
                    "runtime",
                    format!("is not a RuntimeSnapshot ({e}); see docs/file-formats.md"),
                )
            })
        })
        .transpose()?;
    let parameters = raw
        .get("parameters")
        .map(|v| object(v, "parameters").cloned())
        .transpose()?;
    let expect_map = match raw.get("expect") {
        Some(v) => object(v, "expect")?.clone(),
        None => {
            return Err(case_error(
                "expect",
                "is missing (write \"expect\": {} and run `pi-forge test --update`)",
            ))
        }
    };
    check_fields(&expect_map, &EXPECT_FIELDS, "expect.")?;
    let expect = Expect {
        system_prompt: expect_map
            .get("systemPrompt")
            .map(|v| string(v, "expect.systemPrompt"))
            .transpose()?,
        messages: expect_map
            .get("messages")
            .map(|v| messages(v, "expect.messages"))
            .transpose()?,
        tools: expect_map
            .get("tools")
            .map(|v| strings(v, "expect.tools"))
            .transpose()?,
    };
    let budgets = match raw.get("budgets") {
        None => Budgets::default(),
        Some(v) => {
            let map = object(v, "budgets")?;
            check_fields(map, &BUDGET_FIELDS, "budgets.")?;
            Budgets {
                max_system_tokens: map
                    .get("maxSystemTokens")
                    .map(|v| count(v, "budgets.maxSystemTokens"))
                    .transpose()?,
                max_total_tokens: map
                    .get("maxTotalTokens")
                    .map(|v| count(v, "budgets.maxTotalTokens"))
                    .transpose()?,
                must_contain: map
                    .get("mustContain")
                    .map(|v| strings(v, "budgets.mustContain"))
                    .transpose()?
                    .unwrap_or_default(),
                must_not_contain: map
                    .get("mustNotContain")
                    .map(|v| strings(v, "budgets.mustNotContain"))
                    .transpose()?
                    .unwrap_or_default(),
            }
        }
    };
    Ok(GoldenCase {
        prompt,
        messages: conversation,
        runtime,
        parameters,
        expect,
        budgets,
        raw,
    })
}

/// The runtime of a case without `runtime`: the stand-in at [`STANDIN_CWD`] and
/// [`STANDIN_EPOCH_MS`] (UTC).
pub fn standin_runtime() -> RuntimeSnapshot {
    RuntimeSnapshot::default_snapshot(STANDIN_CWD, Clock::utc(STANDIN_EPOCH_MS))
}

/// What a case compiled to: the parts an expectation can name, and the token counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub system_prompt: String,
    pub messages: Vec<Value>,
    pub tools: Vec<String>,
    pub system_tokens: u64,
    pub total_tokens: u64,
    /// Errors the Preset or its compilation reported.
    pub errors: Vec<Diagnostic>,
    /// The system prompt and every message's text, for `mustContain` / `mustNotContain`.
    texts: Vec<String>,
}

/// One way a case failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// `systemPrompt`, `messages`, `tools`, `compile`, or the budget's field name.
    pub part: String,
    /// One line saying what is wrong.
    pub summary: String,
    /// A unified diff, expected (`-`) against compiled (`+`), when the part is text.
    pub diff: Option<String>,
}

fn ceil_quarter(units: usize) -> u64 {
    units.div_ceil(4) as u64
}

/// Compiles `case` against `stack` (its key `stack_key`, the load diagnostics `load`).
pub fn compile_case(
    case: &GoldenCase,
    stack: &PromptStack,
    stack_key: &str,
    load: &[Diagnostic],
) -> Outcome {
    let mut runtime = case.runtime.clone().unwrap_or_else(standin_runtime);
    if let Some(messages) = &case.messages {
        runtime.messages = messages.clone();
    }
    let mut stack = stack.clone();
    if let Some(parameters) = &case.parameters {
        let own = stack.parameters.get_or_insert_with(Map::new);
        for (name, value) in parameters {
            own.insert(name.clone(), value.clone());
        }
    }
    let macros = MacroRegistry::new();
    let mut input = CompileInput::new(Some(&stack), &runtime, &macros);
    input.stack_key = Some(stack_key.to_string());
    input.prompt = case.prompt.clone();
    let compiled: Compiled = compile::compile(&input);
    let preview = compile::preview(&compiled, stack_key, load, &runtime.clock);
    let mut texts = vec![compiled.system_prompt.clone()];
    texts.extend(preview.messages.iter().map(|m| m.content.clone()));
    Outcome {
        system_tokens: ceil_quarter(compiled.system_prompt.encode_utf16().count()),
        total_tokens: preview.approx_tokens as u64,
        system_prompt: compiled.system_prompt.clone(),
        messages: compiled.message_values(),
        tools: compiled.selected_tools.clone(),
        errors: preview
            .diagnostics
            .iter()
            .filter(|d| d.level == Level::Error)
            .cloned()
            .collect(),
        texts,
    }
}

/// A unified diff of two texts (`-` expected, `+` compiled), `None` when they are equal.
pub fn unified_diff(expected: &str, actual: &str) -> Option<String> {
    let lines = diff_lines(expected, actual);
    let groups = hunks(&lines, DIFF_CONTEXT);
    if groups.is_empty() {
        return None;
    }
    let mut out = String::new();
    for hunk in groups {
        let _ = writeln!(
            out,
            "@@ -{},{} +{},{} @@",
            hunk.old_start, hunk.old_len, hunk.new_start, hunk.new_len
        );
        for line in &hunk.lines {
            let mark = match line.tag {
                LineTag::Same => ' ',
                LineTag::Removed => '-',
                LineTag::Added => '+',
            };
            let text: String = line.spans.iter().map(|s| s.text.as_str()).collect();
            let _ = writeln!(out, "{mark}{text}");
        }
    }
    Some(out)
}

fn differs(part: &str, what: &str, expected: &str, actual: &str) -> Failure {
    Failure {
        part: part.to_string(),
        summary: format!("{what} differs from the expected one"),
        diff: unified_diff(expected, actual),
    }
}

/// Everything `outcome` breaks of `case`, in a fixed order: compile errors, the expected parts
/// (system prompt, messages, tools), then the budgets. Empty means the case passes.
pub fn check_case(case: &GoldenCase, outcome: &Outcome) -> Vec<Failure> {
    let mut failures = Vec::new();
    for error in &outcome.errors {
        failures.push(Failure {
            part: "compile".to_string(),
            summary: format!("the Preset reports an error: {}", error.message),
            diff: None,
        });
    }
    if let Some(expected) = &case.expect.system_prompt {
        if *expected != outcome.system_prompt {
            failures.push(differs(
                "systemPrompt",
                "the system prompt",
                expected,
                &outcome.system_prompt,
            ));
        }
    }
    if let Some(expected) = &case.expect.messages {
        if *expected != outcome.messages {
            failures.push(differs(
                "messages",
                "the message layout",
                &json::to_pretty(&Value::Array(expected.clone())),
                &json::to_pretty(&Value::Array(outcome.messages.clone())),
            ));
        }
    }
    if let Some(expected) = &case.expect.tools {
        if *expected != outcome.tools {
            failures.push(Failure {
                part: "tools".to_string(),
                summary: format!(
                    "the tools are [{}], expected [{}]",
                    outcome.tools.join(", "),
                    expected.join(", ")
                ),
                diff: None,
            });
        }
    }
    let budgets = &case.budgets;
    let over = |part: &str, what: &str, limit: Option<u64>, used: u64| {
        limit.filter(|limit| used > *limit).map(|limit| Failure {
            part: part.to_string(),
            summary: format!(
                "{what} is {used} tokens, over the budget of {limit} ({TOKEN_COUNT_KIND})"
            ),
            diff: None,
        })
    };
    failures.extend(over(
        "maxSystemTokens",
        "the system prompt",
        budgets.max_system_tokens,
        outcome.system_tokens,
    ));
    failures.extend(over(
        "maxTotalTokens",
        "the whole request",
        budgets.max_total_tokens,
        outcome.total_tokens,
    ));
    let found = |needle: &str| outcome.texts.iter().any(|text| text.contains(needle));
    for needle in &budgets.must_contain {
        if !found(needle) {
            failures.push(Failure {
                part: "mustContain".to_string(),
                summary: format!("{needle:?} is in neither the system prompt nor any message"),
                diff: None,
            });
        }
    }
    for needle in &budgets.must_not_contain {
        if found(needle) {
            failures.push(Failure {
                part: "mustNotContain".to_string(),
                summary: format!("{needle:?} is in the compiled request"),
                diff: None,
            });
        }
    }
    failures
}

/// The case file with its expected parts set to `outcome`: the parts `expect` names, or all
/// three when it names none. Every other field stays as it was.
pub fn updated_case(case: &GoldenCase, outcome: &Outcome) -> Value {
    let mut raw = case.raw.clone();
    let none = case.expect == Expect::default();
    let mut expect = Map::new();
    if none || case.expect.system_prompt.is_some() {
        expect.insert(
            "systemPrompt".to_string(),
            Value::String(outcome.system_prompt.clone()),
        );
    }
    if none || case.expect.messages.is_some() {
        expect.insert(
            "messages".to_string(),
            Value::Array(outcome.messages.clone()),
        );
    }
    if none || case.expect.tools.is_some() {
        expect.insert(
            "tools".to_string(),
            Value::Array(outcome.tools.iter().cloned().map(Value::String).collect()),
        );
    }
    raw.insert("expect".to_string(), Value::Object(expect));
    Value::Object(raw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::{parse_stack_bytes, ParseOptions};

    const STACK: &str = r#"{"schemaVersion": 2, "type": "pi-forge.prompt-stack", "id": "lean", "mode": "replace",
        "parameters": {"who": "LEAN"},
        "tools": {"allow": ["read", "grep"]},
        "items": [{"id": "sys", "kind": "block", "role": "system", "content": "You are {{ parameters.who }}. Last: {{ runtime.lastUserMessage }}"}]}"#;

    fn stack() -> PromptStack {
        parse_stack_bytes(STACK.as_bytes(), &ParseOptions::new("lean.json")).stack
    }

    fn run(case: &str) -> (GoldenCase, Outcome, Vec<Failure>) {
        let case = parse_case(case.as_bytes()).expect("the case parses");
        let outcome = compile_case(&case, &stack(), "project:lean", &[]);
        let failures = check_case(&case, &outcome);
        (case, outcome, failures)
    }

    #[test]
    fn a_case_compiles_on_the_fixed_standin_and_passes_when_it_matches() {
        let (_, outcome, failures) = run(
            r#"{"schemaVersion": 1, "prompt": "hi", "parameters": {"who": "TERSE"},
                "expect": {"systemPrompt": "You are TERSE. Last: hi", "tools": ["read", "grep"]}}"#,
        );
        assert_eq!(failures, vec![]);
        assert_eq!(outcome.system_tokens, 6); // 23 code units
        assert_eq!(outcome.tools, vec!["read".to_string(), "grep".to_string()]);
    }

    #[test]
    fn a_changed_system_prompt_fails_with_a_unified_diff_and_budgets_name_their_count() {
        let (_, _, failures) = run(r#"{"schemaVersion": 1, "prompt": "hi",
                "expect": {"systemPrompt": "You are LEAN.\nLast: hi", "tools": ["read"]},
                "budgets": {"maxSystemTokens": 2, "mustContain": ["LEAN", "absent"], "mustNotContain": ["hi"]}}"#);
        let summaries: Vec<(&str, &str, Option<&str>)> = failures
            .iter()
            .map(|f| (f.part.as_str(), f.summary.as_str(), f.diff.as_deref()))
            .collect();
        assert_eq!(
            summaries,
            vec![
                (
                    "systemPrompt",
                    "the system prompt differs from the expected one",
                    Some("@@ -1,2 +1,1 @@\n-You are LEAN.\n-Last: hi\n+You are LEAN. Last: hi\n")
                ),
                ("tools", "the tools are [read, grep], expected [read]", None),
                (
                    "maxSystemTokens",
                    "the system prompt is 6 tokens, over the budget of 2 (approximate (UTF-16 code units / 4))",
                    None
                ),
                (
                    "mustContain",
                    "\"absent\" is in neither the system prompt nor any message",
                    None
                ),
                ("mustNotContain", "\"hi\" is in the compiled request", None),
            ]
        );
    }

    #[test]
    fn an_update_rewrites_only_the_expected_parts() {
        let (case, outcome, _) = run(
            r#"{"schemaVersion": 1, "prompt": "hi", "expect": {"tools": []}, "budgets": {"maxTotalTokens": 1}}"#,
        );
        assert_eq!(
            updated_case(&case, &outcome),
            serde_json::json!({"schemaVersion": 1, "prompt": "hi", "expect": {"tools": ["read", "grep"]},
                               "budgets": {"maxTotalTokens": 1}})
        );
        let (case, outcome, _) = run(r#"{"schemaVersion": 1, "expect": {}}"#);
        assert_eq!(
            updated_case(&case, &outcome)["expect"],
            serde_json::json!({"systemPrompt": "You are LEAN. Last:", "messages": [], "tools": ["read", "grep"]})
        );
    }

    #[test]
    fn malformed_cases_name_the_field() {
        let error = |text: &str| parse_case(text.as_bytes()).unwrap_err().to_string();
        assert_eq!(error("[1]"), "file: must hold a JSON object");
        assert_eq!(
            error(r#"{"expect": {}}"#),
            "schemaVersion: is missing (write \"schemaVersion\": 1)"
        );
        assert_eq!(
            error(r#"{"schemaVersion": 2, "expect": {}}"#),
            "schemaVersion: must be 1"
        );
        assert_eq!(
            error(r#"{"schemaVersion": 1, "expct": {}}"#),
            "expct: unknown field (known: schemaVersion, prompt, messages, runtime, parameters, expect, budgets)"
        );
        assert_eq!(
            error(r#"{"schemaVersion": 1}"#),
            "expect: is missing (write \"expect\": {} and run `pi-forge test --update`)"
        );
        assert_eq!(
            error(r#"{"schemaVersion": 1, "expect": {"tools": ["read", 3]}}"#),
            "expect.tools[1]: must be a string"
        );
        assert_eq!(
            error(r#"{"schemaVersion": 1, "expect": {}, "budgets": {"maxSystemTokens": -1}}"#),
            "budgets.maxSystemTokens: must be a whole number of tokens, 0 or more"
        );
        assert_eq!(
            error(r#"{"schemaVersion": 1, "expect": {"system": "x"}}"#),
            "expect.system: unknown field (known: systemPrompt, messages, tools)"
        );
        assert_eq!(
            error(r#"{"schemaVersion": 1, "messages": [1], "expect": {}}"#),
            "messages[0]: must be a message object"
        );
    }
}
