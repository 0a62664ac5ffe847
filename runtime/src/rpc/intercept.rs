//! A client's per-call hook ([`Interceptor`]): sees every call before it is sent, may give it
//! other credentials, or refuse it.

use super::auth::Credentials;
use super::msg::OpaqueAuth;
use crate::xdr;

/// Why an interceptor refused a call; the call fails with
/// [`Error::Refused`](crate::rpc::Error::Refused) carrying it.
pub type Refusal = Box<dyn std::error::Error + Send + Sync>;

/// A call as an [`Interceptor`] sees it, before it is encoded and sent.
#[derive(Debug)]
pub struct Intercepted {
    program: u32,
    version: u32,
    procedure: u32,
    credentials: Option<OpaqueAuth>,
}

impl Intercepted {
    pub(crate) fn new(program: u32, version: u32, procedure: u32) -> Intercepted {
        Intercepted {
            program,
            version,
            procedure,
            credentials: None,
        }
    }

    /// The program number the call goes to.
    pub fn program(&self) -> u32 {
        self.program
    }

    /// The program version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The procedure number.
    pub fn procedure(&self) -> u32 {
        self.procedure
    }

    /// Sends this call with `credentials` instead of the client's (AUTH_SYS, RFC 5531
    /// appendix A); the verifier stays AUTH_NONE. Fails when they do not encode (a machine
    /// name or gid list over its bound).
    pub fn set_credentials(&mut self, credentials: &Credentials) -> Result<(), xdr::Error> {
        self.credentials = Some(credentials.to_opaque_auth()?);
        Ok(())
    }

    /// The credentials set by [`set_credentials`](Self::set_credentials), if any.
    pub(crate) fn into_credentials(self) -> Option<OpaqueAuth> {
        self.credentials
    }
}

/// A per-call hook on a [`Client`](crate::rpc::Client)
/// ([`Client::with_interceptor`](crate::rpc::Client::with_interceptor)): runs before every
/// call is sent, in the caller's task, and may set the call's credentials or refuse it.
///
/// Any `Fn(&mut Intercepted) -> Result<(), Refusal>` is one:
///
/// ```
/// use rpcrdma::rpc::{AuthSys, Client, Credentials, Intercepted, LocalTransport, Server};
///
/// let client = Client::new(LocalTransport::new(Server::builder().build()));
/// let client = client.with_interceptor(|call: &mut Intercepted| {
///     if call.procedure() == 99 {
///         return Err("procedure 99 is not for this client".into());
///     }
///     call.set_credentials(&Credentials::Sys(AuthSys::new("host", 1000, 1000)))?;
///     Ok(())
/// });
/// # let _ = client;
/// ```
pub trait Interceptor: Send + Sync + 'static {
    /// Looks at `call` before it is sent: `Err` refuses it.
    fn intercept(&self, call: &mut Intercepted) -> Result<(), Refusal>;
}

impl<F> Interceptor for F
where
    F: Fn(&mut Intercepted) -> Result<(), Refusal> + Send + Sync + 'static,
{
    fn intercept(&self, call: &mut Intercepted) -> Result<(), Refusal> {
        self(call)
    }
}
