// A real client's admin (rocketmq-client-rust's DefaultMQAdminExt, signing with its
// AclClientRPCHook) creates a user and an ACL on ringmq with its own UserInfo and AclInfo
// bodies, and reads them back.

use crate::common;

use std::sync::Arc;

use cheetah_string::CheetahString;
use common::*;
use rocketmq_client_rust::{AclClientRPCHook, AuthAdmin, DefaultMQAdminExt, SessionCredentials};

const ROOT_PW: &str = "root-secret-3";

#[test]
fn rust_admin_creates_a_user_and_an_acl() {
    let broker = Broker::start_with(&[
        ("authenticationEnabled", "true"),
        ("authorizationEnabled", "true"),
        (
            "initAuthenticationUser",
            r#"{"username":"root","password":"root-secret-3"}"#,
        ),
    ]);
    let ns = broker.namesrv_addr();
    let addr = CheetahString::from(broker.broker_addr());
    run(async move {
        let hook = Arc::new(AclClientRPCHook::new(SessionCredentials::with_keys(
            "root", ROOT_PW,
        )));
        let mut admin = DefaultMQAdminExt::with_admin_ext_group_and_rpc_hook(
            client_runtime("admin-auth"),
            unique_group("admin"),
            hook,
        );
        admin.set_namesrv_addr(ns);
        within(15, "admin.start()", admin.start())
            .await
            .expect("admin.start()");

        within(
            15,
            "create user",
            AuthAdmin::create_user(
                &admin,
                addr.clone(),
                "alice".into(),
                "alice-pw".into(),
                "Normal".into(),
            ),
        )
        .await
        .expect("AUTH_CREATE_USER from the Rust client");
        let user = within(
            15,
            "get user",
            AuthAdmin::get_user(&admin, addr.clone(), "alice".into()),
        )
        .await
        .expect("AUTH_GET_USER")
        .expect("alice exists");
        assert_eq!(user.password.as_deref(), Some("alice-pw"));
        assert_eq!(user.user_type.as_deref(), Some("Normal"));
        assert_eq!(user.user_status.as_deref(), Some("enable"));

        within(
            15,
            "create acl",
            AuthAdmin::create_acl(
                &admin,
                addr.clone(),
                "User:alice".into(),
                vec!["Topic:orders".into(), "Group:billing".into()],
                vec!["Pub".into(), "Sub".into()],
                vec!["127.0.0.1".into()],
                "Allow".into(),
            ),
        )
        .await
        .expect("AUTH_CREATE_ACL from the Rust client");
        let acl = within(
            15,
            "get acl",
            AuthAdmin::get_acl(&admin, addr.clone(), "User:alice".into()),
        )
        .await
        .expect("the ACL through AUTH_LIST_ACL");
        let policies = acl.policies.expect("policies");
        assert_eq!(policies.len(), 1, "{policies:?}");
        let entries = policies[0].entries.clone().expect("entries");
        let resources: Vec<String> = entries
            .iter()
            .map(|e| e.resource.as_deref().unwrap_or_default().to_string())
            .collect();
        assert_eq!(resources, ["Topic:orders", "Group:billing"]);
        assert_eq!(entries[0].decision.as_deref(), Some("Allow"));
        admin.shutdown().await;
    });
}
