//! The completion task: feeds the core the completions a provider without a hook reports, runs
//! the core's timers, takes the rounds a hook left, and ends every call still waiting when the
//! connection closes.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use super::serve::serve_call;
use super::{Conn, State};
use crate::rdma::{Completion, Connection};
use crate::rpc::TransportError;

/// How often a connection whose RDMA Reads are watched looks whether memory became short
/// elsewhere ([`Core::set_memory_pressure`](crate::transport::core::Core::set_memory_pressure)).
const PRESSURE_CHECK: Duration = Duration::from_secs(1);

/// The core's deadlines the completion task keeps: the connection's own (a version 2
/// offer's, the peer's first message, RDMA Reads' progress, Read-Read replies' RDMA_DONE);
/// calls time out in their callers.
pub(super) fn core_deadline(st: &State) -> Option<Instant> {
    st.core.connection_deadline()
}

/// When the completion task wakes by itself: the core's deadline, and while RDMA Reads are
/// watched at most [`PRESSURE_CHECK`] from now, to look at the memory budget.
fn wake_at(st: &State) -> Option<Instant> {
    let deadline = core_deadline(st);
    if st.core.reads_watched() {
        let check = Instant::now() + PRESSURE_CHECK;
        return Some(deadline.map_or(check, |d| d.min(check)));
    }
    deadline
}

/// True when the core has calls waiting for memory that no one watches the budget for: the
/// completion task must take a round to start watching.
pub(super) fn memory_unwatched(st: &State) -> bool {
    !st.memory_watched && st.core.memory_waiting()
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
    // While calls wait for memory: the wait for the budget to get some back.
    let mut memory: Option<Pin<Box<dyn Future<Output = ()> + Send>>> = None;
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
        let freed = async {
            match memory.as_mut() {
                Some(wait) => wait.await,
                None => std::future::pending().await,
            }
        };
        let (mut timed_out, mut memory_back) = (false, false);
        let first = tokio::select! {
            // In this order, without drawing a random one to start with each round: completions
            // first, and a close still ends the loop within a round.
            biased;
            c = woken(&conn, hooked) => c,
            _ = timer => {
                timed_out = true;
                None
            }
            _ = freed => {
                memory_back = true;
                None
            }
            _ = closing.as_mut() => break,
        };
        if memory_back {
            memory = None;
        }
        {
            let mut st = conn.state.lock();
            if let Some(first) = first {
                conn.complete(&mut st, first);
            }
            if timed_out {
                let pressure = conn.pool().budget().under_pressure();
                st.core.set_memory_pressure(pressure);
                st.core.handle_timeout(Instant::now());
            }
            if memory_back {
                st.core.retry_memory(&mut conn.pool());
            }
            conn.drain(&mut st, &mut calls);
            if memory.is_none() && st.core.memory_waiting() {
                // Watch first, then look once more: memory that came back in between ends
                // the wait at once.
                memory = Some(Box::pin(conn.pool().budget().freed()));
                st.core.retry_memory(&mut conn.pool());
                conn.flush(&mut st);
                calls.append(&mut st.calls);
            }
            st.memory_watched = memory.is_some();
            st.task_deadline = core_deadline(&st);
            deadline = wake_at(&st);
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
    conn.close_locked(&mut st, crate::rpc::observe::CloseReason::PeerClosed);
    // Every caller still waiting learns that the connection is gone. A reply that came
    // before the end stays for its caller to take (`poll_reply` reads a missing waiter as
    // `Closed`): its caller may not have run since.
    for waiter in st.waiters.values_mut() {
        waiter.finish(Err(TransportError::Closed));
    }
}
