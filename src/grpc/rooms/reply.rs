//! The answers of `room.v1.RoomService`: what the room API answers ([`CommandResponse`],
//! [`RoomSnapshot`], a page of members or events, the heartbeats' answer) as its messages.

use super::super::pb;
use crate::api::rooms::{EventsPage, HeartbeatsAnswer, MembersPage, ModerationPage, SeatsView};
use crate::domain::{MemberView, RankEntry, RoomSnapshot, RoomStatus, Seat, SeatMode};
use crate::room::{CommandResponse, Delivery, EventReceipt};

/// A command's answer.
pub(super) fn outcome(r: CommandResponse) -> pb::CommandOutcome {
    pb::CommandOutcome {
        applied: r.applied,
        room_version: r.room_version,
        replayed: r.replayed,
        room: r.room.map(room),
        events: r.events.into_iter().map(receipt).collect(),
    }
}

fn receipt(e: EventReceipt) -> pb::EventReceipt {
    let delivery = match e.delivery {
        Delivery::Delivered => pb::Delivery::Delivered,
        Delivery::Skipped => pb::Delivery::Skipped,
        Delivery::Pending => pb::Delivery::Pending,
    };
    pb::EventReceipt { event_id: e.event_id, event_type: e.event_type, delivery: delivery.into() }
}

/// A room's snapshot.
pub(super) fn room(s: RoomSnapshot) -> pb::Room {
    let status = match s.status {
        RoomStatus::Open => pb::RoomStatus::Open,
        RoomStatus::Closed => pb::RoomStatus::Closed,
    };
    pb::Room {
        room_id: s.room_id.as_str().to_owned(),
        owner_id: s.owner_id.as_str().to_owned(),
        title: s.title,
        status: status.into(),
        version: s.version,
        heat: s.heat,
        member_count: s.member_count,
        gift_rank: s.gift_rank.into_iter().map(rank).collect(),
        admins: s.admins.into_iter().map(|u| u.as_str().to_owned()).collect(),
        muted_all: s.muted_all,
        announcement: s.announcement,
        cover_url: s.cover_url,
        attributes: s
            .attributes
            .unwrap_or_default()
            .into_iter()
            .map(|(k, a)| (k, pb::AttributeValue { value: a.value, version: a.version }))
            .collect(),
        seat_mode: seat_mode(s.seat_mode),
        seats: s.seats.into_iter().map(seat).collect(),
    }
}

fn seat_mode(mode: SeatMode) -> String {
    mode.as_str().to_owned()
}

fn seat(seat: Seat) -> pb::Seat {
    pb::Seat {
        index: seat.index,
        user_id: seat.user_id.map(|u| u.as_str().to_owned()),
        locked: seat.locked,
        muted: seat.muted,
    }
}

/// The seats and pending requests.
pub(super) fn seats(view: SeatsView) -> pb::ListSeatsResponse {
    pb::ListSeatsResponse {
        seat_mode: seat_mode(view.seat_mode),
        seats: view.seats.into_iter().map(seat).collect(),
        pending: view
            .pending
            .into_iter()
            .map(|p| pb::PendingSeat {
                user_id: p.user_id.as_str().to_owned(),
                kind: p.kind.as_str().to_owned(),
                index: p.index,
                expires_at_ms: p.expires_at_ms,
                by: p.by,
            })
            .collect(),
    }
}

/// A page of mutes and bans.
pub(super) fn moderation(page: ModerationPage) -> pb::ListModerationResponse {
    pb::ListModerationResponse {
        entries: page
            .entries
            .into_iter()
            .map(|e| pb::ModerationEntry {
                user_id: e.user_id.as_str().to_owned(),
                kind: e.kind.as_str().to_owned(),
                until_ms: e.until_ms,
                reason: e.reason,
                by: e.by,
            })
            .collect(),
        next_after: page.next_after.map(|u| u.as_str().to_owned()).unwrap_or_default(),
    }
}

fn rank(r: RankEntry) -> pb::RankEntry {
    pb::RankEntry { user_id: r.user_id.as_str().to_owned(), total_value: r.total_value }
}

/// The heartbeats' answer.
pub(super) fn heartbeats(answer: HeartbeatsAnswer) -> pb::HeartbeatsResponse {
    pb::HeartbeatsResponse {
        alive: answer.alive as u64,
        unknown: answer.unknown.into_iter().map(|u| u.as_str().to_owned()).collect(),
    }
}

/// A page of members.
pub(super) fn members(page: MembersPage) -> pb::ListMembersResponse {
    pb::ListMembersResponse {
        members: page.members.into_iter().map(member).collect(),
        next_after: page.next_after.map(|u| u.as_str().to_owned()).unwrap_or_default(),
    }
}

fn member(m: MemberView) -> pb::Member {
    pb::Member { user_id: m.user_id.as_str().to_owned(), joined_at_ms: m.joined_at_ms }
}

/// A page of events.
pub(super) fn events(page: EventsPage) -> pb::ListEventsResponse {
    pb::ListEventsResponse {
        room_id: page.room_id.as_str().to_owned(),
        room_version: page.room_version,
        recovered: page.recovered,
        events: page.events.iter().map(|e| e.get().to_owned()).collect(),
        next_after: page.next_after,
    }
}
