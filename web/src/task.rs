//! Tasks that belong to a view. A surface's signals are disposed when the user leaves it, but a
//! request it started goes on: reading one of those signals when the answer arrives panics
//! ("Tried to access a reactive value that has already been disposed", a trap in the release
//! bundle). [`spawn_while`] runs such a task only while a signal of the view is alive: the task
//! is dropped at the first wake-up after the view is gone, so nothing after its `await` runs.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use leptos::prelude::IsDisposed;
use leptos::task::spawn_local;

/// Runs `task` until it ends or `probe` (a signal the view owns) is disposed, whichever is first.
/// Use it for a task that touches the view's own signals after an `await`; a task that only
/// touches the app's signals (which live as long as the page) needs no probe.
pub fn spawn_while(
    probe: impl IsDisposed + Unpin + 'static,
    task: impl Future<Output = ()> + 'static,
) {
    spawn_local(WhileAlive {
        probe,
        task: Box::pin(task),
    });
}

struct WhileAlive<P, F> {
    probe: P,
    task: Pin<Box<F>>,
}

impl<P: IsDisposed + Unpin, F: Future<Output = ()>> Future for WhileAlive<P, F> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.probe.is_disposed() {
            return Poll::Ready(());
        }
        self.task.as_mut().poll(cx)
    }
}
