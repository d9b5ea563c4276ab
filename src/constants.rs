//! Every limit and on-disk size, related by const asserts so they cannot drift apart.
