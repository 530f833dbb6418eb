-- A row's command's trace context; mirrors migrations/mysql/0010_outbox_trace_context.sql
-- (the comments there say what the column is for).
ALTER TABLE room_outbox ADD COLUMN trace_context TEXT NULL;
