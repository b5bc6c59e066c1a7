//! `pi-forge template check|render`: forge-v1 templates outside a stack, through forge-core's
//! `analyze_text` / `render_checked` (the spans are UTF-16 code units, as the editor counts).

use crate::cli::TemplateArgs;
use crate::input::{exit_for_errors, input_name, read_input};
use anyhow::{bail, Result};
use forge_core::json;
use forge_core::template::{
    analyze_text, line_column, render_checked, Analysis, MacroContext, MacroRegistry, Scope, Span,
    TemplateError,
};
use serde_json::{json, Map, Value};
use std::process::ExitCode;

/// The template text (UTF-8, a leading byte-order mark ignored).
fn read_template(args: &TemplateArgs) -> Result<String> {
    let bytes = read_input(&args.file, "template")?;
    let text = String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{} is not valid UTF-8 (invalid byte at offset {})",
            input_name(&args.file),
            e.utf8_error().valid_up_to()
        )
    })?;
    Ok(text
        .strip_prefix('\u{feff}')
        .map(str::to_string)
        .unwrap_or(text))
}

/// The `--env` file as a scope: `{runtime?: object, parameters?: object}`, other keys refused.
fn read_scope(args: &TemplateArgs) -> Result<Option<Scope>> {
    let Some(path) = &args.env else {
        return Ok(None);
    };
    let name = input_name(path);
    let bytes = read_input(path, "environment")?;
    let value = json::parse_bytes(&bytes)
        .map_err(|e| anyhow::anyhow!("environment {name} is not valid JSON: {e}"))?;
    let Value::Object(mut env) = value else {
        bail!("environment {name} must be a JSON object with `runtime` and `parameters` objects");
    };
    let mut part = |key: &str| -> Result<Value> {
        match env.remove(key) {
            None => Ok(Value::Object(Map::new())),
            Some(value @ Value::Object(_)) => Ok(value),
            Some(other) => bail!(
                "environment {name}: `{key}` must be an object, not {}",
                json::type_name(&other)
            ),
        }
    };
    let scope = Scope::new(part("runtime")?, part("parameters")?);
    if let Some(extra) = env.keys().next() {
        bail!("environment {name}: unknown key `{extra}` (expected `runtime` and `parameters`)");
    }
    Ok(Some(scope))
}

fn where_text(text: &str, span: Option<Span>) -> String {
    match span {
        Some(span) => {
            let (line, column) = line_column(text, span.start);
            format!(
                "line {line}, column {column} [{}..{}]",
                span.start, span.end
            )
        }
        None => "template".to_string(),
    }
}

fn error_lines(text: &str, errors: &[TemplateError]) -> Vec<String> {
    errors
        .iter()
        .map(|e| format!("error: {}: {}", where_text(text, e.span), e.message))
        .collect()
}

/// Renders with the environment; `Err` carries the template errors.
fn render_scope(text: &str, scope: &Scope) -> Result<String, Vec<TemplateError>> {
    let registry = MacroRegistry::new();
    let mut macros = MacroContext::new(&registry);
    render_checked(text, scope, &mut macros)
}

/// `pi-forge template check`.
pub fn check(args: &TemplateArgs) -> Result<ExitCode> {
    let text = read_template(args)?;
    let scope = read_scope(args)?;
    let Analysis {
        mut errors,
        dependencies,
    } = analyze_text(&text);
    if errors.is_empty() {
        if let Some(scope) = &scope {
            if let Err(render_errors) = render_scope(&text, scope) {
                errors = render_errors;
            }
        }
    }
    if args.json {
        let report = json!({
            "ok": errors.is_empty(),
            "errors": errors,
            "dependencies": dependencies,
        });
        print!("{}", json::to_pretty(&report));
    } else {
        for line in error_lines(&text, &errors) {
            println!("{line}");
        }
        for dependency in &dependencies {
            let places: Vec<String> = dependency
                .spans
                .iter()
                .map(|s| where_text(&text, Some(*s)))
                .collect();
            println!("uses {}: {}", dependency.path, places.join("; "));
        }
        println!(
            "{} error(s), {} dependenc{}.",
            errors.len(),
            dependencies.len(),
            if dependencies.len() == 1 { "y" } else { "ies" }
        );
    }
    Ok(exit_for_errors(errors.len()))
}

/// `pi-forge template render`.
pub fn render(args: &TemplateArgs) -> Result<ExitCode> {
    let text = read_template(args)?;
    let scope = read_scope(args)?
        .unwrap_or_else(|| Scope::new(Value::Object(Map::new()), Value::Object(Map::new())));
    let result = render_scope(&text, &scope);
    let errors = result.as_ref().err().map_or(0, Vec::len);
    if args.json {
        let report = match &result {
            Ok(output) => json!({"ok": true, "output": output, "errors": []}),
            Err(errors) => json!({"ok": false, "output": null, "errors": errors}),
        };
        print!("{}", json::to_pretty(&report));
    } else {
        match &result {
            Ok(output) => print!("{output}"),
            // On standard error, so a pipe only ever receives rendered output.
            Err(errors) => {
                for line in error_lines(&text, errors) {
                    eprintln!("{line}");
                }
            }
        }
    }
    Ok(exit_for_errors(errors))
}
