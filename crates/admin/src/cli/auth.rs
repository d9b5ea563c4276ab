//! ACL 2.0's commands: createUser, updateUser, deleteUser, getUser, listUser, createAcl,
//! updateAcl, deleteAcl, getAcl, listAcl, with mqadmin's flags (`-b` a broker or `-c` every
//! master of a cluster); and the credentials every command signs its requests with: the
//! global `--access-key`/`--secret-key`, else `ROCKETMQ_ACCESS_KEY`/`ROCKETMQ_SECRET_KEY`,
//! else `accessKey`/`secretKey` of `$ROCKETMQ_HOME/conf/tools.yml` (where Java's mqadmin
//! reads them).

use std::path::Path;

use clap::Args;
use serde::Serialize;
use yaml_rust2::YamlLoader;

use super::output::{emit, Table};
use super::{BrokerOrCluster, CliError, CliResult, Ctx};
use crate::{AdminError, Credentials};
use ringmq_auth::bodies::{AclInfo, UserInfo};

#[derive(Args, Debug)]
pub struct CreateUserArgs {
    #[command(flatten)]
    pub target: BrokerOrCluster,
    #[arg(short = 'u', long = "username")]
    pub username: String,
    #[arg(short = 'p', long = "password")]
    pub password: String,
    /// Super or Normal (default Normal).
    #[arg(short = 't', long = "userType")]
    pub user_type: Option<String>,
}

#[derive(Args, Debug)]
pub struct UpdateUserArgs {
    #[command(flatten)]
    pub target: BrokerOrCluster,
    #[arg(short = 'u', long = "username")]
    pub username: String,
    #[arg(short = 'p', long = "password")]
    pub password: Option<String>,
    /// Super or Normal.
    #[arg(short = 't', long = "userType")]
    pub user_type: Option<String>,
    /// enable or disable.
    #[arg(short = 's', long = "userStatus")]
    pub user_status: Option<String>,
}

#[derive(Args, Debug)]
pub struct UserArgs {
    #[command(flatten)]
    pub target: BrokerOrCluster,
    #[arg(short = 'u', long = "username")]
    pub username: String,
}

#[derive(Args, Debug)]
pub struct ListUserArgs {
    #[command(flatten)]
    pub target: BrokerOrCluster,
    /// Only users whose name contains this.
    #[arg(short = 'f', long = "filter")]
    pub filter: Option<String>,
}

#[derive(Args, Debug)]
pub struct AclArgs {
    #[command(flatten)]
    pub target: BrokerOrCluster,
    /// The subject, `User:<name>`.
    #[arg(short = 's', long = "subject")]
    pub subject: String,
    /// Resources, comma-separated: `*`, `Topic:name`, `Topic:prefix*`, `Group:*`, ...
    #[arg(short = 'r', long = "resources")]
    pub resources: String,
    /// Actions, comma-separated: All, Pub, Sub, Create, Update, Delete, Get, List.
    #[arg(short = 'a', long = "actions")]
    pub actions: String,
    /// Source addresses or CIDR blocks, comma-separated (default: any).
    #[arg(short = 'i', long = "sourceIp")]
    pub source_ip: Option<String>,
    /// Allow or Deny.
    #[arg(short = 'd', long = "decision")]
    pub decision: String,
}

#[derive(Args, Debug)]
pub struct DeleteAclArgs {
    #[command(flatten)]
    pub target: BrokerOrCluster,
    #[arg(short = 's', long = "subject")]
    pub subject: String,
    /// Only this resource's entry (default: the subject's whole ACL).
    #[arg(short = 'r', long = "resources")]
    pub resource: Option<String>,
}

#[derive(Args, Debug)]
pub struct GetAclArgs {
    #[command(flatten)]
    pub target: BrokerOrCluster,
    #[arg(short = 's', long = "subject")]
    pub subject: String,
}

#[derive(Args, Debug)]
pub struct ListAclArgs {
    #[command(flatten)]
    pub target: BrokerOrCluster,
    /// Only subjects containing this.
    #[arg(short = 's', long = "subject")]
    pub subject: Option<String>,
    /// Only entries whose resource contains this.
    #[arg(short = 'r', long = "resource")]
    pub resource: Option<String>,
}

/// The credentials to sign with: the flags, else the environment, else `tools.yml` under
/// `rocketmq_home`; none when nothing gives both keys. One key without the other is a usage
/// error.
pub fn credentials(
    flags: (Option<&str>, Option<&str>),
    env: (Option<String>, Option<String>),
    rocketmq_home: Option<&Path>,
) -> Result<Option<Credentials>, CliError> {
    let pair = |ak: Option<String>, sk: Option<String>, from: &str| match (ak, sk) {
        (Some(a), Some(s)) => Ok(Some(Credentials {
            access_key: a,
            secret_key: s,
        })),
        (None, None) => Ok(None),
        _ => Err(CliError::Usage(format!(
            "{from} gives an access key or a secret key without the other"
        ))),
    };
    let nonblank = |s: Option<String>| s.filter(|v| !v.trim().is_empty());
    let from_flags = pair(
        nonblank(flags.0.map(str::to_string)),
        nonblank(flags.1.map(str::to_string)),
        "--access-key/--secret-key",
    )?;
    if from_flags.is_some() {
        return Ok(from_flags);
    }
    let from_env = pair(
        nonblank(env.0),
        nonblank(env.1),
        "ROCKETMQ_ACCESS_KEY/ROCKETMQ_SECRET_KEY",
    )?;
    if from_env.is_some() {
        return Ok(from_env);
    }
    let Some(home) = rocketmq_home else {
        return Ok(None);
    };
    let path = home.join("conf").join("tools.yml");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(CliError::Usage(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    let docs = YamlLoader::load_from_str(&text)
        .map_err(|e| CliError::Usage(format!("{} is not YAML: {e}", path.display())))?;
    let Some(doc) = docs.first() else {
        return Ok(None);
    };
    let key = |k: &str| nonblank(doc[k].as_str().map(str::to_string));
    pair(
        key("accessKey"),
        key("secretKey"),
        &path.display().to_string(),
    )
}

fn split(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// What a change did, for `--json`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ChangeReport {
    broker_addrs: Vec<String>,
}

/// Runs a change on every target broker and prints mqadmin's line per broker.
fn change(
    ctx: &Ctx,
    target: &BrokerOrCluster,
    what: &str,
    f: impl Fn(&str) -> Result<(), AdminError>,
) -> CliResult {
    let addrs = target.targets(ctx)?;
    for addr in &addrs {
        f(addr)?;
    }
    let report = ChangeReport {
        broker_addrs: addrs,
    };
    emit(ctx, &report, || {
        report
            .broker_addrs
            .iter()
            .map(|a| format!("{what} to {a} success.\n"))
            .collect()
    })
}

pub fn create_user(ctx: &Ctx, a: &CreateUserArgs) -> CliResult {
    let info = UserInfo {
        username: Some(a.username.clone()),
        password: Some(a.password.clone()),
        user_type: a.user_type.clone(),
        user_status: None,
    };
    change(ctx, &a.target, "create user", |addr| {
        ctx.client.create_user(addr, &info)
    })
}

pub fn update_user(ctx: &Ctx, a: &UpdateUserArgs) -> CliResult {
    if a.password.is_none() && a.user_type.is_none() && a.user_status.is_none() {
        return Err(CliError::Usage(
            "give what to change: -p password, -t userType or -s userStatus".into(),
        ));
    }
    let info = UserInfo {
        username: Some(a.username.clone()),
        password: a.password.clone(),
        user_type: a.user_type.clone(),
        user_status: a.user_status.clone(),
    };
    change(ctx, &a.target, "update user", |addr| {
        ctx.client.update_user(addr, &info)
    })
}

pub fn delete_user(ctx: &Ctx, a: &UserArgs) -> CliResult {
    change(ctx, &a.target, "delete user", |addr| {
        ctx.client.delete_user(addr, &a.username)
    })
}

fn acl_info(a: &AclArgs) -> AclInfo {
    AclInfo::of(
        &a.subject,
        &split(&a.resources),
        &split(&a.actions),
        &a.source_ip.as_deref().map(split).unwrap_or_default(),
        &a.decision,
    )
}

pub fn create_acl(ctx: &Ctx, a: &AclArgs) -> CliResult {
    let info = acl_info(a);
    change(ctx, &a.target, "create acl", |addr| {
        ctx.client.create_acl(addr, &info)
    })
}

pub fn update_acl(ctx: &Ctx, a: &AclArgs) -> CliResult {
    let info = acl_info(a);
    change(ctx, &a.target, "update acl", |addr| {
        ctx.client.update_acl(addr, &info)
    })
}

pub fn delete_acl(ctx: &Ctx, a: &DeleteAclArgs) -> CliResult {
    change(ctx, &a.target, "delete acl", |addr| {
        ctx.client
            .delete_acl(addr, &a.subject, None, a.resource.as_deref())
    })
}

/// One broker's answer, for `--json`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FromBroker<T> {
    broker_addr: String,
    #[serde(flatten)]
    answer: T,
}

#[derive(Serialize)]
struct Users {
    users: Vec<UserInfo>,
}

#[derive(Serialize)]
struct Acls {
    acls: Vec<AclInfo>,
}

fn opt(s: &Option<String>) -> String {
    s.clone().unwrap_or_default()
}

fn user_table(users: &[UserInfo]) -> String {
    let mut t = Table::new(&["UserName", "Password", "UserType", "UserStatus"]);
    for u in users {
        t.row(vec![
            opt(&u.username),
            opt(&u.password),
            opt(&u.user_type),
            opt(&u.user_status),
        ]);
    }
    t.render()
}

fn acl_table(acls: &[AclInfo]) -> String {
    let mut t = Table::new(&[
        "Subject",
        "PolicyType",
        "Resource",
        "Actions",
        "SourceIp",
        "Decision",
    ]);
    for a in acls {
        for p in a.policies.iter().flatten() {
            for e in p.entries.iter().flatten() {
                t.row(vec![
                    opt(&a.subject),
                    opt(&p.policy_type),
                    opt(&e.resource),
                    e.actions.clone().unwrap_or_default().join(","),
                    e.source_ips.clone().unwrap_or_default().join(","),
                    opt(&e.decision),
                ]);
            }
        }
    }
    t.render()
}

/// Asks every target broker; prints one table per broker (named when there are several).
fn show<T: Serialize>(
    ctx: &Ctx,
    target: &BrokerOrCluster,
    ask: impl Fn(&str) -> Result<T, AdminError>,
    render: impl Fn(&T) -> String,
) -> CliResult {
    let addrs = target.targets(ctx)?;
    let mut answers = Vec::new();
    for addr in addrs {
        let answer = ask(&addr)?;
        answers.push(FromBroker {
            broker_addr: addr,
            answer,
        });
    }
    let several = answers.len() > 1;
    emit(ctx, &answers, || {
        let mut s = String::new();
        for a in &answers {
            if several {
                s.push_str(&format!("broker {}:\n", a.broker_addr));
            }
            s.push_str(&render(&a.answer));
        }
        s
    })
}

pub fn get_user(ctx: &Ctx, a: &UserArgs) -> CliResult {
    show(
        ctx,
        &a.target,
        |addr| match ctx.client.get_user(addr, &a.username)? {
            Some(u) => Ok(Users { users: vec![u] }),
            None => Err(AdminError::NotFound(format!(
                "no user {} on {addr}",
                a.username
            ))),
        },
        |u| user_table(&u.users),
    )
}

pub fn list_user(ctx: &Ctx, a: &ListUserArgs) -> CliResult {
    show(
        ctx,
        &a.target,
        |addr| {
            let users = ctx.client.list_users(addr, a.filter.as_deref())?;
            Ok(Users { users })
        },
        |u| user_table(&u.users),
    )
}

pub fn get_acl(ctx: &Ctx, a: &GetAclArgs) -> CliResult {
    show(
        ctx,
        &a.target,
        |addr| match ctx.client.get_acl(addr, &a.subject)? {
            Some(acl) => Ok(Acls { acls: vec![acl] }),
            None => Err(AdminError::NotFound(format!(
                "no acl of {} on {addr}",
                a.subject
            ))),
        },
        |x| acl_table(&x.acls),
    )
}

pub fn list_acl(ctx: &Ctx, a: &ListAclArgs) -> CliResult {
    show(
        ctx,
        &a.target,
        |addr| {
            let acls = ctx
                .client
                .list_acls(addr, a.subject.as_deref(), a.resource.as_deref())?;
            Ok(Acls { acls })
        },
        |x| acl_table(&x.acls),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Flags win over the environment, which wins over tools.yml; half a pair is refused.
    #[test]
    fn credentials_precedence() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join("conf")).unwrap();
        std::fs::write(
            home.path().join("conf/tools.yml"),
            "accessKey: yml-ak\nsecretKey: yml-sk\n",
        )
        .unwrap();
        let h = Some(home.path());
        let ak = |c: Option<Credentials>| c.map(|c| (c.access_key, c.secret_key));
        let env = |a: &str, s: &str| (Some(a.to_string()), Some(s.to_string()));
        let none = (None, None);
        assert_eq!(
            ak(credentials((Some("f"), Some("fs")), env("e", "es"), h).unwrap()),
            Some(("f".into(), "fs".into()))
        );
        assert_eq!(
            ak(credentials((None, None), env("e", "es"), h).unwrap()),
            Some(("e".into(), "es".into()))
        );
        assert_eq!(
            ak(credentials((None, None), none.clone(), h).unwrap()),
            Some(("yml-ak".into(), "yml-sk".into()))
        );
        assert_eq!(
            ak(credentials((None, None), none.clone(), None).unwrap()),
            None
        );
        assert!(credentials((Some("f"), None), none, h).is_err());
    }
}
