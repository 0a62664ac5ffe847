//! The transport-agnostic server answers every reply status of RFC 5531 section 9, hosts
//! several programs and versions, and the client maps each status to a typed error.

use bytes::Bytes;
use rpcrdma::rpc::msg::{AuthFlavor, AuthStat};
use rpcrdma::rpc::{
    self, decode_args, handler, AuthSys, CallContext, Client, Credentials, Dispatch, DispatchError,
    HandlerFuture, HeapBuffers, Incoming, LocalTransport, ReplyError, Server, Service,
    TransportKind,
};
use rpcrdma::xdr::{Decoder, Procedure};
use std::sync::Arc;

const PROG: u32 = 0x2000_0001;
const OTHER_PROG: u32 = 0x2000_0002;

/// A hand-written service standing in for generated code: NULL, ADD, FAIL, PANIC, WHOAMI.
struct Arith {
    version: u32,
}

impl Service for Arith {
    fn program(&self) -> u32 {
        PROG
    }

    fn version(&self) -> u32 {
        self.version
    }

    fn call(
        &self,
        ctx: CallContext,
        procedure: u32,
        args: &mut Decoder<'_>,
    ) -> Result<HandlerFuture, DispatchError> {
        match procedure {
            0 => Ok(handler(async { Ok(()) })),
            1 => {
                let (a, b): (u32, u32) = decode_args(args)?;
                Ok(handler(async move { Ok(a.wrapping_add(b)) }))
            }
            2 => Ok(handler(async { Err::<(), _>(ReplyError::SystemErr) })),
            3 => Ok(handler(async {
                if true {
                    panic!("a handler bug");
                }
                Ok(())
            })),
            4 => Ok(handler(async move {
                Ok(ctx.auth().sys().map_or(u32::MAX, |s| s.uid))
            })),
            _ => Err(DispatchError::ProcUnavail),
        }
    }
}

macro_rules! procedure {
    ($name:ident, $prog:expr, $vers:expr, $proc:expr, $args:ty, $res:ty) => {
        struct $name;
        impl Procedure for $name {
            const PROGRAM: u32 = $prog;
            const VERSION: u32 = $vers;
            const PROCEDURE: u32 = $proc;
            const NAME: &'static str = stringify!($name);
            type Args = $args;
            type Result = $res;
        }
    };
}

procedure!(Null1, PROG, 1, 0, (), ());
procedure!(Add1, PROG, 1, 1, (u32, u32), u32);
procedure!(Add3, PROG, 3, 1, (u32, u32), u32);
procedure!(AddWithOneArg, PROG, 1, 1, u32, u32);
procedure!(Fail1, PROG, 1, 2, (), ());
procedure!(Panic1, PROG, 1, 3, (), ());
procedure!(WhoAmI1, PROG, 1, 4, (), u32);
procedure!(Missing1, PROG, 1, 99, (), ());
procedure!(Version2, PROG, 2, 0, (), ());
procedure!(OtherNull, OTHER_PROG, 1, 0, (), ());
procedure!(Unhosted, 0x2000_0099, 1, 0, (), ());

fn server() -> Server {
    let mut b = Server::builder();
    b.add(Arith { version: 1 }).add(Arith { version: 3 });
    b.build()
}

fn client(server: Server) -> Client {
    Client::new(LocalTransport::new(server))
}

#[tokio::test]
async fn routes_calls_to_every_hosted_version() {
    let c = client(server());
    c.call::<Null1>(&()).await.unwrap();
    assert_eq!(c.call::<Add1>(&(2, 40)).await.unwrap(), 42);
    assert_eq!(c.call::<Add3>(&(u32::MAX, 2)).await.unwrap(), 1);
}

#[tokio::test]
async fn one_server_hosts_several_programs() {
    struct Other;
    impl Service for Other {
        fn program(&self) -> u32 {
            OTHER_PROG
        }
        fn version(&self) -> u32 {
            1
        }
        fn call(
            &self,
            _: CallContext,
            _: u32,
            _: &mut Decoder<'_>,
        ) -> Result<HandlerFuture, DispatchError> {
            Ok(handler(async { Ok(()) }))
        }
    }
    let mut b = Server::builder();
    b.add(Arith { version: 1 }).add(Other);
    let server = b.build();
    assert_eq!(
        server.programs().collect::<Vec<_>>(),
        vec![(PROG, 1), (OTHER_PROG, 1)]
    );
    let c = client(server);
    c.call::<OtherNull>(&()).await.unwrap();
    assert_eq!(c.call::<Add1>(&(1, 1)).await.unwrap(), 2);
}

#[tokio::test]
async fn prog_unavail_for_a_program_not_hosted() {
    let err = client(server()).call::<Unhosted>(&()).await.unwrap_err();
    assert!(matches!(err, rpc::Error::ProgUnavail), "{err}");
}

#[tokio::test]
async fn prog_mismatch_names_the_hosted_range() {
    let err = client(server()).call::<Version2>(&()).await.unwrap_err();
    assert!(
        matches!(err, rpc::Error::ProgMismatch { low: 1, high: 3 }),
        "{err}"
    );
}

#[tokio::test]
async fn proc_unavail_for_an_unknown_procedure() {
    let err = client(server()).call::<Missing1>(&()).await.unwrap_err();
    assert!(matches!(err, rpc::Error::ProcUnavail), "{err}");
}

#[tokio::test]
async fn garbage_args_for_arguments_that_do_not_decode() {
    // ADD takes two integers; send one.
    let err = client(server())
        .call::<AddWithOneArg>(&7)
        .await
        .unwrap_err();
    assert!(matches!(err, rpc::Error::GarbageArgs), "{err}");
}

#[tokio::test]
async fn garbage_args_for_trailing_bytes() {
    procedure!(AddWithThree, PROG, 1, 1, (u32, u32, u32), u32);
    let err = client(server())
        .call::<AddWithThree>(&(1, 2, 3))
        .await
        .unwrap_err();
    assert!(matches!(err, rpc::Error::GarbageArgs), "{err}");
}

#[tokio::test]
async fn system_err_from_a_handler_and_from_a_panicking_handler() {
    let c = client(server());
    let err = c.call::<Fail1>(&()).await.unwrap_err();
    assert!(matches!(err, rpc::Error::SystemErr), "{err}");
    let err = c.call::<Panic1>(&()).await.unwrap_err();
    assert!(matches!(err, rpc::Error::SystemErr), "{err}");
    // The server carries on.
    assert_eq!(c.call::<Add1>(&(3, 4)).await.unwrap(), 7);
}

#[tokio::test]
async fn auth_sys_reaches_the_handler_and_a_too_weak_flavor_is_refused() {
    let c = client(server());
    assert_eq!(c.call::<WhoAmI1>(&()).await.unwrap(), u32::MAX);
    let sys = c
        .with_credentials(&Credentials::Sys(AuthSys::new("host", 1000, 100)))
        .unwrap();
    assert_eq!(sys.call::<WhoAmI1>(&()).await.unwrap(), 1000);

    let mut b = Server::builder();
    b.add(Arith { version: 1 })
        .accept_flavors(&[AuthFlavor::AuthSys]);
    let strict = client(b.build());
    let err = strict.call::<Null1>(&()).await.unwrap_err();
    assert!(
        matches!(err, rpc::Error::Auth(AuthStat::AuthTooweak)),
        "{err}"
    );
}

fn incoming(message: Vec<u8>) -> Incoming {
    Incoming {
        message: Bytes::from(message),
        chunks: None,
        transport: TransportKind::Other,
        peer: None,
        buffers: Arc::new(HeapBuffers),
        backchannel: None,
        caller: None,
        deadline: None,
    }
}

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|v| v.to_be_bytes()).collect()
}

#[test]
fn rpc_mismatch_for_an_rpc_version_other_than_2() {
    // xid, CALL, rpcvers 3, prog, vers, proc, AUTH_NONE cred and verf.
    let msg = words(&[9, 0, 3, PROG, 1, 0, 0, 0, 0, 0]);
    match server().dispatch(incoming(msg)) {
        Dispatch::Reply { xid: 9, error } => {
            assert_eq!(error, ReplyError::RpcMismatch { low: 2, high: 2 })
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn auth_badcred_for_an_unknown_flavor() {
    let msg = words(&[9, 0, 2, PROG, 1, 0, 77, 0, 0, 0]);
    match server().dispatch(incoming(msg)) {
        Dispatch::Reply { xid: 9, error } => {
            assert_eq!(error, ReplyError::AuthError(AuthStat::AuthBadcred))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_reply_is_not_a_call_and_a_stub_is_dropped() {
    assert!(matches!(
        server().dispatch(incoming(words(&[5, 1, 0]))),
        Dispatch::NotACall { xid: 5 }
    ));
    assert!(matches!(
        server().dispatch(incoming(vec![0, 0])),
        Dispatch::Drop(_)
    ));
    // An unknown msg_type is garbage, not a call.
    assert!(matches!(
        server().dispatch(incoming(words(&[5, 2]))),
        Dispatch::Drop(_)
    ));
}
