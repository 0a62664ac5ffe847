//! Verbs statuses and access bits in the contract's terms.

use super::*;

/// Maps a verbs completion status onto the contract's.
pub(in crate::rdma::verbs) fn map_status(status: ibv_wc_status::Type) -> WcStatus {
    use ibv_wc_status::*;
    match status {
        IBV_WC_SUCCESS => WcStatus::Success,
        IBV_WC_WR_FLUSH_ERR => WcStatus::Flushed,
        IBV_WC_LOC_LEN_ERR => WcStatus::LocalLengthError,
        IBV_WC_LOC_PROT_ERR | IBV_WC_LOC_ACCESS_ERR | IBV_WC_MW_BIND_ERR => {
            WcStatus::LocalProtectionError
        }
        IBV_WC_LOC_QP_OP_ERR => WcStatus::LocalQpOperationError,
        IBV_WC_REM_ACCESS_ERR => WcStatus::RemoteAccessError,
        IBV_WC_REM_OP_ERR | IBV_WC_REM_ABORT_ERR => WcStatus::RemoteOperationError,
        IBV_WC_REM_INV_REQ_ERR | IBV_WC_REM_INV_RD_REQ_ERR => WcStatus::RemoteInvalidRequest,
        IBV_WC_BAD_RESP_ERR => WcStatus::BadResponse,
        IBV_WC_GENERAL_ERR | IBV_WC_FATAL_ERR => WcStatus::GeneralError,
        other => WcStatus::Other(other),
    }
}

/// The verbs access bits for a region with `access`: the memory region itself gets local
/// rights only (plus `MW_BIND`); remote rights go to the window bound over it.
///
/// With `windows`, remote rights live on the region's window and the region only allows
/// binding; without (a device with no memory windows, such as siw) they are the region's own,
/// and its rkey is the one the peer uses for as long as the region lives.
pub(in crate::rdma::verbs) fn mr_access(access: Access, windows: bool) -> u32 {
    let mut bits = 0;
    // Remote write requires local write on the region (IB spec C10-78 for windows).
    if access.contains(Access::LOCAL_WRITE) || access.contains(Access::REMOTE_WRITE) {
        bits |= ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0;
    }
    if access.is_remote() {
        if windows {
            bits |= ibv_access_flags::IBV_ACCESS_MW_BIND.0;
        } else {
            bits |= mw_access(access);
        }
    }
    bits
}

/// The verbs access bits of the window for `access`.
pub(in crate::rdma::verbs) fn mw_access(access: Access) -> u32 {
    let mut bits = 0;
    if access.contains(Access::REMOTE_READ) {
        bits |= ibv_access_flags::IBV_ACCESS_REMOTE_READ.0;
    }
    if access.contains(Access::REMOTE_WRITE) {
        bits |= ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0;
    }
    bits
}
