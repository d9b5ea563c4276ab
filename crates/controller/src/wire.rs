//! Remoting frames over tokio sockets: read one `RemotingCommand` (the repository's frame
//! codec, `protocol::frame`, with its length limit) and write one. Used by the controller's
//! server, its Raft client and its role-change notifications.

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::constants::MAX_FRAME_LEN;
use crate::protocol::frame::split_frame;
use crate::protocol::RemotingCommand;

/// Reads until one whole frame is buffered and decodes it. `Ok(None)`: the peer closed cleanly
/// between frames. A bad length or an undecodable frame is an `InvalidData` error.
pub async fn read_command<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut BytesMut,
) -> std::io::Result<Option<RemotingCommand>> {
    loop {
        let frame = split_frame(buf, MAX_FRAME_LEN)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
        if let Some(frame) = frame {
            return RemotingCommand::decode(frame)
                .map(Some)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()));
        }
        buf.reserve(64 * 1024);
        if r.read_buf(buf).await? == 0 {
            if buf.is_empty() {
                return Ok(None);
            }
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
    }
}

pub async fn write_command<W: AsyncWrite + Unpin>(
    w: &mut W,
    cmd: &RemotingCommand,
) -> std::io::Result<()> {
    let mut out = BytesMut::new();
    cmd.encode(&mut out)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
    w.write_all(&out).await
}
