//! [`MemFs`] as the generated `MountV3Server` (RFC 1813 Appendix I): one export,
//! its root handle for MNT, and the list of who mounted it for DUMP.

use rpcrdma::rpc::{CallContext, ReplyError};
use rpcrdma::xdr::XdrString;

use crate::mount3::mount_program::mount_v3::MountV3Server;
use crate::mount3::*;

use super::MemFs;

/// AUTH_NONE and AUTH_SYS (RFC 5531 section 8.1 and Appendix A).
const AUTH_NONE: i32 = 0;
const AUTH_SYS: i32 = 1;

/// The most entries the mount list keeps (each MNT from a new host and path adds one).
pub const MOUNT_LIST_MAX: usize = 1024;

/// The name DUMP gives a caller: its address, or "unknown" on a transport without one.
fn host(ctx: &CallContext) -> Name {
    let host = ctx
        .peer()
        .map_or_else(|| "unknown".to_string(), |addr| addr.ip().to_string());
    Name(XdrString::from(host))
}

impl MemFs {
    /// True when `path` names the export ("/export" or "/export/").
    fn is_export(&self, path: &Dirpath) -> bool {
        let export = self.config.export.trim_end_matches('/');
        let asked = path.0.as_bytes();
        let asked = asked.strip_suffix(b"/").unwrap_or(asked);
        asked == export.as_bytes() || (export.is_empty() && asked.is_empty())
    }

    fn mount_list(&self) -> std::sync::MutexGuard<'_, Vec<Mountbody>> {
        self.mounts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// MNT's answer for `path`.
    fn mount(&self, ctx: &CallContext, path: Dirpath) -> Mountres3 {
        if path.0.len() > MNTPATHLEN as usize {
            return Mountres3::Default {
                discriminant: Mountstat3::Mnt3errNametoolong,
            };
        }
        if !self.is_export(&path) {
            return Mountres3::Default {
                discriminant: Mountstat3::Mnt3errNoent,
            };
        }
        let entry = Mountbody {
            ml_hostname: host(ctx),
            ml_directory: path,
        };
        let mut list = self.mount_list();
        if !list.contains(&entry) && list.len() < MOUNT_LIST_MAX {
            list.push(entry);
        }
        Mountres3::Mnt3Ok(Mountres3Ok {
            fhandle: Fhandle3(self.root_handle().data),
            auth_flavors: vec![AUTH_SYS, AUTH_NONE],
        })
    }
}

impl MountV3Server for MemFs {
    async fn mountproc3_null(&self, ctx: CallContext) -> Result<(), ReplyError> {
        self.log_call(&ctx, "mountproc3_null", Mountstat3::Mnt3Ok);
        Ok(())
    }

    /// MNT (Appendix I, MOUNTPROC3_MNT): the root handle of the export, MNT3ERR_NOENT for any
    /// other path.
    async fn mountproc3_mnt(
        &self,
        ctx: CallContext,
        path: Dirpath,
    ) -> Result<Mountres3, ReplyError> {
        let res = self.mount(&ctx, path);
        let status = match &res {
            Mountres3::Mnt3Ok(_) => Mountstat3::Mnt3Ok,
            Mountres3::Default { discriminant } => *discriminant,
        };
        self.log_call(&ctx, "mountproc3_mnt", status);
        Ok(res)
    }

    async fn mountproc3_dump(&self, ctx: CallContext) -> Result<Mountlist, ReplyError> {
        self.log_call(&ctx, "mountproc3_dump", Mountstat3::Mnt3Ok);
        Ok(Mountlist(self.mount_list().clone()))
    }

    async fn mountproc3_umnt(&self, ctx: CallContext, path: Dirpath) -> Result<(), ReplyError> {
        self.log_call(&ctx, "mountproc3_umnt", Mountstat3::Mnt3Ok);
        let host = host(&ctx);
        self.mount_list()
            .retain(|m| !(m.ml_hostname == host && m.ml_directory == path));
        Ok(())
    }

    async fn mountproc3_umntall(&self, ctx: CallContext) -> Result<(), ReplyError> {
        self.log_call(&ctx, "mountproc3_umntall", Mountstat3::Mnt3Ok);
        let host = host(&ctx);
        self.mount_list().retain(|m| m.ml_hostname != host);
        Ok(())
    }

    /// EXPORT: the one export, open to every host (no groups).
    async fn mountproc3_export(&self, ctx: CallContext) -> Result<Exports, ReplyError> {
        self.log_call(&ctx, "mountproc3_export", Mountstat3::Mnt3Ok);
        Ok(Exports(vec![Exportnode {
            ex_dir: Dirpath(XdrString::from(self.config.export.clone())),
            ex_groups: Vec::new(),
        }]))
    }
}
