//! The NFSv4.1 server's protocol rules, called in process (no transport): sessions and the slot
//! reply cache (RFC 5661 section 2.10.6), COMPOUND's placement rules (section 2.6.3.1.1.1,
//! 18.46.3), opens and their stateids (sections 8.2, 9), and the file operations.

use bytes::Bytes;
use rpcrdma::rpc::{AuthSys, Client, Credentials, LocalTransport};
use rpcrdma_nfs4::nfs4::nfs4_program::nfs_v4::NfsV4Client;
use rpcrdma_nfs4::nfs4::*;
use rpcrdma_nfs4::server::{Nfs4Config, Nfs4Server};

/// A client of `server` as `uid`.
fn client(server: &Nfs4Server, uid: u32) -> NfsV4Client {
    let rpc = Client::new(LocalTransport::new(server.rpc_server()))
        .with_credentials(&Credentials::Sys(AuthSys::new("nfs4-test", uid, uid)))
        .expect("AUTH_SYS");
    NfsV4Client::new(rpc)
}

async fn call(nfs: &NfsV4Client, minorversion: u32, ops: Vec<NfsArgop4>) -> Compound4res {
    nfs.nfsproc4_compound(Compound4args {
        tag: Bytes::from_static(b"t"),
        minorversion,
        argarray: ops,
    })
    .await
    .expect("COMPOUND call")
}

fn channel() -> ChannelAttrs4 {
    ChannelAttrs4 {
        ca_headerpadsize: 0,
        ca_maxrequestsize: 1 << 20,
        ca_maxresponsesize: 1 << 20,
        ca_maxresponsesize_cached: 8192,
        ca_maxoperations: 16,
        ca_maxrequests: 4,
        ca_rdma_ird: vec![],
    }
}

/// A client with a session: its slot 0's next sequence id is tracked by `seq`.
struct Session {
    nfs: NfsV4Client,
    clientid: u64,
    sessionid: Sessionid4,
    seq: u32,
}

async fn session(server: &Nfs4Server, owner: &str, uid: u32) -> Session {
    let nfs = client(server, uid);
    let res = call(
        &nfs,
        1,
        vec![NfsArgop4::OpExchangeId(ExchangeId4args {
            eia_clientowner: ClientOwner4 {
                co_verifier: Verifier4(Bytes::from_static(&[1; 8])),
                co_ownerid: Bytes::copy_from_slice(owner.as_bytes()),
            },
            eia_flags: 0,
            eia_state_protect: StateProtect4A::Sp4None,
            eia_client_impl_id: vec![],
        })],
    )
    .await;
    let NfsResop4::OpExchangeId(ExchangeId4res::Nfs4Ok(eid)) = &res.resarray[0] else {
        panic!("EXCHANGE_ID: {res:?}");
    };
    assert_eq!(eid.eir_flags & EXCHGID4_FLAG_CONFIRMED_R, 0, "a new record");
    let res = call(
        &nfs,
        1,
        vec![NfsArgop4::OpCreateSession(CreateSession4args {
            csa_clientid: eid.eir_clientid,
            csa_sequence: eid.eir_sequenceid,
            csa_flags: CREATE_SESSION4_FLAG_CONN_BACK_CHAN,
            csa_fore_chan_attrs: channel(),
            csa_back_chan_attrs: channel(),
            csa_cb_program: 0x4000_0000,
            csa_sec_parms: vec![CallbackSecParms4::AuthNone],
        })],
    )
    .await;
    let NfsResop4::OpCreateSession(CreateSession4res::Nfs4Ok(cs)) = &res.resarray[0] else {
        panic!("CREATE_SESSION: {res:?}");
    };
    assert_eq!(
        cs.csr_flags & CREATE_SESSION4_FLAG_CONN_BACK_CHAN,
        0,
        "no backchannel in process"
    );
    assert_eq!(cs.csr_fore_chan_attrs.ca_maxrequests, 4);
    let mut s = Session {
        nfs,
        clientid: eid.eir_clientid,
        sessionid: cs.csr_sessionid.clone(),
        seq: 1,
    };
    // Section 18.51.3: before the first OPEN that is not a reclaim.
    s.ok(vec![NfsArgop4::OpReclaimComplete(ReclaimComplete4args {
        rca_one_fs: false,
    })])
    .await;
    s
}

fn sequence(s: &Session, seq: u32, cache: bool) -> NfsArgop4 {
    NfsArgop4::OpSequence(Sequence4args {
        sa_sessionid: s.sessionid.clone(),
        sa_sequenceid: seq,
        sa_slotid: 0,
        sa_highest_slotid: 0,
        sa_cachethis: cache,
    })
}

impl Session {
    /// SEQUENCE on slot 0 and `ops`.
    async fn run(&mut self, ops: Vec<NfsArgop4>) -> Compound4res {
        let mut all = vec![sequence(self, self.seq, false)];
        all.extend(ops);
        self.seq += 1;
        call(&self.nfs, 1, all).await
    }

    /// [`Session::run`], which must succeed: the results after SEQUENCE.
    async fn ok(&mut self, ops: Vec<NfsArgop4>) -> Vec<NfsResop4> {
        let res = self.run(ops).await;
        assert_eq!(res.status, Nfsstat4::Nfs4Ok, "{res:#?}");
        res.resarray.into_iter().skip(1).collect()
    }
}

fn name(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn no_attrs() -> Fattr4 {
    Fattr4 {
        attrmask: vec![],
        attr_vals: Bytes::new(),
    }
}

fn open(owner: &str, file: &str, access: u32, deny: u32, create: bool) -> NfsArgop4 {
    NfsArgop4::OpOpen(Open4args {
        seqid: 0,
        share_access: access,
        share_deny: deny,
        owner: StateOwner4 {
            clientid: 0,
            owner: name(owner),
        },
        openhow: if create {
            Openflag4::Open4Create(Createhow4::Unchecked4(no_attrs()))
        } else {
            Openflag4::Default {
                discriminant: Opentype4::Open4Nocreate,
            }
        },
        claim: OpenClaim4::ClaimNull(name(file)),
    })
}

fn opened(res: &NfsResop4) -> &Open4resok {
    match res {
        NfsResop4::OpOpen(Open4res::Nfs4Ok(ok)) => ok,
        other => panic!("OPEN: {other:?}"),
    }
}

fn status_of(res: &Compound4res) -> Nfsstat4 {
    res.status
}

#[tokio::test]
async fn compound_placement_rules() {
    let server = Nfs4Server::new(Nfs4Config::default());
    let nfs = client(&server, 0);
    // Section 16.2.3: a minor version the server does not do.
    let res = call(&nfs, 2, vec![NfsArgop4::OpPutrootfh]).await;
    assert_eq!(res.status, Nfsstat4::Nfs4errMinorVersMismatch);
    assert!(res.resarray.is_empty());
    // An empty COMPOUND is fine.
    assert_eq!(call(&nfs, 1, vec![]).await.status, Nfsstat4::Nfs4Ok);
    // Section 2.6.3.1.1.1: no SEQUENCE, not a session-less operation.
    let res = call(&nfs, 1, vec![NfsArgop4::OpPutrootfh]).await;
    assert_eq!(res.status, Nfsstat4::Nfs4errOpNotInSession);
    // A session-less operation must be alone.
    let res = call(
        &nfs,
        1,
        vec![
            NfsArgop4::OpDestroyClientid(DestroyClientid4args { dca_clientid: 9 }),
            NfsArgop4::OpPutrootfh,
        ],
    )
    .await;
    assert_eq!(res.status, Nfsstat4::Nfs4errNotOnlyOp);

    let mut s = session(&server, "placement", 0).await;
    // Section 18.46.3: SEQUENCE anywhere but first.
    let seq = sequence(&s, 99, false);
    let res = s.run(vec![NfsArgop4::OpPutrootfh, seq]).await;
    assert_eq!(res.status, Nfsstat4::Nfs4errSequencePos);
    assert_eq!(res.resarray.len(), 3);
    // More operations than the session's ca_maxoperations (16).
    let many = vec![NfsArgop4::OpPutrootfh; 16];
    let res = s.run(many).await;
    assert_eq!(res.status, Nfsstat4::Nfs4errTooManyOps);
    // A SEQUENCE that fails does not use its slot: the same sequence id goes again.
    s.seq -= 1;
    // Unsupported and NFSv4.0-only operations: NOTSUPP; processing stops there.
    let res = s
        .run(vec![
            NfsArgop4::OpPutrootfh,
            NfsArgop4::OpRenew(Renew4args { clientid: 1 }),
            NfsArgop4::OpGetfh,
        ])
        .await;
    assert_eq!(res.status, Nfsstat4::Nfs4errNotsupp);
    assert_eq!(res.resarray.len(), 3);
}

#[tokio::test]
async fn the_slot_reply_cache_answers_retries_and_refuses_misordered_requests() {
    let server = Nfs4Server::new(Nfs4Config::default());
    let mut s = session(&server, "slots", 0).await;
    // Section 2.10.6.1.3: a retry of a cached request gets the very reply, without running
    // the operations again (the CREATE would fail with EXIST if it ran twice).
    let mkdir = |n: &str| {
        NfsArgop4::OpCreate(Create4args {
            objtype: Createtype4::Nf4dir,
            objname: name(n),
            createattrs: no_attrs(),
        })
    };
    let ops = vec![sequence(&s, 2, true), NfsArgop4::OpPutrootfh, mkdir("d")];
    let first = call(&s.nfs, 1, ops.clone()).await;
    assert_eq!(first.status, Nfsstat4::Nfs4Ok, "{first:?}");
    let again = call(&s.nfs, 1, ops).await;
    assert_eq!(again, first);
    // Not cached: NFS4ERR_RETRY_UNCACHED_REP.
    let ops = vec![sequence(&s, 3, false), NfsArgop4::OpPutrootfh, mkdir("e")];
    assert_eq!(call(&s.nfs, 1, ops.clone()).await.status, Nfsstat4::Nfs4Ok);
    let res = call(&s.nfs, 1, ops).await;
    assert_eq!(res.status, Nfsstat4::Nfs4errRetryUncachedRep);
    // Skipping a sequence id, or going back two: misordered.
    for seq in [5, 2] {
        let res = call(&s.nfs, 1, vec![sequence(&s, seq, false)]).await;
        assert_eq!(res.status, Nfsstat4::Nfs4errSeqMisordered, "seq {seq}");
    }
    // A slot beyond the table, a session that does not exist.
    let mut bad_slot = sequence(&s, 1, false);
    if let NfsArgop4::OpSequence(a) = &mut bad_slot {
        a.sa_slotid = 4;
    }
    assert_eq!(
        call(&s.nfs, 1, vec![bad_slot]).await.status,
        Nfsstat4::Nfs4errBadslot
    );
    let mut bad_session = sequence(&s, 4, false);
    if let NfsArgop4::OpSequence(a) = &mut bad_session {
        a.sa_sessionid = Sessionid4(Bytes::from_static(&[7; 16]));
    }
    assert_eq!(
        call(&s.nfs, 1, vec![bad_session]).await.status,
        Nfsstat4::Nfs4errBadsession
    );
    s.seq = 4;
    assert!(s.ok(vec![NfsArgop4::OpPutrootfh]).await.len() == 1);

    // DESTROY_CLIENTID while a session lives: busy; after DESTROY_SESSION it goes.
    let clientid = s.clientid;
    let destroy = NfsArgop4::OpDestroyClientid(DestroyClientid4args {
        dca_clientid: clientid,
    });
    assert_eq!(
        call(&s.nfs, 1, vec![destroy.clone()]).await.status,
        Nfsstat4::Nfs4errClientidBusy
    );
    let res = call(
        &s.nfs,
        1,
        vec![NfsArgop4::OpDestroySession(DestroySession4args {
            dsa_sessionid: s.sessionid.clone(),
        })],
    )
    .await;
    assert_eq!(res.status, Nfsstat4::Nfs4Ok);
    assert_eq!(
        call(&s.nfs, 1, vec![destroy]).await.status,
        Nfsstat4::Nfs4Ok
    );
    assert_eq!(server.state_counts(), (0, 0, 0));
}

#[tokio::test]
async fn write_read_attributes_readdir_rename_remove() {
    let server = Nfs4Server::new(Nfs4Config::default());
    let mut s = session(&server, "files", 1000).await;
    let res = s
        .ok(vec![
            NfsArgop4::OpPutrootfh,
            open("o", "f", OPEN4_SHARE_ACCESS_BOTH, 0, true),
            NfsArgop4::OpGetfh,
        ])
        .await;
    let ok = opened(&res[1]).clone();
    assert_eq!(ok.rflags & OPEN4_RESULT_CONFIRM, 0, "never in NFSv4.1");
    let NfsResop4::OpGetfh(Getfh4res::Nfs4Ok(fh)) = &res[2] else {
        panic!("{res:?}")
    };
    let fh = fh.object.clone();
    let data = Bytes::from((0..300_000u32).map(|i| (i % 251) as u8).collect::<Vec<_>>());
    let res = s
        .ok(vec![
            NfsArgop4::OpPutfh(Putfh4args { object: fh.clone() }),
            NfsArgop4::OpWrite(Write4args {
                stateid: ok.stateid.clone(),
                offset: 100,
                stable: StableHow4::Unstable4,
                data: data.clone(),
            }),
            NfsArgop4::OpRead(Read4args {
                stateid: ok.stateid.clone(),
                offset: 100,
                count: 1 << 20,
            }),
            NfsArgop4::OpGetattr(Getattr4args {
                attr_request: vec![1 << FATTR4_SIZE | 1 << FATTR4_TYPE],
            }),
        ])
        .await;
    let NfsResop4::OpWrite(Write4res::Nfs4Ok(w)) = &res[1] else {
        panic!("{res:?}")
    };
    assert_eq!(w.count, 300_000);
    assert_eq!(w.committed, StableHow4::FileSync4);
    let NfsResop4::OpRead(Read4res::Nfs4Ok(r)) = &res[2] else {
        panic!("{res:?}")
    };
    assert!(r.eof);
    assert_eq!(r.data, data);
    let NfsResop4::OpGetattr(Getattr4res::Nfs4Ok(g)) = &res[3] else {
        panic!("{res:?}")
    };
    // type (4 bytes) then size (8): NF4REG, 300,100.
    assert_eq!(
        g.obj_attributes.attrmask,
        vec![1 << FATTR4_SIZE | 1 << FATTR4_TYPE]
    );
    let vals = &g.obj_attributes.attr_vals;
    assert_eq!(&vals[..4], &1u32.to_be_bytes());
    assert_eq!(&vals[4..12], &300_100u64.to_be_bytes());

    // CLOSE; the stateid is then unknown.
    s.ok(vec![
        NfsArgop4::OpPutfh(Putfh4args { object: fh.clone() }),
        NfsArgop4::OpClose(Close4args {
            seqid: 0,
            open_stateid: ok.stateid.clone(),
        }),
    ])
    .await;
    let res = s
        .run(vec![
            NfsArgop4::OpPutfh(Putfh4args { object: fh.clone() }),
            NfsArgop4::OpRead(Read4args {
                stateid: ok.stateid.clone(),
                offset: 0,
                count: 10,
            }),
        ])
        .await;
    assert_eq!(status_of(&res), Nfsstat4::Nfs4errBadStateid);

    // A directory with a symlink; READDIR lists both names with their types.
    let res = s
        .ok(vec![
            NfsArgop4::OpPutrootfh,
            NfsArgop4::OpCreate(Create4args {
                objtype: Createtype4::Nf4dir,
                objname: name("dir"),
                createattrs: no_attrs(),
            }),
            NfsArgop4::OpCreate(Create4args {
                objtype: Createtype4::Nf4lnk(name("../f")),
                objname: name("link"),
                createattrs: no_attrs(),
            }),
            NfsArgop4::OpReadlink,
            // LOOKUPP of a symbolic link: NFS4ERR_SYMLINK (section 18.14.3) would stop here.
            NfsArgop4::OpPutrootfh,
            NfsArgop4::OpReaddir(Readdir4args {
                cookie: 0,
                cookieverf: Verifier4(Bytes::from_static(&[0; 8])),
                dircount: 4096,
                maxcount: 8192,
                attr_request: vec![1 << FATTR4_TYPE],
            }),
        ])
        .await;
    let NfsResop4::OpReadlink(Readlink4res::Nfs4Ok(l)) = &res[3] else {
        panic!("{res:?}")
    };
    assert_eq!(l.link, name("../f"));
    let NfsResop4::OpReaddir(Readdir4res::Nfs4Ok(d)) = &res[5] else {
        panic!("{res:?}")
    };
    assert!(d.reply.eof);
    let names: Vec<&[u8]> = d.reply.entries.iter().map(|e| &e.name[..]).collect();
    assert_eq!(names, vec![&b"f"[..], b"dir"]);

    // LOOKUPP at the root; RENAME; REMOVE; the removed file's handle is stale.
    let res = s
        .run(vec![NfsArgop4::OpPutrootfh, NfsArgop4::OpLookupp])
        .await;
    assert_eq!(res.status, Nfsstat4::Nfs4errNoent);
    let res = s
        .ok(vec![
            NfsArgop4::OpPutrootfh,
            NfsArgop4::OpSavefh,
            NfsArgop4::OpRename(Rename4args {
                oldname: name("f"),
                newname: name("g"),
            }),
            NfsArgop4::OpRemove(Remove4args { target: name("g") }),
        ])
        .await;
    let NfsResop4::OpRemove(Remove4res::Nfs4Ok(rm)) = &res[3] else {
        panic!("{res:?}")
    };
    assert!(rm.cinfo.atomic);
    let res = s
        .run(vec![NfsArgop4::OpPutfh(Putfh4args { object: fh })])
        .await;
    assert_eq!(res.status, Nfsstat4::Nfs4errStale);
    // Names NFSv4 refuses (section 18.13.3).
    for bad in [".", "..", "a/b"] {
        let res = s
            .run(vec![
                NfsArgop4::OpPutrootfh,
                NfsArgop4::OpLookup(Lookup4args { objname: name(bad) }),
            ])
            .await;
        assert_eq!(res.status, Nfsstat4::Nfs4errBadname, "{bad}");
    }
}

#[tokio::test]
async fn stateids_share_reservations_and_open_modes() {
    let server = Nfs4Server::new(Nfs4Config::default());
    let mut a = session(&server, "a", 0).await;
    let mut b = session(&server, "b", 0).await;
    let res = a
        .ok(vec![
            NfsArgop4::OpPutrootfh,
            open(
                "owner-a",
                "f",
                OPEN4_SHARE_ACCESS_READ,
                OPEN4_SHARE_DENY_WRITE,
                true,
            ),
        ])
        .await;
    let ra = opened(&res[1]).clone();
    // Section 9.7: b may not open for writing what a opened denying writes.
    let res = b
        .run(vec![
            NfsArgop4::OpPutrootfh,
            open("owner-b", "f", OPEN4_SHARE_ACCESS_WRITE, 0, false),
        ])
        .await;
    assert_eq!(res.status, Nfsstat4::Nfs4errShareDenied);
    // a writing with a read-only open: NFS4ERR_OPENMODE.
    let res = a
        .run(vec![
            NfsArgop4::OpPutrootfh,
            NfsArgop4::OpLookup(Lookup4args { objname: name("f") }),
            NfsArgop4::OpWrite(Write4args {
                stateid: ra.stateid.clone(),
                offset: 0,
                stable: StableHow4::FileSync4,
                data: name("x"),
            }),
        ])
        .await;
    assert_eq!(res.status, Nfsstat4::Nfs4errOpenmode);
    // b using a's stateid: not b's (section 8.2.4).
    let res = b
        .run(vec![
            NfsArgop4::OpPutrootfh,
            NfsArgop4::OpLookup(Lookup4args { objname: name("f") }),
            NfsArgop4::OpRead(Read4args {
                stateid: ra.stateid.clone(),
                offset: 0,
                count: 1,
            }),
        ])
        .await;
    assert_eq!(res.status, Nfsstat4::Nfs4errBadStateid);
    // An anonymous write (stateid all zeros) is refused under a's deny.
    let res = b
        .run(vec![
            NfsArgop4::OpPutrootfh,
            NfsArgop4::OpLookup(Lookup4args { objname: name("f") }),
            NfsArgop4::OpWrite(Write4args {
                stateid: Stateid4 {
                    seqid: 0,
                    other: Bytes::from_static(&[0; 12]),
                },
                offset: 0,
                stable: StableHow4::FileSync4,
                data: name("x"),
            }),
        ])
        .await;
    assert_eq!(res.status, Nfsstat4::Nfs4errLocked);
    // a upgrades to read-write: the seqid moves, the old one is OLD_STATEID.
    let res = a
        .ok(vec![
            NfsArgop4::OpPutrootfh,
            open("owner-a", "f", OPEN4_SHARE_ACCESS_BOTH, 0, false),
        ])
        .await;
    let rb = opened(&res[1]).clone();
    assert_eq!(rb.stateid.other, ra.stateid.other);
    assert_eq!(rb.stateid.seqid, ra.stateid.seqid + 1);
    let res = a
        .run(vec![
            NfsArgop4::OpPutrootfh,
            NfsArgop4::OpLookup(Lookup4args { objname: name("f") }),
            NfsArgop4::OpRead(Read4args {
                stateid: ra.stateid.clone(),
                offset: 0,
                count: 1,
            }),
        ])
        .await;
    assert_eq!(res.status, Nfsstat4::Nfs4errOldStateid);
    // The current stateid (seqid 1, other zeros) stands for the OPEN's in the same COMPOUND.
    let current = Stateid4 {
        seqid: 1,
        other: Bytes::from_static(&[0; 12]),
    };
    let res = a
        .ok(vec![
            NfsArgop4::OpPutrootfh,
            open("owner-a", "f", OPEN4_SHARE_ACCESS_BOTH, 0, false),
            NfsArgop4::OpWrite(Write4args {
                stateid: current.clone(),
                offset: 0,
                stable: StableHow4::FileSync4,
                data: name("abc"),
            }),
            NfsArgop4::OpClose(Close4args {
                seqid: 0,
                open_stateid: current,
            }),
        ])
        .await;
    assert!(matches!(res[2], NfsResop4::OpWrite(Write4res::Nfs4Ok(_))));
    // TEST_STATEID: the closed open is gone.
    let res = a
        .ok(vec![NfsArgop4::OpTestStateid(TestStateid4args {
            ts_stateids: vec![rb.stateid.clone()],
        })])
        .await;
    let NfsResop4::OpTestStateid(TestStateid4res::Nfs4Ok(t)) = &res[0] else {
        panic!("{res:?}")
    };
    assert_eq!(t.tsr_status_codes, vec![Nfsstat4::Nfs4errBadStateid]);
}

#[tokio::test]
async fn a_restarted_client_replaces_its_old_record_and_state() {
    let server = Nfs4Server::new(Nfs4Config::default());
    let mut a = session(&server, "same-owner", 0).await;
    a.ok(vec![
        NfsArgop4::OpPutrootfh,
        open("o", "f", OPEN4_SHARE_ACCESS_READ, 0, true),
    ])
    .await;
    assert_eq!(server.state_counts(), (1, 1, 1));
    // The same owner with another verifier (a restarted client) gets a new record; when its
    // CREATE_SESSION confirms it, the old record, session and open go (section 18.35.4).
    let nfs = client(&server, 0);
    let res = call(
        &nfs,
        1,
        vec![NfsArgop4::OpExchangeId(ExchangeId4args {
            eia_clientowner: ClientOwner4 {
                co_verifier: Verifier4(Bytes::from_static(&[2; 8])),
                co_ownerid: name("same-owner"),
            },
            eia_flags: 0,
            eia_state_protect: StateProtect4A::Sp4None,
            eia_client_impl_id: vec![],
        })],
    )
    .await;
    let NfsResop4::OpExchangeId(ExchangeId4res::Nfs4Ok(eid)) = &res.resarray[0] else {
        panic!("{res:?}")
    };
    assert_ne!(eid.eir_clientid, a.clientid);
    let res = call(
        &nfs,
        1,
        vec![NfsArgop4::OpCreateSession(CreateSession4args {
            csa_clientid: eid.eir_clientid,
            csa_sequence: eid.eir_sequenceid,
            csa_flags: 0,
            csa_fore_chan_attrs: channel(),
            csa_back_chan_attrs: channel(),
            csa_cb_program: 0x4000_0000,
            csa_sec_parms: vec![CallbackSecParms4::AuthNone],
        })],
    )
    .await;
    assert_eq!(res.status, Nfsstat4::Nfs4Ok);
    assert_eq!(server.state_counts(), (1, 1, 0));
    let res = a.run(vec![NfsArgop4::OpPutrootfh]).await;
    assert_eq!(res.status, Nfsstat4::Nfs4errBadsession);
}

#[tokio::test]
async fn a_wanted_delegation_without_a_backchannel_says_why_not() {
    let server = Nfs4Server::new(Nfs4Config::default());
    let mut s = session(&server, "want", 0).await;
    let res = s
        .ok(vec![
            NfsArgop4::OpPutrootfh,
            open(
                "o",
                "f",
                OPEN4_SHARE_ACCESS_READ | OPEN4_SHARE_ACCESS_WANT_READ_DELEG,
                0,
                true,
            ),
        ])
        .await;
    // Section 18.16.3: a client that said what it wanted hears why it did not get it.
    assert_eq!(
        opened(&res[1]).delegation,
        OpenDelegation4::OpenDelegateNoneExt(OpenNoneDelegation4::Wnd4Resource(false))
    );
    let mut enc = rpcrdma::xdr::Encoder::new();
    rpcrdma::xdr::Encode::encode(&res[1], &mut enc).expect("the result encodes");
}

fn lock_new_owner(
    open: &Stateid4,
    owner: &str,
    write: bool,
    offset: u64,
    length: u64,
) -> NfsArgop4 {
    NfsArgop4::OpLock(Lock4args {
        locktype: if write {
            NfsLockType4::WriteLt
        } else {
            NfsLockType4::ReadLt
        },
        reclaim: false,
        offset,
        length,
        locker: Locker4::True(OpenToLockOwner4 {
            open_seqid: 0,
            open_stateid: open.clone(),
            lock_seqid: 0,
            lock_owner: StateOwner4 {
                clientid: 0,
                owner: name(owner),
            },
        }),
    })
}

#[tokio::test]
async fn byte_range_locks_conflict_between_owners_and_hold_the_open() {
    let server = Nfs4Server::new(Nfs4Config::default());
    let mut a = session(&server, "locker-a", 0).await;
    let mut b = session(&server, "locker-b", 0).await;
    let lookup = || NfsArgop4::OpLookup(Lookup4args { objname: name("f") });
    let res = a
        .ok(vec![
            NfsArgop4::OpPutrootfh,
            open("oa", "f", OPEN4_SHARE_ACCESS_BOTH, 0, true),
            lock_new_owner(
                &Stateid4 {
                    seqid: 1,
                    other: Bytes::from_static(&[0; 12]),
                },
                "la",
                true,
                0,
                100,
            ),
        ])
        .await;
    let open_a = opened(&res[1]).stateid.clone();
    let NfsResop4::OpLock(Lock4res::Nfs4Ok(la)) = &res[2] else {
        panic!("{res:?}")
    };
    let lock_a = la.lock_stateid.clone();
    let res = b
        .ok(vec![
            NfsArgop4::OpPutrootfh,
            open("ob", "f", OPEN4_SHARE_ACCESS_READ, 0, false),
        ])
        .await;
    let open_b = opened(&res[1]).stateid.clone();
    // LOCKT and LOCK over a's write lock: denied, naming a's lock-owner and range.
    let res = b
        .run(vec![
            NfsArgop4::OpPutrootfh,
            lookup(),
            NfsArgop4::OpLockt(Lockt4args {
                locktype: NfsLockType4::ReadLt,
                offset: 50,
                length: 10,
                owner: StateOwner4 {
                    clientid: 0,
                    owner: name("lb"),
                },
            }),
        ])
        .await;
    assert_eq!(res.status, Nfsstat4::Nfs4errDenied);
    let NfsResop4::OpLockt(Lockt4res::Nfs4errDenied(d)) = &res.resarray[3] else {
        panic!("{res:?}")
    };
    assert_eq!(
        (d.offset, d.length, d.owner.owner.clone()),
        (0, 100, name("la"))
    );
    let res = b
        .run(vec![
            NfsArgop4::OpPutrootfh,
            lookup(),
            lock_new_owner(&open_b, "lb", false, 99, 1),
        ])
        .await;
    assert_eq!(res.status, Nfsstat4::Nfs4errDenied);
    // Past a's range: granted. A write lock under b's read-only open: NFS4ERR_OPENMODE.
    b.ok(vec![
        NfsArgop4::OpPutrootfh,
        lookup(),
        lock_new_owner(&open_b, "lb", false, 100, u64::MAX),
    ])
    .await;
    let res = b
        .run(vec![
            NfsArgop4::OpPutrootfh,
            lookup(),
            lock_new_owner(&open_b, "lb2", true, 500, 1),
        ])
        .await;
    assert_eq!(res.status, Nfsstat4::Nfs4errOpenmode);
    // a cannot close its open under a held lock; after LOCKU it can.
    let close_a = |stateid: &Stateid4| {
        vec![
            NfsArgop4::OpPutrootfh,
            lookup(),
            NfsArgop4::OpClose(Close4args {
                seqid: 0,
                open_stateid: stateid.clone(),
            }),
        ]
    };
    assert_eq!(
        a.run(close_a(&open_a)).await.status,
        Nfsstat4::Nfs4errLocksHeld
    );
    a.ok(vec![
        NfsArgop4::OpPutrootfh,
        lookup(),
        NfsArgop4::OpLocku(Locku4args {
            locktype: NfsLockType4::WriteLt,
            seqid: 0,
            lock_stateid: lock_a,
            offset: 0,
            length: u64::MAX,
        }),
    ])
    .await;
    a.ok(close_a(&open_a)).await;
    // With a's lock gone, b's LOCKT of those bytes is granted.
    b.ok(vec![
        NfsArgop4::OpPutrootfh,
        lookup(),
        NfsArgop4::OpLockt(Lockt4args {
            locktype: NfsLockType4::WriteLt,
            offset: 0,
            length: 100,
            owner: StateOwner4 {
                clientid: 0,
                owner: name("lb3"),
            },
        }),
    ])
    .await;
}

#[tokio::test]
async fn what_a_peer_can_make_the_server_hold_is_bounded() {
    let server = Nfs4Server::new(Nfs4Config {
        max_clients: 2,
        max_sessions_per_client: 1,
        max_stateids_per_client: 2,
        ..Nfs4Config::default()
    });
    let mut a = session(&server, "bounded-a", 0).await;
    let _b = session(&server, "bounded-b", 0).await;
    // A third client record: the server is full (no record is long gone).
    let nfs = client(&server, 0);
    let res = call(
        &nfs,
        1,
        vec![NfsArgop4::OpExchangeId(ExchangeId4args {
            eia_clientowner: ClientOwner4 {
                co_verifier: Verifier4(Bytes::from_static(&[1; 8])),
                co_ownerid: name("bounded-c"),
            },
            eia_flags: 0,
            eia_state_protect: StateProtect4A::Sp4None,
            eia_client_impl_id: vec![],
        })],
    )
    .await;
    assert_eq!(res.status, Nfsstat4::Nfs4errDelay);
    // A second session of a: refused.
    let res = call(
        &a.nfs,
        1,
        vec![NfsArgop4::OpCreateSession(CreateSession4args {
            csa_clientid: a.clientid,
            csa_sequence: 2,
            csa_flags: 0,
            csa_fore_chan_attrs: channel(),
            csa_back_chan_attrs: channel(),
            csa_cb_program: 0x4000_0000,
            csa_sec_parms: vec![CallbackSecParms4::AuthNone],
        })],
    )
    .await;
    assert_eq!(res.status, Nfsstat4::Nfs4errDelay);
    // Two opens, then no more stateids for a.
    for f in ["f1", "f2"] {
        a.ok(vec![
            NfsArgop4::OpPutrootfh,
            open("o", f, OPEN4_SHARE_ACCESS_READ, 0, true),
        ])
        .await;
    }
    let res = a
        .run(vec![
            NfsArgop4::OpPutrootfh,
            open("o", "f3", OPEN4_SHARE_ACCESS_READ, 0, true),
        ])
        .await;
    assert_eq!(res.status, Nfsstat4::Nfs4errServerfault);
    assert_eq!(server.state_counts(), (2, 2, 2));
}

#[tokio::test]
async fn an_open_file_outlives_its_name_until_closed() {
    let server = Nfs4Server::new(Nfs4Config::default());
    let mut s = session(&server, "unlinker", 0).await;
    let res = s
        .ok(vec![
            NfsArgop4::OpPutrootfh,
            open("o", "f", OPEN4_SHARE_ACCESS_BOTH, 0, true),
            NfsArgop4::OpGetfh,
            NfsArgop4::OpWrite(Write4args {
                stateid: Stateid4 {
                    seqid: 1,
                    other: Bytes::from_static(&[0; 12]),
                },
                offset: 0,
                stable: StableHow4::FileSync4,
                data: name("still here"),
            }),
            NfsArgop4::OpPutrootfh,
            NfsArgop4::OpRemove(Remove4args { target: name("f") }),
        ])
        .await;
    let stateid = opened(&res[1]).stateid.clone();
    let NfsResop4::OpGetfh(Getfh4res::Nfs4Ok(fh)) = &res[2] else {
        panic!("{res:?}")
    };
    let fh = fh.object.clone();
    let res = s
        .ok(vec![
            NfsArgop4::OpPutfh(Putfh4args { object: fh.clone() }),
            NfsArgop4::OpRead(Read4args {
                stateid: stateid.clone(),
                offset: 0,
                count: 100,
            }),
            NfsArgop4::OpClose(Close4args {
                seqid: 0,
                open_stateid: stateid,
            }),
        ])
        .await;
    let NfsResop4::OpRead(Read4res::Nfs4Ok(r)) = &res[1] else {
        panic!("{res:?}")
    };
    assert_eq!(r.data, name("still here"));
    let res = s
        .run(vec![NfsArgop4::OpPutfh(Putfh4args { object: fh })])
        .await;
    assert_eq!(res.status, Nfsstat4::Nfs4errStale, "gone once closed");
    assert_eq!(server.used_bytes(), 0);
}

/// COMPOUND with arguments encoded by hand, to send what `nfs_argop4` cannot hold.
struct RawCompound;

/// Encoded COMPOUND4args.
struct RawArgs(Bytes);

impl rpcrdma::xdr::Encode for RawArgs {
    fn encode(&self, enc: &mut rpcrdma::xdr::Encoder) -> rpcrdma::xdr::Result<()> {
        enc.put_opaque_body(&self.0);
        Ok(())
    }
}

impl rpcrdma::xdr::Decode for RawArgs {
    fn decode(dec: &mut rpcrdma::xdr::Decoder<'_>) -> rpcrdma::xdr::Result<Self> {
        // Only sent, never received here.
        dec.skip(dec.remaining())?;
        Ok(RawArgs(Bytes::new()))
    }
}

impl rpcrdma::xdr::Procedure for RawCompound {
    const PROGRAM: u32 = 100003;
    const VERSION: u32 = 4;
    const PROCEDURE: u32 = 1;
    const NAME: &'static str = "COMPOUND";
    type Args = RawArgs;
    type Result = Compound4res;
}

#[tokio::test]
async fn an_operation_number_the_server_does_not_know_is_op_illegal() {
    use rpcrdma::xdr::Encode;
    let server = Nfs4Server::new(Nfs4Config::default());
    let mut s = session(&server, "illegal", 0).await;
    // SEQUENCE, PUTROOTFH, then operation 9999 and bytes nothing can parse.
    let mut enc = rpcrdma::xdr::Encoder::new();
    Compound4args {
        tag: Bytes::from_static(b"t"),
        minorversion: 1,
        argarray: vec![sequence(&s, s.seq, false), NfsArgop4::OpPutrootfh],
    }
    .encode(&mut enc)
    .unwrap();
    let mut bytes = enc.finish().to_bytes().to_vec();
    // The array's count (after the tag's 8 bytes and the minor version) says 3.
    bytes[12..16].copy_from_slice(&3u32.to_be_bytes());
    bytes.extend_from_slice(&9999u32.to_be_bytes());
    bytes.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    let res = s
        .nfs
        .rpc()
        .call::<RawCompound>(&RawArgs(Bytes::from(bytes)))
        .await
        .expect("a COMPOUND reply, not GARBAGE_ARGS");
    s.seq += 1;
    // RFC 5661 section 15.2: the operations before it ran; it is answered OP_ILLEGAL.
    assert_eq!(res.status, Nfsstat4::Nfs4errOpIllegal, "{res:#?}");
    assert_eq!(res.resarray.len(), 3);
    assert!(matches!(res.resarray[1], NfsResop4::OpPutrootfh(_)));
    assert!(matches!(
        res.resarray[2],
        NfsResop4::OpIllegal(Illegal4res {
            status: Nfsstat4::Nfs4errOpIllegal
        })
    ));
    // The session goes on.
    s.ok(vec![NfsArgop4::OpPutrootfh]).await;
}
