-- One trace per command (SPEC §13.4; README, "Traces"). An outbox row keeps the W3C
-- `traceparent` of the command that wrote it, when that command's trace was sampled (NULL
-- otherwise, and for rows written before this migration), so the worker's redelivery, on any
-- node and after any restart, is a span linked to the command's trace; so is a consumer's
-- delivery. 55 characters: version 00 of the header. MariaDB adds the column in place (instant:
-- appended last, nullable, no default to write).
ALTER TABLE room_outbox ADD COLUMN trace_context VARCHAR(55) NULL;
