//! Context diff: hashes, blocks, alignment, prefix reuse and token deltas; payload extraction.
