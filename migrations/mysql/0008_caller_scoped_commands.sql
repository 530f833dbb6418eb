-- A command's identity is (caller, command_id) (SPEC §13.1): two callers' equal command ids
-- are two commands, and a replay answers only its own caller. `caller` is the authenticated
-- principal (`user:<id>`, `service:<name>`), under auth.mode none the user the command names;
-- '' for rows logged before this migration and for commands naming nobody. A row with caller ''
-- is taken as a caller's own only when its fingerprint (which covered the caller) matches.
ALTER TABLE room_command_log
    ADD COLUMN caller VARCHAR(128) NOT NULL DEFAULT '' AFTER command_id,
    DROP INDEX uk_room_command_log_command_id,
    ADD UNIQUE KEY uk_room_command_log_command_caller (command_id, caller);

-- A refund is keyed by the wallet's idempotency key of the command: SHA-256 over (caller,
-- command_id) for commands logged from now on, the bare command_id before.
ALTER TABLE room_payment_refund RENAME COLUMN command_id TO wallet_key;
