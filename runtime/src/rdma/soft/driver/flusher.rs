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
//! connection is listed (and the thread woken) about once per period.

use std::sync::atomic::Ordering;
use std::sync::{Condvar, Mutex, Once, Weak};

use super::{FlushEntry, Shared, REPLY_LIMIT};

static LISTED: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());
static WAKE: Condvar = Condvar::new();
static START: Once = Once::new();

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
    listed.push(entry.conn.clone());
    if listed.len() == 1 {
        WAKE.notify_one();
    }
}

fn run() {
    loop {
        {
            let mut listed = LISTED.lock().unwrap_or_else(|e| e.into_inner());
            while listed.is_empty() {
                listed = WAKE.wait(listed).unwrap_or_else(|e| e.into_inner());
            }
        }
        std::thread::sleep(REPLY_LIMIT);
        let round = std::mem::take(&mut *LISTED.lock().unwrap_or_else(|e| e.into_inner()));
        for shared in round.iter().filter_map(Weak::upgrade) {
            shared.flush.listed.store(false, Ordering::SeqCst);
            shared.send_left_reply();
            shared.rescue_reader();
        }
    }
}
