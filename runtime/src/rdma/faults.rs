//! A provider that breaks the rules on purpose: it wraps any [`Provider`] and injects faults
//! chosen by a seeded plan, so that what runs above it (the RPC-over-RDMA transport) can be
//! shown to survive them. Feature `conformance`.
//!
//! Faults, each decided per operation from the plan's seed:
//!
//! * **drop** a completion (it is never delivered: a lost work completion);
//! * **delay** a completion, and with it **reorder** completions (a delayed one is overtaken);
//! * **fail** a registration or a rekey with a provider error;
//! * **disconnect** the connection at the Nth posted operation of a chosen kind.
//!
//! And one fault asked for at a chosen moment rather than drawn:
//! [`FaultyProvider::lose_next_receive`] loses the next message received, with its connection
//! (a reply that was sent and never reached its caller).
//!
//! The same seed gives the same decisions for the same sequence of operations, so a failing
//! seed printed by a test can be run again.
//!
//! It also counts what its consumer does that a device would punish: a disconnect while a Send
//! has not completed, which a device may flush unsent
//! ([`FaultCounts::disconnects_with_sends_outstanding`]).
//!
//! A wrapped connection exists only once the inner one is established, so receives its user
//! posts in `connect_with`/`accept_with` setup are posted after establishment (the contract's
//! default): wrap the side that sends first (a client), or peers that wait to be spoken to.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{
    Access, Completion, ConnectParams, ConnectRequest, Connection, Error, Listener, MemoryRegion,
    Provider, RecvWr, Result, SendOp, SendWr, WcOpcode,
};

/// A kind of posted operation, for [`FaultPlan::disconnect_at`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// A Send (any variant).
    Send,
    /// An RDMA Write.
    Write,
    /// An RDMA Read.
    Read,
    /// A local invalidate.
    Invalidate,
    /// A posted receive.
    Recv,
}

/// Which faults to inject, and how often (in parts per thousand of the operations concerned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultPlan {
    /// Seeds every decision.
    pub seed: u64,
    /// Completions dropped, per mille.
    pub drop_completion: u32,
    /// Completions delayed (and so reordered), per mille.
    pub delay_completion: u32,
    /// The longest delay.
    pub max_delay: Duration,
    /// Registrations and rekeys that fail, per mille.
    pub fail_registration: u32,
    /// Disconnect the first connection that reaches its Nth (1-based) posted operation of
    /// this kind (once per provider: a reconnected client is left alone).
    pub disconnect_at: Option<(OpKind, u64)>,
}

impl FaultPlan {
    /// No faults at all, with `seed` for whatever is set later.
    pub fn none(seed: u64) -> FaultPlan {
        FaultPlan {
            seed,
            drop_completion: 0,
            delay_completion: 0,
            max_delay: Duration::from_millis(20),
            fail_registration: 0,
            disconnect_at: None,
        }
    }

    /// A plan drawn from `seed` for the side that makes calls: a mix of every fault at rates
    /// that leave most calls of a few dozen working, and in half the plans a disconnect at one
    /// of the first 40 Sends, receives or invalidations (what a requester posts).
    pub fn random(seed: u64) -> FaultPlan {
        let mut rng = Rng::new(seed);
        let kinds = [OpKind::Send, OpKind::Recv, OpKind::Invalidate];
        FaultPlan {
            seed,
            drop_completion: rng.below(20) as u32,
            delay_completion: rng.below(300) as u32,
            max_delay: Duration::from_millis(1 + rng.below(20)),
            fail_registration: rng.below(15) as u32,
            disconnect_at: (rng.below(2) == 0).then(|| {
                (
                    kinds[rng.below(kinds.len() as u64) as usize],
                    1 + rng.below(40),
                )
            }),
        }
    }
}

/// A small deterministic generator (xorshift64*), enough to draw faults.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    fn per_mille(&mut self, rate: u32) -> bool {
        self.below(1000) < rate as u64
    }
}

/// Counters of the faults injected, shared by every connection of a provider.
#[derive(Debug, Default)]
pub struct FaultCounts {
    /// Completions dropped.
    pub dropped: AtomicU64,
    /// Completions delayed.
    pub delayed: AtomicU64,
    /// Registrations and rekeys failed.
    pub failed_registrations: AtomicU64,
    /// Connections disconnected on purpose.
    pub disconnects: AtomicU64,
    /// Disconnects the consumer asked for ([`Connection::disconnect`]).
    pub disconnects_asked: AtomicU64,
    /// Disconnects the consumer asked for while a Send it posted had not reported its
    /// completion yet (one dropped by the plan never does): on a device, such a Send may be
    /// flushed unsent. Not a fault injected; what a consumer's graceful close is judged by.
    pub disconnects_with_sends_outstanding: AtomicU64,
    /// Received messages lost with their connection ([`FaultyProvider::lose_next_receive`]).
    pub lost_receives: AtomicU64,
}

/// A [`Provider`] whose connections inject the faults of a [`FaultPlan`].
#[derive(Debug, Clone)]
pub struct FaultyProvider<P> {
    inner: P,
    shared: Arc<Faults>,
}

/// What every connection of a faulty provider shares.
#[derive(Debug)]
struct Faults {
    plan: FaultPlan,
    /// Each new connection draws its generator from this, so connections differ.
    connections: AtomicU64,
    counts: Arc<FaultCounts>,
    /// The planned disconnect happened.
    disconnected: Arc<std::sync::atomic::AtomicBool>,
    /// The next message received is lost ([`FaultyProvider::lose_next_receive`]).
    lose_receive: Arc<std::sync::atomic::AtomicBool>,
}

impl Faults {
    fn wrap<C: Connection>(&self, conn: C) -> FaultyConnection<C> {
        let n = self.connections.fetch_add(1, Ordering::Relaxed);
        FaultyConnection {
            inner: Arc::new(conn),
            plan: self.plan.clone(),
            counts: self.counts.clone(),
            disconnected: self.disconnected.clone(),
            lose_receive: self.lose_receive.clone(),
            state: Mutex::new(State {
                rng: Rng::new(self.plan.seed ^ n.wrapping_mul(0x5851_f42d_4c95_7f2d)),
                held: VecDeque::new(),
                posted: Default::default(),
                sends_outstanding: Default::default(),
            }),
        }
    }
}

impl<P: Provider> FaultyProvider<P> {
    /// Wraps `inner` with `plan`.
    pub fn new(inner: P, plan: FaultPlan) -> FaultyProvider<P> {
        FaultyProvider {
            inner,
            shared: Arc::new(Faults {
                plan,
                connections: AtomicU64::new(0),
                counts: Arc::default(),
                disconnected: Arc::default(),
                lose_receive: Arc::default(),
            }),
        }
    }

    /// The faults injected so far.
    pub fn counts(&self) -> &FaultCounts {
        &self.shared.counts
    }

    /// Loses the next message that arrives on any of the provider's connections, with its
    /// connection: its receive completion is never delivered, and the connection disconnects
    /// (its other receives then complete flushed). On a client, the reply to the call
    /// outstanding was sent by the server and never reaches its caller, who sees the
    /// connection drop: what a server's duplicate request cache is for.
    pub fn lose_next_receive(&self) {
        self.shared.lose_receive.store(true, Ordering::Release);
    }
}

impl<P: Provider> Provider for FaultyProvider<P> {
    type Conn = FaultyConnection<P::Conn>;
    type Listener = FaultyListener<P>;
    type SharedQueue = P::SharedQueue;

    fn name(&self) -> &'static str {
        self.inner.name()
    }

    async fn connect(&self, addr: SocketAddr, params: ConnectParams) -> Result<Self::Conn> {
        Ok(self.shared.wrap(self.inner.connect(addr, params).await?))
    }

    async fn listen(&self, addr: SocketAddr) -> Result<Self::Listener> {
        Ok(FaultyListener {
            inner: self.inner.listen(addr).await?,
            faults: self.shared.clone(),
        })
    }

    fn shared_receive_queue(
        &self,
        params: crate::rdma::SharedReceiveParams,
    ) -> Result<Self::SharedQueue> {
        self.inner.shared_receive_queue(params)
    }
}

/// The listener of a [`FaultyProvider`].
pub struct FaultyListener<P: Provider> {
    inner: P::Listener,
    faults: Arc<Faults>,
}

impl<P: Provider> Listener for FaultyListener<P> {
    type Conn = FaultyConnection<P::Conn>;
    type Request = FaultyRequest<P>;

    fn local_addr(&self) -> Result<SocketAddr> {
        self.inner.local_addr()
    }

    async fn next_request(&self) -> Result<Self::Request> {
        Ok(FaultyRequest {
            inner: self.inner.next_request().await?,
            faults: self.faults.clone(),
        })
    }
}

/// A connection request at a [`FaultyListener`].
pub struct FaultyRequest<P: Provider> {
    inner: <P::Listener as Listener>::Request,
    faults: Arc<Faults>,
}

impl<P: Provider> ConnectRequest for FaultyRequest<P> {
    type Conn = FaultyConnection<P::Conn>;
    type SharedQueue = P::SharedQueue;

    fn peer_addr(&self) -> SocketAddr {
        self.inner.peer_addr()
    }

    fn private_data(&self) -> &[u8] {
        self.inner.private_data()
    }

    async fn accept(self, params: ConnectParams) -> Result<Self::Conn> {
        let conn = self.inner.accept(params).await?;
        Ok(self.faults.wrap(conn))
    }

    async fn reject(self, private_data: &[u8]) -> Result<()> {
        self.inner.reject(private_data).await
    }

    /// As [`accept`](ConnectRequest::accept), `setup` running after the accept.
    async fn accept_shared_with<F>(
        self,
        params: ConnectParams,
        queue: &P::SharedQueue,
        setup: F,
    ) -> Result<Self::Conn>
    where
        F: FnOnce(&Self::Conn) -> Result<()> + Send,
    {
        let conn = self
            .inner
            .accept_shared_with(params, queue, |_| Ok(()))
            .await?;
        let conn = self.faults.wrap(conn);
        setup(&conn)?;
        Ok(conn)
    }
}

struct State {
    rng: Rng,
    /// Delayed completions and when they may be delivered.
    held: VecDeque<(tokio::time::Instant, Completion)>,
    /// Operations posted so far, per kind.
    posted: std::collections::HashMap<OpKind, u64>,
    /// The work request ids of Sends posted whose completion was not delivered yet.
    sends_outstanding: std::collections::HashSet<u64>,
}

/// A connection of a [`FaultyProvider`].
pub struct FaultyConnection<C> {
    inner: Arc<C>,
    plan: FaultPlan,
    counts: Arc<FaultCounts>,
    disconnected: Arc<std::sync::atomic::AtomicBool>,
    lose_receive: Arc<std::sync::atomic::AtomicBool>,
    state: Mutex<State>,
}

impl<C: Connection> FaultyConnection<C> {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a posted operation; disconnects when the plan says so.
    fn posted(&self, kind: OpKind) {
        let n = {
            let mut st = self.lock();
            let n = st.posted.entry(kind).or_default();
            *n += 1;
            *n
        };
        if self.plan.disconnect_at == Some((kind, n))
            && !self.disconnected.swap(true, Ordering::AcqRel)
        {
            self.counts.disconnects.fetch_add(1, Ordering::Relaxed);
            let inner = self.inner.clone();
            tokio::spawn(async move {
                let _ = inner.disconnect().await;
            });
        }
    }

    fn maybe_fail(&self, what: &str) -> Result<()> {
        if self.lock().rng.per_mille(self.plan.fail_registration) {
            self.counts
                .failed_registrations
                .fetch_add(1, Ordering::Relaxed);
            return Err(Error::Provider(
                format!("injected fault: {what} failed").into(),
            ));
        }
        Ok(())
    }

    /// Decides the fate of a completion that just came from the inner connection: `Some` to
    /// deliver it now.
    fn sort(&self, c: Completion) -> Option<Completion> {
        if c.opcode == WcOpcode::Recv
            && c.status == super::WcStatus::Success
            && self.lose_receive.swap(false, Ordering::AcqRel)
        {
            self.counts.lost_receives.fetch_add(1, Ordering::Relaxed);
            let inner = self.inner.clone();
            tokio::spawn(async move {
                let _ = inner.disconnect().await;
            });
            return None;
        }
        let mut st = self.lock();
        if st.rng.per_mille(self.plan.drop_completion) {
            self.counts.dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        if st.rng.per_mille(self.plan.delay_completion) {
            self.counts.delayed.fetch_add(1, Ordering::Relaxed);
            let millis = self.plan.max_delay.as_millis().max(1) as u64;
            let at = tokio::time::Instant::now() + Duration::from_millis(st.rng.below(millis) + 1);
            st.held.push_back((at, c));
            return None;
        }
        Some(c)
    }

    /// A held completion whose time has come, or when the next one's comes.
    fn due(&self) -> (Option<Completion>, Option<tokio::time::Instant>) {
        let mut st = self.lock();
        let now = tokio::time::Instant::now();
        if let Some(i) = st.held.iter().position(|(at, _)| *at <= now) {
            return (st.held.remove(i).map(|(_, c)| c), None);
        }
        (None, st.held.iter().map(|(at, _)| *at).min())
    }
}

fn kind_of(op: &SendOp) -> OpKind {
    match op {
        SendOp::Send { .. } => OpKind::Send,
        SendOp::RdmaWrite { .. } => OpKind::Write,
        SendOp::RdmaRead { .. } => OpKind::Read,
        _ => OpKind::Invalidate,
    }
}

impl<C: Connection> Connection for FaultyConnection<C> {
    fn register(&self, buf: Vec<u8>, access: Access) -> Result<MemoryRegion> {
        self.maybe_fail("a registration")?;
        self.inner.register(buf, access)
    }

    fn register_zeroed(&self, len: usize, access: Access) -> Result<MemoryRegion> {
        self.maybe_fail("a registration")?;
        self.inner.register_zeroed(len, access)
    }

    fn rekey(&self, mr: &MemoryRegion, remote: Access) -> Result<()> {
        self.maybe_fail("a rekey")?;
        self.inner.rekey(mr, remote)
    }

    fn revoke(&self, mr: &MemoryRegion) -> Result<()> {
        self.inner.revoke(mr)
    }

    fn takes_remote_invalidation(&self) -> bool {
        self.inner.takes_remote_invalidation()
    }

    fn expect_write(&self, mr: &MemoryRegion) {
        self.inner.expect_write(mr);
    }

    fn post_recv(&self, wr: RecvWr) -> Result<()> {
        self.posted(OpKind::Recv);
        self.inner.post_recv(wr)
    }

    fn take_shared<R>(&self, c: &Completion, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        self.inner.take_shared(c, f)
    }

    fn limit_shared_receives(&self, most: usize) {
        self.inner.limit_shared_receives(most);
    }

    fn post_send(&self, wr: SendWr) -> Result<()> {
        let kind = kind_of(&wr.op);
        self.posted(kind);
        let id = wr.wr_id;
        // Counted before posting: a Send may complete as it is written.
        let send = kind == OpKind::Send && self.lock().sends_outstanding.insert(id);
        let posted = self.inner.post_send(wr);
        if posted.is_err() && send {
            self.lock().sends_outstanding.remove(&id);
        }
        posted
    }

    async fn poll_completion(&self) -> Completion {
        let c = self.next_completion().await;
        self.delivered(c)
    }

    fn try_completion(&self) -> Option<Completion> {
        let c = self.try_next_completion()?;
        Some(self.delivered(c))
    }

    fn peer_private_data(&self) -> &[u8] {
        self.inner.peer_private_data()
    }

    fn local_addr(&self) -> SocketAddr {
        self.inner.local_addr()
    }

    fn peer_addr(&self) -> SocketAddr {
        self.inner.peer_addr()
    }

    fn is_connected(&self) -> bool {
        self.inner.is_connected()
    }

    fn device_removed(&self) -> bool {
        self.inner.device_removed()
    }

    async fn disconnect(&self) -> Result<()> {
        self.counts
            .disconnects_asked
            .fetch_add(1, Ordering::Relaxed);
        if !self.lock().sends_outstanding.is_empty() {
            self.counts
                .disconnects_with_sends_outstanding
                .fetch_add(1, Ordering::Relaxed);
        }
        self.inner.disconnect().await
    }
}

impl<C: Connection> FaultyConnection<C> {
    /// Notes that `c` reaches the consumer.
    fn delivered(&self, c: Completion) -> Completion {
        if c.opcode == WcOpcode::Send {
            self.lock().sends_outstanding.remove(&c.wr_id);
        }
        c
    }

    /// The next completion to deliver, held ones first when due.
    async fn next_completion(&self) -> Completion {
        loop {
            let (ready, next) = self.due();
            if let Some(c) = ready {
                return c;
            }
            let c = match next {
                Some(at) => tokio::select! {
                    c = self.inner.poll_completion() => c,
                    _ = tokio::time::sleep_until(at) => continue,
                },
                None => self.inner.poll_completion().await,
            };
            // A flush is how the consumer learns that the connection is gone: never hold it.
            if c.status == super::WcStatus::Flushed && c.opcode == WcOpcode::Recv {
                return c;
            }
            if let Some(c) = self.sort(c) {
                return c;
            }
        }
    }

    /// The next completion to deliver without waiting, held ones first when due.
    fn try_next_completion(&self) -> Option<Completion> {
        if let (Some(c), _) = self.due() {
            return Some(c);
        }
        loop {
            let c = self.inner.try_completion()?;
            if let Some(c) = self.sort(c) {
                return Some(c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_draws_the_same_plan_and_faults() {
        assert_eq!(FaultPlan::random(7), FaultPlan::random(7));
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        let xs: Vec<u64> = (0..100).map(|_| a.below(1000)).collect();
        let ys: Vec<u64> = (0..100).map(|_| b.below(1000)).collect();
        assert_eq!(xs, ys);
        assert!(xs.iter().any(|&x| x != xs[0]), "it varies");
    }
}
