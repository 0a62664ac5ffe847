//! Version 2 extensions (seed 003 section 9), registered by the user without editing the
//! runtime.
//!
//! An extension is what one Standards Track document adds: header types, transport
//! properties, error codes and flags, written as an extension `.x` file compiled together
//! with `specs/common.x` and `specs/baseops.x`. "Each implementation is either aware of all
//! the protocol elements introduced by that feature or is aware of none of them" (section
//! 9): an [`Extension`] declares them all, advertises its properties in RDMA2_CONNPROP so the
//! peer can tell, and answers its header types. The core answers the types of extensions it
//! does not have with RDMA2_ERR_INVAL_HTYPE (section 5.2), ignores properties it does not
//! know (section 4.1), and passes error codes it does not know to the caller as
//! [`RdmaError::Other`](crate::rpc::RdmaError::Other).

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use super::header::Property;

/// A message of an extension's header type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionMessage {
    /// `rdma_htype`.
    pub htype: u32,
    /// The XID: the requester's, echoed in the answer.
    pub xid: u32,
    /// `rdma_flags`, with the extension's own flags (section 9.4).
    pub flags: u32,
    /// The bytes after the header prefix: the extension's XDR body.
    pub body: Bytes,
}

/// How an extension answers one of its messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtensionAnswer {
    /// A message of the same header type and XID, with RPCRDMA2_F_RESPONSE added to `flags`.
    Reply {
        /// The extension's flags for the answer.
        flags: u32,
        /// The answer's XDR body.
        body: Bytes,
    },
    /// RDMA2_ERROR with this code, with no body (section 9.3: "the existing RDMA_ERR2 header can
    /// be used to report the new error").
    Error(u32),
    /// No answer.
    Nothing,
}

/// One extension's protocol elements and behaviour.
pub trait Extension: Send + Sync + 'static {
    /// A name for logs.
    fn name(&self) -> &str;

    /// The header types it defines (section 9.1).
    fn header_types(&self) -> &[u32];

    /// The properties this side advertises for it in RDMA2_CONNPROP (section 9.2).
    fn properties(&self) -> Vec<Property> {
        Vec::new()
    }

    /// Checks the value of a property the peer advertised: `None` when the property is not
    /// this extension's; `Some(Err(why))` for a value that does not decode as its type (the
    /// receiver answers RDMA2_ERR_BAD_XDR, section 4.1).
    fn check_property(&self, property: &Property) -> Option<Result<(), String>> {
        let _ = property;
        None
    }

    /// Answers a message of one of its header types that the peer sent (not an answer to one
    /// of this side's).
    fn handle(&self, message: &ExtensionMessage) -> ExtensionAnswer;
}

/// The extensions an endpoint speaks; clones share them.
#[derive(Clone, Default)]
pub struct Extensions(Vec<Arc<dyn Extension>>);

impl Extensions {
    /// No extension.
    pub fn new() -> Extensions {
        Extensions::default()
    }

    /// Adds `extension`.
    pub fn with(mut self, extension: impl Extension) -> Extensions {
        self.0.push(Arc::new(extension));
        self
    }

    /// The extension that defines header type `htype`.
    pub fn for_type(&self, htype: u32) -> Option<&dyn Extension> {
        self.0
            .iter()
            .find(|e| e.header_types().contains(&htype))
            .map(|e| &**e)
    }

    /// Every extension's properties.
    pub fn properties(&self) -> Vec<Property> {
        self.0.iter().flat_map(|e| e.properties()).collect()
    }

    /// Checks a property against the extension that defines it, if any.
    pub fn check_property(&self, property: &Property) -> Result<(), String> {
        for e in &self.0 {
            if let Some(result) = e.check_property(property) {
                return result.map_err(|why| format!("{}: {why}", e.name()));
            }
        }
        Ok(())
    }

    /// True when no extension is registered.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|e| e.name()))
            .finish()
    }
}
