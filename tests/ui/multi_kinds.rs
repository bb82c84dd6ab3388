#![allow(unused_variables)]

use distlock::{LockError, distributed_lock};

#[distributed_lock(["doc:{a}", "doc:{b}"], read)]
async fn read_both(a: u32, b: u32) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(["doc:{a}", "doc:{b}"], wait = "1s", write)]
async fn write_both(a: u32, b: u32) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(["job:{a}", "job:{b}"], fair)]
async fn fair_both(a: u32, b: u32) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(["pool:{a}", "pool:{b}"], max = 8)]
async fn permits_of_both(a: u32, b: u32) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(["pool:{a}", "pool:{b}"], permits = 2, max = 8)]
async fn two_permits_of_both(a: u32, b: u32) -> Result<(), LockError> {
    Ok(())
}

fn main() {}
