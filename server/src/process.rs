//! Signals to other processes by pid: whether one is alive, and asking it (or its group) to stop.
//! These are system calls (rustix), not a `kill` child process per probe. Off Unix there are no
//! such signals: nothing is alive by pid and a signal does nothing.

/// A signal this crate sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopSignal {
    /// Asks it to finish (SIGTERM).
    Term,
    /// Ends it at once (SIGKILL).
    Kill,
}

/// Whether a process with `pid` exists and may be signalled by us (`kill -0`). pid 0 (our own
/// group) and pids out of range are not alive.
#[cfg(unix)]
pub fn alive(pid: u32) -> bool {
    unix::pid(pid).is_some_and(|pid| rustix::process::test_kill_process(pid).is_ok())
}

/// Sends `stop` to the process `pid` (a failure, such as a process already gone, is ignored).
#[cfg(unix)]
pub fn signal(pid: u32, stop: StopSignal) {
    if let Some(pid) = unix::pid(pid) {
        let _ = rustix::process::kill_process(pid, unix::signal(stop));
    }
}

/// Sends `stop` to every process of the group `pgid` (ignoring a failure).
#[cfg(unix)]
pub fn signal_group(pgid: u32, stop: StopSignal) {
    if let Some(pgid) = unix::pid(pgid) {
        let _ = rustix::process::kill_process_group(pgid, unix::signal(stop));
    }
}

#[cfg(unix)]
mod unix {
    use rustix::process::{Pid, Signal};

    pub fn pid(pid: u32) -> Option<Pid> {
        Pid::from_raw(i32::try_from(pid).ok()?)
    }

    pub fn signal(stop: super::StopSignal) -> Signal {
        match stop {
            super::StopSignal::Term => Signal::TERM,
            super::StopSignal::Kill => Signal::KILL,
        }
    }
}

#[cfg(not(unix))]
pub fn alive(_pid: u32) -> bool {
    false
}

#[cfg(not(unix))]
pub fn signal(_pid: u32, _stop: StopSignal) {}

#[cfg(not(unix))]
pub fn signal_group(_pgid: u32, _stop: StopSignal) {}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_alive_until_it_is_killed_and_reaped() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep starts");
        let pid = child.id();
        assert!(alive(pid));
        signal(pid, StopSignal::Term);
        let status = child.wait().expect("the child ends");
        assert!(!status.success());
        assert!(!alive(pid), "reaped, so gone");
        assert!(!alive(0), "pid 0 is a group, not a process");
        assert!(!alive(u32::MAX), "out of range");
    }

    #[test]
    fn a_group_signal_ends_every_process_of_the_group() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("sleep starts");
        signal_group(child.id(), StopSignal::Kill);
        let status = child.wait().expect("the child ends");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9));
    }
}
