//! Many nodes (SPEC §11.4): room-service processes sharing one database and one Redis.

mod quota;
