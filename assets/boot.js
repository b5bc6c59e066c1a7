// pi-forge boot: collect page errors, then start the wasm app.
//
// window.__forgeErrors lists every uncaught error, unhandled rejection and console.error
// message of this page; the browser tests assert that it stays empty.
const errors = (window.__forgeErrors = []);
window.addEventListener("error", (e) => errors.push(String(e.message || e)));
window.addEventListener("unhandledrejection", (e) => errors.push(String(e.reason)));
const consoleError = console.error.bind(console);
console.error = (...args) => {
  errors.push(args.map(String).join(" "));
  consoleError(...args);
};

// A dynamic import (static ones are hoisted) so the handlers above see loading errors too.
import("/assets/forge_web.js")
  .then((app) => app.default({ module_or_path: "/assets/forge_web_bg.wasm" }))
  .catch((e) => console.error("pi-forge failed to start:", e));
