//! Rebuild the binary whenever the web bundle changes: rust-embed reads `assets/dist` at compile
//! time, and without this a binary built while the folder was empty keeps serving nothing.
//! Also records the target triple the binary is built for (`pi-forge --version` says it) and
//! the version it reports: the package version, or `PI_FORGE_BUILD_VERSION` when set (only
//! `cargo xtask package --version V` sets it, to build a test package of another version).

fn main() {
    // A missing path counts as "changed" on every build, which would recompile pi-forge each
    // time before the first `cargo xtask dist`; an empty folder does not. It is gitignored.
    let _ = std::fs::create_dir_all("../assets/dist");
    println!("cargo:rerun-if-changed=../assets/dist");
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".to_string());
    println!("cargo:rustc-env=PI_FORGE_TARGET={target}");
    println!("cargo:rerun-if-env-changed=PI_FORGE_BUILD_VERSION");
    let version = std::env::var("PI_FORGE_BUILD_VERSION")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| std::env::var("CARGO_PKG_VERSION").unwrap_or_default());
    println!("cargo:rustc-env=PI_FORGE_VERSION={version}");
}
