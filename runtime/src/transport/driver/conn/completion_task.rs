//! The completion task: feeds the core the completions a provider without a hook reports, runs
//! the core's timers, takes the rounds a hook left, and ends every call still waiting when the
//! connection closes.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use super::serve::serve_call;
use super::{Conn, State};
use crate::rdma::{Completion, Connection};
use crate::rpc::TransportError;

/// The core's deadlines the completion task keeps: a version 2 offer's, and a Read-Read
/// reply's RDMA_DONE (calls time out in their callers).
pub(super) fn core_deadline(st: &State) -> Option<Instant> {
    (st.core.negotiating() || st.core.exposed_replies() > 0)
        .then(|| st.core.poll_timeout())
        .flatten()
}

/// What wakes the completion task: a completion to take, or (`hooked`, see
/// [`Conn::on_completions`]) a round the hook left to it.
async fn woken<C: Connection>(conn: &Conn<C>, hooked: bool) -> Option<Completion> {
    if hooked {
        conn.task_kick.notified().await;
        None
    } else {
        Some(conn.conn.poll_completion().await)
    }
}

/// The completion task: feeds the core until the connection closes. With a hooked provider
/// ([`Conn::hooked`]) it only takes the rounds the hook leaves it, and the timers.
pub(super) async fn completions<C: Connection>(conn: Arc<Conn<C>>) {
    let hooked = conn.hooked.load(Ordering::Acquire);
    // Swapped with the state's list each round, so neither allocates once grown.
    let mut calls = Vec::new();
    // One future for the whole loop (a new one per round cost ~180 instructions per call).
    let mut closing = std::pin::pin!(conn.close_notify.notified());
    let mut deadline = core_deadline(&conn.state.lock());
    if hooked {
        // Completions that came before the hook was set found no one to call.
        conn.task_kick.notify_one();
    }
    loop {
        let timer = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        let mut timed_out = false;
        let first = tokio::select! {
            // In this order, without drawing a random one to start with each round: completions
            // first, and a close still ends the loop within a round.
            biased;
            c = woken(&conn, hooked) => c,
            _ = timer => {
                timed_out = true;
                None
            }
            _ = closing.as_mut() => break,
        };
        {
            let mut st = conn.state.lock();
            if let Some(first) = first {
                conn.complete(&mut st, first);
            }
            if timed_out {
                st.core.handle_timeout(Instant::now());
            }
            conn.drain(&mut st, &mut calls);
            deadline = core_deadline(&st);
            st.task_deadline = deadline;
        }
        // Handlers run without the lock: they may call back through the backchannel.
        if !calls.is_empty() {
            std::future::poll_fn(|cx| {
                for call in calls.drain(..) {
                    serve_call(&conn, call, cx);
                }
                Poll::Ready(())
            })
            .await;
        }
        if conn.is_closed() {
            break;
        }
    }
    let mut st = conn.state.lock();
    conn.close_locked(&mut st);
    // Every caller still waiting learns that the connection is gone. A reply that came
    // before the end stays for its caller to take (`poll_reply` reads a missing waiter as
    // `Closed`): its caller may not have run since.
    for waiter in st.waiters.values_mut() {
        waiter.finish(Err(TransportError::Closed));
    }
}
