//! The one owner of the server's subagent plans and runs: plans waiting for a person (each with
//! the channel its decision goes down), approved runs queued for a slot, the child-run limit,
//! and the counts the Delegation surface watches. The routes in `agent.rs` drive it.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicU8;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use forge_core::api::{ActiveRun, AgentPlansEvent};
use forge_core::delegation::host::{HostPlan, PlanIds};
use forge_core::runtime::Clock;
use tokio::sync::{oneshot, watch, Notify, Semaphore};

use crate::agent;

/// How long a plan waits for a person.
pub const APPROVAL_WAIT: Duration = Duration::from_secs(600);

pub(super) enum Decision {
    Approve { viewed: bool, from: &'static str },
    Reject,
}

pub(super) struct Pending {
    pub(super) profile: String,
    pub(super) task: String,
    pub(super) plan: HostPlan,
    pub(super) ids: PlanIds,
    pub(super) clock: Clock,
    pub(super) parent_session: Option<String>,
    pub(super) created_at: String,
    pub(super) decide: Option<oneshot::Sender<Decision>>,
}

/// An approved run that waits for a slot or runs now.
pub(super) struct Active {
    /// What `GET /api/agent/runs` shows until the record is written.
    pub(super) summary: ActiveRun,
    /// [`agent::NOT_CANCELLED`], or why the run is cancelled.
    pub(super) cancel: Arc<AtomicU8>,
    /// Wakes a queued run to record its cancellation.
    pub(super) wake: Arc<Notify>,
}

/// How many withdrawn plan ids are remembered (to answer `plan_withdrawn` rather than 404).
pub(super) const WITHDRAWN_KEPT: usize = 256;

/// The one owner of plans waiting for a person and of the runs in progress.
pub struct AgentHub {
    pub(super) pending: Mutex<HashMap<String, Pending>>,
    /// Plans whose request ended before anyone decided (newest last).
    pub(super) withdrawn: Mutex<VecDeque<String>>,
    pub(super) active: Mutex<HashMap<String, Active>>,
    /// The run slots: `maxConcurrentRuns` permits, each held by a run's own task (never by an
    /// HTTP request) from the moment its child may start until the child's group is gone. A
    /// new limit in subagents.json makes a new semaphore for the runs approved after it.
    pub(super) slots: Mutex<(usize, Arc<Semaphore>)>,
    /// How many plans wait, how many runs are in progress and how many ended; the
    /// `agent-plans` event follows it.
    pub(super) count: watch::Sender<AgentPlansEvent>,
}

impl Default for AgentHub {
    fn default() -> Self {
        AgentHub {
            pending: Mutex::new(HashMap::new()),
            withdrawn: Mutex::new(VecDeque::new()),
            active: Mutex::new(HashMap::new()),
            slots: Mutex::new((0, Arc::new(Semaphore::new(0)))),
            count: watch::channel(AgentPlansEvent::default()).0,
        }
    }
}

impl AgentHub {
    /// The hub of a server that starts in `project`: runs whose child outlived the pi-forge
    /// process that ran it (SIGKILL, a crash) have their process group killed and are recorded
    /// as `orphaned` first ([`agent::sweep_orphans`]).
    pub fn starting(project: &std::path::Path) -> AgentHub {
        agent::sweep_orphans(project);
        AgentHub::default()
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn active(&self) -> std::sync::MutexGuard<'_, HashMap<String, Active>> {
        self.active.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The semaphore of `limit` run slots.
    pub(super) fn semaphore(&self, limit: usize) -> Arc<Semaphore> {
        let limit = limit.max(1);
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if slots.0 != limit {
            *slots = (limit, Arc::new(Semaphore::new(limit)));
        }
        Arc::clone(&slots.1)
    }

    /// Withdraws a waiting plan whose request ended: it can no longer be approved.
    pub(super) fn withdraw(&self, run_id: &str) {
        if self.remove(run_id).is_none() {
            return;
        }
        let mut withdrawn = self.withdrawn.lock().unwrap_or_else(|e| e.into_inner());
        withdrawn.push_back(run_id.to_string());
        while withdrawn.len() > WITHDRAWN_KEPT {
            withdrawn.pop_front();
        }
    }

    pub(super) fn was_withdrawn(&self, run_id: &str) -> bool {
        self.withdrawn
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|r| r == run_id)
    }

    /// Marks an approved run as in progress (`status` queued or running).
    pub(super) fn set_active(
        &self,
        run_id: &str,
        summary: ActiveRun,
        cancel: Arc<AtomicU8>,
        wake: Arc<Notify>,
    ) {
        let mut map = self.active();
        map.insert(
            run_id.to_string(),
            Active {
                summary,
                cancel,
                wake,
            },
        );
        let count = map.len() as u64;
        self.count.send_modify(|e| e.running = count);
    }

    pub(super) fn set_status(&self, run_id: &str, status: &str) {
        if let Some(a) = self.active().get_mut(run_id) {
            a.summary.status = status.to_string();
        }
        self.count.send_modify(|e| e.started += 1);
    }

    pub(super) fn clear_active(&self, run_id: &str) {
        let mut map = self.active();
        map.remove(run_id);
        let count = map.len() as u64;
        self.count.send_modify(|e| e.running = count);
    }

    /// The number of waiting plans, updated on every add, decision and removal (the
    /// `agent-plans` event of `/api/events`).
    pub fn watch(&self) -> watch::Receiver<AgentPlansEvent> {
        self.count.subscribe()
    }

    pub(super) fn insert(&self, run_id: String, pending: Pending) {
        let mut map = self.lock();
        map.insert(run_id, pending);
        let count = map.len() as u64;
        self.count.send_modify(|e| e.pending = count);
    }

    pub(super) fn remove(&self, run_id: &str) -> Option<Pending> {
        let mut map = self.lock();
        let removed = map.remove(run_id);
        let count = map.len() as u64;
        self.count.send_modify(|e| e.pending = count);
        removed
    }

    /// A run ended (its record is written).
    pub(super) fn finished(&self) {
        self.count.send_modify(|e| e.finished += 1);
    }
}

/// Shared so other modules can hold it.
pub type Agents = Arc<AgentHub>;
