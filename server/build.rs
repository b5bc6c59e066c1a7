//! Rebuild the binary whenever the web bundle changes: rust-embed reads `assets/dist` at compile
//! time, and without this a binary built while the folder was empty keeps serving nothing.
//! Also records the target triple the binary is built for (`pi-forge --version` says it).

fn main() {
    // A missing path counts as "changed" on every build, which would recompile pi-forge each
    // time before the first `cargo xtask dist`; an empty folder does not. It is gitignored.
    let _ = std::fs::create_dir_all("../assets/dist");
    println!("cargo:rerun-if-changed=../assets/dist");
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".to_string());
    println!("cargo:rustc-env=PI_FORGE_TARGET={target}");
}
