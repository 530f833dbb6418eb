-- The claim by room (docs/DESIGN.md, "The outbox row and the claim"). A claim lists the rooms
-- with undelivered rows after its round-robin cursor, with each room's oldest undelivered row:
-- one loose index scan per undelivered status (`WHERE status = ? AND room_id > ? GROUP BY
-- status, room_id` with MIN(id)), a seek per room however many rows the room holds, and rooms
-- whose rows are all delivered or parked are never visited.
CREATE INDEX idx_room_outbox_status_room ON room_outbox (status, room_id, id);
-- Then it reads each chosen room's rows from that head in id order (`WHERE room_id = ? AND id >=
-- head ORDER BY id LIMIT n`): a handful of rows, never the room's delivered history.
CREATE INDEX idx_room_outbox_room ON room_outbox (room_id, id);
