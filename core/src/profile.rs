//! Agent profiles: model + thinking level + prompt stack.
