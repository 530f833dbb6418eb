#!/usr/bin/env python3
"""A gRPC reflection client that speaks only v1alpha, as many tools still do: Python's
official grpcio-reflection client lists the services of a running server and resolves
room.v1.RoomService into its file descriptor, sharing no code with the Rust side.

    python3 tests/peer/grpc_reflection_client.py HOST:PORT

Prints "ok" and exits 0 when every check holds; otherwise prints what failed and exits 1.
Needs `pip install grpcio grpcio-reflection` (scripts/test.sh installs them).
"""

import sys

import grpc
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

SERVICE = "room.v1.RoomService"
METHODS = {"CreateRoom", "JoinRoom", "LeaveRoom", "SendGift", "CloseRoom", "GetRoom"}


def main():
    address = sys.argv[1]
    with grpc.insecure_channel(address) as channel:
        grpc.channel_ready_future(channel).result(timeout=10)
        database = ProtoReflectionDescriptorDatabase(channel)
        services = set(database.get_services())
        assert SERVICE in services, f"{SERVICE} not listed over v1alpha: {sorted(services)}"
        assert "grpc.health.v1.Health" in services, sorted(services)
        service = DescriptorPool(database).FindServiceByName(SERVICE)
        assert service.file.name == "room/v1/room.proto", service.file.name
        methods = {m.name for m in service.methods}
        assert METHODS <= methods, f"methods resolved: {sorted(methods)}"
        create = service.methods_by_name["CreateRoom"]
        assert create.input_type.full_name == "room.v1.CreateRoomRequest", create.input_type.full_name
        assert "room_id" in create.input_type.fields_by_name, list(create.input_type.fields_by_name)
    print("ok")


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # noqa: BLE001 - any failure is reported and fails the run
        print(f"FAILED: {type(error).__name__}: {error}")
        sys.exit(1)
