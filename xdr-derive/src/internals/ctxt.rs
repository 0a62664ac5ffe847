//! Collects every error found while reading a derive input, so that one compile reports
//! them all.

use std::cell::RefCell;
use std::fmt::Display;

use quote::ToTokens;

/// Which derive is reading the input.
///
/// Both derives read the same `#[xdr(..)]` attributes, and users write
/// `#[derive(Xdr, DdpEligible)]` together; each error is reported by exactly one of them so
/// it shows once. `DdpEligible` requires the type to implement `Encode`, so the general rules
/// are always checked by `Xdr`.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Scope {
    /// `#[derive(Xdr)]`: everything but the DDP-eligibility rules.
    Xdr,
    /// `#[derive(DdpEligible)]`: only the DDP-eligibility rules.
    Ddp,
}

/// The error sink of one derive invocation.
///
/// It panics if dropped without [`Ctxt::check`], so no error can be silently lost.
pub struct Ctxt {
    scope: Scope,
    errors: RefCell<Option<Vec<syn::Error>>>,
}

impl Ctxt {
    /// An empty context for the derive `scope`.
    pub fn new(scope: Scope) -> Self {
        Ctxt {
            scope,
            errors: RefCell::new(Some(Vec::new())),
        }
    }

    /// Records an error of the general rules spanning the tokens of `obj`.
    pub fn error_spanned_by<A: ToTokens, T: Display>(&self, obj: A, msg: T) {
        if self.scope == Scope::Xdr {
            self.push(syn::Error::new_spanned(obj.into_token_stream(), msg));
        }
    }

    /// Records an error of the DDP-eligibility rules spanning the tokens of `obj`.
    pub fn ddp_error_spanned_by<A: ToTokens, T: Display>(&self, obj: A, msg: T) {
        if self.scope == Scope::Ddp {
            self.push(syn::Error::new_spanned(obj.into_token_stream(), msg));
        }
    }

    /// Records a parse error from `syn` (a general rule).
    pub fn syn_error(&self, err: syn::Error) {
        if self.scope == Scope::Xdr {
            self.push(err);
        }
    }

    fn push(&self, err: syn::Error) {
        self.errors
            .borrow_mut()
            .as_mut()
            .expect("Ctxt used after check")
            .push(err);
    }

    /// Ends collection: every recorded error combined into one, if there were any.
    pub fn check(self) -> syn::Result<()> {
        let mut errors = self.errors.take().expect("Ctxt checked twice").into_iter();
        let Some(mut combined) = errors.next() else {
            return Ok(());
        };
        for rest in errors {
            combined.combine(rest);
        }
        Err(combined)
    }
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        if !std::thread::panicking() && self.errors.borrow().is_some() {
            panic!("forgot to check for errors");
        }
    }
}
