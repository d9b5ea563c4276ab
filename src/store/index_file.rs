//! IndexFile: filled by its owner.
