//! `ringmq admin`: RocketMQ's mqadmin commands, with mqadmin's names and flags, over the
//! [`crate`] client.
//!
//! Owns the command line (clap definitions of every command), the dispatch, the output (an
//! aligned table for people, or with `--json` one JSON document on stdout for scripts) and the
//! exit codes: 0 success, 1 the server refused or the thing does not exist, 2 a usage error
//! (as clap's own), 3 a name server or broker unreachable; every failure is one line on stderr.
//! The commands live by subject: `topics`, `groups`, `messages`, `brokers`, `auth` (ACL 2.0's
//! users and ACLs, and the credentials every command signs with); `output` renders.

mod auth;
mod brokers;
mod groups;
mod lists;
mod messages;
mod modes;
mod output;
mod topics;

use clap::{Args, Subcommand};

use crate::{AdminClient, AdminError, DEFAULT_NAMESRV};

/// Exit code: the command did what it was asked.
pub const EXIT_OK: i32 = 0;
/// Exit code: a server refused, or the topic, group or message does not exist.
pub const EXIT_REFUSED: i32 = 1;
/// Exit code: the command line is wrong (clap exits with the same code).
pub const EXIT_USAGE: i32 = 2;
/// Exit code: a name server or broker could not be reached.
pub const EXIT_UNREACHABLE: i32 = 3;

/// `ringmq admin [-n addr] [--json] <command> [flags]`.
#[derive(Args, Debug)]
pub struct AdminArgs {
    /// Name server address(es), `host:port;host:port` (default: $NAMESRV_ADDR, then
    /// 127.0.0.1:9876).
    #[arg(short = 'n', long = "namesrvAddr", global = true)]
    pub namesrv_addr: Option<String>,
    /// Print one JSON document on stdout instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
    /// Timeout of each request, in milliseconds.
    #[arg(long = "timeoutMillis", global = true, default_value_t = 5000)]
    pub timeout_ms: u64,
    /// Sign every request as this user (default: $ROCKETMQ_ACCESS_KEY, then `accessKey` of
    /// $ROCKETMQ_HOME/conf/tools.yml).
    #[arg(long = "access-key", global = true)]
    pub access_key: Option<String>,
    /// The user's secret key (default: $ROCKETMQ_SECRET_KEY, then `secretKey` of tools.yml).
    #[arg(long = "secret-key", global = true)]
    pub secret_key: Option<String>,
    /// Speak TLS to the name servers and brokers (their `tls.server.mode` permissive or
    /// enforcing); the server's certificate is verified only as `--tlsConfigFile` says.
    #[arg(long, global = true)]
    pub tls: bool,
    /// A `tls.properties` file of `tls.client.*` keys (trust, client certificate); implies
    /// `--tls`.
    #[arg(long = "tlsConfigFile", global = true)]
    pub tls_config_file: Option<std::path::PathBuf>,
    #[command(subcommand)]
    pub cmd: AdminCmd,
}

#[derive(Subcommand, Debug)]
pub enum AdminCmd {
    /// List the clusters and their brokers.
    #[command(name = "clusterList")]
    ClusterList(topics::ClusterListArgs),
    /// List every topic the name server knows.
    #[command(name = "topicList")]
    TopicList,
    /// Show a topic's route: its brokers and queues.
    #[command(name = "topicRoute")]
    TopicRoute(topics::TopicArg),
    /// Show a topic's queues: min and max offsets, last update.
    #[command(name = "topicStatus")]
    TopicStatus(topics::TopicArg),
    /// Create or update a topic on a broker or on every master of a cluster.
    #[command(name = "updateTopic")]
    UpdateTopic(topics::UpdateTopicArgs),
    /// Delete a topic from the brokers and the name server.
    #[command(name = "deleteTopic")]
    DeleteTopic(topics::DeleteTopicArgs),
    /// Create or update the topics of a JSON file, in one request per broker.
    #[command(name = "updateTopicList")]
    UpdateTopicList(lists::ListFileArgs),
    /// Create or update the subscription groups of a JSON file, in one request per broker.
    #[command(name = "updateSubGroupList")]
    UpdateSubGroupList(lists::ListFileArgs),
    /// Create or update a subscription group.
    #[command(name = "updateSubGroup")]
    UpdateSubGroup(groups::UpdateSubGroupArgs),
    /// Set how a consumer group reads a topic: PULL or POP.
    #[command(name = "setConsumeMode")]
    SetConsumeMode(modes::SetConsumeModeArgs),
    /// Delete a subscription group.
    #[command(name = "deleteSubGroup")]
    DeleteSubGroup(groups::DeleteSubGroupArgs),
    /// Show a consumer group's progress per queue.
    #[command(name = "consumerProgress")]
    ConsumerProgress(groups::ConsumerProgressArgs),
    /// Show a consumer group's connections and subscriptions.
    #[command(name = "consumerConnection")]
    ConsumerConnection(groups::ConsumerConnectionArgs),
    /// Show a producer group's connections.
    #[command(name = "producerConnection")]
    ProducerConnection(groups::ProducerConnectionArgs),
    /// Move a consumer group's offsets on a topic to a point in time.
    #[command(name = "resetOffsetByTime")]
    ResetOffsetByTime(groups::ResetOffsetByTimeArgs),
    /// Show a message by its id.
    #[command(name = "queryMsgById")]
    QueryMsgById(messages::QueryMsgByIdArgs),
    /// List the messages of a topic with a key.
    #[command(name = "queryMsgByKey")]
    QueryMsgByKey(messages::QueryMsgByKeyArgs),
    /// Show the message at a queue offset.
    #[command(name = "queryMsgByOffset")]
    QueryMsgByOffset(messages::QueryMsgByOffsetArgs),
    /// Show a broker's runtime status.
    #[command(name = "brokerStatus")]
    BrokerStatus(BrokerOrCluster),
    /// Show a broker's configuration.
    #[command(name = "getBrokerConfig")]
    GetBrokerConfig(BrokerOrCluster),
    /// Change one key of a broker's configuration.
    #[command(name = "updateBrokerConfig")]
    UpdateBrokerConfig(brokers::UpdateBrokerConfigArgs),
    /// Send one message.
    #[command(name = "sendMessage")]
    SendMessage(messages::SendMessageArgs),
    /// Read messages from a topic's queues (the group's offsets are not moved).
    #[command(name = "consumeMessage")]
    ConsumeMessage(messages::ConsumeMessageArgs),
    /// Create an ACL 2.0 user.
    #[command(name = "createUser")]
    CreateUser(auth::CreateUserArgs),
    /// Change a user's password, type or status.
    #[command(name = "updateUser")]
    UpdateUser(auth::UpdateUserArgs),
    /// Delete a user and its ACL.
    #[command(name = "deleteUser")]
    DeleteUser(auth::UserArgs),
    /// Show a user.
    #[command(name = "getUser")]
    GetUser(auth::UserArgs),
    /// List the users.
    #[command(name = "listUser")]
    ListUser(auth::ListUserArgs),
    /// Create a subject's ACL, or merge these entries into it.
    #[command(name = "createAcl")]
    CreateAcl(auth::AclArgs),
    /// Merge these entries into a subject's ACL.
    #[command(name = "updateAcl")]
    UpdateAcl(auth::AclArgs),
    /// Delete a subject's ACL, or one resource's entry of it.
    #[command(name = "deleteAcl")]
    DeleteAcl(auth::DeleteAclArgs),
    /// Show a subject's ACL.
    #[command(name = "getAcl")]
    GetAcl(auth::GetAclArgs),
    /// List the ACLs.
    #[command(name = "listAcl")]
    ListAcl(auth::ListAclArgs),
}

/// What a command failed on.
#[derive(Debug)]
pub enum CliError {
    Admin(AdminError),
    Usage(String),
}

impl From<AdminError> for CliError {
    fn from(e: AdminError) -> Self {
        CliError::Admin(e)
    }
}

impl CliError {
    fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) | CliError::Admin(AdminError::InvalidArgument(_)) => EXIT_USAGE,
            CliError::Admin(e) if e.is_unreachable() => EXIT_UNREACHABLE,
            CliError::Admin(_) => EXIT_REFUSED,
        }
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Admin(e) => write!(f, "{e}"),
            CliError::Usage(m) => write!(f, "{m}"),
        }
    }
}

pub type CliResult = Result<(), CliError>;

/// What every command gets: the client and the output form.
pub struct Ctx {
    pub client: AdminClient,
    pub json: bool,
}

/// Runs one admin command; returns the process's exit code (the error already on stderr).
pub fn run(args: AdminArgs) -> i32 {
    let addr = args
        .namesrv_addr
        .clone()
        .or_else(|| {
            std::env::var("NAMESRV_ADDR")
                .ok()
                .filter(|a| !a.trim().is_empty())
        })
        .unwrap_or_else(|| DEFAULT_NAMESRV.to_owned());
    let mut client = match AdminClient::new(&addr) {
        Ok(c) => c.with_timeout(std::time::Duration::from_millis(args.timeout_ms.max(1))),
        Err(e) => return fail(CliError::Admin(e)),
    };
    let env = |k: &str| std::env::var(k).ok();
    let home = env("ROCKETMQ_HOME").map(std::path::PathBuf::from);
    client = match auth::credentials(
        (args.access_key.as_deref(), args.secret_key.as_deref()),
        (env("ROCKETMQ_ACCESS_KEY"), env("ROCKETMQ_SECRET_KEY")),
        home.as_deref(),
    ) {
        Ok(Some(c)) => client.with_credentials(c),
        Ok(None) => client,
        Err(e) => return fail(e),
    };
    if args.tls || args.tls_config_file.is_some() {
        let settings = crate::tls::settings::TlsSettings {
            enable: Some(true),
            config_file: args.tls_config_file.clone(),
            ..Default::default()
        };
        match crate::tls::TlsContext::load(&settings) {
            Ok(crate::tls::TlsContext {
                client: Some(c), ..
            }) => client = client.with_tls(c),
            Ok(_) => {}
            Err(e) => {
                return fail(CliError::Admin(crate::AdminError::InvalidArgument(
                    format!("tls: {e}"),
                )))
            }
        }
    }
    let ctx = Ctx {
        client,
        json: args.json,
    };
    let res = match &args.cmd {
        AdminCmd::ClusterList(a) => topics::cluster_list(&ctx, a),
        AdminCmd::TopicList => topics::topic_list(&ctx),
        AdminCmd::TopicRoute(a) => topics::topic_route(&ctx, a),
        AdminCmd::TopicStatus(a) => topics::topic_status(&ctx, a),
        AdminCmd::UpdateTopic(a) => topics::update_topic(&ctx, a),
        AdminCmd::DeleteTopic(a) => topics::delete_topic(&ctx, a),
        AdminCmd::UpdateSubGroup(a) => groups::update_sub_group(&ctx, a),
        AdminCmd::UpdateTopicList(a) => lists::update_topic_list(&ctx, a),
        AdminCmd::UpdateSubGroupList(a) => lists::update_sub_group_list(&ctx, a),
        AdminCmd::DeleteSubGroup(a) => groups::delete_sub_group(&ctx, a),
        AdminCmd::SetConsumeMode(a) => modes::set_consume_mode(&ctx, a),
        AdminCmd::ConsumerProgress(a) => groups::consumer_progress(&ctx, a),
        AdminCmd::ConsumerConnection(a) => groups::consumer_connection(&ctx, a),
        AdminCmd::ProducerConnection(a) => groups::producer_connection(&ctx, a),
        AdminCmd::ResetOffsetByTime(a) => groups::reset_offset_by_time(&ctx, a),
        AdminCmd::QueryMsgById(a) => messages::query_msg_by_id(&ctx, a),
        AdminCmd::QueryMsgByKey(a) => messages::query_msg_by_key(&ctx, a),
        AdminCmd::QueryMsgByOffset(a) => messages::query_msg_by_offset(&ctx, a),
        AdminCmd::BrokerStatus(a) => brokers::broker_status(&ctx, a),
        AdminCmd::GetBrokerConfig(a) => brokers::get_broker_config(&ctx, a),
        AdminCmd::UpdateBrokerConfig(a) => brokers::update_broker_config(&ctx, a),
        AdminCmd::SendMessage(a) => messages::send_message(&ctx, a),
        AdminCmd::ConsumeMessage(a) => messages::consume_message(&ctx, a),
        AdminCmd::CreateUser(a) => auth::create_user(&ctx, a),
        AdminCmd::UpdateUser(a) => auth::update_user(&ctx, a),
        AdminCmd::DeleteUser(a) => auth::delete_user(&ctx, a),
        AdminCmd::GetUser(a) => auth::get_user(&ctx, a),
        AdminCmd::ListUser(a) => auth::list_user(&ctx, a),
        AdminCmd::CreateAcl(a) => auth::create_acl(&ctx, a),
        AdminCmd::UpdateAcl(a) => auth::update_acl(&ctx, a),
        AdminCmd::DeleteAcl(a) => auth::delete_acl(&ctx, a),
        AdminCmd::GetAcl(a) => auth::get_acl(&ctx, a),
        AdminCmd::ListAcl(a) => auth::list_acl(&ctx, a),
    };
    match res {
        Ok(()) => EXIT_OK,
        Err(e) => fail(e),
    }
}

fn fail(e: CliError) -> i32 {
    eprintln!("ringmq admin: {e}");
    e.exit_code()
}

/// The `-b`/`-c` pair of the commands that act on one broker or on every master of a cluster.
#[derive(Args, Debug)]
pub struct BrokerOrCluster {
    /// Broker address.
    #[arg(short = 'b', long = "brokerAddr")]
    pub broker: Option<String>,
    /// Every master of this cluster.
    #[arg(short = 'c', long = "clusterName")]
    pub cluster: Option<String>,
}

impl BrokerOrCluster {
    /// The broker addresses named: the broker given, or every master of the cluster; neither
    /// is a usage error.
    pub fn targets(&self, ctx: &Ctx) -> Result<Vec<String>, CliError> {
        match (&self.broker, &self.cluster) {
            (Some(b), _) => Ok(vec![b.clone()]),
            (None, Some(c)) => masters_of(ctx, c),
            (None, None) => Err(CliError::Usage(
                "give a broker address (-b) or a cluster name (-c)".into(),
            )),
        }
    }
}

/// The addresses of every master of `cluster`.
pub fn masters_of(ctx: &Ctx, cluster: &str) -> Result<Vec<String>, CliError> {
    Ok(ctx
        .client
        .masters(Some(cluster))?
        .into_iter()
        .map(|b| b.addr)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        admin: AdminArgs,
    }

    /// Each kind of failure maps to its documented exit code.
    #[test]
    fn exit_codes() {
        let io = || std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let unreachable = AdminError::Unreachable {
            addr: "a:1".into(),
            source: io(),
        };
        let refused = AdminError::Refused {
            addr: "a:1".into(),
            what: "x".into(),
            code: 17,
            remark: String::new(),
        };
        assert_eq!(CliError::from(unreachable).exit_code(), EXIT_UNREACHABLE);
        assert_eq!(CliError::from(refused).exit_code(), EXIT_REFUSED);
        assert_eq!(
            CliError::from(AdminError::NotFound("x".into())).exit_code(),
            EXIT_REFUSED
        );
        assert_eq!(
            CliError::from(AdminError::InvalidArgument("x".into())).exit_code(),
            EXIT_USAGE
        );
        assert_eq!(CliError::Usage("x".into()).exit_code(), EXIT_USAGE);
    }

    /// mqadmin's short flags parse, global flags go after the command, and an unknown flag
    /// is clap's error.
    #[test]
    fn mqadmin_flags_parse() {
        let cli = Cli::try_parse_from([
            "admin",
            "updateTopic",
            "-t",
            "T",
            "-c",
            "C",
            "-r",
            "4",
            "-o",
            "true",
            "-n",
            "h:1",
            "--json",
        ])
        .unwrap();
        assert_eq!(cli.admin.namesrv_addr.as_deref(), Some("h:1"));
        assert!(cli.admin.json);
        match cli.admin.cmd {
            AdminCmd::UpdateTopic(a) => {
                assert_eq!(
                    (a.topic.as_str(), a.target.cluster.as_deref()),
                    ("T", Some("C"))
                );
                assert_eq!((a.read_queue_nums, a.write_queue_nums, a.perm), (4, 8, 6));
                assert_eq!(a.order, Some(true));
            }
            other => panic!("parsed as {other:?}"),
        }
        let e = Cli::try_parse_from(["admin", "topicList", "-x"])
            .err()
            .unwrap();
        assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument);
        let e = Cli::try_parse_from(["admin", "topicRoute"]).err().unwrap();
        assert_eq!(e.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }
}
