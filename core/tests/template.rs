//! forge-v1 templates: prompt-stacks spec §7 vectors 22–29 and the macro parts of 42, plus
//! lexer edge cases, limits, path lookup rules and a no-panic property test.
//!
//! Long fuzzing run (minutes):
//! `PROPTEST_CASES=500000 cargo test -p forge-core --release --test template -- never_panics`

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use forge_core::json::utf16_len;
use forge_core::template::{
    analyze, analyze_text, dependencies, parse, render, render_checked, render_text,
    render_text_all, Dependency, Macro, MacroContext, MacroRegistry, RenderErrorKind, Scope, Span,
    TemplateError, MACRO_OUTPUT_LIMIT, MAX_MACRO_DEPTH, MAX_NESTING, OUTPUT_LIMIT,
};
use proptest::prelude::*;
use serde_json::{json, Value};

// ------------------------------------------------------------------------------------------------
// helpers

/// Runtime R of §7 (tools `[read]`, latest `latest request`, 2026-06-13 09:08:07, no model).
fn runtime(tools: &[&str]) -> Value {
    let tool: serde_json::Map<String, Value> = tools
        .iter()
        .map(|t| (t.to_string(), Value::Bool(true)))
        .collect();
    json!({
        "cwd": "/home/user/project",
        "date": "2026-06-13",
        "time": "09:08:07",
        "lastUserMessage": "latest request",
        "selectedTools": tools,
        "selectedToolsText": tools.join(", "),
        "activeModel": "",
        "populatedAt": "2026-06-13T07:08:07.000Z",
        "timezone": "local",
        "tool": tool,
        "slot": {"history": true},
    })
}

fn scope_with(parameters: Value) -> Scope {
    Scope::new(runtime(&["read"]), parameters)
}

fn ada() -> Scope {
    scope_with(json!({"name": "Ada"}))
}

fn run(text: &str, scope: &Scope) -> Result<String, String> {
    let registry = MacroRegistry::new();
    let mut macros = MacroContext::new(&registry);
    render_text(text, scope, &mut macros)
}

fn ok(text: &str, scope: &Scope) -> String {
    run(text, scope).unwrap_or_else(|e| panic!("{text:?} failed: {e}"))
}

fn err(text: &str, scope: &Scope) -> String {
    match run(text, scope) {
        Ok(out) => panic!("{text:?} rendered {out:?}"),
        Err(e) => e,
    }
}

fn parse_err(text: &str) -> String {
    match parse(text) {
        Ok(t) => panic!("{text:?} parsed: {t:?}"),
        Err(e) => e,
    }
}

fn render_kind(text: &str, scope: &Scope) -> (RenderErrorKind, String) {
    let registry = MacroRegistry::new();
    let mut macros = MacroContext::new(&registry);
    let t = parse(text).unwrap();
    let e = render(&t, scope, &mut macros, OUTPUT_LIMIT).unwrap_err();
    (e.kind, e.message)
}

/// A test macro: fixed text or an error, optional dependencies, a call counter.
struct Fixed {
    deps: Vec<String>,
    result: Result<String, String>,
    calls: Arc<AtomicUsize>,
}

impl Fixed {
    fn ok(text: &str) -> Box<Self> {
        Box::new(Fixed {
            deps: vec![],
            result: Ok(text.to_string()),
            calls: Arc::default(),
        })
    }
    fn fail(message: &str) -> Box<Self> {
        Box::new(Fixed {
            deps: vec![],
            result: Err(message.to_string()),
            calls: Arc::default(),
        })
    }
    fn with_deps(mut self: Box<Self>, deps: &[&str]) -> Box<Self> {
        self.deps = deps.iter().map(|d| d.to_string()).collect();
        self
    }
}

impl Macro for Fixed {
    fn dependencies(&self) -> Vec<String> {
        self.deps.clone()
    }
    fn render(&self, _: &Scope, _: &BTreeMap<String, String>) -> Result<String, String> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.result.clone()
    }
}

/// `A(<value of B>)`: reads its dependency from the resolved extensions.
struct Wrap {
    dep: String,
}

impl Macro for Wrap {
    fn dependencies(&self) -> Vec<String> {
        vec![format!("extensions.{}", self.dep), "parameters.name".into()]
    }
    fn render(&self, _: &Scope, resolved: &BTreeMap<String, String>) -> Result<String, String> {
        let inner = resolved.get(&self.dep).ok_or("dependency missing")?;
        Ok(format!("A({inner})"))
    }
}

/// `u=<runtime.lastUserMessage>`.
struct Latest;

impl Macro for Latest {
    fn render(&self, scope: &Scope, _: &BTreeMap<String, String>) -> Result<String, String> {
        Ok(format!(
            "u={}",
            scope.runtime["lastUserMessage"].as_str().unwrap_or("")
        ))
    }
}

/// Lists the names of the extensions it can see.
struct Seen;

impl Macro for Seen {
    fn dependencies(&self) -> Vec<String> {
        vec!["extensions.B".into()]
    }
    fn render(&self, _: &Scope, resolved: &BTreeMap<String, String>) -> Result<String, String> {
        Ok(resolved.keys().cloned().collect::<Vec<_>>().join("+"))
    }
}

fn registry_42() -> MacroRegistry {
    let mut registry = MacroRegistry::new();
    registry
        .register("A", Box::new(Wrap { dep: "B".into() }))
        .unwrap();
    registry.register("B", Fixed::ok("B")).unwrap();
    registry.register("Boom", Fixed::fail("boom")).unwrap();
    registry
        .register("Big", Fixed::ok(&"x".repeat(100_000)))
        .unwrap();
    registry.register("U", Box::new(Latest)).unwrap();
    registry.register("Seen", Box::new(Seen)).unwrap();
    registry
}

fn nested_ifs(depth: usize, inner: &str) -> String {
    let mut text = String::new();
    for _ in 0..depth {
        text.push_str("{% if runtime.tool.read %}");
    }
    text.push_str(inner);
    for _ in 0..depth {
        text.push_str("{% endif %}");
    }
    text
}

// ------------------------------------------------------------------------------------------------
// vector 22

#[test]
fn v22_basic_render() {
    assert_eq!(
        ok(
            "Hi {{ parameters.name }} / {{ parameters.name | upper }} / {% if runtime.tool.read %}Y{% else %}N{% endif %}",
            &ada()
        ),
        "Hi Ada / ADA / Y"
    );
}

// ------------------------------------------------------------------------------------------------
// vector 23: parse and analysis errors

#[test]
fn v23_unclosed_output_tag() {
    assert_eq!(parse_err("Hello {{ broken"), "Unclosed output tag {{");
    assert_eq!(
        err("Hello {{ broken", &ada()),
        "forge-v1 parse error: Unclosed output tag {{"
    );
}

#[test]
fn v23_empty_output_tag() {
    assert_eq!(parse_err("{{ }}"), "Empty output tag {{}}");
    assert_eq!(parse_err("{{}}"), "Empty output tag {{}}");
    assert_eq!(
        err("a {{ \n }} b", &ada()),
        "forge-v1 parse error: Empty output tag {{}}"
    );
}

#[test]
fn v23_unexpected_else_and_endif() {
    assert_eq!(parse_err("{% else %}"), "Unexpected {% else %}");
    assert_eq!(parse_err("{% endif %}"), "Unexpected {% endif %}");
    assert_eq!(
        err("x{%endif%}", &ada()),
        "forge-v1 parse error: Unexpected {% endif %}"
    );
    // A second else inside the else-body.
    assert_eq!(
        parse_err("{% if a %}1{% else %}2{% else %}3{% endif %}"),
        "Unexpected {% else %}"
    );
}

#[test]
fn v23_unclosed_if_reports_the_missing_endif() {
    // The original said "Missing {% else %}" (spec §8 item 5); an `if` needs no `else`.
    assert_eq!(parse_err("{% if x %}abc"), "Missing {% endif %}");
    assert_eq!(
        err("{% if x %}abc", &ada()),
        "forge-v1 parse error: Missing {% endif %}"
    );
    assert_eq!(parse_err("{% if x %}a{% else %}b"), "Missing {% endif %}");
    // The innermost open body is reported.
    assert_eq!(
        parse_err("{% if x %}a{% else %}{% if y %}b"),
        "Missing {% endif %}"
    );
}

#[test]
fn v23_invalid_predicate_path() {
    assert_eq!(
        parse_err("{% if a != null %}x{% endif %}"),
        "Invalid predicate path: a != null"
    );
    assert_eq!(
        err("{% if a != null %}x{% endif %}", &ada()),
        "forge-v1 parse error: Invalid predicate path: a != null"
    );
    assert_eq!(
        parse_err("{% if name == Ada %}x{% endif %}"),
        "Invalid predicate path: name == Ada"
    );
    // `!==` contains `==` at index 3, so the left side is `a !`.
    assert_eq!(
        parse_err("{% if a !== \"x\" %}x{% endif %}"),
        "Invalid predicate path: a !"
    );
    assert_eq!(
        parse_err("{% if 9lives %}x{% endif %}"),
        "Invalid predicate path: 9lives"
    );
}

#[test]
fn v23_unknown_filter_is_an_analysis_error() {
    let t = parse("{{ name | nope }}").unwrap();
    assert_eq!(analyze(&t), vec!["Unknown forge-v1 filter: nope"]);
    assert_eq!(
        err("{{ name | nope }}", &ada()),
        "Unknown forge-v1 filter: nope"
    );
    let registry = MacroRegistry::new();
    let mut macros = MacroContext::new(&registry);
    assert_eq!(
        render_text_all(
            "{{ name | Upper }}{% if a %}{{ b | trim | x }}{% endif %}",
            &ada(),
            &mut macros
        )
        .unwrap_err(),
        vec![
            "Unknown forge-v1 filter: Upper",
            "Unknown forge-v1 filter: x"
        ]
    );
    // Rendering without analysis reports it when the filter is reached.
    assert_eq!(
        render_kind("{{ name | nope }}", &ada()),
        (
            RenderErrorKind::Filter,
            "Unknown forge-v1 filter: nope".to_string()
        )
    );
}

// ------------------------------------------------------------------------------------------------
// vector 24: undefined

#[test]
fn v24_undefined_paths() {
    assert_eq!(
        render_kind("{{ missing }}", &ada()),
        (
            RenderErrorKind::Undefined,
            "Undefined forge-v1 path: {{missing}}".to_string()
        )
    );
    assert_eq!(
        render_kind("{% if missing == \"x\" %}Y{% endif %}", &ada()),
        (
            RenderErrorKind::Undefined,
            "Undefined forge-v1 path: {{missing}}".to_string()
        )
    );
    assert_eq!(
        render_kind("{% if parameters.missing != 'x' %}Y{% endif %}", &ada()),
        (
            RenderErrorKind::Undefined,
            "Undefined forge-v1 path: {{parameters.missing}}".to_string()
        )
    );
    assert_eq!(
        err("A {{ missing }}", &ada()),
        "forge-v1 render error: Undefined forge-v1 path: {{missing}}"
    );
    assert_eq!(
        ok("{% if runtime.tool.bash %}Y{% else %}N{% endif %}", &ada()),
        "N"
    );
    assert_eq!(ok("{% if missing %}Y{% else %}N{% endif %}", &ada()), "N");
}

// ------------------------------------------------------------------------------------------------
// vector 25: equality

#[test]
fn v25_equality_predicates() {
    assert_eq!(
        ok(
            "{% if name == \"Ada\" %}yes{% else %}no{% endif %} / {% if name != \"Ada\" %}bad{% else %}good{% endif %}",
            &ada()
        ),
        "yes / good"
    );
    assert_eq!(
        ok(
            "{% if name=='Ada' %}1{% endif %}{% if name!='Bob' %}2{% endif %}",
            &ada()
        ),
        "12"
    );
}

// ------------------------------------------------------------------------------------------------
// vector 26: filters

#[test]
fn v26_filters() {
    let scope = scope_with(json!({"name": "  Ada  ", "special": "a<&"}));
    assert_eq!(
        ok(
            "{{ name | trim | upper }}|{{ name | lower }}|{{ special | xml }}|{{ name | json }}",
            &scope
        ),
        "ADA|  ada  |a&lt;&amp;|\"  Ada  \""
    );
}

#[test]
fn filters_xml_json_and_chains() {
    let scope = scope_with(json!({
        "s": "<a href=\"x\">Tom & Jerry's</a>",
        "big": 1e21,
        "f": 0.5,
        "nested": [[1, null], {"k": "v"}],
        "q": "say \"hi\"",
        "de": "straße",
    }));
    assert_eq!(
        ok("{{ s | xml }}", &scope),
        "&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&apos;s&lt;/a&gt;"
    );
    assert_eq!(
        ok("{{ big }}|{{ big | trim }}|{{ f }}", &scope),
        "1e+21|1e+21|0.5"
    );
    assert_eq!(
        ok("{{ nested }}|{{ nested | trim }}", &scope),
        "[[1,null],{\"k\":\"v\"}]|1,,[object Object]"
    );
    assert_eq!(
        ok("{{ q | json | json }}", &scope),
        "\"\\\"say \\\\\\\"hi\\\\\\\"\\\"\""
    );
    assert_eq!(
        ok("{{ q | json | upper | xml }}", &scope),
        "&quot;SAY \\&quot;HI\\&quot;&quot;"
    );
    assert_eq!(ok("{{ de | upper }}", &scope), "STRASSE");
    // Empty filter parts are dropped.
    assert_eq!(ok("{{ q | | upper | }}", &scope), "SAY \"HI\"");
}

// ------------------------------------------------------------------------------------------------
// vector 27: whitespace and the output limit

#[test]
fn v27_whitespace_is_kept() {
    assert_eq!(ok("a\n  {{ name }}  \nb", &ada()), "a\n  Ada  \nb");
}

#[test]
fn v27_output_limit_50() {
    let registry = MacroRegistry::new();
    let mut macros = MacroContext::new(&registry);
    let t = parse(&format!("{} {{{{ name }}}}", "x".repeat(100))).unwrap();
    let e = render(&t, &ada(), &mut macros, 50).unwrap_err();
    assert_eq!(e.kind, RenderErrorKind::OutputLimit);
    assert_eq!(e.message, "forge-v1 template output exceeds 50 characters.");
}

#[test]
fn output_limit_100000_in_utf16_units() {
    let scope = ada();
    assert_eq!(ok(&"x".repeat(100_000), &scope).len(), 100_000);
    assert_eq!(
        err(&"x".repeat(100_001), &scope),
        "forge-v1 render error: forge-v1 template output exceeds 100000 characters."
    );
    // An emoji counts 2.
    assert_eq!(utf16_len(&ok(&"😀".repeat(50_000), &scope)), OUTPUT_LIMIT);
    assert_eq!(
        err(&format!("{}x", "😀".repeat(50_000)), &scope),
        "forge-v1 render error: forge-v1 template output exceeds 100000 characters."
    );
    let registry = MacroRegistry::new();
    let mut macros = MacroContext::new(&registry);
    let t = parse(&"😀".repeat(25)).unwrap();
    assert!(render(&t, &scope, &mut macros, 50).is_ok());
    let t = parse(&"😀".repeat(26)).unwrap();
    assert_eq!(
        render(&t, &scope, &mut macros, 50).unwrap_err().kind,
        RenderErrorKind::OutputLimit
    );
}

#[test]
fn output_limit_counts_values_and_stops_before_later_errors() {
    let scope = scope_with(json!({"long": "y".repeat(60)}));
    let registry = MacroRegistry::new();
    let mut macros = MacroContext::new(&registry);
    // The limit is hit by the value before the undefined path is reached.
    let t = parse("{{ long }}{{ missing }}").unwrap();
    assert_eq!(
        render(&t, &scope, &mut macros, 50).unwrap_err().message,
        "forge-v1 template output exceeds 50 characters."
    );
    // Each body checks its own output (decision 4): 40 + 20 passes the nested check, so the
    // undefined path inside the body is reported first.
    let t = parse(&format!(
        "{}{{% if runtime.tool.read %}}{}{{{{ missing }}}}{{% endif %}}",
        "a".repeat(40),
        "b".repeat(20)
    ))
    .unwrap();
    assert_eq!(
        render(&t, &scope, &mut macros, 50).unwrap_err().kind,
        RenderErrorKind::Undefined
    );
    // Without the undefined path, the parent list reports the limit.
    let t = parse(&format!(
        "{}{{% if runtime.tool.read %}}{}{{% endif %}}",
        "a".repeat(40),
        "b".repeat(20)
    ))
    .unwrap();
    assert_eq!(
        render(&t, &scope, &mut macros, 50).unwrap_err().kind,
        RenderErrorKind::OutputLimit
    );
}

// ------------------------------------------------------------------------------------------------
// vector 28: value rendering

fn values_scope() -> Scope {
    Scope::new(
        runtime(&["read", "bash"]),
        json!({
            "n": 5,
            "obj": {"tone": "x"},
            "nul": null,
            "arr": ["a", "b"],
        }),
    )
}

#[test]
fn v28_value_rendering() {
    let scope = values_scope();
    assert_eq!(ok("{{ n | upper }}", &scope), "5");
    assert_eq!(ok("{{ obj }}", &scope), "{\"tone\":\"x\"}");
    assert_eq!(ok("{{ obj | upper }}", &scope), "[OBJECT OBJECT]");
    assert_eq!(ok("{{ nul }}", &scope), "null");
    assert_eq!(ok("{{ nul | upper }}", &scope), "NULL");
    assert_eq!(ok("{{ arr }}", &scope), "[\"a\",\"b\"]");
    assert_eq!(ok("{{ arr | trim }}", &scope), "a,b");
    assert_eq!(ok("{{ parameters.obj.tone }}", &scope), "x");
    assert_eq!(
        render_kind("{{ parameters.arr.x }}", &scope),
        (
            RenderErrorKind::Undefined,
            "Undefined forge-v1 path: {{parameters.arr.x}}".to_string()
        )
    );
}

#[test]
fn v28_selected_tools() {
    let scope = values_scope();
    assert_eq!(ok("{{ tools }}", &scope), "read, bash");
    assert_eq!(ok("{{ selectedTools }}", &scope), "read, bash");
    assert_eq!(
        ok("{{ runtime.selectedTools }}", &scope),
        "[\"read\",\"bash\"]"
    );
    assert_eq!(ok("{{ runtime.selectedToolsText }}", &scope), "read, bash");
}

// ------------------------------------------------------------------------------------------------
// vector 29: truthiness and comparison

#[test]
fn v29_truthiness() {
    let scope = scope_with(json!({
        "zero": 0, "szero": "0", "ea": [], "eo": {}, "es": "", "nul": null,
        "f": false, "t": true, "neg": -0.5, "arr": [0], "obj": {"a": null},
    }));
    let check = |name: &str| {
        ok(
            &format!("{{% if {name} %}}Y{{% else %}}N{{% endif %}}"),
            &scope,
        )
    };
    for (name, expected) in [
        ("zero", "N"),
        ("szero", "Y"),
        ("ea", "N"),
        ("eo", "N"),
        ("es", "N"),
        ("nul", "N"),
        ("f", "N"),
        ("t", "Y"),
        ("neg", "Y"),
        ("arr", "Y"),
        ("obj", "Y"),
        ("undefinedName", "N"),
    ] {
        assert_eq!(check(name), expected, "{name}");
    }
}

#[test]
fn v29_comparison_by_rendered_text() {
    let scope = scope_with(json!({
        "n": 5, "nul": null, "q": "a\"b", "es": "", "name": "Ada", "obj": {"k": 1},
    }));
    let yn = |pred: &str| {
        ok(
            &format!("{{% if {pred} %}}Y{{% else %}}N{{% endif %}}"),
            &scope,
        )
    };
    assert_eq!(yn("n == \"5\""), "Y");
    assert_eq!(yn("nul == \"null\""), "Y");
    assert_eq!(yn("q == \"a\\\"b\""), "Y");
    assert_eq!(yn("es == \"\""), "Y");
    assert_eq!(yn("es != ''"), "N");
    assert_eq!(yn("obj == '{\"k\":1}'"), "Y");
    assert_eq!(
        err("{% if n == 5 %}Y{% endif %}", &scope),
        "forge-v1 parse error: Invalid predicate path: n == 5"
    );
}

#[test]
fn v29_nested_if() {
    let scope = scope_with(json!({"a": true, "b": "", "name": "Ada"}));
    let text = "{% if a %}A{% if b %}B{% else %}{% if name == 'Ada' %}C{% endif %}{% endif %}{% else %}Z{% endif %}";
    assert_eq!(ok(text, &scope), "AC");
}

#[test]
fn quoted_literal_unescaping_order() {
    // `\"` first, then `\'`, then `\\`, each pass over the previous result.
    let scope = scope_with(json!({
        "apos": "it's",
        "backslash": "a\\b",
        "quirk": "\\\"",
        "inner": "a\"b",
    }));
    let yn = |pred: &str| {
        ok(
            &format!("{{% if {pred} %}}Y{{% else %}}N{{% endif %}}"),
            &scope,
        )
    };
    assert_eq!(yn(r"apos == 'it\'s'"), "Y");
    assert_eq!(yn(r#"backslash == "a\\b""#), "Y");
    // `"\\""`: the inner `\\"` becomes `\"` in the first pass and stays so.
    assert_eq!(yn(r#"quirk == "\\"""#), "Y");
    // The literal runs from the first to the last quote.
    assert_eq!(yn(r#"inner == "a"b""#), "Y");
    // Mismatched quotes are not a literal.
    assert_eq!(
        err("{% if apos == \"x' %}Y{% endif %}", &scope),
        "forge-v1 parse error: Invalid predicate path: apos == \"x'"
    );
    assert_eq!(
        err("{% if apos == \" %}Y{% endif %}", &scope),
        "forge-v1 parse error: Invalid predicate path: apos == \""
    );
}

// ------------------------------------------------------------------------------------------------
// lexing edge cases

#[test]
fn invalid_output_paths() {
    assert_eq!(parse_err("{{{x}}}"), "Invalid path: {x");
    assert_eq!(parse_err("{{ 1abc }}"), "Invalid path: 1abc");
    assert_eq!(parse_err("{{ a..b }}"), "Invalid path: a..b");
    assert_eq!(parse_err("{{ arr.0 }}"), "Invalid path: arr.0");
    assert_eq!(parse_err("{{ | upper }}"), "Invalid path: ");
    assert_eq!(parse_err("{{ a b }}"), "Invalid path: a b");
    assert_eq!(
        err("x {{ upper::char }}", &ada()),
        "forge-v1 parse error: Invalid path: upper::char"
    );
    // Segments are trimmed.
    assert_eq!(ok("{{ parameters . name }}", &ada()), "Ada");
    assert_eq!(
        ok("{{ _x-1 | json }}", &scope_with(json!({"_x-1": 1}))),
        "1"
    );
}

#[test]
fn unclosed_and_unsupported_statement_tags() {
    assert_eq!(parse_err("{% if x"), "Unclosed forge-v1 tag");
    assert_eq!(parse_err("a {% endif"), "Unclosed forge-v1 tag");
    assert_eq!(
        parse_err("{% for x %}"),
        "Unsupported forge-v1 tag: {% for x %}"
    );
    assert_eq!(
        parse_err("{% if %}x{% endif %}"),
        "Unsupported forge-v1 tag: {% if %}"
    );
    assert_eq!(parse_err("{%   %}"), "Unsupported forge-v1 tag: {%  %}");
    // The close is searched from the opener, so `{%}` closes itself.
    assert_eq!(parse_err("a{%}b%}"), "Unsupported forge-v1 tag: {%  %}");
    assert_eq!(
        parse_err("{% if\tx %}y{% endif %}"),
        "Unsupported forge-v1 tag: {% if\tx %}"
    );
    assert_eq!(
        parse_err("{% elif x %}"),
        "Unsupported forge-v1 tag: {% elif x %}"
    );
    assert_eq!(
        err("{% include 'x' %}", &ada()),
        "forge-v1 parse error: Unsupported forge-v1 tag: {% include 'x' %}"
    );
    // Tag bodies are trimmed.
    assert_eq!(ok("{%if name%}y{%else%}n{%endif%}", &ada()), "y");
}

#[test]
fn earliest_opener_wins_and_stray_closers_are_text() {
    let scope = ada();
    assert_eq!(ok("a }} b %} c | d", &scope), "a }} b %} c | d");
    assert_eq!(ok("{{ name }}}", &scope), "Ada}");
    assert_eq!(ok("{ {{name}} %", &scope), "{ Ada %");
    // `{{` first: the output tag ends at the first `}}`, even inside what looks like a statement.
    assert_eq!(parse_err("{{% if x %}}"), "Invalid path: % if x %");
    // `{%` first: the body runs to the first `%}`.
    assert_eq!(
        parse_err("{%{{ name }}%}"),
        "Unsupported forge-v1 tag: {% {{ name }} %}"
    );
    assert_eq!(ok("", &scope), "");
    assert_eq!(ok("plain text ✓", &scope), "plain text ✓");
}

// ------------------------------------------------------------------------------------------------
// nesting

#[test]
fn nesting_up_to_64_renders() {
    assert_eq!(ok(&nested_ifs(MAX_NESTING, "deep"), &ada()), "deep");
}

#[test]
fn nesting_over_64_is_a_render_error_on_the_taken_branch() {
    let text = nested_ifs(MAX_NESTING + 1, "deep");
    assert!(parse(&text).is_ok());
    assert_eq!(
        render_kind(&text, &ada()),
        (
            RenderErrorKind::Recursion,
            "forge-v1 template nesting exceeds 64 levels.".to_string()
        )
    );
    assert_eq!(
        err(&text, &ada()),
        "forge-v1 render error: forge-v1 template nesting exceeds 64 levels."
    );
    // An empty body still counts.
    assert!(run(&nested_ifs(MAX_NESTING + 1, ""), &ada()).is_err());
    // Not taken: no error.
    let untaken = format!(
        "{{% if runtime.tool.bash %}}{}{{% else %}}ok{{% endif %}}",
        nested_ifs(MAX_NESTING + 5, "x")
    );
    assert_eq!(ok(&untaken, &ada()), "ok");
}

#[test]
fn very_deep_templates_parse_without_stack_overflow() {
    let text = nested_ifs(200_000, "x");
    let t = parse(&text).unwrap();
    assert!(analyze(&t).is_empty());
    assert_eq!(dependencies(&t), vec!["runtime.tool.read"]);
    assert!(run(&text, &ada()).is_err());
    drop(t);
    let unclosed = "{% if a %}".repeat(200_000);
    assert_eq!(parse_err(&unclosed), "Missing {% endif %}");
}

// ------------------------------------------------------------------------------------------------
// path lookup

#[test]
fn prototype_names_are_undefined() {
    let scope = ada();
    assert_eq!(
        err("{{ runtime.toString }}", &scope),
        "forge-v1 render error: Undefined forge-v1 path: {{runtime.toString}}"
    );
    assert_eq!(
        err("{{ parameters.constructor }}", &scope),
        "forge-v1 render error: Undefined forge-v1 path: {{parameters.constructor}}"
    );
    assert_eq!(
        err("{{ hasOwnProperty }}", &scope),
        "forge-v1 render error: Undefined forge-v1 path: {{hasOwnProperty}}"
    );
    assert_eq!(
        ok("{% if runtime.toString %}Y{% else %}N{% endif %}{% if runtime.tool.__proto__ %}Y{% else %}N{% endif %}", &scope),
        "NN"
    );
    // Strings have no properties either.
    assert_eq!(
        err("{{ parameters.name.length }}", &scope),
        "forge-v1 render error: Undefined forge-v1 path: {{parameters.name.length}}"
    );
}

#[test]
fn parameter_keys_with_dots_are_unreachable() {
    let scope = scope_with(json!({"a.b": "x", "a": {"c": "y"}}));
    assert_eq!(
        err("{{ parameters.a.b }}", &scope),
        "forge-v1 render error: Undefined forge-v1 path: {{parameters.a.b}}"
    );
    assert_eq!(
        err("{{ a.b }}", &scope),
        "forge-v1 render error: Undefined forge-v1 path: {{a.b}}"
    );
    assert_eq!(ok("{{ parameters.a.c }}", &scope), "y");
    // Unrooted multi-segment paths never walk parameters.
    assert_eq!(
        err("{{ a.c }}", &scope),
        "forge-v1 render error: Undefined forge-v1 path: {{a.c}}"
    );
}

#[test]
fn deep_paths_into_v2_object_parameters() {
    let scope = scope_with(json!({
        "cfg": {"model": {"name": "m", "opts": {"t": 0.5, "list": [1, 2]}, "off": false}},
    }));
    assert_eq!(ok("{{ parameters.cfg.model.name }}", &scope), "m");
    assert_eq!(
        ok("{{ parameters.cfg.model.opts }}", &scope),
        "{\"t\":0.5,\"list\":[1,2]}"
    );
    assert_eq!(
        ok("{{ parameters.cfg.model.opts.list | trim }}", &scope),
        "1,2"
    );
    assert_eq!(ok("{{ parameters.cfg.model.off }}", &scope), "false");
    assert_eq!(
        ok("{% if parameters.cfg.model.off %}Y{% else %}N{% endif %}{% if parameters.cfg.model.opts.t == '0.5' %}Y{% endif %}", &scope),
        "NY"
    );
    assert_eq!(
        ok("{{ cfg | json }}", &scope),
        "{\"model\":{\"name\":\"m\",\"opts\":{\"t\":0.5,\"list\":[1,2]},\"off\":false}}"
    );
    assert_eq!(
        err("{{ parameters.cfg.model.opts.list.x }}", &scope),
        "forge-v1 render error: Undefined forge-v1 path: {{parameters.cfg.model.opts.list.x}}"
    );
}

#[test]
fn bare_name_fallback_order() {
    let scope = scope_with(json!({"date": "param-date", "char": "Konata"}));
    assert_eq!(
        ok(
            "{{ date }} {{ time }} {{ cwd }} {{ lastUserMessage }} [{{ activeModel }}] {{ char }}",
            &scope
        ),
        "param-date 09:08:07 /home/user/project latest request [] Konata"
    );
    // Roots win over parameters of the same name.
    let scope = scope_with(json!({"runtime": "shadow"}));
    assert_eq!(ok("{{ runtime.cwd }}", &scope), "/home/user/project");
    // A parameter shadows a macro of the same name; otherwise the macro answers.
    let registry = registry_42();
    let mut macros = MacroContext::new(&registry);
    let scope = scope_with(json!({"B": "param-B"}));
    assert_eq!(
        render_text("{{ B }} {{ A }} {{ extensions.B }}", &scope, &mut macros).unwrap(),
        "param-B A(B) B"
    );
}

#[test]
fn bare_roots_render_whole_objects() {
    let scope = Scope::new(
        json!({"cwd": "/p", "tool": {"read": true}}),
        json!({"name": "Ada", "n": 1}),
    );
    assert_eq!(
        ok("{{ runtime }}", &scope),
        "{\"cwd\":\"/p\",\"tool\":{\"read\":true}}"
    );
    assert_eq!(ok("{{ parameters }}", &scope), "{\"name\":\"Ada\",\"n\":1}");
    assert_eq!(
        ok("{{ runtime.tool }}|{{ runtime.tool.read }}", &scope),
        "{\"read\":true}|true"
    );
    assert_eq!(ok("{{ extensions }}", &scope), "{}");
    // An alias whose runtime field is absent reports the runtime path.
    assert_eq!(
        err("{{ date }}", &scope),
        "forge-v1 render error: Undefined forge-v1 path: {{runtime.date}}"
    );
    assert_eq!(ok("{% if date %}Y{% else %}N{% endif %}", &scope), "N");
}

#[test]
fn malformed_scope_is_a_compile_error() {
    let scope = Scope::new(runtime(&[]), Value::Null);
    assert_eq!(
        err("x", &scope),
        "forge-v1 compile error: scope parameters must be an object."
    );
    let scope = Scope::new(json!([]), json!({}));
    assert_eq!(
        err("x", &scope),
        "forge-v1 compile error: scope runtime must be an object."
    );
}

// ------------------------------------------------------------------------------------------------
// vector 42: macros

#[test]
fn v42_dependency_resolved_first() {
    let registry = registry_42();
    let mut macros = MacroContext::new(&registry);
    assert_eq!(
        render_text("{{ extensions.A }}", &ada(), &mut macros).unwrap(),
        "A(B)"
    );
    assert_eq!(macros.calls("A"), 1);
    assert_eq!(macros.calls("B"), 1);
    assert_eq!(macros.resolved().get("A").map(String::as_str), Some("A(B)"));
}

#[test]
fn v42_cycle() {
    let mut registry = MacroRegistry::new();
    registry
        .register("A", Fixed::ok("a").with_deps(&["extensions.B"]))
        .unwrap();
    registry
        .register("B", Fixed::ok("b").with_deps(&[" extensions.A "]))
        .unwrap();
    registry
        .register("Self", Fixed::ok("s").with_deps(&["extensions.Self"]))
        .unwrap();
    let mut macros = MacroContext::new(&registry);
    assert_eq!(
        render_text("{{ extensions.A }}", &ada(), &mut macros).unwrap_err(),
        "forge-v1 render error: forge-v1 extension cycle detected at: A"
    );
    assert_eq!(
        render_text("{{ Self }}", &ada(), &mut macros).unwrap_err(),
        "forge-v1 render error: forge-v1 extension cycle detected at: Self"
    );
    assert_eq!(
        macros.resolve("B", &ada()).unwrap_err(),
        "forge-v1 extension cycle detected at: B"
    );
    assert_eq!(macros.total_calls(), 0);
}

#[test]
fn v42_throw_and_size() {
    let registry = registry_42();
    let mut macros = MacroContext::new(&registry);
    assert_eq!(
        render_text("x {{ extensions.Boom }}", &ada(), &mut macros).unwrap_err(),
        "forge-v1 render error: forge-v1 extension Boom failed: boom"
    );
    assert_eq!(
        render_text("{{ extensions.Big }}", &ada(), &mut macros).unwrap_err(),
        "forge-v1 render error: forge-v1 extension Big exceeds 16384 characters."
    );
    // A truthy predicate does not swallow macro errors.
    assert_eq!(
        render_text("{% if Boom %}Y{% endif %}", &ada(), &mut macros).unwrap_err(),
        "forge-v1 render error: forge-v1 extension Boom failed: boom"
    );
    // Failures are not cached: the macro ran on every attempt.
    assert_eq!(macros.calls("Boom"), 2);
    let t = parse("{{ Big }}").unwrap();
    assert_eq!(
        render(&t, &ada(), &mut macros, OUTPUT_LIMIT)
            .unwrap_err()
            .kind,
        RenderErrorKind::ExtensionLimit
    );
}

#[test]
fn v42_macro_output_limit_is_utf16() {
    let mut registry = MacroRegistry::new();
    registry
        .register("Exact", Fixed::ok(&"x".repeat(MACRO_OUTPUT_LIMIT)))
        .unwrap();
    registry
        .register("Emoji", Fixed::ok(&"😀".repeat(MACRO_OUTPUT_LIMIT / 2 + 1)))
        .unwrap();
    let mut macros = MacroContext::new(&registry);
    assert_eq!(
        render_text("{{ Exact }}", &ada(), &mut macros)
            .unwrap()
            .len(),
        MACRO_OUTPUT_LIMIT
    );
    assert_eq!(
        macros.resolve("Emoji", &ada()).unwrap_err(),
        "forge-v1 extension Emoji exceeds 16384 characters."
    );
}

#[test]
fn v42_lazy_evaluation() {
    let registry = registry_42();
    let mut macros = MacroContext::new(&registry);
    assert_eq!(
        render_text(
            "{% if runtime.tool.bash %}{{ extensions.Boom }}{% else %}ok{% endif %}{% if runtime.tool.read %}!{% else %}{{ Big }}{% endif %}",
            &ada(),
            &mut macros
        )
        .unwrap(),
        "ok!"
    );
    assert_eq!(macros.total_calls(), 0);
}

#[test]
fn v42_call_counts_and_latest_message() {
    let registry = registry_42();
    let old = {
        let mut s = ada();
        s.set_last_user_message("old");
        s
    };
    let new = {
        let mut s = ada();
        s.set_last_user_message("new");
        s
    };

    // System and messages share one call.
    let mut macros = MacroContext::new(&registry);
    assert_eq!(
        render_text("s={{ extensions.U }}", &old, &mut macros).unwrap(),
        "s=u=old"
    );
    assert_eq!(
        render_text("m={{ U }}", &old, &mut macros).unwrap(),
        "m=u=old"
    );
    assert_eq!(macros.calls("U"), 1);

    // A new latest message clears the cache: two calls.
    let mut macros = MacroContext::new(&registry);
    assert_eq!(
        render_text("s={{ extensions.U }}", &old, &mut macros).unwrap(),
        "s=u=old"
    );
    macros.set_latest_user_message("new");
    assert_eq!(
        render_text("m={{ extensions.U }}", &new, &mut macros).unwrap(),
        "m=u=new"
    );
    assert_eq!(macros.calls("U"), 2);

    // The same one keeps it: one call.
    let mut macros = MacroContext::new(&registry);
    assert_eq!(
        render_text("s={{ extensions.U }}", &old, &mut macros).unwrap(),
        "s=u=old"
    );
    macros.set_latest_user_message("old");
    assert_eq!(
        render_text("m={{ extensions.U }}", &old, &mut macros).unwrap(),
        "m=u=old"
    );
    assert_eq!(macros.calls("U"), 1);
}

#[test]
fn macro_depth_limit() {
    fn chain(len: usize) -> MacroRegistry {
        let mut registry = MacroRegistry::new();
        for i in 0..len {
            let deps: Vec<String> = if i + 1 < len {
                vec![format!("extensions.M{}", i + 1)]
            } else {
                vec![]
            };
            let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
            registry
                .register(
                    &format!("M{i}"),
                    Fixed::ok(&format!("m{i}")).with_deps(&deps),
                )
                .unwrap();
        }
        registry
    }
    let registry = chain(MAX_MACRO_DEPTH);
    let mut macros = MacroContext::new(&registry);
    assert_eq!(render_text("{{ M0 }}", &ada(), &mut macros).unwrap(), "m0");
    assert_eq!(macros.total_calls(), MAX_MACRO_DEPTH);

    let registry = chain(MAX_MACRO_DEPTH + 1);
    let mut macros = MacroContext::new(&registry);
    assert_eq!(
        render_text("{{ M0 }}", &ada(), &mut macros).unwrap_err(),
        "forge-v1 render error: forge-v1 extension dependency graph is too deep."
    );
    assert_eq!(macros.total_calls(), 0);
}

#[test]
fn macros_see_only_extensions_resolved_so_far() {
    let registry = registry_42();
    let mut macros = MacroContext::new(&registry);
    assert_eq!(render_text("{{ Seen }}", &ada(), &mut macros).unwrap(), "B");
    // `{{ extensions }}` shows what was resolved when the render started, in resolution order.
    assert_eq!(
        render_text("{{ extensions.A }}{{ extensions }}", &ada(), &mut macros).unwrap(),
        "A(B){\"B\":\"B\",\"Seen\":\"B\"}"
    );
    assert_eq!(
        render_text("{{ extensions | json }}", &ada(), &mut macros).unwrap(),
        "{\"B\":\"B\",\"Seen\":\"B\",\"A\":\"A(B)\"}"
    );
    assert_eq!(
        render_text("{{ extensions.A.x }}", &ada(), &mut macros).unwrap_err(),
        "forge-v1 render error: Undefined forge-v1 path: {{extensions.A.x}}"
    );
}

#[test]
fn unregistered_macros() {
    let registry = registry_42();
    let mut macros = MacroContext::new(&registry);
    assert_eq!(
        render_text("{{ extensions.Nope }}", &ada(), &mut macros).unwrap_err(),
        "forge-v1 render error: Undefined forge-v1 path: {{extensions.Nope}}"
    );
    assert_eq!(
        render_text(
            "{% if extensions.Nope %}Y{% else %}N{% endif %}",
            &ada(),
            &mut macros
        )
        .unwrap(),
        "N"
    );
    assert_eq!(
        macros.resolve("Nope", &ada()).unwrap_err(),
        "forge-v1 extension Nope is not registered."
    );
    // Unregistered dependencies of a macro are skipped.
    let mut registry = MacroRegistry::new();
    registry
        .register(
            "X",
            Fixed::ok("x").with_deps(&["extensions.Missing", "runtime.cwd", "extensions.a.b"]),
        )
        .unwrap();
    let mut macros = MacroContext::new(&registry);
    assert_eq!(macros.resolve("X", &ada()).unwrap(), "x");
}

#[test]
fn resolve_dependencies_for_slots() {
    let registry = registry_42();
    let mut macros = MacroContext::new(&registry);
    let deps: Vec<String> = [
        "extensions.A",
        "parameters.x",
        "extensions.Boom",
        "extensions.Nope",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(
        macros.resolve_dependencies(&deps, &ada()),
        vec!["forge-v1 extension Boom failed: boom"]
    );
    assert_eq!(
        macros.resolved().keys().cloned().collect::<Vec<_>>(),
        vec!["A", "B"]
    );
}

#[test]
fn registry_names() {
    let mut registry = MacroRegistry::new();
    registry.register("zeta", Fixed::ok("")).unwrap();
    registry.register("Alpha_1-x", Fixed::ok("")).unwrap();
    assert_eq!(
        registry.register("zeta", Fixed::ok("")).unwrap_err(),
        "Macro is already registered: zeta"
    );
    for bad in ["", "_x", "1a", "a.b", "a b", "é"] {
        assert_eq!(
            registry.register(bad, Fixed::ok("")).unwrap_err(),
            format!("Macro name must start with a letter and contain only letters, numbers, underscore, or hyphen: {bad}")
        );
    }
    assert_eq!(registry.names(), vec!["zeta", "Alpha_1-x"]);
}

// ------------------------------------------------------------------------------------------------
// analysis helpers

#[test]
fn dependencies_in_document_order_once() {
    let t = parse(
        "{{ parameters.name }}{% if runtime.tool.read %}{{ extensions.A | upper }}{% else %}{{ name }}{% endif %}{{ parameters.name }}{% if x == 'y' %}{% endif %}",
    )
    .unwrap();
    assert_eq!(
        dependencies(&t),
        vec![
            "parameters.name",
            "runtime.tool.read",
            "extensions.A",
            "name",
            "x"
        ]
    );
    assert!(analyze(&t).is_empty());
}

// ------------------------------------------------------------------------------------------------
// properties

fn fuzz_registry() -> MacroRegistry {
    let mut registry = registry_42();
    registry
        .register("Loop", Fixed::ok("l").with_deps(&["extensions.Loop"]))
        .unwrap();
    registry
}

fn fuzz_scope() -> Scope {
    scope_with(json!({
        "name": "Ada", "n": 5, "obj": {"tone": "x", "deep": {"k": [1, 2]}}, "arr": ["a", "b"],
        "nul": null, "es": "", "emoji": "😀😀", "big": "z".repeat(300),
    }))
}

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("{{".to_string()),
        Just("}}".to_string()),
        Just("{%".to_string()),
        Just("%}".to_string()),
        Just("|".to_string()),
        Just("\"".to_string()),
        Just("'".to_string()),
        Just("\\".to_string()),
        Just(".".to_string()),
        Just(" ".to_string()),
        Just("==".to_string()),
        Just("!=".to_string()),
        Just("if ".to_string()),
        Just("else".to_string()),
        Just("endif".to_string()),
        Just("{% if name %}".to_string()),
        Just("{% if runtime.tool.read %}".to_string()),
        Just("{% if obj.tone == 'x' %}".to_string()),
        Just("{% else %}".to_string()),
        Just("{% endif %}".to_string()),
        Just("{{ name | upper }}".to_string()),
        Just("{{ big }}".to_string()),
        Just("{{ emoji | json | xml }}".to_string()),
        Just("{{ extensions.A }}".to_string()),
        Just("{{ Boom }}".to_string()),
        Just("{{ Loop }}".to_string()),
        Just("{{ extensions }}".to_string()),
        Just("{{ parameters.obj.deep.k | trim }}".to_string()),
        prop::sample::select(vec![
            "name",
            "obj",
            "arr",
            "nul",
            "es",
            "trim",
            "json",
            "xml",
            "nope",
            "runtime",
            "parameters",
            "tools",
            "😀",
            "\n",
        ])
        .prop_map(str::to_string),
        "[a-z{}%|.=!'\" \\\\]{0,6}",
        any::<String>(),
    ]
}

/// The text of one highlighted line: tags removed, the three entities decoded.
fn strip_html(line: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in line.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

fn template_text() -> impl Strategy<Value = String> {
    prop::collection::vec(piece(), 0..40).prop_map(|parts| parts.concat())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// Arbitrary template-like text never panics, and output never exceeds the limit.
    #[test]
    fn never_panics(text in template_text(), limit in 0usize..400) {
        let registry = fuzz_registry();
        let scope = fuzz_scope();
        if let Ok(t) = parse(&text) {
            let _ = analyze(&t);
            let _ = dependencies(&t);
            let mut macros = MacroContext::new(&registry);
            if let Ok(out) = render(&t, &scope, &mut macros, limit) {
                prop_assert!(utf16_len(&out) <= limit);
            }
            // Deterministic with a fresh context.
            let first = render(&t, &scope, &mut MacroContext::new(&registry), limit);
            let second = render(&t, &scope, &mut MacroContext::new(&registry), limit);
            prop_assert_eq!(first, second);
        }
        let mut macros = MacroContext::new(&registry);
        match render_text(&text, &scope, &mut macros) {
            Ok(out) => prop_assert!(utf16_len(&out) <= OUTPUT_LIMIT),
            Err(e) => prop_assert!(!e.is_empty()),
        }
    }

    /// The editor's highlighting never panics, keeps every character exactly once (the lines'
    /// text is the text), its tokens are ordered and disjoint, every tag the parser accepts is a
    /// closed tag of the lexer, and completion, hover and tag matching never panic at any caret.
    #[test]
    fn editor_assist_keeps_the_text(text in template_text(), caret in 0usize..400) {
        use forge_core::template::assist;
        let caret = (0..=caret.min(text.len())).rev().find(|&b| text.is_char_boundary(b)).unwrap_or(0);
        let h = assist::highlight(&text, Some(caret));
        let plain: Vec<String> = h.lines.iter().map(|l| strip_html(l)).collect();
        prop_assert_eq!(plain.join("\n"), text.clone());
        let mut previous_end = 0;
        for token in &h.lexed.tokens {
            prop_assert!(token.start >= previous_end && token.end > token.start);
            previous_end = token.end;
        }
        if parse(&text).is_ok() {
            prop_assert!(h.lexed.tags.iter().all(|t| t.closed));
        }
        let scope = fuzz_scope();
        let _ = assist::complete(&text, &h.lexed, caret, &scope);
        let _ = assist::hover(&text, &h.lexed, caret, &scope);
        let _ = assist::matching(&h.lexed, caret);
    }

    /// Text without openers renders to itself.
    #[test]
    fn plain_text_is_identity(text in "[^{]{0,200}") {
        let registry = MacroRegistry::new();
        let mut macros = MacroContext::new(&registry);
        prop_assert_eq!(render_text(&text, &fuzz_scope(), &mut macros), Ok(text.clone()));
    }
}

// ------------------------------------------------------------------------------------------------
// Analysis with UTF-16 spans (issue 15: `pi-forge template check|render`, reusable by the editor)

fn span(start: usize, end: usize) -> Option<Span> {
    Some(Span { start, end })
}

fn error(message: &str, at: Option<Span>) -> TemplateError {
    TemplateError {
        message: message.to_string(),
        span: at,
    }
}

#[test]
fn analysis_spans_are_utf16_code_units() {
    // "😀" is 2 UTF-16 units (4 bytes), "é" 1 unit (2 bytes).
    let text = "😀é {{ parameters.name | upper }} {% if runtime.tool.read %}{{ name }}{% endif %} {{ parameters.name }}";
    let analysis = analyze_text(text);
    assert_eq!(analysis.errors, vec![]);
    assert_eq!(
        analysis.dependencies,
        vec![
            Dependency {
                path: "parameters.name".into(),
                spans: vec![
                    Span { start: 4, end: 33 },
                    Span {
                        start: 82,
                        end: 103
                    }
                ],
            },
            Dependency {
                path: "runtime.tool.read".into(),
                spans: vec![Span { start: 34, end: 60 }],
            },
            Dependency {
                path: "name".into(),
                spans: vec![Span { start: 60, end: 70 }],
            },
        ]
    );
    // The dependency list is the one `dependencies` gives.
    let paths: Vec<String> = analysis
        .dependencies
        .iter()
        .map(|d| d.path.clone())
        .collect();
    assert_eq!(paths, dependencies(&parse(text).unwrap()));
}

#[test]
fn analysis_errors_point_at_the_tag() {
    assert_eq!(
        analyze_text("é{{ a | shout }} {{ b | trim | nope }}").errors,
        vec![
            error("Unknown forge-v1 filter: shout", span(1, 16)),
            error("Unknown forge-v1 filter: nope", span(17, 38)),
        ]
    );
    assert_eq!(
        analyze_text("ab 😀{{ broken").errors,
        vec![error(
            "forge-v1 parse error: Unclosed output tag {{",
            span(5, 14)
        )]
    );
    assert_eq!(
        analyze_text("x{% if a %}y{% if b %}z{% else %}").errors,
        vec![error(
            "forge-v1 parse error: Missing {% endif %}",
            span(12, 22)
        )]
    );
    assert_eq!(
        analyze_text("{% if a %}{% endif %}{% if b %}").errors,
        vec![error(
            "forge-v1 parse error: Missing {% endif %}",
            span(21, 31)
        )]
    );
    assert_eq!(
        analyze_text("ok {% if a != null %}").errors,
        vec![error(
            "forge-v1 parse error: Invalid predicate path: a != null",
            span(3, 21)
        )]
    );
    assert_eq!(
        analyze_text("{% endif %}").errors,
        vec![error(
            "forge-v1 parse error: Unexpected {% endif %}",
            span(0, 11)
        )]
    );
    // A parse error reports no dependencies.
    assert_eq!(analyze_text("{{ a }}{{").dependencies, vec![]);
}

#[test]
fn render_checked_gives_render_errors_a_span() {
    let registry = MacroRegistry::new();
    let scope = Scope::new(json!({"tool": {"read": true}}), json!({"who": "Ada"}));
    let mut ctx = MacroContext::new(&registry);
    assert_eq!(
        render_checked("Hi {{ who | upper }}", &scope, &mut ctx),
        Ok("Hi ADA".to_string())
    );
    let mut ctx = MacroContext::new(&registry);
    assert_eq!(
        render_checked(
            "é {% if runtime.tool.read %}[{{ parameters.missing }}]{% endif %}",
            &scope,
            &mut ctx
        ),
        Err(vec![error(
            "forge-v1 render error: Undefined forge-v1 path: {{parameters.missing}}",
            span(29, 53)
        )])
    );
    let mut ctx = MacroContext::new(&registry);
    assert_eq!(
        render_checked("{{ who | shout }}", &scope, &mut ctx),
        Err(vec![error("Unknown forge-v1 filter: shout", span(0, 17))])
    );
    let bad = Scope::new(json!([]), json!({}));
    let mut ctx = MacroContext::new(&registry);
    assert_eq!(
        render_checked("x", &bad, &mut ctx),
        Err(vec![error(
            "forge-v1 compile error: scope runtime must be an object.",
            None
        )])
    );
    // The same message as the compiler's block diagnostic.
    let mut ctx = MacroContext::new(&registry);
    assert_eq!(
        render_text("{{ parameters.missing }}", &scope, &mut ctx).unwrap_err(),
        "forge-v1 render error: Undefined forge-v1 path: {{parameters.missing}}"
    );
}
