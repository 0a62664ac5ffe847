//! The provider conformance suite, written once and run against every provider.
//!
//! A provider passes when every [`Case`] passes. The suite runs
//!
//! * from `#[test]`s: [`rdma_conformance_tests!`](crate::rdma_conformance_tests) expands to one
//!   test per case, and
//! * from a plain binary (e.g. inside a QEMU guest with Soft-RoCE): [`run_all`] returns a
//!   [`Report`] that prints one line per case; [`block_on`] runs it without `#[tokio::main]`.
//!
//! ```no_run
//! # #[cfg(feature = "soft")] {
//! use rpcrdma::rdma::conformance::{block_on, run_all, Harness};
//! use rpcrdma::rdma::soft::SoftProvider;
//!
//! let harness = Harness::new(SoftProvider::default(), "127.0.0.1:0".parse().unwrap());
//! let report = block_on(run_all(&harness));
//! print!("{report}");
//! assert!(report.passed());
//! # }
//! ```

mod cases;
mod protection;
mod shared;
mod signaling;
pub(crate) mod util;

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;

use super::Provider;
use cases::*;
use protection::*;
use shared::*;
use signaling::*;

pub use util::Failure;

/// What the suite needs from a provider under test: the provider and an address to listen on.
pub trait ProviderUnderTest: Send + Sync + 'static {
    /// The provider type.
    type P: Provider;

    /// The provider.
    fn provider(&self) -> &Self::P;

    /// Where the passive side of each test connection listens; port 0 picks a free port.
    /// For a verbs provider this must be an address of an RDMA-capable interface.
    fn listen_addr(&self) -> SocketAddr;

    /// The provider's registrations alive in this process, when it counts them (for leak
    /// checks).
    fn live_registrations(&self) -> Option<usize> {
        None
    }

    /// Whether a Send or RDMA Write the responder refuses completes with the refusal at the
    /// requester (InfiniBand and RoCE, whose responder acknowledges each request; the soft
    /// provider). False on iWARP devices such as Linux siw: there a requester's Send or Write
    /// completes once its data is on the stream, and the responder's refusal ends the stream
    /// (RFC 5040's Terminate message), so the requester sees its connection close instead.
    fn requester_sees_refusals(&self) -> bool {
        true
    }

    /// Whether a peer's Send With Invalidate of a region's key works. False for the verbs
    /// provider on a device without memory windows: the key is the region's own, which
    /// devices do not let a peer invalidate (Linux siw ends the stream); RPC-over-RDMA then
    /// does not offer it (RFC 8797).
    fn remote_invalidation(&self) -> bool {
        true
    }

    /// Whether the device refuses a peer's RDMA Read of a region registered for remote write
    /// only. Linux siw does not check it for user memory; the case is then skipped.
    fn refuses_reads_without_read_rights(&self) -> bool {
        true
    }

    /// Whether [`Connection::limit_shared_receives`](crate::rdma::Connection) bounds a
    /// connection's buffers of a shared receive queue. False on hardware that makes a Send
    /// wait for a buffer (InfiniBand and RoCE retry on receiver-not-ready) instead of ending
    /// the connection.
    fn bounds_shared_receives(&self) -> bool {
        true
    }

    /// Whether the provider takes connections onto a shared receive queue. False for the
    /// verbs provider on a device without memory windows, which refuses them (the connections
    /// would share one protection domain, where a region's own key reaches all of them).
    fn shared_receive_queues(&self) -> bool {
        true
    }

    /// For the transport suite: its servers take their receives from a shared receive queue
    /// of this many buffers (`None`: receives per connection).
    fn shared_receive_buffers(&self) -> Option<usize> {
        None
    }
}

/// The plain [`ProviderUnderTest`]: a provider and a listen address.
#[derive(Debug)]
pub struct Harness<P> {
    /// The provider.
    pub provider: P,
    /// The listen address (port 0 allowed).
    pub listen_addr: SocketAddr,
    /// Counts the provider's live registrations (`soft::live_registrations`,
    /// `verbs::live_registrations`), for leak checks.
    pub registrations: Option<fn() -> usize>,
    /// See [`ProviderUnderTest::requester_sees_refusals`] (true unless set otherwise).
    pub requester_sees_refusals: bool,
    /// See [`ProviderUnderTest::remote_invalidation`] (true unless set otherwise).
    pub remote_invalidation: bool,
    /// See [`ProviderUnderTest::refuses_reads_without_read_rights`] (true unless set
    /// otherwise).
    pub refuses_reads_without_read_rights: bool,
    /// See [`ProviderUnderTest::bounds_shared_receives`] (true unless set otherwise).
    pub bounds_shared_receives: bool,
    /// See [`ProviderUnderTest::shared_receive_buffers`] (`None` unless set).
    pub shared_receive_buffers: Option<usize>,
    /// See [`ProviderUnderTest::shared_receive_queues`] (true unless set otherwise).
    pub shared_receive_queues: bool,
}

impl<P: Provider> Harness<P> {
    /// A harness for `provider` listening on `listen_addr`.
    pub fn new(provider: P, listen_addr: SocketAddr) -> Harness<P> {
        Harness {
            provider,
            listen_addr,
            registrations: None,
            requester_sees_refusals: true,
            remote_invalidation: true,
            refuses_reads_without_read_rights: true,
            bounds_shared_receives: true,
            shared_receive_buffers: None,
            shared_receive_queues: true,
        }
    }

    /// For the verbs provider on a device without memory windows: see
    /// [`ProviderUnderTest::shared_receive_queues`].
    pub fn without_shared_receive_queues(mut self) -> Harness<P> {
        self.shared_receive_queues = false;
        self
    }

    /// The transport suite's servers serve from a shared receive queue of `buffers` buffers:
    /// see [`ProviderUnderTest::shared_receive_buffers`].
    pub fn with_shared_receive_queue(mut self, buffers: usize) -> Harness<P> {
        self.shared_receive_buffers = Some(buffers);
        self
    }

    /// For a device that makes a Send wait for a shared buffer: see
    /// [`ProviderUnderTest::bounds_shared_receives`].
    pub fn without_shared_receive_bounds(mut self) -> Harness<P> {
        self.bounds_shared_receives = false;
        self
    }

    /// For the verbs provider on a device without memory windows: see
    /// [`ProviderUnderTest::remote_invalidation`].
    pub fn without_remote_invalidation(mut self) -> Harness<P> {
        self.remote_invalidation = false;
        self
    }

    /// For Linux siw: see [`ProviderUnderTest::refuses_reads_without_read_rights`].
    pub fn without_read_rights_check(mut self) -> Harness<P> {
        self.refuses_reads_without_read_rights = false;
        self
    }

    /// For a device that completes a requester's Sends and Writes locally (iWARP): see
    /// [`ProviderUnderTest::requester_sees_refusals`].
    pub fn with_local_requester_completions(mut self) -> Harness<P> {
        self.requester_sees_refusals = false;
        self
    }

    /// Counts live registrations with `count`, so cases can check that nothing leaks.
    pub fn with_registration_count(mut self, count: fn() -> usize) -> Harness<P> {
        self.registrations = Some(count);
        self
    }
}

impl<P: Provider> ProviderUnderTest for Harness<P> {
    type P = P;
    fn provider(&self) -> &P {
        &self.provider
    }
    fn listen_addr(&self) -> SocketAddr {
        self.listen_addr
    }
    fn live_registrations(&self) -> Option<usize> {
        self.registrations.map(|count| count())
    }
    fn requester_sees_refusals(&self) -> bool {
        self.requester_sees_refusals
    }
    fn remote_invalidation(&self) -> bool {
        self.remote_invalidation
    }
    fn refuses_reads_without_read_rights(&self) -> bool {
        self.refuses_reads_without_read_rights
    }
    fn bounds_shared_receives(&self) -> bool {
        self.bounds_shared_receives
    }
    fn shared_receive_buffers(&self) -> Option<usize> {
        self.shared_receive_buffers
    }
    fn shared_receive_queues(&self) -> bool {
        self.shared_receive_queues
    }
}

macro_rules! cases {
    ($($(#[$doc:meta])* $variant:ident => $func:ident,)*) => {
        /// One conformance case.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Case {
            $($(#[$doc])* $variant,)*
        }

        impl Case {
            /// Every case, in the order [`run_all`] runs them.
            pub const ALL: &'static [Case] = &[$(Case::$variant,)*];

            /// The case's name (also the name of its generated test).
            pub fn name(self) -> &'static str {
                match self {
                    $(Case::$variant => stringify!($func),)*
                }
            }
        }

        /// Runs one case against `put`.
        pub async fn run_case<T: ProviderUnderTest>(put: &T, case: Case) -> Result<(), Failure> {
            match case {
                $(Case::$variant => $func(put).await,)*
            }
        }
    };
}

cases! {
    /// Connection private data travels both ways; a rejection carries its private data.
    PrivateData => private_data,
    /// Sends land in posted receives in order, with their lengths, and complete in order.
    SendRecvOrdering => send_recv_ordering,
    /// Receives posted in `accept_with`/`connect_with` setup catch the peer's very first Send.
    PrepostedReceives => preposted_receives,
    /// Send with Solicited Event is delivered like a Send.
    SolicitedSend => solicited_send,
    /// A Send longer than the posted receive fails: local length error at the receiver, a remote
    /// error at the sender.
    SendTooLong => send_too_long,
    /// RDMA Write data is visible at the target once a later Send completes there.
    WriteThenSend => write_then_send,
    /// Requests posted as one list complete in order as posted one by one; a refused request
    /// in a list leaves the ones before it posted and the rest not.
    PostedAsAList => posted_as_a_list,
    /// RDMA Read copies the remote bytes into the local sink.
    RdmaRead => rdma_read,
    /// A Send posted after an RDMA Read completes after it, and the Read's completion finds
    /// its sink filled.
    ReadThenSend => read_then_send,
    /// Writes and reads outside a registration, without the right, or with an unknown tag are
    /// refused with a remote access error and write nothing.
    AccessViolations => access_violations,
    /// A tag invalidated locally, or remotely by Send with Invalidate, can no longer be used.
    InvalidatedTag => invalidated_tag,
    /// A registration rekeyed after its tag was invalidated is reachable again under the new
    /// tag only, with the rights the rekey granted; a rekey to no remote rights revokes it;
    /// rights beyond the registration and another connection's region are refused.
    Rekey => rekey,
    /// Closing with work outstanding flushes it, on both sides.
    DisconnectFlushes => disconnect_flushes,
    /// Hundreds of outstanding Sends, Writes and Reads (more Reads than the ORD) all complete,
    /// in order.
    ManyOutstanding => many_outstanding,
    /// Sends from several connections land in one shared receive queue's buffers, each on its
    /// connection in order; a message is taken once and its buffer serves again; an oversized
    /// Send fails only its connection.
    SharedReceive => shared_receive,
    /// A connection on a shared queue closed by its peer yields one flushed receive; buffers
    /// it held come back when it is dropped.
    SharedReceiveClose => shared_receive_close,
    /// A connection past its bound of shared buffers ends (where the provider bounds it), and
    /// the other connections on the queue go on.
    SharedReceiveLimit => shared_receive_limit,
    /// Unsignaled Writes, Reads and Sends complete silently, done once a later signaled request
    /// completes; a refused one is heard of.
    UnsignaledRequests => unsignaled_requests,
}

/// The outcome of one case.
#[derive(Debug)]
pub struct CaseResult {
    /// The case.
    pub case: Case,
    /// `Ok` or why it failed.
    pub outcome: Result<(), Failure>,
}

/// The outcome of a whole run.
#[derive(Debug)]
pub struct Report {
    /// The provider's name.
    pub provider: &'static str,
    /// One entry per case, in run order.
    pub results: Vec<CaseResult>,
}

impl Report {
    /// True when every case passed.
    pub fn passed(&self) -> bool {
        self.results.iter().all(|r| r.outcome.is_ok())
    }

    /// The failed cases.
    pub fn failures(&self) -> impl Iterator<Item = &CaseResult> {
        self.results.iter().filter(|r| r.outcome.is_err())
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for r in &self.results {
            match &r.outcome {
                Ok(()) => writeln!(f, "{}: {} ... ok", self.provider, r.case.name())?,
                Err(e) => writeln!(f, "{}: {} ... FAILED: {e}", self.provider, r.case.name())?,
            }
        }
        let failed = self.failures().count();
        writeln!(
            f,
            "{}: conformance {}: {} passed, {} failed",
            self.provider,
            if failed == 0 { "ok" } else { "FAILED" },
            self.results.len() - failed,
            failed
        )
    }
}

/// Runs every case against `put`, one after the other.
pub async fn run_all<T: ProviderUnderTest>(put: &T) -> Report {
    let mut results = Vec::with_capacity(Case::ALL.len());
    for &case in Case::ALL {
        let outcome = run_case(put, case).await;
        results.push(CaseResult { case, outcome });
    }
    Report {
        provider: put.provider().name(),
        results,
    }
}

/// Runs a future to completion on a fresh multi-threaded tokio runtime (for plain binaries and
/// the generated tests).
pub fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("building a tokio runtime")
        .block_on(future)
}

/// Expands to one `#[test]` per conformance [`Case`](crate::rdma::conformance::Case), each
/// building its provider under test with `$make` (an expression of a type implementing
/// [`ProviderUnderTest`](crate::rdma::conformance::ProviderUnderTest)).
///
/// ```ignore
/// rpcrdma::rdma_conformance_tests!(Harness::new(SoftProvider::default(), "127.0.0.1:0".parse().unwrap()));
/// ```
#[macro_export]
macro_rules! rdma_conformance_tests {
    ($make:expr) => {
        $crate::rdma_conformance_tests!(@case $make, private_data, PrivateData);
        $crate::rdma_conformance_tests!(@case $make, send_recv_ordering, SendRecvOrdering);
        $crate::rdma_conformance_tests!(@case $make, preposted_receives, PrepostedReceives);
        $crate::rdma_conformance_tests!(@case $make, solicited_send, SolicitedSend);
        $crate::rdma_conformance_tests!(@case $make, send_too_long, SendTooLong);
        $crate::rdma_conformance_tests!(@case $make, write_then_send, WriteThenSend);
        $crate::rdma_conformance_tests!(@case $make, posted_as_a_list, PostedAsAList);
        $crate::rdma_conformance_tests!(@case $make, rdma_read, RdmaRead);
        $crate::rdma_conformance_tests!(@case $make, read_then_send, ReadThenSend);
        $crate::rdma_conformance_tests!(@case $make, access_violations, AccessViolations);
        $crate::rdma_conformance_tests!(@case $make, invalidated_tag, InvalidatedTag);
        $crate::rdma_conformance_tests!(@case $make, rekey, Rekey);
        $crate::rdma_conformance_tests!(@case $make, disconnect_flushes, DisconnectFlushes);
        $crate::rdma_conformance_tests!(@case $make, many_outstanding, ManyOutstanding);
        $crate::rdma_conformance_tests!(@case $make, shared_receive, SharedReceive);
        $crate::rdma_conformance_tests!(@case $make, shared_receive_close, SharedReceiveClose);
        $crate::rdma_conformance_tests!(@case $make, shared_receive_limit, SharedReceiveLimit);
        $crate::rdma_conformance_tests!(@case $make, unsignaled_requests, UnsignaledRequests);
    };
    (@case $make:expr, $name:ident, $variant:ident) => {
        #[test]
        fn $name() {
            let put = $make;
            let outcome = $crate::rdma::conformance::block_on($crate::rdma::conformance::run_case(
                &put,
                $crate::rdma::conformance::Case::$variant,
            ));
            if let Err(failure) = outcome {
                panic!("conformance case {} failed: {failure}", stringify!($name));
            }
        }
    };
}
