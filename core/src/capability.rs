//! Capabilities and Preset capability bindings.
