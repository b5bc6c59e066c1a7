//! Prompt stacks ("Presets"): schema, normalization, validation, serialization.
