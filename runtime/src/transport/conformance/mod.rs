//! The transport conformance suite: RPC-over-RDMA versions 1 and 2 end to end, written once and
//! run on every provider (feature `conformance`).
//!
//! Each [`Case`] starts a server of the suite's program ([`program`], generated from
//! `testprog.x`) and a client on the provider under test, and checks one behaviour of the
//! transport: how calls and replies move (inline, Read chunks, Write chunks, long calls, Reply
//! chunks), credits, timeouts, retransmission, the backward direction, zero-copy results,
//! flat registrations, and the answers a lying peer gets. The software provider runs it as
//! `#[test]`s ([`transport_conformance_tests!`](crate::transport_conformance_tests)); the verbs
//! provider runs it inside the QEMU guest ([`run_all`]).

mod cases;
mod hostile;
pub mod lies;
pub mod load;
mod mode2004;
pub mod program;
mod v2;

use std::fmt;
use std::time::{Duration, Instant};

use crate::rdma::conformance::{Failure, ProviderUnderTest};
use crate::rdma::Provider;

macro_rules! cases {
    ($($(#[$doc:meta])* $variant:ident => $func:path,)*) => {
        /// One case of the transport suite.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Case {
            $($(#[$doc])* $variant,)*
        }

        impl Case {
            /// Every case, in the order [`run_all`] runs them.
            pub const ALL: &'static [Case] = &[$(Case::$variant,)*];

            /// The case's name.
            pub fn name(self) -> &'static str {
                match self {
                    $(Case::$variant => stringify!($variant),)*
                }
            }
        }

        /// Runs one case against `put`.
        pub async fn run_case<T>(put: &T, case: Case) -> Result<(), Failure>
        where
            T: ProviderUnderTest,
            T::P: Clone,
        {
            match case {
                $(Case::$variant => $func(put).await,)*
            }
        }
    };
}

cases! {
    /// NULL calls and replies go inline (RDMA_MSG, no chunks).
    NullInline => cases::null_inline,
    /// A 1 MiB DDP-eligible argument moves by RDMA Read, the result back by RDMA Write.
    ReadAndWriteChunks => cases::read_and_write_chunks,
    /// Sizes around the thresholds and odd lengths (XDR round-up) all arrive intact.
    SizesAroundThresholds => cases::sizes_around_thresholds,
    /// Two DDP-eligible arguments: two Read chunks, each at its Position.
    SeveralReadChunks => cases::several_read_chunks,
    /// A call too large for a Send, with nothing DDP-eligible: RDMA_NOMSG with a
    /// Position-Zero Read chunk.
    LongCall => cases::long_call,
    /// A reply too large for the receive buffer: RDMA_NOMSG through the Reply chunk.
    ReplyChunk => cases::reply_chunk,
    /// A union arm without its DDP-eligible item: the Write chunk comes back unused.
    UnusedWriteChunk => cases::unused_write_chunk,
    /// A caller that gives the result's size gets a small result inline, with no Write chunk.
    SmallResultsInline => cases::small_results_inline,
    /// 64 concurrent calls within 4 credits all complete with their own results.
    ConcurrentCalls => cases::concurrent_calls,
    /// PROC_UNAVAIL and PROG_MISMATCH come back as typed errors.
    RpcErrors => cases::rpc_errors,
    /// A call without a reply in time fails with a timeout and the connection carries on.
    Timeout => cases::timeout,
    /// A call whose connection drops is retransmitted once on a new connection.
    Retransmit => cases::retransmit,
    /// The server calls the client in the backward direction while forward calls are in flight.
    Backchannel => cases::backchannel,
    /// A result filled into a registered buffer and received into one: no payload copy.
    ZeroCopy => cases::zero_copy,
    /// 1,000 mixed calls register no new memory once the pools are warm.
    FlatRegistrations => cases::flat_registrations,
    /// A dropped call future leaves the connection usable and its memory unreachable.
    CancelledCall => cases::cancelled_call,
    /// A server's graceful shutdown: the call being served is answered, a call made after is
    /// not, every connection closes and the listener stops.
    Shutdown => cases::shutdown,
    /// A misaligned Read chunk Position gets RDMA_ERROR / ERR_CHUNK.
    HostileMisalignedPosition => hostile::misaligned_position,
    /// A header of version 2 gets RDMA_ERROR / ERR_VERS naming version 1.
    HostileVersion => hostile::other_version,
    /// Headers cut short are dropped; the connection carries on.
    HostileCutHeaders => hostile::cut_headers,
    /// A Read chunk shorter than the length word it stands for gets ERR_CHUNK.
    HostileReadChunkShort => hostile::read_chunk_not_adding_up,
    /// A chunk claiming 2^32 - 1 segments gets ERR_CHUNK, with nothing allocated for it.
    HostileHugeCount => hostile::huge_count,
    /// A Read chunk past the end of its registration: the Read is refused and the connection
    /// closes.
    HostileSegmentPastRegistration => hostile::segment_past_registration,
    /// More calls than the credits granted close the connection.
    HostileCreditOverrun => hostile::credit_overrun,
    /// RDMA_NOMSG without a Position-Zero Read chunk gets ERR_CHUNK.
    HostileNomsgWithoutPositionZero => hostile::nomsg_without_position_zero,
    /// RDMA_DONE is dropped; RDMA_MSGP is served as RDMA_MSG (seed 004 section 5.7).
    HostileDoneAndMsgp => hostile::done_and_msgp,
    /// A reply that fits neither inline nor in a chunk gets ERR_CHUNK.
    HostileReplyFitsNowhere => hostile::reply_fits_nowhere,
    /// Undecodable arguments get GARBAGE_ARGS, in an RPC reply.
    HostileGarbageArgs => hostile::garbage_args,
    /// A peer without private data is taken to have 1 KiB receive buffers (seed 004 section
    /// 4.3.1).
    HostileNoPrivateData => hostile::no_private_data,
    /// Version 2 both ends: RDMA2_CONNPROP agreed, every chunk kind, remote invalidation
    /// through `rdma_inv_handle`.
    Version2 => v2::both_version_2,
    /// A version 2 client and a version 1 server: ERR_VERS, then version 1 with no call lost;
    /// a reconnect does not negotiate again.
    Version2ClientVersion1Server => v2::version_2_client_version_1_server,
    /// A version 1 client and a version 2 server: version 1 throughout.
    Version1ClientVersion2Server => v2::version_1_client_version_2_server,
    /// Backward-direction calls on a version 2 connection.
    Version2Backchannel => v2::version_2_backchannel,
    /// The 2004 protocol both ends: the configuration call applied, RDMA_MSGP, Read-Read
    /// results pulled and released by RDMA_DONE.
    Mode2004 => mode2004::both_2004,
    /// The 2004 protocol both ends without the configuration call (both configured alike).
    Mode2004WithoutConfiguration => mode2004::without_configuration,
    /// A 2004 client and a default server: PROG_UNAVAIL to the configuration call, then RFC
    /// 8166.
    Mode2004ClientDefaultServer => mode2004::client_2004_default_server,
    /// A default client and a 2004 server: no configuration call, no Read-Read reply.
    DefaultClientMode2004Server => mode2004::default_client_2004_server,
    /// A 2004 client gives up mid-call: RDMA_DONE still goes, the connection carries on.
    Mode2004GaveUpMidCall => mode2004::gave_up_mid_call,
}

/// The outcome of one case.
#[derive(Debug)]
pub struct CaseResult {
    /// The case.
    pub case: Case,
    /// `Ok` or why it failed.
    pub outcome: Result<(), Failure>,
    /// How long it took.
    pub elapsed: Duration,
}

/// The outcome of the whole suite.
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
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for r in &self.results {
            match &r.outcome {
                Ok(()) => writeln!(
                    f,
                    "transport {} {}: ok ({} ms)",
                    self.provider,
                    r.case.name(),
                    r.elapsed.as_millis()
                )?,
                Err(e) => writeln!(
                    f,
                    "transport {} {}: FAILED: {e}",
                    self.provider,
                    r.case.name()
                )?,
            }
        }
        let failed = self.results.iter().filter(|r| r.outcome.is_err()).count();
        writeln!(
            f,
            "transport {}: {} passed, {failed} failed",
            self.provider,
            self.results.len() - failed
        )
    }
}

/// Runs every case against `put`, each on fresh connections.
pub async fn run_all<T>(put: &T) -> Report
where
    T: ProviderUnderTest,
    T::P: Clone,
{
    let mut results = Vec::new();
    for &case in Case::ALL {
        let start = Instant::now();
        let outcome = run_case(put, case).await;
        results.push(CaseResult {
            case,
            outcome,
            elapsed: start.elapsed(),
        });
    }
    Report {
        provider: put.provider().name(),
        results,
    }
}

/// Expands to one `#[test]` per transport case for the [`ProviderUnderTest`] that `$make`
/// builds, each on a two-worker tokio runtime.
#[macro_export]
macro_rules! transport_conformance_tests {
    ($make:expr) => {
        $crate::transport_conformance_tests!(@cases $make,
            null_inline NullInline,
            read_and_write_chunks ReadAndWriteChunks,
            sizes_around_thresholds SizesAroundThresholds,
            several_read_chunks SeveralReadChunks,
            long_call LongCall,
            reply_chunk ReplyChunk,
            unused_write_chunk UnusedWriteChunk,
            small_results_inline SmallResultsInline,
            concurrent_calls ConcurrentCalls,
            rpc_errors RpcErrors,
            timeout Timeout,
            retransmit Retransmit,
            backchannel Backchannel,
            zero_copy ZeroCopy,
            flat_registrations FlatRegistrations,
            cancelled_call CancelledCall,
            shutdown Shutdown,
            hostile_misaligned_position HostileMisalignedPosition,
            hostile_version HostileVersion,
            hostile_cut_headers HostileCutHeaders,
            hostile_read_chunk_short HostileReadChunkShort,
            hostile_huge_count HostileHugeCount,
            hostile_segment_past_registration HostileSegmentPastRegistration,
            hostile_credit_overrun HostileCreditOverrun,
            hostile_nomsg_without_position_zero HostileNomsgWithoutPositionZero,
            hostile_done_and_msgp HostileDoneAndMsgp,
            hostile_reply_fits_nowhere HostileReplyFitsNowhere,
            hostile_garbage_args HostileGarbageArgs,
            hostile_no_private_data HostileNoPrivateData,
            version_2 Version2,
            version_2_client_version_1_server Version2ClientVersion1Server,
            version_1_client_version_2_server Version1ClientVersion2Server,
            version_2_backchannel Version2Backchannel,
            mode_2004 Mode2004,
            mode_2004_without_configuration Mode2004WithoutConfiguration,
            mode_2004_client_default_server Mode2004ClientDefaultServer,
            default_client_mode_2004_server DefaultClientMode2004Server,
            mode_2004_gave_up_mid_call Mode2004GaveUpMidCall,
        );
    };
    (@cases $make:expr, $($name:ident $variant:ident,)*) => {$(
        #[test]
        fn $name() {
            let put = $make;
            let rt = ::tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a tokio runtime");
            let outcome = rt.block_on($crate::transport::conformance::run_case(
                &put,
                $crate::transport::conformance::Case::$variant,
            ));
            if let Err(failure) = outcome {
                panic!("transport case {} failed: {failure}", stringify!($name));
            }
        }
    )*};
}
