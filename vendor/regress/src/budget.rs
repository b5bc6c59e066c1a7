//! pi-forge patch: a step budget for the backtracking engine.
//!
//! Every instruction the backtracker executes takes one step from the current thread's budget.
//! When the budget is spent, every match attempt fails at once and [`exhausted`] turns true,
//! so a catastrophic pattern (`(a+)+$` on a long text) stops after a bounded amount of work
//! instead of running for hours. The budget is unlimited until [`set`] is called.
//!
//! The budget also bounds memory: [`set_stack_limit`] caps how many backtrack states one match
//! attempt may hold at once. An attempt that reaches the cap spends the whole step budget (so
//! [`exhausted`] turns true and the caller reports the same "out of budget" outcome) and fails.
//! [`stack_peak`] reports the most states an attempt held, for tests and measurements.

#[cfg(feature = "std")]
std::thread_local! {
    static STEPS: core::cell::Cell<u64> = const { core::cell::Cell::new(u64::MAX) };
    static STACK_LIMIT: core::cell::Cell<usize> = const { core::cell::Cell::new(usize::MAX) };
    static STACK_PEAK: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

/// The size in bytes of one backtrack state (the same for every input kind the engine has).
pub const STACK_ENTRY_BYTES: usize = crate::classicalbacktrack::BACKTRACK_ENTRY_BYTES;

/// Caps the backtrack states one match attempt on the current thread may hold at once
/// (`usize::MAX`: unlimited, the default). The check runs before every instruction, and one
/// instruction pushes at most three states plus one per capture group of a lookaround, so the
/// stack never holds more than `entries + 3 + groups` states of [`STACK_ENTRY_BYTES`] each.
/// Reaching the cap spends the step budget: the attempt fails and [`exhausted`] is true.
/// Matchers read the cap when they are created.
#[cfg(feature = "std")]
pub fn set_stack_limit(entries: usize) {
    STACK_LIMIT.with(|s| s.set(entries));
}

/// The current thread's backtrack stack cap.
#[cfg(feature = "std")]
pub fn stack_limit() -> usize {
    STACK_LIMIT.with(|s| s.get())
}

/// The most backtrack states (counting the bottom marker) one match attempt on the current
/// thread held since [`reset_stack_peak`]; a lookaround's own stack adds to its caller's.
#[cfg(feature = "std")]
pub fn stack_peak() -> usize {
    STACK_PEAK.with(|s| s.get())
}

/// Sets [`stack_peak`] back to 0.
#[cfg(feature = "std")]
pub fn reset_stack_peak() {
    STACK_PEAK.with(|s| s.set(0));
}

/// Raises the recorded peak to `held` states.
#[cfg(feature = "std")]
pub(crate) fn record_stack_peak(held: usize) {
    STACK_PEAK.with(|s| {
        if held > s.get() {
            s.set(held)
        }
    });
}

/// Spends the whole step budget: the backtrack stack reached its cap.
#[cfg(feature = "std")]
pub(crate) fn spend_all() {
    set(0);
}

/// Gives the current thread `steps` backtracking steps (`u64::MAX`: unlimited).
#[cfg(feature = "std")]
pub fn set(steps: u64) {
    STEPS.with(|s| s.set(steps));
}

/// The steps left on the current thread.
#[cfg(feature = "std")]
pub fn remaining() -> u64 {
    STEPS.with(|s| s.get())
}

/// True when the current thread's budget is spent: matches since then failed early.
#[cfg(feature = "std")]
pub fn exhausted() -> bool {
    remaining() == 0
}

/// Takes one step; false when none is left.
#[cfg(feature = "std")]
#[inline(always)]
pub(crate) fn step() -> bool {
    STEPS.with(|s| {
        let left = s.get();
        if left == 0 {
            false
        } else {
            s.set(left - 1);
            true
        }
    })
}

/// Without `std` there is no thread-local budget: matching is unlimited.
#[cfg(not(feature = "std"))]
#[inline(always)]
pub(crate) fn step() -> bool {
    true
}

/// Without `std` the budget is never spent.
#[cfg(not(feature = "std"))]
#[inline(always)]
pub(crate) fn exhausted() -> bool {
    false
}

/// Without `std` the backtrack stack is unlimited.
#[cfg(not(feature = "std"))]
#[inline(always)]
pub(crate) fn stack_limit() -> usize {
    usize::MAX
}

/// Without `std` no peak is recorded.
#[cfg(not(feature = "std"))]
#[inline(always)]
pub(crate) fn record_stack_peak(_held: usize) {}

/// Without `std` there is no budget to spend.
#[cfg(not(feature = "std"))]
#[inline(always)]
pub(crate) fn spend_all() {}
