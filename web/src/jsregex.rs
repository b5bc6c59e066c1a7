//! The browser build of forge-core has no regex engine (regress stays out of the bundle), so
//! as you type it asks [`check`], the browser's own JavaScript engine, whether a rule's pattern
//! compiles. The server runs the same checks with regress, and a save is refused there whatever
//! the browser thought. Running a rule on sample text ("Try it") is the server's job
//! (`POST /api/regex/try`), so the result is the compiler's.

use js_sys::{Array, Reflect, RegExp};
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
