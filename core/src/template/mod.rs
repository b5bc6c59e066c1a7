//! forge-v1 templates: parser, analyzer, renderer.
