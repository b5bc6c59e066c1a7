//! What this binary is.

/// The version this binary reports (`--version`, the hello, the state file): the package
/// version unless a test package was built with another (server/build.rs).
pub(crate) const VERSION: &str = env!("PI_FORGE_VERSION");
