//! The rpc-demo flow in-process: NULL, ECHO with and without chunks, and the responder's
//! RDMA_ERROR answers (ERR_VERS, ERR_CHUNK) and RPC refusals (PROC_UNAVAIL, GARBAGE_ARGS).

#[path = "../src/demo.rs"]
#[allow(dead_code)]
mod demo;
mod rpc_msg {
    pub use rpcrdma_specs::rpc_msg::*;
}
mod v1 {
    pub use rpcrdma_specs::v1::*;
}

async fn echo(size: usize) {
    let report = demo::run_in_process(size)
        .await
        .unwrap_or_else(|e| panic!("size {size}: {e}"));
    assert_eq!(report.size, size);
    assert!(report.verified, "size {size}: echo not verified");
    assert_eq!(
        report.used_chunks,
        size >= demo::MIN_DDP_SIZE,
        "size {size}"
    );
    assert!(
        report.err_vers_ok,
        "size {size}: no ERR_VERS for a version-2 header"
    );
    assert!(
        report.err_chunk_ok,
        "size {size}: no ERR_CHUNK for a stray Read chunk"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_empty() {
    echo(0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_five_bytes_inline() {
    echo(5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_4096_by_chunks() {
    echo(4096).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_one_mebibyte_by_chunks() {
    echo(1 << 20).await;
}
