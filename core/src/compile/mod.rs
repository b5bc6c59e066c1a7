//! The prompt compiler: system prompt, messages, slots, chat history, tool and skill policy.
