//! ConsumeQueue: filled by its owner.
