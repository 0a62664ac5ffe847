//! The 2004 mode's Connection Configuration Protocol on a connection (seed 000 section 6):
//! a client's first call, a server's answer, each applied to its connection's core.

use std::future::Future;
use std::sync::{Arc, Weak};

use super::config::RdmaConfig;
use super::conn::Conn;
use crate::rdma::Connection;
use crate::rpc::{
    self, BoxFuture, BufferSource, Call, CallContext, CallTransport, ReplyError, Server,
    TransportKind,
};
use crate::transport::mode2004::ccp::{config_rdma_prog, ConfigRdmaReply, ConfigRdmaReq};
use crate::transport::mode2004::BASIC_INLINE;

use config_rdma_prog::vers1;

/// The largest inline size a peer's configuration is taken at: a Send buffer of this side is
/// allocated that large.
const MAX_INLINE: usize = 1 << 20;

/// A peer's inline size, bounded: at least what a transport header and a small call need.
fn inline_size(n: u32) -> usize {
    (n as usize).clamp(BASIC_INLINE / 4, MAX_INLINE)
}

/// Runs the configuration call as a client's first call on `conn` and applies the answer
/// (seed 000 section 6.2): the server's `maxcallsize` bounds this side's inline calls, its
/// `maxrdmaread` this side's RDMA Reads of its memory, its `align` this side's padding. A
/// server that does not host the program (PROG_UNAVAIL) speaks the default protocol: the
/// connection leaves the 2004 mode and goes on as RFC 8166 says, with the receive size
/// `peer_receive_size` from its private data.
pub(crate) async fn configure_client<C: Connection>(
    conn: &Arc<Conn<C>>,
    config: &RdmaConfig,
    program: u32,
    peer_receive_size: usize,
) -> Result<(), rpc::Error> {
    let rpc = rpc::Client::new(OneConnection { conn: conn.clone() })
        .with_program_number(config_rdma_prog::PROGRAM, program);
    let request = ConfigRdmaReq {
        maxcallsize: config.inline_size as u32,
        maxreplysize: config.inline_size as u32,
        maxrdmaread: config.max_reads,
    };
    match vers1::Vers1Client::new(rpc).conf_rdma(request).await {
        Ok(answer) => {
            tracing::debug!(?answer, "connection configured (2004 mode)");
            let reads = config.max_reads.min(answer.maxrdmaread) as usize;
            conn.configure(inline_size(answer.maxcallsize), reads, Some(answer.align));
            Ok(())
        }
        Err(rpc::Error::ProgUnavail) => {
            tracing::info!("the server does not speak the 2004 protocol: RFC 8166 from now on");
            conn.leave_mode_2004(peer_receive_size);
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// The server that answers configuration calls on one connection, as program `program`.
pub(crate) fn server<C: Connection>(
    conn: Weak<Conn<C>>,
    config: &RdmaConfig,
    program: u32,
) -> Server {
    let mut builder = Server::builder();
    vers1::register(
        &mut builder,
        Answer {
            conn,
            recv_size: config.inline_size,
            max_reads: config.max_reads,
            align: config.mode_2004.as_ref().map_or(0, |m| m.receive_align),
        },
    );
    builder.renumber(config_rdma_prog::PROGRAM, program);
    builder.build()
}

/// A server's side of the configuration call.
struct Answer<C: Connection> {
    conn: Weak<Conn<C>>,
    recv_size: usize,
    max_reads: u32,
    align: u32,
}

impl<C: Connection> vers1::Vers1Server for Answer<C> {
    fn conf_rdma(
        &self,
        _ctx: CallContext,
        request: ConfigRdmaReq,
    ) -> impl Future<Output = Result<ConfigRdmaReply, ReplyError>> + Send {
        // The client's `maxreplysize` bounds this side's inline replies, its `maxrdmaread`
        // this side's RDMA Reads of its Read chunks.
        if let Some(conn) = self.conn.upgrade() {
            let reads = self.max_reads.min(request.maxrdmaread) as usize;
            conn.configure(inline_size(request.maxreplysize), reads, None);
        }
        let answer = ConfigRdmaReply {
            maxcallsize: self.recv_size as u32,
            align: self.align,
            maxrdmaread: self.max_reads,
        };
        async move { Ok(answer) }
    }
}

/// Calls on one given connection, with no retransmission: the configuration call belongs to
/// its connection.
struct OneConnection<C: Connection> {
    conn: Arc<Conn<C>>,
}

impl<C: Connection> CallTransport for OneConnection<C> {
    fn call<'a>(&'a self, mut call: Call<'a>) -> BoxFuture<'a, Result<rpc::Reply, rpc::Error>> {
        Box::pin(async move {
            let timeout = call.options.timeout;
            let plan = self.conn.reply_plan(&mut call, false);
            self.conn.call(&call, &mut None, plan, timeout, false).await
        })
    }

    fn buffers(&self) -> Arc<dyn BufferSource> {
        self.conn.buffers()
    }

    fn kind(&self) -> TransportKind {
        TransportKind::Rdma
    }
}
