//! The result of a callback operation that failed, in the shape of its own result (RFC 5661
//! section 20: every `nfs_cb_resop4` arm starts with the operation's status).

use crate::nfs4::*;

/// `op`'s result carrying only `status` (an error: the arms with a result body take their
/// `default` arm).
pub fn failed(op: &NfsCbArgop4, status: Nfsstat4) -> NfsCbResop4 {
    use NfsCbArgop4 as A;
    use NfsCbResop4 as R;
    match op {
        A::OpCbGetattr(_) => R::OpCbGetattr(CbGetattr4res::Default {
            discriminant: status,
        }),
        A::OpCbRecall(_) => R::OpCbRecall(CbRecall4res { status }),
        A::OpCbLayoutrecall(_) => R::OpCbLayoutrecall(CbLayoutrecall4res {
            clorr_status: status,
        }),
        A::OpCbNotify(_) => R::OpCbNotify(CbNotify4res { cnr_status: status }),
        A::OpCbPushDeleg(_) => R::OpCbPushDeleg(CbPushDeleg4res {
            cpdr_status: status,
        }),
        A::OpCbRecallAny(_) => R::OpCbRecallAny(CbRecallAny4res {
            crar_status: status,
        }),
        A::OpCbRecallableObjAvail(_) => R::OpCbRecallableObjAvail(CbRecallableObjAvail4res {
            croa_status: status,
        }),
        A::OpCbRecallSlot(_) => R::OpCbRecallSlot(CbRecallSlot4res { rsr_status: status }),
        A::OpCbSequence(_) => R::OpCbSequence(CbSequence4res::Default {
            discriminant: status,
        }),
        A::OpCbWantsCancelled(_) => R::OpCbWantsCancelled(CbWantsCancelled4res {
            cwcr_status: status,
        }),
        A::OpCbNotifyLock(_) => R::OpCbNotifyLock(CbNotifyLock4res {
            cnlr_status: status,
        }),
        A::OpCbNotifyDeviceid(_) => R::OpCbNotifyDeviceid(CbNotifyDeviceid4res {
            cndr_status: status,
        }),
        A::OpCbIllegal => illegal(),
    }
}

/// The answer to an operation number outside the protocol (RFC 5661 section 20.13):
/// `OP_CB_ILLEGAL` with `NFS4ERR_OP_ILLEGAL`.
pub fn illegal() -> NfsCbResop4 {
    NfsCbResop4::OpCbIllegal(CbIllegal4res {
        status: Nfsstat4::Nfs4errOpIllegal,
    })
}

/// The status of a callback result.
pub fn status(res: &NfsCbResop4) -> Nfsstat4 {
    use NfsCbResop4 as R;
    match res {
        R::OpCbGetattr(r) => r.discriminant(),
        R::OpCbRecall(r) => r.status,
        R::OpCbLayoutrecall(r) => r.clorr_status,
        R::OpCbNotify(r) => r.cnr_status,
        R::OpCbPushDeleg(r) => r.cpdr_status,
        R::OpCbRecallAny(r) => r.crar_status,
        R::OpCbRecallableObjAvail(r) => r.croa_status,
        R::OpCbRecallSlot(r) => r.rsr_status,
        R::OpCbSequence(r) => r.discriminant(),
        R::OpCbWantsCancelled(r) => r.cwcr_status,
        R::OpCbNotifyLock(r) => r.cnlr_status,
        R::OpCbNotifyDeviceid(r) => r.cndr_status,
        R::OpCbIllegal(r) => r.status,
    }
}
