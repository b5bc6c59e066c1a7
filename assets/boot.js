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

// A click on a row of the page's own first screen (drawn by the server, see
// server/src/http/first_screen.rs) before the app has started: the row is shown as the opened one
// and remembered, and the app opens that Preset when it takes the screen over
// (`shell::take_first_screen_click` in web/src/shell.rs).
document.addEventListener("click", (e) => {
  const row = e.target instanceof Element ? e.target.closest("#forge-first-screen .stack-row[data-selector]") : null;
  if (!row) return;
  for (const other of document.querySelectorAll("#forge-first-screen .stack-row.selected")) {
    other.classList.remove("selected");
    other.setAttribute("aria-current", "false");
  }
  row.classList.add("selected");
  row.setAttribute("aria-current", "true");
  window.__forgeFirstScreenOpen = row.getAttribute("data-selector");
});

// The page names the (content-hashed) module and wasm in its preload links, so this file never
// changes with them and is compressed once at build time like the rest of the bundle.
const link = (selector) => document.querySelector(selector)?.getAttribute("href");
const module = link('link[rel="modulepreload"]');
const wasm = link('link[rel="preload"][as="fetch"]');

// A dynamic import (static ones are hoisted) so the handlers above see loading errors too. It
// starts after the page's first screen (drawn by the server) was painted: compiling the module
// and the wasm would otherwise compete with that paint. The preload links fetch both meanwhile.
// The module is kept for the loader of the lazily loaded chunks (`__wasm_split.js`, see
// `split_loader` in xtask/src/main.rs), which must reach this instance, not a second copy.
const start = () =>
  import(module)
    .then((app) => {
      window.__forgeModule = app;
      return app.default({ module_or_path: wasm });
    })
    .catch((e) => console.error("pi-forge failed to start:", e));
requestAnimationFrame(() => setTimeout(start, 0));
