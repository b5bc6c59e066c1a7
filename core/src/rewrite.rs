//! Regex rules at run time: selection, JavaScript replacement semantics, eligibility, finalize.
