//! The clock of this machine, as forge-core's runtime facts take it.

use forge_core::runtime::Clock;

/// Now, with the local UTC offset.
pub fn local_clock() -> Clock {
    let now = chrono::Local::now();
    Clock {
        epoch_ms: now.timestamp_millis(),
        utc_offset_minutes: now.offset().local_minus_utc() / 60,
    }
}
