//! Settings of our endpoints that differ from the library's defaults only when asked, to look
//! closer at a cost (the sweep `scripts/bench` runs uses the defaults). The coordinator passes
//! them on to the server and client processes it starts.

use clap::Args;
use rpcrdma::rdma::soft::SoftConfig;
use rpcrdma::transport::RdmaConfig;

/// Our endpoints' settings, server and clients alike.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct Tuning {
    /// The soft provider completes Sends locally instead of once the peer confirmed them
    /// (`SoftConfig::confirm_completions` off): what the confirmations cost at scale.
    #[arg(long)]
    pub local_completions: bool,
    /// RPC-over-RDMA credits, the receive buffers each connection posts (default: the
    /// library's): what the buffers' memory and cache footprint cost at scale.
    #[arg(long)]
    pub credits: Option<u32>,
}

impl Tuning {
    /// The soft provider's settings.
    pub fn soft(&self) -> SoftConfig {
        SoftConfig {
            confirm_completions: !self.local_completions,
            ..SoftConfig::default()
        }
    }

    /// RPC-over-RDMA's settings.
    pub fn rdma(&self) -> RdmaConfig {
        match self.credits {
            Some(c) => RdmaConfig::default().credits(c),
            None => RdmaConfig::default(),
        }
    }

    /// The command-line flags that give a process these settings.
    pub fn args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if self.local_completions {
            args.push("--local-completions".into());
        }
        if let Some(c) = self.credits {
            args.extend(["--credits".into(), c.to_string()]);
        }
        args
    }

    /// A sentence for the report when anything differs from the defaults.
    pub fn describe(&self) -> String {
        let mut changed = Vec::new();
        if self.local_completions {
            changed.push(
                "the soft provider completing Sends locally (`--local-completions`)".to_string(),
            );
        }
        if let Some(c) = self.credits {
            changed.push(format!("{c} RPC-over-RDMA credits (`--credits {c}`)"));
        }
        if changed.is_empty() {
            String::new()
        } else {
            format!("Not the library's defaults: {}. ", changed.join(", "))
        }
    }
}
