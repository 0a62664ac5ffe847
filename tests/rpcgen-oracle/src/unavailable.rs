//! The same API when the build found no rpcgen / libtirpc: every call is `Unavailable`.

use crate::{AuthSys, OracleError, RpcMsg, V1Msg, V2Kind};

/// Unavailable: built without rpcgen.
pub fn v1_encode(_: &V1Msg) -> Result<Vec<u8>, OracleError> {
    Err(OracleError::Unavailable)
}
/// Unavailable: built without rpcgen.
pub fn v1_reencode(_: &[u8]) -> Result<Vec<u8>, OracleError> {
    Err(OracleError::Unavailable)
}
/// Unavailable: built without rpcgen.
pub fn v1_random(_: u64) -> Result<Vec<u8>, OracleError> {
    Err(OracleError::Unavailable)
}
/// Unavailable: built without rpcgen.
pub fn rpc_encode(_: &RpcMsg) -> Result<Vec<u8>, OracleError> {
    Err(OracleError::Unavailable)
}
/// Unavailable: built without rpcgen.
pub fn rpc_reencode(_: &[u8]) -> Result<Vec<u8>, OracleError> {
    Err(OracleError::Unavailable)
}
/// Unavailable: built without rpcgen.
pub fn rpc_random(_: u64) -> Result<Vec<u8>, OracleError> {
    Err(OracleError::Unavailable)
}
/// Unavailable: built without rpcgen.
pub fn authsys_encode(_: &AuthSys) -> Result<Vec<u8>, OracleError> {
    Err(OracleError::Unavailable)
}
/// Unavailable: built without rpcgen.
pub fn authsys_reencode(_: &[u8]) -> Result<Vec<u8>, OracleError> {
    Err(OracleError::Unavailable)
}

/// Unavailable: built without rpcgen.
pub fn v2_reencode(_: V2Kind, _: &[u8]) -> Result<Vec<u8>, OracleError> {
    Err(OracleError::Unavailable)
}
/// Unavailable: built without rpcgen.
pub fn v2_random(_: V2Kind, _: u64) -> Result<Vec<u8>, OracleError> {
    Err(OracleError::Unavailable)
}

/// Unavailable: built without rpcgen.
pub struct V1Bench;

impl V1Bench {
    /// Unavailable: built without rpcgen.
    pub fn new(_: &V1Msg) -> Result<Self, OracleError> {
        Err(OracleError::Unavailable)
    }
    /// Unavailable: built without rpcgen.
    pub fn encode_decode(&mut self, _: &mut [u8]) -> Result<usize, OracleError> {
        Err(OracleError::Unavailable)
    }
    /// Unavailable: built without rpcgen.
    pub fn encode_decode_reuse(&mut self, _: &mut [u8]) -> Result<usize, OracleError> {
        Err(OracleError::Unavailable)
    }
    /// Unavailable: built without rpcgen.
    pub fn run(&mut self, _: &mut [u8], _: u32, _: bool) -> Result<(), OracleError> {
        Err(OracleError::Unavailable)
    }
}
