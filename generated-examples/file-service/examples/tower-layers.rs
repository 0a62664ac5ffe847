//! tower-layers: the file service of `files.x` over RPC-over-RDMA on the software iWARP
//! provider, its handlers wrapped in `tower` middleware (`rpcrdma::rpc::layer`, feature
//! `tower`): a timeout, a concurrency limit, and a layer of this example's own that records how
//! many handlers run at once. Sixteen READs of 1 MiB at once are served at most two at a time;
//! then, under a timeout of zero, a NULL call (done at its handler's first poll) is answered,
//! and so is a READ whose handler is done at its first poll, while every READ whose handler
//! has to wait is answered SYSTEM_ERR.
//!
//! `tower`'s timeout counts from the handler's start: a call waiting for a place under the
//! concurrency limit (`poll_ready`) is not timed.
//!
//! ```text
//! cargo run --release -p file-service --example tower-layers
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use file_service::client::{Error as FilesError, Files};
use file_service::server::FileServer;
use file_service::{session, LookupArgs, ReadArgs};
use rpcrdma::rdma::soft::SoftProvider;
use rpcrdma::rdma::{Listener, Provider};
use rpcrdma::rpc::layer::Request;
use rpcrdma::rpc::{Client, Error as RpcError};
use rpcrdma::transport::{serve, RdmaConfig, RdmaTransport};
use tower::{Layer, Service, ServiceBuilder};

type Error = Box<dyn std::error::Error>;

/// How many handlers run now, and the most that ran at once.
#[derive(Default)]
struct Gauge {
    now: AtomicUsize,
    most: AtomicUsize,
}

/// A layer of our own: counts the handlers running inside it.
#[derive(Clone)]
struct Measure(Arc<Gauge>);

impl<S> Layer<S> for Measure {
    type Service = Measured<S>;

    fn layer(&self, inner: S) -> Measured<S> {
        Measured {
            inner,
            gauge: self.0.clone(),
        }
    }
}

#[derive(Clone)]
struct Measured<S> {
    inner: S,
    gauge: Arc<Gauge>,
}

impl<S> Service<Request> for Measured<S>
where
    S: Service<Request>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let running = Running::start(&self.gauge);
        let handler = self.inner.call(request);
        Box::pin(async move {
            // Held until the handler finishes or is dropped (a timeout outside drops it).
            let _running = running;
            handler.await
        })
    }
}

/// One handler running: counted in its gauge until dropped.
struct Running(Arc<Gauge>);

impl Running {
    fn start(gauge: &Arc<Gauge>) -> Running {
        let now = gauge.now.fetch_add(1, Ordering::SeqCst) + 1;
        gauge.most.fetch_max(now, Ordering::SeqCst);
        Running(gauge.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serves the file service in `dir` with `layers` around its handlers and runs `clients` READs
/// of the whole of `name` at once; how many were answered, and how many SYSTEM_ERR.
async fn run<L>(
    dir: &std::path::Path,
    name: &str,
    clients: usize,
    layers: L,
) -> Result<(usize, usize, Duration), Error>
where
    L: Layer<rpcrdma::rpc::layer::Handlers>,
    L::Service: Service<Request, Response = Box<dyn rpcrdma::xdr::Encode + Send>>
        + Clone
        + Send
        + Sync
        + 'static,
    <L::Service as Service<Request>>::Error: Into<tower::BoxError>,
    <L::Service as Service<Request>>::Future: Send + 'static,
{
    let provider = Arc::new(SoftProvider::default());
    let listener = provider.listen(([127, 0, 0, 1], 0).into()).await?;
    let addr = listener.local_addr()?;
    let mut builder = Arc::new(FileServer::new(dir)).rpc_server_builder();
    builder.layer(layers);
    let listener = Arc::new(serve::<SoftProvider>(
        listener,
        builder.build(),
        RdmaConfig::default(),
    ));
    tokio::spawn({
        let listener = listener.clone();
        async move { listener.run().await }
    });
    let transport = RdmaTransport::connect(provider, addr, RdmaConfig::default()).await?;
    let files = Files::new(Client::new(transport));
    // Done at its handler's first poll: no layer here holds it up.
    files.null().await?;
    let file = files.lookup(&LookupArgs { name: name.into() }).await;
    let file = match file {
        Ok(file) => file,
        // LOOKUP waits for the file system too: under a timeout of zero, look it up
        // without the layers.
        Err(FilesError::Rpc(RpcError::SystemErr)) => {
            let plain = Arc::new(FileServer::new(dir)).rpc_server();
            let local = Files::new(Client::new(rpcrdma::rpc::LocalTransport::new(plain)));
            local.lookup(&LookupArgs { name: name.into() }).await?
        }
        Err(e) => return Err(e.into()),
    };
    let started = Instant::now();
    let args = ReadArgs {
        handle: file.handle,
        offset: 0,
        count: file.attr.size as u32,
    };
    let reads = (0..clients).map(|_| files.read(&args));
    let mut answered = 0;
    let mut system_err = 0;
    for result in futures_join_all(reads).await {
        match result {
            Ok(read) if read.data.len() as u64 == file.attr.size => answered += 1,
            Ok(read) => return Err(format!("a short READ: {} bytes", read.data.len()).into()),
            Err(FilesError::Rpc(RpcError::SystemErr)) => system_err += 1,
            Err(e) => return Err(e.into()),
        }
    }
    let elapsed = started.elapsed();
    listener.shutdown().await;
    Ok((answered, system_err, elapsed))
}

/// Runs every future at once and collects their outputs in order (what `futures::join_all`
/// does, without the dependency).
async fn futures_join_all<F: Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut pinned: Vec<Pin<Box<F>>> = futures.map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = pinned.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in pinned.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|o| o.expect("every future finished"))
        .collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    let dir = tempfile::tempdir()?;
    session::populate(dir.path())?;
    std::fs::write(dir.path().join("mib.bin"), session::pattern(1 << 20, 9))?;

    // A limit of two, inside a generous timeout: every READ is served, two at a time.
    let gauge = Arc::new(Gauge::default());
    let layers = ServiceBuilder::new()
        .timeout(Duration::from_secs(30))
        .concurrency_limit(2)
        .layer(Measure(gauge.clone()));
    let (answered, system_err, elapsed) = run(dir.path(), "mib.bin", 16, layers).await?;
    println!(
        "concurrency limit 2, timeout 30 s: {answered} READs of 1 MiB answered, {system_err} \
         SYSTEM_ERR, at most {} handlers at once, {elapsed:.1?}",
        gauge.most.load(Ordering::SeqCst)
    );
    if gauge.most.load(Ordering::SeqCst) > 2 || answered != 16 {
        return Err("the concurrency limit did not hold".into());
    }

    // A timeout of zero: a handler not done at its first poll is answered SYSTEM_ERR.
    let gauge = Arc::new(Gauge::default());
    let layers = ServiceBuilder::new()
        .timeout(Duration::ZERO)
        .concurrency_limit(1)
        .layer(Measure(gauge.clone()));
    let (answered, system_err, elapsed) = run(dir.path(), "mib.bin", 16, layers).await?;
    println!(
        "concurrency limit 1, timeout 0: NULL answered, {answered} READs answered, \
         {system_err} SYSTEM_ERR, {elapsed:.1?}"
    );
    if answered + system_err != 16 {
        return Err("every READ must be answered".into());
    }
    Ok(())
}
