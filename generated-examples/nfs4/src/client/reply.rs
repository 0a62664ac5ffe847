//! Checking a COMPOUND reply against its request before anything of it is used (RFC 5661
//! section 16.2.3: one result per operation evaluated, in order, stopping at the first
//! that failed; the COMPOUND's status is that of the last one).

use super::error::ClientError;
use crate::nfs4::{Compound4res, NfsArgop4, NfsOpnum4, NfsResop4, Nfsstat4};

/// The status of one operation's result.
pub fn resop_status(res: &NfsResop4) -> Nfsstat4 {
    use NfsResop4 as R;
    match res {
        R::OpAccess(r) => r.discriminant(),
        R::OpClose(r) => r.discriminant(),
        R::OpCommit(r) => r.discriminant(),
        R::OpCreate(r) => r.discriminant(),
        R::OpDelegpurge(r) => r.status,
        R::OpDelegreturn(r) => r.status,
        R::OpGetattr(r) => r.discriminant(),
        R::OpGetfh(r) => r.discriminant(),
        R::OpLink(r) => r.discriminant(),
        R::OpLock(r) => r.discriminant(),
        R::OpLockt(r) => r.discriminant(),
        R::OpLocku(r) => r.discriminant(),
        R::OpLookup(r) => r.status,
        R::OpLookupp(r) => r.status,
        R::OpNverify(r) => r.status,
        R::OpOpen(r) => r.discriminant(),
        R::OpOpenattr(r) => r.status,
        R::OpOpenConfirm(r) => r.discriminant(),
        R::OpOpenDowngrade(r) => r.discriminant(),
        R::OpPutfh(r) => r.status,
        R::OpPutpubfh(r) => r.status,
        R::OpPutrootfh(r) => r.status,
        R::OpRead(r) => r.discriminant(),
        R::OpReaddir(r) => r.discriminant(),
        R::OpReadlink(r) => r.discriminant(),
        R::OpRemove(r) => r.discriminant(),
        R::OpRename(r) => r.discriminant(),
        R::OpRenew(r) => r.status,
        R::OpRestorefh(r) => r.status,
        R::OpSavefh(r) => r.status,
        R::OpSecinfo(r) => r.discriminant(),
        R::OpSetattr(r) => r.status,
        R::OpSetclientid(r) => r.discriminant(),
        R::OpSetclientidConfirm(r) => r.status,
        R::OpVerify(r) => r.status,
        R::OpWrite(r) => r.discriminant(),
        R::OpReleaseLockowner(r) => r.status,
        R::OpBackchannelCtl(r) => r.bcr_status,
        R::OpBindConnToSession(r) => r.discriminant(),
        R::OpExchangeId(r) => r.discriminant(),
        R::OpCreateSession(r) => r.discriminant(),
        R::OpDestroySession(r) => r.dsr_status,
        R::OpFreeStateid(r) => r.fsr_status,
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
        R::OpDestroyClientid(r) => r.dcr_status,
        R::OpReclaimComplete(r) => r.rcr_status,
        R::OpIllegal(r) => r.status,
    }
}

/// Checks that `res` can be the reply to `args`: no more results than operations, each the
/// result of the operation at its place, every result but the last successful, and the
/// COMPOUND's status that of the last result (all operations answered when it is `NFS4_OK`).
pub fn check_shape(args: &[NfsArgop4], res: &Compound4res) -> Result<(), ClientError> {
    let results = &res.resarray;
    if results.len() > args.len() {
        return Err(ClientError::protocol(format!(
            "{} results for a COMPOUND of {} operations",
            results.len(),
            args.len()
        )));
    }
    for (i, (arg, result)) in args.iter().zip(results).enumerate() {
        // RFC 5661 section 18.52 (ILLEGAL): an operation number the server does not know is answered
        // OP_ILLEGAL; every other result names its operation.
        let op = result.discriminant();
        if op != arg.discriminant() && op != NfsOpnum4::OpIllegal {
            return Err(ClientError::protocol(format!(
                "result {i} is for {op:?}, the operation was {:?}",
                arg.discriminant()
            )));
        }
        let status = resop_status(result);
        if status != Nfsstat4::Nfs4Ok && i + 1 < results.len() {
            return Err(ClientError::protocol(format!(
                "operation {i} ({op:?}) failed with {status:?} but the COMPOUND went on"
            )));
        }
    }
    match results.last().map(resop_status) {
        Some(last) if last != res.status => Err(ClientError::protocol(format!(
            "COMPOUND status {:?}, its last result {last:?}",
            res.status
        ))),
        _ if res.status == Nfsstat4::Nfs4Ok && results.len() != args.len() => {
            Err(ClientError::protocol(format!(
                "NFS4_OK with {} results for {} operations",
                results.len(),
                args.len()
            )))
        }
        _ => Ok(()),
    }
}

/// The operation that failed in a checked reply and its status, if one did: the last result
/// (or, for a COMPOUND refused before any operation, such as `NFS4ERR_MINOR_VERS_MISMATCH`,
/// `fallback` with the COMPOUND's status).
pub fn failure(res: &Compound4res, fallback: NfsOpnum4) -> Option<(NfsOpnum4, Nfsstat4)> {
    if res.status == Nfsstat4::Nfs4Ok {
        return None;
    }
    let op = res
        .resarray
        .last()
        .map(NfsResop4::discriminant)
        .unwrap_or(fallback);
    Some((op, res.status))
}

/// A checked reply's failure as an error; `Ok(res)` when every operation succeeded.
pub fn into_result(res: Compound4res, fallback: NfsOpnum4) -> Result<Compound4res, ClientError> {
    match failure(&res, fallback) {
        Some((op, status)) => Err(ClientError::Status { op, status }),
        None => Ok(res),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nfs4::{Putrootfh4res, ReclaimComplete4args, ReclaimComplete4res};

    fn compound(status: Nfsstat4, resarray: Vec<NfsResop4>) -> Compound4res {
        Compound4res {
            status,
            tag: Default::default(),
            resarray,
        }
    }

    fn putrootfh(status: Nfsstat4) -> NfsResop4 {
        NfsResop4::OpPutrootfh(Putrootfh4res { status })
    }

    #[test]
    fn accepts_a_full_reply_and_a_reply_stopped_at_its_failure() {
        let args = [NfsArgop4::OpPutrootfh, NfsArgop4::OpPutrootfh];
        let ok = compound(
            Nfsstat4::Nfs4Ok,
            vec![putrootfh(Nfsstat4::Nfs4Ok), putrootfh(Nfsstat4::Nfs4Ok)],
        );
        assert!(check_shape(&args, &ok).is_ok());
        let stopped = compound(
            Nfsstat4::Nfs4errDelay,
            vec![putrootfh(Nfsstat4::Nfs4errDelay)],
        );
        assert!(check_shape(&args, &stopped).is_ok());
        assert_eq!(
            failure(&stopped, NfsOpnum4::OpSequence),
            Some((NfsOpnum4::OpPutrootfh, Nfsstat4::Nfs4errDelay))
        );
        let refused = compound(Nfsstat4::Nfs4errMinorVersMismatch, vec![]);
        assert!(check_shape(&args, &refused).is_ok());
        assert_eq!(
            failure(&refused, NfsOpnum4::OpSequence),
            Some((NfsOpnum4::OpSequence, Nfsstat4::Nfs4errMinorVersMismatch))
        );
    }

    #[test]
    fn rejects_replies_that_cannot_answer_the_request() {
        let args = [NfsArgop4::OpPutrootfh];
        let longer = compound(
            Nfsstat4::Nfs4Ok,
            vec![putrootfh(Nfsstat4::Nfs4Ok), putrootfh(Nfsstat4::Nfs4Ok)],
        );
        assert!(matches!(
            check_shape(&args, &longer),
            Err(ClientError::Protocol(_))
        ));
        let other_op = compound(
            Nfsstat4::Nfs4Ok,
            vec![NfsResop4::OpReclaimComplete(ReclaimComplete4res {
                rcr_status: Nfsstat4::Nfs4Ok,
            })],
        );
        assert!(check_shape(&args, &other_op).is_err());
        let short_ok = compound(Nfsstat4::Nfs4Ok, vec![]);
        assert!(check_shape(&args, &short_ok).is_err());
        let status_differs = compound(Nfsstat4::Nfs4errIo, vec![putrootfh(Nfsstat4::Nfs4Ok)]);
        assert!(check_shape(&args, &status_differs).is_err());
        let two = [
            NfsArgop4::OpPutrootfh,
            NfsArgop4::OpReclaimComplete(ReclaimComplete4args { rca_one_fs: false }),
        ];
        let went_on = compound(
            Nfsstat4::Nfs4Ok,
            vec![
                putrootfh(Nfsstat4::Nfs4errIo),
                NfsResop4::OpReclaimComplete(ReclaimComplete4res {
                    rcr_status: Nfsstat4::Nfs4Ok,
                }),
            ],
        );
        assert!(check_shape(&two, &went_on).is_err());
    }
}
