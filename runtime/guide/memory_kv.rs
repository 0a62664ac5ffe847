// src/store.rs: the key-value store, on the server trait xdrgen generated from kv.x.
use std::collections::HashMap;
use std::sync::Mutex;

use bytes::Bytes;
use rpcrdma::rpc::{CallContext, ReplyError};

use crate::kv::kv_prog::kv_v1::KvV1Server;
use crate::kv::{KvGetRes, KvKey, KvPutArgs, KvStatus};

/// Values by key, in memory.
#[derive(Debug, Default)]
pub struct MemoryKv {
    values: Mutex<HashMap<KvKey, Bytes>>,
}

impl KvV1Server for MemoryKv {
    async fn kv_null(&self, _ctx: CallContext) -> Result<(), ReplyError> {
        Ok(())
    }

    async fn kv_put(&self, _ctx: CallContext, args: KvPutArgs) -> Result<KvStatus, ReplyError> {
        // Over RPC-over-RDMA `args.value` is the registered buffer the transport pulled the
        // Read chunk into: kept as it is, not copied.
        let mut values = self.values.lock().unwrap_or_else(|e| e.into_inner());
        values.insert(args.key, args.value);
        Ok(KvStatus::KvOk)
    }

    async fn kv_get(&self, _ctx: CallContext, key: KvKey) -> Result<KvGetRes, ReplyError> {
        let values = self.values.lock().unwrap_or_else(|e| e.into_inner());
        Ok(match values.get(&key) {
            // A clone of `Bytes` shares the memory; the transport sends from it.
            Some(value) => KvGetRes::KvOk(value.clone()),
            None => KvGetRes::Default {
                discriminant: KvStatus::KvNoent,
            },
        })
    }

    async fn kv_remove(&self, _ctx: CallContext, key: KvKey) -> Result<KvStatus, ReplyError> {
        let mut values = self.values.lock().unwrap_or_else(|e| e.into_inner());
        Ok(match values.remove(&key) {
            Some(_) => KvStatus::KvOk,
            None => KvStatus::KvNoent,
        })
    }
}
