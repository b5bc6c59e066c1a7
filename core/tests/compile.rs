//! Prompt compiler: prompt-stacks spec §7 vectors 30–52 and 59, every built-in slot's options,
//! the chat-history pipeline, tool/skill policy, custom slots, and previews (§6).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use forge_core::compile::{
    compile, compile_with_env, preview, preview_text, CompileInput, Compiled, Compiler,
    MessageSource, SlotContext, SlotRegistry, SlotRenderer, SKILLS_PREAMBLE,
};
use forge_core::diag::Diagnostic;
use forge_core::message::{content_text, OtherParts};
use forge_core::runtime::{Clock, ContextFile, ModelInfo, RuntimeSnapshot, SkillInfo, ToolInfo};
use forge_core::stack::{parse_stack_value, ParseOptions, PromptStack, Role};
use forge_core::template::{Macro, MacroRegistry, Scope};
use serde_json::{json, Map, Value};

// ------------------------------------------------------------------------------------------------
// helpers

fn clock() -> Clock {
    Clock::from_local((2026, 6, 13), (9, 8, 7), 0)
}

fn tool(name: &str, snippet: Option<&str>) -> ToolInfo {
    ToolInfo {
        name: name.to_string(),
        snippet: snippet.map(str::to_string),
        active: true,
        ..ToolInfo::default()
    }
}

fn inactive(name: &str, snippet: Option<&str>) -> ToolInfo {
    ToolInfo {
        active: false,
        ..tool(name, snippet)
    }
}

fn skill(name: &str, description: &str, path: &str) -> SkillInfo {
    SkillInfo {
        name: name.to_string(),
        description: description.to_string(),
        file_path: path.to_string(),
        disable_model_invocation: false,
    }
}

/// Runtime R of §7.
fn runtime_r() -> RuntimeSnapshot {
    RuntimeSnapshot {
        cwd: "/home/user/project".into(),
        base_system_prompt: "base".into(),
        tools: vec![tool("read", Some("Read files from disk."))],
        prompt_guidelines: vec!["Use read before editing files.".into()],
        clock: clock(),
        ..RuntimeSnapshot::default()
    }
}

fn stack_from(mut value: Value) -> PromptStack {
    let obj = value.as_object_mut().expect("object");
    obj.entry("id").or_insert(json!("s"));
    let parsed = parse_stack_value(value, &ParseOptions::new("s.json"));
    parsed.stack
}

fn stack(items: Value) -> PromptStack {
    stack_from(json!({ "items": items }))
}

fn block(id: &str, role: &str, content: &str) -> Value {
    json!({"kind": "block", "id": id, "role": role, "content": content})
}

fn sys(id: &str, content: &str) -> Value {
    block(id, "system", content)
}

fn slot(id: &str, role: &str, name: &str, options: Value) -> Value {
    json!({"kind": "slot", "id": id, "role": role, "slot": name, "options": options})
}

fn history(id: &str, options: Value) -> Value {
    json!({"kind": "slot", "id": id, "slot": "chat-history", "options": options})
}

fn u(text: &str) -> Value {
    json!({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1})
}

fn a(parts: Value) -> Value {
    json!({"role": "assistant", "content": parts, "provider": "p", "model": "m", "timestamp": 2})
}

fn text(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

fn call(id: &str) -> Value {
    json!({"type": "toolCall", "id": id, "name": "read", "arguments": {}})
}

fn thinking(t: &str) -> Value {
    json!({"type": "thinking", "thinking": t})
}

fn result(id: &str) -> Value {
    json!({"role": "toolResult", "toolCallId": id, "toolName": "read",
           "content": [{"type": "text", "text": format!("out {id}")}], "isError": false})
}

fn run(stack: &PromptStack, rt: &RuntimeSnapshot) -> Compiled {
    let macros = MacroRegistry::new();
    compile(&CompileInput::new(Some(stack), rt, &macros))
}

fn run_items(items: Value) -> Compiled {
    run(&stack(items), &runtime_r())
}

/// `L [item] message` per diagnostic.
fn diags(list: &[Diagnostic]) -> Vec<String> {
    list.iter()
        .map(|d| match &d.item_id {
            Some(item) => format!("{} [{item}] {}", d.level.letter(), d.message),
            None => format!("{} {}", d.level.letter(), d.message),
        })
        .collect()
}

fn texts(compiled: &Compiled) -> Vec<String> {
    compiled
        .messages
        .iter()
        .map(|m| match m.message.get("content") {
            Some(content) => content_text(content, OtherParts::Labels),
            None => String::new(),
        })
        .collect()
}

/// The raw (untrimmed) output of one slot, rendered as a user message; `None` when it is blank.
fn slot_output(rt: &RuntimeSnapshot, name: &str, options: Value) -> Option<String> {
    slot_output_in(rt, json!({}), name, options)
}

fn slot_output_in(
    rt: &RuntimeSnapshot,
    stack_fields: Value,
    name: &str,
    options: Value,
) -> Option<String> {
    let mut fields = stack_fields;
    fields["items"] = json!([
        slot("the-slot", "user", name, options),
        history("h", json!({}))
    ]);
    let compiled = run(&stack_from(fields), rt);
    compiled
        .messages
        .iter()
        .find(|m| matches!(m.source, MessageSource::StackItem { .. }))
        .map(|m| content_text(&m.message["content"], OtherParts::Labels))
}

// ------------------------------------------------------------------------------------------------
// §7 System prompt vectors 30–42

#[test]
fn v30_system_items_in_order() {
    let compiled = run_items(json!([
        sys("a", "A"),
        block("x", "user", "x"),
        slot("d", "system", "date", json!({})),
        sys("b", "B"),
        history("h", json!({}))
    ]));
    assert_eq!(compiled.system_prompt, "A\n\nCurrent date: 2026-06-13\n\nB");
    assert!(
        compiled.diagnostics.is_empty(),
        "{:?}",
        compiled.diagnostics
    );
}

#[test]
fn v31_date_and_date_cwd_with_time() {
    let compiled = run_items(json!([
        slot("d", "system", "date", json!({"includeTime": true})),
        slot("dc", "system", "date-cwd", json!({"includeTime": true})),
        history("h", json!({}))
    ]));
    assert_eq!(
        compiled.system_prompt,
        "Current date: 2026-06-13\nCurrent time: 09:08:07\n\nCurrent date: 2026-06-13\nCurrent time: 09:08:07\nCurrent working directory: /home/user/project"
    );
    assert!(compiled.diagnostics.is_empty());
}

#[test]
fn v32_base_fallback_when_empty() {
    let mut rt = runtime_r();
    rt.base_system_prompt = "base prompt".into();
    let compiled = run(
        &stack(json!([
            block("u", "user", "hello"),
            history("h", json!({}))
        ])),
        &rt,
    );
    assert_eq!(compiled.system_prompt, "base prompt");
    assert_eq!(
        diags(&compiled.diagnostics),
        ["W Compiled system prompt is empty; preserving base system prompt."]
    );
}

#[test]
fn v32_base_fallback_when_failed() {
    let compiled = run_items(json!([
        sys("block", "A {{missing}}"),
        history("h", json!({}))
    ]));
    assert_eq!(compiled.system_prompt, "base");
    assert_eq!(
        diags(&compiled.diagnostics),
        [
            "E [block] forge-v1 render error: Undefined forge-v1 path: {{missing}}",
            "W Compiled system prompt failed; preserving base system prompt."
        ]
    );
}

fn base_rule() -> Value {
    json!({"rules": [{"id": "r", "stage": "compiled", "pattern": "base", "replace": "BASE",
                      "targets": ["system"]}]})
}

const RULE_INFO: &str =
    "I Regex rule r matched 1 time(s) and changed 1 text segment(s) in compiled/system.";

#[test]
fn v33_append_mode_with_system_rule() {
    let s = stack_from(json!({
        "mode": "append",
        "regex": base_rule(),
        "items": [sys("x", " X "), history("h", json!({}))]
    }));
    let compiled = run(&s, &runtime_r());
    assert_eq!(compiled.system_prompt, "BASE\n\nX");
    assert_eq!(diags(&compiled.diagnostics), [RULE_INFO]);
}

#[test]
fn v33_prepend_mode() {
    let s =
        stack_from(json!({"mode": "prepend", "items": [sys("x", " X "), history("h", json!({}))]}));
    assert_eq!(run(&s, &runtime_r()).system_prompt, "X\n\nbase");
}

#[test]
fn v33_empty_stack_with_rule_rewrites_base() {
    let s = stack_from(json!({"regex": base_rule(), "items": []}));
    let compiled = run(&s, &runtime_r());
    assert_eq!(compiled.system_prompt, "BASE");
    assert_eq!(
        diags(&compiled.diagnostics),
        [
            "W Compiled system prompt is empty; preserving base system prompt.",
            RULE_INFO
        ]
    );
}

#[test]
fn v33_history_slot_in_system_role() {
    let mut rt = runtime_r();
    rt.messages = vec![u("hi")];
    let s = stack(json!([
        {"kind": "slot", "id": "hist", "role": "system", "slot": "chat-history"},
        sys("x", "X")
    ]));
    let compiled = run(&s, &rt);
    assert_eq!(compiled.system_prompt, "X");
    assert_eq!(
        diags(&compiled.diagnostics),
        ["W [hist] chat-history slot cannot be placed in the system prompt."]
    );
    // The slot still expands in the message list.
    assert_eq!(texts(&compiled), ["hi"]);
    assert!(matches!(
        &compiled.messages[0].source,
        MessageSource::ChatHistory { item_id, .. } if item_id == "hist"
    ));
}

#[test]
fn v34_variables_and_parameters() {
    let v1 = stack_from(json!({
        "variables": {"name": "static", "char": "Konata"},
        "items": [sys("a", "{{name}}/{{char}}"), history("h", json!({}))]
    }));
    assert_eq!(run(&v1, &runtime_r()).system_prompt, "static/Konata");
    let v2 = stack_from(json!({
        "schemaVersion": 2,
        "parameters": {"audience": "main agent", "upper": "loud"},
        "items": [sys("a", "For {{ parameters.audience }}: {{ parameters.upper | upper }}"),
                  history("h", json!({}))]
    }));
    assert_eq!(run(&v2, &runtime_r()).system_prompt, "For main agent: LOUD");
    let time = run_items(json!([
        sys("a", "{{date}} {{time}}"),
        history("h", json!({}))
    ]));
    assert_eq!(time.system_prompt, "2026-06-13 09:08:07");
}

fn four_tools() -> RuntimeSnapshot {
    let mut rt = runtime_r();
    rt.tools = vec![
        tool("read", Some("Read files.")),
        tool("bash", Some("Run shell commands.")),
        tool("edit", Some("Edit files.")),
        tool("write", Some("Write files.")),
    ];
    rt
}

#[test]
fn v35_tool_policy_selects_tools() {
    let s = stack_from(json!({
        "tools": {"allow": ["read", "bash", "write"]},
        "items": [
            slot("t", "system", "tools", json!({"format": "plain"})),
            sys("sel", "Selected: {{tools}}"),
            history("h", json!({}))
        ]
    }));
    let compiled = run(&s, &four_tools());
    assert_eq!(
        compiled.system_prompt,
        "Available tools:\n- read: Read files.\n- bash: Run shell commands.\n- write: Write files.\n\nSelected: read, bash, write"
    );
    assert_eq!(compiled.selected_tools, ["read", "bash", "write"]);
}

#[test]
fn v36_xml_tools_escape_and_missing_snippet() {
    let mut rt = runtime_r();
    rt.tools = vec![
        tool("read", Some("Read <files> & \"x\"")),
        tool("bash", None),
    ];
    assert_eq!(
        slot_output(&rt, "tools", json!({})).unwrap(),
        "<available_tools>\n  <tool name=\"read\">Read &lt;files&gt; &amp; &quot;x&quot;</tool>\n  <tool name=\"bash\">No prompt snippet provided.</tool>\n</available_tools>"
    );
}

#[test]
fn v36_empty_tool_lists() {
    let mut rt = runtime_r();
    rt.tools.clear();
    assert_eq!(
        slot_output(&rt, "tools", json!({})).unwrap(),
        "<available_tools>\n  (none)\n</available_tools>"
    );
    assert_eq!(
        slot_output(&rt, "tools", json!({"format": "plain"})).unwrap(),
        "Available tools:\n- (none)"
    );
    assert_eq!(
        slot_output(
            &rt,
            "tools",
            json!({"format": "plain", "onlyWithSnippets": true})
        )
        .unwrap(),
        "Available tools:\n(none)"
    );
}

/// The inputs of vector 37.
fn runtime_37() -> RuntimeSnapshot {
    let mut rt = runtime_r();
    rt.tools = vec![
        tool("read", Some("Read files\nfrom disk.")),
        tool("bash", Some("Run shell commands.")),
    ];
    rt.prompt_guidelines = vec!["Use read\nbefore edits.".into()];
    rt.skills = vec![
        skill(
            "review",
            "Review code\nfor regressions.",
            "/skills/review/SKILL.md",
        ),
        SkillInfo {
            disable_model_invocation: true,
            ..skill("hidden", "Hidden skill.", "/skills/hidden/SKILL.md")
        },
    ];
    rt.context_files = vec![ContextFile {
        path: ".pi/instructions.md".into(),
        content: "Project <rules>\nSecond line.".into(),
    }];
    rt
}

#[test]
fn v37_plain_multiline_tools() {
    assert_eq!(
        slot_output(&runtime_37(), "tools", json!({"format": "plain"})).unwrap(),
        "Available tools:\n- read: Read files\n  from disk.\n- bash: Run shell commands."
    );
}

#[test]
fn v37_plain_multiline_guidelines() {
    assert_eq!(
        slot_output(&runtime_37(), "tool-guidelines", json!({"format": "plain"})).unwrap(),
        "Tool guidelines:\n- Use bash for file operations like ls, rg, find.\n- Use read\n  before edits."
    );
}

#[test]
fn v37_plain_skills_hide_disabled() {
    let rt = runtime_37();
    let out = slot_output(&rt, "skills", json!({"format": "plain"})).unwrap();
    assert_eq!(
        out,
        format!(
            "{SKILLS_PREAMBLE}\nAvailable skills:\n- review: Review code\n  for regressions.\n  Location: /skills/review/SKILL.md"
        )
    );
    assert!(!out.contains("hidden"));
    let compiled = run(&stack(json!([history("h", json!({}))])), &rt);
    assert_eq!(compiled.selected_skills, ["review"]);
}

#[test]
fn v37_plain_project_context() {
    assert_eq!(
        slot_output(&runtime_37(), "project-context", json!({"format": "plain"})).unwrap(),
        "Project context:\n\nProject-specific instructions and guidelines:\n\nPath: .pi/instructions.md\n  Project <rules>\n  Second line."
    );
}

fn runtime_38() -> RuntimeSnapshot {
    let mut rt = runtime_r();
    rt.tools = vec![
        tool("bash", Some("Run shell commands.")),
        tool("custom", None),
    ];
    rt.prompt_guidelines = vec!["Use bash deliberately.".into()];
    rt.skills = vec![skill("review", "Review code.", "/skills/review/SKILL.md")];
    rt
}

#[test]
fn v38_pi_style_guidelines() {
    let options = json!({"format": "plain", "heading": "Guidelines:", "piStyle": true,
                         "includePiDefaultGuidelines": true});
    assert_eq!(
        slot_output(&runtime_38(), "tool-guidelines", options).unwrap(),
        "Guidelines:\n- Use bash for file operations like ls, rg, find\n- Use bash deliberately.\n- Be concise in your responses\n- Show file paths clearly when working with files"
    );
}

#[test]
fn v38_require_read_tool_omits_skills() {
    let rt = runtime_38();
    assert_eq!(
        slot_output(&rt, "skills", json!({"requireReadTool": true})),
        None
    );
    // Without the requirement the skill is listed.
    assert!(slot_output(&rt, "skills", json!({}))
        .unwrap()
        .contains("<name>review</name>"));
    let compiled = run(
        &stack(json!([
            sys("a", "A"),
            slot("sk", "system", "skills", json!({"requireReadTool": true})),
            history("h", json!({}))
        ])),
        &rt,
    );
    assert_eq!(compiled.system_prompt, "A");
}

#[test]
fn v39_skills_policy() {
    let mut rt = runtime_r();
    rt.skills = vec![
        skill("review", "Review.", "/s/review/SKILL.md"),
        skill("browser-search", "Search.", "/s/bs/SKILL.md"),
        skill("browser-danger", "Danger.", "/s/bd/SKILL.md"),
        skill("write", "Write.", "/s/write/SKILL.md"),
    ];
    let s = stack_from(json!({
        "skills": {"allow": ["review", "browser-*"]},
        "items": [slot("sk", "system", "skills", json!({"format": "plain"})), history("h", json!({}))]
    }));
    let compiled = run(&s, &rt);
    assert_eq!(
        compiled.selected_skills,
        ["review", "browser-search", "browser-danger"]
    );
    assert!(compiled.system_prompt.contains("- browser-danger: Danger."));
    assert!(!compiled.system_prompt.contains("- write:"));
}

#[test]
fn v40_simple_slot_outputs() {
    let mut rt = runtime_r();
    rt.cwd = "C:\\work\\proj".into();
    assert_eq!(
        slot_output(&rt, "cwd", json!({})).unwrap(),
        "Current working directory: C:/work/proj"
    );
    assert_eq!(
        slot_output(&rt, "active-model", json!({})).unwrap(),
        "Current model: (none)"
    );
    rt.model = Some(ModelInfo {
        provider: "prov".into(),
        id: "mid".into(),
        api: None,
    });
    assert_eq!(
        slot_output(&rt, "active-model", json!({})).unwrap(),
        "Current model: prov/mid"
    );
    rt.append_system_prompt = Some("  APPEND  ".into());
    assert_eq!(
        slot_output(&rt, "append-system-prompt", json!({})).unwrap(),
        "  APPEND  "
    );
    let compiled = run(
        &stack(json!([
            slot("ap", "system", "append-system-prompt", json!({})),
            history("h", json!({}))
        ])),
        &rt,
    );
    assert_eq!(compiled.system_prompt, "APPEND");
}

#[test]
fn v41_slot_limit_drops_project_context() {
    let mut rt = runtime_r();
    rt.context_files = vec![ContextFile {
        path: "AGENTS.md".into(),
        content: "x".repeat(20_000),
    }];
    let compiled = run(
        &stack(json!([
            sys("a", "A"),
            slot("pc", "system", "project-context", json!({})),
            history("h", json!({}))
        ])),
        &rt,
    );
    assert_eq!(compiled.system_prompt, "A");
    assert_eq!(
        diags(&compiled.diagnostics),
        ["E [pc] Slot \"project-context\" exceeds 16384 characters."]
    );
}

#[test]
fn v41_block_limit() {
    let ok = run_items(json!([
        sys("big", &"y".repeat(100_000)),
        history("h", json!({}))
    ]));
    assert_eq!(ok.system_prompt.len(), 100_000);
    assert!(ok.diagnostics.is_empty());
    let too_big = run_items(json!([
        sys("big", &"y".repeat(100_001)),
        history("h", json!({}))
    ]));
    assert_eq!(too_big.system_prompt, "base");
    assert_eq!(
        diags(&too_big.diagnostics),
        [
            "E [big] forge-v1 render error: forge-v1 template output exceeds 100000 characters.",
            "W Compiled system prompt failed; preserving base system prompt."
        ]
    );
}

// ------------------------------------------------------------------------------------------------
// Vector 42: macros

type RenderFn = dyn Fn(&Scope, &BTreeMap<String, String>) -> Result<String, String> + Send + Sync;

struct TestMacro {
    deps: Vec<String>,
    calls: Arc<AtomicUsize>,
    render: Box<RenderFn>,
}

impl Macro for TestMacro {
    fn dependencies(&self) -> Vec<String> {
        self.deps.clone()
    }
    fn render(&self, scope: &Scope, resolved: &BTreeMap<String, String>) -> Result<String, String> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        (self.render)(scope, resolved)
    }
}

fn register(
    registry: &mut MacroRegistry,
    name: &str,
    deps: &[&str],
    render: impl Fn(&Scope, &BTreeMap<String, String>) -> Result<String, String> + Send + Sync + 'static,
) -> Arc<AtomicUsize> {
    let calls = Arc::new(AtomicUsize::new(0));
    registry
        .register(
            name,
            Box::new(TestMacro {
                deps: deps.iter().map(|d| d.to_string()).collect(),
                calls: calls.clone(),
                render: Box::new(render),
            }),
        )
        .unwrap();
    calls
}

fn run_with_macros(items: Value, macros: &MacroRegistry) -> Compiled {
    let s = stack(items);
    let rt = runtime_r();
    compile(&CompileInput::new(Some(&s), &rt, macros))
}

#[test]
fn v42_macro_dependencies_resolve_first() {
    let mut macros = MacroRegistry::new();
    register(&mut macros, "A", &["extensions.B"], |_, r| {
        Ok(format!("A({})", r["B"]))
    });
    register(&mut macros, "B", &[], |_, _| Ok("B".into()));
    let compiled = run_with_macros(
        json!([sys("m", "{{ extensions.A }}"), history("h", json!({}))]),
        &macros,
    );
    assert_eq!(compiled.system_prompt, "A(B)");
    assert!(compiled.diagnostics.is_empty());
}

#[test]
fn v42_macro_failures() {
    let mut macros = MacroRegistry::new();
    register(&mut macros, "A", &["extensions.B"], |_, _| Ok("a".into()));
    register(&mut macros, "B", &["extensions.A"], |_, _| Ok("b".into()));
    register(&mut macros, "X", &[], |_, _| Err("boom".into()));
    register(&mut macros, "big", &[], |_, _| Ok("x".repeat(100_000)));
    let compiled = run_with_macros(
        json!([
            sys("cycle", "{{ extensions.A }}"),
            sys("throw", "{{ extensions.X }}"),
            sys("big", "{{ extensions.big }}"),
            sys(
                "lazy",
                "{% if runtime.tool.bash %}{{ extensions.X }}{% else %}ok{% endif %}"
            ),
            history("h", json!({}))
        ]),
        &macros,
    );
    assert_eq!(compiled.system_prompt, "ok");
    assert_eq!(
        diags(&compiled.diagnostics),
        [
            "E [cycle] forge-v1 render error: forge-v1 extension cycle detected at: A",
            "E [throw] forge-v1 render error: forge-v1 extension X failed: boom",
            "E [big] forge-v1 render error: forge-v1 extension big exceeds 16384 characters."
        ]
    );
}

fn latest_macro(macros: &mut MacroRegistry) -> Arc<AtomicUsize> {
    register(macros, "u", &[], |scope, _| {
        Ok(format!(
            "u={}",
            scope.runtime["lastUserMessage"].as_str().unwrap_or("?")
        ))
    })
}

fn macro_stack() -> PromptStack {
    stack(json!([
        sys("s", "s={{ extensions.u }}"),
        block("m", "user", "m={{ extensions.u }}"),
        history("h", json!({}))
    ]))
}

#[test]
fn v42_one_macro_call_for_system_and_messages() {
    let mut macros = MacroRegistry::new();
    let calls = latest_macro(&mut macros);
    let s = macro_stack();
    let mut rt = runtime_r();
    rt.messages = vec![u("latest request")];
    let compiled = compile(&CompileInput::new(Some(&s), &rt, &macros));
    assert_eq!(compiled.system_prompt, "s=u=latest request");
    assert_eq!(texts(&compiled), ["m=u=latest request", "latest request"]);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn v42_new_latest_message_reruns_macros() {
    let mut macros = MacroRegistry::new();
    let calls = latest_macro(&mut macros);
    let s = macro_stack();
    let rt = runtime_r();
    let mut input = CompileInput::new(Some(&s), &rt, &macros);
    input.latest_user_message = Some("old".into());
    let mut compiler = Compiler::new(&input);
    let (system, _) = compiler.compile_system();
    compiler.set_latest_user_message("new");
    let (messages, _) = compiler.compile_messages(&[]);
    assert_eq!(system, "s=u=old");
    assert_eq!(
        content_text(&messages[0].message["content"], OtherParts::Labels),
        "m=u=new"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    // The same message again: the cached value is reused.
    let calls_same = {
        let mut macros = MacroRegistry::new();
        let calls = latest_macro(&mut macros);
        let mut input = CompileInput::new(Some(&s), &rt, &macros);
        input.latest_user_message = Some("old".into());
        let mut compiler = Compiler::new(&input);
        compiler.compile_system();
        compiler.set_latest_user_message("old");
        compiler.compile_messages(&[]);
        calls.load(Ordering::SeqCst)
    };
    assert_eq!(calls_same, 1);
}

// ------------------------------------------------------------------------------------------------
// §7 Message vectors 43–52

fn host_43() -> Vec<Value> {
    vec![u("first"), a(json!([text("reply")])), u("latest request")]
}

#[test]
fn v43_history_between_synthetic_messages() {
    let mut rt = runtime_r();
    rt.messages = host_43();
    let s = stack(json!([
        block("before", "user", "before"),
        history("history", json!({"includeLastUserMessage": false})),
        block("after", "user", "latest: {{lastUserMessage}}")
    ]));
    let compiled = run(&s, &rt);
    assert_eq!(
        texts(&compiled),
        ["before", "first", "reply", "latest: latest request"]
    );
    let user = |id: &str| MessageSource::StackItem {
        item_id: id.into(),
        item_name: None,
        role: Role::User,
    };
    let hist = |index: usize| MessageSource::ChatHistory {
        item_id: "history".into(),
        item_name: None,
        history_index: index,
        history_count: 2,
    };
    let sources: Vec<MessageSource> = compiled.messages.iter().map(|m| m.source.clone()).collect();
    assert_eq!(sources, [user("before"), hist(1), hist(2), user("after")]);
    // History messages are the host's objects, unchanged.
    assert_eq!(compiled.messages[1].message, rt.messages[0]);
    assert_eq!(compiled.messages[2].message, rt.messages[1]);
}

fn history_run(options: Value, host: Vec<Value>) -> Compiled {
    let mut rt = runtime_r();
    rt.messages = host;
    run(&stack(json!([history("h", options)])), &rt)
}

fn infos(compiled: &Compiled) -> Vec<String> {
    diags(&compiled.diagnostics)
        .into_iter()
        .filter(|d| !d.starts_with("W Compiled system prompt"))
        .collect()
}

#[test]
fn v44_strip_assistant_thinking() {
    let host = vec![
        a(json!([thinking("hmm"), text("answer"), call("c1")])),
        result("c1"),
    ];
    let compiled = history_run(json!({"stripAssistantThinking": true}), host.clone());
    assert_eq!(
        compiled.message_values(),
        [a(json!([text("answer"), call("c1")])), host[1].clone()]
    );
    assert_eq!(
        infos(&compiled),
        ["I [h] Stripped 1 assistant thinking block(s) from 1 chat-history message(s)."]
    );
}

#[test]
fn v44_thinking_only_message_is_dropped() {
    let host = vec![u("q"), a(json!([thinking("only")])), u("next")];
    let compiled = history_run(json!({"stripAssistantThinking": true}), host);
    assert_eq!(texts(&compiled), ["q", "next"]);
    assert_eq!(
        infos(&compiled),
        ["I [h] Stripped 1 assistant thinking block(s) from 1 chat-history message(s) and dropped 1 empty assistant message(s)."]
    );
}

#[test]
fn v44_user_thinking_is_kept() {
    let host = vec![json!({"role": "user", "content": [thinking("t"), text("u")]})];
    let compiled = history_run(json!({"stripAssistantThinking": true}), host.clone());
    assert_eq!(compiled.message_values(), host);
    assert!(infos(&compiled).is_empty());
}

#[test]
fn v45_summary_role_and_char_filters() {
    let host = vec![
        json!({"role": "compactionSummary", "summary": "earlier", "tokensBefore": 10}),
        u("old long user message"),
        a(json!([text("answer")])),
        u("latest"),
    ];
    let compiled = history_run(
        json!({"includeSummaries": false, "roles": ["user"], "maxMessages": 2, "maxChars": 20}),
        host,
    );
    assert_eq!(texts(&compiled), ["latest"]);
    assert_eq!(
        infos(&compiled),
        [
            "I [h] Filtered 1 chat-history message(s) by summary.",
            "I [h] Filtered 1 chat-history message(s) by role.",
            "I [h] Trimmed chat history from 2 to 1 message(s) by maxChars."
        ]
    );
}

#[test]
fn v46_tool_mode_drop() {
    let host = vec![
        a(json!([text("looking"), call("c1")])),
        result("c1"),
        u("continue"),
    ];
    let compiled = history_run(json!({"toolMode": "drop"}), host);
    assert_eq!(
        compiled.message_values(),
        [a(json!([text("looking")])), u("continue")]
    );
    assert_eq!(
        infos(&compiled),
        ["I [h] Dropped tool history from chat-history: removed 1 tool call(s), dropped 1 tool result message(s)."]
    );
}

#[test]
fn v46_tool_mode_drop_reports_empty_messages() {
    let host = vec![a(json!([call("c1")])), result("c1"), u("continue")];
    let compiled = history_run(json!({"toolMode": "drop"}), host);
    assert_eq!(texts(&compiled), ["continue"]);
    assert_eq!(
        infos(&compiled),
        ["I [h] Dropped tool history from chat-history: removed 1 tool call(s), dropped 1 tool result message(s), and dropped 1 empty message(s)."]
    );
}

#[test]
fn v46_role_filter_repairs_tool_pairs() {
    let host = vec![a(json!([call("c1")])), result("c1"), u("continue")];
    let compiled = history_run(json!({"roles": ["toolResult", "user"]}), host);
    assert_eq!(texts(&compiled), ["continue"]);
    assert_eq!(
        infos(&compiled),
        [
            "I [h] Filtered 1 chat-history message(s) by role.",
            "I [h] Repaired tool history after chat-history filtering: removed 0 dangling tool call(s), dropped 1 dangling tool result message(s)."
        ]
    );
}

fn host_47() -> Vec<Value> {
    vec![
        u("q"),
        a(json!([text("t"), call("c1")])),
        result("c1"),
        a(json!([call("c2")])),
        result("c2"),
        u("last"),
    ]
}

#[test]
fn v47_max_messages_repairs_dangling_result() {
    let h = host_47();
    let compiled = history_run(json!({"maxMessages": 4}), h.clone());
    assert_eq!(
        compiled.message_values(),
        [h[3].clone(), h[4].clone(), h[5].clone()]
    );
    assert_eq!(
        infos(&compiled),
        [
            "I [h] Trimmed chat history from 6 to 4 message(s) by maxMessages.",
            "I [h] Repaired tool history after chat-history filtering: removed 0 dangling tool call(s), dropped 1 dangling tool result message(s)."
        ]
    );
}

#[test]
fn v47_max_messages_without_repair() {
    let h = host_47();
    let compiled = history_run(json!({"maxMessages": 3}), h.clone());
    assert_eq!(
        compiled.message_values(),
        [h[3].clone(), h[4].clone(), h[5].clone()]
    );
    assert_eq!(
        infos(&compiled),
        ["I [h] Trimmed chat history from 6 to 3 message(s) by maxMessages."]
    );
}

#[test]
fn v47_role_filter_strips_dangling_calls() {
    let h = host_47();
    let compiled = history_run(json!({"roles": ["assistant", "user"]}), h.clone());
    assert_eq!(
        compiled.message_values(),
        [h[0].clone(), a(json!([text("t")])), h[5].clone()]
    );
    assert_eq!(
        infos(&compiled),
        [
            "I [h] Filtered 2 chat-history message(s) by role.",
            "I [h] Repaired tool history after chat-history filtering: removed 2 dangling tool call(s), dropped 0 dangling tool result message(s), and dropped 1 empty message(s)."
        ]
    );
}

#[test]
fn v47_empty_roles_is_a_no_op() {
    let h = host_47();
    let compiled = history_run(json!({"roles": []}), h.clone());
    assert_eq!(compiled.message_values(), h);
    assert!(infos(&compiled).is_empty());
}

#[test]
fn v48_duplicate_history_is_skipped() {
    let mut rt = runtime_r();
    rt.messages = vec![u("one")];
    let compiled = run(
        &stack(json!([
            history("history", json!({})),
            history("history-2", json!({}))
        ])),
        &rt,
    );
    assert_eq!(texts(&compiled), ["one"]);
    assert_eq!(
        infos(&compiled),
        ["W [history-2] Skipped duplicate chat-history slot."]
    );
}

#[test]
fn v48_allowed_duplicates() {
    let mut rt = runtime_r();
    rt.messages = vec![u("u1"), a(json!([text("a1")])), u("u2")];
    let s = stack_from(json!({
        "context": {"allowDuplicateChatHistory": true},
        "items": [
            {"kind": "slot", "id": "h1", "slot": "chat-history", "enabled": false},
            history("h2", json!({"maxMessages": 1})),
            history("h3", json!({"includeLastUserMessage": false}))
        ]
    }));
    let compiled = run(&s, &rt);
    assert_eq!(texts(&compiled), ["u2", "u1", "a1"]);
    let sources: Vec<(String, usize, usize)> = compiled
        .messages
        .iter()
        .map(|m| match &m.source {
            MessageSource::ChatHistory {
                item_id,
                history_index,
                history_count,
                ..
            } => (item_id.clone(), *history_index, *history_count),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        sources,
        [
            ("h2".to_string(), 1, 1),
            ("h3".to_string(), 1, 2),
            ("h3".to_string(), 2, 2)
        ]
    );
}

#[test]
fn v48_implicit_history_goes_last() {
    let mut rt = runtime_r();
    rt.messages = vec![u("hello")];
    let compiled = run(
        &stack(json!([
            block("a", "assistant", "prefill"),
            block("u", "user", "note")
        ])),
        &rt,
    );
    assert_eq!(texts(&compiled), ["prefill", "note", "hello"]);
    assert_eq!(compiled.messages[2].source, MessageSource::ImplicitHistory);
    assert_eq!(compiled.messages[2].message, rt.messages[0]);
}

#[test]
fn v49_unsupported_slot() {
    let mut rt = runtime_r();
    rt.messages = vec![u("original")];
    let compiled = run(
        &stack(json!([
            slot("nr", "user", "not-real", json!({})),
            history("h", json!({}))
        ])),
        &rt,
    );
    assert_eq!(texts(&compiled), ["original"]);
    assert_eq!(infos(&compiled), ["W [nr] Unsupported slot: not-real"]);
}

#[test]
fn v50_custom_message_shape() {
    let s = stack_from(json!({
        "defaults": {"syntheticMessagesVisible": true},
        "items": [block("c", "custom", "note"), history("h", json!({}))]
    }));
    let compiled = run(&s, &runtime_r());
    let epoch = clock().epoch_ms;
    assert_eq!(
        compiled.messages[0].message,
        json!({"role": "custom", "customType": "pi-forge",
               "content": [{"type": "text", "text": "note"}], "display": true,
               "details": {"stackId": "s"}, "timestamp": epoch})
    );
}

#[test]
fn v50_custom_display_needs_a_real_true() {
    let display = |value: Value| {
        let mut fields = json!({"items": [block("c", "custom", "note"), history("h", json!({}))]});
        if !value.is_null() {
            fields["defaults"] = json!({"syntheticMessagesVisible": value});
        }
        run(&stack_from(fields), &runtime_r()).messages[0].message["display"].clone()
    };
    assert_eq!(display(Value::Null), json!(false));
    assert_eq!(display(json!(false)), json!(false));
    // A deliberate fix of spec §8.1: the string "false" no longer shows the message.
    assert_eq!(display(json!("false")), json!(false));
    assert_eq!(display(json!("true")), json!(false));
    assert_eq!(display(json!(1)), json!(false));
    assert_eq!(display(json!(true)), json!(true));
    assert_eq!(display(json!(0)), json!(false));
    assert_eq!(display(json!("")), json!(false));
}

#[test]
fn v50_assistant_message_shape() {
    let mut rt = runtime_r();
    rt.model = Some(ModelInfo {
        provider: "prov".into(),
        id: "mid".into(),
        api: None,
    });
    let compiled = run(
        &stack(json!([
            block("a", "assistant", "Sure."),
            history("h", json!({}))
        ])),
        &rt,
    );
    let epoch = clock().epoch_ms;
    assert_eq!(
        compiled.messages[0].message,
        json!({
            "role": "assistant",
            "content": [{"type": "text", "text": "Sure."}],
            "api": "unknown", "provider": "prov", "model": "mid",
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "stop",
            "timestamp": epoch
        })
    );
    // Without a model every field is "unknown".
    let bare = run_items(json!([
        block("a", "assistant", "Sure."),
        history("h", json!({}))
    ]));
    let m = &bare.messages[0].message;
    assert_eq!(
        (&m["api"], &m["provider"], &m["model"]),
        (&json!("unknown"), &json!("unknown"), &json!("unknown"))
    );
}

#[test]
fn v50_user_message_shape_and_blank_items() {
    let compiled = run_items(json!([
        block("u", "user", "  hi  "),
        {"kind": "block", "id": "norole", "content": "ignored"},
        block("blank", "user", "  \n "),
        slot("empty", "assistant", "skills", json!({"format": "plain"})),
        history("h", json!({}))
    ]));
    assert_eq!(
        compiled.message_values(),
        [
            json!({"role": "user", "content": [{"type": "text", "text": "  hi  "}],
                "timestamp": clock().epoch_ms})
        ]
    );
}

#[test]
fn v50_stack_key_names_custom_details() {
    let s = stack(json!([
        block("c", "custom", "note"),
        history("h", json!({}))
    ]));
    let rt = runtime_r();
    let macros = MacroRegistry::new();
    let mut input = CompileInput::new(Some(&s), &rt, &macros);
    input.stack_key = Some("project:s".into());
    let compiled = compile(&input);
    assert_eq!(
        compiled.messages[0].message["details"],
        json!({"stackId": "project:s"})
    );
}

#[test]
fn v51_history_rule_for_assistant_only() {
    let mut rt = runtime_r();
    rt.messages = vec![
        u("(OOC: user stays) hello"),
        a(json!([text("reply (OOC: drop this)")])),
    ];
    let s = stack_from(json!({
        "regex": {"rules": [{"id": "ooc", "stage": "history", "pattern": "\\s*\\(OOC:[^)]+\\)",
                             "flags": "g", "replace": "", "roles": ["assistant"]}]},
        "items": [
            block("b", "user", "before (OOC: stays)"),
            history("h", json!({})),
            block("c", "user", "after")
        ]
    }));
    let compiled = run(&s, &rt);
    assert_eq!(
        texts(&compiled).join(" | "),
        "before (OOC: stays) | (OOC: user stays) hello | reply | after"
    );
    assert_eq!(
        infos(&compiled),
        ["I Regex rule ooc matched 1 time(s) and changed 1 text segment(s) in history/messages."]
    );
}

#[test]
fn v52_compiled_rules_run_after_templating() {
    let mut rt = runtime_r();
    rt.messages = vec![a(
        json!([text("a secret"), {"type": "toolCall", "id": "c", "name": "secret", "arguments": {}}]),
    )];
    let s = stack_from(json!({
        "schemaVersion": 2,
        "parameters": {"name": "Ada"},
        "regex": {"rules": [
            {"id": "hi", "stage": "compiled", "pattern": "Hello Ada", "replace": "Hi Ada", "targets": ["messages"]},
            {"id": "red", "stage": "compiled", "pattern": "secret", "flags": "g", "replace": "redacted", "targets": ["messages"]}
        ]},
        "items": [block("greet", "user", "Hello {{ parameters.name }}"), history("h", json!({}))]
    }));
    let compiled = run(&s, &rt);
    assert_eq!(texts(&compiled)[0], "Hi Ada");
    assert_eq!(
        compiled.messages[1].message["content"],
        json!([text("a redacted"), {"type": "toolCall", "id": "c", "name": "secret", "arguments": {}}])
    );
}

// ------------------------------------------------------------------------------------------------
// Vector 59 and tool selection (capabilities spec §B9 without patches)

fn policy_runtime() -> RuntimeSnapshot {
    let mut rt = runtime_r();
    rt.tools = vec![
        tool("read", None),
        tool("bash", None),
        tool("edit", None),
        inactive("browser-search", None),
        inactive("browser-danger", None),
    ];
    rt
}

fn selected(tools_policy: Value) -> Vec<String> {
    let s = stack_from(json!({"tools": tools_policy, "items": []}));
    run(&s, &policy_runtime()).selected_tools
}

#[test]
fn v59_policy_effects() {
    assert_eq!(selected(json!({"allow": ["*"]})), ["read", "bash", "edit"]);
    assert_eq!(
        selected(json!({"allow": ["read", "browser-*"]})),
        ["read", "browser-search", "browser-danger"]
    );
    assert_eq!(selected(json!({"deny": ["edit"]})), ["read", "bash"]);
    assert_eq!(
        selected(json!({"deny": ["browser-*"]})),
        ["read", "bash", "edit"]
    );
    assert_eq!(
        selected(json!({"allow": ["*", "browser-*"]})),
        ["read", "bash", "edit"]
    );
}

#[test]
fn tools_initial_is_the_base_set() {
    assert_eq!(
        selected(json!({"initial": ["edit", "browser-search", "missing"]})),
        ["edit", "browser-search"]
    );
    assert_eq!(selected(json!({"initial": []})), Vec::<String>::new());
    // The ceiling still applies to `initial`.
    assert_eq!(
        selected(json!({"deny": ["edit"], "initial": ["read", "edit"]})),
        ["read"]
    );
}

#[test]
fn runtime_selected_tools_follow_policy() {
    let s = stack_from(json!({
        "tools": {"deny": ["bash"]},
        "items": [sys("t", "{{ runtime.selectedTools | json }}|{% if runtime.tool.bash %}bash{% else %}no bash{% endif %}|{% if runtime.tool.edit %}edit{% endif %}")]
    }));
    let compiled = run(&s, &policy_runtime());
    assert_eq!(compiled.system_prompt, "[\"read\",\"edit\"]|no bash|edit");
}

#[test]
fn no_stack_passes_through() {
    let mut rt = policy_runtime();
    rt.messages = vec![u("hello"), a(json!([text("hi")]))];
    let macros = MacroRegistry::new();
    let compiled = compile(&CompileInput::new(None, &rt, &macros));
    assert_eq!(compiled.system_prompt, "base");
    assert_eq!(compiled.message_values(), rt.messages);
    assert!(compiled
        .messages
        .iter()
        .all(|m| m.source == MessageSource::ImplicitHistory));
    assert_eq!(compiled.selected_tools, ["read", "bash", "edit"]);
    assert!(compiled.diagnostics.is_empty());
}

// ------------------------------------------------------------------------------------------------
// Built-in slot options

#[test]
fn tools_slot_formats_and_only_with_snippets() {
    let mut rt = runtime_r();
    rt.tools = vec![tool("read", Some("Read files.")), tool("bash", None)];
    let xml = "<available_tools>\n  <tool name=\"read\">Read files.</tool>\n  <tool name=\"bash\">No prompt snippet provided.</tool>\n</available_tools>";
    assert_eq!(slot_output(&rt, "tools", json!({})).unwrap(), xml);
    assert_eq!(
        slot_output(&rt, "tools", json!({"format": "json"})).unwrap(),
        xml
    );
    assert_eq!(
        slot_output(&rt, "tools", json!({"format": 5})).unwrap(),
        xml
    );
    assert_eq!(
        slot_output(&rt, "tools", json!({"onlyWithSnippets": true})).unwrap(),
        "<available_tools>\n  <tool name=\"read\">Read files.</tool>\n</available_tools>"
    );
    // Flags turn on only for `true`.
    assert_eq!(
        slot_output(&rt, "tools", json!({"onlyWithSnippets": "true"})).unwrap(),
        xml
    );
    assert_eq!(
        slot_output(
            &rt,
            "tools",
            json!({"format": "plain", "onlyWithSnippets": true})
        )
        .unwrap(),
        "Available tools:\n- read: Read files."
    );
    // Issue 19: an empty snippet is a snippet (the original prints it); only an absent one is
    // missing. `onlyWithSnippets` leaves it out, as the original's `!!snippet` does.
    rt.tools = vec![tool("read", Some("")), tool("bash", None)];
    assert_eq!(
        slot_output(&rt, "tools", json!({"format": "plain"})).unwrap(),
        "Available tools:\n- read: \n- bash: No prompt snippet provided."
    );
    assert_eq!(
        slot_output(&rt, "tools", json!({})).unwrap(),
        "<available_tools>\n  <tool name=\"read\"></tool>\n  <tool name=\"bash\">No prompt snippet provided.</tool>\n</available_tools>"
    );
    assert_eq!(
        slot_output(&rt, "tools", json!({"onlyWithSnippets": true})).unwrap(),
        "<available_tools>\n  (none)\n</available_tools>"
    );
}

#[test]
fn tool_guidelines_xml_is_unescaped_and_uncontinued() {
    assert_eq!(
        slot_output(&runtime_r(), "tool-guidelines", json!({})).unwrap(),
        "<tool_guidelines>\n- Use read before editing files.\n</tool_guidelines>"
    );
    let mut rt = runtime_r();
    rt.prompt_guidelines = vec!["Keep <tags> & \"quotes\"\nsecond".into()];
    assert_eq!(
        slot_output(&rt, "tool-guidelines", json!({"format": "xml"})).unwrap(),
        "<tool_guidelines>\n- Keep <tags> & \"quotes\"\nsecond\n</tool_guidelines>"
    );
}

#[test]
fn tool_guidelines_order_and_dedupe() {
    let mut rt = runtime_r();
    rt.tools = vec![
        ToolInfo {
            guidelines: vec!["From bash.".into(), "Shared.".into()],
            ..tool("bash", None)
        },
        ToolInfo {
            guidelines: vec!["From hidden.".into()],
            ..inactive("hidden", None)
        },
    ];
    rt.prompt_guidelines = vec![
        " Shared. ".into(),
        "".into(),
        "   ".into(),
        "Be concise in your responses".into(),
        "Runtime.".into(),
    ];
    assert_eq!(
        slot_output(
            &rt,
            "tool-guidelines",
            json!({"format": "plain", "includePiDefaultGuidelines": true})
        )
        .unwrap(),
        "Tool guidelines:\n- Use bash for file operations like ls, rg, find.\n- From bash.\n- Shared.\n- Be concise in your responses\n- Runtime.\n- Show file paths clearly when working with files"
    );
}

#[test]
fn tool_guidelines_bash_line_needs_no_search_tool() {
    for other in ["grep", "find", "ls"] {
        let mut rt = runtime_r();
        rt.prompt_guidelines.clear();
        rt.tools = vec![tool("bash", None), tool(other, None)];
        assert_eq!(
            slot_output(&rt, "tool-guidelines", json!({})),
            None,
            "{other}"
        );
    }
    // A search tool that the policy removes does not count.
    let mut rt = runtime_r();
    rt.prompt_guidelines.clear();
    rt.tools = vec![tool("bash", None), tool("grep", None)];
    let out = slot_output_in(
        &rt,
        json!({"tools": {"deny": ["grep"]}}),
        "tool-guidelines",
        json!({"format": "plain", "heading": ""}),
    );
    assert_eq!(
        out.unwrap(),
        "- Use bash for file operations like ls, rg, find."
    );
}

#[test]
fn tool_guidelines_heading_option() {
    let out = |heading: Value| {
        slot_output(
            &runtime_r(),
            "tool-guidelines",
            json!({"format": "plain", "heading": heading}),
        )
        .unwrap()
    };
    assert_eq!(
        out(json!("  Rules:  ")),
        "Rules:\n- Use read before editing files."
    );
    assert_eq!(out(json!("")), "- Use read before editing files.");
    assert_eq!(out(json!(" ")), "- Use read before editing files.");
    assert_eq!(
        out(json!(7)),
        "Tool guidelines:\n- Use read before editing files."
    );
    let mut rt = runtime_r();
    rt.prompt_guidelines.clear();
    assert_eq!(
        slot_output(&rt, "tool-guidelines", json!({"format": "plain"})),
        None
    );
    // Without piStyle the defaults stay off unless asked for.
    assert_eq!(
        slot_output(&rt, "tool-guidelines", json!({"piStyle": true})),
        None
    );
}

#[test]
fn skills_slot_xml_escapes() {
    let mut rt = runtime_r();
    rt.skills = vec![skill("re<view>", "Checks & \"fixes\"", "/s/it's/SKILL.md")];
    assert_eq!(
        slot_output(&rt, "skills", json!({})).unwrap(),
        format!(
            "{SKILLS_PREAMBLE}\n<available_skills>\n  <skill>\n    <name>re&lt;view&gt;</name>\n    <description>Checks &amp; &quot;fixes&quot;</description>\n    <location>/s/it&apos;s/SKILL.md</location>\n  </skill>\n</available_skills>"
        )
    );
}

#[test]
fn skills_preamble_has_three_lines_and_a_blank() {
    let lines: Vec<&str> = SKILLS_PREAMBLE.split('\n').collect();
    assert_eq!(lines.len(), 4);
    assert!(lines[..3].iter().all(|l| !l.trim().is_empty()));
    assert_eq!(lines[3], "");
    assert!(lines[1].contains("read tool"));
}

#[test]
fn skills_slot_empty_cases() {
    let mut rt = runtime_r();
    assert_eq!(slot_output(&rt, "skills", json!({})), None);
    rt.skills = vec![skill("review", "R.", "/r")];
    // The policy filters every skill out.
    assert_eq!(
        slot_output_in(&rt, json!({"skills": {"deny": ["*"]}}), "skills", json!({})),
        None
    );
    // requireReadTool passes when read is selected.
    assert!(slot_output(&rt, "skills", json!({"requireReadTool": true})).is_some());
    // ... and fails when the tool policy removes it.
    assert_eq!(
        slot_output_in(
            &rt,
            json!({"tools": {"deny": ["read"]}}),
            "skills",
            json!({"requireReadTool": true})
        ),
        None
    );
}

#[test]
fn project_context_xml_and_trailing_space() {
    let mut rt = runtime_r();
    rt.context_files = vec![
        ContextFile {
            path: "a&b.md".into(),
            content: "<keep> raw".into(),
        },
        ContextFile {
            path: "sub/AGENTS.md".into(),
            content: "last\n\n  ".into(),
        },
    ];
    assert_eq!(
        slot_output(&rt, "project-context", json!({})).unwrap(),
        "<project_context>\n\nProject-specific instructions and guidelines:\n\n<project_instructions path=\"a&amp;b.md\">\n<keep> raw\n</project_instructions>\n\n<project_instructions path=\"sub/AGENTS.md\">\nlast\n\n  \n</project_instructions>\n\n</project_context>"
    );
    assert_eq!(
        slot_output(&rt, "project-context", json!({"format": "plain"})).unwrap(),
        "Project context:\n\nProject-specific instructions and guidelines:\n\nPath: a&b.md\n  <keep> raw\n\nPath: sub/AGENTS.md\n  last"
    );
    rt.context_files.clear();
    assert_eq!(slot_output(&rt, "project-context", json!({})), None);
}

#[test]
fn date_slots_without_time() {
    let rt = runtime_r();
    assert_eq!(
        slot_output(&rt, "date", json!({})).unwrap(),
        "Current date: 2026-06-13"
    );
    assert_eq!(
        slot_output(&rt, "date", json!({"includeTime": "yes"})).unwrap(),
        "Current date: 2026-06-13"
    );
    assert_eq!(
        slot_output(&rt, "date-cwd", json!({})).unwrap(),
        "Current date: 2026-06-13\nCurrent working directory: /home/user/project"
    );
    // Local time follows the clock's offset.
    let mut east = runtime_r();
    east.clock = Clock::from_local((2026, 6, 14), (1, 2, 3), 540);
    assert_eq!(
        slot_output(&east, "date", json!({"includeTime": true})).unwrap(),
        "Current date: 2026-06-14\nCurrent time: 01:02:03"
    );
}

#[test]
fn append_system_prompt_absent_renders_nothing() {
    assert_eq!(
        slot_output(&runtime_r(), "append-system-prompt", json!({})),
        None
    );
}

#[test]
fn pi_docs_slot() {
    let fallback = slot_output(&runtime_r(), "pi-docs", json!({})).unwrap();
    let lines: Vec<&str> = fallback.split('\n').collect();
    assert_eq!(lines.len(), 7);
    assert_eq!(
        lines[1],
        "- Readme: @earendil-works/pi-coding-agent/README.md"
    );
    assert_eq!(
        lines[2],
        "- Documentation folder: @earendil-works/pi-coding-agent/docs"
    );
    assert!(lines[3].starts_with("- Examples folder: @earendil-works/pi-coding-agent/examples"));
    let mut rt = runtime_r();
    rt.pi_docs_root = Some("/usr/lib/node_modules/@earendil-works/pi-coding-agent/".into());
    let rooted = slot_output(&rt, "pi-docs", json!({})).unwrap();
    assert!(rooted
        .contains("- Readme: /usr/lib/node_modules/@earendil-works/pi-coding-agent/README.md\n"));
    assert_eq!(rooted.split('\n').count(), 7);
}

#[test]
fn role_less_slots_are_ignored_silently() {
    let compiled = run_items(json!([
        sys("a", "A"),
        {"kind": "slot", "id": "x", "slot": "not-real"},
        {"kind": "slot", "id": "d", "slot": "date"},
        {"kind": "block", "id": "off", "role": "system", "content": "OFF", "enabled": false},
        {"kind": "slot", "id": "off2", "role": "user", "slot": "nope", "enabled": false},
        history("h", json!({}))
    ]));
    assert_eq!(compiled.system_prompt, "A");
    assert!(compiled.diagnostics.is_empty());
    assert!(compiled.messages.is_empty());
}

#[test]
fn runtime_environment_fields() {
    let mut rt = runtime_r();
    rt.cwd = "C:\\raw\\cwd".into();
    rt.model = Some(ModelInfo {
        provider: "prov".into(),
        id: "mid".into(),
        api: Some("responses".into()),
    });
    rt.messages = vec![u("latest request"), u("  ")];
    let s = stack(json!([
        sys("e", "{{ runtime.cwd }}|{{ runtime.activeModel }}|{{ runtime.populatedAt }}|{{ runtime.timezone }}|{{ runtime.selectedToolsText }}|{{ lastUserMessage }}|{{ activeModel }}|{{ runtime.slot | json }}"),
        slot("d", "user", "date", json!({})),
        history("h", json!({}))
    ]));
    let compiled = run(&s, &rt);
    assert_eq!(
        compiled.system_prompt,
        "C:\\raw\\cwd|prov/mid|2026-06-13T09:08:07.000Z|local|read|latest request|prov/mid|{\"date\":true,\"chat-history\":true}"
    );
}

#[test]
fn runtime_object_key_order() {
    let compiled = run_items(json!([sys("e", "{{ runtime }}")]));
    let env: Value = serde_json::from_str(&compiled.system_prompt).unwrap();
    let keys: Vec<&String> = env.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "cwd",
            "date",
            "time",
            "lastUserMessage",
            "selectedTools",
            "selectedToolsText",
            "activeModel",
            "populatedAt",
            "timezone",
            "tool",
            "slot"
        ]
    );
    assert_eq!(env["lastUserMessage"], json!(""));
    assert_eq!(env["tool"], json!({"read": true}));
}

#[test]
fn every_template_error_is_reported() {
    let compiled = run_items(json!([
        sys("f", "{{ a | nope }} {{ b | bad }}"),
        sys("ok", "fine"),
        history("h", json!({}))
    ]));
    assert_eq!(compiled.system_prompt, "fine");
    assert_eq!(
        diags(&compiled.diagnostics),
        [
            "E [f] Unknown forge-v1 filter: nope",
            "E [f] Unknown forge-v1 filter: bad"
        ]
    );
}

#[test]
fn failing_message_block_renders_nothing() {
    let mut rt = runtime_r();
    rt.messages = vec![u("hi")];
    let compiled = run(
        &stack(json!([
            sys("a", "A"),
            block("bad", "user", "{{ nope }}"),
            history("h", json!({}))
        ])),
        &rt,
    );
    assert_eq!(texts(&compiled), ["hi"]);
    assert_eq!(
        diags(&compiled.diagnostics),
        ["E [bad] forge-v1 render error: Undefined forge-v1 path: {{nope}}"]
    );
}

#[test]
fn regex_compile_errors_come_first() {
    let s = stack_from(json!({
        "regex": {"rules": [{"id": "bad", "stage": "compiled", "pattern": "("}]},
        "items": [sys("a", "A"), history("h", json!({}))]
    }));
    let compiled = run(&s, &runtime_r());
    assert_eq!(compiled.system_prompt, "A");
    let d = diags(&compiled.diagnostics);
    assert_eq!(d.len(), 1);
    assert!(
        d[0].starts_with("E Regex rule bad failed to compile: "),
        "{d:?}"
    );
}

// ------------------------------------------------------------------------------------------------
// Chat-history details

#[test]
fn history_unsupported_tool_mode_warns() {
    let host = vec![a(json!([call("c1")])), result("c1")];
    let compiled = history_run(json!({"toolMode": "x"}), host.clone());
    assert_eq!(compiled.message_values(), host);
    assert_eq!(
        infos(&compiled),
        ["W [h] Unsupported chat-history toolMode: x."]
    );
    let compiled = history_run(json!({"toolMode": 3}), host.clone());
    assert_eq!(
        infos(&compiled),
        ["W [h] Unsupported chat-history toolMode: 3."]
    );
    let compiled = history_run(json!({"toolMode": "keep"}), host.clone());
    assert!(infos(&compiled).is_empty());
}

#[test]
fn history_drops_blank_last_user_message() {
    let host = vec![u("real"), a(json!([text("ok")])), u("   ")];
    let compiled = history_run(json!({"includeLastUserMessage": false}), host);
    assert_eq!(texts(&compiled), ["real", "ok"]);
    // Anything but `false` keeps it.
    let host = vec![u("real"), u("last")];
    let compiled = history_run(json!({"includeLastUserMessage": "no"}), host);
    assert_eq!(texts(&compiled), ["real", "last"]);
}

#[test]
fn history_max_chars_keeps_newest_message() {
    let host = vec![u("abc"), u("0123456789")];
    let compiled = history_run(json!({"maxChars": 4}), host);
    assert_eq!(texts(&compiled), ["0123456789"]);
    assert_eq!(
        infos(&compiled),
        ["I [h] Trimmed chat history from 2 to 1 message(s) by maxChars."]
    );
    // Characters are UTF-16 code units; summaries and bash runs count their preview text.
    let host = vec![
        json!({"role": "bashExecution", "command": "ls", "output": "a"}),
        json!({"role": "branchSummary", "summary": "ab"}),
        u("😀😀"),
    ];
    let compiled = history_run(json!({"maxChars": 6}), host.clone());
    assert_eq!(compiled.message_values(), host[1..]);
    let compiled = history_run(json!({"maxChars": 14}), host.clone());
    assert_eq!(compiled.message_values(), host);
    let compiled = history_run(json!({"maxChars": 13}), host.clone());
    assert_eq!(compiled.message_values(), host[1..]);
    let compiled = history_run(json!({"maxChars": 14}), host.clone());
    assert_eq!(compiled.message_values(), host);
}

#[test]
fn history_invalid_limits_are_ignored() {
    let host = vec![u("a"), u("b"), u("c")];
    for options in [
        json!({"maxMessages": 0}),
        json!({"maxMessages": 1.5}),
        json!({"maxMessages": "2"}),
        json!({"maxChars": -1}),
        json!({"roles": "user"}),
    ] {
        let compiled = history_run(options.clone(), host.clone());
        assert_eq!(compiled.message_values(), host, "{options}");
    }
}

#[test]
fn history_repair_reads_alternative_ids() {
    let host = vec![
        u("q"),
        a(
            json!([{"type": "toolCall", "toolCallId": "x1", "name": "read"},
                 {"type": "toolCall", "callId": "x2", "name": "read"}]),
        ),
        json!({"role": "toolResult", "id": "x1", "content": []}),
        json!({"role": "toolResult", "callId": "x2", "content": []}),
        json!({"role": "toolResult", "toolCallId": "zz", "content": []}),
        u("done"),
    ];
    let compiled = history_run(json!({"roles": ["assistant", "toolResult"]}), host.clone());
    assert_eq!(compiled.message_values(), host[1..4]);
    assert_eq!(
        infos(&compiled),
        [
            "I [h] Filtered 2 chat-history message(s) by role.",
            "I [h] Repaired tool history after chat-history filtering: removed 0 dangling tool call(s), dropped 1 dangling tool result message(s)."
        ]
    );
}

#[test]
fn history_drop_mode_skips_repair() {
    let h = host_47();
    let compiled = history_run(json!({"toolMode": "drop", "maxMessages": 2}), h);
    assert_eq!(texts(&compiled), ["t", "last"]);
    assert_eq!(
        infos(&compiled),
        [
            "I [h] Dropped tool history from chat-history: removed 2 tool call(s), dropped 2 tool result message(s), and dropped 1 empty message(s).",
            "I [h] Trimmed chat history from 3 to 2 message(s) by maxMessages."
        ]
    );
}

#[test]
fn history_keeps_unknown_fields() {
    let host = vec![
        json!({"role": "user", "content": "plain", "x-extra": {"deep": [1, 2]}}),
        json!({"role": "custom", "customType": "other", "content": "c", "display": false}),
    ];
    let compiled = history_run(
        json!({"stripAssistantThinking": true, "toolMode": "drop"}),
        host.clone(),
    );
    assert_eq!(compiled.message_values(), host);
}

// ------------------------------------------------------------------------------------------------
// Custom slots

struct Echo {
    deps: Vec<String>,
    output: Result<String, String>,
}

impl SlotRenderer for Echo {
    fn dependencies(&self) -> Vec<String> {
        self.deps.clone()
    }
    fn render(&self, ctx: &SlotContext<'_>) -> Result<String, String> {
        let out = self.output.clone()?;
        let tone = ctx
            .options
            .and_then(|o: &Map<String, Value>| o.get("tone"))
            .and_then(Value::as_str)
            .unwrap_or("-");
        let ext: Vec<String> = ctx
            .extensions
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        Ok(out
            .replace("$slot", ctx.slot)
            .replace("$tone", tone)
            .replace("$ext", &ext.join(","))
            .replace("$tools", &ctx.selected_tools.join(","))
            .replace("$item", &ctx.item.id))
    }
}

fn echo(deps: &[&str], output: Result<&str, &str>) -> Box<dyn SlotRenderer> {
    Box::new(Echo {
        deps: deps.iter().map(|d| d.to_string()).collect(),
        output: output.map(str::to_string).map_err(str::to_string),
    })
}

fn run_custom(items: Value, slots: &SlotRegistry, macros: &MacroRegistry) -> Compiled {
    let s = stack(items);
    let rt = runtime_r();
    let mut input = CompileInput::new(Some(&s), &rt, macros);
    input.extra_slots = Some(slots);
    compile(&input)
}

#[test]
fn custom_slot_renders_with_dependencies() {
    let mut macros = MacroRegistry::new();
    register(&mut macros, "mood", &[], |_, _| Ok("calm".into()));
    let mut slots = SlotRegistry::new();
    slots
        .register(
            "weather",
            echo(
                &["extensions.mood", "runtime.cwd"],
                Ok("$slot $tone $ext $tools $item"),
            ),
        )
        .unwrap();
    let compiled = run_custom(
        json!([
            slot("w", "system", "weather", json!({"tone": "dry"})),
            history("h", json!({}))
        ]),
        &slots,
        &macros,
    );
    assert_eq!(compiled.system_prompt, "weather dry mood=calm read w");
    assert!(compiled.diagnostics.is_empty());
    assert_eq!(compiled.dependencies, ["extension:mood", "slot:weather"]);
}

#[test]
fn custom_slot_failures() {
    let mut macros = MacroRegistry::new();
    register(&mut macros, "broken", &[], |_, _| Err("no data".into()));
    let mut slots = SlotRegistry::new();
    slots.register("fails", echo(&[], Err("offline"))).unwrap();
    slots
        .register("needs", echo(&["extensions.broken"], Ok("never")))
        .unwrap();
    slots
        .register(
            "huge",
            Box::new(Echo {
                deps: vec![],
                output: Ok("z".repeat(16_385)),
            }),
        )
        .unwrap();
    slots
        .register(
            "edge",
            Box::new(Echo {
                deps: vec![],
                output: Ok("z".repeat(16_384)),
            }),
        )
        .unwrap();
    let compiled = run_custom(
        json!([
            slot("f", "system", "fails", json!({})),
            slot("n", "system", "needs", json!({})),
            slot("hg", "user", "huge", json!({})),
            slot("e", "user", "edge", json!({})),
            history("h", json!({}))
        ]),
        &slots,
        &macros,
    );
    assert_eq!(compiled.system_prompt, "base");
    assert_eq!(
        diags(&compiled.diagnostics),
        [
            "E [f] Slot \"fails\" failed: offline",
            "E [n] forge-v1 extension broken failed: no data",
            "W Compiled system prompt failed; preserving base system prompt.",
            "E [hg] Slot \"huge\" exceeds 16384 characters."
        ]
    );
    assert_eq!(texts(&compiled), ["z".repeat(16_384)]);
}

#[test]
fn slot_registry_refuses_builtins_and_duplicates() {
    let mut slots = SlotRegistry::new();
    assert!(slots.register("tools", echo(&[], Ok("x"))).is_err());
    assert!(slots.register("chat-history", echo(&[], Ok("x"))).is_err());
    slots.register("mine", echo(&[], Ok("x"))).unwrap();
    assert!(slots.register("mine", echo(&[], Ok("y"))).is_err());
    assert_eq!(slots.names(), ["mine"]);
}

#[test]
fn builtin_slot_limit_applies_to_every_slot() {
    let mut rt = runtime_r();
    rt.append_system_prompt = Some("a".repeat(16_384));
    let ok = run(
        &stack(json!([
            slot("ap", "system", "append-system-prompt", json!({})),
            history("h", json!({}))
        ])),
        &rt,
    );
    assert_eq!(ok.system_prompt.len(), 16_384);
    // UTF-16 units: 8193 astral characters are 16386 units.
    rt.append_system_prompt = Some("😀".repeat(8_193));
    let too_long = run(
        &stack(json!([
            slot("ap", "system", "append-system-prompt", json!({})),
            history("h", json!({}))
        ])),
        &rt,
    );
    assert_eq!(too_long.system_prompt, "base");
    assert_eq!(
        diags(&too_long.diagnostics)[0],
        "E [ap] Slot \"append-system-prompt\" exceeds 16384 characters."
    );
}

// ------------------------------------------------------------------------------------------------
// Preview (§6)

fn preview_fixture() -> (PromptStack, RuntimeSnapshot) {
    let mut rt = runtime_r();
    rt.messages = vec![u("same"), u("same"), a(json!([text("reply")]))];
    let s = stack_from(json!({
        "regex": {"rules": [
            {"id": "fin", "stage": "compiled", "effect": "finalize", "pattern": "x", "targets": ["messages"]},
            {"id": "fin2", "stage": "compiled", "effect": "finalize", "pattern": "y"}
        ]},
        "items": [
            sys("a", "System text"),
            {"kind": "block", "id": "intro", "name": "Intro", "role": "user", "content": "Hello"},
            block("note", "assistant", "Noted"),
            {"kind": "slot", "id": "hist", "slot": "chat-history", "name": "Recent"},
            slot("nr", "user", "not-real", json!({}))
        ]
    }));
    (s, rt)
}

#[test]
fn preview_sections_titles_and_diff_keys() {
    let (s, rt) = preview_fixture();
    let compiled = run(&s, &rt);
    assert_eq!(compiled.finalize_rules, 2);
    let load = vec![Diagnostic::warning("loaded with a warning").with_item("x")];
    let p = preview(&compiled, "s", &load, &rt.clock);
    assert_eq!(p.stack_id, "s");
    assert_eq!(p.generated_at, "2026-06-13T09:08:07.000Z");
    assert_eq!(p.system.id, "system");
    assert_eq!(p.system.diff_key.as_deref(), Some("system"));
    assert_eq!(p.system.title, "System prompt");
    assert_eq!(p.system.content, "System text");
    assert_eq!((p.system.chars, p.system.approx_tokens), (11, 3));
    let rows: Vec<(String, String, String, String)> = p
        .messages
        .iter()
        .map(|s| {
            (
                s.id.clone(),
                s.title.clone(),
                s.role.clone().unwrap_or_default(),
                s.diff_key.clone().unwrap_or_default(),
            )
        })
        .collect();
    let h_same = forge_core::compile::preview::hash_role_text("user", "same");
    let h_reply = forge_core::compile::preview::hash_role_text("assistant", "reply");
    assert_eq!(
        rows,
        [
            (
                "message-0".into(),
                "Intro".into(),
                "user".into(),
                "stack-item:intro:1".into()
            ),
            (
                "message-1".into(),
                "note".into(),
                "assistant".into(),
                "stack-item:note:1".into()
            ),
            (
                "message-2".into(),
                "Recent #1".into(),
                "user".into(),
                format!("chat-history:hist:{h_same}:1")
            ),
            (
                "message-3".into(),
                "Recent #2".into(),
                "user".into(),
                format!("chat-history:hist:{h_same}:2")
            ),
            (
                "message-4".into(),
                "Recent #3".into(),
                "assistant".into(),
                format!("chat-history:hist:{h_reply}:1")
            ),
        ]
    );
    assert_eq!(p.total_chars, 11 + 5 + 5 + 4 + 4 + 5);
    assert_eq!(p.approx_tokens, 9);
    assert_eq!(
        diags(&p.diagnostics),
        [
            "W [x] loaded with a warning",
            "W [nr] Unsupported slot: not-real",
            // Two finalize rules, one note.
            "I finalize regex rules are not represented in preview."
        ]
    );
}

#[test]
fn preview_text_markdown() {
    let (s, rt) = preview_fixture();
    let compiled = run(&s, &rt);
    let p = preview(&compiled, "s", &[], &rt.clock);
    assert_eq!(
        preview_text(&p),
        "# Prompt stack preview: s\n\n## System prompt\n\nSystem text\n\n## Message layout\n\n--- Intro (user) ---\nHello\n\n--- note (assistant) ---\nNoted\n\n--- Recent #1 (user) ---\nsame\n\n--- Recent #2 (user) ---\nsame\n\n--- Recent #3 (assistant) ---\nreply\n\n## Diagnostics\n\nWARNING [nr]: Unsupported slot: not-real\nINFO: finalize regex rules are not represented in preview.\n"
    );
}

#[test]
fn preview_implicit_history_empty_system_and_no_diagnostics() {
    let mut rt = runtime_r();
    rt.base_system_prompt = String::new();
    rt.messages = vec![u("hello"), u("hello")];
    let macros = MacroRegistry::new();
    let compiled = compile(&CompileInput::new(None, &rt, &macros));
    let p = preview(&compiled, "none", &[], &rt.clock);
    assert_eq!(p.system.content, "(empty)");
    let h = forge_core::compile::preview::hash_role_text("user", "hello");
    let keys: Vec<(String, Option<String>)> = p
        .messages
        .iter()
        .map(|s| (s.title.clone(), s.diff_key.clone()))
        .collect();
    assert_eq!(
        keys,
        [
            (
                "Conversation history #1".into(),
                Some(format!("implicit-history:{h}:1"))
            ),
            (
                "Conversation history #2".into(),
                Some(format!("implicit-history:{h}:2"))
            ),
        ]
    );
    assert_eq!(
        preview_text(&p),
        "# Prompt stack preview: none\n\n## System prompt\n\n(empty)\n\n## Message layout\n\n--- Conversation history #1 (user) ---\nhello\n\n--- Conversation history #2 (user) ---\nhello\n\n## Diagnostics\n\nNo diagnostics.\n"
    );
}

#[test]
fn preview_text_truncates_message_layout() {
    let mut rt = runtime_r();
    rt.messages = vec![u(&"m".repeat(9_000))];
    let macros = MacroRegistry::new();
    let compiled = compile(&CompileInput::new(None, &rt, &macros));
    let p = preview(&compiled, "s", &[], &rt.clock);
    // Sections are never cut.
    assert_eq!(p.messages[0].chars, 9_000);
    let text = preview_text(&p);
    let header = "--- Conversation history #1 (user) ---\n";
    let start = text.find(header).unwrap();
    let layout_end = text
        .find("\n[preview truncated]\n\n## Diagnostics")
        .unwrap();
    assert_eq!(layout_end - start, 8_000);
    let empty = compile(&CompileInput::new(
        None,
        &RuntimeSnapshot::default(),
        &macros,
    ));
    let text = preview_text(&preview(&empty, "s", &[], &Clock::utc(0)));
    assert!(text.contains("## Message layout\n\n(no messages)\n\n## Diagnostics"));
}

#[test]
fn preview_hash_matches_context_diff_vectors() {
    use forge_core::compile::preview::hash_role_text;
    assert_eq!(hash_role_text("user", "Hello"), "f89e5ea6");
    assert_eq!(hash_role_text("system", "System prompt"), "57362e4d");
}

// ------------------------------------------------------------------------------------------------
// Issue 19: differences from the original found by differential testing

fn system_rules_run(content: &str, rules: Value) -> Compiled {
    let s = stack_from(json!({
        "regex": {"rules": rules},
        "items": [sys("s", content), history("h", json!({}))]
    }));
    run(&s, &runtime_r())
}

#[test]
fn counted_quantifiers_match_as_in_the_original() {
    let compiled = system_rules_run(
        "aaa ab ab 1234 x",
        json!([
            {"id": "a2", "stage": "compiled", "targets": ["system"], "pattern": "a{2,}", "flags": "g", "replace": "[A]"},
            {"id": "d4", "stage": "compiled", "targets": ["system"], "pattern": "\\d{4}", "flags": "g", "replace": "[D]"}
        ]),
    );
    assert_eq!(compiled.system_prompt, "[A] ab ab [D] x");
    assert_eq!(
        infos(&compiled),
        [
            "I Regex rule a2 matched 1 time(s) and changed 1 text segment(s) in compiled/system.",
            "I Regex rule d4 matched 1 time(s) and changed 1 text segment(s) in compiled/system."
        ]
    );
    for (pattern, expected) in [
        ("(ab){2,}", "xx [G]aabc"),
        ("a{1,3}", "xx [G]b[G]b[G]bc"),
        ("a{10}", "xx ababaabc"),
        ("b{1}a", "xx a[G][G]abc"),
        ("x{2}", "[G] ababaabc"),
        ("ab{0,}a", "xx [G]b[G]bc"),
    ] {
        let compiled = system_rules_run(
            "xx ababaabc",
            json!([{"id": "r", "stage": "compiled", "targets": ["system"], "pattern": pattern, "flags": "g", "replace": "[G]"}]),
        );
        assert_eq!(compiled.system_prompt, expected, "{pattern}");
    }
}

#[test]
fn counted_quantifiers_match_in_history_rules() {
    let mut rt = runtime_r();
    rt.messages = vec![u("call 5551234 now"), a(json!([text("zzz and z")]))];
    let s = stack_from(json!({
        "regex": {"rules": [
            {"id": "phone", "stage": "history", "pattern": "\\d{3}\\d{4}", "flags": "g", "replace": "[phone]"},
            {"id": "zs", "stage": "history", "pattern": "z{2,}", "flags": "g", "replace": "Z"}
        ]},
        "items": [history("h", json!({}))]
    }));
    let compiled = run(&s, &rt);
    assert_eq!(texts(&compiled), ["call [phone] now", "Z and z"]);
}

#[test]
fn code_point_escape_without_u_flag_is_annex_b_identity_escape() {
    let rule = |flags: &str| json!([{"id": "e", "stage": "compiled", "targets": ["system"], "pattern": "\\u{1F600}", "flags": flags, "replace": "[E]"}]);
    assert_eq!(
        system_rules_run("a😀b xu{1F600}", rule("g")).system_prompt,
        "a😀b x[E]"
    );
    assert_eq!(
        system_rules_run("a😀b xu{1F600}", rule("gu")).system_prompt,
        "a[E]b xu{1F600}"
    );
    // `\u{3}` without `u` repeats the `u`.
    let compiled = system_rules_run(
        "uu uuu u{3}",
        json!([{"id": "e", "stage": "compiled", "targets": ["system"], "pattern": "\\u{3}", "flags": "g", "replace": "[E]"}]),
    );
    assert_eq!(compiled.system_prompt, "uu [E] u{3}");
    // In a class the escape is `u`, `{`, `4`, `1`, `}`.
    let compiled = system_rules_run(
        "A u{41}",
        json!([{"id": "e", "stage": "compiled", "targets": ["system"], "pattern": "[\\u{41}]", "flags": "g", "replace": "."}]),
    );
    assert_eq!(compiled.system_prompt, "A .....");
}

/// `[U q, A(text, call c1), R c2, U last]`: the call has no result and the result no call.
fn dangling_host() -> Vec<Value> {
    vec![
        u("q"),
        a(json!([text("t"), call("c1")])),
        result("c2"),
        u("last"),
    ]
}

const REPAIRED_ONE_AND_ONE: &str = "I [h] Repaired tool history after chat-history filtering: removed 1 dangling tool call(s), dropped 1 dangling tool result message(s).";

#[test]
fn role_filter_that_removes_nothing_still_repairs_tool_pairs() {
    let host = dangling_host();
    let compiled = history_run(
        json!({"roles": ["user", "assistant", "toolResult"]}),
        host.clone(),
    );
    assert_eq!(
        compiled.message_values(),
        [host[0].clone(), a(json!([text("t")])), host[3].clone()]
    );
    assert_eq!(infos(&compiled), [REPAIRED_ONE_AND_ONE]);
}

#[test]
fn summary_filter_with_roles_repairs_tool_pairs() {
    let mut host = dangling_host();
    host.insert(
        0,
        json!({"role": "compactionSummary", "summary": "s", "timestamp": 0}),
    );
    let compiled = history_run(
        json!({"includeSummaries": false, "roles": ["user", "assistant", "toolResult"]}),
        host.clone(),
    );
    assert_eq!(
        compiled.message_values(),
        [host[1].clone(), a(json!([text("t")])), host[4].clone()]
    );
    assert_eq!(
        infos(&compiled),
        [
            "I [h] Filtered 1 chat-history message(s) by summary.",
            REPAIRED_ONE_AND_ONE
        ]
    );
}

#[test]
fn tool_result_without_a_string_id_is_dangling() {
    for bad in [json!(null), json!(""), json!(7), json!({"id": "c1"})] {
        let mut orphan = result("c1");
        orphan["toolCallId"] = bad.clone();
        let host = vec![u("q"), a(json!([text("t"), call("c1")])), orphan, u("last")];
        let compiled = history_run(
            json!({"roles": ["user", "assistant", "toolResult"]}),
            host.clone(),
        );
        assert_eq!(
            compiled.message_values(),
            [host[0].clone(), a(json!([text("t")])), host[3].clone()],
            "{bad}"
        );
        assert_eq!(infos(&compiled), [REPAIRED_ONE_AND_ONE], "{bad}");
    }
    // A missing `toolCallId` falls back to `id`, then `callId`: the first non-empty string.
    let host = vec![
        a(json!([call("c1")])),
        json!({"role": "toolResult", "toolCallId": "", "id": 5, "callId": "c1", "content": []}),
    ];
    let compiled = history_run(json!({"roles": ["assistant", "toolResult"]}), host.clone());
    assert_eq!(compiled.message_values(), host);
    assert!(infos(&compiled).is_empty(), "{:?}", infos(&compiled));
}

#[test]
fn without_roles_or_trims_no_repair_runs() {
    let host = dangling_host();
    for options in [
        json!({}),
        json!({"includeSummaries": false}),
        json!({"roles": []}),
        json!({"maxMessages": 10}),
    ] {
        let compiled = history_run(options.clone(), host.clone());
        assert_eq!(compiled.message_values(), host, "{options}");
        assert!(infos(&compiled).is_empty(), "{options}");
    }
}

#[test]
fn printed_objects_use_javascript_property_order() {
    let s = stack_from(json!({
        "schemaVersion": 2,
        "parameters": {"obj": {"b": 1, "2": 2, "a": {"z": 0, "10": 1, "9": 2}, "01": 3, "4294967295": 4, "4294967294": 5}},
        "items": [
            sys("plain", "{{ parameters.obj }}"),
            sys("json", "{{ parameters.obj | json }}"),
            history("h", json!({}))
        ]
    }));
    let compiled = run(&s, &runtime_r());
    let expected = r#"{"2":2,"4294967294":5,"b":1,"a":{"9":2,"10":1,"z":0},"01":3,"4294967295":4}"#;
    assert_eq!(compiled.system_prompt, format!("{expected}\n\n{expected}"));
}

#[test]
fn drop_strip_and_trim_count_as_if_applied_one_after_another() {
    let host = vec![
        u("q"),
        a(json!([thinking("h"), call("c1")])),
        result("c1"),
        a(json!([text("t"), thinking("h2")])),
        u("last"),
    ];
    let compiled = history_run(
        json!({"toolMode": "drop", "stripAssistantThinking": true, "maxMessages": 2}),
        host.clone(),
    );
    assert_eq!(
        compiled.message_values(),
        [a(json!([text("t")])), host[4].clone()]
    );
    assert_eq!(
        infos(&compiled),
        [
            "I [h] Dropped tool history from chat-history: removed 1 tool call(s), dropped 1 tool result message(s).",
            "I [h] Stripped 2 assistant thinking block(s) from 2 chat-history message(s) and dropped 1 empty assistant message(s).",
            "I [h] Trimmed chat history from 3 to 2 message(s) by maxMessages."
        ]
    );
}

// ------------------------------------------------------------------------------------------------
// The turn's prompt apart from the conversation (issue 15: `pi-forge preview --prompt`)

fn with_prompt(rt: &RuntimeSnapshot, prompt: &str) -> (Compiled, Value) {
    let s = stack(json!([
        sys("sys", "Asked: {{ runtime.lastUserMessage }}"),
        block("echo", "user", "Echo: {{ runtime.lastUserMessage }}"),
        history("h", json!({}))
    ]));
    let macros = MacroRegistry::new();
    let mut input = CompileInput::new(Some(&s), rt, &macros);
    input.prompt = Some(prompt.to_string());
    compile_with_env(&input)
}

#[test]
fn the_prompt_feeds_the_system_phase_and_backs_up_the_message_phase() {
    // No user text in the conversation: both phases see the prompt.
    let (compiled, env) = with_prompt(&runtime_r(), "from the prompt");
    assert_eq!(compiled.system_prompt, "Asked: from the prompt");
    assert_eq!(
        content_text(&compiled.messages[0].message["content"], OtherParts::Labels),
        "Echo: from the prompt"
    );
    assert_eq!(env["runtime"]["lastUserMessage"], "from the prompt");

    // With user text: the system phase sees the prompt, the message phase the conversation.
    let mut rt = runtime_r();
    rt.messages = vec![u("earlier question"), u("   ")];
    let (compiled, env) = with_prompt(&rt, "the new prompt");
    assert_eq!(compiled.system_prompt, "Asked: the new prompt");
    assert_eq!(
        content_text(&compiled.messages[0].message["content"], OtherParts::Labels),
        "Echo: earlier question"
    );
    assert_eq!(env["runtime"]["lastUserMessage"], "the new prompt");
    assert_eq!(env["runtime"]["selectedTools"], json!(["read"]));
    assert_eq!(env["parameters"], json!({}));

    // Without a prompt, both phases read the conversation, as before.
    let s = stack(json!([sys("sys", "Asked: {{ runtime.lastUserMessage }}")]));
    assert_eq!(run(&s, &rt).system_prompt, "Asked: earlier question");
}
