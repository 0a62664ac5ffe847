//! Authentication flavors (RFC 5531 section 8.2 and appendix A): what a client sends, and what
//! a server learns about its caller.
//!
//! AUTH_NONE and AUTH_SYS are supported. A credential's body is bounded by the protocol
//! (`opaque body<400>`), and an AUTH_SYS body is parsed with the bounds of
//! `authsys_parms` (`machinename<255>`, `gids<16>`), so a hostile caller cannot make the
//! server allocate more than a few hundred bytes for it.

use bytes::Bytes;

use super::msg::{AuthFlavor, AuthsysParms, OpaqueAuth};
use crate::xdr::{self, XdrString};

/// The largest credential or verifier body (RFC 5531 section 8.2: `opaque body<400>`).
pub const MAX_AUTH_BODY: usize = 400;

/// AUTH_SYS credentials (RFC 5531 appendix A): who the caller says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSys {
    /// An arbitrary id the caller's machine may generate.
    pub stamp: u32,
    /// The name of the caller's machine (at most 255 bytes).
    pub machine_name: XdrString,
    /// The caller's effective user id.
    pub uid: u32,
    /// The caller's effective group id.
    pub gid: u32,
    /// Further groups the caller is a member of (at most 16).
    pub gids: Vec<u32>,
}

impl AuthSys {
    /// Credentials for `uid`/`gid` from `machine_name`, with no further groups.
    pub fn new(machine_name: &str, uid: u32, gid: u32) -> AuthSys {
        AuthSys {
            stamp: 0,
            machine_name: XdrString::from(machine_name.to_owned()),
            uid,
            gid,
            gids: Vec::new(),
        }
    }

    /// Parses an AUTH_SYS credential body; the bounds of `authsys_parms` apply and trailing
    /// bytes are refused.
    pub fn parse(body: &Bytes) -> xdr::Result<AuthSys> {
        let p: AuthsysParms = xdr::from_bytes(body.clone())?;
        Ok(AuthSys {
            stamp: p.stamp,
            machine_name: p.machinename,
            uid: p.uid,
            gid: p.gid,
            gids: p.gids,
        })
    }

    fn to_parms(&self) -> AuthsysParms {
        AuthsysParms {
            stamp: self.stamp,
            machinename: self.machine_name.clone(),
            uid: self.uid,
            gid: self.gid,
            gids: self.gids.clone(),
        }
    }
}

/// The credentials a client sends with every call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Credentials {
    /// AUTH_NONE: no identity.
    #[default]
    None,
    /// AUTH_SYS: a Unix uid, gid and groups.
    Sys(AuthSys),
}

impl Credentials {
    /// The credential as it appears in a call header (`opaque_auth`). The verifier of both
    /// flavors is AUTH_NONE.
    pub fn to_opaque_auth(&self) -> xdr::Result<OpaqueAuth> {
        Ok(match self {
            Credentials::None => OpaqueAuth {
                flavor: AuthFlavor::AuthNone,
                body: Bytes::new(),
            },
            Credentials::Sys(sys) => OpaqueAuth {
                flavor: AuthFlavor::AuthSys,
                body: xdr::to_bytes(&sys.to_parms())?,
            },
        })
    }
}

/// What a server knows about the caller of one call, after checking its credential.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Auth {
    /// AUTH_NONE.
    #[default]
    None,
    /// AUTH_SYS, parsed.
    Sys(AuthSys),
}

impl Auth {
    /// The AUTH_SYS credentials, if the caller sent them.
    pub fn sys(&self) -> Option<&AuthSys> {
        match self {
            Auth::Sys(sys) => Some(sys),
            Auth::None => None,
        }
    }

    /// The flavor the caller used.
    pub fn flavor(&self) -> AuthFlavor {
        match self {
            Auth::None => AuthFlavor::AuthNone,
            Auth::Sys(_) => AuthFlavor::AuthSys,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_sys_round_trips_through_its_body() {
        let mut sys = AuthSys::new("client.example", 1000, 100);
        sys.gids = vec![4, 24, 27];
        let body = xdr::to_bytes(&sys.to_parms()).unwrap();
        assert_eq!(AuthSys::parse(&body).unwrap(), sys);
    }

    #[test]
    fn rejects_auth_sys_over_its_bounds() {
        let mut sys = AuthSys::new("x", 0, 0);
        sys.gids = vec![0; 17];
        // Encoding refuses it, so build the body by hand: 17 groups where 16 are allowed.
        let mut enc = xdr::Encoder::new();
        enc.put_u32(0);
        enc.put_opaque_slice(b"x", None).unwrap();
        enc.put_u32(0);
        enc.put_u32(0);
        enc.put_u32(17);
        for _ in 0..17 {
            enc.put_u32(0);
        }
        assert!(AuthSys::parse(&enc.finish().into_bytes()).is_err());
        assert!(xdr::to_bytes(&sys.to_parms()).is_err());
    }

    #[test]
    fn rejects_a_truncated_or_padded_auth_sys_body() {
        let body = xdr::to_bytes(&AuthSys::new("host", 1, 2).to_parms()).unwrap();
        for cut in 0..body.len() {
            assert!(AuthSys::parse(&body.slice(..cut)).is_err(), "prefix {cut}");
        }
        let mut longer = body.to_vec();
        longer.extend_from_slice(&[0; 4]);
        assert!(AuthSys::parse(&Bytes::from(longer)).is_err());
    }

    #[test]
    fn credentials_become_their_opaque_auth() {
        let none = Credentials::None.to_opaque_auth().unwrap();
        assert_eq!((none.flavor, none.body.len()), (AuthFlavor::AuthNone, 0));
        let sys = AuthSys::new("h", 5, 6);
        let auth = Credentials::Sys(sys.clone()).to_opaque_auth().unwrap();
        assert_eq!(auth.flavor, AuthFlavor::AuthSys);
        assert_eq!(AuthSys::parse(&auth.body).unwrap(), sys);
    }
}
