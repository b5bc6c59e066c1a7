//! Rebuild the binary whenever the web bundle changes: rust-embed reads `assets/dist` at compile
//! time, and without this a binary built while the folder was empty keeps serving nothing.

fn main() {
    // A missing path counts as "changed" on every build, which would recompile pi-forge each
    // time before the first `cargo xtask dist`; an empty folder does not. It is gitignored.
    let _ = std::fs::create_dir_all("../assets/dist");
    println!("cargo:rerun-if-changed=../assets/dist");
}
