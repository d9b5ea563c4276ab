//! RocketMQ 5's AutoSwitch HA protocol (Java's `AutoSwitchHAClient` and
//! `AutoSwitchHAConnection`), the one brokers in controller mode replicate with, on the HA port.
//! Every integer is big-endian; `state` is Java's `HAConnectionState` ordinal (1 HANDSHAKE,
//! 2 TRANSFER).
//!
//! - slave to master, a handshake (16 bytes): state 1, syncFromLastFile (i16 0/1),
//!   asyncLearner (i16 0/1), the slave's broker id (i64);
//! - slave to master, an acknowledgement (12 bytes): state 2, the slave's commit-log end;
//! - master to slave, the handshake answer: state 1, body size (12 per epoch), the master's
//!   commit-log end, its last epoch, then each epoch as (epoch i32, start offset i64);
//! - master to slave, a transfer: state 2, body size, the commit-log offset of the body, the
//!   epoch it belongs to and that epoch's start, the master's confirm offset, then the body. A
//!   body never spans two epochs; an empty one is a heartbeat.

use crate::body::EpochEntry;

pub const STATE_HANDSHAKE: i32 = 1;
pub const STATE_TRANSFER: i32 = 2;
/// Bytes of the slave's handshake.
pub const SLAVE_HANDSHAKE_LEN: usize = 16;
/// Bytes of the slave's acknowledgement.
pub const SLAVE_ACK_LEN: usize = 12;
/// Bytes of the master's handshake answer before its epochs.
pub const MASTER_HANDSHAKE_HEADER_LEN: usize = 20;
/// Bytes of one epoch in the handshake answer.
pub const EPOCH_LEN: usize = 12;
/// Bytes of a transfer header.
pub const TRANSFER_HEADER_LEN: usize = 36;
/// Epochs a handshake answer carries at most (Java's master sends at most 1000).
pub const MAX_HANDSHAKE_EPOCHS: usize = 1000;

/// What a slave says when it connects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlaveHandshake {
    pub sync_from_last_file: bool,
    pub async_learner: bool,
    pub broker_id: i64,
}

impl SlaveHandshake {
    pub fn encode(&self) -> [u8; SLAVE_HANDSHAKE_LEN] {
        let mut b = [0u8; SLAVE_HANDSHAKE_LEN];
        b[..4].copy_from_slice(&STATE_HANDSHAKE.to_be_bytes());
        b[4..6].copy_from_slice(&(self.sync_from_last_file as i16).to_be_bytes());
        b[6..8].copy_from_slice(&(self.async_learner as i16).to_be_bytes());
        b[8..].copy_from_slice(&self.broker_id.to_be_bytes());
        b
    }
}

/// One message from a slave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlaveMessage {
    Handshake(SlaveHandshake),
    /// The slave's commit-log end.
    Ack(i64),
}

/// The first whole message in `buf` and its length; `Ok(None)` when it is not whole yet; an
/// error for a state that is neither.
pub fn decode_slave_message(buf: &[u8]) -> Result<Option<(SlaveMessage, usize)>, String> {
    let Some(state) = buf.get(..4) else {
        return Ok(None);
    };
    let state = i32::from_be_bytes(state.try_into().unwrap_or_default());
    match state {
        STATE_HANDSHAKE => {
            let Some(b) = buf.get(..SLAVE_HANDSHAKE_LEN) else {
                return Ok(None);
            };
            let flag = |i: usize| i16::from_be_bytes([b[i], b[i + 1]]) != 0;
            let id = i64::from_be_bytes(b[8..16].try_into().unwrap_or_default());
            Ok(Some((
                SlaveMessage::Handshake(SlaveHandshake {
                    sync_from_last_file: flag(4),
                    async_learner: flag(6),
                    broker_id: id,
                }),
                SLAVE_HANDSHAKE_LEN,
            )))
        }
        STATE_TRANSFER => {
            let Some(b) = buf.get(..SLAVE_ACK_LEN) else {
                return Ok(None);
            };
            let offset = i64::from_be_bytes(b[4..12].try_into().unwrap_or_default());
            Ok(Some((SlaveMessage::Ack(offset), SLAVE_ACK_LEN)))
        }
        other => Err(format!("a slave message in state {other}")),
    }
}

pub fn encode_ack(max_offset: u64) -> [u8; SLAVE_ACK_LEN] {
    let mut b = [0u8; SLAVE_ACK_LEN];
    b[..4].copy_from_slice(&STATE_TRANSFER.to_be_bytes());
    b[4..].copy_from_slice(&(max_offset as i64).to_be_bytes());
    b
}

/// The master's handshake answer: its end, and its epochs (the last ones, at most
/// [`MAX_HANDSHAKE_EPOCHS`]).
pub fn encode_master_handshake(max_offset: u64, epochs: &[EpochEntry]) -> Vec<u8> {
    let epochs = &epochs[epochs.len().saturating_sub(MAX_HANDSHAKE_EPOCHS)..];
    let last = epochs.last().map_or(0, |e| e.epoch);
    let mut b = Vec::with_capacity(MASTER_HANDSHAKE_HEADER_LEN + EPOCH_LEN * epochs.len());
    b.extend_from_slice(&STATE_HANDSHAKE.to_be_bytes());
    b.extend_from_slice(&((EPOCH_LEN * epochs.len()) as i32).to_be_bytes());
    b.extend_from_slice(&(max_offset as i64).to_be_bytes());
    b.extend_from_slice(&last.to_be_bytes());
    for e in epochs {
        b.extend_from_slice(&e.epoch.to_be_bytes());
        b.extend_from_slice(&e.start_offset.to_be_bytes());
    }
    b
}

/// A transfer header from the master.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransferHeader {
    pub body_size: i32,
    pub offset: i64,
    pub epoch: i32,
    pub epoch_start_offset: i64,
    pub confirm_offset: i64,
}

impl TransferHeader {
    pub fn encode(&self) -> [u8; TRANSFER_HEADER_LEN] {
        let mut b = [0u8; TRANSFER_HEADER_LEN];
        b[..4].copy_from_slice(&STATE_TRANSFER.to_be_bytes());
        b[4..8].copy_from_slice(&self.body_size.to_be_bytes());
        b[8..16].copy_from_slice(&self.offset.to_be_bytes());
        b[16..20].copy_from_slice(&self.epoch.to_be_bytes());
        b[20..28].copy_from_slice(&self.epoch_start_offset.to_be_bytes());
        b[28..36].copy_from_slice(&self.confirm_offset.to_be_bytes());
        b
    }
}

/// One message from the master.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MasterMessage {
    /// The master's commit-log end and its epochs (end offsets filled in: each the next
    /// one's start, the last open).
    Handshake {
        max_offset: i64,
        epochs: Vec<EpochEntry>,
    },
    /// A transfer; its body is the `body_size` bytes after the header.
    Transfer(TransferHeader),
}

/// The first message header in `buf` and the bytes it takes up (a handshake with its epochs,
/// a transfer header without its body); `Ok(None)` when it is not whole yet; an error for a
/// bad state or size.
pub fn decode_master_message(
    buf: &[u8],
    body_max: usize,
) -> Result<Option<(MasterMessage, usize)>, String> {
    let Some(h) = buf.get(..8) else {
        return Ok(None);
    };
    let state = i32::from_be_bytes(h[..4].try_into().unwrap_or_default());
    let size = i32::from_be_bytes(h[4..8].try_into().unwrap_or_default());
    let be_i64 = |b: &[u8]| i64::from_be_bytes(b.try_into().unwrap_or_default());
    let be_i32 = |b: &[u8]| i32::from_be_bytes(b.try_into().unwrap_or_default());
    match state {
        STATE_HANDSHAKE => {
            let n = usize::try_from(size)
                .ok()
                .filter(|s| s % EPOCH_LEN == 0 && s / EPOCH_LEN <= MAX_HANDSHAKE_EPOCHS)
                .ok_or_else(|| format!("a handshake with {size} bytes of epochs"))?;
            let Some(b) = buf.get(..MASTER_HANDSHAKE_HEADER_LEN + n) else {
                return Ok(None);
            };
            let max_offset = be_i64(&b[8..16]);
            let mut epochs: Vec<EpochEntry> = b[MASTER_HANDSHAKE_HEADER_LEN..]
                .chunks_exact(EPOCH_LEN)
                .map(|e| EpochEntry {
                    epoch: be_i32(&e[..4]),
                    start_offset: be_i64(&e[4..]),
                    end_offset: i64::MAX,
                })
                .collect();
            for i in 1..epochs.len() {
                if epochs[i].epoch <= epochs[i - 1].epoch
                    || epochs[i].start_offset < epochs[i - 1].start_offset
                {
                    return Err("the master's epochs are out of order".into());
                }
                epochs[i - 1].end_offset = epochs[i].start_offset;
            }
            Ok(Some((
                MasterMessage::Handshake { max_offset, epochs },
                MASTER_HANDSHAKE_HEADER_LEN + n,
            )))
        }
        STATE_TRANSFER => {
            usize::try_from(size)
                .ok()
                .filter(|s| *s <= body_max)
                .ok_or_else(|| format!("a transfer of {size} bytes"))?;
            let Some(b) = buf.get(..TRANSFER_HEADER_LEN) else {
                return Ok(None);
            };
            Ok(Some((
                MasterMessage::Transfer(TransferHeader {
                    body_size: size,
                    offset: be_i64(&b[8..16]),
                    epoch: be_i32(&b[16..20]),
                    epoch_start_offset: be_i64(&b[20..28]),
                    confirm_offset: be_i64(&b[28..36]),
                }),
                TRANSFER_HEADER_LEN,
            )))
        }
        other => Err(format!("a master message in state {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slave's messages as Java lays them out, and nothing read from a partial one.
    #[test]
    fn slave_messages() {
        let h = SlaveHandshake {
            sync_from_last_file: true,
            async_learner: false,
            broker_id: 3,
        };
        let b = h.encode();
        assert_eq!(&b[..8], &[0, 0, 0, 1, 0, 1, 0, 0]);
        assert_eq!(decode_slave_message(&b[..12]), Ok(None));
        assert_eq!(
            decode_slave_message(&b),
            Ok(Some((SlaveMessage::Handshake(h), 16)))
        );
        let a = encode_ack(4096);
        assert_eq!(
            decode_slave_message(&a),
            Ok(Some((SlaveMessage::Ack(4096), 12)))
        );
        assert!(decode_slave_message(&[0, 0, 0, 9]).is_err());
    }

    /// The handshake answer carries the epochs with their ends; a transfer header its fields.
    #[test]
    fn master_messages() {
        let epochs = [
            EpochEntry {
                epoch: 1,
                start_offset: 0,
                end_offset: i64::MAX,
            },
            EpochEntry {
                epoch: 3,
                start_offset: 700,
                end_offset: i64::MAX,
            },
        ];
        let b = encode_master_handshake(900, &epochs);
        assert_eq!(b.len(), 20 + 24);
        assert_eq!(decode_master_message(&b[..30], 1024), Ok(None));
        let (m, used) = decode_master_message(&b, 1024).unwrap().unwrap();
        assert_eq!(used, b.len());
        let MasterMessage::Handshake { max_offset, epochs } = m else {
            panic!("not a handshake")
        };
        assert_eq!(
            (max_offset, epochs[0].end_offset, epochs[1].end_offset),
            (900, 700, i64::MAX)
        );
        let t = TransferHeader {
            body_size: 10,
            offset: 700,
            epoch: 3,
            epoch_start_offset: 700,
            confirm_offset: 650,
        };
        let b = t.encode();
        assert_eq!(
            decode_master_message(&b, 1024),
            Ok(Some((MasterMessage::Transfer(t), 36)))
        );
        assert!(
            decode_master_message(&b, 5).is_err(),
            "a body over the limit"
        );
        let mut bad = encode_master_handshake(0, &epochs);
        bad[4..8].copy_from_slice(&13i32.to_be_bytes());
        assert!(decode_master_message(&bad, 1024).is_err());
    }
}
