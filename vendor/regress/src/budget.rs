//! pi-forge patch: a step budget for the backtracking engine.
//!
//! Every instruction the backtracker executes takes one step from the current thread's budget.
//! When the budget is spent, every match attempt fails at once and [`exhausted`] turns true,
//! so a catastrophic pattern (`(a+)+$` on a long text) stops after a bounded amount of work
//! instead of running for hours. The budget is unlimited until [`set`] is called.

#[cfg(feature = "std")]
std::thread_local! {
    static STEPS: core::cell::Cell<u64> = const { core::cell::Cell::new(u64::MAX) };
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
