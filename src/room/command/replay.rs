//! Answering a repeated command — the same caller's `command_id` — from the command log: the
//! original outcome (same version, same event ids, `applied` as before), or 409 when the caller
//! used the id for another command. Another caller's use of the id is another command.

use std::collections::HashMap;

use super::decide::Committed;
use super::outcome::{CommandResponse, Delivery, EventReceipt, LoggedOutcome};
use crate::delivery::groups::Groups;
use crate::domain::{DomainError, RoomSnapshot};
use crate::room::error::RoomError;
use crate::store::{CommandKey, OutboxStatus, SharedCommandStore, StoredCommand};

/// Answers repeated command ids from the command log.
pub(in crate::room) struct Replay {
    repo: SharedCommandStore,
    /// The IM group calls the events carry: a row with one was sent, not skipped.
    groups: Groups,
}

impl Replay {
    /// Reads the log through `repo`; the events carry the calls of `groups`.
    pub(in crate::room) fn new(repo: SharedCommandStore, groups: Groups) -> Self {
        Self { repo, groups }
    }

    /// Answers a command id found in the log (with `room` as the room now), or `refused` when
    /// it is not there. Called with the cell locked.
    pub(in crate::room) async fn answer(
        &self,
        key: &CommandKey,
        fingerprint: &str,
        refused: Option<DomainError>,
        room: Option<RoomSnapshot>,
    ) -> Result<Committed, RoomError> {
        let found = self.repo.find_command(key).await?;
        let Some(stored) = found.into_iter().find(|row| row.belongs_to(key, fingerprint)) else {
            return Err(match refused {
                Some(e) => e.into(),
                None => RoomError::VersionConflict("command id is being used concurrently; retry".into()),
            });
        };
        if stored.fingerprint != fingerprint {
            return Err(RoomError::CommandConflict(format!(
                "command_id {} was already used for a different command",
                key.command_id
            )));
        }
        let response = self.replayed_response(stored, room).await?;
        Ok(Committed { response, envelopes: Vec::new() })
    }

    async fn replayed_response(
        &self,
        stored: StoredCommand,
        room: Option<RoomSnapshot>,
    ) -> Result<CommandResponse, RoomError> {
        let logged: LoggedOutcome = serde_json::from_str(&stored.outcome)
            .map_err(|e| RoomError::Corrupt(format!("logged outcome: {e}")))?;
        let ids: Vec<String> = logged.events.iter().map(|e| e.event_id.clone()).collect();
        let statuses: HashMap<String, OutboxStatus> =
            self.repo.outbox_statuses(&ids).await?.into_iter().collect();
        let events = logged
            .events
            .into_iter()
            .map(|e| {
                let delivery = match statuses.get(&e.event_id) {
                    Some(OutboxStatus::Delivered) | None if !self.groups.reaches_im(&e.event_type) => {
                        Delivery::Skipped
                    }
                    // Only delivered rows are ever deleted (retention), so a missing one was.
                    Some(OutboxStatus::Delivered) | None => Delivery::Delivered,
                    Some(_) => Delivery::Pending,
                };
                EventReceipt { event_id: e.event_id, event_type: e.event_type, delivery }
            })
            .collect();
        Ok(CommandResponse {
            applied: logged.applied,
            room_version: logged.room_version,
            replayed: true,
            room,
            events,
        })
    }
}
