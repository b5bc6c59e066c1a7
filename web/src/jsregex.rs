//! Regular expressions in the browser run on the browser's own JavaScript engine: forge-core
//! is built without regress here (a much smaller bundle), and asks [`check`] whether a rule's
//! pattern compiles. The server runs the same checks with regress, and a save is refused there
//! whatever the browser thought.

use js_sys::{Array, JsString, Reflect, RegExp};
use wasm_bindgen::{JsCast, JsValue};

/// Builds `new RegExp(pattern, flags)`, or the engine's reason when it throws.
fn build(pattern: &str, flags: &str) -> Result<RegExp, String> {
    let ctor: JsValue = js_sys::global()
        .dyn_into::<js_sys::Object>()
        .ok()
        .and_then(|g| Reflect::get(&g, &JsValue::from_str("RegExp")).ok())
        .ok_or_else(|| "RegExp is not available".to_string())?;
    let args = Array::of2(&JsValue::from_str(pattern), &JsValue::from_str(flags));
    let ctor = ctor.unchecked_into::<js_sys::Function>();
    match Reflect::construct(&ctor, &args) {
        Ok(re) => Ok(re.unchecked_into::<RegExp>()),
        Err(e) => {
            let message = e
                .dyn_ref::<js_sys::Error>()
                .map(|e| String::from(e.message()))
                .unwrap_or_else(|| "invalid pattern".to_string());
            // V8 says "Invalid regular expression: /<pattern>/<flags>: <reason>"; forge-core
            // adds that prefix itself, so keep the reason.
            let prefix = format!("Invalid regular expression: /{pattern}/{flags}: ");
            Err(message
                .strip_prefix(&prefix)
                .map(str::to_string)
                .unwrap_or(message))
        }
    }
}

/// forge-core's pattern checker for the browser build.
pub fn check(pattern: &str, flags: &str) -> Result<(), String> {
    build(pattern, flags).map(|_| ())
}

/// Runs a rule on sample text the way JavaScript's `String.prototype.replace` does
/// (`$0` read as `$&`): the number of matches and the result.
pub fn try_replace(
    pattern: &str,
    flags: &str,
    replace: &str,
    text: &str,
) -> Result<(usize, String), String> {
    let re = build(pattern, flags)?;
    let subject = JsString::from(text);
    let matches = if flags.contains('g') {
        let counter = build(pattern, flags)?;
        let mut n = 0usize;
        let mut guard = 0usize;
        while let Some(m) = counter.exec(text) {
            n += 1;
            guard += 1;
            let matched = m.get(0).as_string().unwrap_or_default();
            if matched.is_empty() {
                counter.set_last_index(counter.last_index() + 1);
            }
            if guard > 10_000 {
                break;
            }
        }
        n
    } else {
        usize::from(re.test(text))
    };
    let replacement = replace.replace("$0", "$&");
    let out = subject.replace_by_pattern(&re, &replacement);
    Ok((matches, String::from(out)))
}
