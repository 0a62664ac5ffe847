//! An operation's result when it fails, and the status of any result: the two things the
//! COMPOUND loop needs from the 57 result types (RFC 5661 section 16.2.3: processing stops at
//! the first result that is not NFS4_OK, and that status is the COMPOUND's).

use crate::nfs4::*;

/// Result unions whose failure arm is `default: void` and struct results that are only a status.
macro_rules! by_op {
    ($op:expr, $status:expr;
     unions: $($u:ident => $ut:ident),* ;
     structs: $($s:ident => $st:ident . $field:ident),* ;) => {
        match $op {
            $(NfsOpnum4::$u => NfsResop4::$u($ut::Default { discriminant: $status }),)*
            $(NfsOpnum4::$s => NfsResop4::$s($st { $field: $status, ..Default::default() }),)*
        }
    };
}

/// The result of operation `op` failing with `status` (never NFS4_OK).
// One macro arm for every struct result: SETATTR4res has a second field, the rest do not.
#[allow(clippy::needless_update)]
pub fn failed(op: NfsOpnum4, status: Nfsstat4) -> NfsResop4 {
    debug_assert_ne!(status, Nfsstat4::Nfs4Ok);
    by_op!(op, status;
        unions:
            OpAccess => Access4res, OpClose => Close4res, OpCommit => Commit4res,
            OpCreate => Create4res, OpGetattr => Getattr4res, OpGetfh => Getfh4res,
            OpLink => Link4res, OpLock => Lock4res, OpLockt => Lockt4res, OpLocku => Locku4res,
            OpOpen => Open4res, OpOpenConfirm => OpenConfirm4res,
            OpOpenDowngrade => OpenDowngrade4res, OpRead => Read4res, OpReaddir => Readdir4res,
            OpReadlink => Readlink4res, OpRemove => Remove4res, OpRename => Rename4res,
            OpSecinfo => Secinfo4res, OpSetclientid => Setclientid4res, OpWrite => Write4res,
            OpBindConnToSession => BindConnToSession4res, OpExchangeId => ExchangeId4res,
            OpCreateSession => CreateSession4res, OpGetDirDelegation => GetDirDelegation4res,
            OpGetdeviceinfo => Getdeviceinfo4res, OpGetdevicelist => Getdevicelist4res,
            OpLayoutcommit => Layoutcommit4res, OpLayoutget => Layoutget4res,
            OpLayoutreturn => Layoutreturn4res, OpSecinfoNoName => SecinfoNoName4res,
            OpSequence => Sequence4res, OpSetSsv => SetSsv4res, OpTestStateid => TestStateid4res,
            OpWantDelegation => WantDelegation4res;
        structs:
            OpDelegpurge => Delegpurge4res.status, OpDelegreturn => Delegreturn4res.status,
            OpLookup => Lookup4res.status, OpLookupp => Lookupp4res.status,
            OpNverify => Nverify4res.status, OpOpenattr => Openattr4res.status,
            OpPutfh => Putfh4res.status, OpPutpubfh => Putpubfh4res.status,
            OpPutrootfh => Putrootfh4res.status, OpRenew => Renew4res.status,
            OpRestorefh => Restorefh4res.status, OpSavefh => Savefh4res.status,
            OpSetattr => Setattr4res.status,
            OpSetclientidConfirm => SetclientidConfirm4res.status,
            OpVerify => Verify4res.status, OpReleaseLockowner => ReleaseLockowner4res.status,
            OpBackchannelCtl => BackchannelCtl4res.bcr_status,
            OpDestroySession => DestroySession4res.dsr_status,
            OpFreeStateid => FreeStateid4res.fsr_status,
            OpDestroyClientid => DestroyClientid4res.dcr_status,
            OpReclaimComplete => ReclaimComplete4res.rcr_status,
            OpIllegal => Illegal4res.status;
    )
}

/// The status a result carries.
pub fn status(res: &NfsResop4) -> Nfsstat4 {
    use NfsResop4 as R;
    match res {
        R::OpAccess(r) => r.discriminant(),
        R::OpClose(r) => r.discriminant(),
        R::OpCommit(r) => r.discriminant(),
        R::OpCreate(r) => r.discriminant(),
        R::OpGetattr(r) => r.discriminant(),
        R::OpGetfh(r) => r.discriminant(),
        R::OpLink(r) => r.discriminant(),
        R::OpLock(r) => r.discriminant(),
        R::OpLockt(r) => r.discriminant(),
        R::OpLocku(r) => r.discriminant(),
        R::OpOpen(r) => r.discriminant(),
        R::OpOpenConfirm(r) => r.discriminant(),
        R::OpOpenDowngrade(r) => r.discriminant(),
        R::OpRead(r) => r.discriminant(),
        R::OpReaddir(r) => r.discriminant(),
        R::OpReadlink(r) => r.discriminant(),
        R::OpRemove(r) => r.discriminant(),
        R::OpRename(r) => r.discriminant(),
        R::OpSecinfo(r) => r.discriminant(),
        R::OpSetclientid(r) => r.discriminant(),
        R::OpWrite(r) => r.discriminant(),
        R::OpBindConnToSession(r) => r.discriminant(),
        R::OpExchangeId(r) => r.discriminant(),
        R::OpCreateSession(r) => r.discriminant(),
        R::OpGetDirDelegation(r) => r.discriminant(),
        R::OpGetdeviceinfo(r) => r.discriminant(),
        R::OpGetdevicelist(r) => r.discriminant(),
        R::OpLayoutcommit(r) => r.discriminant(),
        R::OpLayoutget(r) => r.discriminant(),
        R::OpLayoutreturn(r) => r.discriminant(),
        R::OpSecinfoNoName(r) => r.discriminant(),
        R::OpSequence(r) => r.discriminant(),
        R::OpSetSsv(r) => r.discriminant(),
        R::OpTestStateid(r) => r.discriminant(),
        R::OpWantDelegation(r) => r.discriminant(),
        R::OpDelegpurge(r) => r.status,
        R::OpDelegreturn(r) => r.status,
        R::OpLookup(r) => r.status,
        R::OpLookupp(r) => r.status,
        R::OpNverify(r) => r.status,
        R::OpOpenattr(r) => r.status,
        R::OpPutfh(r) => r.status,
        R::OpPutpubfh(r) => r.status,
        R::OpPutrootfh(r) => r.status,
        R::OpRenew(r) => r.status,
        R::OpRestorefh(r) => r.status,
        R::OpSavefh(r) => r.status,
        R::OpSetattr(r) => r.status,
        R::OpSetclientidConfirm(r) => r.status,
        R::OpVerify(r) => r.status,
        R::OpReleaseLockowner(r) => r.status,
        R::OpBackchannelCtl(r) => r.bcr_status,
        R::OpDestroySession(r) => r.dsr_status,
        R::OpFreeStateid(r) => r.fsr_status,
        R::OpDestroyClientid(r) => r.dcr_status,
        R::OpReclaimComplete(r) => r.rcr_status,
        R::OpIllegal(r) => r.status,
    }
}

/// The status-only result of `op` that succeeded with nothing to return (PUTFH, LOOKUP, SAVEFH,
/// ...); `None` for an operation whose success carries a body.
pub fn ok(op: NfsOpnum4) -> Option<NfsResop4> {
    let ok = Nfsstat4::Nfs4Ok;
    Some(match op {
        NfsOpnum4::OpDelegpurge => NfsResop4::OpDelegpurge(Delegpurge4res { status: ok }),
        NfsOpnum4::OpDelegreturn => NfsResop4::OpDelegreturn(Delegreturn4res { status: ok }),
        NfsOpnum4::OpLookup => NfsResop4::OpLookup(Lookup4res { status: ok }),
        NfsOpnum4::OpLookupp => NfsResop4::OpLookupp(Lookupp4res { status: ok }),
        NfsOpnum4::OpNverify => NfsResop4::OpNverify(Nverify4res { status: ok }),
        NfsOpnum4::OpPutfh => NfsResop4::OpPutfh(Putfh4res { status: ok }),
        NfsOpnum4::OpPutpubfh => NfsResop4::OpPutpubfh(Putpubfh4res { status: ok }),
        NfsOpnum4::OpPutrootfh => NfsResop4::OpPutrootfh(Putrootfh4res { status: ok }),
        NfsOpnum4::OpRestorefh => NfsResop4::OpRestorefh(Restorefh4res { status: ok }),
        NfsOpnum4::OpSavefh => NfsResop4::OpSavefh(Savefh4res { status: ok }),
        NfsOpnum4::OpVerify => NfsResop4::OpVerify(Verify4res { status: ok }),
        NfsOpnum4::OpBackchannelCtl => {
            NfsResop4::OpBackchannelCtl(BackchannelCtl4res { bcr_status: ok })
        }
        NfsOpnum4::OpDestroySession => {
            NfsResop4::OpDestroySession(DestroySession4res { dsr_status: ok })
        }
        NfsOpnum4::OpFreeStateid => NfsResop4::OpFreeStateid(FreeStateid4res { fsr_status: ok }),
        NfsOpnum4::OpDestroyClientid => {
            NfsResop4::OpDestroyClientid(DestroyClientid4res { dcr_status: ok })
        }
        NfsOpnum4::OpReclaimComplete => {
            NfsResop4::OpReclaimComplete(ReclaimComplete4res { rcr_status: ok })
        }
        _ => return None,
    })
}
