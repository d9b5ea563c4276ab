//! Splits the TCP byte stream into frames (Java's `NettyDecoder`).
//!
//! A frame is a big-endian int `length` followed by `length` bytes (header-length word, header,
//! body). Called by the remoting layer's read loop with its accumulation buffer. Invariant: the
//! length is checked against the limit before any byte is buffered for it, so a hostile prefix
//! can neither grow the buffer nor panic the reader.

use bytes::{Buf, Bytes, BytesMut};

use super::ProtocolError;

/// Bytes of the length prefix.
pub const LENGTH_PREFIX_LEN: usize = 4;

/// Splits one frame off the front of `buf` (returns the bytes after the 4-byte length prefix).
/// `Ok(None)` = need more bytes (`buf` is left untouched). Errors: a length above
/// `max_frame_len` (including negative Java ints) or below 4 (no room for the header-length word).
pub fn split_frame(
    buf: &mut BytesMut,
    max_frame_len: usize,
) -> Result<Option<Bytes>, ProtocolError> {
    let Some(len) = peek_frame_len(buf, max_frame_len)? else {
        return Ok(None);
    };
    if buf.len() < LENGTH_PREFIX_LEN + len {
        return Ok(None);
    }
    buf.advance(LENGTH_PREFIX_LEN);
    Ok(Some(buf.split_to(len).freeze()))
}

/// Validates the length prefix at the front of `buf` without consuming it, so a reader can
/// reserve exactly the bytes still missing. `Ok(None)` = fewer than 4 bytes buffered.
pub fn peek_frame_len(buf: &[u8], max_frame_len: usize) -> Result<Option<usize>, ProtocolError> {
    let Some(prefix) = buf.get(..LENGTH_PREFIX_LEN) else {
        return Ok(None);
    };
    // Read as u32: a negative Java length shows up as > 2^31 and fails the limit check.
    let len = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
    if len > max_frame_len {
        return Err(ProtocolError::FrameTooLarge {
            len,
            max: max_frame_len,
        });
    }
    if len < 4 {
        return Err(ProtocolError::BadFrame(format!(
            "frame length {len} leaves no room for the header length word"
        )));
    }
    Ok(Some(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = crate::constants::MAX_FRAME_LEN;

    /// Two frames and a partial third in one buffer come out one by one; the partial stays.
    #[test]
    fn splits_back_to_back_frames_and_waits_for_partial() {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&[0, 0, 0, 5, 0, 0, 0, 1, 0xAA]);
        buf.extend_from_slice(&[0, 0, 0, 4, 1, 0, 0, 0]);
        buf.extend_from_slice(&[0, 0, 0, 9, 0, 0]);
        let f1 = split_frame(&mut buf, MAX).unwrap().unwrap();
        assert_eq!(&f1[..], &[0, 0, 0, 1, 0xAA]);
        let f2 = split_frame(&mut buf, MAX).unwrap().unwrap();
        assert_eq!(&f2[..], &[1, 0, 0, 0]);
        assert!(split_frame(&mut buf, MAX).unwrap().is_none());
        assert_eq!(buf.len(), 6, "partial frame must stay buffered");
    }

    /// Fewer than four bytes is "need more", not an error.
    #[test]
    fn short_prefix_needs_more() {
        let mut buf = BytesMut::from(&[0u8, 0, 0][..]);
        assert!(split_frame(&mut buf, MAX).unwrap().is_none());
        assert_eq!(buf.len(), 3);
    }

    /// Oversized and negative lengths are rejected before anything is buffered.
    #[test]
    fn rejects_huge_and_negative_lengths() {
        let mut buf = BytesMut::from(&[0x01u8, 0x00, 0x00, 0x01][..]);
        match split_frame(&mut buf, MAX) {
            Err(ProtocolError::FrameTooLarge { len, max }) => {
                assert_eq!(len, 0x0100_0001);
                assert_eq!(max, MAX);
            }
            other => panic!("expected FrameTooLarge, got {other:?}"),
        }
        let mut neg = BytesMut::from(&[0xFFu8, 0xFF, 0xFF, 0xFF][..]);
        assert!(matches!(
            split_frame(&mut neg, MAX),
            Err(ProtocolError::FrameTooLarge { .. })
        ));
        // Exactly the limit is allowed (and then waits for the bytes).
        let mut at = BytesMut::from(&(MAX as u32).to_be_bytes()[..]);
        assert!(split_frame(&mut at, MAX).unwrap().is_none());
    }

    /// A length below 4 cannot hold the header-length word.
    #[test]
    fn rejects_tiny_lengths() {
        for l in 0u32..4 {
            let mut buf = BytesMut::from(&l.to_be_bytes()[..]);
            buf.extend_from_slice(&[0; 8]);
            assert!(matches!(
                split_frame(&mut buf, MAX),
                Err(ProtocolError::BadFrame(_))
            ));
        }
    }
}
