//! Call and reply headers (RFC 5531 section 9) on the generated message types: encoding them,
//! and decoding them with the checks a server must make before it trusts a call.

use bytes::Bytes;

use super::auth::{Auth, AuthSys};
use super::error::{Error, ReplyError};
use super::msg::{
    AcceptStat, AcceptedReply, AcceptedReplyData, AuthFlavor, AuthStat, CallBody, MismatchInfo,
    MsgType, OpaqueAuth, RejectedReply, ReplyBody, ReplyStat, RpcMsg, RpcMsgBody,
};
use super::RPC_VERSION;
use crate::xdr::{self, Block, Decode, Decoder, Encode, Encoder};

/// The routing fields of a call, after the header checks of RFC 5531 section 9.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallHeader {
    /// The transaction id.
    pub xid: u32,
    /// The program number.
    pub prog: u32,
    /// The program version.
    pub vers: u32,
    /// The procedure number.
    pub proc: u32,
    /// The caller's credential, checked and parsed.
    pub auth: Auth,
}

/// Why a message could not be taken as a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// Too short or malformed to name a transaction: nothing can be answered, drop it.
    Unreadable(xdr::Error),
    /// A REPLY (msg_type 1), not a call: for the requester side of the connection.
    Reply {
        /// The reply's transaction id.
        xid: u32,
    },
    /// A call to answer with this error at once.
    Refuse {
        /// The call's transaction id.
        xid: u32,
        /// The answer.
        error: ReplyError,
    },
}

/// Decodes a call header, checking in the order RFC 5531 implies: the RPC version first
/// (RPC_MISMATCH, whatever follows), then the credential (AUTH_ERROR / AUTH_BADCRED for a
/// flavor that is not AUTH_NONE or AUTH_SYS, or a body that does not parse; AUTH_BADVERF for
/// the verifier). `flavors` are the flavors this server accepts; others get AUTH_TOOWEAK.
pub fn decode_call_header(
    dec: &mut Decoder<'_>,
    flavors: &[AuthFlavor],
) -> Result<CallHeader, HeaderError> {
    let xid = dec.get_u32().map_err(HeaderError::Unreadable)?;
    match MsgType::decode(dec).map_err(HeaderError::Unreadable)? {
        MsgType::Call => {}
        MsgType::Reply => return Err(HeaderError::Reply { xid }),
    }
    let refuse = |error| HeaderError::Refuse { xid, error };
    let rpcvers = dec.get_u32().map_err(HeaderError::Unreadable)?;
    if rpcvers != RPC_VERSION {
        // RFC 5531 section 9: "rpcvers ... MUST be equal to 2"; the reply names the range.
        return Err(refuse(ReplyError::RpcMismatch {
            low: RPC_VERSION,
            high: RPC_VERSION,
        }));
    }
    let mut routing = [0u32; 3];
    for field in &mut routing {
        *field = dec.get_u32().map_err(HeaderError::Unreadable)?;
    }
    let [prog, vers, proc] = routing;
    let auth = match no_credentials(dec, flavors) {
        true => Auth::None,
        false => {
            decode_credentials(dec, flavors).map_err(|stat| refuse(ReplyError::AuthError(stat)))?
        }
    };
    Ok(CallHeader {
        xid,
        prog,
        vers,
        proc,
        auth,
    })
}

/// True (with `dec` past them) when the credential is AUTH_NONE and the verifier AUTH_NONE, both
/// without a body, and AUTH_NONE is accepted: the common call, taken at a glance; what
/// [`decode_credentials`] would decide (tested). False, with `dec` untouched, otherwise.
fn no_credentials(dec: &mut Decoder<'_>, flavors: &[AuthFlavor]) -> bool {
    let Some(block) = dec.peek_block::<16>() else {
        return false;
    };
    let words: [u32; 4] = [
        block.get::<0, u32>(),
        block.get::<4, u32>(),
        block.get::<8, u32>(),
        block.get::<12, u32>(),
    ];
    let none = AuthFlavor::AuthNone as u32;
    let taken = words == [none, 0, none, 0] && flavors.contains(&AuthFlavor::AuthNone);
    if taken {
        let _ = dec.skip(16);
    }
    taken
}

/// The credential and the verifier, checked: the caller's identity, or the AUTH_ERROR status
/// to answer.
fn decode_credentials(dec: &mut Decoder<'_>, flavors: &[AuthFlavor]) -> Result<Auth, AuthStat> {
    let cred = decode_auth(dec).map_err(|_| AuthStat::AuthBadcred)?;
    let verf = decode_auth(dec).map_err(|_| AuthStat::AuthBadverf)?;
    if verf.flavor != AuthFlavor::AuthNone {
        // Neither AUTH_NONE nor AUTH_SYS carries a verifier (RFC 5531 section 10 and
        // appendix A).
        return Err(AuthStat::AuthBadverf);
    }
    if !flavors.contains(&cred.flavor) {
        return Err(AuthStat::AuthTooweak);
    }
    match cred.flavor {
        AuthFlavor::AuthNone => Ok(Auth::None),
        AuthFlavor::AuthSys => AuthSys::parse(&cred.body)
            .map(Auth::Sys)
            .map_err(|_| AuthStat::AuthBadcred),
        _ => Err(AuthStat::AuthBadcred),
    }
}

/// An `opaque_auth`: the generated decoder refuses flavors `auth_flavor` does not list, which
/// for a server means AUTH_BADCRED, the answer Linux's sunrpc gives too.
fn decode_auth(dec: &mut Decoder<'_>) -> xdr::Result<OpaqueAuth> {
    OpaqueAuth::decode(dec)
}

/// Encodes a call header; the arguments follow.
pub fn encode_call_header(
    enc: &mut Encoder,
    xid: u32,
    prog: u32,
    vers: u32,
    proc: u32,
    cred: &OpaqueAuth,
    verf: &OpaqueAuth,
) -> xdr::Result<()> {
    if cred.body.is_empty() && verf.body.is_empty() {
        // The common header (AUTH_NONE, or any flavor without a body) in one block: the
        // bytes the generated encoder writes (tested below), without building an `RpcMsg`.
        let mut block = Block::<40>::new();
        block.put::<0>(xid);
        block.put::<4>(MsgType::Call as i32);
        block.put::<8>(RPC_VERSION);
        block.put::<12>(prog);
        block.put::<16>(vers);
        block.put::<20>(proc);
        block.put::<24>(cred.flavor as i32);
        block.put::<32>(verf.flavor as i32);
        enc.put_block(&block);
        return Ok(());
    }
    RpcMsg {
        xid,
        body: RpcMsgBody::Call(CallBody {
            rpcvers: RPC_VERSION,
            prog,
            vers,
            proc,
            cred: cred.clone(),
            verf: verf.clone(),
        }),
    }
    .encode(enc)
}

fn none_verifier() -> OpaqueAuth {
    OpaqueAuth {
        flavor: AuthFlavor::AuthNone,
        body: Bytes::new(),
    }
}

/// Encodes a reply header: SUCCESS (the results follow) or the error's reply.
pub fn encode_reply_header(
    enc: &mut Encoder,
    xid: u32,
    status: Result<(), ReplyError>,
) -> xdr::Result<()> {
    if status.is_ok() {
        // SUCCESS with the AUTH_NONE verifier, in one block: the bytes the generated encoder
        // writes (tested below).
        let mut block = Block::<24>::new();
        block.put::<0>(xid);
        block.put::<4>(MsgType::Reply as i32);
        enc.put_block(&block);
        return Ok(());
    }
    let accepted = |reply_data| {
        ReplyBody::MsgAccepted(AcceptedReply {
            verf: none_verifier(),
            reply_data,
        })
    };
    let body = match status {
        Ok(()) => accepted(AcceptedReplyData::Success),
        Err(ReplyError::ProgMismatch { low, high }) => {
            accepted(AcceptedReplyData::ProgMismatch(MismatchInfo { low, high }))
        }
        Err(ReplyError::ProgUnavail) => accepted(AcceptedReplyData::Default {
            discriminant: AcceptStat::ProgUnavail,
        }),
        Err(ReplyError::ProcUnavail) => accepted(AcceptedReplyData::Default {
            discriminant: AcceptStat::ProcUnavail,
        }),
        Err(ReplyError::GarbageArgs) => accepted(AcceptedReplyData::Default {
            discriminant: AcceptStat::GarbageArgs,
        }),
        Err(ReplyError::SystemErr) => accepted(AcceptedReplyData::Default {
            discriminant: AcceptStat::SystemErr,
        }),
        Err(ReplyError::RpcMismatch { low, high }) => {
            ReplyBody::MsgDenied(RejectedReply::RpcMismatch(MismatchInfo { low, high }))
        }
        Err(ReplyError::AuthError(stat)) => ReplyBody::MsgDenied(RejectedReply::AuthError(stat)),
    };
    RpcMsg {
        xid,
        body: RpcMsgBody::Reply(body),
    }
    .encode(enc)
}

/// Decodes a reply header: the XID, then `Ok` when the results follow (SUCCESS) or the error
/// the server sent.
pub fn decode_reply_header(dec: &mut Decoder<'_>) -> Result<u32, Error> {
    let msg = RpcMsg::decode(dec).map_err(Error::Decode)?;
    let body = match msg.body {
        RpcMsgBody::Reply(body) => body,
        RpcMsgBody::Call(_) => {
            return Err(Error::Decode(dec.error(xdr::ErrorKind::Invalid(
                "a CALL where a REPLY was expected",
            ))))
        }
    };
    let error = match body {
        ReplyBody::MsgAccepted(AcceptedReply { reply_data, .. }) => match reply_data {
            AcceptedReplyData::Success => return Ok(msg.xid),
            AcceptedReplyData::ProgMismatch(m) => ReplyError::ProgMismatch {
                low: m.low,
                high: m.high,
            },
            AcceptedReplyData::Default { discriminant } => match discriminant {
                AcceptStat::ProgUnavail => ReplyError::ProgUnavail,
                AcceptStat::ProcUnavail => ReplyError::ProcUnavail,
                AcceptStat::GarbageArgs => ReplyError::GarbageArgs,
                // SYSTEM_ERR, and the explicit arms' values that the generated encoder refuses
                // to put in the default arm.
                _ => ReplyError::SystemErr,
            },
        },
        ReplyBody::MsgDenied(RejectedReply::RpcMismatch(m)) => ReplyError::RpcMismatch {
            low: m.low,
            high: m.high,
        },
        ReplyBody::MsgDenied(RejectedReply::AuthError(stat)) => ReplyError::AuthError(stat),
    };
    Err(error.into())
}

/// [`decode_reply_header`] for a reply without chunk data (over TCP), which first takes the
/// common reply at a glance: REPLY, MSG_ACCEPTED, a known verifier flavor without a body,
/// SUCCESS (the generated decoder reads anything else).
pub(crate) fn decode_plain_reply_header(dec: &mut Decoder<'_>) -> Result<u32, Error> {
    match accepted_success(dec) {
        Some(xid) => Ok(xid),
        None => decode_reply_header(dec),
    }
}

/// The XID of the common reply (see [`decode_plain_reply_header`]), with `dec` past its
/// header; `None` (and `dec` untouched) for anything else.
fn accepted_success(dec: &mut Decoder<'_>) -> Option<u32> {
    let block = dec.peek_block::<24>()?;
    let xid: u32 = block.get::<0, u32>();
    let fields: [u32; 5] = [
        block.get::<4, u32>(),
        block.get::<8, u32>(),
        block.get::<12, u32>(),
        block.get::<16, u32>(),
        block.get::<20, u32>(),
    ];
    let [msg_type, reply_stat, flavor, verf_len, accept_stat] = fields;
    let known_flavor = AuthFlavor::from_value(flavor as i32).is_some();
    (msg_type == MsgType::Reply as u32
        && reply_stat == ReplyStat::MsgAccepted as u32
        && known_flavor
        && verf_len == 0
        && accept_stat == AcceptStat::Success as u32)
        .then(|| {
            // The 24 bytes are there: peeked above.
            let _ = dec.skip(24);
            xid
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none() -> OpaqueAuth {
        none_verifier()
    }

    fn call(rpcvers: u32, cred: &[u8]) -> Bytes {
        let mut enc = Encoder::new();
        for v in [7u32, 0, rpcvers, 100_003, 3, 1] {
            enc.put_u32(v);
        }
        let mut bytes = enc.finish().into_bytes().to_vec();
        bytes.extend_from_slice(cred);
        bytes.extend_from_slice(&[0; 8]);
        Bytes::from(bytes)
    }

    const ALL: &[AuthFlavor] = &[AuthFlavor::AuthNone, AuthFlavor::AuthSys];

    #[test]
    fn accepts_a_call_and_reports_its_routing() {
        let mut enc = Encoder::new();
        encode_call_header(&mut enc, 9, 100_003, 3, 6, &none(), &none()).unwrap();
        let bytes = enc.finish().into_bytes();
        let h = decode_call_header(&mut Decoder::new(&bytes), ALL).unwrap();
        assert_eq!(
            (h.xid, h.prog, h.vers, h.proc, h.auth),
            (9, 100_003, 3, 6, Auth::None)
        );
    }

    #[test]
    fn refuses_rpc_version_3_with_rpc_mismatch() {
        let bytes = call(3, &[0; 8]);
        assert_eq!(
            decode_call_header(&mut Decoder::new(&bytes), ALL),
            Err(HeaderError::Refuse {
                xid: 7,
                error: ReplyError::RpcMismatch { low: 2, high: 2 }
            })
        );
    }

    #[test]
    fn refuses_an_unknown_flavor_with_auth_badcred() {
        let bytes = call(2, &[0, 0, 0, 99, 0, 0, 0, 0]);
        assert_eq!(
            decode_call_header(&mut Decoder::new(&bytes), ALL),
            Err(HeaderError::Refuse {
                xid: 7,
                error: ReplyError::AuthError(AuthStat::AuthBadcred)
            })
        );
    }

    #[test]
    fn refuses_a_flavor_the_server_does_not_accept_as_too_weak() {
        let bytes = call(2, &[0; 8]);
        let only_sys = &[AuthFlavor::AuthSys];
        assert_eq!(
            decode_call_header(&mut Decoder::new(&bytes), only_sys),
            Err(HeaderError::Refuse {
                xid: 7,
                error: ReplyError::AuthError(AuthStat::AuthTooweak)
            })
        );
    }

    #[test]
    fn refuses_a_malformed_auth_sys_body_with_auth_badcred() {
        // AUTH_SYS with a 4-byte body: not an authsys_parms.
        let bytes = call(2, &[0, 0, 0, 1, 0, 0, 0, 4, 1, 2, 3, 4]);
        assert!(matches!(
            decode_call_header(&mut Decoder::new(&bytes), ALL),
            Err(HeaderError::Refuse {
                error: ReplyError::AuthError(AuthStat::AuthBadcred),
                ..
            })
        ));
    }

    #[test]
    fn every_prefix_of_a_call_header_is_refused_without_panic() {
        let mut enc = Encoder::new();
        encode_call_header(&mut enc, 1, 2, 3, 4, &none(), &none()).unwrap();
        let bytes = enc.finish().into_bytes();
        for cut in 0..bytes.len() {
            let prefix = bytes.slice(..cut);
            assert!(decode_call_header(&mut Decoder::new(&prefix), ALL).is_err());
        }
    }

    #[test]
    fn every_reply_error_round_trips() {
        let errors = [
            ReplyError::RpcMismatch { low: 2, high: 2 },
            ReplyError::AuthError(AuthStat::AuthTooweak),
            ReplyError::ProgUnavail,
            ReplyError::ProgMismatch { low: 1, high: 3 },
            ReplyError::ProcUnavail,
            ReplyError::GarbageArgs,
            ReplyError::SystemErr,
        ];
        for e in errors {
            let mut enc = Encoder::new();
            encode_reply_header(&mut enc, 5, Err(e)).unwrap();
            let bytes = enc.finish().into_bytes();
            let got = decode_reply_header(&mut Decoder::new(&bytes)).unwrap_err();
            assert_eq!(got.to_string(), Error::from(e).to_string());
        }
        let mut enc = Encoder::new();
        encode_reply_header(&mut enc, 5, Ok(())).unwrap();
        let bytes = enc.finish().into_bytes();
        assert_eq!(decode_reply_header(&mut Decoder::new(&bytes)).unwrap(), 5);
    }

    /// What the generated types encode for a call header.
    fn generated_call_header(xid: u32, cred: &OpaqueAuth, verf: &OpaqueAuth) -> Bytes {
        let mut enc = Encoder::new();
        RpcMsg {
            xid,
            body: RpcMsgBody::Call(CallBody {
                rpcvers: RPC_VERSION,
                prog: 100_003,
                vers: 3,
                proc: 6,
                cred: cred.clone(),
                verf: verf.clone(),
            }),
        }
        .encode(&mut enc)
        .unwrap();
        enc.finish().into_bytes()
    }

    #[test]
    fn a_call_header_is_written_as_the_generated_encoder_writes_it() {
        let auth = |flavor, body: &[u8]| OpaqueAuth {
            flavor,
            body: Bytes::copy_from_slice(body),
        };
        let cases = [
            (
                auth(AuthFlavor::AuthNone, b""),
                auth(AuthFlavor::AuthNone, b""),
            ),
            (
                auth(AuthFlavor::AuthSys, b""),
                auth(AuthFlavor::AuthShort, b""),
            ),
            (auth(AuthFlavor::AuthSys, b"\0\0\0\x01abcde"), none()),
            (none(), auth(AuthFlavor::AuthNone, b"xyz")),
        ];
        for (xid, (cred, verf)) in [0, 1, u32::MAX]
            .into_iter()
            .zip(cases.iter().cycle())
            .chain(cases.iter().map(|c| (0x1234_5678, c)))
        {
            let mut enc = Encoder::new();
            encode_call_header(&mut enc, xid, 100_003, 3, 6, cred, verf).unwrap();
            assert_eq!(
                enc.finish().into_bytes(),
                generated_call_header(xid, cred, verf),
                "{cred:?} {verf:?}"
            );
        }
    }

    #[test]
    fn the_common_reply_is_read_at_a_glance_and_every_other_as_generated() {
        let encoded = |status| {
            let mut enc = Encoder::new();
            encode_reply_header(&mut enc, 77, status).unwrap();
            enc.finish().into_bytes().to_vec()
        };
        let mut replies = vec![
            encoded(Ok(())),
            encoded(Err(ReplyError::ProgUnavail)),
            encoded(Err(ReplyError::ProgMismatch { low: 1, high: 3 })),
            encoded(Err(ReplyError::ProcUnavail)),
            encoded(Err(ReplyError::GarbageArgs)),
            encoded(Err(ReplyError::SystemErr)),
            encoded(Err(ReplyError::RpcMismatch { low: 2, high: 2 })),
            encoded(Err(ReplyError::AuthError(AuthStat::AuthTooweak))),
        ];
        let success = encoded(Ok(()));
        // A verifier with a body; an unknown verifier flavor; a CALL; cut short; with results.
        let words = |w: &[u32]| w.iter().flat_map(|v| v.to_be_bytes()).collect::<Vec<u8>>();
        replies.push(words(&[77, 1, 0, 1, 4, 0xdead_beef, 0]));
        replies.push(words(&[77, 1, 0, 99, 0, 0]));
        replies.push(words(&[77, 0, 0, 0, 0, 0]));
        replies.push(success[..20].to_vec());
        replies.push([success.clone(), words(&[42])].concat());
        for reply in replies {
            let bytes = Bytes::from(reply);
            let mut generated = Decoder::new(&bytes);
            let mut glance = Decoder::new(&bytes);
            assert_eq!(
                format!("{:?}", decode_plain_reply_header(&mut glance)),
                format!("{:?}", decode_reply_header(&mut generated)),
                "{bytes:?}"
            );
            assert_eq!(glance.offset(), generated.offset(), "{bytes:?}");
        }
    }

    #[test]
    fn a_success_reply_header_is_written_as_the_generated_encoder_writes_it() {
        for xid in [0, 5, u32::MAX] {
            let mut enc = Encoder::new();
            encode_reply_header(&mut enc, xid, Ok(())).unwrap();
            let mut generated = Encoder::new();
            RpcMsg {
                xid,
                body: RpcMsgBody::Reply(ReplyBody::MsgAccepted(AcceptedReply {
                    verf: none_verifier(),
                    reply_data: AcceptedReplyData::Success,
                })),
            }
            .encode(&mut generated)
            .unwrap();
            assert_eq!(enc.finish().into_bytes(), generated.finish().into_bytes());
        }
    }

    #[test]
    fn a_call_without_credentials_is_taken_at_a_glance_as_the_checks_take_it() {
        let words = |w: &[u32]| w.iter().flat_map(|v| v.to_be_bytes()).collect::<Vec<u8>>();
        let auth_sys = [&words(&[1, 20, 9, 1])[..], b"h\0\0\0", &words(&[0, 0, 0])].concat();
        let credentials = [
            words(&[0, 0, 0, 0]),
            words(&[0, 0, 1, 0]),
            words(&[0, 4, 1, 0, 0]),
            words(&[0, 0, 0, 4, 9]),
            [auth_sys, words(&[0, 0])].concat(),
            words(&[0, 0, 0]),
            words(&[99, 0, 0, 0]),
        ];
        let lists: [&[AuthFlavor]; 3] = [ALL, &[AuthFlavor::AuthSys], &[AuthFlavor::AuthNone]];
        for bytes in credentials.map(Bytes::from) {
            for flavors in lists {
                let mut glance = Decoder::new(&bytes);
                let mut checked = Decoder::new(&bytes);
                let checks = decode_credentials(&mut checked, flavors);
                if no_credentials(&mut glance, flavors) {
                    assert_eq!(checks, Ok(Auth::None), "{bytes:?} {flavors:?}");
                    assert_eq!(glance.offset(), checked.offset(), "{bytes:?}");
                } else {
                    assert_eq!(glance.offset(), 0, "{bytes:?}");
                    assert!(
                        checks != Ok(Auth::None) || checked.offset() != 16,
                        "the glance missed a plain call: {bytes:?} {flavors:?}"
                    );
                }
            }
        }
    }
}
