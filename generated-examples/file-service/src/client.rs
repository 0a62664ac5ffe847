//! The client: the generated [`FilesV1Client`] with each `switch (files_status)` result turned
//! into a `Result`, and READs that size their Write chunk from their count.

use rpcrdma::rpc::{self, CallOptions, RegisteredBuffer};

use crate::files_v1::{FilesRead, FilesRemove};
use crate::proto::*;
use crate::FilesV1Client;

/// Why a call failed.
#[derive(Debug)]
pub enum Error {
    /// The call did not complete (transport, RPC refusal, undecodable reply).
    Rpc(rpc::Error),
    /// The server answered with a failure status.
    Status(FilesStatus),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Rpc(e) => write!(f, "RPC failed: {e}"),
            Error::Status(s) => write!(f, "the server answered {s}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<rpc::Error> for Error {
    fn from(e: rpc::Error) -> Error {
        Error::Rpc(e)
    }
}

impl From<FilesStatus> for Error {
    fn from(s: FilesStatus) -> Error {
        Error::Status(s)
    }
}

/// A client of the file service over any ONC RPC transport. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Files {
    client: FilesV1Client,
}

impl Files {
    /// A client sending its calls through `rpc` (for example from
    /// `rpcrdma::transport::connect`).
    pub fn new(rpc: rpc::Client) -> Files {
        Files {
            client: FilesV1Client::new(rpc),
        }
    }

    /// The generated client underneath.
    pub fn typed(&self) -> &FilesV1Client {
        &self.client
    }

    /// A buffer of `len` bytes in the connection's registered memory: WRITE data from it moves
    /// without a copy, and [`Files::read_into`] receives into it.
    pub fn buffer(&self, len: usize) -> RegisteredBuffer {
        self.client.rpc().buffer(len)
    }

    /// FILES_NULL.
    pub async fn null(&self) -> Result<(), Error> {
        Ok(self.client.files_null().await?)
    }

    /// FILES_LOOKUP: the handle and attributes of an existing file.
    pub async fn lookup(&self, args: &LookupArgs) -> Result<LookupOk, Error> {
        Ok(self
            .client
            .files_lookup(args.clone())
            .await?
            .into_result()?)
    }

    /// FILES_CREATE: a new, empty file.
    pub async fn create(&self, args: &LookupArgs) -> Result<LookupOk, Error> {
        Ok(self
            .client
            .files_create(args.clone())
            .await?
            .into_result()?)
    }

    /// FILES_GETATTR.
    pub async fn getattr(&self, handle: Fhandle) -> Result<Fattr, Error> {
        Ok(self.client.files_getattr(handle).await?.into_result()?)
    }

    /// FILES_READ, with a Write chunk of `args.count` bytes (capped at `FILES_MAXIO`) for the
    /// data: the transport's default size could be too small, or needlessly large.
    pub async fn read(&self, args: &ReadArgs) -> Result<ReadOk, Error> {
        let size = args.count.min(FILES_MAXIO) as usize;
        let options = CallOptions::new().reply_size(size);
        let res = self
            .client
            .rpc()
            .call_with::<FilesRead>(args, options)
            .await?;
        Ok(res.into_result()?)
    }

    /// FILES_READ of `buffer.len()` bytes (`args.count` is set from it) into `buffer`, a
    /// registered buffer from [`Files::buffer`]: the server writes the data straight into it,
    /// and the result's data is a view of it.
    pub async fn read_into(
        &self,
        args: &ReadArgs,
        buffer: RegisteredBuffer,
    ) -> Result<ReadOk, Error> {
        let args = ReadArgs {
            count: u32::try_from(buffer.len()).unwrap_or(u32::MAX),
            ..*args
        };
        let options = CallOptions::new().reply_buffer(buffer);
        let res = self
            .client
            .rpc()
            .call_with::<FilesRead>(&args, options)
            .await?;
        Ok(res.into_result()?)
    }

    /// FILES_WRITE. `args.data` from [`Files::buffer`] moves without a copy.
    pub async fn write(&self, args: &WriteArgs) -> Result<WriteOk, Error> {
        Ok(self.client.files_write(args.clone()).await?.into_result()?)
    }

    /// FILES_LIST: one page of the listing.
    pub async fn list(&self, args: &ListArgs) -> Result<ListOk, Error> {
        Ok(self.client.files_list(*args).await?.into_result()?)
    }

    /// FILES_REMOVE: how many were removed, or the status of the first that was not (those
    /// before it are removed).
    pub async fn remove(&self, args: &RemoveArgs) -> Result<u32, Error> {
        let res = self.client.rpc().call::<FilesRemove>(args).await?;
        match res.status {
            FilesStatus::FilesOk => Ok(res.removed),
            status => Err(Error::Status(status)),
        }
    }
}
