//! The status of every NFSv3 result, for the call log.

use crate::nfs3::*;

/// A result's NFSv3 status: NFS3_OK or the error it carries.
pub trait ResultStatus {
    /// The status.
    fn status(&self) -> Nfsstat3;
}

macro_rules! with_failure_body {
    ($($res:ty),*) => {$(
        impl ResultStatus for $res {
            fn status(&self) -> Nfsstat3 {
                match self {
                    Self::Nfs3Ok(_) => Nfsstat3::Nfs3Ok,
                    Self::Default { discriminant, .. } => *discriminant,
                }
            }
        }
    )*};
}

with_failure_body!(
    Setattr3res,
    Lookup3res,
    Access3res,
    Readlink3res,
    Read3res,
    Write3res,
    Create3res,
    Mkdir3res,
    Symlink3res,
    Mknod3res,
    Remove3res,
    Rmdir3res,
    Rename3res,
    Link3res,
    Readdir3res,
    Readdirplus3res,
    Fsstat3res,
    Fsinfo3res,
    Pathconf3res,
    Commit3res
);

impl ResultStatus for Getattr3res {
    fn status(&self) -> Nfsstat3 {
        match self {
            Self::Nfs3Ok(_) => Nfsstat3::Nfs3Ok,
            Self::Default { discriminant } => *discriminant,
        }
    }
}
