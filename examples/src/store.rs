//! A toy order store that checks fencing tokens: each order remembers the
//! newest token that wrote it and refuses writes with an older one.

use std::collections::HashMap;
use std::sync::Mutex;

use lock_core::FencingToken;

/// One order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Order {
    /// Paid so far.
    pub paid_cents: u64,
    /// Newest token that wrote this order.
    pub fence: u64,
}

/// Orders by id.
#[derive(Debug, Default)]
pub struct OrderStore {
    orders: Mutex<HashMap<u64, Order>>,
}

impl OrderStore {
    /// The order, if it was ever paid.
    pub fn get(&self, id: u64) -> Option<Order> {
        self.orders
            .lock()
            .expect("store poisoned")
            .get(&id)
            .copied()
    }

    /// Adds `cents` to order `id` if `token` is not older than the newest
    /// token that wrote it; returns the new total, or the newer token.
    pub fn pay_fenced(&self, id: u64, cents: u64, token: FencingToken) -> Result<u64, u64> {
        let mut orders = self.orders.lock().expect("store poisoned");
        let order = orders.entry(id).or_default();
        if token.get() < order.fence {
            return Err(order.fence);
        }
        order.fence = token.get();
        order.paid_cents += cents;
        Ok(order.paid_cents)
    }
}
