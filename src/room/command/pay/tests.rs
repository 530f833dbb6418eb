use super::*;
use crate::domain::DomainError;
use crate::store::StoreError;
use crate::wallet::WalletError;

fn response(applied: bool, replayed: bool) -> Result<CommandResponse, RoomError> {
    Ok(CommandResponse { applied, room_version: 1, replayed, room: None, events: Vec::new() })
}

fn store_error() -> Arc<StoreError> {
    Arc::new(StoreError::Config("down".into()))
}

#[test]
fn a_refunded_key_is_remembered() {
    let keys = RefundedKeys::default();
    assert!(!keys.contains("c-1"));
    keys.remember("c-1");
    assert!(keys.contains("c-1") && !keys.contains("c-2"));
}

#[test]
fn only_answers_that_committed_nothing_refund() {
    assert!(!nothing_committed(&response(true, false)));
    assert!(!nothing_committed(&response(true, true)));
    assert!(nothing_committed(&response(false, false)));
    assert!(nothing_committed(&Err(DomainError::RoomClosed.into())));
    assert!(nothing_committed(&Err(RoomError::NotCommitted(store_error()))));
    // The COMMIT may have landed: the retry settles it.
    assert!(!nothing_committed(&Err(RoomError::Unavailable(store_error()))));
    assert!(!nothing_committed(&Err(RoomError::VersionConflict("busy".into()))));
    assert!(!nothing_committed(&Err(RoomError::CommandConflict("reused".into()))));
    // Fenced or not the owner: the retry is routed to the owner and pays under the same key.
    assert!(!nothing_committed(&Err(RoomError::NotOwner)));
    assert!(!nothing_committed(&Err(RoomError::Wallet(WalletError::InsufficientBalance))));
}
