//! Stored-message record codec: filled by its owner.
