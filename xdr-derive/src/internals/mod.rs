//! Reading and checking derive input: [`ast`] (the parsed form), [`attr`] (the attributes),
//! [`check`] (one function per rule) and [`Ctxt`] (the error sink).

pub mod ast;
pub mod attr;
pub mod check;
mod ctxt;
pub mod symbol;

pub use ctxt::{Ctxt, Scope};
