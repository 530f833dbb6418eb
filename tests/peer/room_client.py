#!/usr/bin/env python3
"""A reference client of a room's IM group, written from docs/CLIENT.md alone: it shares no code
with the Rust side and speaks only HTTP (the fake IM's record of what the group received, and
room-service's public API).

    python3 tests/peer/room_client.py --im URL --group GROUP_ID --service URL --room ROOM_ID
        [--token TOKEN] [--duplicate-every K] [--shuffle-window W] [--offline FROM:TO]
        [--seed S] [--buffer-messages B] [--buffer-size N]

It replays the messages the fake IM accepted for GROUP_ID as one phone would receive them,
through a hostile network: every K-th message delivered a second time later, messages shuffled
within windows of W, and the messages whose first element is the FROM-th..(TO-1)-th element IM
recorded for the group (from 0) lost while the phone was offline. Time is the message count: an event waits in the reorder buffer for at most B
messages (or while the buffer holds at most N events) before its gap is filled from
`GET /v1/rooms/{room}/events`.

Prints one JSON object: `events` (the envelopes shown, in the order shown, each as the exact
JSON string IM or the API carried), `position` (the last version shown), `api_calls`,
`reloads` (times `recovered: false` made it reload the state) and `duplicates_dropped`.
Exits 1 when the client itself saw a broken promise (a page out of order, a version shown
twice).
"""

import argparse
import json
import random
import sys
import urllib.parse
import urllib.request


def http_get(url, token):
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def im_messages(im, group):
    """The messages IM accepted for `group`, in IM's order: each `(n, envelopes)`, where `n` is
    the place of its first element among every element IM recorded for the group."""
    records = http_get(f"{im}/fake/messages?group={urllib.parse.quote(group)}", None)
    messages, current, first = [], [], 0
    for n, record in enumerate(records):
        if record.get("index", 0) == 0 and current:
            messages.append((first, current))
            current = []
        if not current:
            first = n
        current.append(record["data"])
        if len(current) == record.get("elements", 1):
            messages.append((first, current))
            current = []
    if current:
        messages.append((first, current))
    return messages


def hostile_network(messages, duplicate_every, shuffle_window, offline, seed):
    """What the phone receives: duplicates, reorders and an offline window."""
    rng = random.Random(seed)
    received = [m for n, m in messages if not (offline[0] <= n < offline[1])]
    if duplicate_every:
        with_dups = []
        for i, message in enumerate(received):
            with_dups.append(message)
            if i % duplicate_every == duplicate_every - 1:
                # The repeat comes a few messages later, as a re-delivery would.
                with_dups.insert(max(0, len(with_dups) - rng.randint(0, 3)), message)
        received = with_dups
    if shuffle_window > 1:
        shuffled = []
        for start in range(0, len(received), shuffle_window):
            window = received[start:start + shuffle_window]
            rng.shuffle(window)
            shuffled.extend(window)
        received = shuffled
    return received


class RoomClient:
    """docs/CLIENT.md's rules: dedup by event_id, reorder by room_version, fill a lasting gap
    from the events API, reload the state on `recovered: false`."""

    def __init__(self, service, room, token, buffer_messages, buffer_size):
        self.service, self.room, self.token = service, room, token
        self.buffer_messages, self.buffer_size = buffer_messages, buffer_size
        self.position = None
        self.seen_ids = set()
        self.buffer = {}  # version -> (envelope string, arrival tick)
        self.shown = []
        self.tick = 0
        self.api_calls = self.reloads = self.duplicates_dropped = 0

    def join(self):
        """Rule 6: the state first; its version is the position to follow from."""
        room = http_get(f"{self.service}/v1/rooms/{urllib.parse.quote(self.room)}", self.token)
        self.position = room["version"]

    def receive(self, message):
        """One IM message: every element, in order (rule 1)."""
        self.tick += 1
        for data in message:
            self.offer(data, json.loads(data))
        self.fill_lasting_gap()

    def offer(self, data, envelope):
        version = envelope["room_version"]
        if envelope["event_id"] in self.seen_ids or version <= self.position or version in self.buffer:
            self.duplicates_dropped += 1  # rule 2
            return
        self.buffer[version] = (data, self.tick)
        self.drain()

    def drain(self):
        """Rule 3: show what follows the position contiguously."""
        while self.position + 1 in self.buffer:
            data, _ = self.buffer.pop(self.position + 1)
            self.show(data)

    def show(self, data):
        envelope = json.loads(data)
        if envelope["room_version"] != self.position + 1 or envelope["event_id"] in self.seen_ids:
            raise SystemExit(f"broken promise: showing version {envelope['room_version']} after {self.position}")
        self.seen_ids.add(envelope["event_id"])
        self.shown.append(data)
        self.position = envelope["room_version"]

    def fill_lasting_gap(self, at_end=False):
        """Rule 4: a gap that outlives the buffer is filled from the events API."""
        if not self.buffer:
            return
        oldest_tick = min(tick for _, tick in self.buffer.values())
        waited = self.tick - oldest_tick >= self.buffer_messages
        if at_end or waited or len(self.buffer) > self.buffer_size:
            self.catch_up(max(self.buffer))

    def catch_up(self, target):
        """Pages of the events API from the last contiguous version until `target` is shown."""
        while self.position < target:
            query = urllib.parse.urlencode({"after_version": self.position, "limit": 300})
            page = http_get(f"{self.service}/v1/rooms/{urllib.parse.quote(self.room)}/events?{query}", self.token)
            self.api_calls += 1
            if not page["recovered"]:
                self.reload()  # rule 5
                return
            if not page["events"]:
                return
            for event in page["events"]:
                data = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
                if event["room_version"] != self.position + 1:
                    raise SystemExit(f"broken promise: page gave {event['room_version']} after {self.position}")
                self.buffer.pop(event["room_version"], None)
                self.show(data)
            if page["next_after"] != self.position:
                raise SystemExit(f"broken promise: next_after {page['next_after']} after showing {self.position}")
            self.drain()

    def reload(self):
        self.reloads += 1
        self.join()
        self.buffer = {v: e for v, e in self.buffer.items() if v > self.position}
        self.drain()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--im", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--service", required=True)
    parser.add_argument("--room", required=True)
    parser.add_argument("--token")
    parser.add_argument("--duplicate-every", type=int, default=0)
    parser.add_argument("--shuffle-window", type=int, default=1)
    parser.add_argument("--offline", default="0:0")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--buffer-messages", type=int, default=8)
    parser.add_argument("--buffer-size", type=int, default=64)
    parser.add_argument("--start-at", type=int, default=1, help="position before the first message (1: joined at creation)")
    args = parser.parse_args()
    offline = tuple(int(x) for x in args.offline.split(":"))
    messages = hostile_network(im_messages(args.im, args.group), args.duplicate_every, args.shuffle_window, offline, args.seed)
    client = RoomClient(args.service, args.room, args.token, args.buffer_messages, args.buffer_size)
    client.position = args.start_at
    for message in messages:
        client.receive(message)
    # The feed is over: whatever is still missing up to the room's version now comes from the API.
    room = http_get(f"{args.service}/v1/rooms/{urllib.parse.quote(args.room)}", args.token)
    client.fill_lasting_gap(at_end=True)
    client.catch_up(room["version"])
    print(json.dumps({
        "events": client.shown,
        "position": client.position,
        "api_calls": client.api_calls,
        "reloads": client.reloads,
        "duplicates_dropped": client.duplicates_dropped,
        "received_messages": len(messages),
    }))


if __name__ == "__main__":
    sys.exit(main())
