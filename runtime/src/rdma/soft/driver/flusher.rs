//! The bound on confirmations left for a next post that never comes (see the driver's
//! documentation): one thread for the process, which every [`REPLY_LIMIT`] sends what the
//! connections on its list still hold back, from whatever thread, as any poster would
//! ([`Shared::transmit_now`]: non-blocking, the rest to the transmit task).
//!
//! A tokio timer per connection did this before, kept armed across waits; but a pending timer
//! makes every park of the runtime compute its next expiration and read the clock (6.8% of
//! the instructions of a confirmed 64-byte ping-pong, callgrind), and with a 1 ms period the
//! timer was the machine's next timer event at nearly every park, which cost 1.1-1.4 us per
//! round trip on a 2-vCPU VM. A connection goes on the list when its receive task leaves a
//! reply and it is not listed; each round takes the whole list, so in steady traffic a
//! connection is listed about once per period.
//!
//! After a round that had work the thread sleeps out the next period at once, and it waits to
//! be told only after a round that found the list empty: in steady traffic it wakes once per
//! period (its timer), and the worker that lists a connection wakes nobody. Told every time the
//! list refilled, it woke twice per period, the first time from the worker answering a client
//! in `block_on`: a third thread made runnable beside that pair, which can move the pair onto
//! different vCPUs (see `Shared::step_for_transmit_task`). The confirmed 64-byte round trip in
//! `block_on` (`rdma_soft -- latency/block_on`) kept both on one vCPU for 73 % of its round
//! trips instead of 66 % (means of 7 alternating runs each; higher in each pair).

use std::sync::atomic::Ordering;
use std::sync::{Condvar, Mutex, Once, Weak};

use super::{FlushEntry, Shared, REPLY_LIMIT};

static LISTED: Mutex<List> = Mutex::new(List {
    conns: Vec::new(),
    waiting: false,
});
static WAKE: Condvar = Condvar::new();
static START: Once = Once::new();

/// The connections the next round looks at, and whether the thread waits to be told of one.
struct List {
    conns: Vec<Weak<Shared>>,
    waiting: bool,
}

/// Puts the connection of `entry` on the list, unless it is on it.
pub(super) fn watch(entry: &FlushEntry) {
    if entry.listed.swap(true, Ordering::SeqCst) {
        return;
    }
    START.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("soft-rdma-flusher".into())
            .spawn(run);
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "no flusher thread: confirmations wait for the next message");
        }
    });
    let mut listed = LISTED.lock().unwrap_or_else(|e| e.into_inner());
    listed.conns.push(entry.conn.clone());
    if listed.waiting {
        listed.waiting = false;
        WAKE.notify_one();
    }
}

fn run() {
    let mut had_work = false;
    loop {
        if !had_work {
            let mut listed = LISTED.lock().unwrap_or_else(|e| e.into_inner());
            while listed.conns.is_empty() {
                listed.waiting = true;
                listed = WAKE.wait(listed).unwrap_or_else(|e| e.into_inner());
            }
            listed.waiting = false;
        }
        std::thread::sleep(REPLY_LIMIT);
        let round = std::mem::take(&mut LISTED.lock().unwrap_or_else(|e| e.into_inner()).conns);
        had_work = !round.is_empty();
        for shared in round.iter().filter_map(Weak::upgrade) {
            shared.flush.listed.store(false, Ordering::SeqCst);
            shared.send_left_reply();
            shared.rescue_reader();
        }
    }
}
