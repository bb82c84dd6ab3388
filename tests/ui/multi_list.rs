#![allow(unused_variables)]

use distlock::{LockError, distributed_lock};

const ACCOUNT: &str = "account:{id}";

#[distributed_lock([])]
async fn nothing() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock([ACCOUNT, 7, "account:{to}"])]
async fn not_strings(id: u32, to: u32) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(["account:{from}", "account:{from}"])]
async fn twice(from: u32) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(["account:{from}", "account:{too}", "ledger:{form}"])]
async fn unknown_placeholders(from: u32, to: u32) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(["account:{from}", ""])]
async fn empty_template(from: u32) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(["account:{from}", "account:{to}" wait = "1s"])]
async fn missing_comma(from: u32, to: u32) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock([
    "shard:0",
    "shard:1",
    "shard:2",
    "shard:3",
    "shard:4",
    "shard:5",
    "shard:6",
    "shard:7",
    "shard:8",
    "shard:9",
    "shard:10",
    "shard:11",
    "shard:12",
    "shard:13",
    "shard:14",
    "shard:15",
    "shard:16",
    "shard:17",
    "shard:18",
    "shard:19",
    "shard:20",
    "shard:21",
    "shard:22",
    "shard:23",
    "shard:24",
    "shard:25",
    "shard:26",
    "shard:27",
    "shard:28",
    "shard:29",
    "shard:30",
    "shard:31",
    "shard:32",
    "shard:33",
    "shard:34",
    "shard:35",
    "shard:36",
    "shard:37",
    "shard:38",
    "shard:39",
    "shard:40",
    "shard:41",
    "shard:42",
    "shard:43",
    "shard:44",
    "shard:45",
    "shard:46",
    "shard:47",
    "shard:48",
    "shard:49",
    "shard:50",
    "shard:51",
    "shard:52",
    "shard:53",
    "shard:54",
    "shard:55",
    "shard:56",
    "shard:57",
    "shard:58",
    "shard:59",
    "shard:60",
    "shard:61",
    "shard:62",
    "shard:63",
    "shard:64",
])]
async fn too_many() -> Result<(), LockError> {
    Ok(())
}

fn main() {}
