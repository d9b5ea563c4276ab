//! ACL 2.0's user and ACL management, AUTH_CREATE_USER..AUTH_LIST_ACL (3001-3010), as Java's
//! `AdminBrokerProcessor` answers them: the headers and bodies (`UserInfo`, `AclInfo`) read
//! on the shard that got the request, the work done on shard 0, which owns the users and
//! ACLs (`auth_state::AuthOwner`).
//!
//! A change is applied to a copy, the files it touched (`users.json`, `acls.json` in the
//! store's config directory) written on a helper thread, and only then the copy kept and the
//! new table published to every shard (`auth_gate::publish`), before the answer: a failed
//! write answers SYSTEM_ERROR and nothing changes. Changes run one at a time. What Java's
//! metadata managers refuse is NO_PERMISSION with Java's message; the Super-user rules are
//! Java's (`isNotSuperUserLogin`: a request signed by a user who is not Super may not create,
//! update or delete a Super user); a slave refuses every change.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::auth::bodies::{acl_of_info, parse_subject, AclInfo, UserChange, UserInfo};
use crate::auth::metadata::{self, AuthMetadata, MetadataError, Touched};
use crate::auth::model::{PolicyType, Resource, UserType};
use crate::auth::signature::ACCESS_KEY;
use crate::auth_gate;
use crate::auth_state::AuthOwner;
use crate::error::BrokerError;
use crate::protocol::codes::{request_code as req, response_code as rc};
use crate::protocol::headers::{
    AclRequestHeader, DeleteAclRequestHeader, ListAclsRequestHeader, ListUsersRequestHeader,
    UserRequestHeader,
};
use crate::protocol::RemotingCommand;
use crate::runtime;
use crate::shard::Shard;

/// How long a change waits for the one before it to be written.
const CHANGE_WAIT: Duration = Duration::from_secs(10);
const SLAVE_REMARK: &str =
    "Can't modify users or ACLs from slave broker, please execute it from master broker.";
const SYSTEM_REMARK: &str = "An system error occurred, please try again later.";

/// What shard 0 answers: a code, a remark, a body.
struct Answer {
    code: i32,
    remark: Option<String>,
    body: Option<Vec<u8>>,
}

impl Answer {
    fn ok(body: Option<Vec<u8>>) -> Answer {
        Answer {
            code: rc::SUCCESS,
            remark: None,
            body,
        }
    }

    fn err(code: i32, remark: impl Into<String>) -> Answer {
        Answer {
            code,
            remark: Some(remark.into()),
            body: None,
        }
    }
}

impl From<MetadataError> for Answer {
    /// Java's `handleAuthException`: its managers' refusals are NO_PERMISSION.
    fn from(e: MetadataError) -> Answer {
        match e {
            MetadataError::Rejected(m) => Answer::err(rc::NO_PERMISSION, m),
            other => {
                tracing::error!(error = %other, "auth metadata");
                Answer::err(rc::SYSTEM_ERROR, SYSTEM_REMARK)
            }
        }
    }
}

/// One of the ten requests, read and checked as far as it can be without the users.
enum Op {
    CreateUser(UserChange),
    UpdateUser(UserChange),
    DeleteUser(String),
    GetUser(String),
    ListUser(Option<String>),
    PutAcl(Result<crate::auth::model::Acl, String>),
    DeleteAcl {
        subject: String,
        policy_type: Option<PolicyType>,
        resource: Option<Resource>,
    },
    GetAcl(String),
    ListAcl(Option<String>, Option<String>),
}

impl Op {
    fn is_change(&self) -> bool {
        matches!(
            self,
            Op::CreateUser(_)
                | Op::UpdateUser(_)
                | Op::DeleteUser(_)
                | Op::PutAcl(_)
                | Op::DeleteAcl { .. }
        )
    }
}

/// Handles AUTH_* 3001-3010.
pub async fn handle(
    shard: Rc<Shard>,
    cmd: &RemotingCommand,
) -> Result<RemotingCommand, BrokerError> {
    let op = match read_op(cmd)? {
        Ok(op) => op,
        Err(a) => return Ok(respond(cmd, a)),
    };
    if op.is_change() && shard.ctx.role.is_slave() {
        return Ok(respond(cmd, Answer::err(rc::SYSTEM_ERROR, SLAVE_REMARK)));
    }
    let login = cmd
        .ext(ACCESS_KEY)
        .filter(|k| !k.is_empty())
        .map(str::to_string);
    let answer = shard
        .mesh
        .call(0, move |s0| async move { run(&s0, op, login).await })
        .await?;
    Ok(respond(cmd, answer))
}

fn respond(cmd: &RemotingCommand, a: Answer) -> RemotingCommand {
    let r = RemotingCommand::response_for(cmd, a.code, a.remark);
    match a.body {
        Some(b) => r.with_body(b),
        None => r,
    }
}

fn username_of(cmd: &RemotingCommand) -> Result<String, BrokerError> {
    Ok(UserRequestHeader::from_command(cmd)?
        .username
        .unwrap_or_default())
}

/// A request body as JSON (`T::default()` when there is none, as Java reads a null body).
fn body_of<T: serde::de::DeserializeOwned + Default>(
    cmd: &RemotingCommand,
    what: &str,
) -> Result<T, BrokerError> {
    if cmd.body.is_empty() {
        return Ok(T::default());
    }
    serde_json::from_slice(&cmd.body)
        .map_err(|e| BrokerError::InvalidParameter(format!("the body is not a {what}: {e}")))
}

/// Reads the request; `Err` is an answer given without asking shard 0.
fn read_op(cmd: &RemotingCommand) -> Result<Result<Op, Answer>, BrokerError> {
    let blank_user = || Answer::err(rc::INVALID_PARAMETER, "The username is blank");
    Ok(match cmd.code {
        req::AUTH_CREATE_USER | req::AUTH_UPDATE_USER => {
            let name = username_of(cmd)?;
            if name.is_empty() {
                return Ok(Err(blank_user()));
            }
            let info: UserInfo = body_of(cmd, "UserInfo")?;
            let change = match UserChange::from_info(&name, &info) {
                Ok(c) => c,
                Err(m) => return Ok(Err(Answer::err(rc::NO_PERMISSION, m))),
            };
            if cmd.code == req::AUTH_CREATE_USER {
                Ok(Op::CreateUser(change))
            } else {
                Ok(Op::UpdateUser(change))
            }
        }
        req::AUTH_DELETE_USER => Ok(Op::DeleteUser(username_of(cmd)?)),
        req::AUTH_GET_USER => {
            let name = username_of(cmd)?;
            if name.trim().is_empty() {
                return Ok(Err(blank_user()));
            }
            Ok(Op::GetUser(name))
        }
        req::AUTH_LIST_USER => Ok(Op::ListUser(
            ListUsersRequestHeader::from_command(cmd)?.filter,
        )),
        req::AUTH_CREATE_ACL | req::AUTH_UPDATE_ACL => {
            let h = AclRequestHeader::from_command(cmd)?;
            let info: AclInfo = body_of(cmd, "AclInfo")?;
            if info.policies.as_ref().is_none_or(|p| p.is_empty()) {
                return Ok(Err(Answer::err(
                    rc::SYSTEM_ERROR,
                    "The body of acl is null",
                )));
            }
            Ok(Op::PutAcl(acl_of_info(&info, h.subject.as_deref())))
        }
        req::AUTH_DELETE_ACL => {
            let h = DeleteAclRequestHeader::from_command(cmd)?;
            let Some((subject, _)) = h.subject.as_deref().and_then(parse_subject) else {
                return Ok(Err(Answer::err(rc::NO_PERMISSION, "The subject is null.")));
            };
            let policy_type = h.policy_type.as_deref().and_then(PolicyType::parse);
            let resource = match h
                .resource
                .as_deref()
                .map(str::trim)
                .filter(|r| !r.is_empty())
            {
                None => None,
                Some(r) => match Resource::parse(r) {
                    Some(r) => Some(r),
                    None => {
                        let m = format!("The resource {r} is illegal.");
                        return Ok(Err(Answer::err(rc::NO_PERMISSION, m)));
                    }
                },
            };
            Ok(Op::DeleteAcl {
                subject,
                policy_type,
                resource,
            })
        }
        req::AUTH_GET_ACL => {
            let h = AclRequestHeader::from_command(cmd)?;
            match h.subject.as_deref().and_then(parse_subject) {
                Some((subject, _)) => Ok(Op::GetAcl(subject)),
                None => Err(Answer::err(rc::NO_PERMISSION, "The subject is null.")),
            }
        }
        req::AUTH_LIST_ACL => {
            let h = ListAclsRequestHeader::from_command(cmd)?;
            Ok(Op::ListAcl(h.subject_filter, h.resource_filter))
        }
        other => {
            return Err(BrokerError::System(format!(
                "request code {other} is not an auth request"
            )))
        }
    })
}

/// Whether the request's user is not a Super user (Java's `isNotSuperUserLogin`: a request
/// without an access key is not refused by it, as when authentication is off). A user
/// unknown to the managed users may be an ACL 1.0 account.
fn not_super_login(o: &AuthOwner, login: Option<&str>) -> bool {
    let Some(ak) = login else {
        return false;
    };
    if let Ok(s) = o.meta.is_super_user(ak) {
        return !s;
    }
    let plain = o.plain.as_ref().and_then(|p| {
        p.accounts
            .iter()
            .find(|a| a.access_key == ak)
            .map(|a| a.user().user_type == UserType::Super)
    });
    !plain.unwrap_or(false)
}

fn json<T: serde::Serialize>(v: &T) -> Vec<u8> {
    // Serializing these plain structs cannot fail.
    serde_json::to_vec(v).unwrap_or_default()
}

/// Runs one request on shard 0.
async fn run(s0: &Rc<Shard>, op: Op, login: Option<String>) -> Answer {
    let login = login.as_deref();
    let read = |f: &dyn Fn(&AuthOwner) -> Answer| {
        s0.with_auth_owner(|o| f(o))
            .unwrap_or_else(|| Answer::err(rc::SYSTEM_ERROR, SYSTEM_REMARK))
    };
    match op {
        Op::GetUser(name) => {
            read(&|o| Answer::ok(o.meta.user(&name).map(|u| json(&UserInfo::from(u)))))
        }
        Op::ListUser(filter) => read(&|o| {
            let users: Vec<UserInfo> = o
                .meta
                .list_users(filter.as_deref())
                .into_iter()
                .map(UserInfo::from)
                .collect();
            Answer::ok((!users.is_empty()).then(|| json(&users)))
        }),
        Op::GetAcl(subject) => read(&|o| match o.meta.get_acl(&subject) {
            Ok(a) => Answer::ok(a.map(|a| json(&AclInfo::from(a)))),
            Err(e) => e.into(),
        }),
        Op::ListAcl(sf, rf) => read(&|o| {
            let acls: Vec<AclInfo> = o
                .meta
                .list_acls(sf.as_deref(), rf.as_deref())
                .iter()
                .map(AclInfo::from)
                .collect();
            Answer::ok((!acls.is_empty()).then(|| json(&acls)))
        }),
        Op::CreateUser(c) => {
            change(s0, |o, m| {
                if c.user_type == Some(UserType::Super) && not_super_login(o, login) {
                    return Err(Answer::err(
                        rc::SYSTEM_ERROR,
                        "The super user can only be create by super user",
                    ));
                }
                m.create_user(&c).map_err(Answer::from)
            })
            .await
        }
        Op::UpdateUser(c) => {
            change(s0, |o, m| {
                let not_super = not_super_login(o, login);
                let only_super = "The super user can only be update by super user";
                if c.user_type == Some(UserType::Super) && not_super {
                    return Err(Answer::err(rc::SYSTEM_ERROR, only_super));
                }
                match m.user(&c.username) {
                    None => return Err(Answer::err(rc::NO_PERMISSION, "The user is not exist")),
                    Some(old) if old.user_type == UserType::Super && not_super => {
                        return Err(Answer::err(rc::NO_PERMISSION, only_super))
                    }
                    Some(_) => {}
                }
                m.update_user(&c).map_err(Answer::from)
            })
            .await
        }
        Op::DeleteUser(name) => {
            change(s0, |o, m| {
                if name.trim().is_empty() {
                    return Err(Answer::err(rc::NO_PERMISSION, "username can not be blank"));
                }
                match m.user(&name) {
                    None => return Ok(Touched::default()),
                    Some(u) if u.user_type == UserType::Super && not_super_login(o, login) => {
                        return Err(Answer::err(
                            rc::NO_PERMISSION,
                            "The super user can only be update by super user",
                        ))
                    }
                    Some(_) => {}
                }
                m.delete_user(&name).map_err(Answer::from)
            })
            .await
        }
        Op::PutAcl(acl) => {
            change(s0, |_, m| match acl {
                Ok(acl) => m.put_acl(acl).map_err(Answer::from),
                Err(msg) => Err(Answer::err(rc::NO_PERMISSION, msg)),
            })
            .await
        }
        Op::DeleteAcl {
            subject,
            policy_type,
            resource,
        } => {
            change(s0, |_, m| {
                m.delete_acl(&subject, policy_type, resource.as_ref())
                    .map_err(Answer::from)
            })
            .await
        }
    }
}

thread_local! {
    /// Whether a change is being written on this (shard 0's) thread.
    static CHANGING: Cell<bool> = const { Cell::new(false) };
}

/// This thread's turn to change the users and ACLs; released when dropped.
struct Turn;

impl Turn {
    async fn take() -> Option<Turn> {
        let deadline = Instant::now() + CHANGE_WAIT;
        loop {
            if !CHANGING.with(|c| c.replace(true)) {
                return Some(Turn);
            }
            if Instant::now() >= deadline {
                return None;
            }
            runtime::sleep(Duration::from_millis(2)).await;
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        CHANGING.with(|c| c.set(false));
    }
}

/// Applies `f` to a copy of the users and ACLs; when it changed something, writes the files
/// it touched, then keeps the copy and publishes the new table. One change at a time.
async fn change(
    s0: &Rc<Shard>,
    f: impl FnOnce(&AuthOwner, &mut AuthMetadata) -> Result<Touched, Answer>,
) -> Answer {
    let Some(_turn) = Turn::take().await else {
        return Answer::err(
            rc::SYSTEM_BUSY,
            "another change of the users and ACLs is still being written",
        );
    };
    let applied = s0.with_auth_owner(|o| {
        let mut copy = o.meta.clone();
        f(o, &mut copy).map(|t| (copy, t))
    });
    let (copy, touched) = match applied {
        None => return Answer::err(rc::SYSTEM_ERROR, SYSTEM_REMARK),
        Some(Err(a)) => return a,
        Some(Ok(done)) => done,
    };
    if touched == Touched::default() {
        return Answer::ok(None);
    }
    let files = copy.files_of(touched);
    let written = runtime::spawn_blocking(move || {
        for (path, bytes) in &files {
            if let Err(e) = metadata::write_file(path, bytes) {
                return Err((path.clone(), e));
            }
        }
        Ok(())
    })
    .await;
    if let Err((path, e)) = written {
        tracing::error!(path = %path.display(), error = %e, "cannot write the users and ACLs; the change is dropped");
        return Answer::err(rc::SYSTEM_ERROR, SYSTEM_REMARK);
    }
    s0.with_auth_owner(|o| o.meta = copy);
    auth_gate::publish(s0).await;
    Answer::ok(None)
}
