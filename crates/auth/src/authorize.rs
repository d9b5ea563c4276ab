//! The authorization decision of ACL 2.0 (Java's `UserAuthorizationHandler` and
//! `AclAuthorizationHandler`): a Super user may do anything; otherwise the subject's Custom
//! policy entries that match the resource, one of the actions and the client's address are
//! taken, or, if none match, its Default policy's; the most specific entry decides (a literal
//! name before a prefix, a longer prefix before a shorter one, a named type before `*`), and
//! between equally specific entries Deny wins. No matching entry is a refusal.
//!
//! Java's comparator, against its own comment ("the decision deny has higher priority"),
//! sorts Allow first on a tie; ringmq follows the comment, the safer reading.

use std::net::IpAddr;

use super::model::{
    Acl, Action, Decision, PolicyEntry, PolicyType, Requested, ResourcePattern, ResourceType,
};

/// Why a request was refused; the text is Java's ending of its refusal message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    NoMatchedPolicy,
    Denied,
}

impl Refusal {
    pub fn detail(self) -> &'static str {
        match self {
            Refusal::NoMatchedPolicy => "no matched policies.",
            Refusal::Denied => "the decision is deny.",
        }
    }
}

/// Decides one (resource, actions) pair of a request for a Normal user with this ACL.
pub fn decide(
    acl: Option<&Acl>,
    requested: &Requested<'_>,
    actions: &[Action],
    source: Option<IpAddr>,
) -> Result<(), Refusal> {
    let acl = acl.ok_or(Refusal::NoMatchedPolicy)?;
    let best = best_entry(acl, PolicyType::Custom, requested, actions, source)
        .or_else(|| best_entry(acl, PolicyType::Default, requested, actions, source))
        .ok_or(Refusal::NoMatchedPolicy)?;
    match best.decision {
        Decision::Allow => Ok(()),
        Decision::Deny => Err(Refusal::Denied),
    }
}

fn best_entry<'a>(
    acl: &'a Acl,
    t: PolicyType,
    requested: &Requested<'_>,
    actions: &[Action],
    source: Option<IpAddr>,
) -> Option<&'a PolicyEntry> {
    acl.policy(t)?
        .entries
        .iter()
        .filter(|e| {
            e.resource.matches(requested) && e.matches_actions(actions) && e.matches_source(source)
        })
        .min_by_key(|e| specificity(e))
}

/// Smaller is more specific.
fn specificity(e: &PolicyEntry) -> (bool, u8, std::cmp::Reverse<usize>, u8) {
    let (rank, prefix) = match &e.resource.pattern {
        ResourcePattern::Literal(_) => (0, 0),
        ResourcePattern::Prefixed(p) => (1, p.len()),
        ResourcePattern::Any => (2, 0),
    };
    let decision = match e.decision {
        Decision::Deny => 0,
        Decision::Allow => 1,
    };
    (
        e.resource.kind == ResourceType::Any,
        rank,
        std::cmp::Reverse(prefix),
        decision,
    )
}

#[cfg(test)]
mod tests;
