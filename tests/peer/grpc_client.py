#!/usr/bin/env python3
"""An independent gRPC client of room.v1.RoomService: generates its own stubs from the proto
with grpcio-tools and drives a running service, sharing no code with the Rust side.

    python3 tests/peer/grpc_client.py PROTO_ROOT HOST:PORT

Prints "ok" and exits 0 when every check holds; otherwise prints what failed and exits 1.
Needs `pip install grpcio grpcio-tools` (scripts/test.sh installs them).
"""

import importlib
import sys
import tempfile

import grpc
from grpc_tools import protoc


def stubs(proto_root, out):
    args = ["protoc", f"-I{proto_root}", f"--python_out={out}", f"--grpc_python_out={out}", "room/v1/room.proto"]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed on room/v1/room.proto")
    sys.path.insert(0, out)
    return importlib.import_module("room.v1.room_pb2"), importlib.import_module("room.v1.room_pb2_grpc")


def expect_code(call, code, field=None):
    try:
        call()
    except grpc.RpcError as error:
        assert error.code() == code, f"expected {code}, got {error.code()}: {error.details()}"
        if field is not None:
            assert error.details().startswith(field), f"{error.details()!r} does not name {field}"
        return error
    raise AssertionError(f"expected {code}, the call succeeded")


def main():
    proto_root, address = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as out:
        pb, rpc = stubs(proto_root, out)
        with grpc.insecure_channel(address) as channel:
            rooms = rpc.RoomServiceStub(channel)
            created, call = rooms.CreateRoom.with_call(
                pb.CreateRoomRequest(command_id="py-c1", room_id="py-r1", owner_id="alice", title="t"),
                timeout=5,
                metadata=[("x-request-id", "py-request-1")],
            )
            assert created.applied and created.room_version == 1, created
            assert created.room.status == pb.ROOM_STATUS_OPEN, created
            assert dict(call.initial_metadata()).get("x-request-id") == "py-request-1", call.initial_metadata()
            joined = rooms.JoinRoom(pb.MemberRequest(command_id="py-c2", room_id="py-r1", user_id="bob"), timeout=5)
            assert joined.room_version == 2 and not joined.replayed, joined
            again = rooms.JoinRoom(pb.MemberRequest(command_id="py-c2", room_id="py-r1", user_id="bob"), timeout=5)
            assert again.replayed and again.room_version == 2, again
            gift = pb.SendGiftRequest(
                command_id="py-c3", room_id="py-r1", sender_id="bob", receiver_id="alice",
                gift_id="rose", count=3, unit_value=10,
            )
            sent = rooms.SendGift(gift, timeout=5)
            assert sent.room.heat == 30 and "RoomGiftSent" in [e.event_type for e in sent.events], sent
            rooms.Heartbeat(pb.HeartbeatRequest(room_id="py-r1", user_id="bob"), timeout=5)
            room = rooms.GetRoom(pb.GetRoomRequest(room_id="py-r1"), timeout=5)
            assert (room.version, room.member_count, room.heat) == (3, 1, 30), room
            page = rooms.ListMembers(pb.ListMembersRequest(room_id="py-r1", limit=10), timeout=5)
            assert [m.user_id for m in page.members] == ["bob"] and page.next_after == "", page
            # bob reusing his join's id for a leave: a conflict (ids are per caller: carol's
            # py-c2 would be her own command).
            expect_code(lambda: rooms.LeaveRoom(pb.MemberRequest(command_id="py-c2", room_id="py-r1", user_id="bob"), timeout=5),
                        grpc.StatusCode.ALREADY_EXISTS)
            expect_code(lambda: rooms.GetRoom(pb.GetRoomRequest(room_id="nope"), timeout=5), grpc.StatusCode.NOT_FOUND)
            expect_code(lambda: rooms.GetRoom(pb.GetRoomRequest(room_id="bad id"), timeout=5),
                        grpc.StatusCode.INVALID_ARGUMENT, "room_id")
            left = rooms.LeaveRoom(pb.MemberRequest(command_id="py-c4", room_id="py-r1", user_id="bob"), timeout=5)
            assert left.applied and left.room_version == 4, left
            closed = rooms.CloseRoom(pb.CloseRoomRequest(command_id="py-c5", room_id="py-r1"), timeout=5)
            assert closed.room.status == pb.ROOM_STATUS_CLOSED, closed
            expect_code(lambda: rooms.JoinRoom(pb.MemberRequest(command_id="py-c6", room_id="py-r1", user_id="bob"), timeout=5),
                        grpc.StatusCode.FAILED_PRECONDITION)
    print("ok", flush=True)


if __name__ == "__main__":
    try:
        main()
    except AssertionError as failure:
        print(f"FAILED: {failure}", flush=True)
        sys.exit(1)
