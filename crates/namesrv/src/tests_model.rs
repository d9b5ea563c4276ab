//! Property test of the route table: any interleaving of registrations, unregistrations,
//! heartbeats, expiry scans and connection closes keeps the table's invariants, every route
//! names only registered broker groups, and once every broker is gone nothing is left.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::route_table::{QueueRoute, Registration, RouteTable, TopicConfigVersion};

#[derive(Clone, Debug)]
enum Op {
    Register {
        name: u8,
        id: u8,
        topics: Vec<u8>,
        counter: u8,
        conn: u8,
    },
    Unregister {
        name: u8,
        id: u8,
    },
    Touch {
        name: u8,
        id: u8,
    },
    Close {
        conn: u8,
    },
    Advance {
        ms: u32,
    },
}

fn addr(name: u8, id: u8) -> String {
    format!("10.0.{name}.{id}:10911")
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3u8, 0..2u8, prop::collection::vec(0..4u8, 0..4), 0..3u8, 0..3u8)
            .prop_map(|(name, id, topics, counter, conn)| Op::Register { name, id, topics, counter, conn }),
        1 => (0..3u8, 0..2u8).prop_map(|(name, id)| Op::Unregister { name, id }),
        1 => (0..3u8, 0..2u8).prop_map(|(name, id)| Op::Touch { name, id }),
        1 => (0..3u8).prop_map(|conn| Op::Close { conn }),
        1 => (0..90_000u32).prop_map(|ms| Op::Advance { ms }),
    ]
}

fn apply(t: &mut RouteTable, op: &Op, now: &mut i64) {
    match op {
        Op::Register {
            name,
            id,
            topics,
            counter,
            conn,
        } => {
            let topics: BTreeMap<String, QueueRoute> = topics
                .iter()
                .map(|i| {
                    let q = QueueRoute {
                        read_queue_nums: 4,
                        write_queue_nums: 4,
                        perm: 6,
                        topic_sys_flag: 0,
                    };
                    (format!("T{i}"), q)
                })
                .collect();
            let reg = Registration {
                cluster: "C".into(),
                broker_addr: addr(*name, *id),
                broker_name: format!("b{name}"),
                broker_id: i64::from(*id),
                ha_server_addr: "ha".into(),
                zone_name: None,
                enable_acting_master: None,
                heartbeat_timeout_ms: 120_000,
                data_version: TopicConfigVersion {
                    counter: i64::from(*counter),
                    ..Default::default()
                },
                topics,
                filter_servers: Vec::new(),
                conn_id: u64::from(*conn),
            };
            t.register(reg, *now);
        }
        Op::Unregister { name, id } => t.unregister("C", &addr(*name, *id), &format!("b{name}")),
        Op::Touch { name, id } => {
            t.touch("C", &addr(*name, *id), *now);
        }
        Op::Close { conn } => {
            t.remove_by_conn(u64::from(*conn));
        }
        Op::Advance { ms } => {
            *now += i64::from(*ms);
            t.scan_not_active(*now);
        }
    }
}

proptest! {
    #[test]
    fn route_table_invariants_hold(ops in prop::collection::vec(op(), 1..60)) {
        let mut t = RouteTable::new();
        let mut now = 0i64;
        for op in &ops {
            apply(&mut t, op, &mut now);
            t.check_invariants();
            for topic in t.topics().map(str::to_owned).collect::<Vec<_>>() {
                let route = t.pickup_route(&topic).expect("every topic has a live group");
                for (name, _) in &route.queue_datas {
                    prop_assert!(t.broker_groups().contains_key(*name));
                }
                for g in &route.broker_datas {
                    for a in g.addrs.values() {
                        prop_assert!(t.live("C", a).is_some(), "route names a dead addr {}", a);
                    }
                }
            }
        }
        prop_assert!(t.scan_not_active(now + 120_001).len() <= 6);
        t.check_invariants();
        prop_assert!(t.broker_groups().is_empty());
        prop_assert!(t.clusters().is_empty());
        prop_assert_eq!(t.topics().count(), 0);
    }
}
