//! [`MemFs`] as the generated `NfsV3Server`: each procedure locks the node
//! table, runs its function from [`file`](mod@file), [`names`], [`readdir`] or [`fs`], and answers with
//! the protocol's status. No procedure fails the RPC itself: a bad handle, name or size is an
//! NFS3ERR_* result.

pub mod file;
pub mod fs;
pub mod names;
pub mod readdir;
pub mod status;

use rpcrdma::rpc::{CallContext, ReplyError};

use crate::nfs3::nfs_program::nfs_v3::NfsV3Server;
use crate::nfs3::*;

use super::MemFs;
use status::ResultStatus;

/// One trait method per procedure, each running `$function` under the lock.
macro_rules! procedures {
    ($($method:ident($args:ty) -> $res:ty = $function:path;)*) => {$(
        async fn $method(&self, ctx: CallContext, args: $args) -> Result<$res, ReplyError> {
            let res = self.op(&ctx, |op| $function(op, args));
            self.log_call(&ctx, stringify!($method), res.status());
            Ok(res)
        }
    )*};
}

impl NfsV3Server for MemFs {
    async fn nfsproc3_null(&self, ctx: CallContext) -> Result<(), ReplyError> {
        self.log_call(&ctx, "nfsproc3_null", Nfsstat3::Nfs3Ok);
        Ok(())
    }

    async fn nfsproc3_read(
        &self,
        ctx: CallContext,
        args: Read3args,
    ) -> Result<Read3res, ReplyError> {
        let res = self.op(&ctx, |op| file::read(op, &ctx, args));
        self.log_call(&ctx, "nfsproc3_read", res.status());
        Ok(res)
    }

    procedures! {
        nfsproc3_getattr(Getattr3args) -> Getattr3res = file::getattr;
        nfsproc3_setattr(Setattr3args) -> Setattr3res = file::setattr;
        nfsproc3_lookup(Lookup3args) -> Lookup3res = names::lookup;
        nfsproc3_access(Access3args) -> Access3res = file::access;
        nfsproc3_readlink(Readlink3args) -> Readlink3res = file::readlink;
        nfsproc3_write(Write3args) -> Write3res = file::write;
        nfsproc3_create(Create3args) -> Create3res = names::create;
        nfsproc3_mkdir(Mkdir3args) -> Mkdir3res = names::mkdir;
        nfsproc3_symlink(Symlink3args) -> Symlink3res = names::symlink;
        nfsproc3_mknod(Mknod3args) -> Mknod3res = names::mknod;
        nfsproc3_remove(Remove3args) -> Remove3res = names::remove;
        nfsproc3_rmdir(Rmdir3args) -> Rmdir3res = names::rmdir;
        nfsproc3_rename(Rename3args) -> Rename3res = names::rename;
        nfsproc3_link(Link3args) -> Link3res = names::link;
        nfsproc3_readdir(Readdir3args) -> Readdir3res = readdir::readdir;
        nfsproc3_readdirplus(Readdirplus3args) -> Readdirplus3res = readdir::readdirplus;
        nfsproc3_fsstat(Fsstat3args) -> Fsstat3res = fs::fsstat;
        nfsproc3_fsinfo(Fsinfo3args) -> Fsinfo3res = fs::fsinfo;
        nfsproc3_pathconf(Pathconf3args) -> Pathconf3res = fs::pathconf;
        nfsproc3_commit(Commit3args) -> Commit3res = file::commit;
    }
}
